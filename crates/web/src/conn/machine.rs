//! The connection's state machine: [`Conn`] and its loop, in a task
//! ([`Conn::run_from`]) or on the caller's stack ([`Conn::run_now`]). Each turn
//! parses every complete request in the read buffer and answers it through
//! [`crate::dispatch`] ([`Conn::process`]), then carries out the [`Step`] the
//! batch left: write, read more, wait for a dynamic answer, or close. The
//! [`Phase`] keeps the server's in-flight count, the [`Intake`] what the next
//! input bytes are; the deadlines of each phase are decided here.
//!
//! The socket work is `io.rs`'s, waiting idle and parking `park.rs`'s, the
//! access log `log.rs`'s.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use stoa_http_proto::request::header_storage;
use stoa_http_proto::{Status, parse_request};
use tokio::sync::OwnedSemaphorePermit;

use super::Origin;
use super::io::{ReadEnd, Sock, Writing, discard_received};
use super::park::park;
use crate::config::RuntimeModel;
use crate::dispatch::{self, Client, Cx, Discard, Gathering, Outcome, Site, Then, Waiting};
use crate::local::{self, Local};
use crate::output::Output;
use crate::shared::Shared;
use crate::tls;

/// How a connection's loop ends.
#[derive(Debug, Clone, Copy)]
pub(super) enum Exit {
    /// The connection is closed (or about to be, when the socket drops).
    Close,
    /// Nothing to do (served without a task), or idle past
    /// [`crate::idle::PARK_AFTER`] in a task: hand the socket to the idle set
    /// until this deadline.
    Park(Instant),
}

/// Where [`Conn::run_now`] stopped.
#[derive(Debug)]
pub(super) enum Now {
    /// The connection closes or parks.
    Exit(Exit),
    /// It must wait; its task goes on with this step.
    Wait(Step),
}

/// What the connection needs after processing its buffer.
#[derive(Debug)]
pub(super) enum Step {
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
pub(super) enum Phase {
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
pub(super) enum Intake {
    /// A request head (or nothing yet).
    Head,
    /// The head at `buf[pos..]` again, then more of its body being gathered.
    Gather(Box<Gathering>),
    /// The body of a request already answered, being skipped.
    Discard(Discard),
}

/// One connection: its socket, its buffers and where it stands (the socket
/// layer's methods are in `io.rs`, the idle wait in `park.rs`).
pub(super) struct Conn {
    pub(super) stream: Sock,
    /// The TLS state of an HTTPS connection.
    pub(super) tls: Option<Box<tls::Session>>,
    /// The peer, the accept time and the requests answered so far.
    pub(super) client: Client,
    pub(super) shared: Arc<Shared>,
    /// Read buffer; `buf[pos..]` is unprocessed input. Empty and unallocated while
    /// idle.
    pub(super) buf: Vec<u8>,
    pub(super) pos: usize,
    pub(super) out: Output,
    /// When the first byte of the current head arrived (accept time for the first).
    pub(super) head_started: Instant,
    /// When the last batch of requests was processed: the one clock read that
    /// batch's answers, log lines and parking deadline share.
    pub(super) clock: Instant,
    /// One enum rather than `fresh` and `busy` flags: a fresh connection has not
    /// read a request yet, so it is never busy.
    pub(super) phase: Phase,
    /// What `buf[pos..]` holds; a `100 Continue` already sent belongs to the
    /// request being gathered, so it lives in the [`Gathering`].
    pub(super) intake: Intake,
    /// One enum rather than `last_batch` and `corked` flags: the cork only
    /// matters in the last batch, and nothing is written after it.
    pub(super) writing: Writing,
    /// The worker's runtime is single-threaded (the per-core model), so tokio's
    /// readiness for this socket cannot change while the task runs (see
    /// [`Conn::forget_readiness`]).
    pub(super) own_reactor: bool,
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
    pub(super) fn new(
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
    pub(super) fn go_on(mut self, now: Now, permit: OwnedSemaphorePermit) {
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
    pub(super) fn end(&mut self, exit: Exit, permit: OwnedSemaphorePermit) {
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
    pub(super) async fn run_from(&mut self, mut step: Step) -> Exit {
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
    /// wait (see [`start_now`](super::start_now)): the direct first read, then every request it
    /// brought, each batch written as far as the socket takes it. A connection
    /// left with nothing to do parks at once, with its idle deadline, and one
    /// that is done closes; anything else continues in a task from the step
    /// returned.
    pub(super) fn run_now(&mut self) -> Now {
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
    pub(super) fn serve_now(&mut self) -> Now {
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
        dispatch::refuse_head(
            &mut self.out,
            (site, self.clock),
            date,
            &self.buf[self.pos..],
            status,
        );
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

    /// How long a connection waiting for a request may stay idle from `now`: its
    /// first request within the head timeout from the accept, a later one within
    /// the keep-alive timeout.
    pub(super) fn idle_deadline(&self, now: Instant) -> Instant {
        let limits = &self.shared.config.limits;
        if self.client.served == 0 {
            self.client.born + limits.head_timeout
        } else {
            now + limits.keepalive_timeout
        }
    }

    /// The deadline of the current read phase.
    pub(super) fn deadline(&self, step: &Step) -> Instant {
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

    /// Enters or leaves [`Phase::Busy`], keeping the server's in-flight count.
    pub(super) fn set_busy(&mut self, busy: bool) {
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
}
