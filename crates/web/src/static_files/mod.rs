//! The static-file handler: GET and HEAD of regular files beneath the document root,
//! with conditional requests (304), one byte range (206/416), and the directory
//! rules (`index.html`, 301 to add the slash, a listing where the site has
//! `autoindex`).
//!
//! A site's error pages replace the built-in status pages of its 403, 404, 503
//! (and the refusals routing makes, 400 and 405): the page is a file beneath the
//! site's document root, looked up in the file cache like any other, sent with
//! the original status and without validators or ranges. A page that is itself
//! missing (or not a regular file) falls back to the built-in page: an error page
//! never leads to another.
//!
//! The method and the target were checked when the request was routed
//! ([`crate::dispatch`]): a request here is a GET or HEAD of a decoded path.

use std::time::Instant;

use stoa_http_proto::accept_encoding::{Accepted, Coding};
use stoa_http_proto::precondition::{ByteRange, if_none_match, if_range, parse_range};
use stoa_http_proto::target::Target;
use stoa_http_proto::{Method, RequestHead};

use crate::cache::{Contents, FileCache, FileInfo, INDEX, Kind};
use crate::encoding::{self, Encoder};
use crate::output::{Body, Output};
use crate::response::{Refusal, Reply};
use crate::vhost::VirtualHost;

mod listing;

/// What answering a file request needs besides the request.
pub(crate) struct Files<'a> {
    /// The worker's open-file cache.
    pub(crate) cache: &'a mut FileCache,
    /// The worker's compression on the fly.
    pub(crate) encoder: &'a mut Encoder,
    /// The site: the document root every path is opened beneath, its error
    /// pages, whether directories are listed.
    pub(crate) site: &'a VirtualHost,
    pub(crate) now: Instant,
}

/// Answers one GET or HEAD of `target`; returns the status sent.
pub(crate) fn serve(
    head: &RequestHead<'_, '_>,
    target: &Target<'_>,
    reply: &Reply<'_>,
    out: &mut Output,
    files: &mut Files<'_>,
) -> u16 {
    let site = files.site;
    if site.hide_dotfiles && is_dotfile(&target.path) {
        return status(reply, out, files, 404);
    }
    let entry = (files.cache).lookup(site.index, &site.docroot, &target.path, files.now);
    match &entry.kind {
        Kind::File(info) if !(head.accept_encoding && files.encoder.applies(info)) => {
            send_file(head, reply, out, info, false)
        }
        Kind::File(info) => {
            let info = owned(info);
            negotiate(head, reply, out, files, &target.path, &info)
        }
        Kind::Directory => {
            let mut location = b"Location: ".to_vec();
            encode_path(&mut location, &target.path);
            location.push(b'/');
            if let Some(q) = target.query {
                location.push(b'?');
                location.extend_from_slice(q);
            }
            location.extend_from_slice(b"\r\n");
            reply.status_page(out, 301, &location);
            301
        }
        Kind::NotFound => status(reply, out, files, 404),
        Kind::Forbidden => status(reply, out, files, 403),
        Kind::NoIndex if site.autoindex => match listing::render(&site.docroot, &target.path) {
            Some(page) => {
                let (start, w) = reply.begin(out, 200);
                let w = w
                    .header("Content-Type", b"text/html; charset=utf-8")
                    .content_length(page.len() as u64);
                reply.end(w);
                reply.send(out, 200, start, Body::Bytes(page.into()));
                200
            }
            None => status(reply, out, files, 403),
        },
        Kind::NoIndex => status(reply, out, files, 403),
        Kind::Unavailable => status(reply, out, files, 503),
    }
}

/// Whether the decoded `path` has a segment starting with a dot, other than a
/// leading `/.well-known` (RFC 8615: ACME challenges, `security.txt`).
fn is_dotfile(path: &[u8]) -> bool {
    const WELL_KNOWN: &[u8] = b"/.well-known";
    let checked = match path.strip_prefix(WELL_KNOWN) {
        Some(rest) if rest.is_empty() || rest[0] == b'/' => rest,
        _ => path,
    };
    memchr::memmem::find(checked, b"/.").is_some()
}

/// Answers `code` with the site's error page for it, or the built-in page.
fn status(reply: &Reply<'_>, out: &mut Output, files: &mut Files<'_>, code: u16) -> u16 {
    refuse(reply, out, files, &Refusal::new(code, ""));
    code
}

/// Answers `refusal` with the site's error page for its status, or the built-in
/// page. The page is looked up once: whatever it resolves to other than a
/// regular file, the built-in page goes out.
pub(crate) fn refuse(
    reply: &Reply<'_>,
    out: &mut Output,
    files: &mut Files<'_>,
    refusal: &Refusal,
) {
    let site = files.site;
    let Some(page) = site.error_page(refusal.status) else {
        return reply.refuse(out, refusal);
    };
    let entry = files
        .cache
        .lookup(site.index, &site.docroot, page, files.now);
    let Kind::File(info) = &entry.kind else {
        return reply.refuse(out, refusal);
    };
    let status = refusal.status;
    let (start, w) = reply.begin(out, status);
    let w = w
        .raw(refusal.extra)
        .raw(content_type_line(&info.header_lines))
        .content_length(info.len);
    reply.end(w);
    let body = match &info.contents {
        Contents::Memory(bytes) => Body::Bytes(bytes.clone()),
        Contents::Open(fd) if info.len > 0 => Body::File {
            fd: fd.clone(),
            offset: 0,
            len: info.len,
        },
        Contents::Open(_) => Body::Empty,
    };
    reply.send(out, status, start, body);
}

/// The `Content-Type` line (CRLF included) of a cached file's header lines,
/// which start with it.
fn content_type_line(lines: &[u8]) -> &[u8] {
    match memchr::memchr(b'\n', lines) {
        Some(end) if lines.starts_with(b"Content-Type:") => &lines[..=end],
        _ => b"",
    }
}

/// Answers a request with `Accept-Encoding` for `original` (at `path`, of a
/// compressible type): the best coding the client takes that a precompressed
/// sibling or compression on the fly can give, in the client's order of
/// preference, else the file as it is. `Vary: Accept-Encoding` goes on every
/// response whose choice depended on the header (an encoded one, or the
/// identity of a file that could have been compressed).
#[cold]
#[inline(never)]
fn negotiate(
    head: &RequestHead<'_, '_>,
    reply: &Reply<'_>,
    out: &mut Output,
    files: &mut Files<'_>,
    path: &[u8],
    original: &FileInfo,
) -> u16 {
    let accepted = Accepted::parse(head.headers_named("Accept-Encoding"));
    let precompressed = files.encoder.config().precompressed;
    let mut vary = false;
    for coding in accepted.ranked() {
        if precompressed && let Some(variant) = sibling(files, path, coding, original) {
            return send_file(head, reply, out, &variant, true);
        }
        if files.encoder.can_compress(coding, original) {
            vary = true;
            let site = files.site.index;
            if let Some(variant) = files.encoder.compress(site, path, coding, original) {
                return send_file(head, reply, out, &variant, true);
            }
        }
    }
    let vary = vary || precompressed || files.encoder.can_compress(Coding::Gzip, original);
    send_file(head, reply, out, original, vary)
}

/// `original` (at `path`) as its precompressed sibling for `coding`
/// (`path.br`, or `index.html.br` for a directory): a regular file no older
/// than the original.
fn sibling(
    files: &mut Files<'_>,
    path: &[u8],
    coding: Coding,
    original: &FileInfo,
) -> Option<FileInfo> {
    let ext = coding.extension().as_bytes();
    let mut name = Vec::with_capacity(path.len() + INDEX.len() + ext.len());
    name.extend_from_slice(path);
    if path.ends_with(b"/") {
        name.extend_from_slice(INDEX);
    }
    name.extend_from_slice(ext);
    let site = files.site;
    match &files
        .cache
        .lookup(site.index, &site.docroot, &name, files.now)
        .kind
    {
        Kind::File(s) if s.mtime >= original.mtime => {
            Some(encoding::precompressed(original, coding, s))
        }
        _ => None,
    }
}

/// A cached file's description, owned, so that the cache can be looked up
/// again (for a sibling) while it is used. Out of line: only requests with
/// `Accept-Encoding` take it.
#[cold]
#[inline(never)]
fn owned(info: &FileInfo) -> FileInfo {
    info.clone()
}

/// The `Vary` line of a response chosen by `Accept-Encoding`.
const VARY: &[u8] = b"Vary: Accept-Encoding\r\n";

/// Sends `info` (the file, or one of its encoded representations), with
/// [`VARY`] when `vary`.
fn send_file(
    head: &RequestHead<'_, '_>,
    reply: &Reply<'_>,
    out: &mut Output,
    info: &FileInfo,
    vary: bool,
) -> u16 {
    if not_modified(head, info) {
        let (start, mut w) = reply.begin(out, 304);
        w = w.header("ETag", &info.etag);
        if vary {
            w = w.raw(VARY);
        }
        reply.end(w);
        reply.send(out, 304, start, Body::Empty);
        return 304;
    }
    let range = match head.header("Range") {
        Some(r) if head.method == Method::Get && validates(head, info) => parse_range(r, info.len),
        _ => ByteRange::Full,
    };
    let (status, start, end) = match range {
        ByteRange::Full => (200, 0, info.len),
        ByteRange::Partial { start, end } => (206, start, end + 1),
        ByteRange::Unsatisfiable => {
            let line = format!("Content-Range: bytes */{}\r\n", info.len);
            reply.status_page(out, 416, line.as_bytes());
            return 416;
        }
    };
    let (head_start, w) = reply.begin(out, status);
    let mut w = w.raw(&info.header_lines);
    if vary {
        w = w.raw(VARY);
    }
    w = w.content_length(end - start);
    if status == 206 {
        let value = format!("bytes {start}-{}/{}", end - 1, info.len);
        w = w.header("Content-Range", value.as_bytes());
    }
    reply.end(w);
    let body = match &info.contents {
        _ if end <= start => Body::Empty,
        Contents::Memory(bytes) => Body::Bytes(bytes.slice(start as usize..end as usize)),
        Contents::Open(fd) => Body::File {
            fd: fd.clone(),
            offset: start,
            len: end - start,
        },
    };
    reply.send(out, status, head_start, body);
    status
}

/// `If-None-Match` decides when present; otherwise `If-Modified-Since` (RFC 9110
/// §13.2.2).
fn not_modified(head: &RequestHead<'_, '_>, info: &FileInfo) -> bool {
    if let Some(list) = head.header("If-None-Match") {
        return if_none_match(list, &info.etag);
    }
    head.header("If-Modified-Since")
        .and_then(stoa_http_proto::date::parse_http_date)
        .is_some_and(|since| info.mtime <= since)
}

/// `If-Range` absent, or still matching.
fn validates(head: &RequestHead<'_, '_>, info: &FileInfo) -> bool {
    head.header("If-Range")
        .is_none_or(|v| if_range(v, &info.etag, info.mtime))
}

/// Appends `path` percent-encoded for a `Location` header.
pub(crate) fn encode_path(out: &mut Vec<u8>, path: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in path {
        if b.is_ascii_alphanumeric() || b"/-._~!$&'()*+,;=:@".contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn dot_segments_but_well_known_are_dotfiles() {
        for hidden in [
            &b"/.env"[..],
            b"/.git/config",
            b"/a/.htpasswd",
            b"/a/b/.c/d",
            b"/.well-knownx/a",
            b"/x/.well-known/a",
        ] {
            assert!(
                super::is_dotfile(hidden),
                "{}",
                String::from_utf8_lossy(hidden)
            );
        }
        for shown in [
            &b"/"[..],
            b"/index.html",
            b"/a.b/c.d",
            b"/.well-known",
            b"/.well-known/acme-challenge/x",
            b"/a/b.",
        ] {
            assert!(
                !super::is_dotfile(shown),
                "{}",
                String::from_utf8_lossy(shown)
            );
        }
    }

    #[test]
    fn location_encoding() {
        let mut out = Vec::new();
        super::encode_path(&mut out, b"/a b/\xc3\xa9\"x");
        assert_eq!(out, b"/a%20b/%C3%A9%22x");
    }
}
