//! Fuzz targets, shared by the `cargo fuzz` harness in `fuzz/` and by the corpus
//! replay in `tests/fuzz_corpus.rs`.
//!
//! Each function takes arbitrary bytes and panics (through `assert!`) only when an
//! invariant is broken; refusing malformed input is not a failure. This module is
//! not part of the crate's API.

use crate::line::{Line, next_line};
use crate::sasl;

/// Line limits tried: none to speak of, POP3's 255, SMTP's 2048, and tiny ones.
const MAXES: [usize; 5] = [0, 2, 7, 255, 2048];

/// `data` framed into lines with each limit of `MAXES`, every frame checked
/// against the input; and every complete line decoded as a SASL response, initial
/// and not, and as a PLAIN message, both raw and decoded.
pub fn lines(data: &[u8]) {
    for max in MAXES {
        let mut rest = data;
        while !rest.is_empty() {
            let consumed = check_frame(rest, max);
            if consumed == 0 {
                break;
            }
            rest = &rest[consumed..];
        }
    }
    let mut rest = data;
    while let Line::Complete { line, consumed } = next_line(rest, 2048) {
        check_sasl(line);
        rest = &rest[consumed..];
    }
}

/// One frame of `input` with limit `max`, checked; returns the bytes it took (0
/// for [`Line::Partial`]).
fn check_frame(input: &[u8], max: usize) -> usize {
    match next_line(input, max) {
        Line::Complete { line, consumed } => {
            assert_eq!(consumed, line.len() + 2, "a line and its CRLF");
            assert!(consumed <= max, "a {consumed}-byte line within {max}");
            assert_eq!(&input[..line.len()], line);
            assert_eq!(&input[line.len()..consumed], b"\r\n");
            assert!(!line.contains(&b'\n'), "LF inside a line");
            consumed
        }
        Line::BareLf { consumed } => {
            assert!(
                consumed <= max && input[consumed - 1] == b'\n',
                "bare LF frame"
            );
            assert!(
                consumed == 1 || input[consumed - 2] != b'\r',
                "a CRLF taken for bare"
            );
            assert!(!input[..consumed - 1].contains(&b'\n'), "not the first LF");
            consumed
        }
        Line::TooLong { consumed, ended } => {
            assert!(
                consumed >= max && consumed <= input.len(),
                "too long, {consumed}"
            );
            assert!(
                !input[..max.min(input.len())].contains(&b'\n'),
                "LF within the limit"
            );
            assert_eq!(
                ended,
                input[consumed - 1] == b'\n',
                "ended says where it stops"
            );
            consumed
        }
        Line::Partial => {
            assert!(
                input.len() < max && !input.contains(&b'\n'),
                "partial with a line"
            );
            0
        }
    }
}

/// SASL decoding of one line: PLAIN's fields, when accepted, are the message's.
fn check_sasl(line: &[u8]) {
    for initial in [true, false] {
        if let Ok(decoded) = sasl::decode(line, initial) {
            check_plain(&decoded);
        }
    }
    check_plain(line);
}

/// Credentials PLAIN accepts from `message` are its three fields, joined back.
fn check_plain(message: &[u8]) {
    let Ok(c) = sasl::plain(message) else { return };
    assert!(!c.username.is_empty() && !c.password.is_empty());
    let authzid = c.authzid.as_deref().unwrap_or_default();
    assert!(c.authzid.as_deref() != Some(""), "an empty authzid is none");
    let joined = [
        authzid.as_bytes(),
        c.username.as_bytes(),
        c.password.as_bytes(),
    ]
    .join(&0);
    assert_eq!(joined, message, "PLAIN fields differ from the message");
}
