//! The engine's reads against the kit's: a trace of what one-block-per-call
//! reads saw on a real socket, replayed through the old accounting (one
//! [`RatedReceive::block`] per call) and the new one (one
//! [`RatedReceive::read`] per burst the socket held), and the live engine's
//! [`read_response`] against the same server schedules.
//!
//! The server writes SPECweb99-sized responses on loopback in three manners:
//! all at once (a fast server: the client is paced to the line and conforms),
//! 2,920 bytes every 100 ms (slower than the line: no credit, does not
//! conform) and half, a 500 ms stall, the rest (the stall costs conformance).

use std::time::{Duration, Instant};

use stoa_web99::metrics::{BLOCK, ClassStats, RatedReceive};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{Clock, Local, read_response};
use crate::transport::Stream;

/// How the server writes one response.
#[derive(Debug, Clone, Copy)]
enum Manner {
    /// One write.
    AtOnce,
    /// `piece` bytes, then `pause`, until done.
    Trickle { piece: usize, pause: Duration },
    /// Half, `pause`, the rest.
    Stall { pause: Duration },
}

const SCHEDULE: &[(usize, Manner)] = &[
    (5_000, Manner::AtOnce),
    (60_000, Manner::AtOnce),
    (250_000, Manner::AtOnce),
    (
        14_600,
        Manner::Trickle {
            piece: 2_920,
            pause: Duration::from_millis(100),
        },
    ),
    (
        40_000,
        Manner::Stall {
            pause: Duration::from_millis(500),
        },
    ),
];

/// Calls further apart than this belong to different bursts: the server's
/// pauses are 100 ms or more, loopback delivers in microseconds.
const BURST_GAP_MS: f64 = 10.0;

/// One recorded read: when (ms since the clock's base) and how many bytes.
#[derive(Debug, Clone, Copy)]
struct Read {
    at: f64,
    len: usize,
}

/// One operation as the one-block reader saw it.
#[derive(Debug)]
struct Op {
    start: f64,
    reads: Vec<Read>,
    end: f64,
}

fn response(body: usize) -> Vec<u8> {
    let mut bytes = format!("HTTP/1.0 200 OK\r\nContent-Length: {body}\r\n\r\n").into_bytes();
    bytes.extend(std::iter::repeat_n(b'x', body));
    bytes
}

/// Serves `SCHEDULE` once, one connection per response, in order.
async fn serve(listener: TcpListener) {
    for &(body, manner) in SCHEDULE {
        let Ok((mut conn, _)) = listener.accept().await else {
            return;
        };
        let bytes = response(body);
        let written = match manner {
            Manner::AtOnce => conn.write_all(&bytes).await,
            Manner::Trickle { piece, pause } => {
                let mut result = Ok(());
                for (i, chunk) in bytes.chunks(piece).enumerate() {
                    if i > 0 {
                        tokio::time::sleep(pause).await;
                    }
                    result = conn.write_all(chunk).await;
                    if result.is_err() {
                        break;
                    }
                }
                result
            }
            Manner::Stall { pause } => {
                let (first, rest) = bytes.split_at(bytes.len() / 2);
                let mut result = conn.write_all(first).await;
                if result.is_ok() {
                    tokio::time::sleep(pause).await;
                    result = conn.write_all(rest).await;
                }
                result
            }
        };
        assert!(written.is_ok(), "the server wrote its response");
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test runtime")
}

fn clock() -> Clock {
    Clock {
        base: Instant::now(),
        run_start: Duration::ZERO,
        run_end: Duration::from_secs(60),
        end: Duration::from_secs(60),
    }
}

/// The kit's reader: at most one block per call, each call's time recorded.
fn record_trace() -> Vec<Op> {
    let clock = clock();
    runtime().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let server = tokio::spawn(serve(listener));
        let mut ops = Vec::new();
        for &(body, _) in SCHEDULE {
            let total = response(body).len();
            let start = clock.ms(Instant::now());
            let mut conn = TcpStream::connect(addr).await.expect("connect");
            let mut block = [0u8; BLOCK];
            let (mut got, mut reads) = (0, Vec::new());
            while got < total {
                let len = conn.read(&mut block).await.expect("read");
                assert!(len > 0, "the server sent the whole response");
                reads.push(Read {
                    at: clock.ms(Instant::now()),
                    len,
                });
                got += len;
            }
            let end = clock.ms(Instant::now());
            ops.push(Op { start, reads, end });
        }
        server.await.expect("server");
        ops
    })
}

/// The engine's own reads of the same schedule; (sleep, operation time) each.
fn live_engine() -> Vec<(f64, f64, u64)> {
    let clock = clock();
    runtime().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let server = tokio::spawn(serve(listener));
        let mut ops = Vec::new();
        let mut buf = Vec::new();
        let local = Local::new(1);
        for _ in SCHEDULE {
            let mut rated = RatedReceive::start(clock.ms(Instant::now()));
            let conn = TcpStream::connect(addr).await.expect("connect");
            let mut stream = Stream::Plain(conn);
            let read =
                read_response(&mut stream, &mut buf, &local.scratch, &mut rated, &clock).await;
            assert!(read.is_ok(), "the engine read the response");
            let (sleep, time) = rated.finish(clock.ms(Instant::now()));
            ops.push((sleep, time, rated.bytes()));
        }
        server.await.expect("server");
        ops
    })
}

/// The old accounting: one block per recorded call, at its own time.
fn replay_by_block(op: &Op) -> RatedReceive {
    let mut rated = RatedReceive::start(op.start);
    for r in &op.reads {
        rated.block(r.len, r.at);
    }
    rated
}

/// The recorded calls grouped into what one large read would have taken:
/// a call joins the one before it when that one got a whole block (the
/// socket may have held more) and came right after it; a short call means
/// the socket ran dry. (Time of the burst's first call, bytes, time of its
/// last call, number of calls.)
fn bursts(op: &Op) -> Vec<(f64, usize, f64, usize)> {
    let mut out: Vec<(f64, usize, f64, usize)> = Vec::new();
    let mut previous_full = false;
    for r in &op.reads {
        match out.last_mut() {
            Some((_, len, last, calls)) if previous_full && r.at - *last < BURST_GAP_MS => {
                *len += r.len;
                *last = r.at;
                *calls += 1;
            }
            _ => out.push((r.at, r.len, r.at, 1)),
        }
        previous_full = r.len == BLOCK;
    }
    out
}

/// The new accounting: one read per burst.
fn replay_by_read(op: &Op) -> RatedReceive {
    let mut rated = RatedReceive::start(op.start);
    for (at, len, _, _) in bursts(op) {
        rated.read(len, at);
    }
    rated
}

/// The old accounting with reads of bytes already there taking no time:
/// every call of a burst at the burst's first time.
fn replay_by_block_at_burst_times(op: &Op) -> RatedReceive {
    let mut rated = RatedReceive::start(op.start);
    let mut reads = op.reads.iter();
    for (first, _, _, calls) in bursts(op) {
        for call in reads.by_ref().take(calls) {
            rated.block(call.len, first);
        }
    }
    rated
}

fn conforms(time_ms: f64, bytes: u64) -> bool {
    let mut stats = ClassStats::default();
    stats.record_good(time_ms, bytes);
    stats.slow_rate == 0
}

#[test]
fn one_read_per_burst_scores_as_one_read_per_block() {
    let trace = record_trace();
    let mut expected = Vec::new();
    for (op, &(body, manner)) in trace.iter().zip(SCHEDULE) {
        let old = replay_by_block(op);
        let new = replay_by_read(op);
        let (old_sleep, old_time) = old.finish(op.end);
        let (new_sleep, new_time) = new.finish(op.end);
        assert_eq!(old.bytes(), new.bytes());
        // The old reader's own calls inside a burst (a few µs each) stamped
        // its blocks a little later than the burst's first call; an
        // operation's time is the sum over its blocks of the longer of the
        // block's line time and the gap before it, so it moves by at most
        // twice the sum of those offsets. Nothing else differs.
        let drift: f64 = bursts(op)
            .iter()
            .map(|(first, _, last, _)| last - first)
            .sum();
        assert!(
            (old_time - new_time).abs() <= 2.0 * drift + 1e-9,
            "{body} B {manner:?}: old {old_time} ms, new {new_time} ms, drift {drift} ms"
        );
        assert!((old_sleep - new_sleep).abs() <= 2.0 * drift + 1e-9);
        assert_eq!(
            conforms(old_time, old.bytes()),
            conforms(new_time, new.bytes()),
            "{body} B {manner:?}: the same verdict"
        );
        // With the old reader's calls for bytes already there taking no
        // time, the two accountings are the same arithmetic on the same
        // blocks: identical to the last bit.
        assert_eq!(
            replay_by_block_at_burst_times(op),
            new,
            "{body} B {manner:?}: one read per burst is one block per call, \
             the calls taking no time"
        );
        expected.push((conforms(new_time, new.bytes()), new_time));
    }
    let verdicts: Vec<bool> = expected.iter().map(|e| e.0).collect();
    assert_eq!(
        verdicts,
        [true, true, true, false, false],
        "the schedule exercises both verdicts: {expected:?}"
    );

    // The engine itself on the same schedule: the same verdicts, and
    // operation times within the noise of two live runs (5 %, or 5 ms of
    // scheduling on a loaded machine).
    let live = live_engine();
    for ((sleep, time, bytes), (&(body, manner), (verdict, replayed))) in
        live.iter().zip(SCHEDULE.iter().zip(&expected))
    {
        assert_eq!(bytes, &(response(body).len() as u64));
        assert_eq!(
            conforms(*time, *bytes),
            *verdict,
            "{body} B {manner:?}: live {time} ms (slept {sleep}), replayed {replayed} ms"
        );
        assert!(
            (time - replayed).abs() < (0.05 * replayed).max(5.0),
            "{body} B {manner:?}: live {time} ms, replayed {replayed} ms"
        );
    }
}
