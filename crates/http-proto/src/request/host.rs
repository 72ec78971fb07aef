//! The syntax of a `Host` field value (RFC 9110 §7.2, RFC 3986 §3.2.2-3.2.3).
//!
//! `Host = uri-host [ ":" port ]`, where `uri-host` is an IP-literal in brackets, an
//! IPv4 address or a reg-name, and `port` is digits. RFC 9112 §3.2 makes a server
//! answer 400 to a Host it cannot parse: a value with userinfo (`user:pw@host`), a
//! space, a path (`a/../b`) or a port that is not a number would otherwise reach
//! the access log, CGI's `SERVER_NAME` and anything else that trusts it. RFC 3986
//! lets a port be any run of digits; a port no TCP connection can have (more than
//! [`MAX_PORT_DIGITS`] digits, or above 65535) is refused too, as the docs promise.
//!
//! [`authority`] is the name a request is for, which a server with several sites
//! chooses the site by: the absolute-form target's authority when there is one
//! (RFC 9112 §3.2.2: it overrides `Host`), else `Host`, without the port.

use std::net::Ipv6Addr;

use crate::{Error, RequestHead};

/// Longest `Host` value accepted: a host of 255 bytes (a DNS name is at most
/// 253; IP literals are far shorter), a colon and a 5-digit port.
pub const MAX_HOST: usize = 255 + 6;

/// Most digits a port may have: 65535 has five (leading zeros count, so that
/// the length bound [`MAX_HOST`] assumes holds).
pub const MAX_PORT_DIGITS: usize = 5;

/// Whether `value` (already trimmed of OWS) is `uri-host [ ":" port ]`.
///
/// The empty value is valid: RFC 9110 §7.2 has a client send it when the target
/// URI has no authority. An IPv4 address is a reg-name syntactically, so it needs
/// no rule of its own.
pub fn is_valid_host(value: &[u8]) -> bool {
    valid_host(value)
}

/// [`is_valid_host`], inlined into the parser (every request has a `Host`).
#[inline(always)]
pub(crate) fn valid_host(value: &[u8]) -> bool {
    if value.len() > MAX_HOST {
        return false;
    }
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
    is_reg_name(host) && is_port(port)
}

/// `port = *DIGIT` (RFC 3986 §3.2.3; empty is allowed), at most
/// [`MAX_PORT_DIGITS`] digits and at most 65535.
#[inline(always)]
fn is_port(port: &[u8]) -> bool {
    port.len() <= MAX_PORT_DIGITS
        && port.iter().all(u8::is_ascii_digit)
        && port.iter().fold(0u32, |n, &d| n * 10 + u32::from(d - b'0')) <= u32::from(u16::MAX)
}

/// The host of a valid `Host` value without its port: `example.com` of
/// `example.com:8080`, `[::1]` of `[::1]:8080`.
pub fn without_port(value: &[u8]) -> &[u8] {
    let colon = if value.first() == Some(&b'[') {
        memchr::memchr(b']', value)
            .and_then(|close| (value.get(close + 1) == Some(&b':')).then_some(close + 1))
    } else {
        memchr::memchr(b':', value)
    };
    colon.map_or(value, |c| &value[..c])
}

/// The host the request is for, without the port: the authority of an
/// absolute-form target (`GET http://example.com/ HTTP/1.1`), which RFC 9112
/// §3.2.2 puts before `Host`, else the `Host` field (which [`crate::parse_request`]
/// has checked); `None` when there is neither (HTTP/1.0) or it is empty. An
/// absolute-form authority that is not `uri-host [ ":" port ]` (userinfo, say)
/// is [`Error::BadHost`]. Only a server choosing among sites asks, so the parser
/// keeps nothing for it: `Host` is found again here.
pub fn authority<'b>(head: &RequestHead<'b, '_>) -> Result<Option<&'b [u8]>, Error> {
    let value = match absolute_authority(head.target) {
        Some(a) if is_valid_host(a) => a,
        Some(_) => return Err(Error::BadHost),
        None => {
            let host = head
                .headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case("host"));
            match host {
                Some(h) => super::trim(h.value),
                None => return Ok(None),
            }
        }
    };
    let host = without_port(value);
    Ok((!host.is_empty()).then_some(host))
}

/// The authority of an absolute-form target: what follows `http://` or
/// `https://` up to the path, query or end.
fn absolute_authority(target: &[u8]) -> Option<&[u8]> {
    if target.first() == Some(&b'/') {
        return None;
    }
    let rest = [&b"http://"[..], b"https://"].iter().find_map(|scheme| {
        let n = scheme.len();
        (target.len() >= n && target[..n].eq_ignore_ascii_case(scheme)).then(|| &target[n..])
    })?;
    let end = memchr::memchr3(b'/', b'?', b'#', rest).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// `reg-name = *( unreserved / pct-encoded / sub-delims )`. Inlined into the
/// parser, as it was before [`is_valid_host`] had a caller outside it.
#[inline(always)]
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

#[cfg(test)]
mod tests {
    use super::{authority, is_valid_host, without_port};
    use crate::request::{header_storage, parse_request};
    use crate::{Error, Limits, Status};

    #[test]
    fn valid_and_invalid_hosts() {
        for ok in [
            &b"example.com"[..],
            b"EXAMPLE.com:8080",
            b"127.0.0.1",
            b"[::1]",
            b"[::1]:443",
            b"[v1.x]",
            b"",
            b"a-b.c_d~",
        ] {
            assert!(is_valid_host(ok), "{:?}", String::from_utf8_lossy(ok));
        }
        let long = vec![b'a'; 262];
        for bad in [
            &b"user@example.com"[..],
            b"a b",
            b"a/b",
            b"a:b",
            b"[::1",
            b"[::g]",
            b"[::1]x",
            b"a\x01",
            &long,
        ] {
            assert!(!is_valid_host(bad), "{:?}", String::from_utf8_lossy(bad));
        }
        assert!(is_valid_host(&long[..261]));
        // Issue 56 (7): RFC 3986 lets a port be any digits, but no TCP port has
        // more than five or exceeds 65535; such a Host was served as valid.
        for port in [&b"a:123456"[..], b"a:65536", b"[::1]:999999", b"a:0000080"] {
            assert!(!is_valid_host(port), "{:?}", String::from_utf8_lossy(port));
        }
        for port in [&b"a:65535"[..], b"a:0", b"a:", b"[::1]:00443"] {
            assert!(is_valid_host(port), "{:?}", String::from_utf8_lossy(port));
        }
    }

    #[test]
    fn port_is_dropped() {
        assert_eq!(without_port(b"a.example:80"), b"a.example");
        assert_eq!(without_port(b"a.example"), b"a.example");
        assert_eq!(without_port(b"[::1]:8080"), b"[::1]");
        assert_eq!(without_port(b"[::1]"), b"[::1]");
    }

    fn authority_of(raw: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        let mut storage = header_storage();
        let Ok(Status::Complete(head)) = parse_request(raw, &mut storage, &Limits::default())
        else {
            panic!("unparsed: {:?}", String::from_utf8_lossy(raw));
        };
        authority(&head).map(|a| a.map(<[u8]>::to_vec))
    }

    #[test]
    fn authority_from_host_or_absolute_form() {
        let a =
            |raw: &[u8]| authority_of(raw).map(|o| o.map(|v| String::from_utf8(v).expect("utf-8")));
        assert_eq!(
            a(b"GET / HTTP/1.1\r\nHost: A.example:81\r\n\r\n"),
            Ok(Some("A.example".into()))
        );
        assert_eq!(a(b"GET / HTTP/1.0\r\n\r\n"), Ok(None));
        assert_eq!(a(b"GET / HTTP/1.1\r\nHost:\r\n\r\n"), Ok(None));
        assert_eq!(
            a(b"GET http://b.example:8080/x HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            Ok(Some("b.example".into()))
        );
        assert_eq!(
            a(b"GET HTTPS://[::1]?q HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            Ok(Some("[::1]".into()))
        );
        assert_eq!(
            a(b"GET http://u@b.example/ HTTP/1.1\r\nHost: a.example\r\n\r\n"),
            Err(Error::BadHost)
        );
    }
}
