//! An HTTP/2 request as the HTTP/1.1 request the handlers read.
//!
//! `:method` and `:path` make the request line, `:authority` the `Host` field (a
//! `host` field beside it is dropped: RFC 9113 §8.3.1 makes them the same, and
//! `:authority` wins), the other fields follow in their order, except those the
//! translation owns: `content-length` (set from the gathered body) and `expect`
//! (the body is gathered before the handlers see the request). Cookies, which
//! HTTP/2 lets a client split into one field per pair, are joined into one line
//! (RFC 9113 §8.2.3). h2 has already refused connection-specific fields
//! (`connection`, `transfer-encoding`, …) as malformed.
//!
//! HTTP/2 carries field values as bytes; any byte HTTP/1 would read as the end
//! of a line (CR, LF, NUL) would let a client forge fields of its own in the
//! translation, so such a request is refused here (RFC 9113 §8.2.1 calls it
//! malformed).

use http::request::Parts;

/// Why a request cannot be translated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Malformed(pub(super) &'static str);

/// The HTTP/1.1 head of `parts`, with `Content-Length: body_len` when the
/// request has a body (`None`: it has none). The body itself follows the head
/// in the same buffer, appended by the caller.
pub(super) fn head(parts: &Parts, body_len: Option<u64>) -> Result<Vec<u8>, Malformed> {
    let target = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .as_bytes();
    let mut head = Vec::with_capacity(256);
    head.extend_from_slice(parts.method.as_str().as_bytes());
    head.push(b' ');
    put_value(&mut head, target)?;
    head.extend_from_slice(b" HTTP/1.1\r\n");
    let authority = parts.uri.authority();
    if let Some(authority) = authority {
        head.extend_from_slice(b"Host: ");
        put_value(&mut head, authority.as_str().as_bytes())?;
        head.extend_from_slice(b"\r\n");
    }
    let mut cookies: Option<Vec<u8>> = None;
    for (name, value) in &parts.headers {
        match name.as_str() {
            "host" if authority.is_some() => continue,
            "content-length" | "expect" => continue,
            "cookie" => {
                let line = cookies.get_or_insert_with(Vec::new);
                if !line.is_empty() {
                    line.extend_from_slice(b"; ");
                }
                put_value(line, value.as_bytes())?;
                continue;
            }
            _ => {}
        }
        head.extend_from_slice(name.as_str().as_bytes());
        head.extend_from_slice(b": ");
        put_value(&mut head, value.as_bytes())?;
        head.extend_from_slice(b"\r\n");
    }
    if let Some(line) = cookies {
        head.extend_from_slice(b"cookie: ");
        head.extend_from_slice(&line);
        head.extend_from_slice(b"\r\n");
    }
    if let Some(len) = body_len {
        head.extend_from_slice(b"Content-Length: ");
        head.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    Ok(head)
}

/// Appends a value that must stay on its line.
fn put_value(head: &mut Vec<u8>, value: &[u8]) -> Result<(), Malformed> {
    if memchr::memchr3(b'\r', b'\n', 0, value).is_some() {
        return Err(Malformed("a CR, LF or NUL in a field"));
    }
    head.extend_from_slice(value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(build: http::request::Builder) -> Parts {
        build.body(()).expect("request").into_parts().0
    }

    fn text(head: &[u8]) -> &str {
        std::str::from_utf8(head).expect("utf-8")
    }

    #[test]
    fn pseudo_headers_make_the_request_line_and_host() {
        let p = parts(
            http::Request::get("https://www.example.com:8443/a/b?c=d")
                .header("user-agent", "curl/8")
                .header("host", "other.example"),
        );
        assert_eq!(
            text(&head(&p, None).expect("head")),
            "GET /a/b?c=d HTTP/1.1\r\nHost: www.example.com:8443\r\nuser-agent: curl/8\r\n\r\n"
        );
    }

    #[test]
    fn a_host_field_stands_when_there_is_no_authority() {
        let p = parts(http::Request::get("/x").header("host", "h.example"));
        assert_eq!(
            text(&head(&p, None).expect("head")),
            "GET /x HTTP/1.1\r\nhost: h.example\r\n\r\n"
        );
    }

    #[test]
    fn the_body_length_is_the_gathered_one_and_expect_is_dropped() {
        let p = parts(
            http::Request::post("https://h/web99")
                .header("content-length", "999")
                .header("expect", "100-continue"),
        );
        assert_eq!(
            text(&head(&p, Some(12)).expect("head")),
            "POST /web99 HTTP/1.1\r\nHost: h\r\nContent-Length: 12\r\n\r\n"
        );
    }

    #[test]
    fn split_cookies_are_joined() {
        let p = parts(
            http::Request::get("https://h/")
                .header("cookie", "a=1")
                .header("accept", "*/*")
                .header("cookie", "b=2"),
        );
        assert_eq!(
            text(&head(&p, None).expect("head")),
            "GET / HTTP/1.1\r\nHost: h\r\naccept: */*\r\ncookie: a=1; b=2\r\n\r\n"
        );
    }

    #[test]
    fn line_breaks_in_values_are_refused() {
        for bad in [&b"a\r\nx-forged: 1"[..], b"a\nb", b"a\0b"] {
            // `HeaderValue` itself refuses these; the check must hold even so,
            // whatever a future decoder lets through.
            let mut out = Vec::new();
            assert!(put_value(&mut out, bad).is_err(), "{bad:?}");
        }
        let mut out = Vec::new();
        assert!(put_value(&mut out, b"tab\tand obs-text \xff ok").is_ok());
    }
}
