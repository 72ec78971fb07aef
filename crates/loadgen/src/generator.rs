//! One load generator: one emulated user on one connection at a time, sending the
//! deck's requests back to back and pacing each to the 400 kbit/s line.

use std::cell::RefCell;
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use std::pin::Pin;
use std::task::Poll;
use stoa_web99::metrics::{CONFORM_BYTES_PER_SEC, GeneratorStats, RatedReceive};

use stoa_http_proto::request::header_storage;
use stoa_http_proto::{Method, ResponseLimits, Status, parse_response};
use stoa_web99::workload::{self, Dealer, Entry, RequestType, SpecRng};
use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};

use crate::check::{self, Expect};
use crate::transport::{ConnectError, Connector, Handshake, Stream};
use crate::{Live, Plan, Tally};

/// Longest wait for any one response.
const OP_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response head accepted.
const MAX_HEAD: usize = 16 * 1024;
/// The limits response heads are read with: [`MAX_HEAD`] for the head and any line
/// in it, and as many fields as the checks ever look through.
const HEAD_LIMITS: ResponseLimits = ResponseLimits {
    max_status_line: MAX_HEAD,
    max_header_line: MAX_HEAD,
    max_head: MAX_HEAD,
    max_headers: 64,
};
/// Most bytes taken from the socket in one read. Whatever one read returns is
/// accounted as the kit's one-MSS blocks ([`RatedReceive::read`]), so the size
/// only sets how many system calls a response costs the harness: a 64 KiB read
/// drains what loopback delivers in one segment.
const READ_CHUNK: usize = 64 * 1024;
/// Bytes of a body a generator keeps for its checks; the rest is counted and
/// dropped. The kit's checks read only a body's start (the dynamic wrapper,
/// the file's header line) and its length, so a generator's memory stays a
/// few KiB whatever the class-3 file it last fetched.
pub(crate) const KEEP_BODY: usize = 16 * 1024;

/// What the generators of one load thread share: their decks' tables and
/// the buffer every read lands in (a generator copies out what it keeps;
/// one thread runs one generator's read at a time).
pub(crate) struct Local {
    pub(crate) dealer: Dealer,
    scratch: std::cell::RefCell<Vec<u8>>,
}

impl Local {
    /// For a file set of `directories` directories.
    pub(crate) fn new(directories: u32) -> Local {
        Local {
            dealer: Dealer::new(directories),
            scratch: std::cell::RefCell::new(vec![0; READ_CHUNK]),
        }
    }
}

/// Times of one run, relative to its start.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    pub(crate) base: Instant,
    pub(crate) run_start: Duration,
    pub(crate) run_end: Duration,
    pub(crate) end: Duration,
}

impl Clock {
    fn ms(&self, t: Instant) -> f64 {
        t.duration_since(self.base).as_secs_f64() * 1000.0
    }
}

/// Runs generator `index` until the end of the run; returns its counters. The
/// shard collects what the generators of one load thread share.
pub(crate) async fn run(
    plan: &Plan,
    index: u32,
    clock: Clock,
    shard: &RefCell<Tally>,
    live: &Live,
    connector: &Connector,
    local: &Local,
) -> GeneratorStats {
    let mut g = Generator::new(plan, index, shard, live, connector, local);
    while clock.base.elapsed() < clock.end && !live.stopped() {
        let entry = g.next_entry();
        if g.operation(entry, &clock).await == Step::Abandoned {
            break;
        }
    }
    g.stats
}

struct Generator<'p> {
    plan: &'p Plan,
    shard: &'p RefCell<Tally>,
    live: &'p Live,
    connector: &'p Connector,
    /// The load thread's decks and read buffer.
    local: &'p Local,
    tls_rng: fastrand::Rng,
    user_id: u32,
    rng: SpecRng,
    deck: Vec<Entry>,
    next: usize,
    conn: Option<Stream>,
    /// The HTTP/2 connection, in place of `conn`, with `--http 2`.
    h2: Option<http2::Session>,
    /// Requests still to send on `conn`.
    left_on_conn: u32,
    /// `conn` carries more than one request: every request on it says so, the
    /// last one too (HTTP/1.0 `Connection: Keep-Alive`), and the client, not
    /// the server, closes it after the last answer.
    keep_alive: bool,
    last_ad: u32,
    stats: GeneratorStats,
    /// Has a measured operation (counted in `Live::measured`).
    measured: bool,
    /// Counted in `Live::conforming`.
    conforming: bool,
    buf: Vec<u8>,
    request: Vec<u8>,
}

/// How an operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Finished (well or not) and tallied.
    Done,
    /// Still running when the ramp-down ended: it could not be counted
    /// anyway, and a class-3 file at 400 kbit/s would hold the run open for
    /// seconds more.
    Abandoned,
}

/// A complete response; its head and the first [`KEEP_BODY`] bytes of its
/// body are in the generator's buffer.
struct Response {
    status: u16,
    body_start: usize,
    body_len: usize,
    close: bool,
}

impl<'p> Generator<'p> {
    /// Generator `index` of `plan`'s client: the kit's seed and user id.
    fn new(
        plan: &'p Plan,
        index: u32,
        shard: &'p RefCell<Tally>,
        live: &'p Live,
        connector: &'p Connector,
        local: &'p Local,
    ) -> Generator<'p> {
        let seed = crate::generator_seed(plan.client, index);
        let user_id = 10_000 + plan.first_user + index;
        Generator {
            plan,
            shard,
            live,
            connector,
            local,
            // Its own stream, so that TLS choices leave the workload's untouched.
            tls_rng: fastrand::Rng::with_seed(seed as u64),
            user_id,
            rng: SpecRng::new(seed),
            deck: Vec::new(),
            next: 0,
            conn: None,
            h2: None,
            left_on_conn: 0,
            keep_alive: false,
            last_ad: (user_id - 10_000) % stoa_web99::ads::ADS,
            stats: GeneratorStats::default(),
            measured: false,
            conforming: false,
            buf: Vec::with_capacity(MAX_HEAD + KEEP_BODY),
            request: Vec::with_capacity(512),
        }
    }

    fn next_entry(&mut self) -> Entry {
        if self.next >= self.deck.len() {
            self.local
                .dealer
                .deal(self.plan.deck_size, &mut self.rng, &mut self.deck);
            self.next = 0;
        }
        let mut entry = self.deck[self.next];
        self.next += 1;
        if self.plan.static_only {
            entry.kind = RequestType::Static;
        }
        entry
    }

    /// One operation: (re)connect if needed, send, receive paced, check, sleep.
    /// One timer covers both the operation's timeout and the end of the run,
    /// a second one the pacing sleep.
    async fn operation(&mut self, entry: Entry, clock: &Clock) -> Step {
        let started = Instant::now();
        let end = clock.base + clock.end;
        let timeout = started + OP_TIMEOUT;
        let mut rated = RatedReceive::start(clock.ms(started));
        if entry.kind == RequestType::Post {
            // Every POST sent, in any phase: the Reset before the warm-up empties
            // post.log, and the audit compares the log with these (§7.3).
            let class = usize::from(entry.file.class);
            self.shard.borrow_mut().posts[class] += 1;
            self.stats.classes[class].post += 1;
        }
        let deadline = tokio::time::Instant::from_std(timeout.min(end));
        let result =
            tokio::time::timeout_at(deadline, self.exchange(entry, &mut rated, clock)).await;
        let outcome = match result {
            Ok(Ok(resp)) => self.judge(entry, &resp),
            Ok(Err(e)) => Err(e),
            Err(_) if end <= timeout => {
                self.drop_conn();
                return Step::Abandoned;
            }
            Err(_) => Err("timeout"),
        };
        if outcome.is_err() {
            self.drop_conn();
        }
        let now = Instant::now();
        let (sleep, op_ms) = rated.finish(clock.ms(now));
        if sleep > 0.0 && !self.plan.closed_loop {
            let wake = now + Duration::from_secs_f64(sleep / 1000.0);
            if wake > end {
                return Step::Abandoned;
            }
            tokio::time::sleep_until(tokio::time::Instant::from_std(wake)).await;
        }
        let finished = Instant::now();
        self.live.ops.fetch_add(1, Ordering::Relaxed);
        let counts = self.counts(clock, started, finished);
        let mut shard = self.shard.borrow_mut();
        shard.timeline_op(finished.duration_since(clock.base));
        if !counts {
            return Step::Done;
        }
        let stats = &mut self.stats.classes[usize::from(entry.file.class)];
        match outcome {
            Ok(()) => {
                stats.record_good(op_ms, rated.bytes());
                shard.latency.record_ms(op_ms);
            }
            Err(kind) => {
                stats.record_bad();
                *shard.errors.entry(kind.to_owned()).or_default() += 1;
            }
        }
        drop(shard);
        self.update_live();
        Step::Done
    }

    /// Keeps `Live`'s measured and conforming counts in step with this generator.
    fn update_live(&mut self) {
        if !self.measured {
            self.measured = true;
            self.live.measured.fetch_add(1, Ordering::Relaxed);
        }
        let conforming = self.stats.byte_rate() >= CONFORM_BYTES_PER_SEC;
        if conforming != self.conforming {
            self.conforming = conforming;
            if conforming {
                self.live.conforming.fetch_add(1, Ordering::Relaxed);
            } else {
                self.live.conforming.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Counted only when both ends of the operation fall in the run phase.
    fn counts(&self, clock: &Clock, started: Instant, finished: Instant) -> bool {
        let (s, f) = (
            started.duration_since(clock.base),
            finished.duration_since(clock.base),
        );
        s >= clock.run_start && f <= clock.run_end
    }

    async fn exchange(
        &mut self,
        entry: Entry,
        rated: &mut RatedReceive,
        clock: &Clock,
    ) -> Result<Response, &'static str> {
        let reused = self.conn.is_some() || self.h2.is_some();
        match self.try_exchange(entry, rated, clock).await {
            Err(Reuse::ClosedBeforeAnswer) if reused => {
                // "server closed Keep-Alive connection, opening a new one"
                self.drop_conn();
                self.try_exchange(entry, rated, clock)
                    .await
                    .map_err(Reuse::kind)
            }
            other => other.map_err(Reuse::kind),
        }
    }

    /// Forgets the connection (it closes when dropped).
    fn drop_conn(&mut self) {
        self.conn = None;
        self.h2 = None;
    }

    /// A new connection, its TLS handshake counted, and the number of requests
    /// the kit's keep-alive pattern gives it.
    async fn connect(&mut self) -> Result<Stream, Reuse> {
        let (stream, handshake) = self
            .connector
            .connect(self.plan.addr, &mut self.tls_rng)
            .await
            .map_err(|e| {
                Reuse::Failed(match e {
                    ConnectError::Tcp(_) => "connect",
                    ConnectError::Tls(_) => "TLS handshake",
                })
            })?;
        match handshake {
            Handshake::None => {}
            Handshake::Full => self.shard.borrow_mut().handshakes[0] += 1,
            Handshake::Resumed => self.shard.borrow_mut().handshakes[1] += 1,
        }
        self.left_on_conn = if self.plan.closed_loop {
            u32::MAX
        } else {
            workload::requests_for_connection(&mut self.rng)
        };
        self.keep_alive = self.left_on_conn > 1;
        Ok(stream)
    }

    async fn try_exchange(
        &mut self,
        entry: Entry,
        rated: &mut RatedReceive,
        clock: &Clock,
    ) -> Result<Response, Reuse> {
        if self.connector.http2() {
            return self.try_exchange_h2(entry, rated, clock).await;
        }
        if self.conn.is_none() {
            let stream = self.connect().await?;
            self.conn = Some(stream);
        }
        self.format_request(entry);
        let stream = self.conn.as_mut().ok_or(Reuse::Failed("connect"))?;
        stream
            .write_all(&self.request)
            .await
            .map_err(|_| Reuse::ClosedBeforeAnswer)?;
        // TLS holds the record until flushed; plain TCP has nothing to flush.
        stream
            .flush()
            .await
            .map_err(|_| Reuse::ClosedBeforeAnswer)?;
        let resp = read_response(stream, &mut self.buf, &self.local.scratch, rated, clock).await?;
        self.left_on_conn = self.left_on_conn.saturating_sub(1);
        if self.left_on_conn == 0 || resp.close {
            self.conn = None;
        }
        Ok(resp)
    }

    /// [`Generator::try_exchange`] over HTTP/2 ([`http2`]).
    async fn try_exchange_h2(
        &mut self,
        entry: Entry,
        rated: &mut RatedReceive,
        clock: &Clock,
    ) -> Result<Response, Reuse> {
        if self.h2.is_none() {
            let stream = self.connect().await?;
            self.h2 = Some(http2::Session::start(stream).await?);
        }
        self.format_request(entry);
        let session = self.h2.as_mut().ok_or(Reuse::Failed("connect"))?;
        let resp = http2::exchange(session, &self.request, &mut self.buf, rated, clock).await?;
        self.left_on_conn = self.left_on_conn.saturating_sub(1);
        if self.left_on_conn == 0 {
            self.h2 = None;
        }
        Ok(resp)
    }

    /// The kit's request for `entry`, into `self.request`.
    fn format_request(&mut self, entry: Entry) {
        self.request.clear();
        workload::format_request(
            &entry,
            &self.plan.targets,
            self.keep_alive,
            self.user_id,
            self.last_ad,
            &mut self.request,
        );
    }

    fn judge(&mut self, entry: Entry, resp: &Response) -> Result<(), &'static str> {
        if resp.status != 200 {
            return Err("status not 200");
        }
        let mut storage = header_storage();
        let head = match parse_response(&self.buf, &mut storage, &HEAD_LIMITS, Method::Get) {
            Ok(Status::Complete(head)) => head,
            _ => return Err("bad response head"),
        };
        let expect = Expect {
            kind: entry.kind,
            file: entry.file,
            user_id: self.user_id,
            expired: self.plan.expired,
            headers: head.headers,
        };
        let found = check::check_prefix(&expect, &self.buf[resp.body_start..], resp.body_len)?;
        if let Some(ad) = found {
            self.last_ad = ad;
        }
        Ok(())
    }
}

/// Why an exchange failed, and whether a fresh connection may be tried.
enum Reuse {
    /// The connection was gone before any answer: retry on a new one.
    ClosedBeforeAnswer,
    Failed(&'static str),
}

impl Reuse {
    fn kind(self) -> &'static str {
        match self {
            Reuse::ClosedBeforeAnswer => "connection closed",
            Reuse::Failed(kind) => kind,
        }
    }
}

/// Reads one response: each read takes what the socket holds (at most
/// [`READ_CHUNK`], and never past the response once its length is known)
/// into the thread's `scratch`, is credited to the rated receive as the kit's
/// blocks, and leaves its first bytes in `data`: the head and the first
/// [`KEEP_BODY`] bytes of the body. Once those are in, plain TCP reads are
/// counted without being copied ([`Stream::poll_discard`]).
async fn read_response(
    stream: &mut Stream,
    data: &mut Vec<u8>,
    scratch: &std::cell::RefCell<Vec<u8>>,
    rated: &mut RatedReceive,
    clock: &Clock,
) -> Result<Response, Reuse> {
    data.clear();
    let mut framing: Option<(u16, usize, usize, bool)> = None; // status, body start, total, close
    let mut received = 0;
    loop {
        let want = match framing {
            Some((_, _, total, _)) if received >= total => break,
            Some((_, _, total, _)) => (total - received).min(READ_CHUNK),
            None => READ_CHUNK,
        };
        let keep = match framing {
            Some((_, body_start, _, _)) => body_start + KEEP_BODY,
            None => MAX_HEAD + KEEP_BODY,
        };
        let read = std::future::poll_fn(|cx| {
            let mut scratch = scratch.borrow_mut();
            if data.len() >= keep {
                return stream.poll_discard(cx, &mut scratch[..want]);
            }
            let mut buf = ReadBuf::new(&mut scratch[..want]);
            match Pin::new(&mut *stream).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) => {
                    let got = buf.filled();
                    let room = keep.saturating_sub(data.len()).min(got.len());
                    data.extend_from_slice(&got[..room]);
                    Poll::Ready(Ok(got.len()))
                }
                Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            }
        })
        .await;
        let n = match read {
            Ok(0) if received == 0 => return Err(Reuse::ClosedBeforeAnswer),
            Ok(0) => return Err(Reuse::Failed("connection closed")),
            Ok(n) => n,
            Err(e) if received == 0 && is_reset(&e) => return Err(Reuse::ClosedBeforeAnswer),
            Err(_) => return Err(Reuse::Failed("read error")),
        };
        received += n;
        rated.read(n, clock.ms(Instant::now()));
        if framing.is_none() {
            framing = head_framing(data)?;
        }
    }
    let (status, body_start, total, close) = framing.ok_or(Reuse::Failed("bad response head"))?;
    if received > total {
        return Err(Reuse::Failed("extra bytes after the response"));
    }
    Ok(Response {
        status,
        body_start,
        body_len: total - body_start,
        close,
    })
}

fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset
            | io::ErrorKind::BrokenPipe
            // A TLS peer that closed without close_notify.
            | io::ErrorKind::UnexpectedEof
    )
}

/// Once the head is complete: status, where the body starts, the response's total
/// length (from `Content-Length`, which SPECweb99 requires), and whether the server
/// closes the connection after it.
fn head_framing(data: &[u8]) -> Result<Option<(u16, usize, usize, bool)>, Reuse> {
    let mut storage = header_storage();
    let head = match parse_response(data, &mut storage, &HEAD_LIMITS, Method::Get) {
        Ok(Status::Complete(head)) => head,
        Ok(Status::Partial) => return Ok(None),
        Err(_) => return Err(Reuse::Failed("bad response head")),
    };
    let length = head
        .content_length
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(Reuse::Failed("no Content-Length"))?;
    let total = head
        .len
        .checked_add(length)
        .ok_or(Reuse::Failed("no Content-Length"))?;
    Ok(Some((head.status, head.len, total, !head.keep_alive)))
}

mod http2;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fidelity;
