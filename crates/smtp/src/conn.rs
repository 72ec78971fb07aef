//! One SMTP connection: the read → advance → decide → reply loop around
//! [`stoa_smtp_proto::Session`], its deadlines, STARTTLS, and the transaction it
//! builds (sender, recipients, the message being spooled).
//!
//! [`Conn`] holds the connection's [`LineIo`] (netkit's owner of the socket, the read
//! buffer and the reply queue). The loop hands every unread byte to the session, acts
//! on each event (policy decisions are in `policy.rs`), writes the replies out once
//! the buffer yields nothing more, and only then reads again: the order RFC 2920 asks of a pipelining server and the one the
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

use stoa_netkit::line::{Flow, LineIo, ReadEnd};
use stoa_netkit::server::{Accepted, ClientSlot};
use stoa_netkit::shutdown::Shutdown;
use stoa_netkit::tls::Stream;
use stoa_smtp_proto::session::{Action, Config as SessionConfig, Credentials};
use stoa_smtp_proto::{Decision, Event, ForwardPath, Reply, ReversePath, Session};

use crate::queue::{Recipient, Spool};
use crate::shared::Shared;

/// Bytes read at a time. Commands are at most `max_line` (2 KiB) and the DATA
/// decoder consumes everything it is given, so the buffer stays near this size.
pub(crate) const READ_CHUNK: usize = 16 * 1024;

/// The read buffer's bound. The session leaves less than one command line
/// (`max_line`) unread and each read reserves [`READ_CHUNK`] after it, so the buffer
/// always stayed within twice the chunk; that size is the limit, and reads are as
/// large as they were.
pub(crate) const MAX_BUFFERED: usize = 2 * READ_CHUNK;

/// How long the close of the write side may take once the session is over.
pub(crate) const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Pause before each error reply once the client passed the soft error limit
/// (Postfix's `smtpd_error_sleep_time`).
pub(crate) const ERROR_DELAY: Duration = Duration::from_secs(1);

/// What the listener is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Mail exchange: anyone may send to local users.
    Mx,
    /// Submission: MAIL only after AUTH.
    Submission,
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
    io: LineIo,
    pub(crate) peer: SocketAddr,
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: Session,
    pub(crate) txn: Txn,
    born: Instant,
    phase_start: Instant,
    pub(crate) data_started: Instant,
    /// The wait owed before the reply to the AUTH just refused (the throttle's).
    pub(crate) auth_delay: Option<Duration>,
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
        io: LineIo::new(Stream::Plain(stream), READ_CHUNK, MAX_BUFFERED),
        peer,
        shared,
        session: Session::new(config),
        txn: Txn::default(),
        born: now,
        phase_start: now,
        data_started: now,
        auth_delay: None,
        shutdown,
    };
    let result = if slot.over_limit() {
        tracing::info!("{peer}: too many connections from this address");
        let reply = Reply::new(
            421,
            stoa_smtp_proto::EnhancedStatus::new(4, 7, 0),
            "Error: too many connections from your address",
        );
        reply.write_to(conn.io.out());
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
    let _ = conn.io.shutdown(CLOSE_TIMEOUT).await;
    tracing::debug!("{peer}: session closed");
}

impl Conn {
    async fn run(&mut self) -> io::Result<()> {
        self.session.greeting().write_to(self.io.out());
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
                    Reply::timeout(&hostname).write_to(self.io.out());
                    return self.flush().await;
                }
                ReadEnd::Draining => {
                    Reply::shutting_down(&hostname).write_to(self.io.out());
                    return self.flush().await;
                }
            }
        }
    }

    /// Runs the session over every unread byte; stops when it needs more input or
    /// the connection must close.
    async fn process(&mut self) -> io::Result<Flow> {
        loop {
            let step = self.session.advance(self.io.unread());
            let consumed = step.consumed;
            let next = match step.event {
                Event::NeedMore => None,
                Event::MessageData(data) => {
                    if let Some(spool) = &mut self.txn.spool {
                        spool.write(data);
                    }
                    self.io.consume(consumed);
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
            self.io.consume(consumed);
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
                    let decision = self.wait_auth_delay(decision).await?;
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
                reply.write_to(self.io.out());
                Ok(Flow::Continue)
            }
            Action::Close(reply) => {
                reply.write_to(self.io.out());
                Ok(Flow::Close)
            }
            Action::StartTls { reply, discarded } => {
                reply.write_to(self.io.out());
                self.flush().await?;
                if discarded > 0 {
                    tracing::info!("{}: {discarded} bytes after STARTTLS discarded", self.peer);
                }
                // The session consumed everything buffered, and the upgrade drops
                // it: nothing read in clear text survives into the TLS session.
                let Some(acceptor) = self.shared.tls.clone() else {
                    return Ok(Flow::Close);
                };
                let timeout = self.shared.config.limits.command_timeout;
                self.io.start_tls(&acceptor, timeout).await?;
                Ok(Flow::Continue)
            }
        }
    }

    /// Waits out the delay a refused AUTH owes ([`Conn::auth_delay`]) on the event
    /// loop's timer, after the replies queued before it; shutdown ends the wait with
    /// `421 4.3.2` instead of `decision`.
    pub(crate) async fn wait_auth_delay(&mut self, decision: Decision) -> io::Result<Decision> {
        let Some(delay) = self.auth_delay.take() else {
            return Ok(decision);
        };
        self.flush().await?;
        tokio::select! {
            () = tokio::time::sleep(delay) => Ok(decision),
            () = self.shutdown.wait() => {
                let hostname = &self.session.config().hostname;
                Ok(Decision::Close(Reply::shutting_down(hostname)))
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

    /// Waits for input until the deadline; a message under way is not cut short by
    /// shutdown.
    async fn read(&mut self) -> io::Result<ReadEnd> {
        let deadline = self.deadline();
        let shutdown = (!self.session.in_data()).then_some(&mut self.shutdown);
        self.io.read(deadline, shutdown).await
    }

    /// Writes the queued replies out.
    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        self.io.flush(self.shared.config.limits.send_timeout).await
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
