//! A mailbox's folders: INBOX (the mailbox directory itself, which POP3 reads) and
//! the folders IMAP creates, each a directory `.f/ID/` under it, named in the
//! mailbox's `.folders` list. Names live only in the list, so a rename is one
//! rewrite of it and a name may hold any character.
//!
//! ```text
//! stoa-folders 1 7                          format version, next folder id
//! f 0 - INBOX                               id, SPECIAL-USE (or -), name
//! f 1 \Drafts Drafts
//! s Drafts                                  a subscription (to any name)
//! ```
//!
//! The list is rewritten whole (temporary file, fsync, rename, fsync) under the
//! mailbox's `.lock`; a crash leaves the old list or the new one.

use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;
use stoa_directory::MailboxId;

use crate::MailStore;
use crate::error::{Result, StoreError};
use crate::fsutil::{ensure_dir, sync_dir};
use crate::index::encode_name;

/// The folder list's file name in the mailbox directory.
const LIST: &str = ".folders";
/// The lock file serialising changes to the list.
const LOCK: &str = ".lock";
/// The directory of the folders other than INBOX.
pub(crate) const FOLDERS_DIR: &str = ".f";
/// The hierarchy delimiter of folder names.
pub const DELIMITER: char = '/';
/// Longest folder name, in bytes.
pub const MAX_FOLDER_NAME: usize = 255;
/// Most folders per mailbox.
pub const MAX_FOLDERS: usize = 1000;

/// The SPECIAL-USE attributes (RFC 6154) a folder may carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpecialUse {
    /// `\Archive`.
    Archive,
    /// `\Drafts`.
    Drafts,
    /// `\Junk`.
    Junk,
    /// `\Sent`.
    Sent,
    /// `\Trash`.
    Trash,
}

impl SpecialUse {
    /// Every attribute, in the order of the folders created at first login.
    pub const ALL: [SpecialUse; 5] = [
        SpecialUse::Drafts,
        SpecialUse::Sent,
        SpecialUse::Trash,
        SpecialUse::Junk,
        SpecialUse::Archive,
    ];

    /// The attribute as IMAP writes it (`\Sent`).
    pub fn as_str(self) -> &'static str {
        match self {
            SpecialUse::Archive => "\\Archive",
            SpecialUse::Drafts => "\\Drafts",
            SpecialUse::Junk => "\\Junk",
            SpecialUse::Sent => "\\Sent",
            SpecialUse::Trash => "\\Trash",
        }
    }

    /// The attribute named `text` (case-insensitive), if it is one Stoa keeps.
    pub fn parse(text: &str) -> Option<SpecialUse> {
        SpecialUse::ALL
            .into_iter()
            .find(|u| u.as_str().eq_ignore_ascii_case(text))
    }

    /// The name of the folder created for it at first login.
    fn default_name(self) -> &'static str {
        &self.as_str()[1..]
    }
}

/// One folder of a mailbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderInfo {
    /// Its id: 0 for INBOX, else its directory `.f/ID`. Never reused in a mailbox.
    pub id: u32,
    /// Its name, `/`-separated, UTF-8; `INBOX` for INBOX.
    pub name: String,
    /// Its SPECIAL-USE attribute.
    pub special_use: Option<SpecialUse>,
}

/// A mailbox's folders and subscriptions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FolderList {
    folders: Vec<FolderInfo>,
    subscribed: BTreeSet<String>,
    next_id: u32,
}

impl FolderList {
    /// The folders, INBOX first, then by name.
    pub fn folders(&self) -> &[FolderInfo] {
        &self.folders
    }

    /// The folder named `name` (INBOX in any case).
    pub fn get(&self, name: &str) -> Option<&FolderInfo> {
        let name = canonical(name);
        self.folders.iter().find(|f| f.name == name)
    }

    /// The subscribed names (which need not exist).
    pub fn subscribed(&self) -> &BTreeSet<String> {
        &self.subscribed
    }

    /// Whether any folder lies below `name` in the hierarchy.
    pub fn has_children(&self, name: &str) -> bool {
        let prefix = format!("{}{DELIMITER}", canonical(name));
        self.folders.iter().any(|f| f.name.starts_with(&prefix))
    }

    fn new_default() -> FolderList {
        let mut list = FolderList {
            folders: vec![FolderInfo {
                id: 0,
                name: "INBOX".into(),
                special_use: None,
            }],
            subscribed: BTreeSet::from(["INBOX".to_owned()]),
            next_id: 1,
        };
        for usage in SpecialUse::ALL {
            let name = usage.default_name().to_owned();
            list.subscribed.insert(name.clone());
            list.push(name, Some(usage));
        }
        list
    }

    fn push(&mut self, name: String, special_use: Option<SpecialUse>) -> FolderInfo {
        let info = FolderInfo {
            id: self.next_id,
            name,
            special_use,
        };
        self.next_id += 1;
        self.folders.push(info.clone());
        self.sort();
        info
    }

    fn sort(&mut self) {
        self.folders
            .sort_by(|a, b| (a.id != 0, &a.name).cmp(&(b.id != 0, &b.name)));
    }

    fn render(&self) -> String {
        let mut out = format!("stoa-folders 1 {}\n", self.next_id);
        for f in &self.folders {
            let usage = f.special_use.map_or("-", SpecialUse::as_str);
            out.push_str(&format!("f {} {usage} {}\n", f.id, encode_name(&f.name)));
        }
        for name in &self.subscribed {
            out.push_str(&format!("s {}\n", encode_name(name)));
        }
        out
    }

    fn parse(text: &str) -> Option<FolderList> {
        let mut lines = text.lines();
        let header = lines.next()?;
        let next_id = header.strip_prefix("stoa-folders 1 ")?.parse().ok()?;
        let mut list = FolderList {
            folders: Vec::new(),
            subscribed: BTreeSet::new(),
            next_id,
        };
        for line in lines {
            let mut words = line.splitn(4, ' ');
            match words.next()? {
                "f" => {
                    let id: u32 = words.next()?.parse().ok()?;
                    let usage = match words.next()? {
                        "-" => None,
                        other => Some(SpecialUse::parse(other)?),
                    };
                    let name = decode(words.next()?)?;
                    list.folders.push(FolderInfo {
                        id,
                        name,
                        special_use: usage,
                    });
                }
                "s" => {
                    list.subscribed.insert(decode(line.get(2..)?)?);
                }
                _ => return None,
            }
        }
        if !list.folders.iter().any(|f| f.id == 0) {
            return None;
        }
        list.sort();
        Some(list)
    }
}

fn decode(text: &str) -> Option<String> {
    crate::index::decode_name(text)
}

/// `name` with INBOX (in any case, and as a first component) spelled `INBOX`.
pub fn canonical(name: &str) -> String {
    let (first, rest) = match name.split_once(DELIMITER) {
        Some((first, rest)) => (first, Some(rest)),
        None => (name, None),
    };
    if first.eq_ignore_ascii_case("INBOX") {
        match rest {
            Some(rest) => format!("INBOX{DELIMITER}{rest}"),
            None => "INBOX".to_owned(),
        }
    } else {
        name.to_owned()
    }
}

/// Checks a folder name for CREATE and RENAME.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let bad = |reason: &str| {
        Err(StoreError::BadFolderName {
            name: name.to_owned(),
            reason: reason.to_owned(),
        })
    };
    if name.is_empty() {
        return bad("empty name");
    }
    if name.len() > MAX_FOLDER_NAME {
        return bad("longer than 255 bytes");
    }
    if name.chars().any(char::is_control) {
        return bad("control character");
    }
    if name.split(DELIMITER).any(str::is_empty) {
        return bad("empty hierarchy level");
    }
    if name.contains(['*', '%']) {
        return bad("* and % are LIST wildcards");
    }
    Ok(())
}

impl MailStore {
    /// The directory of folder `folder` of mailbox `id`.
    pub(crate) fn folder_dir(&self, id: MailboxId, folder: u32) -> PathBuf {
        let mut dir = self.mailbox_path(id);
        if folder != 0 {
            dir.push(FOLDERS_DIR);
            dir.push(folder.to_string());
        }
        dir
    }

    /// The folders of mailbox `id`. The first call for a mailbox creates its list:
    /// INBOX and one folder per [`SpecialUse`] attribute, all subscribed.
    pub fn folder_list(&self, id: MailboxId) -> Result<FolderList> {
        let dir = self.mailbox_dir_durable(id)?;
        if let Some(list) = read_list(&dir)? {
            return Ok(list);
        }
        self.change_folders(id, |_, list| Ok(list.clone()))
    }

    /// Whether mailbox `id` has its folder list yet (IMAP opened it, or an
    /// export or import did).
    pub(crate) fn has_folder_list(&self, id: MailboxId) -> bool {
        self.mailbox_path(id).join(LIST).exists()
    }

    /// Creates folder `name` (and its missing parents) with an optional SPECIAL-USE
    /// attribute.
    pub fn create_folder(
        &self,
        id: MailboxId,
        name: &str,
        special_use: Option<SpecialUse>,
    ) -> Result<FolderInfo> {
        let name = canonical(name);
        check_name(&name)?;
        self.change_folders(id, |store, list| {
            if list.get(&name).is_some() {
                return Err(StoreError::FolderExists(name.clone()));
            }
            let mut created = None;
            let levels: Vec<&str> = name.split(DELIMITER).collect();
            for depth in 1..=levels.len() {
                let path = levels[..depth].join("/");
                if list.get(&path).is_some() {
                    continue;
                }
                if list.folders.len() >= MAX_FOLDERS {
                    return Err(StoreError::TooManyFolders(MAX_FOLDERS));
                }
                let usage = if depth == levels.len() {
                    special_use
                } else {
                    None
                };
                let info = list.push(path, usage);
                store.make_folder_dir(id, info.id)?;
                created = Some(info);
            }
            created.ok_or_else(|| StoreError::FolderExists(name.clone()))
        })
    }

    /// Deletes folder `name` and its messages. INBOX cannot be deleted, nor a folder
    /// with folders below it (delete those first, as Dovecot asks).
    pub fn delete_folder(&self, id: MailboxId, name: &str) -> Result<()> {
        let name = canonical(name);
        let removed = self.change_folders(id, |_, list| {
            let folder = list
                .get(&name)
                .cloned()
                .ok_or_else(|| StoreError::NoSuchFolder(name.clone()))?;
            if folder.id == 0 {
                return Err(StoreError::BadFolderName {
                    name: name.clone(),
                    reason: "INBOX cannot be deleted".into(),
                });
            }
            if list.has_children(&name) {
                return Err(StoreError::HasChildren(name.clone()));
            }
            list.folders.retain(|f| f.id != folder.id);
            Ok(folder.id)
        })?;
        // The list no longer names it: remove the directory (a crash here leaves
        // an orphan that the next create of that id clears; ids are never reused).
        let dir = self.folder_dir(id, removed);
        match fs::remove_dir_all(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(StoreError::io("remove", dir, e)),
        }
        sync_dir(&self.mailbox_path(id).join(FOLDERS_DIR))
    }

    /// Renames folder `from` to `to`, with the folders below it. Renaming INBOX
    /// moves its messages into a new folder `to` and leaves INBOX empty (RFC 9051
    /// §6.3.6): the IMAP server does that with CREATE and MOVE.
    pub fn rename_folder(&self, id: MailboxId, from: &str, to: &str) -> Result<()> {
        let from = canonical(from);
        let to = canonical(to);
        check_name(&to)?;
        self.change_folders(id, |_, list| {
            if list.get(&from).is_none() {
                return Err(StoreError::NoSuchFolder(from.clone()));
            }
            if from == "INBOX" {
                return Err(StoreError::BadFolderName {
                    name: from.clone(),
                    reason: "renaming INBOX moves its messages".into(),
                });
            }
            if list.get(&to).is_some() {
                return Err(StoreError::FolderExists(to.clone()));
            }
            let prefix = format!("{from}{DELIMITER}");
            if to.starts_with(&prefix) {
                return Err(StoreError::BadFolderName {
                    name: to.clone(),
                    reason: "a folder cannot move below itself".into(),
                });
            }
            for folder in &mut list.folders {
                if folder.name == from {
                    folder.name = to.clone();
                } else if let Some(rest) = folder.name.strip_prefix(&prefix) {
                    folder.name = format!("{to}{DELIMITER}{rest}");
                }
            }
            // Missing parents of the new name appear as folders, as CREATE makes them.
            let levels: Vec<&str> = to.split(DELIMITER).collect();
            let mut made = Vec::new();
            for depth in 1..levels.len() {
                let path = levels[..depth].join("/");
                if list.get(&path).is_none() {
                    made.push(list.push(path, None).id);
                }
            }
            list.sort();
            Ok(made)
        })
        .and_then(|made| {
            for folder in made {
                self.make_folder_dir(id, folder)?;
            }
            Ok(())
        })
    }

    /// Subscribes to `name` (or unsubscribes). Any name may be subscribed.
    pub fn subscribe(&self, id: MailboxId, name: &str, subscribe: bool) -> Result<()> {
        let name = canonical(name);
        self.change_folders(id, |_, list| {
            if subscribe {
                check_name(&name)?;
                list.subscribed.insert(name.clone());
            } else {
                list.subscribed.remove(&name);
            }
            Ok(())
        })
    }

    /// Creates the (empty) directory of folder `folder`: an orphan left by a crash
    /// under that id is cleared first.
    fn make_folder_dir(&self, id: MailboxId, folder: u32) -> Result<()> {
        let parent = self.mailbox_path(id).join(FOLDERS_DIR);
        ensure_dir(&parent, self.modes.dir)?;
        let dir = self.folder_dir(id, folder);
        if !ensure_dir(&dir, self.modes.dir)? {
            fs::remove_dir_all(&dir).map_err(|e| StoreError::io("remove", &dir, e))?;
            ensure_dir(&dir, self.modes.dir)?;
        }
        Ok(())
    }

    /// Runs `change` on the current list under the mailbox's lock and writes the
    /// result durably; creates the default list when there is none.
    fn change_folders<R>(
        &self,
        id: MailboxId,
        change: impl FnOnce(&MailStore, &mut FolderList) -> Result<R>,
    ) -> Result<R> {
        let dir = self.mailbox_dir_durable(id)?;
        let _lock = lock(&dir, self.modes.file)?;
        let mut list = match read_list(&dir)? {
            Some(list) => list,
            None => {
                let list = FolderList::new_default();
                for folder in list.folders.iter().filter(|f| f.id != 0) {
                    self.make_folder_dir(id, folder.id)?;
                }
                list
            }
        };
        let result = change(self, &mut list)?;
        write_list(&dir, &list, self.modes.file)?;
        Ok(result)
    }
}

/// Takes the mailbox's `.lock` (blocking): held while the list changes. It is
/// created with the store's file mode, as every other file is.
fn lock(dir: &Path, mode: u32) -> Result<File> {
    let path = dir.join(LOCK);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(mode)
        .open(&path)
        .map_err(|e| StoreError::io("open", &path, e))?;
    rustix::fs::flock(&file, FlockOperation::LockExclusive)
        .map_err(|e| StoreError::io("lock", &path, e.into()))?;
    Ok(file)
}

fn read_list(dir: &Path) -> Result<Option<FolderList>> {
    let path = dir.join(LIST);
    let mut text = String::new();
    match File::open(&path) {
        Ok(mut file) => file
            .read_to_string(&mut text)
            .map_err(|e| StoreError::io("read", &path, e))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("open", &path, e)),
    };
    FolderList::parse(&text)
        .map(Some)
        .ok_or_else(|| StoreError::Corrupt {
            path,
            reason: "not a folder list".into(),
        })
}

fn write_list(dir: &Path, list: &FolderList, mode: u32) -> Result<()> {
    let tmp = dir.join(".folders.tmp");
    let path = dir.join(LIST);
    let result = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut file| {
            file.write_all(list.render().as_bytes())?;
            file.sync_data()
        })
        .map_err(|e| StoreError::io("write", &tmp, e));
    result?;
    fs::rename(&tmp, &path).map_err(|e| StoreError::io("rename", &path, e))?;
    sync_dir(dir)
}
