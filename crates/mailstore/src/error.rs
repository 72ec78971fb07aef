//! The store's error type.

use std::io;
use std::path::PathBuf;

use stoa_directory::MailboxId;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A file system operation failed (disk full, I/O error, permissions…). After a
    /// failed delivery nothing of the message is visible in any mailbox.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done: `write`, `fsync`, `link`, `unlink`, …
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The system error.
        #[source]
        source: io::Error,
    },
    /// Another session, in this process or another, holds the mailbox (POP3
    /// `-ERR [IN-USE]`).
    #[error("mailbox {0} is in use by another session")]
    Locked(MailboxId),
    /// A delivery with an empty recipient list.
    #[error("delivery without recipients")]
    NoRecipients,
    /// A message index outside the session's listing.
    #[error("no message {index} in this session (it lists {count})")]
    NoSuchMessage {
        /// The 0-based index asked for.
        index: usize,
        /// How many messages the session lists.
        count: usize,
    },
    /// A stored message is not what its name says (its size differs): the file was
    /// changed behind the store's back.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The message file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// CREATE or RENAME to a folder name that exists.
    #[error("folder {0:?} already exists")]
    FolderExists(String),
    /// No folder of that name.
    #[error("no folder {0:?}")]
    NoSuchFolder(String),
    /// A folder name the store does not take.
    #[error("bad folder name {name:?}: {reason}")]
    BadFolderName {
        /// The name.
        name: String,
        /// Why.
        reason: String,
    },
    /// DELETE of a folder with folders below it.
    #[error("folder {0:?} has folders below it: delete them first")]
    HasChildren(String),
    /// The mailbox holds as many folders as it may.
    #[error("a mailbox holds at most {0} folders")]
    TooManyFolders(usize),
    /// No message with that UID in the folder (expunged meanwhile).
    #[error("no message with UID {0}")]
    NoSuchUid(u32),
    /// A flag or keyword the store does not take.
    #[error("bad flag {0:?}")]
    BadFlag(String),
    /// The export target already holds a message of the same name, or an import
    /// finds its message's name taken in the folder (the same import running twice
    /// at once).
    #[error("{0} already exists")]
    Exists(PathBuf),
    /// An import's input is not a Maildir++ tree the store can take (nothing of it
    /// was imported).
    #[error("{path}: {reason}")]
    BadMaildir {
        /// The file or directory at fault.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// An import failed part way: the messages before it are in the store, and
    /// running the import again goes on where it stopped (it skips what it has).
    #[error("import stopped after {imported} messages (run it again to go on): {source}")]
    ImportStopped {
        /// Messages imported before the failure.
        imported: usize,
        /// The failure.
        #[source]
        source: Box<StoreError>,
    },
}

impl StoreError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> StoreError {
        StoreError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// The system error behind an [`StoreError::Io`], if that is what this is (for
    /// example to tell `ENOSPC` from `EIO`).
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            StoreError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// `Result` with this crate's [`StoreError`].
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
