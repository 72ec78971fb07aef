//! Conditional and range requests (RFC 9110 §13 and §14) for a representation with
//! a known length, entity tag and modification time.
//!
//! Only a single byte range is honoured. A multi-range request is answered with the
//! whole representation (RFC 9110 §14.2 lets a server ignore `Range`), which removes
//! the range-amplification attacks (CVE-2011-3192) without any merging logic.

use crate::request::{list_items, trim};

/// What a `Range` header asks for, judged against a representation of known length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// Serve the whole representation (no usable single range).
    Full,
    /// Serve bytes `start..=end` with 206.
    Partial {
        /// First byte.
        start: u64,
        /// Last byte, inclusive.
        end: u64,
    },
    /// Answer 416 with `Content-Range: bytes */len`.
    Unsatisfiable,
}

/// Evaluates a `Range` value against a representation of `len` bytes.
pub fn parse_range(value: &[u8], len: u64) -> ByteRange {
    let value = trim(value);
    let Some(spec) = value
        .get(..6)
        .filter(|unit| unit.eq_ignore_ascii_case(b"bytes="))
        .map(|_| trim(&value[6..]))
    else {
        return ByteRange::Full;
    };
    if spec.contains(&b',') {
        return ByteRange::Full;
    }
    let Some(dash) = memchr::memchr(b'-', spec) else {
        return ByteRange::Full;
    };
    let (first, last) = (&spec[..dash], &spec[dash + 1..]);
    match (number(first), number(last)) {
        // bytes=-N: the last N bytes.
        (None, Some(n)) if first.is_empty() => {
            if n == 0 || len == 0 {
                ByteRange::Unsatisfiable
            } else {
                ByteRange::Partial {
                    start: len.saturating_sub(n),
                    end: len - 1,
                }
            }
        }
        // bytes=A- : from A to the end.
        (Some(start), None) if last.is_empty() => satisfiable(start, len.saturating_sub(1), len),
        (Some(start), Some(end)) if start <= end => {
            satisfiable(start, end.min(len.saturating_sub(1)), len)
        }
        _ => ByteRange::Full,
    }
}

fn satisfiable(start: u64, end: u64, len: u64) -> ByteRange {
    if start >= len {
        ByteRange::Unsatisfiable
    } else {
        ByteRange::Partial { start, end }
    }
}

fn number(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

/// Whether an `If-None-Match` list matches `etag` by the weak comparison
/// (RFC 9110 §13.1.2): `*` matches anything, `W/` prefixes are ignored.
pub fn if_none_match(list: &[u8], etag: &[u8]) -> bool {
    fn opaque(tag: &[u8]) -> &[u8] {
        tag.strip_prefix(b"W/").unwrap_or(tag)
    }
    let ours = opaque(etag);
    list_items(list).any(|item| item == b"*" || (!item.is_empty() && opaque(item) == ours))
}

/// Whether an `If-Range` value still validates (RFC 9110 §13.1.5): a strong entity
/// tag equal to ours, or an HTTP date equal to the modification time.
pub fn if_range(value: &[u8], etag: &[u8], mtime_secs: u64) -> bool {
    let value = trim(value);
    if value.starts_with(b"\"") {
        return value == etag && !etag.starts_with(b"W/");
    }
    crate::date::parse_http_date(value) == Some(mtime_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        use ByteRange::*;
        let p = |start, end| Partial { start, end };
        let cases: &[(&str, u64, ByteRange)] = &[
            ("bytes=0-0", 10, p(0, 0)),
            ("bytes=0-9", 10, p(0, 9)),
            ("bytes=2-100", 10, p(2, 9)),
            ("bytes=5-", 10, p(5, 9)),
            ("bytes=-3", 10, p(7, 9)),
            ("bytes=-30", 10, p(0, 9)),
            ("Bytes = 1-2 ", 10, Full),
            ("BYTES=1-2", 10, p(1, 2)),
            ("bytes=10-", 10, Unsatisfiable),
            ("bytes=10-20", 10, Unsatisfiable),
            ("bytes=-0", 10, Unsatisfiable),
            ("bytes=0-", 0, Unsatisfiable),
            ("bytes=-5", 0, Unsatisfiable),
            ("bytes=5-2", 10, Full),
            ("bytes=0-1,3-4", 10, Full),
            ("bytes=a-b", 10, Full),
            ("bytes=-", 10, Full),
            ("bytes=1", 10, Full),
            ("items=1-2", 10, Full),
            ("bytes=99999999999999999999-", 10, Full),
        ];
        let wrong: Vec<String> = cases
            .iter()
            .filter(|(value, len, want)| parse_range(value.as_bytes(), *len) != *want)
            .map(|(value, len, want)| {
                let got = parse_range(value.as_bytes(), *len);
                format!("{value} of {len}: got {got:?}, want {want:?}")
            })
            .collect();
        assert!(wrong.is_empty(), "{wrong:#?}");
    }

    #[test]
    fn entity_tags() {
        let tag = b"\"5f3a-200\"";
        assert!(if_none_match(b"\"5f3a-200\"", tag));
        assert!(if_none_match(b"\"x\", W/\"5f3a-200\"", tag));
        assert!(if_none_match(b"*", tag));
        assert!(!if_none_match(b"\"5f3a-201\"", tag));
        assert!(!if_none_match(b"", tag));
        assert!(if_range(b"\"5f3a-200\"", tag, 0));
        assert!(!if_range(b"W/\"5f3a-200\"", tag, 0));
        assert!(if_range(b"Sun, 06 Nov 1994 08:49:37 GMT", tag, 784_111_777));
        assert!(!if_range(
            b"Sun, 06 Nov 1994 08:49:38 GMT",
            tag,
            784_111_777
        ));
    }
}
