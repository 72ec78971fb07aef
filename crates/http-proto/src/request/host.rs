//! The syntax of a `Host` field value (RFC 9110 §7.2, RFC 3986 §3.2.2-3.2.3).
//!
//! `Host = uri-host [ ":" port ]`, where `uri-host` is an IP-literal in brackets, an
//! IPv4 address or a reg-name, and `port` is digits. RFC 9112 §3.2 makes a server
//! answer 400 to a Host it cannot parse: a value with userinfo (`user:pw@host`), a
//! space, a path (`a/../b`) or a port that is not a number would otherwise reach
//! the access log, CGI's `SERVER_NAME` and anything else that trusts it.

use std::net::Ipv6Addr;

/// Whether `value` (already trimmed of OWS) is `uri-host [ ":" port ]`.
///
/// The empty value is valid: RFC 9110 §7.2 has a client send it when the target
/// URI has no authority. An IPv4 address is a reg-name syntactically, so it needs
/// no rule of its own.
pub(crate) fn is_valid_host(value: &[u8]) -> bool {
    let (host, port) = if value.first() == Some(&b'[') {
        let Some(close) = memchr::memchr(b']', value) else {
            return false;
        };
        let (literal, rest) = value.split_at(close + 1);
        if !is_ip_literal(literal) {
            return false;
        }
        match rest.split_first() {
            None => return true,
            Some((b':', port)) => (&[][..], port),
            Some(_) => return false,
        }
    } else {
        match memchr::memchr(b':', value) {
            Some(colon) => (&value[..colon], &value[colon + 1..]),
            None => (value, &[][..]),
        }
    };
    is_reg_name(host) && port.iter().all(u8::is_ascii_digit)
}

/// `reg-name = *( unreserved / pct-encoded / sub-delims )`.
fn is_reg_name(name: &[u8]) -> bool {
    let mut i = 0;
    while i < name.len() {
        match name[i] {
            b'%' => {
                let hex = name.get(i + 1..i + 3);
                if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                    return false;
                }
                i += 3;
            }
            b if is_unreserved(b) || is_sub_delim(b) => i += 1,
            _ => return false,
        }
    }
    true
}

/// `IP-literal = "[" ( IPv6address / IPvFuture ) "]"`, brackets included.
fn is_ip_literal(literal: &[u8]) -> bool {
    let Some(inner) = literal
        .strip_prefix(b"[")
        .and_then(|l| l.strip_suffix(b"]"))
    else {
        return false;
    };
    if let Some(future) = inner
        .strip_prefix(b"v")
        .or_else(|| inner.strip_prefix(b"V"))
    {
        return is_ipv_future(future);
    }
    std::str::from_utf8(inner).is_ok_and(|s| s.parse::<Ipv6Addr>().is_ok())
}

/// `IPvFuture` after its `v`: `1*HEXDIG "." 1*( unreserved / sub-delims / ":" )`.
fn is_ipv_future(rest: &[u8]) -> bool {
    let Some(dot) = memchr::memchr(b'.', rest) else {
        return false;
    };
    let (version, address) = (&rest[..dot], &rest[dot + 1..]);
    !version.is_empty()
        && version.iter().all(u8::is_ascii_hexdigit)
        && !address.is_empty()
        && address
            .iter()
            .all(|&b| is_unreserved(b) || is_sub_delim(b) || b == b':')
}

/// `unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~"`.
fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~')
}

/// `sub-delims = "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "="`.
fn is_sub_delim(b: u8) -> bool {
    matches!(
        b,
        b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b';' | b'='
    )
}
