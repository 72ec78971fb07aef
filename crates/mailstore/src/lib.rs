//! The durable mail store of Stoa's mail server: delivery into mailboxes, POP3
//! sessions over them, IMAP's folders, flags and UIDs, and the exchange of whole
//! mailboxes with other servers as Maildir++ trees. It owns the on-disk format;
//! nothing else writes mail files.
//!
//! # Layout
//!
//! One file per message, Maildir style, under the store directory (the server's
//! `MAIL_DIR/store/`):
//!
//! ```text
//! store/
//!   tmp/                      messages being written, one file each
//!   mailboxes/
//!     cc1/                    fan-out: 4,096 directories, named by a hash of the id
//!       1/                    mailbox 1 = its INBOX: the message files, and
//!         1767225600.M000042P812Q7.mx1,S=2048
//!         .index              INBOX's IMAP index (UIDs, flags, modseqs), once IMAP opened it
//!         .folders            the folder list and subscriptions (IMAP, at first login)
//!         .lock               serialises changes to the folder list
//!         .f/3/               folder 3 (say "Sent"): its message files and its .index
//! ```
//!
//! A message file holds the message exactly as received (CRLF line endings, headers,
//! no dot-stuffing) and is never modified. Its name is a Maildir unique name
//! (`SECONDS.MMICROSPPIDQSEQ.HOST`, which is also the POP3 uid, [`MessageUid`])
//! followed by Maildir++'s `,S=SIZE`, so a listing needs no `stat`. A message for
//! several local recipients is stored once, hard-linked into each mailbox. Mailbox
//! directories are created at their first delivery or session; the fan-out keeps
//! every directory small (about 370 entries at 1.5 M mailboxes). A mailbox directory
//! is not itself a Maildir (no `tmp/new/cur`, which would cost three directory
//! blocks per mailbox); [`MailStore::export_maildir`] writes a standard one.
//!
//! # Exchange with other servers (Maildir++)
//!
//! [`MailStore::export_maildir`] writes a whole mailbox as a Maildir++ tree in
//! Dovecot's layout: INBOX at the root, each folder in `.NAME` (levels joined by
//! `.`, in modified UTF-7, a `.` inside a level as `&AC4-`), each message in `cur/`
//! as `UNIQUE,S=SIZE,W=WIRE:2,FLAGS` with LF line ends and its internal date as
//! modification time, keywords as the letters of the folder's `dovecot-keywords`,
//! the `subscriptions`, and `stoa-special-use` (no `dovecot-uidlist`). Run again,
//! it adds only the messages not there yet. [`MailStore::import_maildir`] reads such
//! a tree (Dovecot's, mbsync's, or an export) into a mailbox: the tree is checked
//! whole before anything is written, and a message keeps its Maildir unique part as
//! its name in the store, so that importing again skips what is there and an
//! export of the imported mailbox gives the same tree back. The mapping of names and
//! flags is [`maildirpp`].
//!
//! POP3 sees INBOX's message files only (dot files and directories are not
//! messages). IMAP sees each folder through its index ([`Folder`], module docs in
//! `folder.rs`, format in `index.rs`): an append-only log of UID assignments, flag
//! changes and expunges, read incrementally by every session and compacted when it
//! grows. Deliveries never touch an index: the next IMAP refresh finds the new
//! file and gives it the next UID, and a file POP3 deleted is expunged the same way,
//! so the two protocols see one mailbox. A mailbox made before IMAP existed opens
//! with its messages in INBOX, in delivery order: that is the whole migration.
//! Folder names live only in `.folders` ([`FolderList`]), so a rename rewrites that
//! one file.
//!
//! # Durability (fsync discipline)
//!
//! - **Delivery** ([`MailStore::deliver`]): the message is written to `tmp/` and
//!   `fdatasync`ed; then, for each recipient, hard-linked into the mailbox directory
//!   and that directory fsynced (a mailbox or fan-out directory created on the way is
//!   made durable by fsyncing its parent first); then the temporary name is removed.
//!   Only then does `deliver` return: the SMTP server may answer 250. On any error
//!   the links already made are removed again and the error returned: no mailbox
//!   shows the message (a crash during that roll-back, or during the fan-out, can
//!   leave it in some mailboxes: the client was not told 250 and will send again, and
//!   a duplicate is preferred to a loss, RFC 5321 §6.1).
//! - **Crash recovery** ([`MailStore::open`]): a crash leaves at most a file in
//!   `tmp/`, never a partial message in a mailbox (a name only appears in a mailbox
//!   by `link` of a complete, synced file). Opening the store removes files in `tmp/`
//!   older than [`Options::tmp_grace`].
//! - **Deletion** ([`MailboxSession::commit_deletes`], POP3's UPDATE state): each
//!   message is one `unlink`, atomic: after a crash a marked message is either there,
//!   whole, or gone. The directory is fsynced once at the end. Survivors are never
//!   touched.
//! - After an fsync error the data is treated as lost (the kernel may have dropped the
//!   dirty pages): the operation fails, and is never retried on the same file.
//!
//! # Sessions and locking
//!
//! [`MailStore::open_mailbox`] takes an exclusive `flock` on the mailbox directory
//! (non-blocking: a second session, in this process or another, gets
//! [`StoreError::Locked`]) and lists the mailbox once: the session's numbering is that
//! snapshot. Deliveries do not take the lock (they only add names), so mail arriving
//! during a session is simply not in its listing, and its commit removes only names
//! from the listing. Dropping the session releases the lock.
//!
//! # Why files and not an embedded database
//!
//! Measured at 100,000 mailboxes with the benchmark's mix (`examples/store_load.rs`,
//! figures in `bench-results/2026-11-30-vm-mailstore-load/`): against segment files indexed in
//! redb, this layout loads faster with concurrent deliveries (93 s against 166 s),
//! delivers to one recipient in half the time and to ten in 1.3 times the time, and
//! takes 11 % more disk; in exchange it needs no compactor, no index to repair, and
//! every mailbox can be inspected, backed up and exported with ordinary tools.
//!
//! # What it does not do
//!
//! No message parsing or header rewriting (the SMTP server adds `Received:`), no
//! quotas, no IMAP protocol (the `stoa-imap` server speaks it over [`Folder`]), no
//! cache of POP3 listings (a listing is one directory read), no removal of a deleted user's
//! mailbox, and a single delivering process per store (the server); other processes
//! (the CLI's export and import) may read, append and lock concurrently.

mod deliver;
mod error;
mod export;
mod folder;
#[cfg(test)]
mod folder_tests;
mod folders;
mod fsutil;
mod import;
mod index;
mod layout;
pub mod maildirpp;
mod session;

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

pub use stoa_directory::MailboxId;

pub use error::{Result, StoreError};
pub use export::ExportReport;
pub use folder::{FlagOp, Folder, ReleasedFolder, StoreOutcome};
pub use folders::{
    DELIMITER, FolderInfo, FolderList, MAX_FOLDER_NAME, MAX_FOLDERS, SpecialUse, canonical,
};
pub use import::{ImportReport, MAX_IMPORT_MESSAGE};
pub use index::{IndexError, IndexState, IndexedMessage, normalize_flags, valid_flag};
pub use layout::MessageUid;
pub use session::{MailboxSession, MessageInfo};

/// Called with a mailbox's id after a change to it (a delivery, or a change logged
/// in one of its folders), so that a server can wake its sessions on that mailbox.
pub type Observer = Arc<dyn Fn(MailboxId) + Send + Sync>;

use fsutil::{Modes, create_dir_all, ensure_dir, list_dir};
use layout::{MAILBOXES_DIR, TMP_DIR, fanout_dir, mailbox_dir};

/// How old a file in `tmp/` must be before [`MailStore::open`] removes it. A delivery
/// keeps its temporary file for milliseconds; an hour leaves room for a stalled disk
/// and for a second process opening the store (the CLI's export) while the server
/// delivers, without keeping a crash's leftovers for long.
pub const DEFAULT_TMP_GRACE: Duration = Duration::from_secs(60 * 60);

/// The permissions of the message files the store creates unless told:
/// readable and writable by their owner only (mail is private).
pub const DEFAULT_FILE_MODE: u32 = 0o600;

/// The permissions of the directories the store creates unless told (the store,
/// its `tmp/`, the fan-out and mailbox directories, an export's Maildir).
pub const DEFAULT_DIR_MODE: u32 = 0o700;

/// Settings of a [`MailStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Files in `tmp/` older than this are a crashed delivery's leftovers and are
    /// removed at open. Default [`DEFAULT_TMP_GRACE`].
    pub tmp_grace: Duration,
    /// Permission bits of every message file created (delivered or exported),
    /// before the process umask. Default [`DEFAULT_FILE_MODE`]; `0o640` lets the
    /// owning group read mail (a backup or indexing group). Existing files are
    /// left as they are.
    pub file_mode: u32,
    /// Permission bits of every directory created, before the process umask.
    /// Default [`DEFAULT_DIR_MODE`].
    pub dir_mode: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tmp_grace: DEFAULT_TMP_GRACE,
            file_mode: DEFAULT_FILE_MODE,
            dir_mode: DEFAULT_DIR_MODE,
        }
    }
}

/// What [`MailStore::open`] cleaned up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Stale temporary files removed (deliveries interrupted by a crash).
    pub stale_tmp_removed: usize,
}

/// A mailbox's message count and total size, as POP3's STAT reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MailboxStats {
    /// Number of messages.
    pub count: usize,
    /// Sum of their sizes in bytes (as stored: CRLF line endings, not dot-stuffed).
    pub size: u64,
}

/// The mail store (see the crate docs). Synchronous and `Sync`: the servers share one
/// and call it from blocking threads.
#[derive(Debug)]
pub struct MailStore {
    root: PathBuf,
    tmp: PathBuf,
    mailboxes: PathBuf,
    host: String,
    /// Permission bits of new files and directories ([`Options::file_mode`],
    /// [`Options::dir_mode`]).
    modes: Modes,
    /// Held while creating a mailbox directory and fsyncing its parent (see
    /// [`MailStore::mailbox_dir_durable`]).
    create: Mutex<()>,
    recovery: Recovery,
    /// Told of every change (see [`MailStore::set_observer`]).
    observer: ObserverCell,
}

/// The observer slot, printable for `MailStore`'s `Debug`.
#[derive(Default)]
struct ObserverCell(Mutex<Option<Observer>>);

impl ObserverCell {
    fn get(&self) -> Option<Observer> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl std::fmt::Debug for ObserverCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.get().is_some() { "set" } else { "none" })
    }
}

impl MailStore {
    /// Opens the store in `dir`, creating the layout if needed, and removes stale
    /// temporary files (see [`Options::tmp_grace`]).
    pub fn open(dir: impl AsRef<Path>, options: Options) -> Result<MailStore> {
        let root = dir.as_ref().to_path_buf();
        let modes = Modes {
            file: options.file_mode,
            dir: options.dir_mode,
        };
        if let Some(parent) = root.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_dir_all(parent, modes.dir)?;
        }
        ensure_dir(&root, modes.dir)?;
        let tmp = root.join(TMP_DIR);
        let mailboxes = root.join(MAILBOXES_DIR);
        ensure_dir(&tmp, modes.dir)?;
        ensure_dir(&mailboxes, modes.dir)?;
        let host = rustix::system::uname()
            .nodename()
            .to_str()
            .map(layout::host_part)
            .unwrap_or_else(|_| layout::host_part(""));
        let stale_tmp_removed = remove_stale(&tmp, options.tmp_grace)?;
        Ok(MailStore {
            root,
            tmp,
            mailboxes,
            host,
            modes,
            create: Mutex::new(()),
            recovery: Recovery { stale_tmp_removed },
            observer: ObserverCell::default(),
        })
    }

    /// Sets the function told of every change to a mailbox, replacing the one
    /// before (a reload's new IMAP server takes over from the old one).
    /// Deliveries and folder changes made through this store call it; changes by
    /// other processes are seen at the next [`Folder::refresh`].
    pub fn set_observer(&self, observer: Observer) {
        *self
            .observer
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(observer);
    }

    pub(crate) fn notify(&self, id: MailboxId) {
        if let Some(observer) = self.observer.get() {
            observer(id);
        }
    }

    /// The store directory.
    pub fn path(&self) -> &Path {
        &self.root
    }

    /// What opening the store cleaned up.
    pub fn recovery(&self) -> Recovery {
        self.recovery
    }

    /// The directory of mailbox `id` (it may not exist yet). For tools and tests;
    /// the servers go through the store's methods.
    pub fn mailbox_path(&self, id: MailboxId) -> PathBuf {
        mailbox_dir(&self.mailboxes, id)
    }

    /// The message count and total size of mailbox `id`: one directory read, no lock
    /// (a concurrent session's commit may be half applied).
    pub fn mailbox_stats(&self, id: MailboxId) -> Result<MailboxStats> {
        let entries = list_dir(&self.mailbox_path(id))?;
        Ok(MailboxStats {
            count: entries.len(),
            size: entries.iter().map(|e| e.size).sum(),
        })
    }

    /// The mailbox's directory, created durably if missing. Returns once the
    /// directory's name is durable, even if another thread created it: a delivery
    /// that finds the directory made by a concurrent one waits for that one's fsync
    /// (the creator holds `create` from `mkdir` to fsync).
    fn mailbox_dir_durable(&self, id: MailboxId) -> Result<PathBuf> {
        let dir = self.mailbox_path(id);
        if dir.is_dir() {
            drop(self.create.lock().unwrap_or_else(PoisonError::into_inner));
            return Ok(dir);
        }
        let _creating = self.create.lock().unwrap_or_else(PoisonError::into_inner);
        ensure_dir(&fanout_dir(&self.mailboxes, id), self.modes.dir)?;
        ensure_dir(&dir, self.modes.dir)?;
        Ok(dir)
    }
}

/// Removes the files in `tmp` last modified at least `grace` ago; returns how many.
fn remove_stale(tmp: &Path, grace: Duration) -> Result<usize> {
    let now = SystemTime::now();
    let mut removed = 0;
    let read = fs::read_dir(tmp).map_err(|e| StoreError::io("read", tmp, e))?;
    for entry in read {
        let entry = entry.map_err(|e| StoreError::io("read", tmp, e))?;
        let path = entry.path();
        let modified = match entry.metadata().and_then(|m| m.modified()) {
            Ok(modified) => modified,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(StoreError::io("stat", path, e)),
        };
        let age = now.duration_since(modified).unwrap_or_default();
        if age < grace {
            continue;
        }
        match fs::remove_file(&path) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io("unlink", path, e)),
        }
    }
    Ok(removed)
}
