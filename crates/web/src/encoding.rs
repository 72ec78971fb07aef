//! `Content-Encoding` of static files: compression on the fly, with a per-worker
//! cache of the results, and the response lines of an encoded representation.
//!
//! Which representation a request gets is decided in [`crate::static_files`]
//! (a precompressed sibling first, then this); everything here works on a file
//! the cache already resolved. A compressed body is kept in memory under the
//! site, the coding and the path, and used while the file's entity tag is the
//! one it was made from. Compressing happens on the worker, once per file,
//! coding and worker while the result stays cached; files above
//! [`CompressionConfig::max_length`] are never compressed on the fly, which
//! bounds the time one request can hold the worker. A body that comes out no
//! smaller than the file is remembered as such, and the file goes out as it is.
//!
//! The entity tag of an encoded representation is the source's with the
//! coding (and, on the fly, the level) before its closing quote
//! (`"5f3a-1c00-br5"`), so it differs from the identity's and from every other
//! coding's, and changes with the bytes.

use std::io::{Read, Write};
use std::os::unix::fs::FileExt;

use bytes::Bytes;
use lru::LruCache;
use stoa_http_proto::accept_encoding::Coding;

use crate::cache::{Contents, FileInfo, header_lines};
use crate::config::CompressionConfig;

/// Most compressed bodies kept per worker, whatever their size.
const MAX_ENTRIES: usize = 10_000;

/// One worker's compression on the fly.
#[derive(Debug)]
pub(crate) struct Encoder {
    config: CompressionConfig,
    entries: LruCache<Box<[u8]>, Encoded>,
    memory: usize,
    /// The key being looked up (site, coding, path).
    key: Vec<u8>,
}

#[derive(Debug)]
struct Encoded {
    /// The entity tag of the file it was made from.
    source: Box<[u8]>,
    /// The compressed bytes; `None` when they were no smaller than the file.
    body: Option<Bytes>,
}

impl Encoded {
    fn memory(&self, key: &[u8]) -> usize {
        key.len() + self.source.len() + self.body.as_ref().map_or(0, Bytes::len)
    }
}

impl Encoder {
    pub(crate) fn new(config: CompressionConfig) -> Encoder {
        Encoder {
            config,
            entries: LruCache::unbounded(),
            memory: 0,
            key: Vec::new(),
        }
    }

    pub(crate) fn config(&self) -> &CompressionConfig {
        &self.config
    }

    /// Whether a request for `file` with `Accept-Encoding` may get an encoded
    /// representation: compression is on and the file is of one of
    /// [`CompressionConfig::types`] (siblings of other files are not looked
    /// for, so an image costs no lookups and no cache entries).
    pub(crate) fn applies(&self, file: &FileInfo) -> bool {
        self.config.any() && self.config.compressible(file.media_type)
    }

    /// Whether `file`, of a compressible type, may be compressed with `coding`
    /// on the fly: gzip or brotli, a size within bounds.
    pub(crate) fn can_compress(&self, coding: Coding, file: &FileInfo) -> bool {
        let c = &self.config;
        c.on_the_fly
            && matches!(coding, Coding::Gzip | Coding::Brotli)
            && (c.min_length..=c.max_length).contains(&file.len)
    }

    /// The level used for `coding` (part of the entity tag).
    fn level(&self, coding: Coding) -> u32 {
        match coding {
            Coding::Brotli => self.config.brotli_level,
            _ => self.config.gzip_level,
        }
    }

    /// `file` (site `site`'s `path`) compressed with `coding`, from the cache
    /// or made now; `None` when compressing does not make it smaller or the file
    /// cannot be read. Call only where [`Encoder::applies`] and
    /// [`Encoder::can_compress`] hold.
    pub(crate) fn compress(
        &mut self,
        site: usize,
        path: &[u8],
        coding: Coding,
        file: &FileInfo,
    ) -> Option<FileInfo> {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        key.extend_from_slice(&u32::try_from(site).unwrap_or(u32::MAX).to_le_bytes());
        key.push(coding as u8);
        key.extend_from_slice(path);
        let body = match self.entries.get(key.as_slice()) {
            Some(e) if e.source == file.etag => e.body.clone(),
            _ => {
                let body = self.encode(coding, file);
                self.insert(&key, file, body.clone());
                body
            }
        };
        self.key = key;
        let suffix = format!("-{}{}", short(coding), self.level(coding));
        body.map(|body| on_the_fly(file, coding, &suffix, body))
    }

    fn encode(&self, coding: Coding, file: &FileInfo) -> Option<Bytes> {
        let source = match &file.contents {
            Contents::Memory(bytes) => bytes.clone(),
            Contents::Open(fd) => {
                let mut buf = vec![0; usize::try_from(file.len).ok()?];
                fd.read_exact_at(&mut buf, 0).ok()?;
                Bytes::from(buf)
            }
        };
        let out = compress(coding, self.level(coding), &source).ok()?;
        (out.len() < source.len()).then(|| Bytes::from(out))
    }

    fn insert(&mut self, key: &[u8], file: &FileInfo, body: Option<Bytes>) {
        let entry = Encoded {
            source: file.etag.clone(),
            body,
        };
        let size = entry.memory(key);
        if size > self.config.cache_size {
            return;
        }
        self.memory += size;
        if let Some(old) = self.entries.put(key.into(), entry) {
            self.memory -= old.memory(key);
        }
        while self.entries.len() > MAX_ENTRIES || self.memory > self.config.cache_size {
            match self.entries.pop_lru() {
                Some((k, old)) => self.memory -= old.memory(&k),
                None => break,
            }
        }
    }
}

/// `source` compressed with `coding` at `level` into memory (see [`encode`]).
pub(crate) fn compress(coding: Coding, level: u32, source: &[u8]) -> std::io::Result<Vec<u8>> {
    let out = Vec::with_capacity(source.len() / 2 + 64);
    encode(coding, level, &mut &source[..], out, source.len())
}

/// Everything `source` reads, compressed with `coding` at `level` (gzip 1–9,
/// brotli 0–11, zstd 1–22) as one whole stream into `out`, which is handed
/// back; `size_hint` is the source's length, if known. Compression on the fly
/// and `stoa compress` both use it.
pub(crate) fn encode<W: Write>(
    coding: Coding,
    level: u32,
    source: &mut impl Read,
    mut out: W,
    size_hint: usize,
) -> std::io::Result<W> {
    match coding {
        Coding::Gzip => {
            // No name and no time in the header: the same bytes every time.
            let mut e = flate2::GzBuilder::new()
                .mtime(0)
                .write(out, flate2::Compression::new(level.min(9)));
            std::io::copy(source, &mut e)?;
            e.finish()
        }
        Coding::Brotli => {
            let params = brotli::enc::BrotliEncoderParams {
                quality: level.min(11) as i32,
                size_hint,
                ..Default::default()
            };
            brotli::BrotliCompress(source, &mut out, &params)?;
            Ok(out)
        }
        Coding::Zstd => {
            let mut e = zstd::stream::Encoder::new(out, level.clamp(1, 22) as i32)?;
            std::io::copy(source, &mut e)?;
            e.finish()
        }
    }
}

/// The two-letter name of a coding in an encoded entity tag.
fn short(coding: Coding) -> &'static str {
    match coding {
        Coding::Brotli => "br",
        Coding::Zstd => "zs",
        Coding::Gzip => "gz",
    }
}

/// The representation of `original` compressed on the fly with `coding` into
/// `body`, its entity tag the original's with `suffix`.
fn on_the_fly(original: &FileInfo, coding: Coding, suffix: &str, body: Bytes) -> FileInfo {
    let etag = tagged(&original.etag, suffix);
    FileInfo {
        len: body.len() as u64,
        contents: Contents::Memory(body),
        mtime: original.mtime,
        header_lines: lines(original, &etag, coding),
        etag,
        media_type: original.media_type,
    }
}

/// The representation of `original` sent from its precompressed `sibling`
/// (`page.html.br` for `page.html`): the sibling's bytes under the original's
/// media type and modification time, the sibling's entity tag with the coding.
pub(crate) fn precompressed(original: &FileInfo, coding: Coding, sibling: &FileInfo) -> FileInfo {
    let etag = tagged(&sibling.etag, &format!("-{}", short(coding)));
    FileInfo {
        contents: sibling.contents.clone(),
        len: sibling.len,
        mtime: original.mtime,
        header_lines: lines(original, &etag, coding),
        etag,
        media_type: original.media_type,
    }
}

/// `"tag"` → `"tag<suffix>"` (a weak `W/"tag"` keeps its `W/`).
fn tagged(etag: &[u8], suffix: &str) -> Box<[u8]> {
    let body = etag.strip_suffix(b"\"").unwrap_or(etag);
    let mut out = Vec::with_capacity(etag.len() + suffix.len());
    out.extend_from_slice(body);
    out.extend_from_slice(suffix.as_bytes());
    out.push(b'"');
    out.into_boxed_slice()
}

/// The header lines of an encoded representation: the file cache's lines for
/// the original's type and time with the encoded entity tag, and
/// `Content-Encoding`.
fn lines(original: &FileInfo, etag: &[u8], coding: Coding) -> Box<[u8]> {
    let mut l = header_lines(original.media_type, original.mtime, etag).into_vec();
    l.extend_from_slice(b"Content-Encoding: ");
    l.extend_from_slice(coding.token().as_bytes());
    l.extend_from_slice(b"\r\n");
    l.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use stoa_http_proto::accept_encoding::Coding;

    use super::{compress, tagged};

    #[test]
    fn every_coding_round_trips() {
        let text = "<p>Stoa serves the same bytes, smaller.</p>\n".repeat(200);
        for level in [1, 6, 9] {
            let gz = compress(Coding::Gzip, level, text.as_bytes()).expect("gzip");
            let mut back = String::new();
            flate2::read::GzDecoder::new(&gz[..])
                .read_to_string(&mut back)
                .expect("gunzip");
            assert_eq!(back, text);
            assert!(gz.len() < text.len() / 10);
        }
        let br = compress(Coding::Brotli, 5, text.as_bytes()).expect("brotli");
        let mut back = Vec::new();
        brotli::BrotliDecompress(&mut &br[..], &mut back).expect("unbrotli");
        assert_eq!(back, text.as_bytes());
        let zs = compress(Coding::Zstd, 19, text.as_bytes()).expect("zstd");
        assert_eq!(
            zstd::bulk::decompress(&zs, text.len()).expect("unzstd"),
            text.as_bytes()
        );
        assert_eq!(
            compress(Coding::Gzip, 6, text.as_bytes()).expect("gzip"),
            compress(Coding::Gzip, 6, text.as_bytes()).expect("gzip"),
            "the same input gives the same bytes"
        );
    }

    #[test]
    fn tags_carry_the_coding() {
        assert_eq!(&*tagged(b"\"5f-1c\"", "-br5"), b"\"5f-1c-br5\"");
        assert_eq!(&*tagged(b"W/\"5f\"", "-gz"), b"W/\"5f-gz\"");
    }
}
