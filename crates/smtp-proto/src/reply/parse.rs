//! Replies as a client reads them (RFC 5321 §4.2): what the queue's SMTP and LMTP
//! clients and the mail load generator get from the servers they talk to.
//!
//! [`parse_reply`] takes the bytes read so far and returns one whole reply,
//! [`Status::Partial`] when it is not all there yet, or a [`ReplyError`]. The reply
//! borrows the input ([`ParsedReply`]): reading one allocates nothing. The rules:
//!
//! - every line ends in CRLF; a bare LF is refused, as the server refuses a
//!   client's (the framing of a peer that differs from ours cannot be trusted);
//! - every line starts with the same three-digit code, `2`–`5`, `0`–`5`, `0`–`9`
//!   (RFC 5321 §4.2's grammar; there are no `1yz` replies in SMTP), followed by `-`
//!   on every line but the last and by a space, or nothing, on the last;
//! - the text holds no control byte but TAB (RFC 5321's `textstring`), so a reply's
//!   text can go into a log line or a bounce as it is; 8-bit bytes are let through
//!   (servers send UTF-8 texts);
//! - the enhanced status code (RFC 2034 §4, RFC 3463) is read from the first line
//!   when it is there and of the code's class (`550 5.1.1`, not `550 2.0.0`);
//! - [`ReplyLimits`] caps the length of a line and the number of lines, so the
//!   bytes a caller buffers for one reply are bounded: at most
//!   `max_line * max_lines` before the reply is either whole or refused.

use std::fmt;

use stoa_mail_proto::{Line, Status, next_line};

use super::EnhancedStatus;

/// Limits on a reply read by a client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyLimits {
    /// Longest line, CRLF included. Default 2048: four times RFC 5321 §4.5.3.1.5's
    /// 512 octets, since the RFC asks clients to be liberal and some servers' long
    /// rejection texts run past 512.
    pub max_line: usize,
    /// Most lines in one reply. Default 32: an EHLO answer runs to about 20 lines and
    /// a multi-line refusal to a handful, and 32 lines of 2048 bytes keep one reply
    /// within 64 KiB.
    pub max_lines: usize,
}

impl Default for ReplyLimits {
    fn default() -> Self {
        ReplyLimits {
            max_line: 2048,
            max_lines: 32,
        }
    }
}

/// Why a server's reply was refused.
///
/// Not the crate's [`crate::Error`]: that one is a client's mistake as the server
/// sees it, each variant with the reply it earns; this one is a server's, as the
/// client sees it, and has no reply. After any of them the connection's framing is
/// lost: the caller should close it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplyError {
    /// A line longer than [`ReplyLimits::max_line`].
    LineTooLong,
    /// More lines than [`ReplyLimits::max_lines`].
    TooManyLines,
    /// A line ended by LF without CR.
    BareLf,
    /// A line that does not start with a reply code (three digits, `2`–`5`,
    /// `0`–`5`, `0`–`9`).
    BadCode,
    /// A code followed by something other than `-`, a space or the line end.
    BadSeparator,
    /// A line of a multi-line reply with another code than the first line's.
    CodeMismatch,
    /// A control byte (other than TAB) in a line's text.
    BadCharacter,
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReplyError::LineTooLong => "reply line too long",
            ReplyError::TooManyLines => "too many reply lines",
            ReplyError::BareLf => "reply line ended by a bare LF",
            ReplyError::BadCode => "reply line without a valid reply code",
            ReplyError::BadSeparator => "reply code followed by neither space nor hyphen",
            ReplyError::CodeMismatch => "reply lines with different codes",
            ReplyError::BadCharacter => "control character in a reply",
        })
    }
}

impl std::error::Error for ReplyError {}

/// One whole reply, borrowing the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedReply<'b> {
    code: u16,
    status: Option<EnhancedStatus>,
    /// The reply's lines as sent, each with its CRLF.
    wire: &'b [u8],
    line_count: usize,
}

impl<'b> ParsedReply<'b> {
    /// The three-digit code.
    pub fn code(&self) -> u16 {
        self.code
    }

    /// The enhanced status code of the first line, when it has one of the code's
    /// class.
    pub fn status(&self) -> Option<EnhancedStatus> {
        self.status
    }

    /// 2xx or 3xx: the command was accepted (or is going on).
    pub fn is_positive(&self) -> bool {
        self.code < 400
    }

    /// Bytes of input the reply took, every CRLF included: where the next reply
    /// starts.
    pub fn consumed(&self) -> usize {
        self.wire.len()
    }

    /// The reply as it was sent.
    pub fn as_bytes(&self) -> &'b [u8] {
        self.wire
    }

    /// How many lines the reply has (at least one).
    pub fn line_count(&self) -> usize {
        self.line_count
    }

    /// The text of each line, after the code and its separator, as sent (an
    /// enhanced status code included): `5.1.1 User unknown` of
    /// `550 5.1.1 User unknown`.
    pub fn lines(&self) -> impl Iterator<Item = &'b [u8]> + 'b {
        let wire = self.wire.strip_suffix(b"\r\n").unwrap_or(self.wire);
        wire.split(|&b| b == b'\n')
            .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
            .map(|line| line.get(4..).unwrap_or_default())
    }

    /// The parameters of the EHLO (or LHLO) keyword `keyword` (ASCII
    /// case-insensitive), when the server offers it: `Some(b"10240000")` for `SIZE`
    /// in `250-SIZE 10240000`, `Some(b"")` for `PIPELINING` in `250-PIPELINING`.
    /// The first line, the server's name and greeting, is not searched.
    pub fn extension(&self, keyword: &str) -> Option<&'b [u8]> {
        self.lines().skip(1).find_map(|line| {
            let (word, params) = match line.iter().position(|&b| b == b' ') {
                Some(space) => (&line[..space], &line[space + 1..]),
                None => (line, &line[line.len()..]),
            };
            word.eq_ignore_ascii_case(keyword.as_bytes())
                .then_some(params)
        })
    }
}

/// Parses the reply at the start of `buf`.
///
/// Returns [`Status::Partial`] while the reply is incomplete and still within the
/// limits, so the caller can read more and retry with the longer buffer. Bytes after
/// the reply (a pipelined server's next replies) are left alone.
pub fn parse_reply<'b>(
    buf: &'b [u8],
    limits: &ReplyLimits,
) -> Result<Status<ParsedReply<'b>>, ReplyError> {
    let mut pos = 0;
    let mut line_count = 0;
    let mut first: Option<(u16, Option<EnhancedStatus>)> = None;
    loop {
        line_count += 1;
        let (line, consumed) = match next_line(&buf[pos..], limits.max_line) {
            Line::Complete { line, consumed } => (line, consumed),
            Line::Partial => return Ok(Status::Partial),
            Line::BareLf { .. } => return Err(ReplyError::BareLf),
            Line::TooLong { .. } => return Err(ReplyError::LineTooLong),
        };
        let (code, last, text) = split_line(line)?;
        let (first_code, status) = *first.get_or_insert_with(|| {
            let class = (code / 100) as u8;
            (
                code,
                EnhancedStatus::parse(text).filter(|s| s.class == class),
            )
        });
        if code != first_code {
            return Err(ReplyError::CodeMismatch);
        }
        pos += consumed;
        if last {
            return Ok(Status::Complete(ParsedReply {
                code,
                status,
                wire: &buf[..pos],
                line_count,
            }));
        }
        if line_count >= limits.max_lines {
            return Err(ReplyError::TooManyLines);
        }
    }
}

/// A line's code, whether it is the reply's last, and its text.
fn split_line(line: &[u8]) -> Result<(u16, bool, &[u8]), ReplyError> {
    let code = match line {
        [a @ b'2'..=b'5', b @ b'0'..=b'5', c @ b'0'..=b'9', ..] => {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => return Err(ReplyError::BadCode),
    };
    let (last, text) = match &line[3..] {
        [] => (true, &line[3..]),
        [b' ', text @ ..] => (true, text),
        [b'-', text @ ..] => (false, text),
        _ => return Err(ReplyError::BadSeparator),
    };
    if text.iter().any(|&b| (b < b' ' && b != b'\t') || b == 0x7f) {
        return Err(ReplyError::BadCharacter);
    }
    Ok((code, last, text))
}
