//! The directory file: its format, loading, and the atomic rewrite.
//!
//! The format and the write protocol are described in the parent module.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::{self, File, OpenOptions, Permissions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::address::{domain_of, is_normal_address, is_normal_domain};
use crate::error::{Error, Result};

/// The directory file's name.
pub(crate) const FILE: &str = "entries.txt";
/// The temporary file a save writes first.
pub(crate) const TEMP_FILE: &str = "entries.txt.tmp";
/// The lock file writers hold.
const LOCK_FILE: &str = "lock";
/// The permissions of the directory file, its temporary file and the lock file:
/// the file holds password hashes, so only its owner reads it.
pub(crate) const FILE_MODE: u32 = 0o600;
/// The permissions of the directory's own directory when this creates it.
pub(crate) const DIR_MODE: u32 = 0o700;
/// The first line of every directory file.
const HEADER: &str = "stoa-directory 1";
/// Buffer size for reading and writing the file: large, since at 1.5 M users it holds
/// about 250 MB.
const IO_BUFFER: usize = 1 << 20;

/// One user as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UserRecord {
    pub(crate) mailbox: u64,
    pub(crate) mail_host: Option<Box<str>>,
    pub(crate) password: Option<Box<str>>,
}

/// The whole directory in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) domains: BTreeSet<String>,
    pub(crate) users: HashMap<Box<str>, UserRecord>,
    pub(crate) aliases: HashMap<Box<str>, Vec<Box<str>>>,
    pub(crate) next_mailbox: u64,
}

impl Default for Snapshot {
    fn default() -> Self {
        Snapshot {
            domains: BTreeSet::new(),
            users: HashMap::new(),
            aliases: HashMap::new(),
            next_mailbox: 1,
        }
    }
}

/// What identifies one version of the file: every save renames a new inode into
/// place, so a changed inode (or size or time) means a changed directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FileId {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
}

impl FileId {
    fn of(meta: &fs::Metadata) -> FileId {
        FileId {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }
    }
}

/// The current file's identity, or `None` when there is no file.
pub(crate) fn current_id(dir: &Path) -> Result<Option<FileId>> {
    let path = dir.join(FILE);
    match fs::metadata(&path) {
        Ok(meta) => Ok(Some(FileId::of(&meta))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Holds the writers' lock until dropped.
#[derive(Debug)]
pub(crate) struct Lock {
    _file: File,
}

/// Takes the exclusive writers' lock, waiting for another writer to finish.
pub(crate) fn lock(dir: &Path) -> Result<Lock> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(FILE_MODE)
        .open(&path)
        .map_err(|e| Error::io(&path, e))?;
    owned_like_dir(&file, dir).map_err(|e| Error::io(&path, e))?;
    rustix::fs::flock(&file, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| Error::io(&path, e.into()))?;
    Ok(Lock { _file: file })
}

/// Reads the file, with the identity of exactly the version read.
pub(crate) fn load(dir: &Path) -> Result<(Snapshot, FileId)> {
    let path = dir.join(FILE);
    let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
    let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
    let mut parser = Parser {
        path: &path,
        line: 0,
        snapshot: Snapshot::default(),
        mailboxes: HashSet::new(),
        records: 0,
        ended: false,
        size: meta.len(),
    };
    let mut reader = BufReader::with_capacity(IO_BUFFER, file);
    let mut text = String::new();
    loop {
        text.clear();
        let n = reader
            .read_line(&mut text)
            .map_err(|e| Error::io(&path, e))?;
        if n == 0 {
            break;
        }
        parser.line += 1;
        let Some(line) = text.strip_suffix('\n') else {
            return Err(parser.corrupt("last line not terminated"));
        };
        parser.parse_line(line)?;
    }
    parser
        .finish()
        .map(|snapshot| (snapshot, FileId::of(&meta)))
}

/// Line-by-line reader of the format.
struct Parser<'p> {
    path: &'p Path,
    line: usize,
    snapshot: Snapshot,
    mailboxes: HashSet<u64>,
    records: u64,
    ended: bool,
    /// The file's size, to bound the capacity reserved for users.
    size: u64,
}

impl Parser<'_> {
    fn corrupt(&self, reason: impl Into<String>) -> Error {
        Error::Corrupt {
            path: self.path.to_owned(),
            line: self.line,
            reason: reason.into(),
        }
    }

    fn parse_line(&mut self, line: &str) -> Result<()> {
        if self.ended {
            return Err(self.corrupt("data after the end line"));
        }
        if self.line == 1 {
            return if line == HEADER {
                Ok(())
            } else {
                Err(self.corrupt(format!("expected {HEADER:?}")))
            };
        }
        let (kind, rest) = line.split_once(' ').unwrap_or((line, ""));
        match kind {
            "next-mailbox" if self.line == 2 => {
                self.snapshot.next_mailbox = self.number(rest)?;
                // Every mailbox id ever given out is below it, and a user line is over
                // 32 bytes: reserve once instead of rehashing ~20 times on the way to
                // 1.5 M users.
                let users = self
                    .snapshot
                    .next_mailbox
                    .saturating_sub(1)
                    .min(self.size / 32);
                let users = usize::try_from(users).unwrap_or(0);
                self.snapshot.users.reserve(users);
                self.mailboxes.reserve(users);
                return Ok(());
            }
            "domain" => self.domain(rest)?,
            "user" => {
                let mut f = rest.split(' ');
                let (Some(address), Some(mailbox), Some(host), Some(password), None) =
                    (f.next(), f.next(), f.next(), f.next(), f.next())
                else {
                    return Err(self.corrupt("a user line has four fields"));
                };
                self.user(address, mailbox, host, password)?;
            }
            "alias" => {
                let (address, targets) = rest.split_once(' ').unwrap_or((rest, ""));
                self.alias(address, targets)?;
            }
            "end" => {
                if self.number(rest)? != self.records {
                    return Err(self.corrupt("record count does not match"));
                }
                self.ended = true;
                return Ok(());
            }
            _ => return Err(self.corrupt(format!("unknown record {kind:?}"))),
        }
        self.records += 1;
        Ok(())
    }

    fn number(&self, text: &str) -> Result<u64> {
        text.parse()
            .map_err(|_| self.corrupt(format!("bad number {text:?}")))
    }

    /// Refuses a name that is not in its normal form.
    fn canonical(&self, name: &str, normal: bool) -> Result<()> {
        if normal {
            Ok(())
        } else {
            Err(self.corrupt(format!("invalid or non-canonical name {name:?}")))
        }
    }

    fn domain(&mut self, name: &str) -> Result<()> {
        self.canonical(name, is_normal_domain(name))?;
        if !self.snapshot.domains.insert(name.to_owned()) {
            return Err(self.corrupt(format!("duplicate domain {name}")));
        }
        Ok(())
    }

    fn user(&mut self, address: &str, mailbox: &str, host: &str, password: &str) -> Result<()> {
        self.canonical(address, is_normal_address(address))?;
        let mailbox = self.number(mailbox)?;
        if mailbox == 0 || mailbox >= self.snapshot.next_mailbox || !self.mailboxes.insert(mailbox)
        {
            return Err(self.corrupt(format!("bad or duplicate mailbox id {mailbox}")));
        }
        let mail_host = match host {
            "-" => None,
            host => {
                self.canonical(host, is_normal_domain(host))?;
                Some(host.into())
            }
        };
        let password = match password {
            "-" => None,
            // Version 1 before schemes: a bare argon2 PHC string.
            phc if phc.starts_with("$argon2") => Some(format!("{{ARGON2ID}}{phc}").into()),
            value if crate::scheme::scheme_of(value).is_some() => Some(value.into()),
            _ => {
                return Err(
                    self.corrupt("password is not a {SCHEME}value of a scheme this version checks")
                );
            }
        };
        let record = UserRecord {
            mailbox,
            mail_host,
            password,
        };
        if self.snapshot.users.insert(address.into(), record).is_some() {
            return Err(self.corrupt(format!("duplicate user {address}")));
        }
        Ok(())
    }

    fn alias(&mut self, address: &str, targets: &str) -> Result<()> {
        self.canonical(address, is_normal_address(address))?;
        let targets: Vec<Box<str>> = targets.split(' ').map(Into::into).collect();
        for target in &targets {
            self.canonical(target, is_normal_address(target))?;
        }
        if self
            .snapshot
            .aliases
            .insert(address.into(), targets)
            .is_some()
        {
            return Err(self.corrupt(format!("duplicate alias {address}")));
        }
        Ok(())
    }

    /// Checks what can only be checked once everything is read.
    fn finish(self) -> Result<Snapshot> {
        if !self.ended {
            return Err(self.corrupt("missing end line (truncated file)"));
        }
        let snapshot = self.snapshot;
        let names = snapshot.users.keys().chain(snapshot.aliases.keys());
        for name in names {
            if !snapshot.domains.contains(domain_of(name)) {
                return Err(Error::Corrupt {
                    path: self.path.to_owned(),
                    line: self.line,
                    reason: format!("{name} is not in a local domain"),
                });
            }
        }
        if let Some(both) = snapshot
            .users
            .keys()
            .find(|u| snapshot.aliases.contains_key(*u))
        {
            return Err(Error::Corrupt {
                path: self.path.to_owned(),
                line: self.line,
                reason: format!("{both} is both a user and an alias"),
            });
        }
        Ok(snapshot)
    }
}

/// Writes `snapshot` as the new directory file, atomically and durably; returns the
/// new file's identity.
pub(crate) fn save(dir: &Path, snapshot: &Snapshot) -> Result<FileId> {
    let temp = dir.join(TEMP_FILE);
    let result = write_temp(&temp, snapshot).and_then(|_| {
        let path = dir.join(FILE);
        fs::rename(&temp, &path).map_err(|e| Error::io(&path, e))?;
        sync_dir(dir)?;
        let meta = fs::metadata(&path).map_err(|e| Error::io(&path, e))?;
        Ok(FileId::of(&meta))
    });
    if result.is_err() {
        // Best effort: a leftover is harmless (never read, overwritten next time).
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Creates `dir` (and missing parents) with [`DIR_MODE`].
pub(crate) fn create_dir(dir: &Path) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(|e| Error::io(dir, e))
}

/// Gives `file` the owner and group of `dir` when this process may (root) and
/// they differ: `stoa user add` run by root on a directory that a server running
/// as an unprivileged user reads must not leave a file that user cannot open.
fn owned_like_dir(file: &File, dir: &Path) -> std::io::Result<()> {
    if !rustix::process::geteuid().is_root() {
        return Ok(());
    }
    let (want, have) = (fs::metadata(dir)?, file.metadata()?);
    if (want.uid(), want.gid()) == (have.uid(), have.gid()) {
        return Ok(());
    }
    let uid = rustix::fs::Uid::from_raw(want.uid());
    let gid = rustix::fs::Gid::from_raw(want.gid());
    rustix::fs::fchown(file, Some(uid), Some(gid))?;
    Ok(())
}

/// Writes and fsyncs the temporary file, truncating any leftover of a crashed save.
/// It is made [`FILE_MODE`] even when a leftover had other permissions, and owned
/// like the directory ([`owned_like_dir`]).
fn write_temp(temp: &PathBuf, snapshot: &Snapshot) -> Result<()> {
    let io = |e| Error::io(temp, e);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(temp)
        .map_err(io)?;
    file.set_permissions(Permissions::from_mode(FILE_MODE))
        .map_err(io)?;
    if let Some(dir) = temp.parent() {
        owned_like_dir(&file, dir).map_err(io)?;
    }
    let mut out = BufWriter::with_capacity(IO_BUFFER, file);
    write_records(&mut out, snapshot).map_err(io)?;
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)
}

fn write_records(out: &mut impl Write, snapshot: &Snapshot) -> std::io::Result<()> {
    writeln!(out, "{HEADER}")?;
    writeln!(out, "next-mailbox {}", snapshot.next_mailbox)?;
    for domain in &snapshot.domains {
        writeln!(out, "domain {domain}")?;
    }
    for (address, user) in &snapshot.users {
        let host = user.mail_host.as_deref().unwrap_or("-");
        let password = user.password.as_deref().unwrap_or("-");
        writeln!(out, "user {address} {} {host} {password}", user.mailbox)?;
    }
    for (address, targets) in &snapshot.aliases {
        write!(out, "alias {address}")?;
        for target in targets {
            write!(out, " {target}")?;
        }
        writeln!(out)?;
    }
    let records = snapshot.domains.len() + snapshot.users.len() + snapshot.aliases.len();
    writeln!(out, "end {records}")
}

/// Makes a rename in `dir` durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}
