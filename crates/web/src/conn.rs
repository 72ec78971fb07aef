//! One connection: the read → parse → respond → write loop, keep-alive, pipelining,
//! timeouts and lingering close.
//!
//! [`Conn`] owns the socket and both buffers; handlers only see a parsed request head
//! and append to the [`Output`]. The loop in [`Conn::run`]:
//!
//! 1. parses every complete request in the read buffer and queues its response,
//!    up to [`Limits::max_pipeline`] at a time (bounded look-ahead);
//! 2. writes the whole batch, memory parts in one `sendmsg`, files with `sendfile`;
//! 3. logs each response once its bytes are out (or the connection died);
//! 4. reads more only when no complete request is left.
//!
//! An idle kept-alive connection gives its buffers back to the worker's pool, so it
//! costs little more than its socket while it waits.
//!
//! An HTTPS connection runs the same loop with a [`tls::Session`]: reads decrypt
//! through it and [`Conn::flush`] hands the batch to [`tls::flush`]; everything
//! else (parsing, answering, deadlines, logging) is shared. The plain path pays one
//! branch per read and per flush.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustix::net::{SendAncillaryBuffer, SendFlags};
use stoa_http_proto::chunked::ChunkedDecoder;
use stoa_http_proto::request::header_storage;
use stoa_http_proto::{BodyKind, Method, RequestHead, Status, parse_request};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use crate::access_log;
use crate::cgi::{self, Cgi};
use crate::config::Limits;
use crate::local::{self, Local};
use crate::output::{MAX_SENDFILE_CHUNK, Output};
use crate::response::Reply;
use crate::server::Shared;
use crate::static_files;
use crate::tls;
use crate::web99::{self, Web99};

/// Where a connection stands when its task starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    pub(crate) peer: SocketAddr,
    /// Requests answered before (non-zero for a connection woken from parking).
    pub(crate) served: u32,
    pub(crate) born: Instant,
}

impl Origin {
    /// A connection just accepted.
    pub(crate) fn accepted(peer: SocketAddr) -> Origin {
        Origin {
            peer,
            served: 0,
            born: Instant::now(),
        }
    }
}

/// Serves a connection until it closes or parks; `tls` for an HTTPS connection
/// whose handshake is done.
pub(crate) async fn serve(
    stream: TcpStream,
    origin: Origin,
    shared: Arc<Shared>,
    permit: OwnedSemaphorePermit,
    tls: Option<Box<tls::Session>>,
) {
    // Over TLS the handshake was the start of the first head's time.
    let head_started = match tls {
        Some(_) => origin.born,
        None => Instant::now(),
    };
    let mut conn = Conn {
        stream,
        nodelay: tls.is_some(),
        tls,
        peer: origin.peer,
        shared,
        buf: Vec::new(),
        pos: 0,
        out: Output::default(),
        served: origin.served,
        born: origin.born,
        head_started,
        busy: false,
        discard: None,
        fresh: true,
        last_batch: false,
        corked: false,
        continue_sent: false,
        pending: None,
    };
    let exit = conn.run().await;
    conn.set_busy(false);
    conn.release_buffers();
    if let Some(tls) = &mut conn.tls {
        tls.close(&conn.stream);
    }
    if let Exit::Park(deadline) = exit {
        park(conn, permit, deadline);
    }
}

/// Moves an idle connection from its task to the worker's [`crate::idle::IdleSet`].
fn park(conn: Conn, permit: OwnedSemaphorePermit, deadline: Instant) {
    let Conn {
        stream,
        peer,
        shared,
        served,
        born,
        ..
    } = conn;
    if shared.draining.load(Ordering::Relaxed) {
        // Shutting down: an idle connection just closes.
        return;
    }
    match stream.into_std() {
        Ok(stream) => local::with(&shared, |l| {
            if let Some(idle) = &mut l.idle {
                let parked = crate::idle::Parked {
                    stream,
                    peer,
                    served,
                    born,
                    permit,
                };
                idle.park(parked, deadline);
            }
        }),
        Err(e) => tracing::debug!("{peer}: cannot park: {e}"),
    }
}

/// How a connection task ends.
#[derive(Debug)]
enum Exit {
    /// The connection is closed (or about to be, when the socket drops).
    Close,
    /// Idle past [`crate::idle::PARK_AFTER`]: hand the socket to the idle set until
    /// this deadline.
    Park(Instant),
}

/// A request body being read and thrown away.
#[derive(Debug)]
struct Discard {
    framing: Framing,
    started: Instant,
    seen: u64,
}

#[derive(Debug)]
enum Framing {
    Length(u64),
    Chunked(ChunkedDecoder),
}

/// What the connection needs after processing its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Read more: the next head (or part of it).
    NeedHead,
    /// Read more of a body being discarded.
    NeedBody,
    /// Write the queued batch, then process the rest of the buffer.
    Flush,
    /// Write the queued batch, then close (after lingering if input may be unread).
    Close { linger: bool },
    /// Write the queued batch, wait for the dynamic API's state thread, queue its
    /// answer; then go on, or close.
    Wait { close: bool },
}

/// How a read ended when it brought no bytes.
#[derive(Debug)]
enum ReadEnd {
    /// The peer closed its side.
    Eof,
    /// The deadline for this phase passed.
    Timeout,
    /// The server is draining; close without another request.
    Draining,
    /// Idle long enough to park; the connection's idle deadline.
    Park(Instant),
    /// A socket error.
    Failed(io::Error),
}

struct Conn {
    stream: TcpStream,
    /// The TLS state of an HTTPS connection.
    tls: Option<Box<tls::Session>>,
    peer: SocketAddr,
    shared: Arc<Shared>,
    /// Read buffer; `buf[pos..]` is unprocessed input. Empty and unallocated while
    /// idle.
    buf: Vec<u8>,
    pos: usize,
    out: Output,
    /// Requests answered so far.
    served: u32,
    born: Instant,
    /// When the first byte of the current head arrived (accept time for the first).
    head_started: Instant,
    /// Counted in the server's in-flight total (for draining).
    busy: bool,
    discard: Option<Discard>,
    /// No readiness has been learned from epoll yet: the first read and write are
    /// tried directly instead of waiting for an event (the request usually arrived
    /// with the connection, and a new socket can always take a small response).
    fresh: bool,
    /// `TCP_NODELAY` is set (only once the connection is kept alive: a single
    /// response in one write never waits for Nagle).
    nodelay: bool,
    /// The batch being written is the connection's last: it is corked (`MSG_MORE`,
    /// `TCP_CORK` before a file) so the data leaves with the FIN of the close in as
    /// few packets as possible, as nginx's `tcp_nopush` does.
    last_batch: bool,
    /// `TCP_CORK` is on.
    corked: bool,
    /// `100 Continue` was sent for the request whose body is being gathered.
    continue_sent: bool,
    /// A dynamic request waiting for the web99 state thread or a CGI script.
    pending: Option<Waiting>,
}

impl Conn {
    async fn run(&mut self) -> Exit {
        loop {
            let step = self.process();
            if !self.out.is_done() {
                self.last_batch = matches!(step, Step::Close { .. });
                let flushed = self.flush().await;
                self.log_batch();
                if let Err(e) = flushed {
                    tracing::debug!("{}: write failed: {e}", self.peer);
                    return Exit::Close;
                }
                if !self.nodelay && !matches!(step, Step::Close { .. }) {
                    // Kept alive: pipelined answers and file tails must not wait
                    // for the peer's delayed ACK.
                    self.nodelay = true;
                    let _ = self.stream.set_nodelay(true);
                }
            }
            match step {
                Step::Flush => continue,
                Step::Wait { close } => {
                    match self.pending.take() {
                        Some(Waiting::Web99(p)) => {
                            web99::finish(p, &mut self.out, &self.shared).await
                        }
                        Some(Waiting::Cgi(p)) => cgi::run(p, &mut self.out, &self.shared).await,
                        None => {}
                    }
                    if close {
                        self.last_batch = true;
                        let flushed = self.flush().await;
                        self.log_batch();
                        if flushed.is_ok() && self.input_pending() {
                            self.linger().await;
                        }
                        return Exit::Close;
                    }
                    continue;
                }
                Step::Close { linger } => {
                    if linger || self.input_pending() {
                        self.linger().await;
                    }
                    return Exit::Close;
                }
                Step::NeedHead | Step::NeedBody => {}
            }
            match self.read(step).await {
                Ok(()) => {}
                Err(ReadEnd::Park(deadline)) => return Exit::Park(deadline),
                Err(ReadEnd::Timeout) if self.has_partial_head(step) => {
                    self.answer_and_close(408).await;
                    return Exit::Close;
                }
                Err(ReadEnd::Eof) if self.has_partial_head(step) => {
                    // The client gave up mid-head: log it, there is no one to answer.
                    self.reject(400);
                    self.log_batch();
                    return Exit::Close;
                }
                Err(ReadEnd::Failed(e)) => {
                    tracing::debug!("{}: read failed: {e}", self.peer);
                    return Exit::Close;
                }
                Err(ReadEnd::Draining) => {
                    // A request came in as the server began to drain: it goes
                    // unanswered, but it must be read, or closing would reset the
                    // connection and destroy the last response still in flight.
                    self.linger().await;
                    return Exit::Close;
                }
                Err(ReadEnd::Timeout | ReadEnd::Eof) => return Exit::Close,
            }
        }
    }

    /// Whether the client may have sent bytes we have not read. Closing a socket
    /// with unread input makes the kernel send a reset, which destroys responses
    /// still in the send buffer (RFC 9112 §9.6); such connections linger instead.
    ///
    /// Bytes left in our buffer say yes. Otherwise a kept-alive connection (the
    /// client may be pipelining) costs one non-blocking `recv` to find out; a
    /// connection closing after its first request, the common `Connection: close`
    /// case, is taken at its word, as nginx does.
    fn input_pending(&mut self) -> bool {
        if self.pos < self.buf.len() {
            return true;
        }
        if self.served <= 1 {
            return false;
        }
        if self.tls.as_mut().is_some_and(|t| t.buffered()) {
            return true;
        }
        // Over TLS too: the raw bytes are thrown away, the connection is closing.
        self.buf.clear();
        self.pos = 0;
        self.take_buffers();
        let spare = rustix::buffer::spare_capacity(&mut self.buf);
        matches!(
            rustix::net::recv(&self.stream, spare, rustix::net::RecvFlags::DONTWAIT),
            Ok((n, _)) if n > 0
        )
    }

    fn has_partial_head(&self, step: Step) -> bool {
        step == Step::NeedHead && self.pos < self.buf.len()
    }

    /// Parses and answers every complete request in the buffer (up to the
    /// pipelining bound).
    fn process(&mut self) -> Step {
        let shared = Arc::clone(&self.shared);
        let limits = &shared.config.limits;
        local::with(&shared, |local| {
            local.tick();
            let now = Instant::now();
            loop {
                if self.discard.is_some() {
                    match self.discard_body(limits) {
                        Ok(true) => self.discard = None,
                        Ok(false) => return Step::NeedBody,
                        // The body is malformed or too big; what was answered stands,
                        // the connection cannot continue.
                        Err(()) => return Step::Close { linger: true },
                    }
                }
                if self.out.responses() >= limits.max_pipeline {
                    return Step::Flush;
                }
                if self.pos == self.buf.len() {
                    return Step::NeedHead;
                }
                if let Some(step) = self.process_one(local, &shared, now) {
                    return step;
                }
            }
        })
    }

    /// Parses and answers one request; `Some` when the loop must stop.
    fn process_one(&mut self, local: &mut Local, shared: &Shared, now: Instant) -> Option<Step> {
        let limits = &shared.config.limits;
        let mut storage = header_storage();
        let head = match parse_request(&self.buf[self.pos..], &mut storage, &limits.head) {
            Ok(Status::Complete(head)) => head,
            Ok(Status::Partial) => return Some(Step::NeedHead),
            Err(e) => {
                tracing::debug!("{}: {} for a malformed head: {e}", self.peer, e.status());
                self.reject_with(local, e.status());
                return Some(Step::Close { linger: true });
            }
        };
        if let Some(route) = dynamic_route(shared, &head) {
            let local_addr = match route {
                Dynamic::Cgi(..) => self.stream.local_addr().ok(),
                Dynamic::Web99(_) => None,
            };
            let input = &self.buf[self.pos + head.len..];
            let mut state = DynState {
                out: &mut self.out,
                continue_sent: &mut self.continue_sent,
                peer: self.peer,
                local: local_addr.unwrap_or(self.peer),
                served: self.served,
                born: self.born,
            };
            let (taken, step) =
                process_dynamic(&head, input, route, local, shared, now, &mut state);
            let head_len = head.len;
            if let Some((body_len, pending)) = taken {
                self.pos += head_len + body_len;
                self.served += 1;
                self.head_started = now;
                self.continue_sent = false;
                self.pending = pending;
            } else if step == Some(Step::Close { linger: true }) {
                self.pos = self.buf.len();
            }
            return step;
        }
        let body_ok = match head.body {
            BodyKind::None => true,
            BodyKind::Length(n) => n <= limits.max_discard_body && !head.expect_continue,
            BodyKind::Chunked => !head.expect_continue,
        };
        let keep_alive = head.keep_alive
            && body_ok
            && self.served + 1 < limits.keepalive_requests
            && now.duration_since(self.born) < limits.keepalive_max_age
            && !shared.draining.load(Ordering::Relaxed);
        let log = capture_log(&mut self.out, shared, |text, format| {
            access_log::capture_request(text, &head, format);
        });
        let reply = Reply {
            date: local.date.http(),
            keep_alive,
            version: head.version,
            head_only: head.method == Method::Head,
            log,
        };
        let (consumed, body) = (head.len, head.body);
        static_files::serve(&head, reply, &mut self.out, &mut local.cache, shared, now);
        self.served += 1;
        self.pos += consumed;
        self.head_started = now;
        if !keep_alive {
            return Some(Step::Close {
                linger: body != BodyKind::None,
            });
        }
        self.discard = match body {
            BodyKind::None => None,
            BodyKind::Length(n) => Some(Framing::Length(n)),
            BodyKind::Chunked => Some(Framing::Chunked(ChunkedDecoder::new())),
        }
        .map(|framing| Discard {
            framing,
            started: now,
            seen: 0,
        });
        None
    }

    /// Queues an error answer for the unparsable head at `buf[pos..]`; the
    /// connection closes after it.
    fn reject_with(&mut self, local: &Local, status: u16) {
        let shared = Arc::clone(&self.shared);
        let (buf, pos) = (&self.buf, self.pos);
        let log = capture_log(&mut self.out, &shared, |text, format| {
            access_log::capture_raw(text, &buf[pos..], format);
        });
        self.pos = self.buf.len();
        let reply = Reply {
            date: local.date.http(),
            keep_alive: false,
            version: stoa_http_proto::Version::Http11,
            head_only: false,
            log,
        };
        reply.status_page(&mut self.out, status, b"");
    }

    fn reject(&mut self, status: u16) {
        let shared = Arc::clone(&self.shared);
        local::with(&shared, |local| {
            local.tick();
            self.reject_with(local, status);
        });
    }

    /// Answers `status` to the partial head in the buffer and closes.
    async fn answer_and_close(&mut self, status: u16) {
        self.reject(status);
        let flushed = self.flush().await;
        self.log_batch();
        if flushed.is_ok() {
            self.linger().await;
        }
    }

    /// Consumes body bytes from the buffer; `Ok(true)` once the body is complete.
    fn discard_body(&mut self, limits: &Limits) -> Result<bool, ()> {
        let Some(d) = &mut self.discard else {
            return Ok(true);
        };
        let input = &self.buf[self.pos..];
        match &mut d.framing {
            Framing::Length(left) => {
                let n = (*left).min(input.len() as u64);
                *left -= n;
                self.pos += n as usize;
                d.seen += n;
                Ok(*left == 0)
            }
            Framing::Chunked(decoder) => {
                let mut used = 0;
                loop {
                    let step = decoder.decode(&input[used..]).map_err(|_| ())?;
                    used += step.consumed;
                    d.seen += step.data.len() as u64;
                    if d.seen > limits.max_discard_body {
                        return Err(());
                    }
                    if step.done || step.consumed == 0 {
                        self.pos += used;
                        return Ok(step.done);
                    }
                }
            }
        }
    }

    /// Writes the queued responses.
    ///
    /// The first attempt is a plain system call: a socket that has room (the usual
    /// case) takes the bytes without a trip through the readiness machinery. Once a
    /// write would block, writes go through tokio's readiness tracking until the
    /// batch is out.
    async fn flush(&mut self) -> io::Result<()> {
        if let Some(tls) = &mut self.tls {
            return tls::flush(tls, &self.stream, &mut self.out, &self.shared).await;
        }
        let send_timeout = self.shared.config.limits.send_timeout;
        if self.last_batch && !self.corked && self.out.has_file() {
            // Best effort: without the cork the bytes just leave sooner.
            self.corked = rustix::net::sockopt::set_tcp_cork(&self.stream, true).is_ok();
        }
        let mut direct = true;
        while !self.out.is_done() {
            let result = if direct {
                self.write_some()
            } else {
                self.stream.try_io(Interest::WRITABLE, || self.write_some())
            };
            match result {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.out.advance(n as u64),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    direct = false;
                    match tokio::time::timeout(send_timeout, self.stream.writable()).await {
                        Ok(ready) => ready?,
                        Err(_) => return Err(io::ErrorKind::TimedOut.into()),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// One system call writing from the cursor: `sendfile` for a file segment,
    /// `sendmsg` for the memory segments before the next file.
    fn write_some(&self) -> io::Result<usize> {
        let Some(file) = self.out.file_at_cursor() else {
            return self.send_memory();
        };
        let mut offset = file.offset;
        let chunk = file.len.min(MAX_SENDFILE_CHUNK as u64) as usize;
        rustix::fs::sendfile(&self.stream, &**file.fd, Some(&mut offset), chunk)
            .map_err(io::Error::from)
    }

    /// One `sendmsg` of the memory segments at the cursor, with `MSG_MORE` when a
    /// file follows (so the head and the first file bytes share packets) or when the
    /// connection closes next (the close pushes the data out with its FIN).
    fn send_memory(&self) -> io::Result<usize> {
        let mut iov = [IoSlice::new(&[]); 64];
        let (n, file_next) = self.out.fill_iovecs(&mut iov);
        let mut flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
        if file_next || self.last_batch {
            flags |= SendFlags::MORE;
        }
        rustix::net::sendmsg(
            &self.stream,
            &iov[..n],
            &mut SendAncillaryBuffer::default(),
            flags,
        )
        .map_err(io::Error::from)
    }

    /// Logs every response of the batch just written (or cut short) and empties
    /// the queue.
    fn log_batch(&mut self) {
        let shared = Arc::clone(&self.shared);
        let Some(sink) = &shared.log else {
            self.out.reset();
            return;
        };
        let ip = self.peer.ip();
        local::with(&shared, |local| {
            let now = Instant::now();
            let Local { date, log, .. } = local;
            self.out.drain_written(|q, text, body_bytes| {
                log.append(sink, now, |line| {
                    access_log::write_line(line, ip, date.clf(), text, q.status, body_bytes);
                });
            });
        });
    }

    /// Reads more input for `step`, within that phase's deadline.
    async fn read(&mut self, step: Step) -> Result<(), ReadEnd> {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        if step == Step::NeedHead && self.buf.is_empty() {
            if self.fresh {
                self.fresh = false;
                if self.read_direct()? {
                    return Ok(());
                }
            }
            return self.wait_for_request().await;
        }
        self.make_room();
        loop {
            match self.fill() {
                Ok(0) => return Err(ReadEnd::Eof),
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(ReadEnd::Failed(e)),
            }
            let deadline = self.deadline(step);
            match tokio::time::timeout_at(deadline.into(), self.stream.readable()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(ReadEnd::Failed(e)),
                Err(_) => return Err(ReadEnd::Timeout),
            }
        }
    }

    /// Reads what the socket has into the buffer: `Ok(0)` at the end of input,
    /// `WouldBlock` (and tokio's readiness cleared) when there is nothing.
    fn fill(&mut self) -> io::Result<usize> {
        match &mut self.tls {
            None => self.stream.try_read_buf(&mut self.buf),
            Some(tls) => tls.read_into(&self.stream, &mut self.buf),
        }
    }

    /// The first read of a new connection, as a plain system call (see
    /// [`Conn::fresh`]). `Ok(false)` when nothing has arrived yet.
    fn read_direct(&mut self) -> Result<bool, ReadEnd> {
        self.take_buffers();
        if self.tls.is_some() {
            // The request often came with the end of the handshake.
            return match self.fill() {
                Ok(0) => Err(ReadEnd::Eof),
                Ok(_) => {
                    self.set_busy(true);
                    Ok(true)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
                Err(e) => Err(ReadEnd::Failed(e)),
            };
        }
        let spare = rustix::buffer::spare_capacity(&mut self.buf);
        match rustix::net::recv(&self.stream, spare, rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) => Err(ReadEnd::Eof),
            Ok(_) => {
                self.set_busy(true);
                Ok(true)
            }
            Err(rustix::io::Errno::AGAIN) => Ok(false),
            Err(e) => Err(ReadEnd::Failed(e.into())),
        }
    }

    fn take_buffers(&mut self) {
        let shared = Arc::clone(&self.shared);
        local::with(&shared, |local| {
            if self.buf.capacity() == 0 {
                self.buf = local.take_buffer();
            }
            if self.out.capacity() == 0 {
                self.out = local.take_output();
            }
        });
    }

    /// Idles until the next request starts, then reads its first bytes. While
    /// idle the buffers are back in the worker's pool and the connection does not
    /// count as in flight; past [`crate::idle::PARK_AFTER`] it asks to be parked.
    async fn wait_for_request(&mut self) -> Result<(), ReadEnd> {
        self.release_buffers();
        self.set_busy(false);
        let limits = &self.shared.config.limits;
        let now = Instant::now();
        let deadline = if self.served == 0 {
            self.born + limits.head_timeout
        } else {
            now + limits.keepalive_timeout
        };
        // TLS connections keep their state in the task: they never park.
        let parking = self.tls.is_none() && local::with(&self.shared, |l| l.idle.is_some());
        let park_at = now + crate::idle::PARK_AFTER;
        let wait_until = if parking && park_at < deadline {
            park_at
        } else {
            deadline
        };
        loop {
            // Decrypted bytes already waiting in TLS need no readiness.
            if !self.tls.as_mut().is_some_and(|t| t.buffered()) {
                let readable = self.stream.readable();
                match tokio::time::timeout_at(wait_until.into(), readable).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return Err(ReadEnd::Failed(e)),
                    Err(_) if wait_until < deadline => return Err(ReadEnd::Park(deadline)),
                    Err(_) => return Err(ReadEnd::Timeout),
                }
            }
            if self.shared.draining.load(Ordering::Relaxed) {
                return Err(ReadEnd::Draining);
            }
            self.take_buffers();
            match self.fill() {
                Ok(0) => return Err(ReadEnd::Eof),
                Ok(_) => break,
                // Readiness left over from the last request: now cleared, so the
                // next wait is for real.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.release_buffers(),
                Err(e) => return Err(ReadEnd::Failed(e)),
            }
        }
        self.set_busy(true);
        if self.served > 0 {
            self.head_started = Instant::now();
        }
        Ok(())
    }

    /// The deadline of the current read phase.
    fn deadline(&self, step: Step) -> Instant {
        let limits = &self.shared.config.limits;
        let grace = |base: Duration, bytes: u64| {
            base + limits.head_timeout_per_500b * u32::try_from(bytes / 500).unwrap_or(u32::MAX)
        };
        match (&self.discard, step) {
            (Some(d), Step::NeedBody) => d.started + grace(limits.body_timeout, d.seen),
            _ => {
                let bytes = (self.buf.len() - self.pos) as u64;
                self.head_started + grace(limits.head_timeout, bytes).min(limits.head_timeout_max)
            }
        }
    }

    /// Ensures spare capacity for a read: moves unprocessed bytes to the front,
    /// and grows the buffer only as far as the head limit requires.
    fn make_room(&mut self) {
        if self.buf.capacity() == 0 {
            let shared = Arc::clone(&self.shared);
            local::with(&shared, |local| self.buf = local.take_buffer());
        }
        if self.buf.capacity() - self.buf.len() >= 1024 {
            return;
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        // A head, or a head and the dynamic API's whole request body.
        let body = self
            .shared
            .web99
            .as_ref()
            .map_or(0, |w| w.config.max_post_body as usize);
        let max = self.shared.config.limits.head.max_head + body + local::READ_BUFFER;
        if self.buf.capacity() - self.buf.len() < 1024 && self.buf.capacity() < max {
            self.buf.reserve(self.buf.capacity());
        }
    }

    /// After an error answer: stop sending, read and discard what the client still
    /// sends for a while, so our response is not destroyed by a reset (nginx's
    /// lingering close).
    async fn linger(&mut self) {
        // The answer is out: shutdown need not wait for this.
        self.set_busy(false);
        let limits = &self.shared.config.limits;
        let (idle, total) = (limits.linger_idle, limits.linger_timeout);
        if let Some(tls) = &mut self.tls {
            tls.close(&self.stream);
        }
        if rustix::net::shutdown(&self.stream, rustix::net::Shutdown::Write).is_err() {
            return;
        }
        let end = Instant::now() + total;
        self.buf.clear();
        self.pos = 0;
        self.make_room();
        loop {
            let deadline = end.min(Instant::now() + idle);
            if tokio::time::timeout_at(deadline.into(), self.stream.readable())
                .await
                .is_err()
            {
                return;
            }
            self.buf.clear();
            match self.stream.try_read_buf(&mut self.buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    }

    fn set_busy(&mut self, busy: bool) {
        if busy != self.busy {
            self.busy = busy;
            if busy {
                self.shared.busy.fetch_add(1, Ordering::Relaxed);
            } else {
                self.shared.busy.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Gives the buffers back to the worker's pool.
    fn release_buffers(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        let out = std::mem::take(&mut self.out);
        self.pos = 0;
        let shared = Arc::clone(&self.shared);
        local::with(&shared, |local| {
            local.give_buffer(buf);
            local.give_output(out);
        });
    }
}

/// Saves the access-log text of a request, when the log is on.
fn capture_log(
    out: &mut Output,
    shared: &Shared,
    capture: impl FnOnce(&mut Vec<u8>, crate::config::LogFormat),
) -> Option<Range<usize>> {
    shared.log.as_ref()?;
    let text = out.log_text_mut();
    let start = text.len();
    capture(text, shared.config.log_format);
    Some(start..text.len())
}

/// A request that is not for a static file.
#[derive(Debug, Clone, Copy)]
enum Dynamic<'s> {
    /// The SPECweb99 entry point.
    Web99(&'s Web99),
    /// A CGI mount (its index).
    Cgi(&'s Cgi, usize),
}

/// Something a connection waits for before it can answer.
#[derive(Debug)]
enum Waiting {
    Web99(Box<web99::Pending>),
    Cgi(Box<cgi::Pending>),
}

/// Which dynamic handler, if any, a request is for.
fn dynamic_route<'s>(shared: &'s Shared, head: &RequestHead<'_, '_>) -> Option<Dynamic<'s>> {
    if let Some(w) = shared.web99.as_ref().filter(|w| w.matches(head.target)) {
        return Some(Dynamic::Web99(w));
    }
    let cgi = shared.cgi.as_ref()?;
    let target = stoa_http_proto::target::decode(head.target).ok()?;
    cgi.route(&target.path)
        .map(|(mount, _)| Dynamic::Cgi(cgi, mount))
}

/// The connection fields the dynamic handlers touch (the rest of the connection
/// stays borrowed by the request head).
struct DynState<'c> {
    out: &'c mut Output,
    continue_sent: &'c mut bool,
    peer: SocketAddr,
    local: SocketAddr,
    served: u32,
    born: Instant,
}

/// Handles a request for the dynamic API or a CGI script. Its body is gathered
/// whole first (it stays in the buffer, unconsumed, until all of it has arrived);
/// then the handler answers at once, or hands the connection something to wait for.
/// Returns, when the request was taken, the body bytes consumed and any wait; and
/// the next step.
#[allow(
    clippy::type_complexity,
    reason = "one call site, which unpacks it at once"
)]
fn process_dynamic(
    head: &RequestHead<'_, '_>,
    input: &[u8],
    route: Dynamic<'_>,
    local: &mut Local,
    shared: &Shared,
    now: Instant,
    conn: &mut DynState<'_>,
) -> (Option<(usize, Option<Waiting>)>, Option<Step>) {
    let max_body = match route {
        Dynamic::Web99(w) => w.config.max_post_body,
        Dynamic::Cgi(c, _) => c.config.max_body,
    };
    let (body, body_len) = match gather_body(head, input, max_body, route) {
        Gathered::Complete(body, len) => (body, len),
        Gathered::Incomplete => {
            if head.expect_continue && !*conn.continue_sent {
                *conn.continue_sent = true;
                conn.out.push_interim(b"HTTP/1.1 100 Continue\r\n\r\n");
            }
            return (None, Some(Step::NeedHead));
        }
        Gathered::Refused(status, why) => {
            let log = capture_log(conn.out, shared, |text, format| {
                access_log::capture_request(text, head, format);
            });
            let reply = Reply {
                date: local.date.http(),
                keep_alive: false,
                version: head.version,
                head_only: false,
                log,
            };
            reply.explained_page(conn.out, status, b"", why);
            return (None, Some(Step::Close { linger: true }));
        }
    };
    let limits = &shared.config.limits;
    let keep_alive = head.keep_alive
        && conn.served + 1 < limits.keepalive_requests
        && now.duration_since(conn.born) < limits.keepalive_max_age
        && !shared.draining.load(Ordering::Relaxed);
    let log = capture_log(conn.out, shared, |text, format| {
        access_log::capture_request(text, head, format);
    });
    let answer = web99::Answer {
        keep_alive,
        version: head.version,
        head_only: head.method == Method::Head,
        log,
    };
    let waiting = match route {
        Dynamic::Web99(web99) => {
            let mut ctx = web99::Context {
                web99,
                shared,
                cache: &mut local.cache,
                peer: conn.peer.ip(),
                now,
            };
            match web99::handle(head, &body, answer, conn.out, &mut ctx, local.date.http()) {
                web99::Outcome::Done => None,
                web99::Outcome::Wait(p) => Some(Waiting::Web99(p)),
            }
        }
        Dynamic::Cgi(cgi, mount) => {
            let rest = stoa_http_proto::target::decode(head.target)
                .ok()
                .and_then(|t| cgi.route(&t.path).map(|(_, rest)| rest.to_vec()))
                .unwrap_or_default();
            let addrs = (conn.local, conn.peer);
            match cgi::prepare(cgi, mount, &rest, head, &body, answer, shared, addrs) {
                Ok(p) => Some(Waiting::Cgi(p)),
                Err((answer, (status, why))) => {
                    answer
                        .reply(local.date.http())
                        .explained_page(conn.out, status, b"", why);
                    None
                }
            }
        }
    };
    let step = match &waiting {
        Some(_) => Some(Step::Wait { close: !keep_alive }),
        None if keep_alive => None,
        None => Some(Step::Close { linger: false }),
    };
    (Some((body_len, waiting)), step)
}

/// A request body, gathered whole from the buffer.
enum Gathered<'a> {
    /// The body and how many input bytes it took (with chunked framing).
    Complete(std::borrow::Cow<'a, [u8]>, usize),
    /// More bytes are needed.
    Incomplete,
    /// Refused: the status and why.
    Refused(u16, &'static str),
}

/// Gathers the body of `head` from `input` (the bytes after the head), up to `max`
/// bytes, whatever its framing.
fn gather_body<'a>(
    head: &RequestHead<'_, '_>,
    input: &'a [u8],
    max: u64,
    route: Dynamic<'_>,
) -> Gathered<'a> {
    match head.body {
        // The dynamic API needs its form; a CGI script may take a bodiless POST.
        // `Content-Length: 0` is a length, and an empty form (400 later on).
        BodyKind::None
            if head.method == Method::Post
                && matches!(route, Dynamic::Web99(_))
                && head.header("Content-Length").is_none() =>
        {
            Gathered::Refused(411, "POST without Content-Length")
        }
        BodyKind::None => Gathered::Complete(std::borrow::Cow::Borrowed(&[]), 0),
        BodyKind::Length(n) if n > max => Gathered::Refused(413, "request body too large"),
        BodyKind::Length(n) => match input.get(..n as usize) {
            Some(body) => Gathered::Complete(std::borrow::Cow::Borrowed(body), n as usize),
            None => Gathered::Incomplete,
        },
        BodyKind::Chunked => {
            let mut decoder = ChunkedDecoder::new();
            let (mut body, mut used) = (Vec::new(), 0);
            loop {
                let Ok(step) = decoder.decode(&input[used..]) else {
                    return Gathered::Refused(400, "malformed chunked body");
                };
                used += step.consumed;
                body.extend_from_slice(step.data);
                if body.len() as u64 > max {
                    return Gathered::Refused(413, "request body too large");
                }
                if step.done {
                    return Gathered::Complete(std::borrow::Cow::Owned(body), used);
                }
                if step.consumed == 0 {
                    return Gathered::Incomplete;
                }
            }
        }
    }
}
