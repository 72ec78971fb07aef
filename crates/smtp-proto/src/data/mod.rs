//! The DATA phase (RFC 5321 §4.1.1.4, §4.5.2): incremental dot-unstuffing and the
//! end-of-data marker.
//!
//! # Smuggling policy: reject
//!
//! The message ends at `CRLF.CRLF` and nowhere else. A bare LF or a bare CR anywhere
//! in the message (so every ending of the SMTP smuggling family: `\n.\n`, `\r.\r`,
//! `\n.\r\n`, `\r\n.\n`, `\r.\r\n`, ...) is *content*, never an end, and it marks the
//! message as refused with `550 5.5.2` (docs/robustness.md §3.7, Postfix 3.9's
//! `smtpd_forbid_bare_newline = reject`). The decoder still reads on to the real
//! `CRLF.CRLF`, so whatever a smuggler put after the fake ending is swallowed as part
//! of the refused message and never parsed as commands. Rejecting rather than
//! normalising keeps one rule with no corner cases (what does a dot after a bare LF
//! mean?), and no legitimate client sends bare line ends: RFC 5321 §2.3.8 forbids
//! them.
//!
//! # Limits
//!
//! - Message size, counted after unstuffing: beyond the limit the message is refused
//!   with `552 5.3.4`, no more data is handed out, and the decoder reads on to the end
//!   marker so the session stays in sync for the next transaction.
//! - Text line length (CRLF excluded), when a limit is set: `554 5.3.4` beyond it
//!   (RFC 5321 §4.5.3.1.6 allows 998 octets). The session's default sets none, as
//!   Postfix accepts longer lines: the message size bounds them.
//!
//! Nothing is buffered: each step hands back a slice of the input, so memory does not
//! depend on line or message length.

use memchr::memchr2;

use crate::Error;

/// Where the decoder is within the line structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// At the start of a line (after CRLF, or at the start of the message).
    LineStart,
    /// Saw `.` at the start of a line: a stuffed dot, or the start of the end marker.
    Dot,
    /// Saw `.` CR at the start of a line.
    DotCr,
    /// Inside a line.
    Text,
    /// Saw a CR inside a line.
    Cr,
    /// The end marker has been read.
    Done,
}

/// One step of [`DataDecoder::decode`].
#[derive(Debug, PartialEq, Eq)]
pub struct DataStep<'a> {
    /// Input bytes used.
    pub consumed: usize,
    /// Message bytes found (a sub-slice of the input, dot-unstuffing applied); empty
    /// once the message has been refused.
    pub data: &'a [u8],
    /// The end marker has been read; see [`DataDecoder::outcome`].
    pub done: bool,
}

/// Decodes a message body after `354`, until `CRLF.CRLF`.
#[derive(Debug, Clone)]
pub struct DataDecoder {
    state: State,
    size: u64,
    line: usize,
    max_size: u64,
    max_line: usize,
    /// Every problem found so far, as [`PROBLEMS`] bits.
    problems: u8,
}

/// The problems a message can have, most serious first: when a message has several,
/// the first of this list is reported, so the outcome does not depend on where the
/// input was cut (the size is only counted as data is handed out).
const PROBLEMS: [Error; 4] = [
    Error::BareLfInMessage,
    Error::BareCrInMessage,
    Error::MessageTooLarge,
    Error::MessageLineTooLong,
];

impl DataDecoder {
    /// A decoder at the start of a message, refusing messages over `max_size` bytes
    /// and text lines over `max_line` bytes (CRLF excluded).
    pub fn new(max_size: u64, max_line: usize) -> DataDecoder {
        DataDecoder {
            state: State::LineStart,
            size: 0,
            line: 0,
            max_size,
            max_line,
            problems: 0,
        }
    }

    /// Whether the end marker has been read.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// After the end: the message size (bytes handed out), or why it is refused. When
    /// there are several problems, the most serious is reported (bare LF, bare CR,
    /// size, line length).
    pub fn outcome(&self) -> Result<u64, Error> {
        match PROBLEMS
            .iter()
            .enumerate()
            .find(|(i, _)| self.problems & (1 << i) != 0)
        {
            Some((_, error)) => Err(*error),
            None => Ok(self.size),
        }
    }

    /// Decodes from `input` until a run of message data ends (at a stuffed dot or the
    /// end marker), the input runs out, or the message ends. Call again with the
    /// unconsumed rest (plus new bytes) while `consumed > 0` or new input arrives.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> DataStep<'a> {
        let mut pos = 0;
        let mut start = None;
        while pos < input.len() && self.state != State::Done {
            if self.state == State::Text {
                // Fast path: everything up to the next CR or LF is plain text.
                let run = memchr2(b'\r', b'\n', &input[pos..]).unwrap_or(input.len() - pos);
                if run > 0 {
                    self.add_to_line(run);
                    start.get_or_insert(pos);
                    pos += run;
                    continue;
                }
            }
            let content = self.step(input[pos]);
            pos += 1;
            if content {
                start.get_or_insert(pos - 1);
            } else if let Some(start) = start {
                // A byte that is not content (a line-start dot) ends the run.
                return self.emit(input, start, pos - 1, pos);
            }
        }
        match start {
            Some(start) => self.emit(input, start, pos, pos),
            None => DataStep {
                consumed: pos,
                data: &[],
                done: self.state == State::Done,
            },
        }
    }

    /// Hands out `input[start..end]` as message data, counting it against the size.
    fn emit<'a>(
        &mut self,
        input: &'a [u8],
        start: usize,
        end: usize,
        consumed: usize,
    ) -> DataStep<'a> {
        let data = &input[start..end];
        self.size = self.size.saturating_add(data.len() as u64);
        if self.size > self.max_size {
            self.fail(Error::MessageTooLarge);
        }
        DataStep {
            consumed,
            data: if self.problems != 0 { &[] } else { data },
            done: self.state == State::Done,
        }
    }

    fn add_to_line(&mut self, n: usize) {
        self.line = self.line.saturating_add(n);
        if self.line > self.max_line {
            self.fail(Error::MessageLineTooLong);
        }
    }

    fn fail(&mut self, error: Error) {
        if let Some(i) = PROBLEMS.iter().position(|p| *p == error) {
            self.problems |= 1 << i;
        }
    }

    /// Moves over one byte; returns whether the byte is message content.
    fn step(&mut self, b: u8) -> bool {
        let (next, content) = match (self.state, b) {
            (State::LineStart, b'.') => (State::Dot, false),
            (State::Dot, b'\r') => (State::DotCr, false),
            (State::DotCr, b'\n') => (State::Done, false),
            (State::DotCr, _) => {
                // `CRLF . CR x`: the CR is bare. Take x as if inside a line.
                self.fail(Error::BareCrInMessage);
                self.state = State::Text;
                return self.step(b);
            }
            (State::Cr, b'\n') => (State::LineStart, true),
            (State::Cr, _) => {
                self.fail(Error::BareCrInMessage);
                self.state = State::Text;
                return self.step(b);
            }
            (_, b'\r') => (State::Cr, true),
            (_, b'\n') => {
                // Bare LF: never a line start, so never the start of an end marker.
                self.fail(Error::BareLfInMessage);
                (State::Text, true)
            }
            (_, _) => (State::Text, true),
        };
        if next == State::LineStart {
            self.line = 0;
        } else if content && b != b'\r' && b != b'\n' {
            self.add_to_line(1);
        }
        self.state = next;
        content
    }
}

#[cfg(test)]
mod tests;
