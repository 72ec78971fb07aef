//! Modified UTF-7 (RFC 3501 §5.1.3): how IMAP4rev1 clients spell mailbox names, and
//! how Dovecot's Maildir++ names folders on disk. Printable ASCII stands for itself
//! (`&` as `&-`); anything else is `&`, modified base64 (`,` for `/`) of UTF-16BE,
//! then `-`. Decoding is strict (no 8-bit bytes, no control characters, no base64
//! for what could be written plainly, no padding bits, paired surrogates, no two runs
//! back to back), so one name has one spelling; `also` names printable characters
//! that are written in base64 all the same (Maildir++ writes a `.` inside a level
//! as `&AC4-`), and only those may come out of base64.

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,";

fn b64_value(b: u8) -> Option<u32> {
    B64.iter()
        .position(|&c| c == b)
        .and_then(|i| u32::try_from(i).ok())
}

/// Encodes `name` as modified UTF-7; the characters in `also` are written in
/// base64 although they are printable ASCII.
pub fn encode(name: &str, also: &[char]) -> String {
    let mut out = String::with_capacity(name.len());
    let mut pending: Vec<u16> = Vec::new();
    for c in name.chars() {
        if (' '..='~').contains(&c) && !also.contains(&c) {
            flush(&mut out, &mut pending);
            out.push(c);
            if c == '&' {
                out.push('-');
            }
        } else {
            let mut buf = [0u16; 2];
            pending.extend_from_slice(c.encode_utf16(&mut buf));
        }
    }
    flush(&mut out, &mut pending);
    out
}

/// Writes the pending UTF-16 units as one `&…-` run.
fn flush(out: &mut String, pending: &mut Vec<u16>) {
    if pending.is_empty() {
        return;
    }
    out.push('&');
    let (mut acc, mut bits) = (0u32, 0u32);
    for &unit in pending.iter() {
        acc = (acc << 16) | u32::from(unit);
        bits += 16;
        while bits >= 6 {
            bits -= 6;
            out.push(char::from(B64[((acc >> bits) & 0x3f) as usize]));
        }
        acc &= (1 << bits) - 1;
    }
    if bits > 0 {
        out.push(char::from(B64[((acc << (6 - bits)) & 0x3f) as usize]));
    }
    out.push('-');
    pending.clear();
}

/// Decodes modified UTF-7 strictly (no 8-bit bytes, no control characters, no
/// padding bits, paired surrogates, no two runs back to back), except that the
/// characters in `also` may come out of base64. `None` when `raw` is not that.
pub fn decode(raw: &[u8], also: &[char]) -> Option<String> {
    let mut out = String::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        let b = raw[i];
        if b != b'&' {
            if !(0x20..=0x7e).contains(&b) {
                return None;
            }
            out.push(char::from(b));
            i += 1;
            continue;
        }
        let end = raw[i + 1..].iter().position(|&c| c == b'-')? + i + 1;
        let encoded = &raw[i + 1..end];
        i = end + 1;
        if encoded.is_empty() {
            out.push('&');
            continue;
        }
        let mut units = Vec::with_capacity(encoded.len() * 6 / 16);
        let (mut acc, mut bits) = (0u32, 0u32);
        for &c in encoded {
            acc = (acc << 6) | b64_value(c)?;
            bits += 6;
            if bits >= 16 {
                bits -= 16;
                units.push(((acc >> bits) & 0xffff) as u16);
                acc &= (1 << bits) - 1;
            }
        }
        if bits >= 6 || acc != 0 || units.is_empty() {
            return None;
        }
        for c in char::decode_utf16(units.iter().copied()) {
            let c = c.ok()?;
            if ((' '..='~').contains(&c) && !also.contains(&c)) || c.is_control() {
                return None;
            }
            out.push(c);
        }
        if raw.get(i) == Some(&b'&') && raw.get(i + 1) != Some(&b'-') {
            return None;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let cases: &[(&str, &[char], &str)] = &[
            ("INBOX", &[], "INBOX"),
            ("Entwürfe", &[], "Entw&APw-rfe"),
            ("A&B", &[], "A&-B"),
            ("台北", &[], "&U,BTFw-"),
            ("😀", &[], "&2D3eAA-"),
            ("a.b", &['.'], "a&AC4-b"),
            ("ü.x", &['.'], "&APwALg-x"),
            ("a.b", &[], "a.b"),
        ];
        for &(name, also, wire) in cases {
            assert_eq!(encode(name, also), wire, "{name}");
            assert_eq!(
                decode(wire.as_bytes(), also).as_deref(),
                Some(name),
                "{wire}"
            );
        }
    }

    #[test]
    fn refusals() {
        for bad in [
            "&",
            "&AGE-",
            "&APw",
            "&APx-",
            "&2D0-",
            "a\u{fc}",
            "a\tb",
            "&APw-&APw-",
            "&A-",
        ] {
            assert_eq!(decode(bad.as_bytes(), &['.']), None, "{bad:?}");
        }
        // An encoded `.` is only taken where it is allowed.
        assert_eq!(decode(b"a&AC4-b", &[]), None);
    }
}
