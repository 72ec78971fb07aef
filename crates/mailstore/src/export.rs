//! Export of a mailbox as a Maildir++ tree, Dovecot's layout (the format is in
//! [`crate::maildirpp`]), so that users can take their mail, folders and flags away.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::io::{self, Write};
use std::path::Path;

use rustix::fs::{Timespec, Timestamps};
use stoa_directory::MailboxId;

use crate::error::{Result, StoreError};
use crate::folder::Folder;
use crate::folders::FolderList;
use crate::fsutil::{Modes, create_dir_all, create_new, list_dir, sync_dir};
use crate::maildirpp::{
    FOLDER_MARK, KEYWORDS_FILE, Keywords, SPECIAL_USE_FILE, SUBSCRIPTIONS_FILE, flag_letters,
    folder_dir_name, lf_endings, parse_maildir_name,
};
use crate::{MailStore, SpecialUse};

/// What [`MailStore::export_maildir`] wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Folders written (INBOX included).
    pub folders: usize,
    /// Messages written.
    pub messages: usize,
    /// Their total size in bytes, as written (LF line endings).
    pub bytes: u64,
    /// Messages left alone because the tree already holds them (in `new/` or
    /// `cur/`, under any flags).
    pub skipped: usize,
    /// Keywords not written: a folder's 27th and later keywords, which have no
    /// Maildir letter (counted once per message that has one).
    pub keywords_dropped: usize,
}

impl MailStore {
    /// Writes mailbox `id` as a Maildir++ tree at `to`: INBOX in `to/{cur,new,tmp}`,
    /// each folder in `to/.NAME` (see [`crate::maildirpp`] for names, flag letters
    /// and `dovecot-keywords`), the `subscriptions` file and Stoa's
    /// `stoa-special-use`. No `dovecot-uidlist` is written: Dovecot makes one at its
    /// first look, with new UIDs (a client resynchronises, as after any move).
    ///
    /// Each message goes to `cur/` as `UNIQUE,S=SIZE,W=WIRE:2,FLAGS`: UNIQUE its
    /// name in the store, SIZE the file's size with the LF line endings Maildir
    /// readers expect (the store keeps CRLF, the wire form, WIRE bytes), its
    /// modification time the internal date. It is written to `tmp/`, fsynced and
    /// renamed; each directory is fsynced at the end. A message whose UNIQUE is
    /// already in `new/` or `cur/` is skipped (its flags there are left as they
    /// are), so exporting again adds only what is new. Files and directories get
    /// the store's permissions ([`crate::Options`]).
    ///
    /// The folders are opened as an IMAP login opens them (a mailbox IMAP never saw
    /// gets its folder list and indexes); nothing is locked for long, and a message
    /// expunged meanwhile is left out.
    pub fn export_maildir(&self, id: MailboxId, to: &Path) -> Result<ExportReport> {
        let list = self.folder_list(id)?;
        create_dir_all(to, self.modes.dir)?;
        let mut report = ExportReport::default();
        for info in list.folders() {
            let folder = match self.open_folder(id, info) {
                Ok(folder) => folder,
                // Deleted since the list was read.
                Err(StoreError::NoSuchFolder(_)) => continue,
                Err(e) => return Err(e),
            };
            let dir = match folder_dir_name(&info.name) {
                Some(name) => to.join(name),
                None => to.to_path_buf(),
            };
            export_folder(&folder, &dir, self.modes, &mut report)?;
            report.folders += 1;
        }
        write_file(
            to,
            SUBSCRIPTIONS_FILE,
            &subscriptions(&list),
            self.modes.file,
        )?;
        write_file(to, SPECIAL_USE_FILE, &special_use(&list), self.modes.file)?;
        sync_dir(to)?;
        Ok(report)
    }
}

/// The `subscriptions` file: one subscribed name a line, as Dovecot's Maildir++
/// writes it (its directory name without the leading `.`; `INBOX`).
fn subscriptions(list: &FolderList) -> String {
    list.subscribed()
        .iter()
        .map(|name| match folder_dir_name(name) {
            Some(dir) => format!("{}\n", &dir[1..]),
            None => "INBOX\n".to_owned(),
        })
        .collect()
}

/// The `stoa-special-use` file: `\Sent Sent`, the attribute then the folder name.
fn special_use(list: &FolderList) -> String {
    list.folders()
        .iter()
        .filter_map(|f| {
            f.special_use
                .map(|usage| format!("{} {}\n", SpecialUse::as_str(usage), f.name))
        })
        .collect()
}

/// Writes one folder into the Maildir `dir`.
fn export_folder(
    folder: &Folder,
    dir: &Path,
    modes: Modes,
    report: &mut ExportReport,
) -> Result<()> {
    for sub in ["tmp", "new", "cur"] {
        create_dir_all(&dir.join(sub), modes.dir)?;
    }
    if folder.info().id != 0 {
        let mark = dir.join(FOLDER_MARK);
        match create_new(modes.file).open(&mark) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(StoreError::io("create", mark, e)),
        }
    }
    let mut present = HashSet::new();
    for sub in ["new", "cur"] {
        for entry in list_dir(&dir.join(sub))? {
            present.insert(parse_maildir_name(&entry.name).unique.to_owned());
        }
    }
    let state = folder.state();
    let wanted: Vec<_> = state
        .messages()
        .filter(|m| {
            let new = !present.contains(parse_maildir_name(&m.name).unique);
            if !new {
                report.skipped += 1;
            }
            new
        })
        .collect();
    let keywords = assign_keywords(dir, wanted.iter().flat_map(|m| &m.flags), modes)?;
    for message in wanted {
        let wire = match folder.read_message(message.uid) {
            Ok(wire) => wire,
            Err(StoreError::NoSuchUid(_)) => continue,
            Err(e) => return Err(e),
        };
        let text = lf_endings(&wire);
        let (letters, dropped) = flag_letters(&message.flags, &keywords);
        report.keywords_dropped += dropped;
        let unique = parse_maildir_name(&message.name).unique;
        let name = format!("{unique},S={},W={}:2,{letters}", text.len(), wire.len());
        write_one(&text, dir, &name, modes, message.internal_date)?;
        report.messages += 1;
        report.bytes += text.len() as u64;
    }
    sync_dir(&dir.join("cur"))?;
    sync_dir(dir)
}

/// The folder's keyword letters: its `dovecot-keywords` (a previous export's, or
/// Dovecot's), with letters given to the keywords in `flags` that have none, in
/// name order; the file is rewritten (before any message uses a new letter) when
/// that added some.
fn assign_keywords<'a>(
    dir: &Path,
    flags: impl Iterator<Item = &'a String>,
    modes: Modes,
) -> Result<Keywords> {
    let path = dir.join(KEYWORDS_FILE);
    let mut keywords = match fs::read_to_string(&path) {
        Ok(text) => Keywords::parse(&text).map_err(|reason| StoreError::BadMaildir {
            path: path.clone(),
            reason,
        })?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => Keywords::default(),
        Err(e) => return Err(StoreError::io("read", path, e)),
    };
    let before = keywords.clone();
    let used: BTreeSet<&String> = flags.filter(|f| !f.starts_with('\\')).collect();
    for keyword in used {
        // None: all 26 letters are taken; the message's flag_letters counts it.
        let _ = keywords.letter_or_assign(keyword);
    }
    if keywords != before {
        write_file(dir, KEYWORDS_FILE, &keywords.render(), modes.file)?;
    }
    Ok(keywords)
}

/// Replaces `dir/name` with `text` durably (temporary file, fsync, rename; the
/// caller fsyncs `dir`).
fn write_file(dir: &Path, name: &str, text: &str, mode: u32) -> Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(name);
    let _ = fs::remove_file(&tmp);
    let written = create_new(mode)
        .open(&tmp)
        .and_then(|mut file| {
            file.write_all(text.as_bytes())?;
            file.sync_data()
        })
        .map_err(|e| StoreError::io("write", &tmp, e));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    fs::rename(&tmp, &path).map_err(|e| StoreError::io("rename", &path, e))
}

/// Writes one message into `dir/tmp/NAME`, fsyncs it, dates it `date` and renames
/// it to `dir/cur/NAME`.
fn write_one(text: &[u8], dir: &Path, name: &str, modes: Modes, date: i64) -> Result<()> {
    let tmp = dir.join("tmp").join(name);
    let cur = dir.join("cur").join(name);
    if cur.exists() {
        return Err(StoreError::Exists(cur));
    }
    let stamp = Timespec {
        tv_sec: date,
        tv_nsec: 0,
    };
    let times = Timestamps {
        last_access: stamp,
        last_modification: stamp,
    };
    let result = create_new(modes.file)
        .open(&tmp)
        .map_err(|e| StoreError::io("create", &tmp, e))
        .and_then(|mut out| {
            out.write_all(text)
                .map_err(|e| StoreError::io("write", &tmp, e))?;
            // Dated before the fsync, which then makes the date durable too.
            rustix::fs::futimens(&out, &times)
                .map_err(|e| StoreError::io("utimens", &tmp, e.into()))?;
            out.sync_all()
                .map_err(|e| StoreError::io("fsync", &tmp, e))?;
            fs::rename(&tmp, &cur).map_err(|e| StoreError::io("rename", &cur, e))
        });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}
