//! Export of a mailbox to a standard Maildir, so that users can take their mail away.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;

use stoa_directory::MailboxId;

use crate::MailStore;
use crate::error::{Result, StoreError};
use crate::fsutil::{list_dir, sync_dir};

/// What [`MailStore::export_maildir`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Messages written.
    pub messages: usize,
    /// Their total size in bytes.
    pub bytes: u64,
}

impl MailStore {
    /// Writes mailbox `id` as a Maildir at `to` (created with `tmp/`, `new/` and
    /// `cur/` if missing; an existing Maildir is added to): each message is copied
    /// byte for byte (CRLF line endings, as stored) into `tmp/`, fsynced and renamed
    /// into `new/` under its store name (`UNIQUE,S=SIZE`, which Maildir readers such
    /// as Dovecot understand). A name already in `new/` is refused rather than
    /// overwritten. The mailbox is not locked: a message removed meanwhile by a POP3
    /// session is skipped, one delivered meanwhile may or may not be included.
    pub fn export_maildir(&self, id: MailboxId, to: &Path) -> Result<ExportReport> {
        for dir in [
            to.to_path_buf(),
            to.join("tmp"),
            to.join("new"),
            to.join("cur"),
        ] {
            fs::create_dir_all(&dir).map_err(|e| StoreError::io("mkdir", &dir, e))?;
        }
        let source = self.mailbox_path(id);
        let mut report = ExportReport::default();
        for entry in list_dir(&source)? {
            let from = source.join(&entry.name);
            let mut file = match File::open(&from) {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("open", from, e)),
            };
            let bytes = copy_one(&mut file, &from, to, &entry.name)?;
            report.messages += 1;
            report.bytes += bytes;
        }
        sync_dir(&to.join("new"))?;
        sync_dir(to)?;
        Ok(report)
    }
}

/// Copies one message into `to/tmp/NAME`, fsyncs it and renames it to `to/new/NAME`.
fn copy_one(file: &mut File, from: &Path, to: &Path, name: &str) -> Result<u64> {
    let tmp = to.join("tmp").join(name);
    let new = to.join("new").join(name);
    if new.exists() {
        return Err(StoreError::Exists(new));
    }
    let result = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .map_err(|e| StoreError::io("create", &tmp, e))
        .and_then(|mut out| {
            let bytes = io::copy(file, &mut out).map_err(|e| StoreError::io("copy", from, e))?;
            out.sync_data()
                .map_err(|e| StoreError::io("fsync", &tmp, e))?;
            fs::rename(&tmp, &new).map_err(|e| StoreError::io("rename", &new, e))?;
            Ok(bytes)
        });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
