//! Kept-alive connections idle for a few tens of milliseconds leave their task
//! and are parked in the worker's idle set (`idle.rs`), still registered with
//! tokio and woken by their socket's readiness. Over real sockets: a parked connection
//! wakes for its next request with its state intact, expires at its keep-alive
//! deadline, keeps the head timeout it had before its first request, and is
//! closed at shutdown.

mod common;

use std::time::{Duration, Instant};

use stoa_testkit::http::{Client, Closed, get};

use common::{A_TXT, B_TXT, BIG_LEN, C_HTML, TestServer, pattern};

/// A pause after which the connection has certainly parked: six times the
/// server's park threshold (50 ms).
const PARKED: Duration = Duration::from_millis(300);

#[test]
fn parked_connection_wakes_for_its_next_request() {
    let s = TestServer::start();
    let mut c = s.connect();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    // Idle long enough to be parked; nothing may arrive and it must stay open.
    c.expect_open_and_silent(PARKED);
    let r = c.get("/b.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, B_TXT));
    assert!(!r.closes());
    // Pipelined after waking, including a sendfile response.
    c.send(&[get("/big.bin"), get("/c.html")].concat());
    assert!(c.response().body == pattern(BIG_LEN));
    assert_eq!(c.response().body, C_HTML);
    // And it can park and wake again.
    c.expect_open_and_silent(PARKED);
    assert_eq!(c.get("/a.txt").body, A_TXT);
}

#[test]
fn answers_larger_than_the_socket_takes_continue_in_a_task() {
    // A request that arrives with its connection, or wakes a parked one, is
    // answered without a task until the socket is full; the rest of the answer
    // must still arrive, and the connection go on (and park) after it.
    let s = TestServer::start();
    let mut c = Client::connect_small_rcvbuf(s.addr(), 4096);
    for _ in 0..2 {
        let r = c.get("/big.bin");
        assert!(!r.closes());
        assert!(r.body == pattern(BIG_LEN));
        c.expect_open_and_silent(PARKED);
    }
    assert_eq!(c.get("/a.txt").body, A_TXT);
}

#[test]
fn parked_connection_woken_by_a_split_request() {
    let s = TestServer::start();
    let mut c = s.connect();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    c.expect_open_and_silent(PARKED);
    // The first byte wakes it; the rest follows separately.
    let req = get("/c.html");
    c.send(&req[..1]);
    c.send(&req[1..]);
    assert_eq!(c.response().body, C_HTML);
}

#[test]
fn parked_connection_woken_by_more_than_a_read_buffer() {
    // The wake's first read fills the worker's 8 KiB read buffer; the requests
    // beyond it must be read and answered too, in order.
    let s = TestServer::start();
    let mut c = s.connect();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    c.expect_open_and_silent(PARKED);
    let paths = ["/a.txt", "/b.txt", "/c.html"];
    let burst: Vec<u8> = (0..900).flat_map(|i| get(paths[i % 3])).collect();
    assert!(burst.len() > 2 * 8 * 1024);
    c.send(&burst);
    for i in 0..900 {
        let r = c.response();
        assert_eq!(r.status, 200, "response {i}");
        let want: &[u8] = [A_TXT, B_TXT, C_HTML][i % 3];
        assert_eq!(r.body, want, "response {i}");
    }
    c.expect_open_and_silent(PARKED);
    assert_eq!(c.get("/a.txt").body, A_TXT);
}

#[test]
fn parked_connection_woken_by_a_request_and_its_close() {
    // The request and the end of input arrive together: answered, then closed.
    let s = TestServer::start();
    let mut c = s.connect();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    c.expect_open_and_silent(PARKED);
    c.send(&get("/b.txt"));
    c.shutdown_write();
    assert_eq!(c.response().body, B_TXT);
    c.expect_closed();
}

#[test]
fn parked_connection_expires_at_its_keepalive_deadline() {
    let s = TestServer::with(|c| c.limits.keepalive_timeout = Duration::from_millis(1800));
    let mut c = s.connect();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    // Nothing else happens on the server meanwhile: the expiry must not depend on
    // some other connection's activity.
    c.set_read_timeout(Duration::from_secs(6));
    let idle = Instant::now();
    assert_eq!(c.expect_closed(), Closed::Eof);
    let waited = idle.elapsed();
    assert!(
        waited >= Duration::from_millis(1500),
        "closed after {waited:?}, before the keep-alive deadline"
    );
    assert!(waited < Duration::from_secs(6), "closed after {waited:?}");
}

#[test]
fn a_woken_connection_is_not_closed_at_its_earlier_deadline() {
    // Every answer parks the connection again and leaves the deadline of its
    // previous park behind, stale (and past a thousand parks the set prunes
    // them). The connection must keep only its latest deadline.
    let s = TestServer::with(|c| {
        c.limits.keepalive_timeout = Duration::from_millis(1800);
        c.limits.keepalive_requests = 10_000;
    });
    let mut c = s.connect();
    for _ in 0..1100 {
        assert_eq!(c.get("/a.txt").body, A_TXT);
    }
    c.expect_open_and_silent(Duration::from_millis(1000));
    assert_eq!(c.get("/a.txt").body, A_TXT);
    // The park before this one ends 800 ms from now; this one in 1,800.
    c.expect_open_and_silent(Duration::from_millis(1200));
    c.set_read_timeout(Duration::from_secs(6));
    assert_eq!(c.expect_closed(), Closed::Eof);
}

#[test]
fn parked_connection_keeps_its_request_count() {
    let s = TestServer::with(|c| c.limits.keepalive_requests = 3);
    let mut c = s.connect();
    assert!(!c.get("/a.txt").closes());
    assert!(!c.get("/a.txt").closes());
    c.expect_open_and_silent(PARKED);
    let r = c.get("/b.txt");
    assert_eq!(r.body, B_TXT);
    assert!(
        r.closes(),
        "the third request on the connection must close it, parked or not"
    );
    c.expect_closed();
}

#[test]
fn parked_connection_with_a_partial_head_gets_408() {
    let s = TestServer::with(|c| {
        c.limits.head_timeout = Duration::from_millis(400);
        c.limits.head_timeout_max = Duration::from_millis(800);
    });
    let mut c = s.connect();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    c.expect_open_and_silent(PARKED);
    c.send(b"GET /b.txt HTTP/1.1\r\nHost: t\r\n");
    let start = Instant::now();
    let r = c.response();
    assert_eq!(r.status, 408);
    c.expect_closed();
    assert!(start.elapsed() < Duration::from_secs(4));
}

#[test]
fn parked_connection_closed_by_the_client_is_released() {
    let s = TestServer::with(|c| c.limits.max_connections = 4);
    // Fill the worker limits with parked connections, close them, and check the
    // server still accepts as many new ones.
    let mut first: Vec<_> = (0..4).map(|_| s.connect()).collect();
    for c in &mut first {
        assert_eq!(c.get("/a.txt").body, A_TXT);
    }
    first[0].expect_open_and_silent(PARKED);
    for c in &first {
        c.shutdown_write();
    }
    for c in &mut first {
        c.expect_closed();
    }
    drop(first);
    let mut next: Vec<_> = (0..4).map(|_| s.connect()).collect();
    for c in &mut next {
        assert_eq!(c.get("/b.txt").body, B_TXT);
    }
}

#[test]
fn many_parked_connections_all_wake() {
    let s = TestServer::start();
    let mut conns: Vec<_> = (0..200).map(|_| s.connect()).collect();
    for c in &mut conns {
        c.send(&get("/a.txt"));
    }
    for c in &mut conns {
        assert_eq!(c.response().body, A_TXT);
    }
    conns[0].expect_open_and_silent(PARKED);
    for c in &mut conns {
        c.send(&get("/b.txt"));
    }
    for (i, c) in conns.iter_mut().enumerate() {
        let r = c.response();
        assert_eq!(r.body, B_TXT, "connection {i}");
    }
}

#[test]
fn parked_connection_is_closed_at_shutdown() {
    let mut s = TestServer::with(|c| c.limits.keepalive_timeout = Duration::from_secs(60));
    let mut c = s.connect();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    c.expect_open_and_silent(PARKED);
    let took = s.shutdown();
    assert!(
        took < Duration::from_secs(3),
        "run() returned after {took:?}"
    );
    c.set_read_timeout(Duration::from_secs(3));
    c.expect_closed();
}

#[test]
fn a_connection_parked_before_its_first_request_keeps_its_head_timeout() {
    // The head timeout runs from the accept, parked or not: waking for the
    // first byte does not restart it (a client trickling a head after a long
    // silence gets one head timeout in all, not two). Accepted at once: with
    // TCP_DEFER_ACCEPT the kernel would hold the silent connection back.
    let s = TestServer::with(|c| {
        c.limits.head_timeout = Duration::from_secs(2);
        c.limits.head_timeout_max = Duration::from_secs(2);
        c.defer_accept = false;
    });
    let connected = Instant::now();
    let mut c = s.connect();
    c.expect_open_and_silent(Duration::from_millis(1500));
    c.send(b"GET /b.txt HTTP/1.1\r\nHost: t\r\n");
    c.set_read_timeout(Duration::from_secs(6));
    assert_eq!(c.response().status, 408);
    let took = connected.elapsed();
    assert!(
        took < Duration::from_millis(3000),
        "408 after {took:?}: the head timeout restarted when the connection woke"
    );
    c.expect_closed();
}

#[test]
fn a_quiet_worker_still_expires_connections_parked_after_a_timeout_round() {
    // Issue 56 (1): once the idle set's last deadline had passed, the set kept
    // its timer marked as armed for that past instant, so no later park re-armed
    // it: on a worker with nothing else to do, every connection parked after a
    // round of timeouts stayed open for ever (and held its connection slot).
    // One worker, so the later connections park where the first one expired.
    let s = TestServer::with(|c| {
        c.workers = 1;
        c.limits.keepalive_timeout = Duration::from_millis(400);
        c.limits.head_timeout = Duration::from_millis(400);
        c.limits.head_timeout_max = Duration::from_millis(400);
        // Silent connections reach the server at once, not after the kernel's
        // SYN-ACK retransmission.
        c.defer_accept = false;
    });
    let bound = Duration::from_secs(5);
    // The timeout round: one kept-alive connection, expired; the set is empty.
    let mut first = s.connect();
    assert_eq!(first.get("/a.txt").body, A_TXT);
    first.set_read_timeout(bound);
    assert_eq!(first.expect_closed(), Closed::Eof);
    // Then a silent connection and an idle kept-alive one, on the quiet worker.
    let mut silent = s.connect();
    let mut kept = s.connect();
    assert_eq!(kept.get("/b.txt").body, B_TXT);
    let start = Instant::now();
    for c in [&mut silent, &mut kept] {
        c.set_read_timeout(bound);
        c.expect_closed();
    }
    let took = start.elapsed();
    assert!(took < bound, "closed after {took:?}");
}
