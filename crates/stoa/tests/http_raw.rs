//! The `stoa` binary driven over raw sockets, for what curl cannot send or
//! observe: smuggling-shaped heads, pipelining, connection persistence by
//! version, HTTP/0.9, and a client that trickles its head.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use stoa_testkit::net::is_timeout;

use common::{HELLO, IO_TIMEOUT, PIPELINED, Server, Site, raw_conn};

#[test]
fn transfer_encoding_with_content_length_is_400_and_closes() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let mut conn = raw_conn(server.addr);
    conn.send(
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n...",
    );
    let response = conn.read_response(false);
    assert_eq!(response.status, 400);
    assert_eq!(response.header("Connection"), Some("close"));
    conn.expect_eof();
}

#[test]
fn three_pipelined_requests_are_answered_in_order() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let mut conn = raw_conn(server.addr);
    let batch: Vec<u8> = PIPELINED
        .iter()
        .flat_map(|(path, _)| format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes())
        .collect();
    conn.send(&batch);
    for (path, body) in PIPELINED {
        let response = conn.read_response(false);
        assert_eq!(response.status, 200, "{path}");
        assert_eq!(
            String::from_utf8_lossy(&response.body),
            String::from_utf8_lossy(body),
            "response for {path} out of order or wrong"
        );
        assert_eq!(response.header("Connection"), None, "{path} kept alive");
    }
    // The connection is still usable afterwards.
    conn.send(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(conn.read_response(false).body, HELLO);
}

#[test]
fn head_sends_no_body_bytes_on_the_wire() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let mut conn = raw_conn(server.addr);
    // If HEAD leaked body bytes, the GET's response would not parse.
    conn.send(b"HEAD /hello.txt HTTP/1.1\r\nHost: x\r\n\r\nGET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    let head = conn.read_response(true);
    assert_eq!(head.status, 200);
    let len = HELLO.len().to_string();
    assert_eq!(head.header("Content-Length"), Some(len.as_str()));
    let get = conn.read_response(false);
    assert_eq!(get.status, 200);
    assert_eq!(get.body, PIPELINED[0].1);
}

#[test]
fn http10_without_keep_alive_closes_after_the_response() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let mut conn = raw_conn(server.addr);
    conn.send(b"GET /hello.txt HTTP/1.0\r\n\r\n");
    let response = conn.read_response(false);
    assert_eq!(response.status, 200);
    assert_eq!(response.body, HELLO);
    conn.expect_eof();
}

#[test]
fn http10_with_keep_alive_stays_open() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let mut conn = raw_conn(server.addr);
    conn.send(b"GET /hello.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let first = conn.read_response(false);
    assert_eq!(first.status, 200);
    assert_eq!(first.body, HELLO);
    assert!(
        first
            .header("Connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("keep-alive")),
        "HTTP/1.0 keep-alive must be confirmed: {:?}",
        first.headers
    );
    conn.send(b"GET /a.txt HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    let second = conn.read_response(false);
    assert_eq!(second.status, 200);
    assert_eq!(second.body, PIPELINED[0].1);
    // And a plain 1.0 request on it then closes.
    conn.send(b"GET /c.txt HTTP/1.0\r\n\r\n");
    assert_eq!(conn.read_response(false).body, PIPELINED[2].1);
    conn.expect_eof();
}

#[test]
fn connection_close_on_http11_is_honoured() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let mut conn = raw_conn(server.addr);
    conn.send(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    let response = conn.read_response(false);
    assert_eq!(response.status, 200);
    assert_eq!(response.body, HELLO);
    assert_eq!(response.header("Connection"), Some("close"));
    conn.expect_eof();
}

#[test]
fn http11_keeps_the_connection_open_by_default() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let mut conn = raw_conn(server.addr);
    for _ in 0..3 {
        conn.send(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        let response = conn.read_response(false);
        assert_eq!(response.status, 200);
        assert_eq!(response.body, HELLO);
    }
}

#[test]
fn http09_request_is_400_and_closes() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let mut conn = raw_conn(server.addr);
    conn.send(b"GET /\r\n\r\n");
    let response = conn.read_response(false);
    assert_eq!(response.status, 400);
    conn.expect_eof();
}

#[test]
fn oversized_head_is_answered_then_closed() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let cases = [
        (
            format!(
                "GET /hello.txt HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
                "a".repeat(9000)
            ),
            431,
        ),
        (
            format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(9000)),
            414,
        ),
    ];
    for (request, status) in cases {
        let mut conn = raw_conn(server.addr);
        conn.send(request.as_bytes());
        let response = conn.read_response(false);
        assert_eq!(response.status, status);
        assert_eq!(response.header("Connection"), Some("close"));
        conn.expect_eof();
    }
}

#[test]
fn post_is_405_with_allow_and_the_body_is_skipped() {
    let site = Site::new();
    let server = Server::start(site.root(), &[]);
    let mut conn = raw_conn(server.addr);
    conn.send(
        b"POST /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello\
          GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    let post = conn.read_response(false);
    assert_eq!(post.status, 405);
    assert_eq!(post.header("Allow"), Some("GET, HEAD"));
    // The small body was read and discarded: the next request is answered.
    let get = conn.read_response(false);
    assert_eq!(get.status, 200);
    assert_eq!(get.body, HELLO);
}

#[test]
fn trickling_client_is_cut_off_while_another_is_served() {
    let site = Site::new();
    // One worker: the trickler and the normal client share one event loop.
    let server = Server::start(site.root(), &["--workers", "1", "--head-timeout", "200ms"]);
    let request: &[u8] = b"GET /hello.txt HTTP/1.1\r\nHost: x\r\nX-Slow: trickle, trickle\r\n\r\n";

    let connected = Instant::now();
    let mut reader = TcpStream::connect(server.addr).expect("connect the trickler");
    reader
        .set_read_timeout(Some(IO_TIMEOUT))
        .expect("set read timeout");
    let mut writer = reader.try_clone().expect("clone the trickler socket");
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel();
    let trickler = std::thread::spawn(move || {
        for (i, byte) in request.iter().enumerate() {
            if writer.write_all(&[*byte]).is_err() {
                return i;
            }
            if i == 0 {
                let _ = started_tx.send(());
            }
            // The scenario: one byte every 100 ms, until told to stop.
            match stop_rx.recv_timeout(Duration::from_millis(100)) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => return i + 1,
            }
        }
        request.len()
    });
    started_rx
        .recv_timeout(IO_TIMEOUT)
        .expect("the trickler sent its first byte");

    // Meanwhile, a normal client is served by the same worker.
    let mut other = raw_conn(server.addr);
    other.send(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    let response = other.read_response(false);
    assert_eq!(response.status, 200);
    assert_eq!(response.body, HELLO);

    // The trickler gets (at most) a 408, then EOF, well before its head is done.
    let mut got = Vec::new();
    let mut chunk = [0u8; 1024];
    let outcome = loop {
        if connected.elapsed() > IO_TIMEOUT {
            break Err("no EOF within 10 s".to_owned());
        }
        match reader.read(&mut chunk) {
            Ok(0) => break Ok(connected.elapsed()),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if is_timeout(&e) => break Err("no EOF within 10 s".to_owned()),
            Err(e) => break Err(format!("read failed instead of EOF: {e}")),
        }
    };
    let _ = stop_tx.send(());
    let sent = trickler.join().expect("trickler thread");
    let text = String::from_utf8_lossy(&got);
    let elapsed = outcome.unwrap_or_else(|e| panic!("trickler: {e}; received {text:?}"));
    assert!(
        sent < request.len(),
        "the server waited for the whole trickled head ({sent} bytes); received {text:?}"
    );
    assert!(
        got.is_empty() || text.starts_with("HTTP/1.1 408 "),
        "the trickler should get nothing or a 408, got {text:?}"
    );
    assert!(
        elapsed >= Duration::from_millis(150),
        "cut off after {elapsed:?}, before the 200 ms head deadline"
    );
}
