//! HTTP/1.x from a test client's side: request bytes, a response parsed from its
//! head, and a raw client connection ([`Client`], plain or TLS, buffered for
//! pipelining) that reads responses and watches how the server closes.

use std::io;

mod client;

pub use client::{Client, Closed, DEFAULT_TIMEOUT};

/// One response: status line, header fields in order, and the body (empty
/// until its reader fills it).
#[derive(Debug, Clone)]
pub struct Response {
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub version: String,
    /// The status code.
    pub status: u16,
    /// Every header field as sent (name, value without surrounding white space).
    pub headers: Vec<(String, String)>,
    /// The body bytes.
    pub body: Vec<u8>,
}

/// Where the head in `buf` ends: the index just after its blank line
/// (`\r\n\r\n`), if it is complete.
pub fn head_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

/// `GET path HTTP/1.1` with a `Host` header.
pub fn get(path: &str) -> Vec<u8> {
    request("GET", path, &[])
}

/// `METHOD path HTTP/1.1` with a `Host` header and extra header lines.
pub fn request(method: &str, path: &str, headers: &[(&str, &str)]) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: test\r\n");
    for (name, value) in headers {
        r.push_str(name);
        r.push_str(": ");
        r.push_str(value);
        r.push_str("\r\n");
    }
    r.push_str("\r\n");
    r.into_bytes()
}

impl Response {
    /// Parses a response head (status line and header fields, with or without
    /// the final blank line); the body is left empty. Anything that is not an
    /// `HTTP/1.x` status line or a `name: value` field is an `InvalidData` error.
    pub fn parse_head(head: &[u8]) -> io::Result<Response> {
        let text = String::from_utf8_lossy(head);
        let mut lines = text.trim_end_matches("\r\n").split("\r\n");
        let status_line = lines.next().unwrap_or_default();
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or_default().to_owned();
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
        if !version.starts_with("HTTP/1.") {
            return Err(bad(format!("bad status line {status_line:?}")));
        }
        let mut headers = Vec::new();
        for line in lines {
            let (name, value) = line
                .split_once(':')
                .ok_or_else(|| bad(format!("bad header line {line:?}")))?;
            headers.push((name.to_owned(), value.trim().to_owned()));
        }
        Ok(Response {
            version,
            status,
            headers,
            body: Vec::new(),
        })
    }

    /// Whether this response has no body whatever its headers say: a response
    /// to HEAD (`head_request`), or a 1xx, 204 or 304.
    pub fn is_bodiless(&self, head_request: bool) -> bool {
        head_request
            || self.status == 204
            || self.status == 304
            || (100..200).contains(&self.status)
    }

    /// The first header named `name` (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// How many headers are named `name`.
    pub fn header_count(&self, name: &str) -> usize {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .count()
    }

    /// `Connection: close` was sent.
    pub fn closes(&self) -> bool {
        self.header("Connection")
            .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }

    /// The `Content-Length`, if sent; panics if it is not a number.
    pub fn content_length(&self) -> Option<u64> {
        self.header("Content-Length")
            .map(|v| v.trim().parse().expect("numeric Content-Length"))
    }

    /// The body as text (lossy UTF-8).
    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}
