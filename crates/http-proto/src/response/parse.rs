//! The response-head parser: a client's side of RFC 9112, for whatever reads
//! another server's answers (the load generator, the harness, the coming reverse
//! proxy's upstream responses).
//!
//! `httparse` tokenizes the head, as it does requests; this module holds it to the
//! request side's rules, read from the other end:
//!
//! - size limits ([`ResponseLimits`]), checked on partial input too, so an endless
//!   head is refused once it crosses a limit, not after it has filled memory;
//! - CRLF only: a bare LF, which `httparse` accepts as a line end, is refused;
//! - a status code of 100–599 (RFC 9110 §15) and a version of HTTP/1.0 or 1.1;
//! - message framing (RFC 9112 §6.3), decided once into a [`Framing`]: no body for
//!   a response to HEAD, for 1xx, 204 and 304 (and for a 2xx to CONNECT, after which
//!   the connection is a tunnel); otherwise `chunked`, or `Content-Length`, or the
//!   body runs until the server closes. Refused, and the connection must close:
//!   `Transfer-Encoding` with `Content-Length` (RFC 9112 §6.3 lets a client go by
//!   `Transfer-Encoding`; a proxy that did would forward a message its next hop
//!   may frame differently), a coding other than one final `chunked` (nothing here
//!   decodes gzip), `Transfer-Encoding` in HTTP/1.0, a malformed `Content-Length`
//!   and several that differ. Several equal ones (`42, 42`, or the field twice) are
//!   one, as RFC 9110 §8.6 allows: servers behind some frameworks repeat it;
//! - persistence: HTTP/1.1 unless `Connection: close`, HTTP/1.0 only with
//!   `Connection: keep-alive`, and never when the body runs until close.
//!
//! Parsing allocates nothing: the head borrows the input and the caller's header
//! storage ([`crate::request::header_storage`]).

use std::mem::MaybeUninit;

use crate::Error;
use crate::error::ResponseError;
use crate::request::{
    Header, Method, Status, Version, check_line_endings, list_items, parse_content_length,
    start_line_len, trim,
};

/// Size limits on a response head. Defaults are the request side's
/// ([`crate::Limits`]): nginx's and Apache's, which their upstream heads fit too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseLimits {
    /// Longest status line, CRLF excluded. Default 8 KiB.
    pub max_status_line: usize,
    /// Longest header line, CRLF excluded. Default 8 KiB.
    pub max_header_line: usize,
    /// Largest head, status line and blank lines before it included. Default 32 KiB.
    pub max_head: usize,
    /// Most header fields. Default 100, at most [`crate::request::MAX_HEADERS_CAP`].
    pub max_headers: usize,
}

impl Default for ResponseLimits {
    fn default() -> Self {
        ResponseLimits {
            max_status_line: 8 * 1024,
            max_header_line: 8 * 1024,
            max_head: 32 * 1024,
            max_headers: 100,
        }
    }
}

/// How the response body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body: the next response (or, after a 101 or a 2xx to CONNECT, the other
    /// protocol) starts right after the head.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// `Transfer-Encoding: chunked` ([`crate::chunked::ChunkedDecoder`]).
    Chunked,
    /// Everything until the server closes the connection.
    UntilClose,
}

/// A parsed response head, borrowing the input buffer.
#[derive(Debug)]
pub struct ResponseHead<'b, 'h> {
    /// The protocol version.
    pub version: Version,
    /// The status code, 100–599.
    pub status: u16,
    /// The reason phrase as sent (empty when absent, or when not UTF-8).
    pub reason: &'b str,
    /// Every header field in order.
    pub headers: &'h [Header<'b>],
    /// How the body is framed, the status and the request's method considered.
    pub framing: Framing,
    /// The `Content-Length` value, when the response has one, whatever the framing
    /// (a response to HEAD or a 304 tells the length of a body it does not carry).
    pub content_length: Option<u64>,
    /// Whether the connection stays open after this response's body.
    pub keep_alive: bool,
    /// Length of the head in the buffer, the blank line included.
    pub len: usize,
}

impl ResponseHead<'_, '_> {
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

/// Parses a response head at the start of `buf`, the answer to a `method` request.
///
/// Returns [`Status::Partial`] while the head is incomplete and still within the
/// limits, so the caller can read more and retry with the longer buffer. A 1xx
/// response (100 Continue, 103 Early Hints) is returned like any other, with no
/// body: the final response follows it. Errors are [`Error::BadResponse`].
pub fn parse_response<'b, 'h>(
    buf: &'b [u8],
    storage: &'h mut [MaybeUninit<Header<'b>>],
    limits: &ResponseLimits,
    method: Method,
) -> Result<Status<ResponseHead<'b, 'h>>, Error> {
    let max_headers = limits.max_headers.min(storage.len());
    let mut resp = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
        &mut resp,
        buf,
        &mut storage[..max_headers],
    );
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            check_partial(buf, limits)?;
            return Ok(Status::Partial);
        }
        Err(e) => return Err(classify(buf, e, limits).into()),
    };
    if len > limits.max_head {
        return Err(ResponseError::HeadTooLarge.into());
    }
    check_status_line(buf, limits)?;
    check_line_endings(&buf[..len]).map_err(|_| ResponseError::BareLineEnding)?;
    let (Some(minor), Some(status)) = (resp.version, resp.code) else {
        return Err(ResponseError::BadStatusLine.into());
    };
    if !(100..=599).contains(&status) {
        return Err(ResponseError::BadStatusLine.into());
    }
    let version = if minor == 1 {
        Version::Http11
    } else {
        Version::Http10
    };
    let headers: &'h [Header<'b>] = resp.headers;
    let fields = Fields::scan(headers, limits)?;
    let framing = framing(&fields, version, status, method)?;
    let persistent = match version {
        Version::Http11 => !fields.close,
        Version::Http10 => fields.keep_alive && !fields.close,
    };
    Ok(Status::Complete(ResponseHead {
        version,
        status,
        reason: resp.reason.unwrap_or_default(),
        headers,
        framing,
        content_length: fields.content_length,
        keep_alive: persistent && framing != Framing::UntilClose,
        len,
    }))
}

fn check_status_line(buf: &[u8], limits: &ResponseLimits) -> Result<(), ResponseError> {
    if start_line_len(buf) > limits.max_status_line {
        return Err(ResponseError::StatusLineTooLong);
    }
    Ok(())
}

fn check_partial(buf: &[u8], limits: &ResponseLimits) -> Result<(), ResponseError> {
    check_status_line(buf, limits)?;
    if buf.len() > limits.max_head {
        return Err(ResponseError::HeadTooLarge);
    }
    Ok(())
}

fn classify(buf: &[u8], e: httparse::Error, limits: &ResponseLimits) -> ResponseError {
    // A limit crossed before the syntax error is the more useful answer, as on
    // the request side.
    if let Err(limit) = check_partial(buf, limits) {
        return limit;
    }
    match e {
        httparse::Error::TooManyHeaders => ResponseError::TooManyHeaders,
        httparse::Error::Version => ResponseError::BadVersion,
        httparse::Error::HeaderName | httparse::Error::HeaderValue => ResponseError::BadHeader,
        httparse::Error::NewLine => ResponseError::BareLineEnding,
        httparse::Error::Status | httparse::Error::Token => ResponseError::BadStatusLine,
    }
}

/// The header fields the parser itself must understand, gathered in one pass
/// without allocating.
#[derive(Default)]
struct Fields<'b> {
    content_length: Option<u64>,
    /// Transfer codings listed, over every `Transfer-Encoding` field.
    codings: usize,
    /// The last coding listed.
    last_coding: &'b [u8],
    /// `chunked` was listed before another coding.
    chunked_not_last: bool,
    close: bool,
    keep_alive: bool,
}

impl<'b> Fields<'b> {
    fn scan(headers: &[Header<'b>], limits: &ResponseLimits) -> Result<Fields<'b>, ResponseError> {
        let mut f = Fields::default();
        for h in headers {
            // name, ": " and the value: what the line holds without its CRLF.
            if h.name.len() + 2 + h.value.len() > limits.max_header_line {
                return Err(ResponseError::HeaderLineTooLong);
            }
            let name = h.name.as_bytes();
            if name.eq_ignore_ascii_case(b"content-length") {
                f.content_length(h.value)?;
            } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
                f.transfer_encoding(h.value)?;
            } else if name.eq_ignore_ascii_case(b"connection") {
                for token in list_items(h.value) {
                    if token.eq_ignore_ascii_case(b"close") {
                        f.close = true;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        f.keep_alive = true;
                    }
                }
            }
        }
        Ok(f)
    }

    /// One `Content-Length` field: a number, or a list of equal ones, equal to any
    /// seen before.
    fn content_length(&mut self, value: &[u8]) -> Result<(), ResponseError> {
        for item in list_items(value) {
            let n = parse_content_length(item).map_err(|_| ResponseError::BadContentLength)?;
            if self.content_length.is_some_and(|seen| seen != n) {
                return Err(ResponseError::BadContentLength);
            }
            self.content_length = Some(n);
        }
        Ok(())
    }

    /// One `Transfer-Encoding` field's codings, appended to those before.
    fn transfer_encoding(&mut self, value: &'b [u8]) -> Result<(), ResponseError> {
        let before = self.codings;
        for coding in list_items(value).filter(|c| !c.is_empty()) {
            if self.codings > 0 && is_chunked(self.last_coding) {
                self.chunked_not_last = true;
            }
            self.codings += 1;
            self.last_coding = coding;
        }
        if self.codings == before {
            return Err(ResponseError::BadTransferEncoding);
        }
        Ok(())
    }
}

fn is_chunked(coding: &[u8]) -> bool {
    coding.eq_ignore_ascii_case(b"chunked")
}

/// The body's framing (RFC 9112 §6.3), after the header rules that hold whatever
/// the status.
fn framing(
    f: &Fields<'_>,
    version: Version,
    status: u16,
    method: Method,
) -> Result<Framing, ResponseError> {
    let chunked = transfer_coding(f, version)?;
    let no_body = method == Method::Head
        || (100..200).contains(&status)
        || status == 204
        || status == 304
        || (method == Method::Connect && (200..300).contains(&status));
    Ok(if no_body {
        Framing::None
    } else if chunked {
        Framing::Chunked
    } else {
        match f.content_length {
            Some(0) => Framing::None,
            Some(n) => Framing::Length(n),
            None => Framing::UntilClose,
        }
    })
}

/// Whether the body is chunked, refusing every other use of `Transfer-Encoding`.
fn transfer_coding(f: &Fields<'_>, version: Version) -> Result<bool, ResponseError> {
    if f.codings == 0 {
        return Ok(false);
    }
    if version == Version::Http10 {
        return Err(ResponseError::TransferEncodingInHttp10);
    }
    if f.content_length.is_some() {
        return Err(ResponseError::TransferEncodingWithContentLength);
    }
    if f.chunked_not_last {
        return Err(ResponseError::BadTransferEncoding);
    }
    if f.codings > 1 {
        return Err(ResponseError::UnsupportedTransferCoding);
    }
    let last = trim(f.last_coding);
    if is_chunked(last) {
        Ok(true)
    } else if last.contains(&b';') || last.contains(&b' ') {
        Err(ResponseError::BadTransferEncoding)
    } else {
        Err(ResponseError::UnsupportedTransferCoding)
    }
}
