//! A POP3 session's view of one mailbox: exclusive lock, snapshot listing, reads,
//! deletions applied at commit.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use stoa_directory::MailboxId;

use crate::MailStore;
use crate::error::{Result, StoreError};
use crate::fsutil::list_dir;
use crate::layout::MessageUid;

/// One message of a session's listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageInfo {
    /// The POP3 uid (UIDL): stable across sessions and restarts.
    pub uid: MessageUid,
    /// Size in bytes: exactly what [`MailboxSession::read`] returns (the stored CRLF
    /// message, before POP3's byte-stuffing).
    pub size: u64,
}

/// An open mailbox, locked against other sessions until dropped.
///
/// The listing is taken once, at open; message indices are 0-based positions in
/// [`MailboxSession::messages`] (POP3 message number − 1).
#[derive(Debug)]
pub struct MailboxSession {
    id: MailboxId,
    dir: PathBuf,
    /// The mailbox directory, open and `flock`ed; closing it releases the lock.
    fd: OwnedFd,
    messages: Vec<MessageInfo>,
    /// File names, parallel to `messages`.
    names: Vec<String>,
}

impl MailStore {
    /// Opens mailbox `id` for a POP3 session: takes its exclusive lock (without
    /// waiting: [`StoreError::Locked`] if another session, in any process, holds it)
    /// and lists it. The directory of a mailbox that never received mail is created.
    pub fn open_mailbox(&self, id: MailboxId) -> Result<MailboxSession> {
        let dir = self.mailbox_dir_durable(id)?;
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let fd = rustix::fs::open(&dir, flags, Mode::empty())
            .map_err(|e| StoreError::io("open", &dir, e.into()))?;
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => return Err(StoreError::Locked(id)),
            Err(e) => return Err(StoreError::io("lock", &dir, e.into())),
        }
        let (names, messages) = list_dir(&dir)?
            .into_iter()
            .map(|e| {
                let info = MessageInfo {
                    uid: MessageUid(e.uid),
                    size: e.size,
                };
                (e.name, info)
            })
            .unzip();
        Ok(MailboxSession {
            id,
            dir,
            fd,
            messages,
            names,
        })
    }
}

impl MailboxSession {
    /// The mailbox.
    pub fn id(&self) -> MailboxId {
        self.id
    }

    /// The messages as listed at open, in delivery order.
    pub fn messages(&self) -> &[MessageInfo] {
        &self.messages
    }

    /// The sum of the listed sizes (POP3 STAT).
    pub fn total_size(&self) -> u64 {
        self.messages.iter().map(|m| m.size).sum()
    }

    /// Opens message `index` for reading; it yields exactly
    /// [`MessageInfo::size`] bytes (checked against the file).
    pub fn open(&self, index: usize) -> Result<File> {
        let name = self.name(index)?;
        let path = || self.dir.join(name);
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let fd = rustix::fs::openat(&self.fd, name, flags, Mode::empty())
            .map_err(|e| StoreError::io("open", path(), e.into()))?;
        let stat = rustix::fs::fstat(&fd).map_err(|e| StoreError::io("stat", path(), e.into()))?;
        let expected = self.messages[index].size;
        let actual = u64::try_from(stat.st_size).unwrap_or_default();
        if actual != expected {
            return Err(StoreError::Corrupt {
                path: path(),
                reason: format!("{actual} bytes where the listing says {expected}"),
            });
        }
        Ok(File::from(fd))
    }

    /// Reads message `index` whole.
    pub fn read(&self, index: usize) -> Result<Vec<u8>> {
        let file = self.open(index)?;
        let size = self.messages[index].size;
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or_default());
        file.take(size)
            .read_to_end(&mut bytes)
            .map_err(|e| StoreError::io("read", self.dir.join(&self.names[index]), e))?;
        Ok(bytes)
    }

    /// Removes the messages at `indices` (POP3 QUIT in the UPDATE state) and releases
    /// the lock; returns how many were removed. Each removal is one `unlink`, so a
    /// crash leaves every message whole or gone; the directory is fsynced once at the
    /// end. Indices are checked before anything is removed; duplicates count once;
    /// a message already gone (removed by hand) is skipped. Mail delivered during the
    /// session is not in the listing and is never touched.
    pub fn commit_deletes(self, indices: &[usize]) -> Result<usize> {
        let marked: BTreeSet<usize> = indices.iter().copied().collect();
        if let Some(&index) = marked.iter().find(|&&i| i >= self.names.len()) {
            return Err(self.no_such(index));
        }
        let mut removed = 0;
        let mut failure = None;
        for &index in &marked {
            let name = &self.names[index];
            match rustix::fs::unlinkat(&self.fd, name.as_str(), AtFlags::empty()) {
                Ok(()) => removed += 1,
                Err(rustix::io::Errno::NOENT) => {}
                Err(e) => {
                    failure = Some(StoreError::io("unlink", self.dir.join(name), e.into()));
                    break;
                }
            }
        }
        // Even after a failure, make the removals done so far durable.
        let synced = rustix::fs::fsync(&self.fd)
            .map_err(|e| StoreError::io("fsync", &self.dir, io::Error::from(e)));
        match (failure, synced) {
            (Some(e), _) | (None, Err(e)) => Err(e),
            (None, Ok(())) => Ok(removed),
        }
    }

    /// The mailbox directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn name(&self, index: usize) -> Result<&str> {
        self.names
            .get(index)
            .map(String::as_str)
            .ok_or_else(|| self.no_such(index))
    }

    fn no_such(&self, index: usize) -> StoreError {
        StoreError::NoSuchMessage {
            index,
            count: self.names.len(),
        }
    }
}
