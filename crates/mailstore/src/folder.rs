//! An open folder: its index (see [`crate::index`]) kept current with the log and
//! the directory, and the changes IMAP makes (flags, expunge, append, copy, move),
//! each durable before it returns.
//!
//! # Concurrency
//!
//! Any number of [`Folder`]s, in any processes, may have one folder open. Each
//! reads the log from where it stopped ([`Folder::refresh`]); changes are made under
//! an exclusive `flock` on the log, after catching up with it, and appended as one
//! write followed by `fdatasync`. Deliveries do not take the lock: they only link a
//! new file into the directory, and the next refresh that sees the directory
//! changed gives it a UID. A message that disappears from the directory (POP3's
//! DELE, a delete by hand) is expunged by the next refresh in the same way.
//!
//! # Descriptors
//!
//! An open [`Folder`] holds two descriptors, its directory (message files are
//! opened, linked and unlinked relative to it) and its log (read, appended and
//! locked). A session that only waits gives them back with [`Folder::release`]:
//! the [`ReleasedFolder`] keeps the state and where it stopped in the log, and
//! [`ReleasedFolder::reacquire`] reopens both (reading the log whole if it was
//! compacted meanwhile: another inode or birth time, or no birth time kept), so ten thousand sessions in IMAP IDLE hold one
//! descriptor each, their socket, not three. An open folder pays nothing for this.
//!
//! # Crash safety
//!
//! Files are removed before their expunge is logged, so a crash in between leaves a
//! logged message without a file, which the next refresh expunges. MOVE and COPY
//! log the new message, then rename (or link) its file into place, then (MOVE) log
//! the expunge in the source: a crash leaves the message in exactly one place for
//! MOVE (rename is atomic), with its flags, and the log never names a message twice.

use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags, StatxFlags, Timespec, Timestamps};
use stoa_directory::MailboxId;

use crate::MailStore;
use crate::error::{Result, StoreError};
use crate::folders::FolderInfo;
use crate::fsutil::{list_dir, sync_dir};
use crate::index::{IndexState, IndexedMessage, Record, normalize_flags, valid_flag, write_record};
use crate::layout::{message_name, unique_name};

/// The log's file name in a folder directory.
const INDEX: &str = ".index";

/// A log larger than this, and twice what a snapshot would take, is compacted
/// (every session opening the folder reads it whole).
const COMPACT_ABOVE: u64 = 32 * 1024;

/// The last UIDVALIDITY given by this process: each new folder gets a larger one
/// (the clock in seconds, or one more when two are made within a second).
static LAST_UID_VALIDITY: AtomicU32 = AtomicU32::new(0);

/// How a STORE changes flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagOp {
    /// `+FLAGS`: add these.
    Add,
    /// `-FLAGS`: remove these.
    Remove,
    /// `FLAGS`: replace with these.
    Replace,
}

/// What [`Folder::store_flags`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreOutcome {
    /// UIDs whose flags changed.
    pub changed: Vec<u32>,
    /// UIDs left alone because they changed after `UNCHANGEDSINCE` (CONDSTORE's
    /// MODIFIED).
    pub modified: Vec<u32>,
}

/// One folder of a mailbox, open (see the module docs).
#[derive(Debug)]
pub struct Folder {
    mailbox: MailboxId,
    info: FolderInfo,
    dir: PathBuf,
    dir_fd: OwnedFd,
    index_path: PathBuf,
    index: File,
    inode: u64,
    /// Bytes of the log applied to `state`.
    offset: u64,
    state: IndexState,
    /// The directory's change time at the last scan.
    scanned: Option<(i64, i64)>,
    file_mode: u32,
}

/// A [`Folder`] without its two descriptors (the directory and the log), kept
/// by a session that waits (IMAP IDLE) so that it holds no file: its paths, the
/// replayed state, the log offset and the log's inode stay, and
/// [`ReleasedFolder::reacquire`] opens it again where it left off. Only the
/// state can be read meanwhile: whatever needs the files needs a [`Folder`].
#[derive(Debug)]
pub struct ReleasedFolder {
    mailbox: MailboxId,
    info: FolderInfo,
    dir: PathBuf,
    index_path: PathBuf,
    inode: u64,
    /// The log's birth time, where the file system keeps one: with no descriptor
    /// held on it, the log's inode number may be freed by a compaction and given to
    /// the next log, so the number alone cannot tell them apart.
    born: Option<(i64, u32)>,
    offset: u64,
    state: IndexState,
    scanned: Option<(i64, i64)>,
    file_mode: u32,
}

/// Changes being made under the lock: records to log, with the modseq and UIDs
/// they take.
pub(crate) struct Txn {
    modseq: u64,
    next_uid: u32,
    records: Vec<Record>,
    /// Records already written by [`Txn::flush`].
    flushed: usize,
    flushed_bytes: u64,
}

impl Txn {
    fn uid(&mut self) -> u32 {
        let uid = self.next_uid;
        self.next_uid += 1;
        uid
    }

    /// Writes the records so far to the log, durably, before the caller goes on
    /// (so that a crash after the next step finds them).
    fn flush(&mut self, folder: &Folder) -> Result<()> {
        let mut text = String::new();
        for record in &self.records[self.flushed..] {
            write_record(&mut text, record);
        }
        if text.is_empty() {
            return Ok(());
        }
        folder.append_log(text.as_bytes(), self.flushed_bytes)?;
        self.flushed = self.records.len();
        self.flushed_bytes += text.len() as u64;
        Ok(())
    }
}

impl MailStore {
    /// Opens folder `info` of mailbox `id` and brings its index up to date. The
    /// first open of a folder creates its index: the messages already there (a POP3
    /// mailbox's INBOX) get UIDs in delivery order.
    pub fn open_folder(&self, id: MailboxId, info: &FolderInfo) -> Result<Folder> {
        let dir = if info.id == 0 {
            self.mailbox_dir_durable(id)?
        } else {
            self.folder_dir(id, info.id)
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir_fd = match rustix::fs::open(&dir, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => {
                return Err(StoreError::NoSuchFolder(info.name.clone()));
            }
            Err(e) => return Err(StoreError::io("open", &dir, e.into())),
        };
        let index_path = dir.join(INDEX);
        let (index, inode) = open_index(&index_path, self.modes.file)?;
        let mut folder = Folder {
            mailbox: id,
            info: info.clone(),
            dir,
            dir_fd,
            index_path,
            index,
            inode,
            offset: 0,
            state: IndexState::new(0),
            scanned: None,
            file_mode: self.modes.file,
        };
        folder.reload()?;
        folder.refresh(self)?;
        Ok(folder)
    }
}

impl Folder {
    /// The folder.
    pub fn info(&self) -> &FolderInfo {
        &self.info
    }

    /// The mailbox it belongs to.
    pub fn mailbox(&self) -> MailboxId {
        self.mailbox
    }

    /// The state as of the last refresh or change.
    pub fn state(&self) -> &IndexState {
        &self.state
    }

    /// Closes the folder's directory and log, keeping everything else (see
    /// [`ReleasedFolder`]).
    pub fn release(self) -> ReleasedFolder {
        let Folder {
            mailbox,
            info,
            dir,
            dir_fd: _,
            index_path,
            index,
            inode,
            offset,
            state,
            scanned,
            file_mode,
        } = self;
        ReleasedFolder {
            mailbox,
            info,
            dir,
            index_path,
            inode,
            born: birth_time(&index),
            offset,
            state,
            scanned,
            file_mode,
        }
    }

    /// Catches up with the log, then, if the directory changed since the last look,
    /// gives UIDs to new files and expunges vanished ones.
    pub fn refresh(&mut self, store: &MailStore) -> Result<()> {
        if self.path_inode()? != Some(self.inode) {
            self.reopen()?;
        } else {
            self.read_tail()?;
        }
        let stamp = self.dir_stamp()?;
        if self.scanned == Some(stamp) && !recent(stamp) {
            return Ok(());
        }
        self.locked(store, |folder, txn| {
            folder.scan(txn)?;
            Ok(())
        })?;
        self.scanned = Some(stamp);
        Ok(())
    }

    /// Changes the flags of the messages `uids` (those still there). With
    /// `unchanged_since`, a message changed after that modseq is left alone and
    /// reported in [`StoreOutcome::modified`].
    pub fn store_flags(
        &mut self,
        store: &MailStore,
        uids: &[u32],
        op: FlagOp,
        flags: &[String],
        unchanged_since: Option<u64>,
    ) -> Result<StoreOutcome> {
        if let Some(bad) = flags.iter().find(|f| !valid_flag(f)) {
            return Err(StoreError::BadFlag(bad.clone()));
        }
        self.locked(store, |folder, txn| {
            let mut outcome = StoreOutcome::default();
            for &uid in uids {
                let Some(message) = folder.state.get(uid) else {
                    continue;
                };
                if unchanged_since.is_some_and(|since| message.modseq > since) {
                    outcome.modified.push(uid);
                    continue;
                }
                let new = apply_op(&message.flags, op, flags);
                if new != message.flags {
                    txn.records.push(Record::Flags {
                        uid,
                        modseq: txn.modseq,
                        flags: new,
                    });
                    outcome.changed.push(uid);
                }
            }
            Ok(outcome)
        })
    }

    /// Expunges the messages flagged `\Deleted` (of `only`, when given); returns
    /// their UIDs, ascending.
    pub fn expunge(&mut self, store: &MailStore, only: Option<&[u32]>) -> Result<Vec<u32>> {
        let only: Option<HashSet<u32>> = only.map(|uids| uids.iter().copied().collect());
        self.locked(store, |folder, txn| {
            let doomed: Vec<(u32, String)> = folder
                .state
                .messages()
                .filter(|m| m.has_flag("\\Deleted"))
                .filter(|m| only.as_ref().is_none_or(|set| set.contains(&m.uid)))
                .map(|m| (m.uid, m.name.clone()))
                .collect();
            folder.remove_files(doomed.iter().map(|(_, name)| name.as_str()))?;
            for &(uid, _) in &doomed {
                txn.records.push(Record::Expunge {
                    uid,
                    modseq: txn.modseq,
                });
            }
            Ok(doomed.into_iter().map(|(uid, _)| uid).collect())
        })
    }

    /// Adds `message` (CRLF, as received) with `flags` and an internal date
    /// (default: now); returns its UID once it is durable.
    pub fn append(
        &mut self,
        store: &MailStore,
        message: &[u8],
        flags: &[String],
        internal_date: Option<i64>,
    ) -> Result<u32> {
        self.append_as(store, message, flags, internal_date, None)
    }

    /// [`Folder::append`] under a given unique name (an import keeps the Maildir
    /// name's unique part, so that it can tell what it already imported); `None`
    /// makes a new one. The caller checks that the name is a valid one
    /// ([`crate::layout::valid_uid`], no `/`, `,` or `:`, not starting with `.`).
    pub(crate) fn append_as(
        &mut self,
        store: &MailStore,
        message: &[u8],
        flags: &[String],
        internal_date: Option<i64>,
        unique: Option<&str>,
    ) -> Result<u32> {
        if let Some(bad) = flags.iter().find(|f| !valid_flag(f)) {
            return Err(StoreError::BadFlag(bad.clone()));
        }
        let date = internal_date.unwrap_or_else(now);
        let unique = unique.map_or_else(|| unique_name(&store.host), str::to_owned);
        // The temporary file always gets a fresh name: a crashed import's leftover
        // under the given one must not stand in the way.
        let tmp = store.tmp.join(unique_name(&store.host));
        crate::deliver::write_synced(&tmp, message, store.modes.file)?;
        let file = File::open(&tmp).map_err(|e| StoreError::io("open", &tmp, e))?;
        let stamp = Timespec {
            tv_sec: date,
            tv_nsec: 0,
        };
        let times = Timestamps {
            last_access: stamp,
            last_modification: stamp,
        };
        let _ = rustix::fs::futimens(&file, &times);
        drop(file);
        let name = message_name(&unique, message.len() as u64);
        let result = self.locked(store, |folder, txn| {
            let to = folder.dir.join(&name);
            // A given name may be taken (the same import run twice at once): log
            // nothing then, or two UIDs would share one file.
            if to.exists() {
                return Err(StoreError::Exists(to));
            }
            let uid = txn.uid();
            txn.records.push(Record::Add(IndexedMessage {
                uid,
                modseq: txn.modseq,
                internal_date: date,
                size: message.len() as u64,
                name: name.clone(),
                flags: normalize_flags(flags.to_vec()),
            }));
            txn.flush(folder)?;
            fs::hard_link(&tmp, &to).map_err(|e| StoreError::io("link", &to, e))?;
            sync_dir(&folder.dir)?;
            Ok(uid)
        });
        let _ = fs::remove_file(&tmp);
        result
    }

    /// Copies the messages `uids` of this folder into `target` (another open
    /// folder, possibly of the same name), with their flags and internal dates;
    /// returns (source UID, new UID) pairs. With `remove`, it is a MOVE: each file
    /// is renamed, not linked, and expunged here.
    pub fn copy_to(
        &mut self,
        store: &MailStore,
        uids: &[u32],
        target: &mut Folder,
        remove: bool,
    ) -> Result<Vec<(u32, u32)>> {
        let wanted: HashSet<u32> = uids.iter().copied().collect();
        let sources: Vec<IndexedMessage> = self
            .state
            .messages()
            .filter(|m| wanted.contains(&m.uid))
            .cloned()
            .collect();
        let pairs = target.locked(store, |to, txn| {
            let mut pairs = Vec::with_capacity(sources.len());
            let mut names = Vec::with_capacity(sources.len());
            for source in &sources {
                let uid = txn.uid();
                let name = message_name(&unique_name(&store.host), source.size);
                txn.records.push(Record::Add(IndexedMessage {
                    uid,
                    modseq: txn.modseq,
                    name: name.clone(),
                    ..source.clone()
                }));
                pairs.push((source.uid, uid));
                names.push(name);
            }
            txn.flush(to)?;
            let mut done = Vec::with_capacity(pairs.len());
            for ((source, name), &pair) in sources.iter().zip(&names).zip(&pairs) {
                let moved = if remove {
                    rustix::fs::renameat(
                        &self.dir_fd,
                        source.name.as_str(),
                        &to.dir_fd,
                        name.as_str(),
                    )
                } else {
                    rustix::fs::linkat(
                        &self.dir_fd,
                        source.name.as_str(),
                        &to.dir_fd,
                        name.as_str(),
                        AtFlags::empty(),
                    )
                };
                match moved {
                    Ok(()) => done.push(pair),
                    // Gone meanwhile (POP3, another session): its logged copy has no
                    // file and the next refresh of the target expunges it.
                    Err(rustix::io::Errno::NOENT) => {}
                    Err(e) => {
                        let path = to.dir.join(name);
                        return Err(StoreError::io("link", path, e.into()));
                    }
                }
            }
            sync_dir(&to.dir)?;
            if remove {
                sync_dir(&self.dir)?;
            }
            // Copies whose source vanished are expunged in the target at once.
            for &(source_uid, uid) in &pairs {
                if !done.contains(&(source_uid, uid)) {
                    txn.records.push(Record::Expunge {
                        uid,
                        modseq: txn.modseq,
                    });
                }
            }
            Ok(done)
        })?;
        if remove {
            let moved: HashSet<u32> = pairs.iter().map(|&(source, _)| source).collect();
            self.locked(store, |folder, txn| {
                for uid in moved {
                    if folder.state.get(uid).is_some() {
                        txn.records.push(Record::Expunge {
                            uid,
                            modseq: txn.modseq,
                        });
                    }
                }
                Ok(())
            })?;
        }
        Ok(pairs)
    }

    /// Takes the messages no session has seen as `\Recent` yet (IMAP4rev1): returns
    /// their UIDs, which are recent for the caller only. Logs nothing (and syncs
    /// nothing) when there are none.
    pub fn claim_recent(&mut self, store: &MailStore) -> Result<Vec<u32>> {
        if self.state.first_recent_uid >= self.state.uid_next {
            return Ok(Vec::new());
        }
        self.locked(store, |folder, txn| {
            let state = &folder.state;
            let from = state.first_recent_uid;
            if from >= state.uid_next {
                return Ok(Vec::new());
            }
            txn.records.push(Record::Recent {
                uid: state.uid_next,
            });
            Ok(state.messages.range(from..).map(|(&uid, _)| uid).collect())
        })
    }

    /// Opens message `uid` for reading; it yields exactly its indexed size.
    pub fn open_message(&self, uid: u32) -> Result<File> {
        let message = self.state.get(uid).ok_or(StoreError::NoSuchUid(uid))?;
        let path = || self.dir.join(&message.name);
        let flags = OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let fd = match rustix::fs::openat(&self.dir_fd, message.name.as_str(), flags, Mode::empty())
        {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Err(StoreError::NoSuchUid(uid)),
            Err(e) => return Err(StoreError::io("open", path(), e.into())),
        };
        let stat = rustix::fs::fstat(&fd).map_err(|e| StoreError::io("stat", path(), e.into()))?;
        if u64::try_from(stat.st_size).unwrap_or_default() != message.size {
            return Err(StoreError::Corrupt {
                path: path(),
                reason: format!(
                    "{} bytes where the index says {}",
                    stat.st_size, message.size
                ),
            });
        }
        Ok(File::from(fd))
    }

    /// Reads message `uid` whole.
    pub fn read_message(&self, uid: u32) -> Result<Vec<u8>> {
        let file = self.open_message(uid)?;
        let size = self.state.get(uid).map_or(0, |m| m.size);
        let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or_default());
        file.take(size)
            .read_to_end(&mut bytes)
            .map_err(|e| StoreError::io("read", &self.dir, e))?;
        Ok(bytes)
    }

    /// Runs `change` under the log's lock, after catching up with the log, then
    /// logs the records it made (even if it then failed: they describe what it did)
    /// and applies them.
    fn locked<R>(
        &mut self,
        store: &MailStore,
        change: impl FnOnce(&Folder, &mut Txn) -> Result<R>,
    ) -> Result<R> {
        loop {
            rustix::fs::flock(&self.index, FlockOperation::LockExclusive)
                .map_err(|e| StoreError::io("lock", &self.index_path, e.into()))?;
            if self.path_inode()? == Some(self.inode) {
                break;
            }
            // Compacted meanwhile: our file is no longer the log.
            self.reopen()?;
        }
        let result = self.locked_inner(store, change);
        let _ = rustix::fs::flock(&self.index, FlockOperation::Unlock);
        result
    }

    fn locked_inner<R>(
        &mut self,
        store: &MailStore,
        change: impl FnOnce(&Folder, &mut Txn) -> Result<R>,
    ) -> Result<R> {
        self.read_tail()?;
        let len = self
            .index
            .metadata()
            .map_err(|e| StoreError::io("stat", &self.index_path, e))?
            .len();
        if len > self.offset {
            // A record torn by a crash (writers write whole records under the lock).
            self.index
                .set_len(self.offset)
                .map_err(|e| StoreError::io("truncate", &self.index_path, e))?;
        }
        let mut txn = Txn {
            modseq: self.state.highest_modseq + 1,
            next_uid: self.state.uid_next,
            records: Vec::new(),
            flushed: 0,
            flushed_bytes: 0,
        };
        let result = change(self, &mut txn);
        let written = txn.flush(self);
        self.offset += txn.flushed_bytes;
        for record in txn.records.drain(..txn.flushed) {
            self.state.apply(record);
        }
        written?;
        if txn.flushed > 0 {
            store.notify(self.mailbox);
            self.maybe_compact()?;
        }
        result
    }

    /// Appends `bytes` (whole records) at the end of the log and syncs it.
    fn append_log(&self, bytes: &[u8], already: u64) -> Result<()> {
        let mut file = &self.index;
        let at = self.offset + already;
        let written = file
            .seek(SeekFrom::Start(at))
            .and_then(|_| file.write_all(bytes))
            .and_then(|()| file.sync_data());
        if let Err(e) = written {
            // Nothing of a failed write may count: cut it off.
            let _ = self.index.set_len(at);
            return Err(StoreError::io("write", &self.index_path, e));
        }
        Ok(())
    }

    /// Reads the log from `offset`; applies its complete records.
    fn read_tail(&mut self) -> Result<()> {
        let mut file = &self.index;
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|e| StoreError::io("read", &self.index_path, e))?;
        let used = self
            .state
            .apply_log(&bytes)
            .map_err(|e| self.corrupt(&e.to_string()))?;
        self.offset += used as u64;
        Ok(())
    }

    /// Reads the whole log again (after it was replaced by a compaction).
    fn reopen(&mut self) -> Result<()> {
        let (index, inode) = open_index(&self.index_path, self.file_mode)?;
        self.index = index;
        self.inode = inode;
        self.reload()
    }

    fn reload(&mut self) -> Result<()> {
        let mut file = &self.index;
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(0))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|e| StoreError::io("read", &self.index_path, e))?;
        let (state, used) = IndexState::parse(&bytes).map_err(|e| self.corrupt(&e.to_string()))?;
        self.state = state;
        self.offset = used as u64;
        Ok(())
    }

    fn corrupt(&self, reason: &str) -> StoreError {
        StoreError::Corrupt {
            path: self.index_path.clone(),
            reason: reason.to_owned(),
        }
    }

    /// Compares the directory with the index (under the lock): new files get UIDs
    /// in name order (delivery order), vanished ones are expunged.
    fn scan(&self, txn: &mut Txn) -> Result<()> {
        let entries = list_dir(&self.dir)?;
        let on_disk: HashSet<&str> = entries.iter().map(|e| e.name.as_str()).collect();
        for message in self.state.messages() {
            if !on_disk.contains(message.name.as_str()) {
                txn.records.push(Record::Expunge {
                    uid: message.uid,
                    modseq: txn.modseq,
                });
            }
        }
        let known: HashSet<&str> = self.state.messages().map(|m| m.name.as_str()).collect();
        for entry in entries.iter().filter(|e| !known.contains(e.name.as_str())) {
            let Some(internal_date) = self.date_of(&entry.name)? else {
                continue;
            };
            let uid = txn.uid();
            txn.records.push(Record::Add(IndexedMessage {
                uid,
                modseq: txn.modseq,
                internal_date,
                size: entry.size,
                name: entry.name.clone(),
                flags: Vec::new(),
            }));
        }
        Ok(())
    }

    /// The internal date of a file found in the directory: the delivery time its
    /// name starts with, else its modification time (`None`: gone meanwhile).
    fn date_of(&self, name: &str) -> Result<Option<i64>> {
        if let Some(seconds) = name.split('.').next().filter(|s| s.len() >= 9)
            && let Ok(seconds) = seconds.parse::<i64>()
        {
            return Ok(Some(seconds));
        }
        match rustix::fs::statat(&self.dir_fd, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(stat.st_mtime)),
            Err(rustix::io::Errno::NOENT) => Ok(None),
            Err(e) => Err(StoreError::io("stat", self.dir.join(name), e.into())),
        }
    }

    /// Unlinks message files (already-gone ones are fine) and syncs the directory.
    fn remove_files<'a>(&self, names: impl Iterator<Item = &'a str>) -> Result<()> {
        let mut any = false;
        for name in names {
            match rustix::fs::unlinkat(&self.dir_fd, name, AtFlags::empty()) {
                Ok(()) => any = true,
                Err(rustix::io::Errno::NOENT) => {}
                Err(e) => return Err(StoreError::io("unlink", self.dir.join(name), e.into())),
            }
        }
        if any {
            rustix::fs::fsync(&self.dir_fd)
                .map_err(|e| StoreError::io("fsync", &self.dir, e.into()))?;
        }
        Ok(())
    }

    /// Rewrites a log much larger than its state as a snapshot (under the lock).
    fn maybe_compact(&mut self) -> Result<()> {
        let expunged = self.state.expunged.len().min(crate::index::MAX_EXPUNGED) as u64;
        let estimate = 1024 + self.state.len() as u64 * 120 + expunged * 16;
        if self.offset <= COMPACT_ABOVE || self.offset <= 2 * estimate {
            return Ok(());
        }
        let snapshot = self.state.snapshot();
        let tmp = self.dir.join(".index.tmp");
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(self.file_mode)
            .open(&tmp)
            .and_then(|mut file| {
                file.write_all(snapshot.as_bytes())?;
                file.sync_data()
            })
            .map_err(|e| StoreError::io("write", &tmp, e))?;
        fs::rename(&tmp, &self.index_path).map_err(|e| StoreError::io("rename", &tmp, e))?;
        sync_dir(&self.dir)?;
        // Keep holding the old file's lock until the caller unlocks; from now on
        // this handle reads the new file.
        let old = std::mem::replace(
            &mut self.index,
            open_index(&self.index_path, self.file_mode)?.0,
        );
        let _ = rustix::fs::flock(&old, FlockOperation::Unlock);
        self.inode = self.path_inode()?.unwrap_or_default();
        self.offset = snapshot.len() as u64;
        Ok(())
    }

    fn path_inode(&self) -> Result<Option<u64>> {
        match fs::metadata(&self.index_path) {
            Ok(meta) => Ok(Some(meta.ino())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StoreError::io("stat", &self.index_path, e)),
        }
    }

    fn dir_stamp(&self) -> Result<(i64, i64)> {
        let stat = rustix::fs::fstat(self.dir_fd.as_fd())
            .map_err(|e| StoreError::io("stat", &self.dir, e.into()))?;
        Ok((stat.st_mtime, stat.st_mtime_nsec as i64))
    }
}

impl ReleasedFolder {
    /// The folder.
    pub fn info(&self) -> &FolderInfo {
        &self.info
    }

    /// The mailbox it belongs to.
    pub fn mailbox(&self) -> MailboxId {
        self.mailbox
    }

    /// The state as of the release (or the last refresh before it).
    pub fn state(&self) -> &IndexState {
        &self.state
    }

    /// Opens the directory and the log again. A log replaced meanwhile (compacted
    /// by another session) is read whole, as [`Folder::refresh`] would; otherwise
    /// nothing is read: the next refresh reads on from the offset. A folder deleted
    /// meanwhile is [`StoreError::NoSuchFolder`]. On failure the released folder
    /// comes back unchanged, to try again later.
    pub fn reacquire(self) -> Result<Folder, Box<(ReleasedFolder, StoreError)>> {
        let (dir_fd, index, inode) = match self.open_files() {
            Ok(files) => files,
            Err(e) => return Err(Box::new((self, e))),
        };
        let same_log =
            inode == self.inode && self.born.is_some() && birth_time(&index) == self.born;
        let ReleasedFolder {
            mailbox,
            info,
            dir,
            index_path,
            inode: _,
            born,
            offset,
            state,
            scanned,
            file_mode,
        } = self;
        let mut folder = Folder {
            mailbox,
            info,
            dir,
            dir_fd,
            index_path,
            index,
            inode,
            offset,
            state,
            scanned,
            file_mode,
        };
        if !same_log && let Err(e) = folder.reload() {
            // `reload` changed nothing: the old identity makes the next try read
            // the new log whole again.
            let mut released = folder.release();
            released.born = born;
            return Err(Box::new((released, e)));
        }
        Ok(folder)
    }

    /// The directory, the log and the log's inode.
    fn open_files(&self) -> Result<(OwnedFd, File, u64)> {
        let gone = || StoreError::NoSuchFolder(self.info.name.clone());
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let dir_fd = match rustix::fs::open(&self.dir, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT) => return Err(gone()),
            Err(e) => return Err(StoreError::io("open", &self.dir, e.into())),
        };
        match open_index(&self.index_path, self.file_mode) {
            Ok((index, inode)) => Ok((dir_fd, index, inode)),
            // The directory went between the two opens.
            Err(StoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                Err(gone())
            }
            Err(e) => Err(e),
        }
    }
}

/// A file's birth time (`statx`), if the file system keeps one.
fn birth_time(file: &File) -> Option<(i64, u32)> {
    let stat = rustix::fs::statx(file, "", AtFlags::EMPTY_PATH, StatxFlags::BTIME).ok()?;
    (stat.stx_mask & StatxFlags::BTIME.bits() != 0)
        .then_some((stat.stx_btime.tv_sec, stat.stx_btime.tv_nsec))
}

/// Opens (creating if needed, with its header) a folder's log; returns it and its
/// inode.
fn open_index(path: &Path, mode: u32) -> Result<(File, u64)> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(mode)
        .open(path)
        .map_err(|e| StoreError::io("open", path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| StoreError::io("stat", path, e))?;
    if meta.len() == 0 {
        rustix::fs::flock(&file, FlockOperation::LockExclusive)
            .map_err(|e| StoreError::io("lock", path, e.into()))?;
        let mut handle = &file;
        let len = handle.metadata().map(|m| m.len()).unwrap_or(0);
        let written = if len == 0 {
            handle
                .write_all(IndexState::header(new_uid_validity()).as_bytes())
                .and_then(|()| handle.sync_data())
        } else {
            Ok(())
        };
        let _ = rustix::fs::flock(&file, FlockOperation::Unlock);
        written.map_err(|e| StoreError::io("write", path, e))?;
        if let Some(dir) = path.parent() {
            sync_dir(dir)?;
        }
    }
    Ok((file, meta.ino()))
}

/// A UIDVALIDITY larger than any this process gave before.
fn new_uid_validity() -> u32 {
    let clock = u32::try_from(now()).unwrap_or(u32::MAX).max(1);
    let mut last = LAST_UID_VALIDITY.load(Ordering::Relaxed);
    loop {
        let next = clock.max(last.saturating_add(1));
        match LAST_UID_VALIDITY.compare_exchange(last, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return next,
            Err(seen) => last = seen,
        }
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Whether a directory change time is too recent to trust as "nothing changed
/// since": two changes within the file system's timestamp granularity look alike.
fn recent(stamp: (i64, i64)) -> bool {
    now() - stamp.0 <= 1
}

/// `current` after a STORE of `flags` with `op`, normalized.
fn apply_op(current: &[String], op: FlagOp, flags: &[String]) -> Vec<String> {
    let has = |list: &[String], f: &str| list.iter().any(|x| x.eq_ignore_ascii_case(f));
    let new = match op {
        FlagOp::Replace => flags.to_vec(),
        FlagOp::Add => current
            .iter()
            .cloned()
            .chain(flags.iter().filter(|f| !has(current, f)).cloned())
            .collect(),
        FlagOp::Remove => current.iter().filter(|f| !has(flags, f)).cloned().collect(),
    };
    normalize_flags(new)
}
