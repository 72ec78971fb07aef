//! Response heads: status reasons and a writer that appends header lines to a
//! buffer, for the server; and the parser of another server's heads
//! ([`parse_response`], in [`parse`]) for the clients.
//!
//! The writer appends to a caller-owned `Vec<u8>` so a connection can encode several
//! pipelined responses into one buffer and send them with one `writev`.

pub mod parse;
#[cfg(test)]
mod parse_tests;

pub use crate::error::ResponseError;
pub use parse::{Framing, ResponseHead, ResponseLimits, parse_response};

/// The reason phrase Stoa sends for `status`.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        411 => "Length Required",
        413 => "Content Too Large",
        414 => "URI Too Long",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        505 => "HTTP Version Not Supported",
        507 => "Insufficient Storage",
        _ => "Unknown",
    }
}

/// Appends a response head to a buffer, one call per line.
///
/// ```
/// let mut buf = Vec::new();
/// stoa_http_proto::response::HeadWriter::new(&mut buf, 200)
///     .header("Content-Type", b"text/plain")
///     .content_length(5)
///     .finish();
/// assert_eq!(buf, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\n");
/// ```
#[derive(Debug)]
pub struct HeadWriter<'a> {
    buf: &'a mut Vec<u8>,
}

impl<'a> HeadWriter<'a> {
    /// Starts a head with the status line. Stoa always answers as HTTP/1.1, as
    /// RFC 9110 §6.2 asks of a server that speaks 1.1 (HTTP/1.0 clients accept it).
    pub fn new(buf: &'a mut Vec<u8>, status: u16) -> HeadWriter<'a> {
        buf.extend_from_slice(b"HTTP/1.1 ");
        let mut digits = itoa::Buffer::new();
        buf.extend_from_slice(digits.format(status).as_bytes());
        buf.push(b' ');
        buf.extend_from_slice(reason(status).as_bytes());
        buf.extend_from_slice(b"\r\n");
        HeadWriter { buf }
    }

    /// Appends `name: value`. The caller guarantees `value` holds no CR or LF.
    pub fn header(self, name: &str, value: &[u8]) -> Self {
        self.buf.extend_from_slice(name.as_bytes());
        self.buf.extend_from_slice(b": ");
        self.buf.extend_from_slice(value);
        self.buf.extend_from_slice(b"\r\n");
        self
    }

    /// Appends pre-encoded header lines, each already ending in CRLF.
    pub fn raw(self, lines: &[u8]) -> Self {
        self.buf.extend_from_slice(lines);
        self
    }

    /// Appends `Content-Length: n`.
    pub fn content_length(self, n: u64) -> Self {
        let mut digits = itoa::Buffer::new();
        self.header("Content-Length", digits.format(n).as_bytes())
    }

    /// Appends the blank line that ends the head.
    pub fn finish(self) {
        self.buf.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_stoa_sends_has_a_reason() {
        for s in [
            200, 206, 301, 304, 400, 403, 404, 405, 408, 413, 414, 416, 417, 421, 431, 500, 501,
            503,
        ] {
            assert_ne!(reason(s), "Unknown", "{s}");
        }
    }

    #[test]
    fn head_layout() {
        let mut buf = Vec::new();
        HeadWriter::new(&mut buf, 404)
            .raw(b"Server: stoa\r\n")
            .content_length(0)
            .finish();
        assert_eq!(
            buf,
            b"HTTP/1.1 404 Not Found\r\nServer: stoa\r\nContent-Length: 0\r\n\r\n"
        );
    }
}
