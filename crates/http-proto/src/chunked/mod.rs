//! Incremental decoder for `Transfer-Encoding: chunked` (RFC 9112 §7.1).
//!
//! Strict where lenient parsers have let smuggling through: at most 16 hex digits with
//! an overflow check, no `0x`, no leading or trailing whitespace around the size, CRLF
//! and only CRLF after each size line and each chunk, chunk extensions bounded and free
//! of control bytes, trailer section bounded and held to the head's field-line rules
//! (no obs-fold, no line without a colon, no space before it, no request line).

use std::fmt;

/// Longest chunk extension accepted on one size line (nginx 1.29.4 uses 4 KiB too).
pub const MAX_EXTENSION: usize = 4 * 1024;

/// Largest trailer section accepted after the last chunk.
pub const MAX_TRAILERS: usize = 8 * 1024;

/// Why a chunked body was refused. Always a 400 and a closed connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ChunkedError {
    /// The chunk size is not 1 to 16 hex digits, or it overflows 64 bits.
    BadSize,
    /// A chunk extension is too long or holds a control byte.
    BadExtension,
    /// A size line or chunk is not ended by CRLF.
    BadLineEnding,
    /// The trailer section is malformed or too large.
    BadTrailer,
}

impl fmt::Display for ChunkedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChunkedError::BadSize => "invalid chunk size",
            ChunkedError::BadExtension => "invalid chunk extension",
            ChunkedError::BadLineEnding => "chunk not terminated by CRLF",
            ChunkedError::BadTrailer => "invalid trailer section",
        })
    }
}

impl std::error::Error for ChunkedError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Reading hex digits of the size; `digits` so far.
    Size { digits: u8 },
    /// Inside a chunk extension (after `;`), `len` bytes so far.
    Extension { len: usize },
    /// Saw the CR ending the size line.
    SizeLf,
    /// Chunk data still to come.
    Data,
    /// Expecting the CR after chunk data.
    DataCr,
    /// Expecting the LF after chunk data.
    DataLf,
    /// In the trailer section; `line` bytes on the current line, `total` overall.
    Trailer { line: usize, total: usize },
    /// Saw a CR in the trailer section.
    TrailerLf { line: usize, total: usize },
    /// The body is complete.
    Done,
}

/// One step of decoding: how many input bytes were used, and the chunk data among
/// them (a sub-slice of the input).
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Input bytes consumed by this step (framing and data).
    pub consumed: usize,
    /// Body bytes found in this step; may be empty.
    pub data: &'a [u8],
    /// The last chunk and the trailer section have been read.
    pub done: bool,
}

/// The decoder state. Feed it input with [`ChunkedDecoder::decode`] until `done`.
#[derive(Debug, Clone)]
pub struct ChunkedDecoder {
    state: State,
    size: u64,
    /// The trailer section as received, kept to be checked whole once its blank
    /// line arrives (at most [`MAX_TRAILERS`] and a line end). Stays empty, and
    /// unallocated, for the usual body that has no trailer fields.
    trailer: Vec<u8>,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        ChunkedDecoder::new()
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a body.
    pub fn new() -> ChunkedDecoder {
        ChunkedDecoder {
            state: State::Size { digits: 0 },
            size: 0,
            trailer: Vec::new(),
        }
    }

    /// Whether the whole body has been decoded.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input` until it runs out, some chunk data is found, or the body
    /// ends. Call again with the unconsumed rest (plus any new bytes) while
    /// `consumed > 0` or new input arrives.
    pub fn decode<'a>(&mut self, input: &'a [u8]) -> Result<Decoded<'a>, ChunkedError> {
        let mut pos = 0;
        while pos < input.len() {
            if self.state == State::Data {
                let n = usize::try_from(self.size)
                    .unwrap_or(usize::MAX)
                    .min(input.len() - pos);
                self.size -= n as u64;
                if self.size == 0 {
                    self.state = State::DataCr;
                }
                return Ok(Decoded {
                    consumed: pos + n,
                    data: &input[pos..pos + n],
                    done: false,
                });
            }
            self.step(input[pos])?;
            pos += 1;
            if self.state == State::Done {
                return Ok(Decoded {
                    consumed: pos,
                    data: &[],
                    done: true,
                });
            }
        }
        Ok(Decoded {
            consumed: pos,
            data: &[],
            done: self.state == State::Done,
        })
    }

    fn step(&mut self, b: u8) -> Result<(), ChunkedError> {
        self.state = match self.state {
            State::Size { digits } => match b {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                    if digits == 16 {
                        return Err(ChunkedError::BadSize);
                    }
                    let d = (b as char).to_digit(16).map_or(0, u64::from);
                    self.size = (self.size << 4) | d;
                    State::Size { digits: digits + 1 }
                }
                b';' if digits > 0 => State::Extension { len: 0 },
                b'\r' if digits > 0 => State::SizeLf,
                _ => return Err(ChunkedError::BadSize),
            },
            State::Extension { len } => match b {
                b'\r' => State::SizeLf,
                b'\t' | b' '..=b'~' | 0x80..=0xff if len < MAX_EXTENSION => {
                    State::Extension { len: len + 1 }
                }
                _ => return Err(ChunkedError::BadExtension),
            },
            State::SizeLf => match b {
                b'\n' if self.size == 0 => State::Trailer { line: 0, total: 0 },
                b'\n' => State::Data,
                _ => return Err(ChunkedError::BadLineEnding),
            },
            State::DataCr => match b {
                b'\r' => State::DataLf,
                _ => return Err(ChunkedError::BadLineEnding),
            },
            State::DataLf => match b {
                b'\n' => State::Size { digits: 0 },
                _ => return Err(ChunkedError::BadLineEnding),
            },
            State::Trailer { line, total } => {
                if total >= MAX_TRAILERS {
                    return Err(ChunkedError::BadTrailer);
                }
                if total > 0 || b != b'\r' {
                    self.trailer.push(b);
                }
                match b {
                    b'\r' => State::TrailerLf { line, total },
                    b'\n' | 0 => return Err(ChunkedError::BadTrailer),
                    _ => State::Trailer {
                        line: line + 1,
                        total: total + 1,
                    },
                }
            }
            State::TrailerLf { line, total } => {
                if !self.trailer.is_empty() {
                    self.trailer.push(b);
                }
                match b {
                    b'\n' if line == 0 => self.end_trailer()?,
                    b'\n' => State::Trailer {
                        line: 0,
                        total: total + 2,
                    },
                    _ => return Err(ChunkedError::BadTrailer),
                }
            }
            // Data is handled in `decode`; nothing follows Done.
            State::Data | State::Done => self.state,
        };
        Ok(())
    }
}

impl ChunkedDecoder {
    /// The blank line ending the trailer section has arrived: its field lines must
    /// pass the head's checks, or the whole body is refused (a trailer that is not a
    /// field could be a request some other parser would act on).
    fn end_trailer(&mut self) -> Result<State, ChunkedError> {
        let trailer = std::mem::take(&mut self.trailer);
        if !trailer.is_empty() {
            crate::request::check_field_block(&trailer).map_err(|_| ChunkedError::BadTrailer)?;
        }
        Ok(State::Done)
    }
}

#[cfg(test)]
mod tests;
