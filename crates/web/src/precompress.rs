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

use std::fs::{self, File};
use std::io::{self, BufWriter};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

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
pub fn compress_tree(dir: &Path, options: &Options) -> io::Result<Summary> {
    let mut summary = Summary::default();
    let meta = fs::metadata(dir)?;
    if !meta.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", dir.display()),
        ));
    }
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = match fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => {
                summary.failed.push((dir, e));
                continue;
            }
        };
        for entry in entries {
            let entry = match entry {
                Ok(entry) => entry,
                Err(e) => {
                    summary.failed.push((dir.clone(), e));
                    continue;
                }
            };
            let path = entry.path();
            // symlink_metadata: a link is neither followed nor compressed.
            match entry.file_type() {
                Ok(t) if t.is_dir() => pending.push(path),
                Ok(t) if t.is_file() => compress_file(&path, options, &mut summary),
                Ok(_) => {}
                Err(e) => summary.failed.push((path, e)),
            }
        }
    }
    Ok(summary)
}

/// Whether `name` is a sibling (or a temporary one) rather than a file to compress.
fn is_sibling(name: &str) -> bool {
    name.starts_with(".stoa-compress-") || Coding::ALL.iter().any(|c| name.ends_with(c.extension()))
}

fn compress_file(path: &Path, options: &Options, summary: &mut Summary) {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return;
    };
    if is_sibling(name) {
        return;
    }
    if !options.types.compressible(content_type(name.as_bytes())) {
        return;
    }
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) => return summary.failed.push((path.to_owned(), e)),
    };
    if meta.len() < options.min_length {
        return;
    }
    summary.files += 1;
    let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    for &coding in &options.codings {
        let mut sibling = path.as_os_str().to_owned();
        sibling.push(coding.extension());
        let sibling = PathBuf::from(sibling);
        let current = fs::symlink_metadata(&sibling)
            .ok()
            .filter(|m| m.is_file())
            .and_then(|m| m.modified().ok())
            .is_some_and(|t| t >= modified);
        if current && !options.force {
            summary.up_to_date += 1;
            continue;
        }
        match write_sibling(path, &sibling, coding, &meta) {
            Ok(Some(len)) => {
                summary.written += 1;
                summary.bytes_in += meta.len();
                summary.bytes_out += len;
            }
            Ok(None) => {
                summary.no_gain += 1;
                match fs::remove_file(&sibling) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => summary.failed.push((sibling, e)),
                }
            }
            Err(e) => summary.failed.push((sibling, e)),
        }
    }
}

/// Compresses `path` into `sibling`; `Ok(None)` (nothing written) when the
/// result is no smaller than the file.
fn write_sibling(
    path: &Path,
    sibling: &Path,
    coding: Coding,
    meta: &fs::Metadata,
) -> io::Result<Option<u64>> {
    let dir = sibling.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".stoa-compress-{}-{}",
        std::process::id(),
        sibling
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    ));
    let result = (|| {
        let mut source = File::open(path)?;
        let out = File::create(&tmp)?;
        out.set_permissions(fs::Permissions::from_mode(
            meta.permissions().mode() & 0o7777,
        ))?;
        let level = match coding {
            Coding::Gzip => 9,
            Coding::Brotli => 11,
            Coding::Zstd => 19,
        };
        let size_hint = usize::try_from(meta.len()).unwrap_or(usize::MAX);
        let out = encode(coding, level, &mut source, BufWriter::new(out), size_hint)?;
        let out = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        let len = out.metadata()?.len();
        if len >= meta.len() {
            return Ok(None);
        }
        out.sync_data()?;
        fs::rename(&tmp, sibling)?;
        Ok(Some(len))
    })();
    if !matches!(result, Ok(Some(_))) {
        // Best effort: the temporary file is ours and of no use.
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;

    use super::{Options, compress_tree};

    #[test]
    fn siblings_round_trip_keep_permissions_and_skip_what_they_should() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = "body { color: #333; margin: 0 auto; }\n".repeat(500);
        let css = dir.path().join("site.css");
        fs::write(&css, &text).expect("write css");
        fs::set_permissions(&css, fs::Permissions::from_mode(0o640)).expect("chmod");
        fs::create_dir(dir.path().join("sub")).expect("mkdir");
        fs::write(dir.path().join("sub/index.html"), text.replace("body", "p")).expect("html");
        fs::write(dir.path().join("tiny.txt"), "hi").expect("tiny");
        fs::write(dir.path().join("photo.jpg"), vec![7u8; 4096]).expect("jpg");
        // Random bytes (xorshift64*): no coding makes them smaller.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let noise: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 56) as u8
            })
            .collect();
        fs::write(dir.path().join("noise.txt"), &noise).expect("noise");
        // A sibling older than its file: stale.
        let stale = dir.path().join("noise.txt.gz");
        fs::write(&stale, b"stale").expect("stale");
        fs::File::options()
            .write(true)
            .open(&stale)
            .and_then(|f| f.set_modified(std::time::SystemTime::UNIX_EPOCH))
            .expect("age the stale sibling");
        std::os::unix::fs::symlink(&css, dir.path().join("link.css")).expect("symlink");

        let summary = compress_tree(dir.path(), &Options::default()).expect("compress");
        assert!(summary.failed.is_empty(), "{:?}", summary.failed);
        assert_eq!(summary.files, 3, "site.css, sub/index.html, noise.txt");
        assert_eq!(summary.written, 6);
        assert_eq!(summary.no_gain, 3);
        assert!(
            !dir.path().join("noise.txt.gz").exists(),
            "the stale sibling is gone"
        );
        assert!(!dir.path().join("tiny.txt.gz").exists());
        assert!(!dir.path().join("photo.jpg.gz").exists());
        assert!(!dir.path().join("link.css.gz").exists());
        assert!(!dir.path().join("site.css.gz.gz").exists());

        let mut back = String::new();
        flate2::read::GzDecoder::new(fs::File::open(dir.path().join("site.css.gz")).expect("gz"))
            .read_to_string(&mut back)
            .expect("gunzip");
        assert_eq!(back, text);
        let br = fs::read(dir.path().join("site.css.br")).expect("br");
        let mut back = Vec::new();
        brotli::BrotliDecompress(&mut &br[..], &mut back).expect("unbrotli");
        assert_eq!(back, text.as_bytes());
        let zs = fs::read(dir.path().join("site.css.zst")).expect("zst");
        assert_eq!(
            zstd::stream::decode_all(&zs[..]).expect("unzstd"),
            text.as_bytes()
        );
        let mode = fs::metadata(dir.path().join("site.css.br"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        let leftovers = fs::read_dir(dir.path())
            .expect("ls")
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(".stoa-compress-")
            })
            .count();
        assert_eq!(leftovers, 0);

        let again = compress_tree(dir.path(), &Options::default()).expect("again");
        assert_eq!(again.written, 0);
        assert_eq!(again.up_to_date, 6);
    }
}
