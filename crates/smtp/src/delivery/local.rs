//! Local delivery: the [`LocalDelivery`] trait the queue delivers through, and
//! [`StoreDelivery`], Stoa's mail store behind it.

use std::path::Path;
use std::sync::Arc;

use stoa_directory::User;

/// Why a local delivery failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DeliveryError {
    /// Worth retrying later (disk full, I/O error, mailbox locked).
    #[error("temporary failure: {0}")]
    Temporary(String),
    /// Never going to work (no such mailbox, over a hard quota): the sender gets a
    /// bounce.
    #[error("permanent failure: {0}")]
    Permanent(String),
}

/// Where the queue puts mail for local users.
///
/// `deliver` gets one message and every local user still waiting for it, so that a
/// store can keep one copy for many recipients; it returns one result per user, in
/// the same order, so that one full mailbox does not make the others receive the
/// message twice. It is called on a blocking thread, never on an event loop, and
/// must have made the message durable (fsynced) before it returns `Ok` for a user:
/// the queue forgets the recipient right after.
pub trait LocalDelivery: Send + Sync + 'static {
    /// Stores `message`, from the envelope sender `sender` (empty for the null
    /// sender), in each user's mailbox.
    fn deliver(&self, sender: &str, message: &[u8], to: &[User]) -> Vec<Result<(), DeliveryError>>;
}

/// The local store: Stoa's mail store ([`stoa_mailstore::MailStore`]), one
/// stored copy hard-linked into every recipient's mailbox, fsynced before
/// `deliver` returns.
#[derive(Debug)]
pub struct StoreDelivery {
    store: Arc<stoa_mailstore::MailStore>,
    /// Each recipient's copy starts with `Delivered-To:` its address.
    delivered_to: bool,
}

impl StoreDelivery {
    /// Opens (or creates) the store under `root` (usually `MAIL_DIR/store`).
    pub fn open(root: &Path) -> Result<StoreDelivery, stoa_mailstore::StoreError> {
        let store = stoa_mailstore::MailStore::open(root, stoa_mailstore::Options::default())?;
        Ok(StoreDelivery::new(Arc::new(store)))
    }

    /// Delivers into `store`, which other servers of the process (POP3) share: one
    /// store per process, so that its mailbox creation is serialised in one place.
    pub fn new(store: Arc<stoa_mailstore::MailStore>) -> StoreDelivery {
        StoreDelivery {
            store,
            delivered_to: false,
        }
    }

    /// Writes `Delivered-To:` with each recipient's address after
    /// `Return-Path:`, as Postfix's local(8) and virtual(8) do. It differs per
    /// recipient, so a message for several users is stored once per user
    /// instead of once for all (`[smtp] delivered_to`, off by default).
    pub fn with_delivered_to(mut self, on: bool) -> StoreDelivery {
        self.delivered_to = on;
        self
    }

    /// The store, for readers (POP3, export, tests).
    pub fn store(&self) -> &stoa_mailstore::MailStore {
        &self.store
    }

    /// Stores `head` then `message` once, linked into every mailbox of `ids`
    /// or, on an error, into none, so they all share the outcome.
    fn store_once(
        &self,
        head: &[u8],
        message: &[u8],
        ids: &[stoa_directory::MailboxId],
    ) -> Result<(), DeliveryError> {
        match self.store.deliver_with(head, message, ids) {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::warn!("local delivery to {} mailboxes failed: {e}", ids.len());
                Err(DeliveryError::Temporary(format!(
                    "cannot store the message: {e}"
                )))
            }
        }
    }
}

impl LocalDelivery for StoreDelivery {
    /// The final delivery writes `Return-Path:` with the envelope sender (RFC
    /// 5321 §4.4), replacing any the message carried, and `Delivered-To:` when
    /// asked ([`StoreDelivery::with_delivered_to`]).
    fn deliver(&self, sender: &str, message: &[u8], to: &[User]) -> Vec<Result<(), DeliveryError>> {
        let return_path = crate::headers::return_path(sender);
        let stripped = crate::headers::without_field(message, b"return-path");
        let message = stripped.as_deref().unwrap_or(message);
        if self.delivered_to {
            return (to.iter())
                .map(|user| {
                    let head = format!(
                        "{return_path}{}",
                        crate::headers::delivered_to(&user.address)
                    );
                    self.store_once(head.as_bytes(), message, &[user.mailbox])
                })
                .collect();
        }
        let ids: Vec<_> = to.iter().map(|u| u.mailbox).collect();
        vec![self.store_once(return_path.as_bytes(), message, &ids); to.len()]
    }
}

#[cfg(test)]
mod tests {
    use stoa_directory::MailboxId;

    use super::*;

    #[test]
    fn one_copy_for_every_recipient() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = StoreDelivery::open(&tmp.path().join("store")).expect("open");
        let users = [1, 2].map(|n| User {
            address: format!("u{n}@x"),
            mailbox: MailboxId(n),
            mail_host: None,
        });
        // A Return-Path the message carried is replaced by the envelope's.
        let message = b"Return-Path: <forged@x>\r\nSubject: hi\r\n\r\nbody\r\n";
        let results = store.deliver("ann@ext.test", message, &users);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        for user in &users {
            let session = store.store().open_mailbox(user.mailbox).expect("mailbox");
            assert_eq!(session.messages().len(), 1);
            assert_eq!(
                session.read(0).expect("read"),
                b"Return-Path: <ann@ext.test>\r\nSubject: hi\r\n\r\nbody\r\n"
            );
        }
    }

    #[test]
    fn delivered_to_names_each_recipient_in_its_own_copy() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = StoreDelivery::open(&tmp.path().join("store"))
            .expect("open")
            .with_delivered_to(true);
        let users = [1, 2].map(|n| User {
            address: format!("u{n}@x"),
            mailbox: MailboxId(n),
            mail_host: None,
        });
        let results = store.deliver("", b"Subject: hi\r\n\r\nbody\r\n", &users);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        for (n, user) in [1, 2].iter().zip(&users) {
            let session = store.store().open_mailbox(user.mailbox).expect("mailbox");
            let expected =
                format!("Return-Path: <>\r\nDelivered-To: u{n}@x\r\nSubject: hi\r\n\r\nbody\r\n");
            assert_eq!(session.read(0).expect("read"), expected.as_bytes());
        }
    }
}
