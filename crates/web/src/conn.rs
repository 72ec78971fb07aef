//! One connection: the read → parse → respond → write loop, keep-alive, pipelining,
//! timeouts and lingering close.
//!
//! [`Conn`] owns the socket and both buffers; what to answer is decided in
//! [`crate::dispatch`], which sees a parsed request head and appends to the
//! [`Output`]. The loop in [`Conn::run`]:
//!
//! 1. parses every complete request in the read buffer and queues its response,
//!    up to [`crate::config::Limits::max_pipeline`] at a time (bounded look-ahead);
//! 2. writes the whole batch, memory parts in one `sendmsg`, files with `sendfile`;
//! 3. logs each response once its bytes are out (or the connection died);
//! 4. reads more only when no complete request is left.
//!
//! An idle kept-alive connection gives its buffers back to the worker's pool, so it
//! costs little more than its socket while it waits.
//!
//! A plain-HTTP connection on the per-core runtime runs the same loop without a
//! task for as long as nothing has to wait ([`start_now`], [`Conn::run_now`]): a
//! request that came with its connection, or woke it from the idle set, is read,
//! answered and written on the caller's stack, and the connection parks again at
//! once. Only a step that must wait (a full socket, a partial head or body, a
//! dynamic answer, a lingering close) moves it into a task, which goes on from
//! that step ([`Conn::run_from`]). Until then its socket is not registered with
//! tokio's reactor ([`Sock`]): a connection answered and closed at once makes no
//! `epoll_ctl` call at all.
//!
//! An HTTPS connection runs the same loop with a [`tls::Session`]: reads decrypt
//! through it and [`Conn::flush`] hands the batch to [`tls::flush`]; everything
//! else (parsing, answering, deadlines, logging) is shared. The plain path pays one
//! branch per read and per flush.

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rustix::net::{SendAncillaryBuffer, SendFlags};
use stoa_http_proto::request::header_storage;
use stoa_http_proto::{Status, parse_request};
use tokio::io::Interest;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use crate::access_log;
use crate::config::RuntimeModel;
use crate::dispatch::{self, Client, Cx, Discard, Gathering, Outcome, Site, Then, Waiting};
use crate::local::{self, Local};
use crate::metrics;
use crate::output::{MAX_SENDFILE_CHUNK, Output};
use crate::server::Shared;
use crate::tls;

/// Where a connection stands when its task starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    pub(crate) peer: SocketAddr,
    /// Requests answered before (non-zero for a connection woken from parking).
    pub(crate) served: u32,
    pub(crate) born: Instant,
    /// The site a TLS client's SNI named (the default site for an unknown name);
    /// `None` without TLS or without SNI.
    pub(crate) sni: Option<u32>,
}

impl Origin {
    /// A connection just accepted.
    pub(crate) fn accepted(peer: SocketAddr) -> Origin {
        Origin {
            peer,
            served: 0,
            born: Instant::now(),
            sni: None,
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
    let mut conn = Conn::new(Sock::Tokio(stream), origin, shared, tls);
    let exit = conn.run_from(Step::NeedHead).await;
    conn.end(exit, permit);
}

/// Serves a plain-HTTP connection whose request is (most likely) waiting, on the
/// caller's stack rather than in a task of its own: reads, answers and writes as
/// long as nothing has to wait, then parks the connection in the worker's idle
/// set, or closes it. Only what must wait (a response larger than the socket
/// takes at once, a partial head, a body, a dynamic answer, a lingering close)
/// moves the connection into a task, which goes on from that step.
///
/// The per-core runtime only, with its idle set installed (the caller checks
/// [`can_start_now`]): the accept loop calls this for a new connection, the idle
/// set for a parked one that became readable. Under the paced benchmark most
/// connections never get a task: the request that comes with the connection and
/// each one after a pause are answered here.
pub(crate) fn start_now(
    stream: Sock,
    origin: Origin,
    shared: Arc<Shared>,
    permit: OwnedSemaphorePermit,
) {
    let mut conn = Conn::new(stream, origin, shared, None);
    let now = conn.run_now();
    conn.go_on(now, permit);
}

/// Serves a parked connection whose socket became readable, as [`start_now`]
/// does, except that the read comes first. Most such wakes are the client's
/// close (the SPECweb99 kit's client closes each connection after its last
/// answer), and one that reads the end of input closes the socket without a
/// [`Conn`] ever being built: a pooled buffer taken and given back, a `recv` and
/// the close (callgrind, `bench/callgrind-keepalive.sh --fresh`).
pub(crate) fn resume_now(
    stream: TcpStream,
    origin: Origin,
    shared: Arc<Shared>,
    permit: OwnedSemaphorePermit,
) {
    let mut buf = local::with(&shared, Local::take_buffer);
    let room = buf.capacity();
    let spare = rustix::buffer::spare_capacity(&mut buf);
    let n = match rustix::net::recv(&stream, spare, rustix::net::RecvFlags::DONTWAIT) {
        Ok((n, _)) if n > 0 => n,
        nothing => {
            local::with(&shared, |l| l.give_buffer(buf));
            match nothing {
                // The end of input, nothing unread: the close is not a reset.
                Ok(_) => {}
                Err(rustix::io::Errno::AGAIN) => {
                    // A stale wake: the connection waits in a task, as
                    // `start_now`'s would after finding nothing.
                    let conn = Conn::new(Sock::Tokio(stream), origin, shared, None);
                    conn.forget_readiness();
                    conn.go_on(Now::Wait(Step::NeedHead), permit);
                }
                Err(e) => tracing::debug!("{}: read failed: {e}", origin.peer),
            }
            return;
        }
    };
    let mut conn = Conn::new(Sock::Tokio(stream), origin, shared, None);
    conn.buf = buf;
    conn.take_buffers();
    conn.took(n, room);
    let now = conn.serve_now();
    conn.go_on(now, permit);
}

/// A connection's socket. Served without a task, a new connection is not
/// registered with tokio's reactor: answered and closed at once, it costs no
/// `epoll_ctl` to add it and none to remove it. It is registered the first time
/// it has to wait, in a task or parked.
#[derive(Debug)]
pub(crate) enum Sock {
    /// Not known to the reactor; only non-blocking system calls are made on it.
    Raw(std::net::TcpStream),
    /// Registered: it can wait for readiness.
    Tokio(TcpStream),
    /// Its registration failed: the connection only closes.
    Lost,
}

impl Sock {
    /// Registers a raw socket with the reactor (`epoll_ctl(ADD)`); `false` when
    /// that failed (logged), the socket then `Lost`.
    fn register(&mut self, peer: SocketAddr) -> bool {
        *self = match std::mem::replace(self, Sock::Lost) {
            Sock::Raw(raw) => {
                stoa_netkit::accept::register(raw, peer).map_or(Sock::Lost, Sock::Tokio)
            }
            registered => registered,
        };
        !matches!(self, Sock::Lost)
    }

    /// The registered socket, for a wait.
    fn tokio(&self) -> &TcpStream {
        match self {
            Sock::Tokio(stream) => stream,
            Sock::Raw(_) | Sock::Lost => {
                unreachable!("invariant: a connection is registered before it waits")
            }
        }
    }

    /// The registered socket when it is one.
    fn registered(&self) -> Option<&TcpStream> {
        match self {
            Sock::Tokio(stream) => Some(stream),
            Sock::Raw(_) | Sock::Lost => None,
        }
    }
}

impl std::os::fd::AsFd for Sock {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Sock::Raw(stream) => stream.as_fd(),
            Sock::Tokio(stream) => stream.as_fd(),
            Sock::Lost => {
                unreachable!("invariant: a connection whose registration failed only closes")
            }
        }
    }
}

/// Whether this thread can serve connections with [`start_now`]: it is a worker
/// of the per-core runtime with its idle set (where such connections park).
pub(crate) fn can_start_now(shared: &Shared) -> bool {
    shared.config.runtime == RuntimeModel::PerCore && local::with(shared, |l| l.idle.is_some())
}

/// Moves an idle connection (from its task, or served without one by
/// [`start_now`] or [`resume_now`]) into the worker's [`crate::idle::IdleSet`].
fn park(conn: &mut Conn, permit: OwnedSemaphorePermit, deadline: Instant) {
    if conn.shared.draining.load(Ordering::Relaxed) {
        // Shutting down: an idle connection just closes (see `Drop for Conn`).
        return;
    }
    let Client {
        peer, served, born, ..
    } = conn.client;
    let mut stream = std::mem::replace(&mut conn.stream, Sock::Lost);
    stream.register(peer);
    let Sock::Tokio(stream) = stream else {
        // Its registration failed: it closes.
        return;
    };
    let parked = crate::idle::Parked {
        stream,
        peer,
        served,
        born,
        permit,
    };
    local::with(&conn.shared, |l| {
        if let Some(idle) = &mut l.idle {
            idle.park(parked, deadline);
        }
    });
}

/// Counts and logs every response queued on `out` (as far as its bytes were
/// written) for the client at `ip`, each in its site's log, and empties the
/// queue; `now` (the batch's time) decides whether a log buffer is old enough
/// to hand over.
pub(crate) fn log_written(shared: &Shared, out: &mut Output, ip: std::net::IpAddr, now: Instant) {
    metrics::count_batch(out.queued(), out.written());
    if shared.logs.is_empty() {
        out.reset();
        return;
    }
    local::with(shared, |local| {
        let Local { date, logs, .. } = local;
        out.drain_written(|q, text, body_bytes| {
            // No log text: the request's site does not log.
            let Some(sink) = q.log.as_ref().map(|l| l.sink) else {
                return;
            };
            if let (Some(buffer), Some(to)) = (logs.get_mut(sink), shared.logs.get(sink)) {
                buffer.append(to, now, |line| {
                    access_log::write_line(line, ip, date.clf(), text, q.status, body_bytes);
                });
            }
        });
    });
}

/// How a connection's loop ends.
#[derive(Debug, Clone, Copy)]
enum Exit {
    /// The connection is closed (or about to be, when the socket drops).
    Close,
    /// Nothing to do (served without a task), or idle past
    /// [`crate::idle::PARK_AFTER`] in a task: hand the socket to the idle set
    /// until this deadline.
    Park(Instant),
}

/// Where [`Conn::run_now`] stopped.
#[derive(Debug)]
enum Now {
    /// The connection closes or parks.
    Exit(Exit),
    /// It must wait; its task goes on with this step.
    Wait(Step),
}

/// What the connection needs after processing its buffer.
#[derive(Debug)]
enum Step {
    /// Read more: the next head (or part of it, or of a dynamic request's body).
    NeedHead,
    /// Read more of a body being discarded.
    NeedBody,
    /// Write the queued batch, then process the rest of the buffer.
    Flush,
    /// Write the queued batch, then close (after lingering if input may be unread).
    Close { linger: bool },
    /// Write the queued batch, wait for the dynamic API's state thread or a CGI
    /// script, queue its answer; then go on, or close.
    Wait { waiting: Waiting, close: bool },
}

/// Where the connection stands, for the readiness it knows and the server's
/// in-flight count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Nothing read yet, and no readiness learned from epoll: the first read and
    /// write are tried directly instead of waiting for an event (the request
    /// usually arrived with the connection, and a new socket can always take a
    /// small response).
    Fresh,
    /// Waiting for a request, lingering or closing: not in flight.
    Idle,
    /// In the middle of a request or its response: counted in [`Shared::busy`],
    /// which draining waits for.
    Busy,
}

/// What the next bytes of input are.
#[derive(Debug)]
enum Intake {
    /// A request head (or nothing yet).
    Head,
    /// The head at `buf[pos..]` again, then more of its body being gathered.
    Gather(Box<Gathering>),
    /// The body of a request already answered, being skipped.
    Discard(Discard),
}

/// How batches are written. It only moves forward, from `NoDelay` to `Last` for
/// the connection's final batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Writing {
    /// `TCP_NODELAY`, which every connection has from its listener
    /// (`server::configure_listener`): pipelined answers and file tails must not
    /// wait for the peer's delayed ACK.
    NoDelay,
    /// The batch being written is the connection's last: it is corked (`MSG_MORE`,
    /// and `TCP_CORK` before a file, `corked` once set) so the data leaves with the
    /// FIN of the close in as few packets as possible, as nginx's `tcp_nopush` does.
    Last { corked: bool },
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

/// Reads and drops every byte `socket` has received, without waiting, through
/// `buf`; `true` once the peer's end of input is seen. A socket closed with
/// unread bytes is reset, and the reset destroys whatever answer is still
/// queued for the peer: this goes before a close that should not do that.
pub(crate) fn discard_received(socket: &impl std::os::fd::AsFd, buf: &mut Vec<u8>) -> bool {
    if buf.capacity() == 0 {
        buf.reserve(4096);
    }
    loop {
        buf.clear();
        let spare = rustix::buffer::spare_capacity(buf);
        match rustix::net::recv(socket, spare, rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}

struct Conn {
    stream: Sock,
    /// The TLS state of an HTTPS connection.
    tls: Option<Box<tls::Session>>,
    /// The peer, the accept time and the requests answered so far.
    client: Client,
    shared: Arc<Shared>,
    /// Read buffer; `buf[pos..]` is unprocessed input. Empty and unallocated while
    /// idle.
    buf: Vec<u8>,
    pos: usize,
    out: Output,
    /// When the first byte of the current head arrived (accept time for the first).
    head_started: Instant,
    /// When the last batch of requests was processed: the one clock read that
    /// batch's answers, log lines and parking deadline share.
    clock: Instant,
    /// One enum rather than `fresh` and `busy` flags: a fresh connection has not
    /// read a request yet, so it is never busy.
    phase: Phase,
    /// What `buf[pos..]` holds; a `100 Continue` already sent belongs to the
    /// request being gathered, so it lives in the [`Gathering`].
    intake: Intake,
    /// One enum rather than `last_batch` and `corked` flags: the cork only
    /// matters in the last batch, and nothing is written after it.
    writing: Writing,
    /// The worker's runtime is single-threaded (the per-core model), so tokio's
    /// readiness for this socket cannot change while the task runs (see
    /// [`Conn::forget_readiness`]).
    own_reactor: bool,
}

impl Drop for Conn {
    /// A connection that closes while the server drains (its task dropped when
    /// the drain ends, or closing where it would have parked) first reads what
    /// the client sent. A close with unread bytes is a reset, and the reset
    /// destroys whatever answer is still queued in the kernel: a request sent
    /// just as the drain began, behind a download the connection had already
    /// written, would cut that download short (`tests/shutdown.rs`). Bytes
    /// arriving after the close are the lingering close's business, which a
    /// connection still in flight does before it ends.
    fn drop(&mut self) {
        if !matches!(self.stream, Sock::Lost) && self.shared.draining.load(Ordering::Relaxed) {
            discard_received(&self.stream, &mut self.buf);
        }
    }
}

impl Conn {
    fn new(
        stream: Sock,
        origin: Origin,
        shared: Arc<Shared>,
        tls: Option<Box<tls::Session>>,
    ) -> Conn {
        // The first head's time starts at the accept (a TLS handshake, or time
        // spent parked before the first byte, counts against it); a later head's
        // when its first byte is read.
        let head_started = if origin.served == 0 {
            origin.born
        } else {
            Instant::now()
        };
        let own_reactor = shared.config.runtime == RuntimeModel::PerCore;
        Conn {
            stream,
            writing: Writing::NoDelay,
            tls,
            client: Client {
                peer: origin.peer,
                served: origin.served,
                born: origin.born,
                sni: origin.sni,
                http2: false,
            },
            shared,
            buf: Vec::new(),
            pos: 0,
            out: Output::default(),
            head_started,
            clock: head_started,
            phase: Phase::Fresh,
            intake: Intake::Head,
            own_reactor,
        }
    }

    /// After [`Conn::run_now`]: ends the connection, or registers it and moves it
    /// into a task that goes on from the step where it stopped.
    fn go_on(mut self, now: Now, permit: OwnedSemaphorePermit) {
        match now {
            Now::Exit(exit) => self.end(exit, permit),
            Now::Wait(step) => {
                if !self.stream.register(self.client.peer) {
                    self.end(Exit::Close, permit);
                    return;
                }
                tokio::spawn(async move {
                    let exit = self.run_from(step).await;
                    self.end(exit, permit);
                });
            }
        }
    }

    /// After the connection's loop: out of flight, buffers back to the pool, and
    /// closed (the socket drops with the connection) or parked. By reference: a
    /// connection is a few hundred bytes, and moving it here cost a copy.
    fn end(&mut self, exit: Exit, permit: OwnedSemaphorePermit) {
        self.set_busy(false);
        self.release_buffers();
        if let Some(tls) = &mut self.tls {
            tls.close(self.stream.tokio());
        }
        if let Exit::Park(deadline) = exit {
            park(self, permit, deadline);
        }
    }

    /// The connection's loop, from `step` on: a new connection starts at
    /// [`Step::NeedHead`], one coming from [`Conn::run_now`] where that stopped.
    async fn run_from(&mut self, mut step: Step) -> Exit {
        loop {
            if let Some(exit) = self.carry_out(step).await {
                return exit;
            }
            step = self.process();
        }
    }

    /// Does what `step` asks for after a [`Conn::process`]: writes and logs the
    /// queued batch, then reads more, waits for a dynamic answer, or ends.
    async fn carry_out(&mut self, step: Step) -> Option<Exit> {
        if !self.out.is_done() {
            if matches!(step, Step::Close { .. }) {
                self.write_last();
            }
            let flushed = self.flush().await;
            self.log_batch();
            if let Err(e) = flushed {
                tracing::debug!("{}: write failed: {e}", self.client.peer);
                return Some(Exit::Close);
            }
        }
        match step {
            Step::Flush => return None,
            Step::Wait { waiting, close } => {
                self.finish(waiting).await;
                if close {
                    self.write_last();
                    let flushed = self.flush().await;
                    self.log_batch();
                    if flushed.is_ok() && self.input_pending() {
                        self.linger().await;
                    }
                    return Some(Exit::Close);
                }
                return None;
            }
            Step::Close { linger } => {
                if linger || self.input_pending() {
                    self.linger().await;
                }
                return Some(Exit::Close);
            }
            Step::NeedHead | Step::NeedBody => {}
        }
        if let Err(end) = self.read(&step).await {
            let partial_head = self.has_partial_head(&step);
            return Some(self.read_ended(end, partial_head).await);
        }
        None
    }

    /// [`Conn::run_from`] on the caller's stack, for as long as nothing has to
    /// wait (see [`start_now`]): the direct first read, then every request it
    /// brought, each batch written as far as the socket takes it. A connection
    /// left with nothing to do parks at once, with its idle deadline, and one
    /// that is done closes; anything else continues in a task from the step
    /// returned.
    fn run_now(&mut self) -> Now {
        match self.read_direct() {
            Ok(true) => {}
            Ok(false) => return Now::Wait(Step::NeedHead),
            Err(ReadEnd::Failed(e)) => {
                tracing::debug!("{}: read failed: {e}", self.client.peer);
                return Now::Exit(Exit::Close);
            }
            // The end of input before any byte of a head: nothing to answer.
            Err(_) => return Now::Exit(Exit::Close),
        }
        self.serve_now()
    }

    /// [`Conn::run_now`] after its first read brought bytes.
    fn serve_now(&mut self) -> Now {
        loop {
            let step = self.process();
            if !self.out.is_done() {
                if matches!(step, Step::Close { .. }) {
                    self.write_last();
                }
                match self.write_now() {
                    Ok(true) => {}
                    // The task's flush goes on from the cursor.
                    Ok(false) => return Now::Wait(step),
                    Err(e) => {
                        self.log_batch();
                        tracing::debug!("{}: write failed: {e}", self.client.peer);
                        return Now::Exit(Exit::Close);
                    }
                }
                self.log_batch();
            }
            match step {
                Step::Flush => {}
                Step::NeedHead if self.pos == self.buf.len() => {
                    return Now::Exit(Exit::Park(self.idle_deadline(self.clock)));
                }
                Step::Close { linger: false } if !self.input_pending() => {
                    return Now::Exit(Exit::Close);
                }
                _ => return Now::Wait(step),
            }
        }
    }

    /// The batch about to be written is the connection's last (see
    /// [`Writing::Last`]); a cork already set stays recorded.
    fn write_last(&mut self) {
        if !matches!(self.writing, Writing::Last { .. }) {
            self.writing = Writing::Last { corked: false };
        }
    }

    /// Ends the connection after a read that brought no bytes.
    async fn read_ended(&mut self, end: ReadEnd, partial_head: bool) -> Exit {
        match end {
            ReadEnd::Park(deadline) => return Exit::Park(deadline),
            ReadEnd::Timeout if partial_head => self.answer_and_close(408).await,
            ReadEnd::Eof if partial_head => {
                // The client gave up mid-head: log it, there is no one to answer.
                self.reject(400);
                self.log_batch();
            }
            ReadEnd::Failed(e) => tracing::debug!("{}: read failed: {e}", self.client.peer),
            ReadEnd::Draining => {
                // A request came in as the server began to drain: it goes
                // unanswered, but it must be read, or closing would reset the
                // connection and destroy the last response still in flight.
                self.linger().await;
            }
            ReadEnd::Timeout | ReadEnd::Eof => {}
        }
        Exit::Close
    }

    /// Waits for what a dynamic answer depends on, then queues the answer.
    ///
    /// The wait (a CGI child, a request body, the SPECweb99 state) is boxed: it is
    /// by far the largest state of the connection's future (1,720 of 2,368 bytes,
    /// `-Zprint-type-sizes`), and unboxed it would size every connection's task,
    /// idle ones included, for the rare request that needs it.
    async fn finish(&mut self, waiting: Waiting) {
        let shared = Arc::clone(&self.shared);
        let ready = Box::pin(waiting.wait(Site::of(&shared))).await;
        local::with(&shared, |local| {
            local.tick();
            ready.send(&mut self.out, local.date.http());
        });
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
        if self.client.served <= 1 {
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

    fn has_partial_head(&self, step: &Step) -> bool {
        matches!(step, Step::NeedHead) && self.pos < self.buf.len()
    }

    /// Parses and answers every complete request in the buffer (up to the
    /// pipelining bound).
    fn process(&mut self) -> Step {
        let shared = Arc::clone(&self.shared);
        let site = Site::of(&shared);
        let limits = &shared.config.limits;
        let now = Instant::now();
        self.clock = now;
        local::with(&shared, |local| {
            local.tick_at(now);
            loop {
                if let Intake::Discard(d) = &mut self.intake {
                    match d.skip(&self.buf[self.pos..], limits.max_discard_body) {
                        Ok((used, done)) => {
                            self.pos += used;
                            if !done {
                                return Step::NeedBody;
                            }
                            self.intake = Intake::Head;
                        }
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
                if let Some(step) = self.process_one(local, site, now) {
                    return step;
                }
            }
        })
    }

    /// Parses and answers one request; `Some` when the loop must stop.
    fn process_one(&mut self, local: &mut Local, site: Site<'_>, now: Instant) -> Option<Step> {
        let mut storage = header_storage();
        let limits = &site.config().limits.head;
        let head = match parse_request(&self.buf[self.pos..], &mut storage, limits) {
            Ok(Status::Complete(head)) => head,
            Ok(Status::Partial) => return Some(Step::NeedHead),
            Err(e) => {
                tracing::debug!(
                    "{}: {} for a malformed head: {e}",
                    self.client.peer,
                    e.status()
                );
                self.reject_with(site, local.date.http(), e.status());
                return Some(Step::Close { linger: true });
            }
        };
        // Checked first so that the common case does not move the state.
        let resumed = match &self.intake {
            Intake::Gather(_) => match std::mem::replace(&mut self.intake, Intake::Head) {
                Intake::Gather(gathering) => Some(gathering),
                Intake::Head | Intake::Discard(_) => None,
            },
            Intake::Head | Intake::Discard(_) => None,
        };
        let mut cx = Cx {
            site,
            client: &self.client,
            here: dispatch::Here::Socket(std::os::fd::AsFd::as_fd(&self.stream)),
            cache: &mut local.cache,
            encoder: &mut local.encoder,
            date: local.date.http(),
            out: &mut self.out,
            now,
        };
        let input = &self.buf[self.pos + head.len..];
        let outcome = dispatch::answer(&head, input, resumed, &mut cx);
        self.advance(outcome, now)
    }

    /// Moves past an answered request, or keeps what its answer waits for.
    fn advance(&mut self, outcome: Outcome, now: Instant) -> Option<Step> {
        let (consumed, then) = match outcome {
            Outcome::Answered { consumed, then } => (consumed, then),
            Outcome::Incomplete(gathering) => {
                self.intake = Intake::Gather(gathering);
                return Some(Step::NeedHead);
            }
            Outcome::Refused => {
                // The rest of the input cannot be framed: it is never read.
                self.pos = self.buf.len();
                return Some(Step::Close { linger: true });
            }
        };
        self.pos += consumed;
        self.client.served += 1;
        self.head_started = now;
        match then {
            Then::Next => None,
            Then::Discard(discard) => {
                self.intake = Intake::Discard(discard);
                None
            }
            Then::Wait { waiting, close } => Some(Step::Wait { waiting, close }),
            Then::Close { linger } => Some(Step::Close { linger }),
        }
    }

    /// Queues an error answer for the unparsable head at `buf[pos..]`; the
    /// connection closes after it.
    fn reject_with(&mut self, site: Site<'_>, date: &[u8], status: u16) {
        dispatch::refuse_head(&mut self.out, site, date, &self.buf[self.pos..], status);
        self.pos = self.buf.len();
    }

    fn reject(&mut self, status: u16) {
        let shared = Arc::clone(&self.shared);
        local::with(&shared, |local| {
            local.tick();
            self.reject_with(Site::of(&shared), local.date.http(), status);
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

    /// Writes the queued responses.
    ///
    /// The first attempt is a plain system call: a socket that has room (the usual
    /// case) takes the bytes without a trip through the readiness machinery. Once a
    /// write would block, writes go through tokio's readiness tracking until the
    /// batch is out.
    async fn flush(&mut self) -> io::Result<()> {
        if let Some(tls) = &mut self.tls {
            return tls::flush(tls, self.stream.tokio(), &mut self.out, &self.shared).await;
        }
        if self.write_now()? {
            return Ok(());
        }
        let send_timeout = self.shared.config.limits.send_timeout;
        loop {
            match tokio::time::timeout(send_timeout, self.stream.tokio().writable()).await {
                Ok(ready) => ready?,
                Err(_) => return Err(io::ErrorKind::TimedOut.into()),
            }
            while !self.out.is_done() {
                match (self.stream.tokio()).try_io(Interest::WRITABLE, || self.write_some()) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => self.out.advance(n as u64),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
            if self.out.is_done() {
                return Ok(());
            }
        }
    }

    /// Writes the queued batch with plain system calls for as long as the socket
    /// takes it (plain HTTP only): `Ok(true)` once it is all out, `Ok(false)` when
    /// the socket is full.
    fn write_now(&mut self) -> io::Result<bool> {
        if self.writing == (Writing::Last { corked: false }) && self.out.has_file() {
            // Best effort: without the cork the bytes just leave sooner.
            let corked = rustix::net::sockopt::set_tcp_cork(&self.stream, true).is_ok();
            self.writing = Writing::Last { corked };
        }
        while !self.out.is_done() {
            match self.write_some() {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.out.advance(n as u64),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
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
        if file_next || matches!(self.writing, Writing::Last { .. }) {
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
        log_written(
            &self.shared,
            &mut self.out,
            self.client.peer.ip(),
            self.clock,
        );
    }

    /// Reads more input for `step`, within that phase's deadline.
    async fn read(&mut self, step: &Step) -> Result<(), ReadEnd> {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        if matches!(step, Step::NeedHead) && self.buf.is_empty() {
            if self.phase == Phase::Fresh {
                self.phase = Phase::Idle;
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
            match tokio::time::timeout_at(deadline.into(), self.stream.tokio().readable()).await {
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
            None => {
                let spare = self.buf.capacity() - self.buf.len();
                let n = self.stream.tokio().try_read_buf(&mut self.buf)?;
                if n > 0 && n < spare && self.own_reactor {
                    self.forget_readiness();
                }
                Ok(n)
            }
            Some(tls) => tls.read_into(self.stream.tokio(), &mut self.buf),
        }
    }

    /// After a read that did not fill the buffer. TCP hands over everything queued
    /// up to the buffer's size, so the socket is empty now, but tokio still holds
    /// it readable: left alone, the wait for the next request would begin with a
    /// `recvfrom` that finds nothing (one per kept-alive request under the paced
    /// benchmark, about 2 % of the server's CPU). Clears that readiness without a
    /// system call, as a `WouldBlock` would, unless it says the peer closed or
    /// reset: that arrived before the read, and no new epoll edge would tell it
    /// again. Bytes that arrive after the read raise a new edge, which the reactor
    /// delivers as fresh readiness. Only on a single-threaded runtime, where the
    /// reactor cannot run between the look and the clear.
    fn forget_readiness(&self) {
        // A raw socket has no readiness to forget.
        let Some(stream) = self.stream.registered() else {
            return;
        };
        let mut ready = std::pin::pin!(stream.ready(Interest::READABLE));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(Ok(ready)) = ready.as_mut().poll(&mut cx)
            && !ready.is_read_closed()
        {
            let _ = stream.try_io(Interest::READABLE, || {
                Err::<(), _>(io::ErrorKind::WouldBlock.into())
            });
        }
    }

    /// The first read of a new connection, as a plain system call (see
    /// [`Phase::Fresh`]). `Ok(false)` when nothing has arrived yet.
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
        let room = self.buf.capacity() - self.buf.len();
        let spare = rustix::buffer::spare_capacity(&mut self.buf);
        match rustix::net::recv(&self.stream, spare, rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) => Err(ReadEnd::Eof),
            Ok((n, _)) => {
                self.took(n, room);
                Ok(true)
            }
            Err(rustix::io::Errno::AGAIN) => {
                if self.own_reactor {
                    self.forget_readiness();
                }
                Ok(false)
            }
            Err(e) => Err(ReadEnd::Failed(e.into())),
        }
    }

    /// After a direct read brought `n > 0` bytes into `room`: the connection is
    /// in flight.
    fn took(&mut self, n: usize, room: usize) {
        // tokio assumes an accepted socket readable, and a woken one stays
        // readable until told otherwise; unless the read filled the buffer, it
        // is not.
        if n < room && self.own_reactor {
            self.forget_readiness();
        }
        self.set_busy(true);
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
    /// count as in flight. A connection that can park (plain HTTP on the per-core
    /// runtime) asks to be parked once idle for [`crate::idle::PARK_AFTER`].
    async fn wait_for_request(&mut self) -> Result<(), ReadEnd> {
        // A draining server takes no new request. The connection ends here while
        // still busy, so its lingering close reads what the client already sent
        // before the shutdown may close the socket: leaving busy first and then
        // waiting for readiness let a shutdown that saw nothing busy close the
        // socket with a request unread, and the reset that sends destroys the
        // answer still queued in the kernel (`tests/shutdown.rs`).
        if self.shared.draining.load(Ordering::Relaxed) {
            return Err(ReadEnd::Draining);
        }
        self.release_buffers();
        self.set_busy(false);
        let now = Instant::now();
        let deadline = self.idle_deadline(now);
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
                let readable = self.stream.tokio().readable();
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
        if self.client.served > 0 {
            self.head_started = Instant::now();
        }
        Ok(())
    }

    /// How long a connection waiting for a request may stay idle from `now`: its
    /// first request within the head timeout from the accept, a later one within
    /// the keep-alive timeout.
    fn idle_deadline(&self, now: Instant) -> Instant {
        let limits = &self.shared.config.limits;
        if self.client.served == 0 {
            self.client.born + limits.head_timeout
        } else {
            now + limits.keepalive_timeout
        }
    }

    /// The deadline of the current read phase.
    fn deadline(&self, step: &Step) -> Instant {
        let limits = &self.shared.config.limits;
        let grace = |base: Duration, bytes: u64| {
            base + limits.head_timeout_per_500b * u32::try_from(bytes / 500).unwrap_or(u32::MAX)
        };
        match (&self.intake, step) {
            (Intake::Discard(d), Step::NeedBody) => d.started + grace(limits.body_timeout, d.seen),
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
        let body = self.shared.max_dynamic_body;
        let max = self.shared.config.limits.head.max_head + body + local::READ_BUFFER;
        if self.buf.capacity() - self.buf.len() < 1024 && self.buf.capacity() < max {
            self.buf.reserve(self.buf.capacity());
        }
    }

    /// After an error answer: stop sending, read and discard what the client still
    /// sends for a while, so our response is not destroyed by a reset (nginx's
    /// lingering close).
    async fn linger(&mut self) {
        let limits = &self.shared.config.limits;
        let (idle, total) = (limits.linger_idle, limits.linger_timeout);
        if let Some(tls) = &mut self.tls {
            tls.close(self.stream.tokio());
        }
        if rustix::net::shutdown(&self.stream, rustix::net::Shutdown::Write).is_err() {
            return;
        }
        let end = Instant::now() + total;
        self.buf.clear();
        self.pos = 0;
        self.make_room();
        // What the client has sent already is read before a draining server may
        // stop waiting for this connection and close it.
        if discard_received(&self.stream, &mut self.buf) {
            return;
        }
        // The answer is out: shutdown need not wait for this.
        self.set_busy(false);
        loop {
            let deadline = end.min(Instant::now() + idle);
            if tokio::time::timeout_at(deadline.into(), self.stream.tokio().readable())
                .await
                .is_err()
            {
                return;
            }
            self.buf.clear();
            match self.stream.tokio().try_read_buf(&mut self.buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    }

    /// Enters or leaves [`Phase::Busy`], keeping the server's in-flight count.
    fn set_busy(&mut self, busy: bool) {
        match (self.phase, busy) {
            (Phase::Fresh | Phase::Idle, true) => {
                self.phase = Phase::Busy;
                self.shared.busy.fetch_add(1, Ordering::Relaxed);
            }
            (Phase::Busy, false) => {
                self.phase = Phase::Idle;
                self.shared.busy.fetch_sub(1, Ordering::Relaxed);
            }
            _ => {}
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
