//! The per-worker open-file cache: path → open descriptor, metadata, pre-encoded
//! header lines and, for small files, the contents.
//!
//! Like nginx's `open_file_cache`, a lookup is trusted for
//! [`CacheConfig::revalidate`] (1 s); after that the path is looked at again with one
//! `stat` and compared by device, inode, size, modification time and mode, so a
//! replaced or edited file is picked up within a second (and opened again) and an
//! unchanged one keeps its descriptor and cached contents.
//! Misses (404, 403, directories) are cached the same way, which also keeps a flood
//! of requests for missing files from costing a system call each.
//!
//! A file small enough to keep in memory ([`CacheConfig::max_memory_file`]) is
//! read once and its descriptor closed: only the files sent with `sendfile` hold
//! one, under a bound of their own ([`CacheConfig::max_open_files`]), so the
//! cache can hold many more paths than descriptors (the SPECweb99 file set at
//! 1,600 connections is 38,664 files, 42 % of them above 32 KiB). Everything an
//! entry keeps in memory (contents, key, header lines, the entry itself) counts
//! against [`CacheConfig::memory_budget`], so a flood of long distinct paths is
//! bounded in bytes, not only in entries.
//!
//! Every open goes through `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` from a
//! descriptor of the document root: the kernel refuses any resolution, `..` or
//! symlink, that leaves the root, with no check-then-open race. Files are opened
//! `O_NONBLOCK` so a FIFO cannot stall the worker, and only regular files are served.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bytes::Bytes;
use lru::LruCache;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

use crate::config::CacheConfig;

/// What a path resolved to.
#[derive(Debug)]
pub(crate) enum Kind {
    /// A regular file to serve.
    File(FileInfo),
    /// A directory named without its trailing slash: redirect.
    Directory,
    /// Nothing there, or outside the root.
    NotFound,
    /// There, but not servable: no permission, not a regular file.
    Forbidden,
    /// A directory (named with its trailing slash) without `index.html`: 403,
    /// or its listing where the site has `autoindex`.
    NoIndex,
    /// The server could not look (descriptor table full, I/O error).
    Unavailable,
}

/// Where a cached file's bytes come from.
#[derive(Debug, Clone)]
pub(crate) enum Contents {
    /// Kept in memory (a file of up to [`CacheConfig::max_memory_file`]); its
    /// descriptor was closed once it was read.
    Memory(Bytes),
    /// An open descriptor, for `sendfile` (or `pread`).
    Open(Arc<File>),
}

/// A servable file.
#[derive(Debug, Clone)]
pub(crate) struct FileInfo {
    pub(crate) contents: Contents,
    pub(crate) len: u64,
    pub(crate) mtime: u64,
    /// `"<mtime hex>-<size hex>"`, nginx's entity-tag shape.
    pub(crate) etag: Box<[u8]>,
    /// `Content-Type`, `Last-Modified`, `ETag` and `Accept-Ranges` lines, CRLF-ended.
    pub(crate) header_lines: Box<[u8]>,
    /// The media type of `Content-Type`, from the name's extension.
    pub(crate) media_type: &'static str,
}

/// Device, inode, size, modification time: what tells a changed file apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: i64,
    mtime: i64,
    mtime_nsec: i64,
    mode: u32,
}

impl Identity {
    fn of(st: &Stat) -> Identity {
        Identity {
            dev: st.st_dev,
            ino: st.st_ino,
            size: st.st_size,
            mtime: st.st_mtime,
            mtime_nsec: st.st_mtime_nsec as i64,
            mode: st.st_mode,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) kind: Kind,
    identity: Option<Identity>,
    /// When the entry is to be checked against the file again (`None`: never,
    /// the revalidation period being too long to add to the clock). A deadline
    /// rather than the check's time: comparing two `Instant`s costs a few
    /// instructions, subtracting them about forty, on every request.
    stale_at: Option<Instant>,
}

/// What an entry costs beyond its contents and strings: the entry, and the
/// LRU's node and table slot (a generous round figure; it only has to keep a
/// flood of small entries bounded in bytes).
const ENTRY_OVERHEAD: usize = size_of::<Entry>() + 64;

impl Entry {
    /// The bytes this entry, under a key of `key_len` bytes, holds.
    fn memory(&self, key_len: usize) -> usize {
        let file = match &self.kind {
            Kind::File(f) => {
                let contents = match &f.contents {
                    Contents::Memory(bytes) => bytes.len(),
                    Contents::Open(_) => 0,
                };
                contents + f.etag.len() + f.header_lines.len()
            }
            _ => 0,
        };
        ENTRY_OVERHEAD + key_len + file
    }

    /// Whether the entry holds an open descriptor.
    fn holds_descriptor(&self) -> bool {
        matches!(
            &self.kind,
            Kind::File(FileInfo {
                contents: Contents::Open(_),
                ..
            })
        )
    }
}

/// How many of the least recently used entries an eviction for a descriptor
/// looks through for one that holds a descriptor, before it takes the least
/// recent entry whatever it holds: an eviction's cost stays bounded.
const DESCRIPTOR_SCAN: usize = 64;

/// One worker's cache, for every site of its server: one LRU under one bound on
/// entries, bytes and descriptors, keyed by (site, path). Site 0's key is the path itself
/// (a decoded path starts with `/`), so a server with one site looks up exactly
/// as before sites existed; another site's key is a zero byte, the site's
/// number and the path, built in a buffer the cache keeps.
#[derive(Debug)]
pub(crate) struct FileCache {
    entries: LruCache<Box<[u8]>, Entry>,
    /// What the entries hold in memory ([`Entry::memory`]).
    memory: usize,
    /// Entries holding an open descriptor.
    descriptors: usize,
    config: CacheConfig,
    /// The key of a lookup for a site other than the first.
    key: Vec<u8>,
}

impl FileCache {
    pub(crate) fn new(config: CacheConfig) -> FileCache {
        FileCache {
            entries: LruCache::unbounded(),
            memory: 0,
            descriptors: 0,
            config,
            key: Vec::new(),
        }
    }

    /// Resolves `path` (normalised, starting with `/`) beneath `root`, site
    /// `site`'s document root.
    #[inline]
    pub(crate) fn lookup(
        &mut self,
        site: usize,
        root: &OwnedFd,
        path: &[u8],
        now: Instant,
    ) -> &Entry {
        if site != 0 {
            return self.lookup_other(site, root, path, now);
        }
        if self.is_stale(path, now) {
            self.refresh(path, root, path, now);
        }
        self.entries
            .get(path)
            .expect("invariant: refresh leaves an entry for the path")
    }

    /// [`FileCache::lookup`] for a site other than the first.
    #[inline(never)]
    fn lookup_other(&mut self, site: usize, root: &OwnedFd, path: &[u8], now: Instant) -> &Entry {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.push(0);
        key.extend_from_slice(&u32::try_from(site).unwrap_or(u32::MAX).to_le_bytes());
        key.extend_from_slice(path);
        if self.is_stale(&key, now) {
            self.refresh(&key, root, path, now);
        }
        self.key = key;
        self.entries
            .get(self.key.as_slice())
            .expect("invariant: refresh leaves an entry for the key")
    }

    fn is_stale(&mut self, key: &[u8], now: Instant) -> bool {
        match self.entries.get(key) {
            Some(e) => e.stale_at.is_some_and(|at| now >= at),
            None => true,
        }
    }

    /// [`Entry::stale_at`] for an entry checked `now`.
    fn next_check(&self, now: Instant) -> Option<Instant> {
        now.checked_add(self.config.revalidate)
    }

    fn refresh(&mut self, key: &[u8], root: &OwnedFd, path: &[u8], now: Instant) {
        let stale_at = self.next_check(now);
        if let Some(old) = self.entries.get_mut(key)
            && let Some(identity) = old.identity
            && still(root, path, identity)
        {
            // Unchanged: keep the cached descriptor and contents.
            old.stale_at = stale_at;
            return;
        }
        let (opened, identity) = open(root, path);
        let kind = match opened {
            Opened::File(file, st) => Kind::File(self.file_info(file, &st, path)),
            Opened::Other(kind) => kind,
        };
        let entry = Entry {
            kind,
            identity,
            stale_at,
        };
        self.count(key, &entry);
        if let Some(old) = self.entries.put(key.into(), entry) {
            self.uncount(key, &old);
        }
        self.evict();
    }

    fn count(&mut self, key: &[u8], entry: &Entry) {
        self.memory += entry.memory(key.len());
        self.descriptors += usize::from(entry.holds_descriptor());
    }

    fn uncount(&mut self, key: &[u8], entry: &Entry) {
        self.memory -= entry.memory(key.len());
        self.descriptors -= usize::from(entry.holds_descriptor());
    }

    fn file_info(&self, file: File, st: &Stat, path: &[u8]) -> FileInfo {
        let len = st.st_size as u64;
        let mtime = st.st_mtime.max(0) as u64;
        let contents = match (len <= self.config.max_memory_file
            && (len as usize) <= self.config.memory_budget)
            .then(|| read_all(&file, len))
            .flatten()
        {
            // The descriptor closes here: revalidation looks at the path.
            Some(bytes) => Contents::Memory(bytes),
            None => Contents::Open(Arc::new(file)),
        };
        let etag = format!("\"{mtime:x}-{len:x}\"")
            .into_bytes()
            .into_boxed_slice();
        let media_type = content_type(served_name(path));
        FileInfo {
            header_lines: header_lines(media_type, mtime, &etag),
            media_type,
            contents,
            len,
            mtime,
            etag,
        }
    }

    /// Brings the cache back within its bounds, least recently used first. The
    /// entry just looked up is the most recent and is never evicted (an entry
    /// over the memory budget on its own stays until the next one comes), so a
    /// lookup always finds it.
    fn evict(&mut self) {
        while self.entries.len() > 1
            && (self.entries.len() > self.config.max_entries
                || self.memory > self.config.memory_budget)
        {
            match self.entries.pop_lru() {
                Some((key, old)) => self.uncount(&key, &old),
                None => break,
            }
        }
        while self.descriptors > self.config.max_open_files {
            let holder = self
                .entries
                .iter()
                .rev()
                .take(DESCRIPTOR_SCAN)
                .find(|(_, e)| e.holds_descriptor())
                .map(|(key, _)| key.clone());
            let evicted = match holder {
                Some(key) => self.entries.pop_entry(&key),
                None => self.entries.pop_lru(),
            };
            match evicted {
                Some((key, old)) => self.uncount(&key, &old),
                None => break,
            }
        }
    }
}

fn read_all(file: &File, len: u64) -> Option<Bytes> {
    let mut buf = vec![0; usize::try_from(len).ok()?];
    file.read_exact_at(&mut buf, 0).ok()?;
    Some(Bytes::from(buf))
}

/// The name whose extension gives a path's media type: the directory's index
/// for a path ending in `/`.
fn served_name(path: &[u8]) -> &[u8] {
    if path.ends_with(b"/") { INDEX } else { path }
}

/// `Content-Type`, `Last-Modified`, `ETag` and `Accept-Ranges` lines, CRLF-ended
/// (an encoded representation's too, `Content-Encoding` added after them).
pub(crate) fn header_lines(media_type: &str, mtime: u64, etag: &[u8]) -> Box<[u8]> {
    let mut lines = Vec::with_capacity(160);
    lines.extend_from_slice(b"Content-Type: ");
    lines.extend_from_slice(media_type.as_bytes());
    lines.extend_from_slice(b"\r\nLast-Modified: ");
    stoa_http_proto::date::write_http_date(&mut lines, mtime);
    lines.extend_from_slice(b"\r\nETag: ");
    lines.extend_from_slice(etag);
    lines.extend_from_slice(b"\r\nAccept-Ranges: bytes\r\n");
    lines.into_boxed_slice()
}

/// The media type for a file name's extension; `application/octet-stream` when
/// unknown (nginx's `default_type` in Debian's configuration).
pub(crate) fn content_type(path: &[u8]) -> &'static str {
    let name = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    let ext = match memchr::memrchr(b'.', name) {
        Some(i) if i > 0 => &name[i + 1..],
        _ => return "application/octet-stream",
    };
    std::str::from_utf8(ext)
        .ok()
        .and_then(|ext| mime_guess::from_ext(ext).first_raw())
        .unwrap_or("application/octet-stream")
}

/// The file served for a directory path ending in `/`.
pub(crate) const INDEX: &[u8] = b"index.html";

enum Opened {
    File(File, Stat),
    Other(Kind),
}

const OPEN_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::NONBLOCK)
    .union(OFlags::CLOEXEC)
    .union(OFlags::NOCTTY);
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_MAGICLINKS);

/// Set once `openat2` has failed with `ENOSYS` (Linux before 5.6, or valgrind).
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

pub(crate) fn open_beneath(root: &OwnedFd, rel: &[u8]) -> Result<(OwnedFd, Stat), Errno> {
    let fd = if NO_OPENAT2.load(Ordering::Relaxed) {
        open_without_symlinks(root, rel)?
    } else {
        match rustix::fs::openat2(root.as_fd(), rel, OPEN_FLAGS, Mode::empty(), RESOLVE) {
            Err(Errno::NOSYS) => {
                tracing::warn!(
                    "openat2 is unavailable: symlinks in the document root will not be followed"
                );
                NO_OPENAT2.store(true, Ordering::Relaxed);
                open_without_symlinks(root, rel)?
            }
            other => other?,
        }
    };
    let st = rustix::fs::fstat(&fd)?;
    Ok((fd, st))
}

/// The fallback without `openat2`: one `openat(O_NOFOLLOW)` per component, so no
/// symlink is followed at all (stricter than `RESOLVE_BENEATH`, never looser). The
/// path has no `..` or `.` segments: the target decoder removed them.
fn open_without_symlinks(root: &OwnedFd, rel: &[u8]) -> Result<OwnedFd, Errno> {
    let mut components = rel
        .split(|&b| b == b'/')
        .filter(|c| !c.is_empty())
        .peekable();
    let dir_flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir: Option<OwnedFd> = None;
    while let Some(name) = components.next() {
        let at = dir.as_ref().map_or(root.as_fd(), AsFd::as_fd);
        if components.peek().is_none() {
            return rustix::fs::openat(at, name, OPEN_FLAGS | OFlags::NOFOLLOW, Mode::empty());
        }
        dir = Some(rustix::fs::openat(at, name, dir_flags, Mode::empty())?);
    }
    // Empty path or "." : the root itself.
    rustix::fs::openat(root.as_fd(), ".", OPEN_FLAGS, Mode::empty())
}

/// Whether `path` beneath `root` still names the file of `identity`: one `stat`
/// instead of an open, a `fstat` and a close (nginx revalidates with a `stat` too).
/// The `stat` follows symbolic links without `RESOLVE_BENEATH`, which is safe
/// here: a match means the path leads to the very inode the cache opened beneath
/// the root, and what is served is that open descriptor; anything else, a path
/// that now leaves the root included, goes through [`open`] again.
fn still(root: &OwnedFd, path: &[u8], identity: Identity) -> bool {
    let (rel, wants_dir) = relative(path);
    let st = if wants_dir {
        rustix::fs::statat(root, [rel, INDEX].concat(), AtFlags::empty())
    } else {
        rustix::fs::statat(root, rel, AtFlags::empty())
    };
    st.is_ok_and(|st| Identity::of(&st) == identity)
}

/// `path` relative to the root, and whether it names a directory (ends in `/`,
/// or is the root itself), whose `index.html` is what is served.
fn relative(path: &[u8]) -> (&[u8], bool) {
    let rel = path.strip_prefix(b"/").unwrap_or(path);
    (rel, rel.is_empty() || rel.ends_with(b"/"))
}

/// Opens `path` beneath `root`: the file itself, or `index.html` for a path ending
/// in `/`.
fn open(root: &OwnedFd, path: &[u8]) -> (Opened, Option<Identity>) {
    let (rel, wants_dir) = relative(path);
    let result = if wants_dir {
        let index = [rel, INDEX].concat();
        match open_beneath(root, &index) {
            Err(Errno::NOENT) => {
                // No index: 403 if the directory exists (nginx), 404 if not.
                let dir = if rel.is_empty() { &b"."[..] } else { rel };
                return match open_beneath(root, dir) {
                    Ok(_) => (Opened::Other(Kind::NoIndex), None),
                    Err(e) => (Opened::Other(kind_of_error(e, path)), None),
                };
            }
            other => other,
        }
    } else {
        open_beneath(root, rel)
    };
    match result {
        Ok((fd, st)) => {
            let identity = Some(Identity::of(&st));
            let opened = match FileType::from_raw_mode(st.st_mode) {
                FileType::RegularFile => Opened::File(File::from(fd), st),
                FileType::Directory if !wants_dir => Opened::Other(Kind::Directory),
                _ => Opened::Other(Kind::Forbidden),
            };
            (opened, identity)
        }
        Err(e) => (Opened::Other(kind_of_error(e, path)), None),
    }
}

fn kind_of_error(e: Errno, path: &[u8]) -> Kind {
    match e {
        // EXDEV: RESOLVE_BENEATH refused a path leaving the root.
        Errno::NOENT | Errno::NOTDIR | Errno::XDEV | Errno::LOOP | Errno::NAMETOOLONG => {
            Kind::NotFound
        }
        Errno::ACCESS | Errno::PERM => Kind::Forbidden,
        e => {
            tracing::error!("open {}: {e}", String::from_utf8_lossy(path));
            Kind::Unavailable
        }
    }
}

#[cfg(test)]
mod tests;
