//! Incremental decoder for `Transfer-Encoding: chunked` (RFC 9112 §7.1).
//!
//! Strict where lenient parsers have let smuggling through: at most 16 hex digits with
//! an overflow check, no `0x`, no leading or trailing whitespace around the size, CRLF
//! and only CRLF after each size line and each chunk, chunk extensions bounded and free
//! of control bytes, trailer section bounded.

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
                match b {
                    b'\r' => State::TrailerLf { line, total },
                    b'\n' | 0 => return Err(ChunkedError::BadTrailer),
                    _ => State::Trailer {
                        line: line + 1,
                        total: total + 1,
                    },
                }
            }
            State::TrailerLf { line, total } => match b {
                b'\n' if line == 0 => State::Done,
                b'\n' => State::Trailer {
                    line: 0,
                    total: total + 2,
                },
                _ => return Err(ChunkedError::BadTrailer),
            },
            // Data is handled in `decode`; nothing follows Done.
            State::Data | State::Done => self.state,
        };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` fed in pieces of `step` bytes; returns the body.
    fn decode_all(input: &[u8], step: usize) -> Result<(Vec<u8>, usize), ChunkedError> {
        let mut dec = ChunkedDecoder::new();
        let mut body = Vec::new();
        let mut fed = 0;
        let mut pos = 0;
        while !dec.is_done() {
            if pos == fed {
                if fed == input.len() {
                    break;
                }
                fed = (fed + step).min(input.len());
            }
            let d = dec.decode(&input[pos..fed])?;
            body.extend_from_slice(d.data);
            pos += d.consumed;
        }
        Ok((body, pos))
    }

    #[test]
    fn valid_bodies_in_any_split() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"0\r\n\r\n", b""),
            (b"5\r\nhello\r\n0\r\n\r\n", b"hello"),
            (
                b"5;name=value\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
                b"hello world",
            ),
            (
                b"A\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n",
                b"0123456789",
            ),
            (
                b"000000000000000a\r\n0123456789\r\n0\r\n\r\n",
                b"0123456789",
            ),
        ];
        for (input, body) in cases {
            for step in [1, 2, 3, 7, input.len()] {
                let (got, used) = decode_all(input, step).expect("valid");
                assert_eq!(
                    got,
                    *body,
                    "{:?} step {step}",
                    String::from_utf8_lossy(input)
                );
                assert_eq!(used, input.len());
            }
        }
    }

    #[test]
    fn trailing_bytes_are_not_consumed() {
        let input = b"3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
        let (body, used) = decode_all(input, input.len()).expect("valid");
        assert_eq!(body, b"abc");
        assert_eq!(&input[used..], b"GET / HTTP/1.1\r\n");
    }

    #[test]
    fn malformed_bodies() {
        let long_ext = [
            b"1;".as_slice(),
            &vec![b'x'; MAX_EXTENSION + 1],
            b"\r\na\r\n0\r\n\r\n",
        ]
        .concat();
        let cases: &[(&[u8], ChunkedError)] = &[
            (b"0x5\r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
            (b" 5\r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
            (b"5 \r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
            (b"-5\r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
            (b"5_0\r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
            (b"\r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
            (b"10000000000000000\r\n", ChunkedError::BadSize),
            (b"5\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
            (b"5\r\rhello\r\n0\r\n\r\n", ChunkedError::BadLineEnding),
            (b"5\r\nhello\n0\r\n\r\n", ChunkedError::BadLineEnding),
            (b"5\r\nhelloX\r\n0\r\n\r\n", ChunkedError::BadLineEnding),
            (b"5\r\nhello\r\r0\r\n\r\n", ChunkedError::BadLineEnding),
            (
                b"5;a\x00b\r\nhello\r\n0\r\n\r\n",
                ChunkedError::BadExtension,
            ),
            (b"5;a\nb\r\nhello\r\n0\r\n\r\n", ChunkedError::BadExtension),
            (&long_ext, ChunkedError::BadExtension),
            (b"0\r\nX: 1\n\r\n", ChunkedError::BadTrailer),
            (b"0\r\n\r\r", ChunkedError::BadTrailer),
        ];
        for (input, want) in cases {
            assert_eq!(
                decode_all(input, 1).map(|_| ()),
                Err(*want),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
        let mut big_trailer = b"0\r\n".to_vec();
        while big_trailer.len() < MAX_TRAILERS + 100 {
            big_trailer.extend_from_slice(b"X-T: 0123456789\r\n");
        }
        assert_eq!(
            decode_all(&big_trailer, 64).map(|_| ()),
            Err(ChunkedError::BadTrailer)
        );
    }

    #[test]
    fn largest_size_is_accepted_without_overflow() {
        let mut dec = ChunkedDecoder::new();
        let d = dec
            .decode(b"ffffffffffffffff\r\nab")
            .expect("16 digits are fine");
        assert_eq!(d.data, b"ab");
    }
}
