//! What the SPECweb99 client checks on every response (`web99.md` §7.1).
//!
//! Static GET: the first body line is the file's header line (size and name) and the
//! body has exactly the file's size. Dynamic answers: the body starts with `<html>`,
//! the wrapper ends at a line that is exactly `<pre>`, non-POST wrappers carry a
//! `<p>QUERY_STRING` line naming the file, the file's header line follows, and the
//! length is wrapper + file + 23. CAD: `found_cookie` with `Ad_id` in range,
//! `Ad_weight` ≤ 75 and `Expired` consistent with the expired ads of the last Reset.
//! POST: `my_cookie` echoes the user id.

use stoa_http_proto::request::Header;
use stoa_web99::ads::ADS;
use stoa_web99::fileset::{FileId, header_line};
use stoa_web99::request::TRAILER;
use stoa_web99::workload::RequestType;

/// What a response must satisfy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Expect<'a> {
    pub(crate) kind: RequestType,
    pub(crate) file: FileId,
    pub(crate) user_id: u32,
    /// First ads of the two expired ranges (24 ads each).
    pub(crate) expired: [u32; 2],
    pub(crate) headers: &'a [Header<'a>],
}

/// Why a response failed its check (the client's error strings).
pub(crate) type Failure = &'static str;

/// Checks a 200 response's body and headers; returns the ad a CAD answer chose.
#[cfg(test)]
pub(crate) fn check(e: &Expect<'_>, body: &[u8]) -> Result<Option<u32>, Failure> {
    check_prefix(e, body, body.len())
}

/// [`check`] on the first bytes of a body of `len` bytes: every check the
/// kit's client makes reads the body's start (the dynamic wrapper, the
/// file's header line) and its length, none the bytes after. `prefix` holds
/// at least the first [`crate::generator::KEEP_BODY`] bytes (or the whole
/// body); a wrapper or header line that does not end within it fails as
/// malformed.
pub(crate) fn check_prefix(
    e: &Expect<'_>,
    prefix: &[u8],
    len: usize,
) -> Result<Option<u32>, Failure> {
    let (file_bytes, file_len) = match e.kind {
        RequestType::Static => (prefix, len),
        _ => unwrap_page(e, prefix, len)?,
    };
    check_file(e.file, file_bytes, file_len)?;
    match e.kind {
        RequestType::Cad => check_cad(e).map(Some),
        RequestType::Post => check_my_cookie(e).map(|()| None),
        _ => Ok(None),
    }
}

/// The file inside a dynamic page of `len` bytes beginning with `body`, after
/// checking the wrapper: its first bytes and its length.
fn unwrap_page<'b>(
    e: &Expect<'_>,
    body: &'b [u8],
    len: usize,
) -> Result<(&'b [u8], usize), Failure> {
    if !body.starts_with(b"<html>\n") {
        return Err("bad html");
    }
    let pre = memchr::memmem::find(body, b"\n<pre>\n").ok_or("bad html")?;
    let wrapper = &body[..pre + 7];
    if e.kind != RequestType::Post {
        let name = e.file.to_string();
        let query_ok = wrapper.split(|&b| b == b'\n').any(|line| {
            line.starts_with(b"<p>QUERY_STRING")
                && memchr::memmem::find(line, name.as_bytes()).is_some()
        });
        if !query_ok {
            return Err("bad QUERY");
        }
    }
    let rest = len - wrapper.len();
    if rest < TRAILER.len() {
        return Err("bad length");
    }
    let file_len = rest - TRAILER.len();
    let file = &body[wrapper.len()..];
    Ok((&file[..file.len().min(file_len)], file_len))
}

/// A file of `len` bytes beginning with `bytes`.
fn check_file(id: FileId, bytes: &[u8], len: usize) -> Result<(), Failure> {
    let header = header_line(id);
    let line_end = memchr::memchr(b'\n', bytes).ok_or("bad size line")?;
    let line = std::str::from_utf8(&bytes[..line_end]).map_err(|_| "bad size line")?;
    let mut fields = line.split_whitespace();
    let size: u64 = fields
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or("bad size line")?;
    if size != id.size() {
        return Err("bad file size");
    }
    if fields.next() != Some(header.trim_end().rsplit(' ').next().unwrap_or_default()) {
        return Err("bad url name");
    }
    if len as u64 != id.size() {
        return Err("bad length");
    }
    Ok(())
}

fn set_cookies<'a>(e: &'a Expect<'_>) -> impl Iterator<Item = &'a [u8]> {
    e.headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("Set-Cookie"))
        .map(|h| h.value)
}

/// `found_cookie=Ad_id=%d&Ad_weight=%d&Expired=%d`; returns the ad id.
fn check_cad(e: &Expect<'_>) -> Result<u32, Failure> {
    let value = set_cookies(e)
        .find_map(|v| v.strip_prefix(b"found_cookie="))
        .ok_or("missing found_cookie")?;
    let text = std::str::from_utf8(value).map_err(|_| "bad found_cookie")?;
    let text = text.split(';').next().unwrap_or_default();
    let mut ad = None;
    let mut weight = None;
    let mut expired = None;
    for field in text.split('&') {
        match field.split_once('=') {
            Some(("Ad_id", v)) => ad = v.trim().parse::<u32>().ok(),
            Some(("Ad_weight", v)) => weight = v.trim().parse::<u32>().ok(),
            Some(("Expired", v)) => expired = v.trim().parse::<u32>().ok(),
            _ => {}
        }
    }
    let (ad, weight, expired) = (
        ad.ok_or("bad Ad_id")?,
        weight.ok_or("bad Ad_weight")?,
        expired.ok_or("bad Expired")?,
    );
    // The client accepts 360 (an off-by-one, §10.7); servers answer 0..359.
    if ad > ADS || weight > 75 || expired > 1 {
        return Err("bad found_cookie");
    }
    let in_range = e
        .expired
        .iter()
        .any(|&first| (ad + ADS - first % ADS) % ADS < 24);
    match (in_range, expired == 1) {
        (true, false) => Err("Expected Expired Ad"),
        (false, true) => Err("Invalid Expired Ad"),
        _ => Ok(ad % ADS),
    }
}

fn check_my_cookie(e: &Expect<'_>) -> Result<(), Failure> {
    let want = e.user_id.to_string();
    let ok = set_cookies(e)
        .filter_map(|v| v.strip_prefix(b"my_cookie="))
        .any(|v| v.split(|&b| b == b';').next() == Some(want.as_bytes()));
    if ok { Ok(()) } else { Err("bad my_cookie") }
}

#[cfg(test)]
mod tests;
