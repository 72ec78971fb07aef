//! Small file system helpers with the store's error context and fsync discipline.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use crate::error::{Result, StoreError};
use crate::layout::parse_name;

/// Makes the entries of `dir` (new names, removals) durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StoreError::io("fsync", dir, e))
}

/// The permission bits of what the store creates (before the umask).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Modes {
    /// Message files.
    pub(crate) file: u32,
    /// Directories.
    pub(crate) dir: u32,
}

/// Creates `dir` and its missing parents with permissions `mode` (existing ones
/// are left as they are).
pub(crate) fn create_dir_all(dir: &Path, mode: u32) -> Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(mode)
        .create(dir)
        .map_err(|e| StoreError::io("mkdir", dir, e))
}

/// Options that create a new file with permissions `mode`, failing if it exists.
pub(crate) fn create_new(mode: u32) -> OpenOptions {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true).mode(mode);
    options
}

/// Creates `dir` with permissions `mode` if missing, durably: when it is new, its
/// parent is fsynced so that the new name survives a crash. Returns whether it was
/// created. A name that exists as something else than a directory is left for the
/// next operation to fail on.
pub(crate) fn ensure_dir(dir: &Path, mode: u32) -> Result<bool> {
    match fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => {
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
            Ok(true)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(StoreError::io("mkdir", dir, e)),
    }
}

/// One message file found by a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The file name in the mailbox directory.
    pub(crate) name: String,
    /// The uid (from the name).
    pub(crate) uid: String,
    /// The size in bytes.
    pub(crate) size: u64,
}

/// The messages in a mailbox directory, sorted by name (delivery order for the
/// store's own names); a missing directory is an empty mailbox. Sizes come from the
/// names, so a listing is one `getdents` pass; files without a size in their name
/// are `stat`ed. Hidden files, subdirectories and names that are not UTF-8 are not
/// messages.
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<Entry>> {
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("read", dir, e)),
    };
    let mut entries = Vec::new();
    for entry in read {
        let entry = entry.map_err(|e| StoreError::io("read", dir, e))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if name.starts_with('.') || !is_file {
            continue;
        }
        let parsed = parse_name(&name);
        let size = match parsed.size {
            Some(size) => size,
            None => match entry.metadata() {
                Ok(meta) => meta.len(),
                // Removed between readdir and stat: not a message any more.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("stat", entry.path(), e)),
            },
        };
        entries.push(Entry {
            name,
            uid: parsed.uid,
            size,
        });
    }
    entries.sort_unstable_by(|a, b| a.name.cmp(&b.name));
    Ok(entries)
}
