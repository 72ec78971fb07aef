//! Mailbox names: the raw bytes a command carries into a `String`, and back for
//! responses (RFC 9051 §5.1, RFC 3501 §5.1.3 modified UTF-7, RFC 6855 UTF8=ACCEPT).
//!
//! Without UTF8=ACCEPT, names on the wire are modified UTF-7: printable ASCII as
//! itself (`&` as `&-`), anything else as `&`, modified base64 (`,` for `/`) of
//! UTF-16BE, `-`. Decoding is strict (no 8-bit bytes, no control characters, no
//! base64 for what could be written plainly, no padding bits, paired surrogates), so
//! one name has one spelling. With UTF8=ACCEPT, names are UTF-8 as they are. `INBOX`
//! in any case is the canonical `INBOX`.

use stoa_mail_proto::mutf7;

use crate::Error;

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

/// Decodes modified UTF-7 strictly (`stoa_mail_proto::mutf7`); see the module docs.
pub fn decode_utf7(raw: &[u8]) -> Result<String, Error> {
    mutf7::decode(raw, &[]).ok_or(Error::BadMailboxName)
}

/// Encodes a name as modified UTF-7.
pub fn encode_utf7(name: &str) -> Vec<u8> {
    mutf7::encode(name, &[]).into_bytes()
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
