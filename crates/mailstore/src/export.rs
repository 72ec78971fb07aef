//! Export of a mailbox to a standard Maildir, so that users can take their mail away.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use stoa_directory::MailboxId;

use crate::MailStore;
use crate::error::{Result, StoreError};
use crate::fsutil::{Modes, create_dir_all, create_new, list_dir, sync_dir};

/// What [`MailStore::export_maildir`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Messages written.
    pub messages: usize,
    /// Their total size in bytes, as written (LF line endings).
    pub bytes: u64,
    /// Messages left alone because the Maildir already holds them (in `new/` or,
    /// moved there by a reader, in `cur/`).
    pub skipped: usize,
}

impl MailStore {
    /// Writes mailbox `id` as a Maildir at `to` (created with `tmp/`, `new/` and
    /// `cur/` if missing; an existing Maildir is added to). Each message is written
    /// with LF line endings, as Maildir readers (mutt, Dovecot) expect: the store
    /// keeps CRLF, the wire form. It goes into `tmp/`, is fsynced and renamed into
    /// `new/` as `UNIQUE,S=SIZE,W=WIRE` (the file's size and the CRLF size, the
    /// Maildir++ fields Dovecot reads). A message whose `UNIQUE` is already in
    /// `new/` or `cur/` is skipped, so exporting again adds only what is new. The
    /// Files and directories get the store's permissions ([`crate::Options`]). The
    /// mailbox is not locked: a message removed meanwhile by a POP3 session is
    /// skipped, one delivered meanwhile may or may not be included.
    pub fn export_maildir(&self, id: MailboxId, to: &Path) -> Result<ExportReport> {
        for dir in [
            to.to_path_buf(),
            to.join("tmp"),
            to.join("new"),
            to.join("cur"),
        ] {
            create_dir_all(&dir, self.modes.dir)?;
        }
        let mut present = HashSet::new();
        for sub in ["new", "cur"] {
            for entry in list_dir(&to.join(sub))? {
                present.insert(maildir_key(&entry.name).to_owned());
            }
        }
        let source = self.mailbox_path(id);
        let mut report = ExportReport::default();
        for entry in list_dir(&source)? {
            let key = maildir_key(&entry.name);
            if present.contains(key) {
                report.skipped += 1;
                continue;
            }
            let from = source.join(&entry.name);
            let wire = match fs::read(&from) {
                Ok(wire) => wire,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("read", from, e)),
            };
            let text = lf_endings(&wire);
            let name = format!("{key},S={},W={}", text.len(), wire.len());
            write_one(&text, to, &name, self.modes)?;
            report.messages += 1;
            report.bytes += text.len() as u64;
        }
        sync_dir(&to.join("new"))?;
        sync_dir(to)?;
        Ok(report)
    }
}

/// The part of a Maildir file name that names the message: before the first
/// `,` (Maildir++ fields) or `:` (the reader's flags, `:2,S`).
fn maildir_key(name: &str) -> &str {
    name.split([',', ':']).next().unwrap_or(name)
}

/// `wire` with every CRLF turned into LF (a bare CR stays: it is not a line end).
fn lf_endings(wire: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(wire.len());
    let mut i = 0;
    while i < wire.len() {
        if wire[i] == b'\r' && wire.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(wire[i]);
        i += 1;
    }
    out
}

/// Writes one message into `to/tmp/NAME`, fsyncs it and renames it to
/// `to/new/NAME`.
fn write_one(text: &[u8], to: &Path, name: &str, modes: Modes) -> Result<()> {
    let tmp = to.join("tmp").join(name);
    let new = to.join("new").join(name);
    if new.exists() {
        return Err(StoreError::Exists(new));
    }
    let result = create_new(modes.file)
        .open(&tmp)
        .map_err(|e| StoreError::io("create", &tmp, e))
        .and_then(|mut out| {
            out.write_all(text)
                .map_err(|e| StoreError::io("write", &tmp, e))?;
            out.sync_data()
                .map_err(|e| StoreError::io("fsync", &tmp, e))?;
            fs::rename(&tmp, &new).map_err(|e| StoreError::io("rename", &new, e))
        });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_ends_and_keys() {
        assert_eq!(lf_endings(b"a\r\nb\rc\r\n\r\n"), b"a\nb\rc\n\n");
        assert_eq!(
            maildir_key("1767.M1P2Q3.mx1,S=20,W=22:2,S"),
            "1767.M1P2Q3.mx1"
        );
        assert_eq!(maildir_key("1767.M1P2Q3.mx1,S=22"), "1767.M1P2Q3.mx1");
        assert_eq!(maildir_key("plain"), "plain");
    }
}
