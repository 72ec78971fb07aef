//! Mailbox names: the raw bytes a command carries into a `String`, and back for
//! responses (RFC 9051 §5.1, RFC 3501 §5.1.3 modified UTF-7, RFC 6855 UTF8=ACCEPT).
//!
//! Without UTF8=ACCEPT, names on the wire are modified UTF-7: printable ASCII as
//! itself (`&` as `&-`), anything else as `&`, modified base64 (`,` for `/`) of
//! UTF-16BE, `-`. Decoding is strict (no 8-bit bytes, no control characters, no
//! base64 for what could be written plainly, no padding bits, paired surrogates), so
//! one name has one spelling. With UTF8=ACCEPT, names are UTF-8 as they are. `INBOX`
//! in any case is the canonical `INBOX`.

use crate::Error;

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,";

/// The most bytes a name may have, decoded or on the wire.
pub const MAX_NAME: usize = 1024;

/// Decodes a mailbox name as the client sent it. `utf8` is whether the client
/// enabled UTF8=ACCEPT. `INBOX` in any case becomes `INBOX`.
pub fn decode_name(raw: &[u8], utf8: bool) -> Result<String, Error> {
    if raw.len() > MAX_NAME {
        return Err(Error::BadMailboxName);
    }
    let name = if utf8 {
        let name = std::str::from_utf8(raw).map_err(|_| Error::NotUtf8)?;
        if name.chars().any(char::is_control) {
            return Err(Error::BadMailboxName);
        }
        name.to_owned()
    } else {
        decode_utf7(raw)?
    };
    Ok(if name.eq_ignore_ascii_case("INBOX") {
        "INBOX".to_owned()
    } else {
        name
    })
}

/// Encodes a name for a response: modified UTF-7 unless UTF8=ACCEPT is on.
pub fn encode_name(name: &str, utf8: bool) -> Vec<u8> {
    if utf8 {
        name.as_bytes().to_vec()
    } else {
        encode_utf7(name)
    }
}

fn b64_value(b: u8) -> Option<u32> {
    B64.iter()
        .position(|&c| c == b)
        .and_then(|i| u32::try_from(i).ok())
}

/// Decodes modified UTF-7 strictly; see the module docs for the rules.
pub fn decode_utf7(raw: &[u8]) -> Result<String, Error> {
    let bad = Error::BadMailboxName;
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b != b'&' {
            if !(0x20..=0x7e).contains(&b) {
                return Err(bad);
            }
            out.push(char::from(b));
            i += 1;
            continue;
        }
        let end = raw[i + 1..]
            .iter()
            .position(|&c| c == b'-')
            .ok_or(Error::BadMailboxName)?
            + i
            + 1;
        let encoded = &raw[i + 1..end];
        i = end + 1;
        if encoded.is_empty() {
            out.push('&');
            continue;
        }
        let mut units = Vec::with_capacity(encoded.len() * 6 / 16);
        let (mut acc, mut bits) = (0u32, 0u32);
        for &c in encoded {
            acc = (acc << 6) | b64_value(c).ok_or(Error::BadMailboxName)?;
            bits += 6;
            if bits >= 16 {
                bits -= 16;
                units.push(((acc >> bits) & 0xffff) as u16);
                acc &= (1 << bits) - 1;
            }
        }
        if bits >= 6 || acc != 0 || units.is_empty() {
            return Err(bad);
        }
        for c in char::decode_utf16(units.iter().copied()) {
            let c = c.map_err(|_| Error::BadMailboxName)?;
            if (' '..='~').contains(&c) || c.is_control() {
                return Err(bad);
            }
            out.push(c);
        }
        // Two base64 runs back to back should have been one.
        if raw.get(i) == Some(&b'&') && raw.get(i + 1) != Some(&b'-') {
            return Err(bad);
        }
    }
    Ok(out)
}

/// Encodes a name as modified UTF-7.
pub fn encode_utf7(name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    let mut pending: Vec<u16> = Vec::new();
    let flush = |out: &mut Vec<u8>, pending: &mut Vec<u16>| {
        if pending.is_empty() {
            return;
        }
        out.push(b'&');
        let (mut acc, mut bits) = (0u32, 0u32);
        for &u in pending.iter() {
            acc = (acc << 16) | u32::from(u);
            bits += 16;
            while bits >= 6 {
                bits -= 6;
                out.push(B64[((acc >> bits) & 0x3f) as usize]);
            }
            acc &= (1 << bits) - 1;
        }
        if bits > 0 {
            out.push(B64[((acc << (6 - bits)) & 0x3f) as usize]);
        }
        out.push(b'-');
        pending.clear();
    };
    for c in name.chars() {
        if (' '..='~').contains(&c) {
            flush(&mut out, &mut pending);
            out.push(c as u8);
            if c == '&' {
                out.push(b'-');
            }
        } else {
            let mut buf = [0u16; 2];
            pending.extend_from_slice(c.encode_utf16(&mut buf));
        }
    }
    flush(&mut out, &mut pending);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf7_round_trips() {
        let cases: &[(&str, &[u8])] = &[
            ("INBOX", b"INBOX"),
            ("Entwürfe", b"Entw&APw-rfe"),
            ("A&B", b"A&-B"),
            (
                "~peter/mail/台北/日本語",
                b"~peter/mail/&U,BTFw-/&ZeVnLIqe-",
            ),
            ("😀", b"&2D3eAA-"),
            ("Ünïcödé", b"&ANw-n&AO8-c&APY-d&AOk-"),
        ];
        for (name, wire) in cases {
            assert_eq!(encode_utf7(name), *wire, "{name}");
            assert_eq!(decode_utf7(wire).as_deref(), Ok(*name), "{name}");
        }
    }

    #[test]
    fn utf7_refusals() {
        for bad in [
            &b"&"[..],
            b"&AGE-",     // "a": printable ASCII in base64
            b"&APw",      // unterminated
            b"&APx-",     // padding bits set
            b"&2D0-",     // lone high surrogate
            b"a\xc3\xbc", // raw 8-bit
            b"a\tb",
            b"&APw-&APw-",
            b"&A-",
        ] {
            assert!(decode_utf7(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(decode_name(b"inbox", false).as_deref(), Ok("INBOX"));
        assert_eq!(decode_name(b"InBoX", true).as_deref(), Ok("INBOX"));
        assert_eq!(
            decode_name("Entwürfe".as_bytes(), true).as_deref(),
            Ok("Entwürfe")
        );
        assert_eq!(decode_name(b"\xff", true), Err(Error::NotUtf8));
        assert!(decode_name(&[b'a'; MAX_NAME + 1], false).is_err());
        assert_eq!(encode_name("Entwürfe", false), b"Entw&APw-rfe");
        assert_eq!(encode_name("Entwürfe", true), "Entwürfe".as_bytes());
    }
}
