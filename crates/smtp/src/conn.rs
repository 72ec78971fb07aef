//! One SMTP connection: the read → advance → decide → reply loop around
//! [`stoa_smtp_proto::Session`], its deadlines, STARTTLS, and the transaction it
//! builds (sender, recipients, the message being spooled).
//!
//! [`Conn`] owns the socket, the read buffer and the reply buffer. The loop hands
//! every unread byte to the session, acts on each event (policy decisions are in
//! `policy.rs`), writes the replies out once the buffer yields nothing more, and only
//! then reads again: the order RFC 2920 asks of a pipelining server and the one the
//! session's unauthorised-pipelining check relies on.
//!
//! Deadlines: each command must arrive within `command_timeout` of the previous
//! event (a trickled line does not extend it); a message within `data_timeout` plus
//! one second per `data_min_rate` bytes received; everything within
//! `session_timeout`; each write within `send_timeout`. A client past a deadline gets
//! `421 4.4.2` and the connection closes. On shutdown a connection waiting for a
//! command gets `421 4.3.2`; one in the middle of a message finishes it first.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stoa_netkit::server::{Accepted, ClientSlot};
use stoa_netkit::shutdown::Shutdown;
use stoa_smtp_proto::session::{Action, Config as SessionConfig, Credentials};
use stoa_smtp_proto::{Decision, Event, ForwardPath, Reply, ReversePath, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::queue::{Recipient, Spool};
use crate::shared::Shared;
use stoa_netkit::tls::Stream;

/// Bytes read at a time. Commands are at most `max_line` (2 KiB) and the DATA
/// decoder consumes everything it is given, so the buffer stays near this size.
const READ_CHUNK: usize = 16 * 1024;

/// Pause before each error reply once the client passed the soft error limit
/// (Postfix's `smtpd_error_sleep_time`).
const ERROR_DELAY: Duration = Duration::from_secs(1);

/// What the listener is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Mail exchange: anyone may send to local users.
    Mx,
    /// Submission: MAIL only after AUTH.
    Submission,
}

/// Whether the loop goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    Continue,
    Close,
}

/// How a wait for input ended.
#[derive(Debug)]
enum ReadEnd {
    Data,
    Eof,
    Timeout,
    Draining,
}

/// The mail transaction under way.
#[derive(Debug, Default)]
pub(crate) struct Txn {
    pub(crate) from: Option<ReversePath>,
    pub(crate) recipients: Vec<Recipient>,
    /// The accepted RCPT addresses, as given.
    pub(crate) accepted: Vec<String>,
    pub(crate) spool: Option<Spool>,
}

impl Txn {
    /// Adds a recipient unless the same one is already there.
    pub(crate) fn add(&mut self, recipient: Recipient) {
        let dup = self
            .recipients
            .iter()
            .any(|r| r.address == recipient.address && r.route == recipient.route);
        if !dup {
            self.recipients.push(recipient);
        }
    }
}

/// An event taken out of the session's step, so the read buffer is free again.
enum Next {
    Act(Action),
    Mail(ReversePath),
    Rcpt(ForwardPath),
    Data,
    End,
    Aborted(Action),
    Auth(Credentials),
}

pub(crate) struct Conn {
    stream: Stream,
    pub(crate) peer: SocketAddr,
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: Session,
    buf: Vec<u8>,
    start: usize,
    out: Vec<u8>,
    pub(crate) txn: Txn,
    born: Instant,
    phase_start: Instant,
    pub(crate) data_started: Instant,
    shutdown: Shutdown,
}

/// Serves one accepted connection to its end.
pub(crate) async fn serve(accepted: Accepted<Kind>, shared: Arc<Shared>, slot: ClientSlot) {
    let Accepted {
        stream,
        peer,
        kind,
        permit: _permit,
        shutdown,
    } = accepted;
    let _ = stream.set_nodelay(true);
    let config: Arc<SessionConfig> = match kind {
        Kind::Mx => Arc::clone(&shared.mx),
        Kind::Submission => Arc::clone(&shared.submission),
    };
    let now = Instant::now();
    let mut conn = Conn {
        stream: Stream::Plain(stream),
        peer,
        shared,
        session: Session::new(config),
        buf: Vec::with_capacity(READ_CHUNK),
        start: 0,
        out: Vec::with_capacity(512),
        txn: Txn::default(),
        born: now,
        phase_start: now,
        data_started: now,
        shutdown,
    };
    let result = if slot.over_limit() {
        tracing::info!("{peer}: too many connections from this address");
        let reply = Reply::new(
            421,
            stoa_smtp_proto::EnhancedStatus::new(4, 7, 0),
            "Error: too many connections from your address",
        );
        reply.write_to(&mut conn.out);
        conn.flush().await
    } else {
        conn.run().await
    };
    if let Err(e) = result {
        tracing::debug!("{peer}: connection ended: {e}");
    }
    if let Some(spool) = conn.txn.spool.take() {
        conn.shared.queue.discard(spool);
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), conn.stream.shutdown()).await;
    tracing::debug!("{peer}: session closed");
}

impl Conn {
    async fn run(&mut self) -> io::Result<()> {
        self.session.greeting().write_to(&mut self.out);
        self.flush().await?;
        self.phase_start = Instant::now();
        loop {
            if self.process().await? == Flow::Close {
                return self.flush().await;
            }
            self.flush().await?;
            let hostname = self.session.config().hostname.clone();
            match self.read().await? {
                ReadEnd::Data => {}
                ReadEnd::Eof => return Ok(()),
                ReadEnd::Timeout => {
                    tracing::info!("{}: timeout", self.peer);
                    Reply::timeout(&hostname).write_to(&mut self.out);
                    return self.flush().await;
                }
                ReadEnd::Draining => {
                    Reply::shutting_down(&hostname).write_to(&mut self.out);
                    return self.flush().await;
                }
            }
        }
    }

    /// Runs the session over every unread byte; stops when it needs more input or
    /// the connection must close.
    async fn process(&mut self) -> io::Result<Flow> {
        loop {
            let step = self.session.advance(&self.buf[self.start..]);
            let consumed = step.consumed;
            let next = match step.event {
                Event::NeedMore => None,
                Event::MessageData(data) => {
                    if let Some(spool) = &mut self.txn.spool {
                        spool.write(data);
                    }
                    self.start += consumed;
                    continue;
                }
                Event::Action(action) => Some(Next::Act(action)),
                Event::Mail { from, .. } => Some(Next::Mail(from)),
                Event::Rcpt { to } => Some(Next::Rcpt(to)),
                Event::Data => Some(Next::Data),
                Event::MessageEnd { .. } => Some(Next::End),
                Event::MessageAborted { error, action } => {
                    tracing::info!("{}: message refused: {error}", self.peer);
                    Some(Next::Aborted(action))
                }
                Event::Auth(credentials) => Some(Next::Auth(credentials)),
            };
            self.start += consumed;
            let Some(next) = next else {
                return Ok(Flow::Continue);
            };
            self.phase_start = Instant::now();
            let action = match next {
                Next::Act(action) => action,
                Next::Aborted(action) => {
                    self.discard_spool();
                    action
                }
                Next::Mail(from) => {
                    let decision = self.on_mail(from);
                    self.session.decide(decision)
                }
                Next::Rcpt(to) => {
                    let decision = self.on_rcpt(to).await;
                    self.session.decide(decision)
                }
                Next::Data => {
                    let decision = self.on_data();
                    self.session.decide(decision)
                }
                Next::End => {
                    let decision = self.on_end().await;
                    self.session.decide(decision)
                }
                Next::Auth(credentials) => {
                    let decision = self.on_auth(credentials).await;
                    self.session.decide(decision)
                }
            };
            self.phase_start = Instant::now();
            if self.act(action).await? == Flow::Close {
                return Ok(Flow::Close);
            }
        }
    }

    async fn act(&mut self, action: Action) -> io::Result<Flow> {
        match action {
            Action::Reply(reply) => {
                if !reply.is_positive() && self.session.delay_errors() {
                    self.flush().await?;
                    tokio::time::sleep(ERROR_DELAY).await;
                }
                reply.write_to(&mut self.out);
                Ok(Flow::Continue)
            }
            Action::Close(reply) => {
                reply.write_to(&mut self.out);
                Ok(Flow::Close)
            }
            Action::StartTls { reply, discarded } => {
                reply.write_to(&mut self.out);
                self.flush().await?;
                if discarded > 0 {
                    tracing::info!("{}: {discarded} bytes after STARTTLS discarded", self.peer);
                }
                // The session consumed everything buffered: nothing read in clear
                // text survives into the TLS session.
                self.buf.clear();
                self.start = 0;
                let Some(acceptor) = self.shared.tls.clone() else {
                    return Ok(Flow::Close);
                };
                let timeout = self.shared.config.limits.command_timeout;
                match tokio::time::timeout(timeout, self.stream.start_tls(&acceptor)).await {
                    Ok(Ok(())) => Ok(Flow::Continue),
                    Ok(Err(e)) => Err(e),
                    Err(_) => Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "TLS handshake timed out",
                    )),
                }
            }
        }
    }

    /// The deadline of the current wait for input.
    fn deadline(&self) -> Instant {
        let limits = &self.shared.config.limits;
        let phase = if self.session.in_data() {
            let received = self.txn.spool.as_ref().map_or(0, Spool::len);
            self.data_started
                + limits.data_timeout
                + Duration::from_secs(received / limits.data_min_rate.max(1))
        } else {
            self.phase_start + limits.command_timeout
        };
        phase.min(self.born + limits.session_timeout)
    }

    async fn read(&mut self) -> io::Result<ReadEnd> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let in_data = self.session.in_data();
        if !in_data && self.shutdown.is_triggered() {
            return Ok(ReadEnd::Draining);
        }
        self.buf.reserve(READ_CHUNK);
        let deadline = tokio::time::Instant::from_std(self.deadline());
        let (stream, buf, shutdown) = (&mut self.stream, &mut self.buf, &mut self.shutdown);
        tokio::select! {
            read = stream.read_buf(buf) => match read? {
                0 => Ok(ReadEnd::Eof),
                _ => Ok(ReadEnd::Data),
            },
            _ = tokio::time::sleep_until(deadline) => Ok(ReadEnd::Timeout),
            _ = shutdown.wait(), if !in_data => Ok(ReadEnd::Draining),
        }
    }

    /// Writes the queued replies out.
    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let timeout = self.shared.config.limits.send_timeout;
        self.stream.write_all_within(&self.out, timeout).await?;
        self.out.clear();
        Ok(())
    }

    /// Throws away the message being spooled, if any.
    pub(crate) fn discard_spool(&mut self) {
        if let Some(spool) = self.txn.spool.take() {
            self.shared.queue.discard(spool);
        }
    }

    /// Whether the client's address is in a trusted network.
    pub(crate) fn trusted(&self) -> bool {
        let ip = self.peer.ip();
        self.shared
            .config
            .trusted_networks
            .iter()
            .any(|net| net.contains(&ip))
    }

    /// A decision's text for the log.
    pub(crate) fn decision_log(decision: &Decision) -> String {
        match decision {
            Decision::Accept => "accepted".into(),
            Decision::AcceptWith(r) | Decision::Reject(r) | Decision::Close(r) => r.to_string(),
        }
    }
}
