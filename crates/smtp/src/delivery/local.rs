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
    /// Stores `message` in each user's mailbox.
    fn deliver(&self, message: &[u8], to: &[User]) -> Vec<Result<(), DeliveryError>>;
}

/// The local store: Stoa's mail store ([`stoa_mailstore::MailStore`]), one
/// stored copy hard-linked into every recipient's mailbox, fsynced before
/// `deliver` returns.
#[derive(Debug)]
pub struct StoreDelivery {
    store: Arc<stoa_mailstore::MailStore>,
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
        StoreDelivery { store }
    }

    /// The store, for readers (POP3, export, tests).
    pub fn store(&self) -> &stoa_mailstore::MailStore {
        &self.store
    }
}

impl LocalDelivery for StoreDelivery {
    fn deliver(&self, message: &[u8], to: &[User]) -> Vec<Result<(), DeliveryError>> {
        let ids: Vec<_> = to.iter().map(|u| u.mailbox).collect();
        // One copy for all: the store links it into every mailbox or, on an
        // error, into none, so every user shares the outcome.
        let outcome = match self.store.deliver(message, &ids) {
            Ok(_) => Ok(()),
            Err(e) => {
                tracing::warn!("local delivery to {} mailboxes failed: {e}", ids.len());
                Err(DeliveryError::Temporary(format!(
                    "cannot store the message: {e}"
                )))
            }
        };
        vec![outcome; to.len()]
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
        let results = store.deliver(b"Subject: hi\r\n\r\nbody\r\n", &users);
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        for user in &users {
            let session = store.store().open_mailbox(user.mailbox).expect("mailbox");
            assert_eq!(session.messages().len(), 1);
            assert_eq!(
                session.read(0).expect("read"),
                b"Subject: hi\r\n\r\nbody\r\n"
            );
        }
    }
}
