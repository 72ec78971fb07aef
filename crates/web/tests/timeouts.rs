//! Timeouts over real sockets, with short configured values: keep-alive idle,
//! partial heads (408), slowloris trickles, the head-time cap, and clients that
//! stop reading (send timeout).

mod common;

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use stoa_testkit::http::{Client, Closed, get};

use common::{A_TXT, B_TXT, TestServer};
use stoa_web::Config;

fn short(c: &mut Config) {
    c.limits.head_timeout = Duration::from_millis(300);
    c.limits.head_timeout_max = Duration::from_secs(1);
    c.limits.keepalive_timeout = Duration::from_millis(300);
    c.limits.send_timeout = Duration::from_millis(500);
}

#[test]
fn idle_kept_alive_connection_is_closed_after_the_keepalive_timeout() {
    let s = TestServer::with(short);
    let mut c = s.connect();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    let idle = Instant::now();
    assert_eq!(c.expect_closed(), Closed::Eof, "an idle close is orderly");
    let waited = idle.elapsed();
    assert!(
        waited >= Duration::from_millis(200),
        "closed after {waited:?}: before the keep-alive timeout"
    );
    assert!(waited < Duration::from_secs(5), "closed after {waited:?}");
}

#[test]
fn keepalive_timeout_restarts_after_each_request() {
    let s = TestServer::with(|c| {
        short(c);
        c.limits.keepalive_timeout = Duration::from_millis(600);
    });
    let mut c = s.connect();
    let start = Instant::now();
    // Four requests 200 ms apart: the connection lives past one timeout because
    // each request restarts it.
    for _ in 0..4 {
        assert_eq!(c.get("/a.txt").body, A_TXT);
        stoa_testkit::pause(Duration::from_millis(200));
    }
    assert!(start.elapsed() > Duration::from_millis(600));
    assert_eq!(c.get("/b.txt").body, B_TXT);
}

#[test]
fn connection_that_sends_nothing_is_closed_without_an_answer() {
    let s = TestServer::with(short);
    let mut c = s.connect();
    let start = Instant::now();
    c.expect_closed();
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_silent_connection_waits_in_the_kernel_before_its_head_timeout_starts() {
    // TCP_DEFER_ACCEPT (on by default): the server is not handed a connection
    // that has sent nothing, so it outlives the 300 ms head timeout; once the
    // kernel hands it over (the client answered a retransmitted SYN-ACK, about
    // a second in), the head timeout applies and it is closed.
    let s = TestServer::with(short);
    let mut c = s.connect();
    let start = Instant::now();
    c.expect_open_and_silent(Duration::from_millis(700));
    c.set_read_timeout(Duration::from_secs(6));
    c.expect_closed();
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn without_defer_accept_a_silent_connection_has_its_head_timeout_from_the_handshake() {
    let s = TestServer::with(|c| {
        short(c);
        c.defer_accept = false;
    });
    let mut c = s.connect();
    let start = Instant::now();
    c.expect_closed();
    let took = start.elapsed();
    // Deferred, it could not close before the SYN-ACK retransmission at 1 s.
    assert!(took < Duration::from_secs(1), "closed after {took:?}");
}

#[test]
fn partial_head_gets_408_then_close() {
    let s = TestServer::with(short);
    let mut c = s.connect();
    c.send(b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Unfinished: ");
    let start = Instant::now();
    let r = c.response();
    assert_eq!(r.status, 408);
    assert!(r.closes());
    c.expect_closed();
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn partial_head_after_a_kept_alive_request_gets_408() {
    let s = TestServer::with(short);
    let mut c = s.connect();
    c.send(&[&get("/a.txt")[..], b"GET /b.txt HTTP/1.1\r\n"].concat());
    assert_eq!(c.response().body, A_TXT);
    let r = c.response();
    assert_eq!(r.status, 408);
    c.expect_closed();
}

/// Writes `next()` every `every` until it returns `None`, a write fails, or `stop`
/// is set.
fn trickle(
    c: &Client,
    every: Duration,
    stop: Arc<AtomicBool>,
    mut next: impl FnMut(usize) -> Option<Vec<u8>> + Send + 'static,
) -> JoinHandle<()> {
    let mut w = c.writer();
    std::thread::spawn(move || {
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let Some(bytes) = next(i) else { return };
            if w.write_all(&bytes).is_err() {
                return;
            }
            i += 1;
            stoa_testkit::pause(every);
        }
    })
}

#[test]
fn slowloris_trickle_is_cut_off_while_others_are_served() {
    let s = TestServer::with(short);
    let mut slow = s.connect();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let head = b"GET /a.txt HTTP/1.1\r\nHost: t\r\nX-Slow: ".to_vec();
    let t = trickle(&slow, Duration::from_millis(100), stop.clone(), move |i| {
        // One byte per 100 ms, for at most 10 s.
        (i < 100).then(|| vec![*head.get(i).unwrap_or(&b'x')])
    });
    // Meanwhile another client is served at once.
    let mut other = s.connect();
    assert_eq!(other.get("/b.txt").body, B_TXT);
    let r = slow.response();
    assert_eq!(r.status, 408);
    slow.expect_closed();
    stop.store(true, Ordering::Relaxed);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(3), "cut off after {took:?}");
    t.join().expect("trickle thread");
    let mut third = s.connect();
    assert_eq!(third.get("/a.txt").body, A_TXT);
}

#[test]
fn faster_trickle_is_cut_off_at_the_head_time_cap() {
    // 50 bytes every 25 ms (2 KB/s) earns 1 s per 500 bytes: without the cap the head
    // would be allowed ever more time. With it, the head must end by 1 s.
    let s = TestServer::with(short);
    let mut slow = s.connect();
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let t = trickle(&slow, Duration::from_millis(25), stop.clone(), |i| {
        let piece = if i == 0 {
            // 600 bytes at once: the first extension is earned immediately, so the
            // head may last the full second.
            let mut first = b"GET /a.txt HTTP/1.1\r\nHost: t\r\n".to_vec();
            for j in 0..10 {
                first.extend_from_slice(format!("X-First-{j}: {}\r\n", "f".repeat(45)).as_bytes());
            }
            first
        } else {
            format!("X-{i:05}: {}\r\n", "p".repeat(39)).into_bytes()
        };
        (i < 400).then_some(piece)
    });
    let r = slow.response();
    let took = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    assert_eq!(r.status, 408);
    slow.expect_closed();
    t.join().expect("trickle thread");
    assert!(
        took >= Duration::from_millis(800),
        "cut off after {took:?}: the per-500-byte extension was not granted"
    );
    assert!(took < Duration::from_secs(3), "cut off after {took:?}");
}

#[test]
fn client_that_never_reads_is_cut_off_by_the_send_timeout() {
    let s = TestServer::with(short);
    let c = s.connect();
    // 10,000 requests for a 100 KiB file per batch.
    let batch = get("/100k.bin").repeat(10_000);
    let start = Instant::now();
    // Keeps sending requests without reading a byte; the server's answers pile up
    // until its send buffer is full. Once the server gives up and closes, the
    // unread requests make its kernel reset the connection, and our writes fail.
    let writer = {
        let mut w = c.writer();
        w.set_write_timeout(Some(Duration::from_millis(200)))
            .expect("write timeout");
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(15);
            let mut sent = 0usize;
            while Instant::now() < deadline {
                match w.write(&batch) {
                    Ok(n) => sent += n,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Some((e.kind(), sent)),
                }
            }
            None
        })
    };
    // The server keeps serving others while that connection is stuck.
    let mut other = s.connect();
    assert_eq!(other.get("/a.txt").body, A_TXT);
    let ended = writer.join().expect("writer thread");
    let took = start.elapsed();
    let Some((kind, sent)) = ended else {
        panic!("the server never cut off a client that does not read");
    };
    assert!(
        matches!(
            kind,
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        ),
        "{kind:?} after {sent} bytes"
    );
    assert!(took < Duration::from_secs(8), "cut off after {took:?}");
    drop(c);
    let mut after = s.connect();
    assert_eq!(after.get("/b.txt").body, B_TXT);
}
