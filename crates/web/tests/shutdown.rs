//! Graceful shutdown: requests in flight finish, new connections are refused, idle
//! keep-alive connections are closed, `run` returns (within the grace period).

mod common;

use std::io::ErrorKind;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use stoa_testkit::http::{Client, Closed, get};

use common::{A_TXT, Fixture, TestServer, pattern};

/// Much more than the kernel can buffer between the server and a client with a 4 KiB
/// receive buffer, so a response of this size stays in flight until read.
const HUGE: usize = 16 << 20;

fn with_huge_file(edit: impl FnOnce(&mut stoa_web::Config)) -> TestServer {
    let fixture = Fixture::new();
    fixture.write("huge.bin", &pattern(HUGE));
    let mut config = fixture.config();
    edit(&mut config);
    fixture.start(config)
}

/// Starts a download of `/huge.bin` and reads its head and first 1000 bytes.
fn start_download(s: &TestServer) -> Client {
    let mut c = Client::connect_small_rcvbuf(s.addr(), 4096);
    c.send(&get("/huge.bin"));
    let head = c.read_head_only();
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(HUGE as u64));
    assert_eq!(c.read_exact_raw(1000), pattern(1000));
    c
}

/// Reads the rest of the download and checks every byte.
#[track_caller]
fn finish_download(c: &mut Client) {
    c.grow_rcvbuf(1 << 20);
    let rest = c.read_exact_raw(HUGE - 1000);
    assert!(
        rest == pattern(HUGE)[1000..],
        "the rest of huge.bin differs"
    );
}

#[test]
fn request_in_flight_completes_during_the_drain() {
    let mut s = with_huge_file(|_| {});
    let mut c = start_download(&s);
    s.trigger();
    assert!(
        !s.has_stopped(),
        "run() returned while a response was in flight"
    );
    finish_download(&mut c);
    let took = s.shutdown();
    assert!(
        took < Duration::from_secs(5),
        "run() returned after {took:?}"
    );
    // The connection is closed once drained.
    c.expect_closed();
}

#[test]
fn new_connections_are_refused_after_the_trigger() {
    let mut s = with_huge_file(|_| {});
    let addr = s.addr();
    let mut inflight = start_download(&s);
    s.trigger();
    // While the drain waits for the download, the listeners go away. A connection
    // that slips in before that may only be told to go away.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        assert!(
            Instant::now() < deadline,
            "still accepting connections 5 s after the trigger"
        );
        match TcpStream::connect(addr) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
            // Completed in the queue of a listener as it closed: the kernel resets
            // those. Gone, not served; try again until the port refuses.
            Err(e) if e.kind() == ErrorKind::ConnectionReset => continue,
            Err(e) => panic!("connect: {e}"),
            Ok(stream) => {
                let mut c = Client::from_stream(stream);
                c.set_read_timeout(Duration::from_secs(2));
                if c.try_send(&get("/a.txt")).is_err() {
                    continue;
                }
                if let Ok(Some(r)) = c.try_read_response(false) {
                    assert!(r.closes(), "served normally after the trigger: {r:?}");
                }
            }
        }
    }
    finish_download(&mut inflight);
    s.shutdown();
    let err = TcpStream::connect(addr).expect_err("connected after run() returned");
    assert_eq!(err.kind(), ErrorKind::ConnectionRefused);
}

#[test]
fn idle_keepalive_connection_is_closed_at_shutdown() {
    let mut s = TestServer::with(|c| c.limits.keepalive_timeout = Duration::from_secs(60));
    let mut c = s.connect();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    let took = s.shutdown();
    assert!(
        took < Duration::from_secs(3),
        "run() returned after {took:?}"
    );
    c.set_read_timeout(Duration::from_secs(3));
    c.expect_closed();
}

#[test]
fn idle_keepalive_connection_is_closed_while_another_request_drains() {
    let mut s = with_huge_file(|c| c.limits.keepalive_timeout = Duration::from_secs(60));
    let mut idle = s.connect();
    assert_eq!(idle.get("/a.txt").body, A_TXT);
    let mut busy = start_download(&s);
    s.trigger();
    // An idle connection has nothing to finish: it should end at the start of the
    // drain, not when the last busy connection is done.
    idle.set_read_timeout(Duration::from_secs(3));
    let ended = idle.expect_closed();
    assert_eq!(ended, Closed::Eof);
    finish_download(&mut busy);
    s.shutdown();
}

#[test]
fn shutdown_without_connections_is_quick() {
    let mut s = TestServer::start();
    let mut c = s.connect();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    drop(c);
    let took = s.shutdown();
    assert!(
        took < Duration::from_secs(2),
        "run() returned after {took:?}"
    );
}

#[test]
fn grace_period_bounds_a_stalled_response() {
    let mut s = with_huge_file(|c| c.shutdown_grace = Duration::from_millis(500));
    let mut c = start_download(&s);
    let took = s.shutdown();
    assert!(
        took >= Duration::from_millis(400),
        "run() returned after {took:?}, before the grace period"
    );
    assert!(
        took < Duration::from_secs(5),
        "run() returned after {took:?}"
    );
    // The stalled response was cut off: the connection ends before all of it.
    let (got, _) = c.drain_until_closed();
    assert!(
        got < HUGE - 1000,
        "the whole response arrived after the grace"
    );
}

#[test]
fn in_flight_response_survives_a_request_sent_during_the_drain() {
    // A request sent behind a long download arrives during the drain. The server
    // may answer it (with Connection: close) or close without answering it, but the
    // download in flight must still arrive whole.
    let mut s = with_huge_file(|c| c.limits.keepalive_timeout = Duration::from_secs(60));
    let mut c = Client::connect_small_rcvbuf(s.addr(), 4096);
    c.send(&get("/huge.bin"));
    let head = c.read_head_only();
    assert_eq!(head.status, 200);
    assert_eq!(c.read_exact_raw(1000), pattern(1000));
    s.trigger();
    c.send(&get("/a.txt"));
    finish_download(&mut c);
    match c.try_read_response(false) {
        Ok(Some(r)) => {
            assert_eq!(r.body, A_TXT);
            assert!(
                r.closes(),
                "answer during the drain without Connection: close"
            );
            c.expect_closed();
        }
        // Closing without answering a request that arrived during the drain is
        // acceptable too.
        Ok(None) => {}
        Err(e) if e.kind() == ErrorKind::ConnectionReset => {}
        Err(e) => panic!("{e}"),
    }
    s.shutdown();
}
