//! Delivery: write once in `tmp/`, hard-link into each mailbox, fsync every step.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use stoa_directory::MailboxId;

use crate::MailStore;
use crate::error::{Result, StoreError};
use crate::fsutil::{create_new, sync_dir};
use crate::layout::{MessageUid, message_name, unique_name};

impl MailStore {
    /// Stores `message` in every mailbox of `to`, durably, and returns its uid (the
    /// same in each mailbox).
    ///
    /// `message` is the message exactly as received: CRLF line endings, headers
    /// included, not dot-stuffed; it is stored byte for byte, once, whatever the
    /// number of recipients (hard links). Duplicate ids in `to` get one copy.
    ///
    /// When this returns `Ok`, the message and every new directory entry are on
    /// disk (file and directories fsynced). On `Err`, no mailbox shows it.
    pub fn deliver(&self, message: &[u8], to: &[MailboxId]) -> Result<MessageUid> {
        self.deliver_with(b"", message, to)
    }

    /// [`MailStore::deliver`] of `prefix` followed by `message` (the delivering
    /// server's own header fields, `Return-Path:` say), written as one message
    /// without copying `message`.
    pub fn deliver_with(
        &self,
        prefix: &[u8],
        message: &[u8],
        to: &[MailboxId],
    ) -> Result<MessageUid> {
        if to.is_empty() {
            return Err(StoreError::NoRecipients);
        }
        let mut targets = to.to_vec();
        targets.sort_unstable();
        targets.dedup();
        let unique = unique_name(&self.host);
        let tmp = self.tmp.join(&unique);
        write_parts_synced(&tmp, &[prefix, message], self.modes.file)?;
        let name = message_name(&unique, (prefix.len() + message.len()) as u64);
        let linked = self.link_all(&tmp, &name, &targets);
        // The links hold the message now. A failed unlink leaves a stray file that
        // the next open's recovery removes; it is not worth failing the delivery.
        let _ = fs::remove_file(&tmp);
        if linked.is_ok() {
            for &id in &targets {
                self.notify(id);
            }
        }
        linked.map(|()| MessageUid(unique))
    }

    /// Links `tmp` as `name` into each mailbox, fsyncing each directory; on error,
    /// removes the links made so far.
    fn link_all(&self, tmp: &Path, name: &str, targets: &[MailboxId]) -> Result<()> {
        let mut linked: Vec<PathBuf> = Vec::with_capacity(targets.len());
        for &id in targets {
            if let Err(e) = self.link_one(tmp, name, id, &mut linked) {
                roll_back(&linked);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Links one copy into mailbox `id` and makes the new name durable. The link is
    /// pushed to `linked` as soon as it exists, so that a failed fsync rolls it back.
    fn link_one(
        &self,
        tmp: &Path,
        name: &str,
        id: MailboxId,
        linked: &mut Vec<PathBuf>,
    ) -> Result<()> {
        let dir = self.mailbox_path(id);
        let path = dir.join(name);
        match fs::hard_link(tmp, &path) {
            Ok(()) => {
                // The directory existed; if a concurrent delivery has just created it,
                // wait until it has made the directory's name durable.
                drop(self.create.lock().unwrap_or_else(PoisonError::into_inner));
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                self.mailbox_dir_durable(id)?;
                fs::hard_link(tmp, &path).map_err(|e| StoreError::io("link", &path, e))?;
            }
            Err(e) => return Err(StoreError::io("link", &path, e)),
        }
        linked.push(path);
        sync_dir(&dir)
    }
}

/// Writes `bytes` to a new file at `path` (permissions `mode`) and fsyncs it; on
/// error, removes it.
pub(crate) fn write_synced(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    write_parts_synced(path, &[bytes], mode)
}

/// [`write_synced`] of several pieces, one after the other.
fn write_parts_synced(path: &Path, parts: &[&[u8]], mode: u32) -> Result<()> {
    let result = create_new(mode)
        .open(path)
        .map_err(|e| StoreError::io("create", path, e))
        .and_then(|file| write_and_sync(file, path, parts));
    if result.is_err() {
        // Best effort: a leftover is invisible to mailboxes and removed at open.
        let _ = fs::remove_file(path);
    }
    result
}

fn write_and_sync(mut file: File, path: &Path, parts: &[&[u8]]) -> Result<()> {
    for bytes in parts {
        file.write_all(bytes)
            .map_err(|e| StoreError::io("write", path, e))?;
    }
    // fdatasync: the data and the file size; the name is made durable by the
    // mailbox directories' fsyncs.
    file.sync_data()
        .map_err(|e| StoreError::io("fsync", path, e))
}

/// Removes the links of a failed delivery and makes their removal durable, best
/// effort: what cannot be removed is at worst a duplicate after the client retries.
fn roll_back(linked: &[PathBuf]) {
    for path in linked {
        if fs::remove_file(path).is_ok()
            && let Some(dir) = path.parent()
        {
            let _ = sync_dir(dir);
        }
    }
}
