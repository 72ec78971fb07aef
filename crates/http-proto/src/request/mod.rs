//! The request-head parser: limits, strict line endings and RFC 9112 body framing.
//!
//! `httparse` tokenizes the head (it is SIMD-accelerated and fuzzed upstream); this
//! module adds what a server must enforce on top of it:
//!
//! - size limits, checked on partial input too, so a slow or endless head is refused
//!   as soon as it crosses a limit, not after it has filled memory;
//! - CRLF only: `httparse` accepts a bare LF as a line end, RFC 9112 §2.2 lets a server
//!   refuse it, and Stoa does (Apache's strict mode, docs/robustness.md §3.7);
//! - message framing (RFC 9112 §6): `Transfer-Encoding` with `Content-Length`, a
//!   coding other than a final `chunked`, several or malformed `Content-Length`
//!   values, `Transfer-Encoding` in HTTP/1.0: all refused, and the connection closes;
//! - `Host` exactly once in HTTP/1.1, at most once in HTTP/1.0, and always of the
//!   form `uri-host [ ":" port ]` (RFC 9112 §3.2; RFC 3986 §3.2.2 for the host).

use std::mem::MaybeUninit;

use crate::Error;

pub mod host;

/// One header field, borrowed from the input buffer.
pub type Header<'b> = httparse::Header<'b>;

/// The largest header count any configuration may ask for. Storage for this many
/// headers lives on the caller's stack ([`header_storage`]).
pub const MAX_HEADERS_CAP: usize = 128;

/// Uninitialised header storage for [`parse_request`].
pub type HeaderStorage<'b> = [MaybeUninit<Header<'b>>; MAX_HEADERS_CAP];

/// Fresh header storage. It costs nothing to create (nothing is initialised).
pub fn header_storage<'b>() -> HeaderStorage<'b> {
    [const { MaybeUninit::uninit() }; MAX_HEADERS_CAP]
}

/// Size limits on a request head. Defaults follow docs/robustness.md §3.7 (nginx and
/// Apache's values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line, CRLF excluded (414 beyond). Default 8 KiB.
    pub max_request_line: usize,
    /// Longest header line, CRLF excluded (431 beyond). Default 8 KiB.
    pub max_header_line: usize,
    /// Largest head, request line and blank lines before it included (431 beyond).
    /// Default 32 KiB.
    pub max_head: usize,
    /// Most header fields (431 beyond). Default 100, at most [`MAX_HEADERS_CAP`].
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: 8 * 1024,
            max_header_line: 8 * 1024,
            max_head: 32 * 1024,
            max_headers: 100,
        }
    }
}

/// The request method. Methods Stoa does not serve are still parsed, so that the
/// answer can be a 405 with `Allow` instead of a 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `DELETE`
    Delete,
    /// `OPTIONS`
    Options,
    /// `TRACE`
    Trace,
    /// `CONNECT`
    Connect,
    /// `PATCH`
    Patch,
    /// Any other token.
    Other,
}

impl Method {
    fn from_token(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            "TRACE" => Method::Trace,
            "CONNECT" => Method::Connect,
            "PATCH" => Method::Patch,
            _ => Method::Other,
        }
    }
}

/// The protocol version of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0
    Http10,
    /// HTTP/1.1
    Http11,
}

impl Version {
    /// The version as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        }
    }
}

/// How the request body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    /// No body.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A parsed request head, borrowing the input buffer.
#[derive(Debug)]
pub struct RequestHead<'b, 'h> {
    /// The method, classified.
    pub method: Method,
    /// The method token as sent.
    pub method_token: &'b str,
    /// The request target as sent (not decoded).
    pub target: &'b [u8],
    /// The protocol version.
    pub version: Version,
    /// Every header field in order.
    pub headers: &'h [Header<'b>],
    /// How the body is framed.
    pub body: BodyKind,
    /// Whether the client asked to keep the connection open (HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`).
    pub keep_alive: bool,
    /// `Expect: 100-continue` was sent.
    pub expect_continue: bool,
    /// At least one `Accept-Encoding` field was sent (its values are in
    /// [`RequestHead::headers`]; [`crate::accept_encoding`] reads them).
    pub accept_encoding: bool,
    /// Length of the head in the buffer, the blank line included.
    pub len: usize,
}

impl RequestHead<'_, '_> {
    /// The value of the first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }

    /// The values of every field called `name` (any case), in order.
    pub fn headers_named<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s [u8]> + 's {
        self.headers
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value)
    }
}

/// The outcome of [`parse_request`] on input that is not (yet) malformed.
#[derive(Debug)]
pub enum Status<T> {
    /// A whole head was parsed.
    Complete(T),
    /// The head is not complete: read more bytes and call again with all of them.
    Partial,
}

/// Parses a request head at the start of `buf`.
///
/// Returns [`Status::Partial`] while the head is incomplete and still within the
/// limits, so the caller can read more and retry with the longer buffer. Blank lines
/// before the request line are skipped (RFC 9112 §2.2) but count toward `max_head`.
pub fn parse_request<'b, 'h>(
    buf: &'b [u8],
    storage: &'h mut [MaybeUninit<Header<'b>>],
    limits: &Limits,
) -> Result<Status<RequestHead<'b, 'h>>, Error> {
    let max_headers = limits.max_headers.min(storage.len());
    let mut req = httparse::Request::new(&mut []);
    let parsed = req.parse_with_uninit_headers(buf, &mut storage[..max_headers]);
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            check_partial(buf, limits)?;
            return Ok(Status::Partial);
        }
        Err(e) => return Err(classify(buf, e, limits)),
    };
    if len > limits.max_head {
        return Err(Error::HeadTooLarge);
    }
    check_request_line(buf, limits)?;
    check_line_endings(&buf[..len])?;
    let (Some(method_token), Some(path), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(Error::BadRequestLine);
    };
    let version = if minor == 1 {
        Version::Http11
    } else {
        Version::Http10
    };
    let headers: &'h [Header<'b>] = req.headers;
    let fields = Fields::scan(headers, limits)?;
    if (version == Version::Http11 && fields.hosts != 1) || fields.hosts > 1 {
        return Err(Error::BadHost);
    }
    let body = framing(&fields, version)?;
    Ok(Status::Complete(RequestHead {
        method: Method::from_token(method_token),
        method_token,
        target: path.as_bytes(),
        version,
        headers,
        body,
        keep_alive: if version == Version::Http11 {
            !fields.close
        } else {
            fields.keep_alive && !fields.close
        },
        expect_continue: fields.expect_continue,
        accept_encoding: fields.accept_encoding,
        len,
    }))
}

/// Offset of the start line (a request line or a status line): RFC 9112 §2.2 lets a
/// server skip blank lines before a request line, and `httparse` skips them before
/// either.
fn start_line_start(buf: &[u8]) -> usize {
    buf.iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(buf.len())
}

/// Length of the start line in `buf` so far, its CRLF excluded (all of what
/// follows the blank lines when its LF has not come yet).
pub(crate) fn start_line_len(buf: &[u8]) -> usize {
    let line = &buf[start_line_start(buf)..];
    let end = memchr::memchr(b'\n', line).unwrap_or(line.len());
    if end > 0 && line.get(end - 1) == Some(&b'\r') {
        end - 1
    } else {
        end
    }
}

fn check_request_line(buf: &[u8], limits: &Limits) -> Result<(), Error> {
    if start_line_len(buf) > limits.max_request_line {
        return Err(Error::RequestLineTooLong);
    }
    Ok(())
}

fn check_partial(buf: &[u8], limits: &Limits) -> Result<(), Error> {
    check_request_line(buf, limits)?;
    if buf.len() > limits.max_head {
        return Err(Error::HeadTooLarge);
    }
    Ok(())
}

/// Checks a block of field lines ended by its blank line, as the chunked trailer
/// section is, by the rules the head's fields follow: `httparse`'s default header
/// parser (a token before the colon and no space before it, no obs-fold, no control
/// byte in a value) and CRLF line endings. A request line or any other line without
/// a colon is refused too.
pub(crate) fn check_field_block(block: &[u8]) -> Result<(), Error> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS_CAP];
    match httparse::parse_headers(block, &mut fields) {
        Ok(httparse::Status::Complete((len, _))) if len == block.len() => check_line_endings(block),
        Err(httparse::Error::TooManyHeaders) => Err(Error::TooManyHeaders),
        Err(httparse::Error::NewLine) => Err(Error::BareLineEnding),
        _ => Err(Error::BadHeader),
    }
}

/// Rejects a LF not preceded by CR anywhere in the head. Blank lines before the
/// request line are held to the same rule.
pub(crate) fn check_line_endings(head: &[u8]) -> Result<(), Error> {
    for i in memchr::memchr_iter(b'\n', head) {
        if i == 0 || head[i - 1] != b'\r' {
            return Err(Error::BareLineEnding);
        }
    }
    Ok(())
}

fn classify(buf: &[u8], e: httparse::Error, limits: &Limits) -> Error {
    // A limit crossed before the syntax error is the more useful answer (e.g. a
    // 9 KiB request line is a 414 even if it also holds a stray byte).
    if let Err(limit) = check_partial(buf, limits) {
        return limit;
    }
    match e {
        httparse::Error::TooManyHeaders => Error::TooManyHeaders,
        httparse::Error::Version => Error::BadVersion,
        httparse::Error::HeaderName | httparse::Error::HeaderValue => Error::BadHeader,
        httparse::Error::NewLine => Error::BareLineEnding,
        httparse::Error::Token if is_http09(buf) => Error::BadVersion,
        httparse::Error::Token | httparse::Error::Status => Error::BadRequestLine,
    }
}

/// `GET /path` with no version: an HTTP/0.9 request line.
fn is_http09(buf: &[u8]) -> bool {
    let line = &buf[start_line_start(buf)..];
    let line = &line[..memchr::memchr2(b'\r', b'\n', line).unwrap_or(line.len())];
    memchr::memchr_iter(b' ', line).count() == 1
}

/// The header fields the parser itself must understand, gathered in one pass.
#[derive(Default)]
struct Fields<'b> {
    hosts: usize,
    content_length: Option<u64>,
    content_length_seen: bool,
    transfer_encoding: Vec<&'b [u8]>,
    close: bool,
    keep_alive: bool,
    expect_continue: bool,
    accept_encoding: bool,
}

impl<'b> Fields<'b> {
    fn scan(headers: &[Header<'b>], limits: &Limits) -> Result<Fields<'b>, Error> {
        let mut f = Fields::default();
        for h in headers {
            // name, ": " and the value: what the line holds without its CRLF.
            if h.name.len() + 2 + h.value.len() > limits.max_header_line {
                return Err(Error::HeaderLineTooLong);
            }
            let name = h.name.as_bytes();
            if name.eq_ignore_ascii_case(b"host") {
                if !host::valid_host(trim(h.value)) {
                    return Err(Error::BadHost);
                }
                f.hosts += 1;
            } else if name.eq_ignore_ascii_case(b"content-length") {
                if f.content_length_seen {
                    return Err(Error::BadContentLength);
                }
                f.content_length_seen = true;
                f.content_length = Some(parse_content_length(h.value)?);
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                f.transfer_encoding
                    .extend(list_items(h.value).filter(|i| !i.is_empty()));
                if list_items(h.value).all(<[u8]>::is_empty) {
                    return Err(Error::BadTransferEncoding);
                }
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in list_items(h.value) {
                    if token.eq_ignore_ascii_case(b"close") {
                        f.close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        f.keep_alive = true;
                    }
                }
            } else if name.eq_ignore_ascii_case(b"expect") {
                if !trim(h.value).eq_ignore_ascii_case(b"100-continue") {
                    return Err(Error::UnsupportedExpectation);
                }
                f.expect_continue = true;
            } else if name.eq_ignore_ascii_case(b"accept-encoding") {
                f.accept_encoding = true;
            }
        }
        Ok(f)
    }
}

fn framing(f: &Fields<'_>, version: Version) -> Result<BodyKind, Error> {
    if f.transfer_encoding.is_empty() {
        return Ok(match f.content_length {
            Some(0) | None => BodyKind::None,
            Some(n) => BodyKind::Length(n),
        });
    }
    if version == Version::Http10 {
        return Err(Error::TransferEncodingInHttp10);
    }
    if f.content_length_seen {
        return Err(Error::TransferEncodingWithContentLength);
    }
    let (last, rest) = f
        .transfer_encoding
        .split_last()
        .ok_or(Error::BadTransferEncoding)?;
    let is_chunked = |c: &[u8]| c.eq_ignore_ascii_case(b"chunked");
    if rest.iter().any(|c| is_chunked(c)) {
        return Err(Error::BadTransferEncoding);
    }
    if !rest.is_empty() {
        // Stoa decodes no coding other than chunked (gzip, deflate, ...).
        return Err(Error::UnsupportedTransferCoding);
    }
    if is_chunked(last) {
        Ok(BodyKind::Chunked)
    } else if last.contains(&b';') || last.contains(&b' ') {
        Err(Error::BadTransferEncoding)
    } else {
        Err(Error::UnsupportedTransferCoding)
    }
}

/// `Content-Length = 1*DIGIT` (RFC 9110 §8.6): no sign, no list, no spaces inside,
/// and no overflow.
pub(crate) fn parse_content_length(value: &[u8]) -> Result<u64, Error> {
    let digits = trim(value);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(Error::BadContentLength);
    }
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)
            .and_then(|n| n.checked_add(u64::from(d - b'0')))
            .ok_or(Error::BadContentLength)
    })
}

/// The items of a comma-separated list (RFC 9110 §5.6.1), trimmed of OWS.
pub(crate) fn list_items(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim)
}

/// `value` without leading and trailing spaces and tabs.
pub(crate) fn trim(value: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = value.iter().position(|b| !is_ows(b)).unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |e| e + 1);
    &value[start..end]
}

#[cfg(test)]
mod tests;
