//! Message output for RETR and TOP (RFC 1939 §3, §7): byte-stuffing, CRLF line ends,
//! TOP's header/body split and the terminating `.` line, incrementally.
//!
//! The server reads the stored message in chunks of any size and passes each through
//! [`MessageEncoder::encode`], writing out what it appends; [`MessageEncoder::finish`]
//! ends the response. Nothing of the message is buffered here beyond one pending CR,
//! so a large message never has to be in memory at once, and the output does not
//! depend on where the chunks are cut.
//!
//! # Rules
//!
//! - A line starting with `.` gets another `.` in front (byte-stuffing), so the
//!   client never sees a `.` line before the real end.
//! - Line ends go out as CRLF. A stored message is CRLF already; should one hold a
//!   bare LF or a bare CR, it is sent as CRLF too, and the line after it stuffed: a
//!   client that ends lines at a bare LF (many do) must not find `LF.CRLF` in the
//!   middle of a message, where it would end it early and read the rest as server
//!   responses (the POP3 twin of SMTP smuggling).
//! - A message not ending in CRLF gets one before the `.` line.
//! - TOP n sends the header section, the empty line after it, and then at most n
//!   lines of the body; a message without an empty line is all header and is sent
//!   whole. A last body line without CRLF counts as a line. Once the n lines are
//!   out, [`MessageEncoder::encode`] says so and the server can stop reading.

use std::borrow::Cow;

use memchr::memchr2;

use crate::response::Response;

/// What the message encoder is sending.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    /// All of it (RETR).
    Whole,
    /// The header section of a TOP, with the body line count to send after it.
    Header {
        /// Body lines wanted.
        lines: u32,
    },
    /// The body of a TOP, with the lines still to send (at least 1).
    Body {
        /// Body lines left.
        left: u32,
    },
    /// TOP has sent all it should: the rest of the input is ignored.
    Done,
}

/// The byte-stuffing encoder of one RETR or TOP response body (the status line is
/// [`Retrieval::response`]).
///
/// ```
/// use stoa_pop3_proto::MessageEncoder;
///
/// let mut out = Vec::new();
/// let mut encoder = MessageEncoder::top(1);
/// for chunk in [&b"Subject: x\r\n\r\n.one\r"[..], b"\ntwo\r\nthree\r\n"] {
///     if !encoder.encode(chunk, &mut out) {
///         break; // TOP has what it needs: stop reading the file
///     }
/// }
/// encoder.finish(&mut out);
/// assert_eq!(out, b"Subject: x\r\n\r\n..one\r\n.\r\n");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageEncoder {
    part: Part,
    /// The next byte starts a line.
    at_line_start: bool,
    /// The last byte seen was a CR whose LF may be in the next chunk.
    pending_cr: bool,
}

impl MessageEncoder {
    /// The encoder of a whole message (RETR).
    pub fn retr() -> MessageEncoder {
        MessageEncoder::with_part(Part::Whole)
    }

    /// The encoder of a message's header section and first `lines` body lines (TOP).
    pub fn top(lines: u32) -> MessageEncoder {
        MessageEncoder::with_part(Part::Header { lines })
    }

    fn with_part(part: Part) -> MessageEncoder {
        MessageEncoder {
            part,
            at_line_start: true,
            pending_cr: false,
        }
    }

    /// Appends the wire form of `chunk`, the next bytes of the stored message, to
    /// `out`. Returns `false` once nothing more of the message will be sent (TOP has
    /// sent its lines): the server may stop reading, and later chunks are ignored.
    pub fn encode(&mut self, mut chunk: &[u8], out: &mut Vec<u8>) -> bool {
        out.reserve(chunk.len() + chunk.len() / 64 + 2);
        while !chunk.is_empty() && self.part != Part::Done {
            if self.pending_cr {
                // CR LF, or a bare CR: a line end either way.
                self.pending_cr = false;
                if chunk[0] == b'\n' {
                    chunk = &chunk[1..];
                }
                self.end_line(out);
                continue;
            }
            match memchr2(b'\r', b'\n', chunk) {
                None => {
                    self.text(chunk, out);
                    chunk = &[];
                }
                Some(at) => {
                    self.text(&chunk[..at], out);
                    if chunk[at] == b'\r' {
                        self.pending_cr = true;
                    } else {
                        self.end_line(out);
                    }
                    chunk = &chunk[at + 1..];
                }
            }
        }
        self.part != Part::Done
    }

    /// Whether nothing more of the message will be sent (TOP has sent its lines).
    pub fn is_done(&self) -> bool {
        self.part == Part::Done
    }

    /// Ends the response after the last chunk: a CRLF if the message did not end with
    /// one, then the `.` line.
    pub fn finish(mut self, out: &mut Vec<u8>) {
        if self.pending_cr {
            self.pending_cr = false;
            self.end_line(out);
        }
        if !self.at_line_start {
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b".\r\n");
    }

    /// Line content without CR or LF: stuffed if it starts a line with `.`.
    fn text(&mut self, text: &[u8], out: &mut Vec<u8>) {
        let Some(&first) = text.first() else {
            return;
        };
        if self.at_line_start && first == b'.' {
            out.push(b'.');
        }
        out.extend_from_slice(text);
        self.at_line_start = false;
    }

    /// A line end: CRLF out, and TOP's accounting.
    fn end_line(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"\r\n");
        let empty = self.at_line_start;
        self.at_line_start = true;
        self.part = match self.part {
            Part::Header { lines: 0 } if empty => Part::Done,
            Part::Header { lines } if empty => Part::Body { left: lines },
            Part::Body { left: 1 } => Part::Done,
            Part::Body { left } => Part::Body { left: left - 1 },
            other => other,
        };
    }
}

/// A RETR or TOP the session validated: the server opens message [`index`], writes
/// [`response`], streams the file through [`encoder`] and finishes it. If the
/// message cannot be opened, it writes [`Response::message_unavailable`] instead;
/// if reading fails after the status line went out, it can only close the
/// connection.
///
/// [`index`]: Retrieval::index
/// [`response`]: Retrieval::response
/// [`encoder`]: Retrieval::encoder
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retrieval {
    /// The message's 0-based index in the listing (message number − 1).
    pub index: usize,
    /// Its size from the listing.
    pub size: u64,
    /// `Some(n)` for TOP with n body lines, `None` for RETR.
    pub top_lines: Option<u32>,
}

impl Retrieval {
    /// The message number the client used.
    pub fn number(&self) -> usize {
        self.index + 1
    }

    /// The status line: `+OK 1234 octets` for RETR, `+OK` and the request for TOP.
    pub fn response(&self) -> Response {
        let text: Cow<'static, str> = match self.top_lines {
            None => format!("{} octets", self.size).into(),
            Some(_) => "Top of message follows".into(),
        };
        Response::ok(text)
    }

    /// The encoder of the body.
    pub fn encoder(&self) -> MessageEncoder {
        match self.top_lines {
            None => MessageEncoder::retr(),
            Some(lines) => MessageEncoder::top(lines),
        }
    }

    /// The whole response for a message held in memory: status line, encoded
    /// message, `.` line.
    pub fn write_to(&self, message: &[u8], out: &mut Vec<u8>) {
        self.response().write_to(out);
        let mut encoder = self.encoder();
        encoder.encode(message, out);
        encoder.finish(out);
    }
}

#[cfg(test)]
mod tests;
