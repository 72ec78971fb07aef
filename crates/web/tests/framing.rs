//! Message framing over real sockets (RFC 9112 §2, §5, §6, §7): after a rejected
//! request the connection is closed and nothing pipelined behind it is answered;
//! after an accepted one, the next request is parsed exactly where the framing says.

mod common;
use stoa_testkit::http::get;

use common::{A_TXT, B_TXT, C_HTML, TestServer, assert_rejected};

#[test]
fn transfer_encoding_with_content_length_is_refused_in_both_orders() {
    let s = TestServer::start();
    assert_rejected(
        &s,
        b"POST /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        400,
    );
    assert_rejected(
        &s,
        b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    );
    // The classic CL.TE smuggle: the "body" is a whole second request.
    let smuggle = [
        &b"GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 44\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"[..],
        &get("/c.html"),
    ]
    .concat();
    assert_rejected(&s, &smuggle, 400);
}

#[test]
fn malformed_content_length_is_refused() {
    let s = TestServer::start();
    for value in [
        "5\r\nContent-Length: 5",
        "5\r\nContent-Length: 6",
        "+5",
        "-5",
        "0x10",
        "3, 3",
        "3,3",
        "5 5",
        "",
        "1e3",
        "99999999999999999999",
        "18446744073709551616",
    ] {
        let req = format!("GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: {value}\r\n\r\n");
        assert_rejected(&s, req.as_bytes(), 400);
    }
}

#[test]
fn transfer_encoding_rules() {
    let s = TestServer::start();
    let te = |version: &str, value: &str| {
        format!("GET /a.txt {version}\r\nHost: t\r\nTransfer-Encoding: {value}\r\n\r\n0\r\n\r\n")
            .into_bytes()
    };
    assert_rejected(&s, &te("HTTP/1.0", "chunked"), 400);
    assert_rejected(&s, &te("HTTP/1.1", "gzip"), 501);
    assert_rejected(&s, &te("HTTP/1.1", "gzip, chunked"), 501);
    assert_rejected(&s, &te("HTTP/1.1", "chunked, identity"), 400);
    assert_rejected(&s, &te("HTTP/1.1", "chunked, chunked"), 400);
    assert_rejected(
        &s,
        &te("HTTP/1.1", "chunked\r\nTransfer-Encoding: chunked"),
        400,
    );
    assert_rejected(&s, &te("HTTP/1.1", ","), 400);
}

#[test]
fn malformed_header_fields_are_refused() {
    let s = TestServer::start();
    let cases: &[&[u8]] = &[
        // obs-fold
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Folded: a\r\n b\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Folded: a\r\n\tb\r\n\r\n",
        // whitespace between name and colon
        b"GET /a.txt HTTP/1.1\r\nHost : t\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
        // bare LF line endings, alone or mixed
        b"GET /a.txt HTTP/1.1\nHost: t\n\n",
        b"GET /a.txt HTTP/1.1\r\nHost: t\nX: y\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\n",
        // bare CR inside a value
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX: a\rb\r\n\r\n",
        // NUL inside a value
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX: a\x00b\r\n\r\n",
        // bytes that cannot be in a field name
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX\xff: y\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\n: y\r\n\r\n",
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nNoColon\r\n\r\n",
    ];
    for req in cases {
        assert_rejected(&s, req, 400);
    }
}

#[test]
fn bad_request_lines_and_versions_are_refused() {
    let s = TestServer::start();
    let cases: &[&[u8]] = &[
        // HTTP/0.9
        b"GET /a.txt\r\n\r\n",
        b"GET /a.txt HTTP/2.0\r\nHost: t\r\n\r\n",
        b"GET /a.txt HTTP/1.2\r\nHost: t\r\n\r\n",
        b"GET /a.txt http/1.1\r\nHost: t\r\n\r\n",
        b"GET  /a.txt HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /a.txt  HTTP/1.1\r\nHost: t\r\n\r\n",
        b"GET /a\x01.txt HTTP/1.1\r\nHost: t\r\n\r\n",
        b"G(T /a.txt HTTP/1.1\r\nHost: t\r\n\r\n",
    ];
    for req in cases {
        assert_rejected(&s, req, 400);
    }
}

#[test]
fn host_must_appear_exactly_once_in_http11() {
    let s = TestServer::start();
    assert_rejected(&s, b"GET /a.txt HTTP/1.1\r\n\r\n", 400);
    assert_rejected(
        &s,
        b"GET /a.txt HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
        400,
    );
    assert_rejected(
        &s,
        b"GET /a.txt HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n",
        400,
    );
    // HTTP/1.0 without Host is fine.
    let mut c = s.connect();
    let r = c.roundtrip(b"GET /a.txt HTTP/1.0\r\n\r\n", false);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, A_TXT);
}

#[test]
fn invalid_host_values_are_refused() {
    let s = TestServer::start();
    // `a.test:999999` and `t:65536` (issue 56, 7): no TCP port has more than five
    // digits or exceeds 65535.
    for host in [
        "user:pw@t",
        "a b",
        "a/../b",
        "a:xyz",
        "[::1",
        "t:80:80",
        "a.test:999999",
        "t:65536",
    ] {
        let req = format!("GET /a.txt HTTP/1.1\r\nHost: {host}\r\n\r\n");
        assert_rejected(&s, req.as_bytes(), 400);
    }
    let http10 = b"GET /a.txt HTTP/1.0\r\nHost: user@t\r\n\r\n";
    assert_rejected(&s, http10, 400);
    // The forms a client really sends are served.
    let mut c = s.connect();
    for host in ["t", "t:8080", "127.0.0.1:80", "[::1]:8080", ""] {
        let req = format!("GET /a.txt HTTP/1.1\r\nHost: {host}\r\n\r\n");
        let r = c.roundtrip(req.as_bytes(), false);
        assert_eq!((r.status, r.body.as_slice()), (200, A_TXT), "{host:?}");
    }
}

#[test]
fn unsupported_expectation_is_417_and_close() {
    let s = TestServer::start();
    assert_rejected(
        &s,
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nExpect: something-else\r\n\r\n",
        417,
    );
}

#[test]
fn content_length_body_on_get_is_skipped_exactly() {
    let s = TestServer::start();
    let mut c = s.connect();
    // The body is exactly a request for /c.html: if the server parsed the body as a
    // request, the second answer would be c.html.
    let body = get("/c.html");
    let wire = [
        format!(
            "GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
        &body,
        &get("/b.txt"),
    ]
    .concat();
    c.send(&wire);
    let first = c.response();
    assert_eq!((first.status, first.body.as_slice()), (200, A_TXT));
    assert!(!first.closes());
    let second = c.response();
    assert_eq!((second.status, second.body.as_slice()), (200, B_TXT));
    // Still in sync and open.
    let third = c.get("/c.html");
    assert_eq!(third.body, C_HTML);
}

#[test]
fn small_content_length_body_then_pipelined_get() {
    let s = TestServer::start();
    let mut c = s.connect();
    let wire = [
        &b"GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nabcde"[..],
        &get("/b.txt"),
    ]
    .concat();
    c.send(&wire);
    assert_eq!(c.response().body, A_TXT);
    assert_eq!(c.response().body, B_TXT);
}

#[test]
fn chunked_body_with_extension_and_trailer_then_pipelined_get() {
    let s = TestServer::start();
    let mut c = s.connect();
    let wire = [
        &b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n\
           5;name=value\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: yes\r\n\r\n"[..],
        &get("/b.txt"),
    ]
    .concat();
    c.send(&wire);
    let first = c.response();
    assert_eq!((first.status, first.body.as_slice()), (200, A_TXT));
    let second = c.response();
    assert_eq!((second.status, second.body.as_slice()), (200, B_TXT));
    assert_eq!(c.get("/c.html").body, C_HTML);
}

#[test]
fn chunked_body_arriving_in_pieces_is_skipped() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
    // The answer does not wait for the body.
    assert_eq!(c.response().body, A_TXT);
    // The next chunk is a whole request for /c.html: it is body data, not a request.
    let data = get("/c.html");
    c.send(format!("lo\r\n{:X}\r\n", data.len()).as_bytes());
    c.send(&data[..10]);
    c.send(&data[10..]);
    c.send(b"\r\n0\r");
    c.send(b"\n\r");
    c.send(b"\n");
    assert_eq!(c.get("/b.txt").body, B_TXT);
}

#[test]
fn content_length_body_arriving_in_pieces_is_skipped() {
    let s = TestServer::start();
    let mut c = s.connect();
    let body = get("/c.html");
    c.send(
        format!(
            "POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    let r = c.response();
    assert_eq!(r.status, 405);
    assert!(
        !r.closes(),
        "a small body is discarded, the connection kept"
    );
    let (one, two) = body.split_at(7);
    c.send(one);
    c.send(two);
    assert_eq!(c.get("/b.txt").body, B_TXT);
}

#[test]
fn invalid_chunk_sizes_close_the_connection() {
    let s = TestServer::start();
    let sizes: &[&[u8]] = &[
        b"0x5\r\nhello\r\n0\r\n\r\n",
        b" 5\r\nhello\r\n0\r\n\r\n",
        b"5 \r\nhello\r\n0\r\n\r\n",
        b"-5\r\nhello\r\n0\r\n\r\n",
        b"10000000000000005\r\nhello\r\n0\r\n\r\n",
        b"5\nhello\r\n0\r\n\r\n",
        b"5\r\nhello\n0\r\n\r\n",
        b"5\r\nhelloXX0\r\n\r\n",
        b"5;a\x00b\r\nhello\r\n0\r\n\r\n",
        b"0\r\nX: y\n\r\n",
    ];
    for body in sizes {
        let what = String::from_utf8_lossy(body).into_owned();
        let mut c = s.connect();
        let wire = [
            &b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            body,
            &get("/b.txt"),
        ]
        .concat();
        let _ = c.try_send(&wire);
        // The answer to the head may or may not have left before the body was seen
        // to be bad; nothing after the garbage may be answered.
        match c.try_read_response(false) {
            Ok(Some(r)) => {
                assert_eq!(r.status, 200, "{what:?}");
                assert_eq!(r.body, A_TXT, "{what:?}");
            }
            Ok(None) => {}
            Err(e) => panic!("{what:?}: {e}"),
        }
        c.expect_closed();
    }
}

/// Trailer lines the head would refuse: obs-fold, no colon, a space before the
/// colon, a request line.
const BAD_TRAILERS: &[&[u8]] = &[
    b"0\r\nX: a\r\n folded\r\n\r\n",
    b"0\r\nNoColon\r\n\r\n",
    b"0\r\nX : y\r\n\r\n",
    b"0\r\nGET /c.html HTTP/1.1\r\n\r\n",
];

#[test]
fn trailers_that_are_not_fields_close_the_connection() {
    let s = TestServer::start();
    for body in BAD_TRAILERS {
        let what = String::from_utf8_lossy(body).into_owned();
        let mut c = s.connect();
        let wire = [
            &b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"[..],
            body,
            &get("/b.txt"),
        ]
        .concat();
        let _ = c.try_send(&wire);
        // The file was answered before the body was read; what follows the bad
        // trailer must not be.
        let r = c.response();
        assert_eq!((r.status, r.body.as_slice()), (200, A_TXT), "{what:?}");
        c.expect_closed();
    }
    // A well-formed trailer keeps the connection.
    let mut c = s.connect();
    c.send(
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n\r\n",
    );
    assert_eq!(c.response().body, A_TXT);
    assert_eq!(c.get("/b.txt").body, B_TXT);
}

#[test]
fn body_over_the_discard_limit_is_answered_then_closed() {
    let s = TestServer::start();
    let mut c = s.connect();
    let body = vec![b'G'; 100_000];
    let wire = [
        &b"GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n"[..],
        &body,
        &get("/b.txt"),
    ]
    .concat();
    let writer = {
        let mut w = c.writer();
        std::thread::spawn(move || {
            use std::io::Write as _;
            let _ = w.write_all(&wire);
        })
    };
    let r = c.response();
    assert_eq!((r.status, r.body.as_slice()), (200, A_TXT));
    assert!(
        r.closes(),
        "a body too big to discard must close: {:?}",
        r.headers
    );
    c.expect_closed();
    writer.join().expect("writer thread");
}

#[test]
fn chunked_body_over_the_discard_limit_closes_after_the_response() {
    let s = TestServer::with(|c| c.limits.max_discard_body = 1000);
    let mut c = s.connect();
    let mut wire = b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..5 {
        wire.extend_from_slice(b"1F4\r\n");
        wire.extend_from_slice(&[b'z'; 500]);
        wire.extend_from_slice(b"\r\n");
    }
    wire.extend_from_slice(b"0\r\n\r\n");
    wire.extend_from_slice(&get("/b.txt"));
    let _ = c.try_send(&wire);
    let r = c.response();
    assert_eq!((r.status, r.body.as_slice()), (200, A_TXT));
    c.expect_closed();
}

#[test]
fn expect_100_continue_with_a_body_is_answered_and_closed_without_100() {
    let s = TestServer::start();
    let mut c = s.connect();
    // The body is never sent: the server must not wait for it, nor invite it.
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
    let r = c.response();
    assert_eq!(r.status, 200, "no interim 100 Continue");
    assert_eq!(r.body, A_TXT);
    assert!(r.closes());
    c.expect_closed();
}

#[test]
fn expect_100_continue_without_a_body_keeps_the_connection() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.roundtrip(
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n\r\n",
        false,
    );
    assert_eq!((r.status, r.body.as_slice()), (200, A_TXT));
    assert!(!r.closes());
    assert_eq!(c.get("/b.txt").body, B_TXT);
}

#[test]
fn blank_lines_before_the_request_line_are_skipped() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.send(b"\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response().body, A_TXT);
    // Between pipelined requests too.
    c.send(&[&b"\r\n"[..], &get("/b.txt")].concat());
    assert_eq!(c.response().body, B_TXT);
}

#[test]
fn content_length_zero_and_absolute_form() {
    let s = TestServer::start();
    let mut c = s.connect();
    let wire = [
        &b"GET /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"[..],
        b"GET http://example.com/b.txt HTTP/1.1\r\nHost: example.com\r\n\r\n",
    ]
    .concat();
    c.send(&wire);
    assert_eq!(c.response().body, A_TXT);
    assert_eq!(c.response().body, B_TXT);
}
