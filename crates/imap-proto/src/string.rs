//! IMAP strings on the wire (RFC 9051 §4.3): the encoders choose the cheapest form a
//! value allows, an atom, a quoted string or a literal, so that callers never have to.

/// Whether `b` may appear in an atom (`ATOM-CHAR`: any CHAR except `atom-specials`).
pub fn is_atom_char(b: u8) -> bool {
    matches!(b, 0x21..=0x7e) && !matches!(b, b'(' | b')' | b'{' | b'%' | b'*' | b'"' | b'\\' | b']')
}

/// Whether `b` may appear in a quoted string unescaped (`QUOTED-CHAR` without the
/// escapes): 7-bit, not CR, LF or NUL, not `"` or `\`.
fn is_plain_quoted(b: u8) -> bool {
    matches!(b, 0x01..=0x7f) && !matches!(b, b'\r' | b'\n' | b'"' | b'\\')
}

/// Writes `value` as an IMAP `string`: quoted when it is short 7-bit text without
/// CR or LF, a literal (`{N}CRLF` then the bytes) otherwise. `"` and `\` are
/// escaped inside quotes. 8-bit text becomes a literal, which every client reads.
pub fn write_string(out: &mut Vec<u8>, value: &[u8]) {
    match quoted(value) {
        Some(quoted) => out.extend_from_slice(&quoted),
        None => write_literal(out, value),
    }
}

/// `value` as a quoted string (`"` and `\` escaped), or `None` when only a
/// literal can carry it (8-bit, CR, LF or NUL, or longer than 1 KiB). A client
/// that sends no literals (the proxy's LOGIN, the load generator's) refuses
/// what this refuses.
pub fn quoted(value: &[u8]) -> Option<Vec<u8>> {
    const MAX_QUOTED: usize = 1024;
    let quotable = value.len() <= MAX_QUOTED
        && value
            .iter()
            .all(|&b| is_plain_quoted(b) || b == b'"' || b == b'\\');
    if !quotable {
        return None;
    }
    let mut out = Vec::with_capacity(value.len() + 2);
    out.push(b'"');
    for &b in value {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    Some(out)
}

/// Writes `value` as a synchronizing literal: `{N}CRLF` then the bytes.
pub fn write_literal(out: &mut Vec<u8>, value: &[u8]) {
    out.push(b'{');
    out.extend_from_slice(value.len().to_string().as_bytes());
    out.extend_from_slice(b"}\r\n");
    out.extend_from_slice(value);
}

/// Writes `value` as an `nstring`: `NIL` for `None`, else a string.
pub fn write_nstring(out: &mut Vec<u8>, value: Option<&[u8]>) {
    match value {
        Some(value) => write_string(out, value),
        None => out.extend_from_slice(b"NIL"),
    }
}

/// Writes `value` as an `astring`: a bare atom when every byte is an atom char
/// (and it is not empty or `NIL`), else a string.
pub fn write_astring(out: &mut Vec<u8>, value: &[u8]) {
    if !value.is_empty()
        && !value.eq_ignore_ascii_case(b"NIL")
        && value.iter().all(|&b| is_atom_char(b))
    {
        out.extend_from_slice(value);
    } else {
        write_string(out, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(f: impl Fn(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn forms() {
        assert_eq!(enc(|o| write_string(o, b"hello world")), "\"hello world\"");
        assert_eq!(enc(|o| write_string(o, b"a\"b\\c")), "\"a\\\"b\\\\c\"");
        assert_eq!(enc(|o| write_string(o, b"a\r\nb")), "{4}\r\na\r\nb");
        assert_eq!(enc(|o| write_string(o, "é".as_bytes())), "{2}\r\né");
        assert_eq!(enc(|o| write_string(o, b"")), "\"\"");
        assert_eq!(enc(|o| write_nstring(o, None)), "NIL");
        assert_eq!(enc(|o| write_astring(o, b"INBOX")), "INBOX");
        assert_eq!(enc(|o| write_astring(o, b"nil")), "\"nil\"");
        assert_eq!(enc(|o| write_astring(o, b"a b")), "\"a b\"");
        assert_eq!(enc(|o| write_astring(o, b"")), "\"\"");
        assert_eq!(enc(|o| write_astring(o, b"x]")), "\"x]\"");
    }
}
