//! Local delivery: the [`LocalDelivery`] trait the queue delivers through, and
//! [`MaildirDelivery`], the interim store behind it.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

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

/// The interim local store: one Maildir per mailbox, `ROOT/MAILBOX_ID/{tmp,new,cur}`.
///
/// It exists so the server works end to end (and tests can read delivered mail)
/// until the real mail store lands and implements [`LocalDelivery`]. Each delivery
/// writes the message to `tmp/`, fsyncs it, renames it into `new/` and fsyncs
/// `new/`: the classic Maildir protocol with the fsyncs Postfix's `local` does. The
/// file holds the message as received, CRLF line ends included. Mailboxes are named
/// by [`stoa_directory::MailboxId`], never by address, so a renamed or re-created
/// user cannot see someone else's mail.
#[derive(Debug)]
pub struct MaildirDelivery {
    root: PathBuf,
    hostname: String,
}

impl MaildirDelivery {
    /// A store under `root` (usually `MAIL_DIR/maildir`); `hostname` goes into file
    /// names.
    pub fn new(root: &Path, hostname: &str) -> MaildirDelivery {
        let hostname = hostname
            .chars()
            .map(|c| if c == '/' || c == ':' { '_' } else { c })
            .collect();
        MaildirDelivery {
            root: root.to_owned(),
            hostname,
        }
    }

    /// The Maildir of `user`.
    pub fn maildir(&self, user: &User) -> PathBuf {
        self.root.join(user.mailbox.to_string())
    }

    fn deliver_one(&self, message: &[u8], user: &User) -> io::Result<()> {
        let maildir = self.maildir(user);
        let (tmp, new) = (maildir.join("tmp"), maildir.join("new"));
        if !new.is_dir() {
            for sub in ["tmp", "new", "cur"] {
                std::fs::create_dir_all(maildir.join(sub))?;
            }
            File::open(&maildir)?.sync_all()?;
            File::open(&self.root)?.sync_all()?;
        }
        let name = unique_name(&self.hostname);
        let tmp_path = tmp.join(&name);
        let result = (|| {
            let mut file = File::create_new(&tmp_path)?;
            file.write_all(message)?;
            file.sync_data()?;
            std::fs::rename(&tmp_path, new.join(&name))?;
            File::open(&new)?.sync_all()
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp_path);
        }
        result
    }
}

impl LocalDelivery for MaildirDelivery {
    fn deliver(&self, message: &[u8], to: &[User]) -> Vec<Result<(), DeliveryError>> {
        to.iter()
            .map(|user| {
                self.deliver_one(message, user).map_err(|e| {
                    tracing::warn!("maildir delivery to {} failed: {e}", user.address);
                    DeliveryError::Temporary(format!("cannot store the message: {e}"))
                })
            })
            .collect()
    }
}

/// A Maildir file name: `SECONDS.MmicrosPpidQcounter.HOST` (the modern
/// qmail/Dovecot form), unique within the host.
fn unique_name(hostname: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "{}.M{}P{}Q{}.{hostname}",
        now.as_secs(),
        now.subsec_micros(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use stoa_directory::MailboxId;

    use super::*;

    #[test]
    fn delivers_into_new() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let store = MaildirDelivery::new(tmp.path(), "mx/a:b");
        let users = [1, 2].map(|n| User {
            address: format!("u{n}@x"),
            mailbox: MailboxId(n),
            mail_host: None,
        });
        let results = store.deliver(b"Subject: hi\r\n\r\nbody\r\n", &users);
        assert!(results.iter().all(Result::is_ok));
        for user in &users {
            let new = store.maildir(user).join("new");
            let files: Vec<_> = std::fs::read_dir(&new).expect("new").collect();
            assert_eq!(files.len(), 1);
            let path = files[0].as_ref().expect("entry").path();
            assert!(path.to_string_lossy().ends_with(".mx_a_b"));
            assert_eq!(
                std::fs::read(path).expect("read"),
                b"Subject: hi\r\n\r\nbody\r\n"
            );
            assert_eq!(
                std::fs::read_dir(store.maildir(user).join("tmp"))
                    .expect("tmp")
                    .count(),
                0
            );
        }
    }
}
