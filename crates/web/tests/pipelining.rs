//! Pipelining and keep-alive over real sockets: order, HEAD in a pipeline,
//! `Connection: close`, request limits per connection, HTTP/1.0 keep-alive.

mod common;

use std::io::Write as _;

use stoa_testkit::http::{Client, get, request};

use common::{A_TXT, B_TXT, BIG_LEN, C_HTML, TestServer, pattern};

const FILES: [(&str, &[u8]); 3] = [("/a.txt", A_TXT), ("/b.txt", B_TXT), ("/c.html", C_HTML)];

#[test]
fn ten_thousand_pipelined_gets_in_one_write_are_answered_in_order() {
    const N: usize = 10_000;
    let s = TestServer::with(|c| c.limits.keepalive_requests = 20_000);
    let mut c = s.connect();
    let mut wire = Vec::new();
    for i in 0..N {
        wire.extend_from_slice(&get(FILES[i % 3].0));
    }
    let writer = {
        let mut w = c.writer();
        std::thread::spawn(move || w.write_all(&wire))
    };
    for i in 0..N {
        let r = c.response();
        assert_eq!(r.status, 200, "response {i}");
        assert_eq!(r.body, FILES[i % 3].1, "response {i} out of order");
        assert!(!r.closes(), "response {i}");
    }
    writer
        .join()
        .expect("writer thread")
        .expect("write the pipeline");
    // The connection is still in sync, and the server serves others.
    assert_eq!(c.get("/b.txt").body, B_TXT);
    let mut other = s.connect();
    assert_eq!(other.get("/c.html").body, C_HTML);
}

#[test]
fn three_pipelined_files_come_back_in_order() {
    let s = TestServer::start();
    let mut c = s.connect();
    let wire = [get("/c.html"), get("/big.bin"), get("/a.txt")].concat();
    c.send(&wire);
    let r1 = c.response();
    let r2 = c.response();
    let r3 = c.response();
    assert_eq!(r1.body, C_HTML);
    assert_eq!(r1.header("Content-Type"), Some("text/html"));
    assert_eq!(r2.body.len(), BIG_LEN);
    assert!(r2.body == pattern(BIG_LEN), "big.bin content differs");
    assert_eq!(r3.body, A_TXT);
}

#[test]
fn head_in_the_middle_of_a_pipeline_has_no_body() {
    let s = TestServer::start();
    let mut c = s.connect();
    let wire = [
        get("/a.txt"),
        request("HEAD", "/big.bin", &[]),
        request("HEAD", "/b.txt", &[]),
        get("/c.html"),
    ]
    .concat();
    c.send(&wire);
    assert_eq!(c.read_response(false).body, A_TXT);
    let h1 = c.read_response(true);
    assert_eq!(h1.status, 200);
    assert_eq!(h1.content_length(), Some(BIG_LEN as u64));
    let h2 = c.read_response(true);
    assert_eq!(h2.content_length(), Some(B_TXT.len() as u64));
    // If a HEAD had carried a body, this would not parse as c.html.
    let r = c.read_response(false);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, C_HTML);
}

#[test]
fn connection_close_ends_the_pipeline_after_its_response() {
    let s = TestServer::start();
    let mut c = s.connect();
    let wire = [
        get("/a.txt"),
        get("/big.bin"),
        request("GET", "/b.txt", &[("Connection", "close")]),
        get("/c.html"),
    ]
    .concat();
    c.send(&wire);
    let r1 = c.response();
    assert_eq!(r1.body, A_TXT);
    assert!(!r1.closes());
    assert_eq!(c.response().body.len(), BIG_LEN);
    let r3 = c.response();
    assert_eq!(r3.body, B_TXT);
    assert!(r3.closes());
    // The request after it is never answered.
    c.expect_closed();
}

#[test]
fn keepalive_requests_limit_closes_after_the_last_one() {
    let s = TestServer::with(|c| c.limits.keepalive_requests = 3);
    let mut c = s.connect();
    let r1 = c.get("/a.txt");
    let r2 = c.get("/b.txt");
    assert!(!r1.closes() && !r2.closes());
    let r3 = c.get("/c.html");
    assert_eq!(r3.body, C_HTML);
    assert!(r3.closes(), "third response must carry Connection: close");
    c.expect_closed();

    // Pipelined: exactly three answers.
    let mut c = s.connect();
    let wire = [
        get("/a.txt"),
        get("/a.txt"),
        get("/a.txt"),
        get("/a.txt"),
        get("/a.txt"),
    ]
    .concat();
    c.send(&wire);
    for i in 0..3 {
        let r = c.response();
        assert_eq!(r.body, A_TXT);
        assert_eq!(r.closes(), i == 2, "response {i}");
    }
    c.expect_closed();
}

#[test]
fn pipelined_requests_then_half_close_are_all_answered() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.send(&[get("/a.txt"), get("/b.txt"), get("/c.html")].concat());
    c.shutdown_write();
    assert_eq!(c.response().body, A_TXT);
    assert_eq!(c.response().body, B_TXT);
    assert_eq!(c.response().body, C_HTML);
    c.expect_closed();
}

/// A request that comes with the client's half-close on a kept-alive connection,
/// both right after an answer and behind a long one: the end of input is seen as
/// soon as the request is answered. The server drops tokio's readiness after a
/// read that emptied the socket (`Conn::forget_readiness`); the end of input must
/// not go with it, or the connection would stay open until it parks.
#[test]
fn half_close_after_a_kept_alive_request_closes_at_once() {
    const LONG: usize = 8 << 20;
    let fixture = common::Fixture::new();
    fixture.write("long.bin", &pattern(LONG));
    let config = fixture.config();
    let s = fixture.start(config);
    for long in [false, true] {
        let mut c = Client::connect_small_rcvbuf(s.addr(), 4096);
        if long {
            // The server is still writing when the next request and the end come.
            c.send(&get("/long.bin"));
            assert_eq!(c.read_head_only().content_length(), Some(LONG as u64));
        } else {
            assert_eq!(c.get("/a.txt").body, A_TXT);
        }
        c.send(&get("/b.txt"));
        c.shutdown_write();
        if long {
            assert!(c.read_exact_raw(LONG) == pattern(LONG));
        }
        assert_eq!(c.response().body, B_TXT);
        let answered = std::time::Instant::now();
        c.expect_closed();
        let took = answered.elapsed();
        assert!(
            took < std::time::Duration::from_millis(700),
            "closed {took:?} after the last answer (long: {long})"
        );
    }
}

#[test]
fn requests_split_at_odd_boundaries_are_reassembled() {
    let s = TestServer::start();
    let mut c = s.connect();
    let wire = [
        get("/a.txt"),
        request("GET", "/b.txt", &[("User-Agent", "split/1")]),
        get("/c.html"),
    ]
    .concat();
    for piece in wire.chunks(7) {
        c.send(piece);
    }
    assert_eq!(c.response().body, A_TXT);
    assert_eq!(c.response().body, B_TXT);
    assert_eq!(c.response().body, C_HTML);
}

#[test]
fn small_pipeline_batches_still_answer_everything() {
    let s = TestServer::with(|c| c.limits.max_pipeline = 2);
    let mut c = s.connect();
    let mut wire = Vec::new();
    for i in 0..9 {
        wire.extend_from_slice(&get(FILES[i % 3].0));
    }
    c.send(&wire);
    for i in 0..9 {
        assert_eq!(c.response().body, FILES[i % 3].1, "response {i}");
    }
}

#[test]
fn http10_keep_alive_is_echoed_and_the_connection_stays_open() {
    let s = TestServer::start();
    let mut c = s.connect();
    let req = b"GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    let r = c.roundtrip(req, false);
    assert_eq!(r.body, A_TXT);
    assert_eq!(
        r.header("Connection")
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Some("keep-alive")
    );
    let r = c.roundtrip(req, false);
    assert_eq!(r.body, A_TXT);
    // Without it, an HTTP/1.0 connection closes after one response.
    let r = c.roundtrip(b"GET /b.txt HTTP/1.0\r\n\r\n", false);
    assert_eq!(r.body, B_TXT);
    assert!(r.closes());
    c.expect_closed();
}

#[test]
fn http10_without_keep_alive_closes() {
    let s = TestServer::start();
    let mut c = s.connect();
    c.send(&[&b"GET /a.txt HTTP/1.0\r\n\r\n"[..], &get("/b.txt")].concat());
    let r = c.response();
    assert_eq!(r.body, A_TXT);
    assert!(r.closes());
    c.expect_closed();
}

#[test]
fn http11_is_kept_alive_by_default_and_closes_on_request() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.get("/a.txt");
    assert!(r.header("Connection").is_none(), "{:?}", r.headers);
    let r = c.roundtrip(&request("GET", "/b.txt", &[("Connection", "close")]), false);
    assert!(r.closes());
    c.expect_closed();
}

/// Pipelined requests the server will never read: `n` GETs for `/a.txt`.
fn tail_of_requests(n: usize) -> Vec<u8> {
    (0..n).flat_map(|_| get("/a.txt")).collect()
}

#[test]
fn keepalive_limit_in_a_deep_pipeline_answers_exactly_that_many_then_closes_cleanly() {
    // Default keepalive_requests is 1000: of 10,000 pipelined requests, 1000 are
    // answered, the last with Connection: close, and the connection then ends with
    // a FIN. The 9000 unread requests must not turn the close into a reset that
    // destroys answers the client has not read yet (RFC 9112 §9.6).
    let s = TestServer::start();
    let mut c = Client::connect_small_rcvbuf(s.addr(), 4096);
    let wire = tail_of_requests(10_000);
    let writer = {
        let mut w = c.writer();
        std::thread::spawn(move || {
            let _ = w.write_all(&wire);
        })
    };
    for i in 0..1000 {
        let r = match c.try_read_response(false) {
            Ok(Some(r)) => r,
            other => panic!("response {i} of 1000 lost: {other:?}"),
        };
        assert_eq!(r.body, A_TXT, "response {i}");
        assert_eq!(r.closes(), i == 999, "response {i}");
    }
    c.expect_closed();
    writer.join().expect("writer thread");
}

#[test]
fn connection_close_with_unread_pipelined_input_still_delivers_the_whole_response() {
    // The last response is large and the client reads slowly (small receive
    // buffer); more requests sit unread in the server's socket. Closing must not
    // reset the connection before the client has the whole response.
    let s = TestServer::start();
    let mut c = Client::connect_small_rcvbuf(s.addr(), 4096);
    let wire = [
        request("GET", "/big.bin", &[("Connection", "close")]),
        tail_of_requests(2000),
    ]
    .concat();
    let writer = {
        let mut w = c.writer();
        std::thread::spawn(move || {
            let _ = w.write_all(&wire);
        })
    };
    let r = match c.try_read_response(false) {
        Ok(Some(r)) => r,
        other => panic!("response lost: {other:?}"),
    };
    assert!(r.closes());
    assert_eq!(r.body.len(), BIG_LEN);
    assert!(r.body == pattern(BIG_LEN));
    c.expect_closed();
    writer.join().expect("writer thread");
}

#[test]
fn keepalive_limit_with_unread_pipelined_input_still_delivers_the_last_response() {
    let s = TestServer::with(|c| c.limits.keepalive_requests = 2);
    let mut c = Client::connect_small_rcvbuf(s.addr(), 4096);
    let wire = [get("/a.txt"), get("/big.bin"), tail_of_requests(2000)].concat();
    let writer = {
        let mut w = c.writer();
        std::thread::spawn(move || {
            let _ = w.write_all(&wire);
        })
    };
    assert_eq!(c.response().body, A_TXT);
    let r = match c.try_read_response(false) {
        Ok(Some(r)) => r,
        other => panic!("second response lost: {other:?}"),
    };
    assert!(r.closes());
    assert!(r.body == pattern(BIG_LEN));
    c.expect_closed();
    writer.join().expect("writer thread");
}
