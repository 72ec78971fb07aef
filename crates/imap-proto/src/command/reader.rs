//! Command framing (RFC 9051 §2.2, §4.3 literals, RFC 7888 LITERAL+ and LITERAL-):
//! finding one complete command, literals included, at the start of the server's read
//! buffer.
//!
//! A command is lines; a line ending in `{n}` or `{n+}` is followed by n bytes of
//! literal data, then the command goes on. [`CommandReader::next`] is given the whole
//! buffer each time and remembers how far it has framed the command, so a literal's
//! data is skipped by its length and a line is searched for its end once, however the
//! bytes arrive. For a synchronizing literal whose data has not arrived it asks the
//! server, once, to send a continuation request.
//!
//! Everything is bounded ([`Limits`]). A refused command is skipped through its end
//! as far as it can be known: a line over the limit is discarded up to its LF without
//! being buffered (and a non-synchronizing literal announced at its end is discarded
//! too); a synchronizing literal over the limit is refused before its data is sent,
//! so only its line is skipped. A non-synchronizing literal over the limit cannot be
//! skipped safely and is fatal.

use memchr::memchr;

use super::Command;
use super::parse::{leading_tag, parse_command};
use crate::{Error, Rejection};

/// The largest non-synchronizing literal LITERAL- allows (RFC 7888 §3).
pub const LITERAL_MINUS_MAX: u64 = 4096;

/// How much a client may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest line outside literals, CRLF included.
    pub max_line: usize,
    /// The largest literal (the APPEND limit, advertised as APPENDLIMIT).
    pub max_literal: u64,
    /// The largest command, lines and literals together.
    pub max_command: usize,
    /// LITERAL- rather than LITERAL+: non-synchronizing literals are limited to
    /// [`LITERAL_MINUS_MAX`] bytes.
    pub literal_minus: bool,
}

impl Default for Limits {
    /// 64 KiB lines, 64 MiB literals, 64 MiB + 64 KiB commands, LITERAL+.
    fn default() -> Limits {
        Limits {
            max_line: 64 * 1024,
            max_literal: 64 * 1024 * 1024,
            max_command: 64 * 1024 * 1024 + 64 * 1024,
            literal_minus: false,
        }
    }
}

/// What [`CommandReader::next`] found, and how many bytes the server must drop from
/// the front of its buffer before calling again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Bytes used: drop them from the buffer. With [`Event::NeedMore`] and
    /// [`Event::Continue`] this is usually 0 (the command being framed stays in the
    /// buffer), more when a refused command's bytes were discarded.
    pub consumed: usize,
    /// What happened.
    pub event: Event,
}

/// The outcome of one framing step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A complete, well-formed command.
    Command(Command),
    /// Read more bytes, then call again with the whole buffer.
    NeedMore,
    /// Write a continuation request (`+ Ready for literal data`, see
    /// [`CommandReader::write_continuation`]), then read more and call again. Asked
    /// once per synchronizing literal.
    Continue,
    /// A refused command: write [`Rejection::write_response`]; close after it when
    /// [`Rejection::is_fatal`]; otherwise call again (the rest is the next command).
    Rejected(Rejection),
}

/// The outcome of reading one line that is not a command (AUTHENTICATE's responses,
/// IDLE's `DONE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line<T> {
    /// No line end yet: read more.
    Partial,
    /// A line, or a refused one; `consumed` counts it and its CRLF.
    Complete {
        /// The value, or why the line was refused.
        result: Result<T, Error>,
        /// Bytes to drop from the buffer.
        consumed: usize,
    },
}

/// Where the reader is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Mode {
    /// Framing a command from the buffer's start: the current line starts at
    /// `line_start` and has been searched for its LF up to `scanned`.
    Frame { line_start: usize, scanned: usize },
    /// Waiting for the literal data that ends at `end`.
    Literal { end: usize },
    /// Discarding a refused command through its line end; `tail` keeps the line's
    /// last bytes, to see whether it announces a literal.
    DiscardLine { tail: Vec<u8> },
    /// Discarding the data of a refused command's non-synchronizing literal.
    DiscardBytes { left: u64 },
    /// After a fatal rejection: everything is dropped.
    Closed,
}

/// How many bytes of a discarded line's end are kept to spot `{n+}`.
const TAIL: usize = 32;

/// Frames commands out of the server's read buffer; one per connection.
#[derive(Debug, Clone)]
pub struct CommandReader {
    limits: Limits,
    mode: Mode,
}

impl CommandReader {
    /// A reader with these limits.
    pub fn new(limits: Limits) -> CommandReader {
        CommandReader {
            limits,
            mode: Mode::Frame {
                line_start: 0,
                scanned: 0,
            },
        }
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Changes the limits (LITERAL- after ENABLE, say); takes effect from the next
    /// line.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// Whether a command is partly framed (bytes of it are in the buffer).
    pub fn in_command(&self) -> bool {
        !matches!(
            self.mode,
            Mode::Frame {
                line_start: 0,
                scanned: 0
            }
        )
    }

    /// Appends the continuation request for a literal: `+ Ready for literal data`.
    pub fn write_continuation(out: &mut Vec<u8>) {
        out.extend_from_slice(b"+ Ready for literal data\r\n");
    }

    /// Frames the next command out of `buf`, the server's whole unconsumed input
    /// (the same bytes as last time, plus what arrived since, minus what the last
    /// step consumed).
    pub fn next(&mut self, buf: &[u8]) -> Step {
        let skipped = self.discard(buf);
        if !matches!(self.mode, Mode::Frame { .. } | Mode::Literal { .. }) {
            return Step {
                consumed: skipped,
                event: Event::NeedMore,
            };
        }
        let mut step = self.frame(&buf[skipped..]);
        step.consumed += skipped;
        step
    }

    fn reset(&mut self) {
        self.mode = Mode::Frame {
            line_start: 0,
            scanned: 0,
        };
    }

    fn frame(&mut self, buf: &[u8]) -> Step {
        let need_more = Step {
            consumed: 0,
            event: Event::NeedMore,
        };
        loop {
            let (line_start, scanned) = match self.mode {
                Mode::Literal { end } if buf.len() < end => return need_more,
                Mode::Literal { end } => (end, end),
                Mode::Frame {
                    line_start,
                    scanned,
                } => (line_start, scanned),
                _ => return need_more,
            };
            // At least one byte, so that a refusal always makes progress.
            let bound = line_start
                .saturating_add(self.limits.max_line.max(1))
                .min(self.limits.max_command.max(line_start + 1));
            let limit = buf.len().min(bound);
            let Some(i) = memchr(b'\n', buf.get(scanned..limit).unwrap_or_default()) else {
                if buf.len() < bound {
                    self.mode = Mode::Frame {
                        line_start,
                        scanned: buf.len().max(scanned),
                    };
                    return need_more;
                }
                let error = if bound >= self.limits.max_command {
                    Error::CommandTooLong
                } else {
                    Error::LineTooLong
                };
                let tag = tag_within(buf, bound);
                self.mode = Mode::DiscardLine { tail: Vec::new() };
                let consumed = bound + self.discard(&buf[bound..]);
                return rejected(consumed, tag, error);
            };
            let lf = scanned + i;
            let tag = || tag_within(buf, lf);
            if lf == line_start || buf[lf - 1] != b'\r' {
                self.reset();
                return rejected(lf + 1, tag(), Error::BareLf);
            }
            let line = &buf[line_start..lf - 1];
            let Some((size, synchronizing)) = literal_at_end(line) else {
                self.reset();
                return match parse_command(&buf[..lf - 1]) {
                    Ok(command) => Step {
                        consumed: lf + 1,
                        event: Event::Command(command),
                    },
                    Err(rejection) => Step {
                        consumed: lf + 1,
                        event: Event::Rejected(rejection),
                    },
                };
            };
            let data = lf + 1;
            let end = usize::try_from(size)
                .ok()
                .and_then(|n| data.checked_add(n))
                .filter(|&end| end <= self.limits.max_command);
            let too_big = size > self.limits.max_literal
                || (!synchronizing && self.limits.literal_minus && size > LITERAL_MINUS_MAX);
            let end = match end {
                Some(end) if !too_big => end,
                _ => {
                    let error = if too_big || !synchronizing {
                        Error::LiteralTooLarge {
                            size,
                            synchronizing,
                        }
                    } else {
                        Error::CommandTooLong
                    };
                    if synchronizing {
                        self.reset();
                        return rejected(data, tag(), error);
                    }
                    self.mode = Mode::Closed;
                    return rejected(buf.len(), tag(), error);
                }
            };
            self.mode = Mode::Literal { end };
            if synchronizing && buf.len() == data {
                return Step {
                    consumed: 0,
                    event: Event::Continue,
                };
            }
        }
    }

    /// Runs the discard modes over `buf`; returns the bytes dropped. Leaves the mode
    /// at `Frame` when the refused command is behind.
    fn discard(&mut self, buf: &[u8]) -> usize {
        let mut pos = 0;
        loop {
            match &mut self.mode {
                Mode::Closed => return buf.len(),
                Mode::DiscardBytes { left } => {
                    let available = (buf.len() - pos) as u64;
                    let take = (*left).min(available);
                    // take <= available, a usize.
                    pos += take as usize;
                    *left -= take;
                    if *left > 0 {
                        return pos;
                    }
                    self.mode = Mode::DiscardLine { tail: Vec::new() };
                }
                Mode::DiscardLine { tail } => {
                    let Some(i) = memchr(b'\n', &buf[pos..]) else {
                        keep_tail(tail, &buf[pos..]);
                        return buf.len();
                    };
                    keep_tail(tail, &buf[pos..pos + i]);
                    pos += i + 1;
                    let line = tail.strip_suffix(b"\r").unwrap_or(tail);
                    match literal_at_end(line) {
                        Some((size, false)) => self.mode = Mode::DiscardBytes { left: size },
                        _ => {
                            self.reset();
                            return pos;
                        }
                    }
                }
                Mode::Frame { .. } | Mode::Literal { .. } => return pos,
            }
        }
    }
}

impl Default for CommandReader {
    fn default() -> CommandReader {
        CommandReader::new(Limits::default())
    }
}

fn rejected(consumed: usize, tag: Option<String>, error: Error) -> Step {
    Step {
        consumed,
        event: Event::Rejected(Rejection { tag, error }),
    }
}

/// The command's tag, when a valid one and the space after it are within the first
/// `seen` bytes: bytes every way of cutting the input has delivered by the time the
/// command is refused, so the answer does not depend on the reads.
fn tag_within(buf: &[u8], seen: usize) -> Option<String> {
    let seen = &buf[..seen.min(buf.len())];
    let tag = leading_tag(&seen[..seen.len().min(130)])?;
    (seen.get(tag.len()) == Some(&b' ')).then_some(tag)
}

fn keep_tail(tail: &mut Vec<u8>, more: &[u8]) {
    let more = &more[more.len().saturating_sub(TAIL)..];
    tail.extend_from_slice(more);
    let excess = tail.len().saturating_sub(TAIL);
    tail.drain(..excess);
}

/// The literal a line announces at its end: `{n}` (synchronizing) or `{n+}`, with
/// n saturated at `u64::MAX`. `~{n}` (literal8) is framed the same way.
pub(crate) fn literal_at_end(line: &[u8]) -> Option<(u64, bool)> {
    let inner = line.strip_suffix(b"}")?;
    let (inner, synchronizing) = match inner.strip_suffix(b"+") {
        Some(inner) => (inner, false),
        None => (inner, true),
    };
    let digits_start = inner
        .iter()
        .rposition(|b| !b.is_ascii_digit())
        .map_or(0, |i| i + 1);
    let digits = &inner[digits_start..];
    if digits.is_empty() || digits_start == 0 || inner[digits_start - 1] != b'{' {
        return None;
    }
    let size = digits.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    });
    Some((size, synchronizing))
}
