//! Import of a Maildir++ tree (what Dovecot, mbsync or [`MailStore::export_maildir`]
//! left; the format is in [`crate::maildirpp`]) into a mailbox.
//!
//! The whole tree is read and checked first (folder names, `dovecot-keywords`,
//! `subscriptions`, `stoa-special-use`, message file names and sizes): bad input is
//! an error before anything is written. Then folders are created and messages
//! appended, each durable before the next; a failure then (a full disk) says how
//! many went in, and running the import again goes on, because an import is
//! idempotent: each message keeps its Maildir name's unique part as its name in the
//! store, and a message whose unique part the folder already holds is skipped.

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use stoa_directory::MailboxId;

use crate::error::{Result, StoreError};
use crate::folders::check_name;
use crate::layout::{fnv1a, valid_uid};
use crate::maildirpp::{
    KEYWORDS_FILE, Keywords, SPECIAL_USE_FILE, SUBSCRIPTIONS_FILE, crlf_endings, flags_of_letters,
    folder_name_of_dir, parse_maildir_name, parse_subscriptions,
};
use crate::{MailStore, SpecialUse};

/// The largest message file an import takes (it is read whole): far above what
/// any mail server accepts (Postfix's default limit is 10 MB), and a bound on the
/// memory one message costs.
pub const MAX_IMPORT_MESSAGE: u64 = 256 * 1024 * 1024;

/// What [`MailStore::import_maildir`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Folders created (parents made on the way included).
    pub folders_created: usize,
    /// Messages appended.
    pub messages: usize,
    /// Their total size in the store (CRLF line endings).
    pub bytes: u64,
    /// Messages skipped because their folder already holds them (an earlier
    /// import), or listed twice (in `new/` and `cur/`).
    pub skipped: usize,
    /// Names newly subscribed.
    pub subscribed: usize,
    /// Directories starting with `.` that are not Maildirs (no `cur/` or `new/`,
    /// such as a `.notmuch` database), left alone.
    pub ignored: Vec<String>,
}

/// A folder of the tree, checked.
#[derive(Debug)]
struct PlannedFolder {
    name: String,
    messages: Vec<PlannedMessage>,
}

/// A message file of the tree, checked.
#[derive(Debug)]
struct PlannedMessage {
    path: PathBuf,
    /// Its name in the store: the Maildir unique part, or a hash of it when that
    /// cannot be a store name.
    unique: String,
    flags: Vec<String>,
    date: i64,
    wire_size: Option<u64>,
}

/// The whole tree, checked.
#[derive(Debug, Default)]
struct Plan {
    folders: Vec<PlannedFolder>,
    subscriptions: Vec<String>,
    /// Whether the tree has a `subscriptions` file.
    has_subscriptions: bool,
    special_use: BTreeMap<String, SpecialUse>,
    ignored: Vec<String>,
    duplicates: usize,
}

impl MailStore {
    /// Imports the Maildir++ tree `from` into mailbox `id` (see the module docs):
    /// INBOX from `from/{cur,new}`, each `from/.NAME` into folder NAME (created if
    /// missing, with the SPECIAL-USE that `stoa-special-use` names, else the one of
    /// a standard name: Drafts, Sent, Trash, Junk, Archive), flags from the
    /// `:2,` letters and `dovecot-keywords`, the internal date from the file's
    /// modification time, CRLF line ends restored, and the `subscriptions` added
    /// (into a mailbox that had no folder list yet, they replace Stoa's default
    /// ones).
    /// `tmp/` is not read. The tree should not change meanwhile (stop the server
    /// that writes it).
    pub fn import_maildir(&self, id: MailboxId, from: &Path) -> Result<ImportReport> {
        let plan = plan(from)?;
        let mut report = ImportReport {
            skipped: plan.duplicates,
            ignored: plan.ignored.clone(),
            ..ImportReport::default()
        };
        self.carry_out(id, &plan, &mut report)
            .map_err(|e| StoreError::ImportStopped {
                imported: report.messages,
                source: Box::new(e),
            })?;
        Ok(report)
    }

    fn carry_out(&self, id: MailboxId, plan: &Plan, report: &mut ImportReport) -> Result<()> {
        let fresh = !self.has_folder_list(id);
        let mut list = self.folder_list(id)?;
        for planned in &plan.folders {
            if list.get(&planned.name).is_none() {
                let usage = plan
                    .special_use
                    .get(&planned.name)
                    .copied()
                    .or_else(|| standard_use(&planned.name));
                let before = list.folders().len();
                self.create_folder(id, &planned.name, usage)?;
                list = self.folder_list(id)?;
                report.folders_created += list.folders().len() - before;
            }
            let info = list
                .get(&planned.name)
                .cloned()
                .ok_or_else(|| StoreError::NoSuchFolder(planned.name.clone()))?;
            let mut folder = self.open_folder(id, &info)?;
            let mut have: HashSet<String> = folder
                .state()
                .messages()
                .map(|m| parse_maildir_name(&m.name).unique.to_owned())
                .collect();
            for message in &planned.messages {
                if have.contains(&message.unique) {
                    report.skipped += 1;
                    continue;
                }
                let text = fs::read(&message.path)
                    .map_err(|e| StoreError::io("read", &message.path, e))?;
                let wire = crlf_endings(&text, message.wire_size);
                folder.append_as(
                    self,
                    &wire,
                    &message.flags,
                    Some(message.date),
                    Some(&message.unique),
                )?;
                have.insert(message.unique.clone());
                report.messages += 1;
                report.bytes += wire.len() as u64;
            }
        }
        for name in &plan.subscriptions {
            if !list.subscribed().contains(name) {
                self.subscribe(id, name, true)?;
                report.subscribed += 1;
            }
        }
        // A mailbox whose folder list this import made has Stoa's default
        // subscriptions, which the tree's replace (its folders are the user's).
        if fresh && plan.has_subscriptions {
            for name in list.subscribed() {
                if !plan.subscriptions.contains(name) {
                    self.subscribe(id, name, false)?;
                }
            }
        }
        Ok(())
    }
}

/// The SPECIAL-USE of a folder named as the standard ones are.
fn standard_use(name: &str) -> Option<SpecialUse> {
    SpecialUse::ALL
        .into_iter()
        .find(|usage| &usage.as_str()[1..] == name)
}

fn bad(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::BadMaildir {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

/// Reads and checks the whole tree.
fn plan(root: &Path) -> Result<Plan> {
    let meta = fs::metadata(root).map_err(|e| StoreError::io("stat", root, e))?;
    if !meta.is_dir() {
        return Err(bad(root, "not a directory"));
    }
    if !is_maildir(root) {
        return Err(bad(
            root,
            "not a Maildir++ tree: no cur/ or new/ (INBOX) in it",
        ));
    }
    let mut plan = Plan::default();
    plan.folders
        .push(plan_folder(root, "INBOX".to_owned(), &mut plan.duplicates)?);
    let mut dirs = Vec::new();
    let read = fs::read_dir(root).map_err(|e| StoreError::io("read", root, e))?;
    for entry in read {
        let entry = entry.map_err(|e| StoreError::io("read", root, e))?;
        let path = entry.path();
        let Ok(name) = entry.file_name().into_string() else {
            return Err(bad(&path, "a folder directory name that is not UTF-8"));
        };
        if !name.starts_with('.') || name == "." || name == ".." || !path.is_dir() {
            continue;
        }
        if !is_maildir(&path) {
            plan.ignored.push(name);
            continue;
        }
        let folder = folder_name_of_dir(&name).map_err(|reason| bad(&path, reason))?;
        check_name(&folder).map_err(|e| bad(&path, e.to_string()))?;
        dirs.push((folder, path));
    }
    // Parents before their children, INBOX's children after INBOX.
    dirs.sort();
    for (name, path) in dirs {
        let folder = plan_folder(&path, name, &mut plan.duplicates)?;
        plan.folders.push(folder);
    }
    plan.ignored.sort();
    plan.has_subscriptions = root.join(SUBSCRIPTIONS_FILE).is_file();
    plan.subscriptions = read_subscriptions(root)?;
    plan.special_use = read_special_use(root)?;
    Ok(plan)
}

fn is_maildir(dir: &Path) -> bool {
    dir.join("cur").is_dir() || dir.join("new").is_dir()
}

/// The messages of one Maildir, `cur/` before `new/`, in name order; a unique
/// part seen twice counts in `duplicates` and is taken once.
fn plan_folder(dir: &Path, name: String, duplicates: &mut usize) -> Result<PlannedFolder> {
    let keywords = read_keywords(dir)?;
    let mut seen = HashSet::new();
    let mut messages = Vec::new();
    for sub in ["cur", "new"] {
        for (file, path) in message_files(&dir.join(sub))? {
            let parsed = parse_maildir_name(&file);
            let unique = store_unique(parsed.unique);
            if !seen.insert(unique.clone()) {
                *duplicates += 1;
                continue;
            }
            let meta = fs::metadata(&path).map_err(|e| StoreError::io("stat", &path, e))?;
            if meta.len() > MAX_IMPORT_MESSAGE {
                return Err(bad(
                    &path,
                    format!(
                        "{} bytes, more than an import takes ({MAX_IMPORT_MESSAGE})",
                        meta.len()
                    ),
                ));
            }
            messages.push(PlannedMessage {
                flags: flags_of_letters(parsed.letters, &keywords),
                wire_size: parsed.wire_size,
                date: meta.mtime(),
                unique,
                path,
            });
        }
    }
    messages.sort_by(|a, b| a.unique.cmp(&b.unique));
    Ok(PlannedFolder { name, messages })
}

/// The message files of `cur/` or `new/` (a missing one is empty): regular files
/// not starting with `.`.
fn message_files(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("read", dir, e)),
    };
    let mut files = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| StoreError::io("read", dir, e))?;
        let path = entry.path();
        let Ok(name) = entry.file_name().into_string() else {
            return Err(bad(&path, "a message file name that is not UTF-8"));
        };
        if name.starts_with('.') {
            continue;
        }
        if !path.is_file() {
            return Err(bad(&path, "not a regular file"));
        }
        files.push((name, path));
    }
    files.sort();
    Ok(files)
}

/// A Maildir unique part as a store name: itself when it can be one (a POP3 UIDL,
/// not hidden), else a stable hash of it, so that a second import finds it again.
fn store_unique(unique: &str) -> String {
    if valid_uid(unique) && !unique.starts_with('.') && !unique.contains('/') {
        unique.to_owned()
    } else {
        format!("x{:016x}", fnv1a(unique.as_bytes()))
    }
}

/// The folder's `dovecot-keywords` (none: no keyword letters).
fn read_keywords(dir: &Path) -> Result<Keywords> {
    match read_optional(&dir.join(KEYWORDS_FILE))? {
        Some(text) => Keywords::parse(&text).map_err(|r| bad(&dir.join(KEYWORDS_FILE), r)),
        None => Ok(Keywords::default()),
    }
}

fn read_subscriptions(root: &Path) -> Result<Vec<String>> {
    let path = root.join(SUBSCRIPTIONS_FILE);
    let Some(text) = read_optional(&path)? else {
        return Ok(Vec::new());
    };
    let names = parse_subscriptions(&text).map_err(|reason| bad(&path, reason))?;
    for name in &names {
        check_name(name).map_err(|e| bad(&path, e.to_string()))?;
    }
    Ok(names)
}

/// `stoa-special-use`: lines `\Sent NAME`.
fn read_special_use(root: &Path) -> Result<BTreeMap<String, SpecialUse>> {
    let path = root.join(SPECIAL_USE_FILE);
    let Some(text) = read_optional(&path)? else {
        return Ok(BTreeMap::new());
    };
    let mut uses = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let parsed = line
            .split_once(' ')
            .and_then(|(usage, name)| Some((SpecialUse::parse(usage)?, name)));
        let Some((usage, name)) = parsed else {
            return Err(bad(&path, format!("{line:?} is not \"\\ATTRIBUTE NAME\"")));
        };
        uses.insert(crate::folders::canonical(name), usage);
    }
    Ok(uses)
}

/// A small text file's contents, `None` when it does not exist.
fn read_optional(path: &Path) -> Result<Option<String>> {
    match fs::read(path) {
        Ok(bytes) => String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| bad(path, "not UTF-8")),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("read", path, e)),
    }
}
