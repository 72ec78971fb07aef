//! Precompressed siblings: `page.html.gz`, `page.html.br` and `page.html.zst`
//! written beside `page.html`, which the server sends to clients that take
//! the coding (`[web.compression] precompressed`, nginx's `gzip_static`,
//! Caddy's `precompressed`). `stoa compress DIR` runs [`compress_tree`].
//!
//! Each file is compressed as a stream at the highest levels (gzip 9, brotli
//! 11, zstd 19), so memory stays bounded whatever its size. A sibling is
//! written to a temporary name in the same directory, given the file's
//! permission bits (a private file's sibling is as private) and renamed into
//! place, so a reader never sees half of one. A sibling no older than its file
//! is up to date and left alone; one that would be no smaller than the file is
//! not written, and a stale one in its place is removed, since the server
//! would otherwise skip it only by its age. Symbolic links are not followed,
//! and files that are themselves siblings are not compressed again.
//!
//! The tree may be writable by others while root compresses it (issue 56), so
//! nothing here resolves a path twice: each directory is opened with
//! `O_NOFOLLOW` relative to its parent's descriptor, and every name in it is
//! used relative to that descriptor. The temporary file gets an unpredictable
//! name and is created with `O_CREAT | O_EXCL | O_NOFOLLOW` (a link or file
//! planted at that name makes the creation fail, never write through it), its
//! mode is set on its descriptor, and it is renamed into place within the
//! same directory descriptor.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, BufWriter, Seek};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use stoa_http_proto::accept_encoding::Coding;

use crate::cache::content_type;
use crate::config::CompressionConfig;
use crate::encoding::encode;

/// What [`compress_tree`] does.
#[derive(Debug, Clone)]
pub struct Options {
    /// The codings to write siblings for.
    pub codings: Vec<Coding>,
    /// Files smaller than this are left alone.
    pub min_length: u64,
    /// Which media types are compressed: [`CompressionConfig::types`], the
    /// files the server looks for siblings of.
    pub types: CompressionConfig,
    /// Rewrite siblings that are up to date.
    pub force: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            codings: Coding::ALL.to_vec(),
            min_length: CompressionConfig::default().min_length,
            types: CompressionConfig::default(),
            force: false,
        }
    }
}

/// What [`compress_tree`] did.
#[derive(Debug, Default)]
pub struct Summary {
    /// Files considered (of a compressible type and size).
    pub files: u64,
    /// Siblings written.
    pub written: u64,
    /// Their files' bytes, once per sibling.
    pub bytes_in: u64,
    /// The siblings' bytes.
    pub bytes_out: u64,
    /// Siblings already up to date.
    pub up_to_date: u64,
    /// Siblings not written because they would not be smaller.
    pub no_gain: u64,
    /// Paths that could not be read or written, with why; the rest went on.
    pub failed: Vec<(PathBuf, io::Error)>,
}

/// Writes the siblings of every regular file beneath `dir`.
///
/// `dir` itself may be a symbolic link (the caller named it); nothing beneath
/// it is followed.
pub fn compress_tree(dir: &Path, options: &Options) -> io::Result<Summary> {
    let mut summary = Summary::default();
    let root = rustix::fs::open(dir, DIR_FLAGS, Mode::empty()).map_err(|e| match e {
        Errno::NOTDIR => io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", dir.display()),
        ),
        e => e.into(),
    })?;
    let subdirs = scan(root.as_fd(), dir, options, &mut summary);
    // Depth first, one open descriptor per level: a directory with many
    // subdirectories holds none of theirs until it walks into each.
    let mut stack = vec![Level {
        fd: root,
        path: dir.to_path_buf(),
        subdirs,
    }];
    while let Some(level) = stack.last_mut() {
        let Some(name) = level.subdirs.pop() else {
            stack.pop();
            continue;
        };
        let path = level.path.join(&name);
        // O_NOFOLLOW: a directory swapped for a link since it was listed is
        // refused, not walked into.
        match rustix::fs::openat(
            &level.fd,
            &name,
            DIR_FLAGS | OFlags::NOFOLLOW,
            Mode::empty(),
        ) {
            Ok(fd) => {
                let subdirs = scan(fd.as_fd(), &path, options, &mut summary);
                stack.push(Level { fd, path, subdirs });
            }
            Err(e) => summary.failed.push((path, e.into())),
        }
    }
    Ok(summary)
}

/// How directories are opened (each beneath the first also `O_NOFOLLOW`).
const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::CLOEXEC);

/// A directory being walked: its descriptor, its path (for reports only) and
/// the subdirectories not yet walked.
struct Level {
    fd: OwnedFd,
    path: PathBuf,
    subdirs: Vec<OsString>,
}

/// Compresses the regular files of the directory `dir` (at `path`) and returns
/// its subdirectories' names.
fn scan(
    dir: BorrowedFd<'_>,
    path: &Path,
    options: &Options,
    summary: &mut Summary,
) -> Vec<OsString> {
    let mut subdirs = Vec::new();
    let entries = match rustix::fs::Dir::read_from(dir) {
        Ok(entries) => entries,
        Err(e) => {
            summary.failed.push((path.to_path_buf(), e.into()));
            return subdirs;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                summary.failed.push((path.to_path_buf(), e.into()));
                break;
            }
        };
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        // The type as listed, the link itself's: a link is neither followed
        // nor compressed. Some file systems do not say; then ask, again
        // without following.
        let file_type = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(e) => {
                    summary.failed.push((path.join(name), e.into()));
                    continue;
                }
            },
            known => known,
        };
        match file_type {
            FileType::Directory => subdirs.push(name.to_owned()),
            FileType::RegularFile => compress_file(dir, path, name, options, summary),
            _ => {}
        }
    }
    subdirs
}

/// The prefix of the temporary files siblings are written to.
const TEMPORARY_PREFIX: &str = ".stoa-compress-";

/// Whether `name` is a sibling (or a temporary one) rather than a file to compress.
fn is_sibling(name: &str) -> bool {
    name.starts_with(TEMPORARY_PREFIX) || Coding::ALL.iter().any(|c| name.ends_with(c.extension()))
}

/// Writes the siblings of the file `name` in the directory `dir` (at
/// `dir_path`, for reports).
fn compress_file(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    name: &OsStr,
    options: &Options,
    summary: &mut Summary,
) {
    let Some(name) = name.to_str() else {
        return;
    };
    if is_sibling(name) {
        return;
    }
    if !options.types.compressible(content_type(name.as_bytes())) {
        return;
    }
    let (mut source, st) = match open_source(dir, OsStr::new(name)) {
        Ok(opened) => opened,
        Err(e) => return summary.failed.push((dir_path.join(name), e)),
    };
    let len = st.st_size as u64;
    if len < options.min_length {
        return;
    }
    summary.files += 1;
    let modified = mtime(&st);
    for &coding in &options.codings {
        let sibling = format!("{name}{}", coding.extension());
        let current = rustix::fs::statat(dir, sibling.as_str(), AtFlags::SYMLINK_NOFOLLOW)
            .ok()
            .filter(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
            .is_some_and(|st| mtime(&st) >= modified);
        if current && !options.force {
            summary.up_to_date += 1;
            continue;
        }
        // Each coding reads the same descriptor from its start.
        let result = source
            .rewind()
            .and_then(|()| write_sibling(dir, &mut source, &sibling, coding, len, st.st_mode));
        match result {
            Ok(Some(out)) => {
                summary.written += 1;
                summary.bytes_in += len;
                summary.bytes_out += out;
            }
            Ok(None) => {
                summary.no_gain += 1;
                // unlinkat removes a link, never what it points to.
                match rustix::fs::unlinkat(dir, sibling.as_str(), AtFlags::empty()) {
                    Ok(()) | Err(Errno::NOENT) => {}
                    Err(e) => summary.failed.push((dir_path.join(sibling), e.into())),
                }
            }
            Err(e) => summary.failed.push((dir_path.join(sibling), e)),
        }
    }
}

/// Opens the file `name` of the directory `dir` to compress it, with its
/// status: the type, size, mode and time every later decision uses, taken
/// from the opened descriptor (`fstat`), as the web server's `openat2` is
/// judged. The listing said it was a regular file, but the name may have been
/// swapped since: `O_NOFOLLOW` refuses a link (`ELOOP`), `O_NONBLOCK` keeps a
/// FIFO from blocking the open, and anything but a regular file is refused.
fn open_source(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<(File, rustix::fs::Stat)> {
    const FLAGS: OFlags = OFlags::RDONLY
        .union(OFlags::NOFOLLOW)
        .union(OFlags::NONBLOCK)
        .union(OFlags::NOCTTY)
        .union(OFlags::CLOEXEC);
    let fd = rustix::fs::openat(dir, name, FLAGS, Mode::empty()).map_err(|e| match e {
        Errno::LOOP => io::Error::new(
            io::ErrorKind::InvalidInput,
            "a symbolic link now, not followed",
        ),
        e => e.into(),
    })?;
    let st = rustix::fs::fstat(&fd)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file now, not read",
        ));
    }
    Ok((File::from(fd), st))
}

/// A stat's modification time, seconds and nanoseconds.
fn mtime(st: &rustix::fs::Stat) -> (i64, i64) {
    (st.st_mtime, st.st_mtime_nsec as i64)
}

/// Compresses `source` (of `len` bytes and permission bits `mode`) into
/// `sibling` in the directory `dir`; `Ok(None)` (nothing written) when the
/// result is no smaller than the file.
fn write_sibling(
    dir: BorrowedFd<'_>,
    source: &mut File,
    sibling: &str,
    coding: Coding,
    len: u64,
    mode: u32,
) -> io::Result<Option<u64>> {
    let (temporary, out) = create_temporary(dir)?;
    let result = (|| {
        // On the descriptor: no name is resolved again. The permission bits
        // only: a sibling is data, never set-user-ID.
        rustix::fs::fchmod(&out, Mode::from_raw_mode(mode & 0o777))?;
        let level = match coding {
            Coding::Gzip => 9,
            Coding::Brotli => 11,
            Coding::Zstd => 19,
        };
        let size_hint = usize::try_from(len).unwrap_or(usize::MAX);
        let out = encode(
            coding,
            level,
            source,
            BufWriter::new(File::from(out)),
            size_hint,
        )?;
        let out = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        let written = out.metadata()?.len();
        if written >= len {
            return Ok(None);
        }
        out.sync_data()?;
        rustix::fs::renameat(dir, temporary.as_str(), dir, sibling)?;
        Ok(Some(written))
    })();
    if !matches!(result, Ok(Some(_))) {
        // Best effort: the temporary file is ours (created with O_EXCL) and of
        // no use.
        let _ = rustix::fs::unlinkat(dir, temporary.as_str(), AtFlags::empty());
    }
    result
}

/// Tries before giving up on finding a free temporary name: with 64 random
/// bits a collision is a file someone planted, and one retry would do.
const MAX_TEMPORARY_TRIES: usize = 8;

/// Creates a new temporary file in `dir`, mode `0600` until the caller sets
/// it: `.stoa-compress-` and 64 random bits in hex, so its name cannot be
/// guessed, created with `O_EXCL | O_NOFOLLOW`, so nothing at that name (a
/// planted link above all) is ever opened.
fn create_temporary(dir: BorrowedFd<'_>) -> io::Result<(String, OwnedFd)> {
    const FLAGS: OFlags = OFlags::WRONLY
        .union(OFlags::CREATE)
        .union(OFlags::EXCL)
        .union(OFlags::NOFOLLOW)
        .union(OFlags::CLOEXEC);
    let mut last = Errno::EXIST;
    for _ in 0..MAX_TEMPORARY_TRIES {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random).map_err(|e| io::Error::other(e.to_string()))?;
        let name = format!("{TEMPORARY_PREFIX}{:016x}", u64::from_ne_bytes(random));
        match rustix::fs::openat(dir, name.as_str(), FLAGS, Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((name, fd)),
            Err(e @ Errno::EXIST) => last = e,
            Err(e) => return Err(e.into()),
        }
    }
    Err(last.into())
}

#[cfg(test)]
mod tests;
