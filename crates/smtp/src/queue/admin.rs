//! What the operator's commands (`stoa queue list | delete | hold | release`) do
//! to the queue directory, safely while a server delivers from it.
//!
//! - **list** takes no lock: each envelope is read whole (it is only ever
//!   replaced by a rename), and a message that appears or goes meanwhile (no
//!   envelope yet, or no message file any more) is left out, never an error.
//! - **delete**, **hold** and **release** take the message's lock
//!   ([`Queue::try_lock`]), waiting for an attempt in flight to end (within the
//!   caller's wait, else [`AdminError::Busy`]). A delivery attempt takes the same
//!   lock before it reads the envelope, so a message deleted or held is not
//!   attempted once the command has returned, and a deletion is never half done
//!   under an attempt. A deleted message gets no bounce (as Postfix's
//!   `postsuper -d`).
//! - **hold** leaves an empty `ID.hold` beside the message: a marker, not a
//!   rewrite of the envelope, so the command may run as root beside a server
//!   running as its own user without leaving it a file it cannot read. The
//!   delivery thread skips a held message and looks at it again after the minimal
//!   backoff, or at a flush. The queue lifetime keeps counting from arrival while
//!   a message is held (as Postfix's does): a released message past its lifetime
//!   gets one more attempt, and what that attempt does not deliver bounces.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use super::{Envelope, FILE_MODE, MessageLock, Queue, Recipient, RecipientState};

/// The length of a queue id (`new_id`).
const ID_LEN: usize = 21;

/// Why an operator's command failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// Not a queue id at all.
    #[error("{0:?} is not a queue id (21 hexadecimal digits, as `stoa queue list` shows them)")]
    BadId(String),
    /// A well-formed id of no queued message (never queued, delivered, deleted).
    #[error("no message {0} in the queue")]
    NotQueued(String),
    /// `release` of a message that is not on hold.
    #[error("message {0} is not on hold")]
    NotHeld(String),
    /// An attempt held the message's lock for longer than the command waits.
    #[error(
        "message {id} is being delivered now (still after {}s); try again once the attempt ends",
        waited.as_secs()
    )]
    Busy {
        /// The message.
        id: String,
        /// How long the command waited.
        waited: Duration,
    },
    /// A file operation failed.
    #[error("cannot {what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
}

/// One queued message as `stoa queue list` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Listing {
    /// The queue id.
    pub id: String,
    /// Bytes of the message file.
    pub size: u64,
    /// When it was accepted (Unix seconds).
    pub arrival: u64,
    /// The reverse-path; empty for the null sender.
    pub sender: String,
    /// On hold: not attempted until released.
    pub held: bool,
    /// Attempts that left recipients pending.
    pub attempts: u32,
    /// Earliest time of the next attempt (Unix seconds).
    pub next_try: u64,
    /// The recipients still to deliver, each with its last error.
    pub recipients: Vec<Recipient>,
}

/// `text` as a queue id (upper-cased), or [`AdminError::BadId`].
pub fn parse_id(text: &str) -> Result<String, AdminError> {
    if text.len() == ID_LEN && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(text.to_ascii_uppercase())
    } else {
        Err(AdminError::BadId(text.to_owned()))
    }
}

impl Queue {
    /// The ids of the queued messages (those with an envelope), in arrival order;
    /// none when the directory does not exist. Blocks.
    pub fn ids(&self) -> io::Result<Vec<String>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let name = entry?.file_name();
            if let Some(id) = name.to_str().and_then(|n| n.strip_suffix(".env"))
                && parse_id(id).is_ok_and(|parsed| parsed == id)
            {
                ids.push(id.to_owned());
            }
        }
        ids.sort();
        Ok(ids)
    }

    /// Every queued message, in arrival order, without taking a lock (see the
    /// module docs). Blocks.
    pub fn list(&self) -> io::Result<Vec<Listing>> {
        let mut listed = Vec::new();
        for id in self.ids()? {
            // Gone, or not readable as an envelope: not (or no longer) queued.
            let Ok(envelope) = self.read_envelope(&id) else {
                continue;
            };
            let Ok(meta) = std::fs::metadata(self.path(&id, "msg")) else {
                continue;
            };
            listed.push(listing(envelope, meta.len(), self.is_held(&id)));
        }
        listed.sort_by(|a, b| (a.arrival, &a.id).cmp(&(b.arrival, &b.id)));
        Ok(listed)
    }

    /// Removes message `id` (no bounce), waiting up to `wait` for an attempt in
    /// flight. Blocks.
    pub fn delete(&self, id: &str, wait: Duration) -> Result<(), AdminError> {
        let _lock = self.lock_queued(id, wait)?;
        // The envelope first: without it the message is not queued.
        for ext in ["env", "msg", "hold"] {
            let path = self.path(id, ext);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound && ext != "env" => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    return Err(AdminError::NotQueued(id.to_owned()));
                }
                Err(source) => {
                    let what = "remove";
                    return Err(AdminError::Io { what, path, source });
                }
            }
        }
        self.sync(id)
    }

    /// Puts message `id` on hold (already held is fine), waiting up to `wait`
    /// for an attempt in flight. Blocks.
    pub fn hold(&self, id: &str, wait: Duration) -> Result<(), AdminError> {
        let _lock = self.lock_queued(id, wait)?;
        let path = self.path(id, "hold");
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(FILE_MODE)
            .open(&path)
            .map_err(|source| AdminError::Io {
                what: "create",
                path,
                source,
            })?;
        self.sync(id)
    }

    /// Releases message `id` from hold, waiting up to `wait` for the lock.
    /// Blocks.
    pub fn release(&self, id: &str, wait: Duration) -> Result<(), AdminError> {
        let _lock = self.lock_queued(id, wait)?;
        let path = self.path(id, "hold");
        match std::fs::remove_file(&path) {
            Ok(()) => self.sync(id),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(AdminError::NotHeld(id.to_owned()))
            }
            Err(source) => Err(AdminError::Io {
                what: "remove",
                path,
                source,
            }),
        }
    }

    /// Message `id`'s lock, waiting up to `wait`, once it is known to be queued.
    fn lock_queued(&self, id: &str, wait: Duration) -> Result<MessageLock, AdminError> {
        let not_queued = || AdminError::NotQueued(id.to_owned());
        let lock = match self.try_lock(id) {
            Ok(Some(lock)) => lock,
            Ok(None) => self.wait_lock(id, wait)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(not_queued()),
            Err(source) => {
                let (what, path) = ("lock", self.path(id, "msg"));
                return Err(AdminError::Io { what, path, source });
            }
        };
        // The attempt that held the lock may have finished the message.
        if !self.path(id, "env").exists() {
            return Err(not_queued());
        }
        Ok(lock)
    }

    /// Waits (blocking `flock` on a thread of its own, bounded by `wait`) for
    /// message `id`'s lock.
    fn wait_lock(&self, id: &str, wait: Duration) -> Result<MessageLock, AdminError> {
        let path = self.path(id, "msg");
        let io_error = |source| AdminError::Io {
            what: "lock",
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => AdminError::NotQueued(id.to_owned()),
            _ => io_error(e),
        })?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let locked = rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive);
            let _ = tx.send(locked.map(|()| MessageLock { _file: file }));
        });
        match rx.recv_timeout(wait) {
            Ok(Ok(lock)) => Ok(lock),
            Ok(Err(e)) => Err(io_error(e.into())),
            Err(_) => Err(AdminError::Busy {
                id: id.to_owned(),
                waited: wait,
            }),
        }
    }

    fn sync(&self, id: &str) -> Result<(), AdminError> {
        self.sync_dir().map_err(|source| AdminError::Io {
            what: "sync the queue directory after changing",
            path: self.path(id, "env"),
            source,
        })
    }
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` in UTC, as the listing prints times.
pub fn utc_time(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (year, month, day) = crate::headers::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// What the listing shows of `envelope`: its pending recipients only.
fn listing(envelope: Envelope, size: u64, held: bool) -> Listing {
    Listing {
        id: envelope.id,
        size,
        arrival: envelope.arrival,
        sender: envelope.sender,
        held,
        attempts: envelope.attempts,
        next_try: envelope.next_try,
        recipients: (envelope.recipients.into_iter())
            .filter(|r| r.state == RecipientState::Pending)
            .collect(),
    }
}
