//! The access log, end to end: every request made appears exactly once after
//! shutdown (refused heads, timeouts and aborted responses included), request bytes
//! are escaped, and the combined format carries referer and user agent.

mod common;

use std::time::Duration;

use stoa_testkit::http::{Client, get, request};

use common::{A_TXT, Fixture, pattern};

/// Size of the file whose download the client abandons: far more than the kernel
/// can buffer for a client with a 4 KiB receive buffer.
const HUGE: usize = 16 << 20;

fn log_lines(path: &std::path::Path) -> Vec<String> {
    let bytes = std::fs::read(path).expect("read the access log");
    assert!(bytes.is_ascii(), "the log holds raw non-ASCII bytes");
    assert!(
        bytes.is_empty() || bytes.ends_with(b"\n"),
        "last line unterminated"
    );
    String::from_utf8(bytes)
        .expect("ascii")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The lines containing `needle`; asserts there is exactly one.
#[track_caller]
fn one_line<'a>(lines: &'a [String], needle: &str) -> &'a str {
    let found: Vec<&String> = lines.iter().filter(|l| l.contains(needle)).collect();
    assert_eq!(
        found.len(),
        1,
        "lines containing {needle:?}: {found:#?}\nwhole log: {lines:#?}"
    );
    found[0]
}

/// `(status, bytes)` from a combined-format line: the two fields after the request.
fn status_and_bytes(line: &str) -> (u16, Option<u64>) {
    // ... "request" STATUS BYTES "referer" "agent"
    let after = line.split("\" ").nth(1).expect("fields after the request");
    let mut fields = after.split(' ');
    let status = fields.next().and_then(|s| s.parse().ok()).expect("status");
    let bytes = fields.next().expect("bytes field");
    (status, bytes.parse().ok())
}

#[test]
fn every_request_is_logged_once_with_escaping() {
    let fixture = Fixture::new();
    fixture.write("huge.bin", &pattern(HUGE));
    let log = fixture.outside().join("access.log");
    let mut config = fixture.config();
    common::combined_log(&mut config, log.clone());
    config.limits.head_timeout = Duration::from_millis(300);
    config.limits.head_timeout_max = Duration::from_millis(600);
    let mut s = fixture.start(config);

    // 200 with referer and user agent.
    let mut c = s.connect();
    let r = c.roundtrip(
        &request(
            "GET",
            "/a.txt?from=log-test",
            &[
                ("Referer", "http://ref.example/page"),
                ("User-Agent", "stoa-test/1.0"),
            ],
        ),
        false,
    );
    assert_eq!(r.body, A_TXT);
    // 404, 304 and a HEAD on the same connection.
    assert_eq!(c.get("/missing-for-log").status, 404);
    let etag = r.header("ETag").expect("ETag").to_owned();
    let r = c.roundtrip(
        &request("GET", "/a.txt?conditional", &[("If-None-Match", &etag)]),
        false,
    );
    assert_eq!(r.status, 304);
    let r = c.roundtrip(&request("HEAD", "/b.txt?head", &[]), true);
    assert_eq!(r.status, 200);
    drop(c);

    // Hostile bytes in the target and headers: quote, backslash, tab, non-ASCII.
    let mut c = s.connect();
    let mut req = b"GET /q\"uote\\back\xc3\xa9 HTTP/1.1\r\nHost: t\r\nUser-Agent: evil\"agent\t\xfe\r\nReferer: a\\b\r\n\r\n".to_vec();
    req.extend_from_slice(&get("/after-evil"));
    c.send(&req);
    assert_eq!(c.response().status, 404);
    assert_eq!(c.response().status, 404);
    drop(c);

    // A head refused by the parser (control byte in the target): 400, logged raw.
    let mut c = s.connect();
    c.send(b"GET /bad\x01path HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(c.response().status, 400);
    c.expect_closed();
    drop(c);

    // 414.
    let mut c = s.connect();
    let long = format!("/long{}", "L".repeat(9000));
    let _ = c.try_send(&get(&long));
    assert_eq!(c.response().status, 414);
    c.expect_closed();
    drop(c);

    // 408 for a head that never ends.
    let mut c = s.connect();
    c.send(b"GET /slow-for-log HTTP/1.1\r\nHost: t\r\n");
    assert_eq!(c.response().status, 408);
    c.expect_closed();
    drop(c);

    // A response abandoned after a few bytes.
    let mut c = Client::connect_small_rcvbuf(s.addr(), 4096);
    c.send(&get("/huge.bin?abort"));
    let head = c.read_head_only();
    assert_eq!(head.status, 200);
    let first = c.read_exact_raw(1000);
    assert_eq!(first, pattern(1000));
    drop(c);

    // A connection that sends nothing is not a request: no line.
    let quiet = s.connect();
    drop(quiet);

    s.shutdown();
    let lines = log_lines(&log);

    let ok = one_line(&lines, "\"GET /a.txt?from=log-test HTTP/1.1\"");
    assert!(ok.starts_with("127.0.0.1 - - ["), "{ok}");
    assert!(
        ok.ends_with(&format!(
            "\" 200 {} \"http://ref.example/page\" \"stoa-test/1.0\"",
            A_TXT.len()
        )),
        "{ok}"
    );
    let missing = one_line(&lines, "\"GET /missing-for-log HTTP/1.1\"");
    assert_eq!(status_and_bytes(missing).0, 404);
    assert!(missing.ends_with(" \"-\" \"-\""), "{missing}");
    let cond = one_line(&lines, "\"GET /a.txt?conditional HTTP/1.1\"");
    assert_eq!(status_and_bytes(cond), (304, None), "{cond}");
    let head = one_line(&lines, "\"HEAD /b.txt?head HTTP/1.1\"");
    assert_eq!(
        status_and_bytes(head),
        (200, None),
        "HEAD sends no body: {head}"
    );

    let evil = one_line(&lines, "\"GET /q\\x22uote\\x5Cback\\xC3\\xA9 HTTP/1.1\"");
    assert_eq!(status_and_bytes(evil).0, 404);
    assert!(
        evil.ends_with(" \"a\\x5Cb\" \"evil\\x22agent\\x09\\xFE\""),
        "{evil}"
    );
    one_line(&lines, "\"GET /after-evil HTTP/1.1\" 404");

    let bad = one_line(&lines, "\"GET /bad\\x01path HTTP/1.1\"");
    assert_eq!(status_and_bytes(bad).0, 400, "{bad}");
    let too_long = one_line(&lines, "\"GET /longLLLL");
    assert_eq!(status_and_bytes(too_long).0, 414, "{too_long}");
    let slow = one_line(&lines, "\"GET /slow-for-log HTTP/1.1\"");
    assert_eq!(status_and_bytes(slow).0, 408, "{slow}");

    let aborted = one_line(&lines, "\"GET /huge.bin?abort HTTP/1.1\"");
    let (status, bytes) = status_and_bytes(aborted);
    assert_eq!(status, 200, "{aborted}");
    let bytes = bytes.expect("some body bytes were sent");
    assert!(
        bytes >= 1000 && bytes < HUGE as u64,
        "aborted download logged with {bytes} body bytes: {aborted}"
    );

    assert_eq!(lines.len(), 10, "one line per request: {lines:#?}");
}

#[test]
fn common_format_has_no_referer_or_agent() {
    let fixture = Fixture::new();
    let log = fixture.outside().join("common.log");
    let mut config = fixture.config();
    config.access_log = stoa_web::config::AccessLogTarget::File(log.clone());
    let mut s = fixture.start(config);
    let mut c = s.connect();
    let r = c.roundtrip(
        &request("GET", "/a.txt", &[("User-Agent", "ua-should-not-appear")]),
        false,
    );
    assert_eq!(r.body, A_TXT);
    drop(c);
    s.shutdown();
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    assert!(
        lines[0].ends_with(&format!("\"GET /a.txt HTTP/1.1\" 200 {}", A_TXT.len())),
        "{}",
        lines[0]
    );
}

#[test]
fn many_requests_from_both_workers_are_all_logged() {
    let fixture = Fixture::new();
    let log = fixture.outside().join("many.log");
    let mut config = fixture.config();
    common::combined_log(&mut config, log.clone());
    let mut s = fixture.start(config);
    // Several connections, so both workers see some; 2000 lines is more than one
    // 32 KiB batch per worker.
    for conn in 0..8 {
        let mut c = s.connect();
        let mut wire = Vec::new();
        for i in 0..250 {
            wire.extend_from_slice(&get(&format!("/a.txt?c={conn}&i={i}")));
        }
        c.send(&wire);
        for _ in 0..250 {
            assert_eq!(c.response().body, A_TXT);
        }
    }
    s.shutdown();
    let lines = log_lines(&log);
    assert_eq!(lines.len(), 2000);
    for conn in 0..8 {
        for i in 0..250 {
            let needle = format!("\"GET /a.txt?c={conn}&i={i} HTTP/1.1\" 200 ");
            assert_eq!(
                lines.iter().filter(|l| l.contains(&needle)).count(),
                1,
                "{needle}"
            );
        }
    }
}
