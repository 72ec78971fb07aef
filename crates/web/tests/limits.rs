//! Size limits on request heads, over real sockets: exact boundaries, heads that
//! arrive one byte at a time, floods of blank lines, and expensive-to-decode targets.

mod common;

use std::io::Write as _;
use std::time::{Duration, Instant};

use stoa_testkit::http::{Client, get};

use common::{A_TXT, BIG_LEN, TestServer, assert_rejected, pattern};

/// `GET <target> HTTP/1.1` whose request line (CRLF excluded) is `len` bytes long.
fn request_line_of(len: usize) -> Vec<u8> {
    let fixed = "GET /".len() + " HTTP/1.1".len();
    let target = format!("/{}", "a".repeat(len - fixed));
    let line = format!("GET {target} HTTP/1.1");
    assert_eq!(line.len(), len);
    format!("{line}\r\nHost: t\r\n\r\n").into_bytes()
}

#[test]
fn request_line_of_exactly_8_kib_is_accepted_and_one_more_byte_is_414() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.roundtrip(&request_line_of(8 * 1024), false);
    // The name is too long to exist: a 404, and the connection stays usable.
    assert_eq!(r.status, 404);
    assert!(!r.closes());
    assert_eq!(c.get("/a.txt").body, A_TXT);
    assert_rejected(&s, &request_line_of(8 * 1024 + 1), 414);
}

#[test]
fn request_line_over_the_limit_is_refused_before_it_ends() {
    // No CRLF ever comes: the 414 must not wait for the end of the line.
    let s = TestServer::start();
    let mut c = s.connect();
    let mut line = b"GET /".to_vec();
    line.extend(std::iter::repeat_n(b'a', 9000));
    let _ = c.try_send(&line);
    let r = c.response();
    assert_eq!(r.status, 414);
    c.expect_closed();
}

fn header_line_of(len: usize) -> Vec<u8> {
    let value = "v".repeat(len - "X-Long: ".len());
    format!("GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Long: {value}\r\n\r\n").into_bytes()
}

#[test]
fn header_line_of_exactly_8_kib_is_accepted_and_one_more_byte_is_431() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.roundtrip(&header_line_of(8 * 1024), false);
    assert_eq!((r.status, r.body.as_slice()), (200, A_TXT));
    assert_rejected(&s, &header_line_of(8 * 1024 + 1), 431);
}

fn with_headers(count: usize) -> Vec<u8> {
    // Host is one of them.
    let mut req = b"GET /a.txt HTTP/1.1\r\nHost: t\r\n".to_vec();
    for i in 1..count {
        req.extend_from_slice(format!("X-H{i}: {i}\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    req
}

#[test]
fn one_hundred_headers_are_accepted_and_101_are_431() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.roundtrip(&with_headers(100), false);
    assert_eq!((r.status, r.body.as_slice()), (200, A_TXT));
    assert_rejected(&s, &with_headers(101), 431);
    assert_rejected(&s, &with_headers(1000), 431);
}

#[test]
fn head_over_32_kib_is_431() {
    let s = TestServer::start();
    let mut req = b"GET /a.txt HTTP/1.1\r\nHost: t\r\n".to_vec();
    for i in 0..40 {
        req.extend_from_slice(format!("X-H{i}: {}\r\n", "c".repeat(1000)).as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    assert_rejected(&s, &req, 431);
}

/// Writes `bytes` one byte per `write` (Nagle off) from another thread, stopping at
/// the first error; returns the thread.
fn trickle_bytes(c: &Client, bytes: Vec<u8>) -> std::thread::JoinHandle<()> {
    let mut w = c.writer();
    std::thread::spawn(move || {
        for b in bytes {
            if w.write_all(&[b]).is_err() {
                return;
            }
        }
    })
}

fn head_of(total: usize) -> Vec<u8> {
    let mut req = b"GET /a.txt HTTP/1.1\r\nHost: t\r\n".to_vec();
    let mut i = 0;
    while req.len() + 2 < total {
        let room = total - 2 - req.len();
        let line = format!("X-{i}: {}\r\n", "y".repeat(60));
        if line.len() <= room {
            req.extend_from_slice(line.as_bytes());
        } else if room >= 8 {
            req.extend_from_slice(format!("X: {}\r\n", "z".repeat(room - 5)).as_bytes());
        } else {
            break;
        }
        i += 1;
    }
    req.extend_from_slice(b"\r\n");
    req
}

#[test]
fn head_sent_one_byte_per_write_is_reassembled_under_the_limit() {
    let s = TestServer::with(|c| c.limits.head.max_head = 2048);
    let mut c = s.connect();
    let req = head_of(2000);
    let t = trickle_bytes(&c, req);
    let r = c.response();
    assert_eq!((r.status, r.body.as_slice()), (200, A_TXT));
    t.join().expect("writer");
    assert_eq!(c.get("/a.txt").body, A_TXT);
}

#[test]
fn head_sent_one_byte_per_write_over_the_limit_is_431() {
    let s = TestServer::with(|c| c.limits.head.max_head = 2048);
    let mut c = s.connect();
    let req = head_of(4000);
    let t = trickle_bytes(&c, req);
    let r = c.response();
    assert_eq!(r.status, 431);
    assert!(r.closes());
    c.expect_closed();
    t.join().expect("writer");
}

#[test]
fn a_mebibyte_of_blank_lines_is_refused_at_the_head_limit() {
    let s = TestServer::start();
    let mut c = s.connect();
    let mut w = c.writer();
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        let chunk = b"\r\n".repeat(8 * 1024);
        let mut sent = 0usize;
        while sent < 1 << 20 {
            if w.write_all(&chunk).is_err() {
                break;
            }
            sent += chunk.len();
        }
        let _ = w.write_all(&get("/a.txt"));
        let _ = tx.send(sent);
    });
    let r = c.response();
    assert_eq!(r.status, 431, "blank lines count toward the head limit");
    assert!(r.closes());
    c.expect_closed();
    writer.join().expect("writer");
    let sent = rx.recv().expect("writer result");
    assert!(sent <= 1 << 20);
}

#[test]
fn ten_thousand_percent_escapes_are_decoded_quickly() {
    let s = TestServer::with(|c| {
        c.limits.head.max_request_line = 64 * 1024;
        c.limits.head.max_head = 64 * 1024;
    });
    let mut c = s.connect();
    let target = format!("/{}", "%41".repeat(10_000));
    let start = Instant::now();
    let r = c.get(&target);
    assert_eq!(r.status, 404);
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "took {:?}",
        start.elapsed()
    );
    // With the default limits the same line is simply too long.
    let d = TestServer::start();
    assert_rejected(&d, &get(&target), 414);
}

#[test]
fn ten_thousand_ranges_are_answered_with_the_whole_file() {
    let s = TestServer::with(|c| {
        c.limits.head.max_header_line = 256 * 1024;
        c.limits.head.max_head = 256 * 1024;
    });
    let ranges: Vec<String> = (0..10_000).map(|i| format!("{i}-{i}")).collect();
    let req = format!(
        "GET /big.bin HTTP/1.1\r\nHost: t\r\nRange: bytes={}\r\n\r\n",
        ranges.join(",")
    );
    let mut c = s.connect();
    let start = Instant::now();
    let r = c.roundtrip(req.as_bytes(), false);
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), BIG_LEN);
    assert!(r.body == pattern(BIG_LEN));
    assert!(start.elapsed() < Duration::from_secs(2));
    // With the default limits the header line is too long.
    let d = TestServer::start();
    assert_rejected(&d, req.as_bytes(), 431);
}
