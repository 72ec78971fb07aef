//! CRLF line framing (RFC 5321 §2.3.8, RFC 1939 §3, RFC 9051 §2.2): one line out of
//! a byte buffer, within a length limit.
//!
//! [`next_line`] finds the line at the start of the input. A line ended by LF alone
//! is reported as [`Line::BareLf`], which the servers refuse and close on (Postfix's
//! `smtpd_forbid_bare_newline`; a peer whose framing differs from ours is one we
//! cannot stay in step with). A line over the limit is reported as
//! [`Line::TooLong`] with how much to drop, so the caller can discard it without
//! buffering it. A CR not followed by LF stays inside the line: what it means is the
//! protocol's decision (`RSET\rQUIT` is one bad command).

use memchr::memchr;

/// The outcome of [`next_line`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    /// A complete line, CRLF removed; `consumed` counts the CRLF too.
    Complete {
        /// The line without its CRLF.
        line: &'a [u8],
        /// Bytes of input used, CRLF included.
        consumed: usize,
    },
    /// No line end yet and still under the limit: read more.
    Partial,
    /// A line ended by LF alone; `consumed` is through the LF.
    BareLf {
        /// Bytes of input used, the LF included.
        consumed: usize,
    },
    /// `max` bytes without a line end. `consumed` is through the LF if it is in the
    /// input, otherwise all of it, and `ended` says which: when `false`, the caller
    /// must go on discarding up to the next LF.
    TooLong {
        /// Bytes of input to drop.
        consumed: usize,
        /// Whether the overlong line's LF was found.
        ended: bool,
    },
}

/// Finds the line at the start of `input`; `max` is the longest line accepted, CRLF
/// included.
///
/// Only the first `max` bytes are searched for the line end, so a caller that
/// retries with a growing buffer does bounded work per call.
pub fn next_line(input: &[u8], max: usize) -> Line<'_> {
    if input.is_empty() {
        return Line::Partial;
    }
    let window = &input[..input.len().min(max)];
    match memchr(b'\n', window) {
        Some(lf) if lf > 0 && input[lf - 1] == b'\r' => Line::Complete {
            line: &input[..lf - 1],
            consumed: lf + 1,
        },
        Some(lf) => Line::BareLf { consumed: lf + 1 },
        None if input.len() < max => Line::Partial,
        None => match memchr(b'\n', &input[window.len()..]) {
            Some(lf) => Line::TooLong {
                consumed: window.len() + lf + 1,
                ended: true,
            },
            None => Line::TooLong {
                consumed: input.len(),
                ended: false,
            },
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn complete(line: &[u8], consumed: usize) -> Line<'_> {
        Line::Complete { line, consumed }
    }

    const fn too_long(consumed: usize, ended: bool) -> Line<'static> {
        Line::TooLong { consumed, ended }
    }

    #[test]
    fn framing() {
        let cases: &[(&[u8], usize, Line<'_>)] = &[
            (b"NOOP\r\nQUIT\r\n", 100, complete(b"NOOP", 6)),
            (b"\r\n", 100, complete(b"", 2)),
            (b"NOOP", 100, Line::Partial),
            (b"NOOP\r", 100, Line::Partial),
            (b"", 100, Line::Partial),
            (b"NOOP\nQUIT\r\n", 100, Line::BareLf { consumed: 5 }),
            (b"\n", 100, Line::BareLf { consumed: 1 }),
            // A CR before the CRLF stays in the line, for the protocol to judge.
            (b"STAT\r\r\n", 100, complete(b"STAT\r", 7)),
            (b"RSET\rQUIT\r\n", 100, complete(b"RSET\rQUIT", 11)),
            // The limit counts the CRLF: 8 bytes fit in 8, 9 do not.
            (b"NOOP xy\r\n", 9, complete(b"NOOP xy", 9)),
            (b"NOOP xyz\r\nQUIT\r\n", 9, too_long(10, true)),
            (b"NOOP xyzzy", 9, too_long(10, false)),
            (b"NOOP xyz", 9, Line::Partial),
            // A CRLF split by the limit: the CR is the ninth byte, the LF beyond.
            (b"NOOP xyz\r", 9, too_long(9, false)),
            // A limit of 0 still makes progress, and waits on nothing.
            (b"", 0, Line::Partial),
            (b"x", 0, too_long(1, false)),
        ];
        for (input, max, expected) in cases {
            assert_eq!(
                next_line(input, *max),
                *expected,
                "{:?} within {max}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn the_limit_counts_the_crlf() {
        // 253 bytes + CRLF = 255: the longest line.
        let mut line = vec![b'x'; 253];
        line.extend_from_slice(b"\r\n");
        assert_eq!(next_line(&line, 255), complete(&line[..253], 255));
        // 254 + CRLF: too long, and the LF is found beyond the window.
        let mut long = vec![b'x'; 254];
        long.extend_from_slice(b"\r\nNEXT");
        assert_eq!(next_line(&long, 255), too_long(256, true));
        // 255 bytes with no line end: too long without buffering more.
        assert_eq!(next_line(&[b'x'; 300], 255), too_long(300, false));
        assert_eq!(next_line(&[b'x'; 254], 255), Line::Partial);
    }
}
