//! One LMTP connection: the read → advance → decide → reply loop around the
//! session in its LMTP dialect, with SMTP's deadlines, and the transaction it
//! builds (the accepted recipients in RCPT order, the message in memory).
//!
//! As in SMTP's `conn.rs`, every unread byte goes to the session, the replies are
//! written out once it needs more input, and only then is more read (the order
//! pipelining relies on). The difference is the end of a message: the store is
//! written first (`deliver.rs`), then one decision per accepted recipient is handed
//! to the session, each giving its reply.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stoa_directory::User;
use stoa_netkit::line::{Flow, LineIo, ReadEnd};
use stoa_netkit::server::{Accepted, ClientSlot};
use stoa_netkit::shutdown::Shutdown;
use stoa_netkit::tls::Stream;
use stoa_smtp_proto::session::Action;
use stoa_smtp_proto::{Decision, EnhancedStatus, Event, ForwardPath, Reply, ReversePath, Session};

use super::server::Shared;
use crate::conn::{CLOSE_TIMEOUT, ERROR_DELAY, MAX_BUFFERED, READ_CHUNK};

/// One accepted RCPT: the address as the client gave it (for the reply) and the
/// local users it resolved to.
#[derive(Debug)]
pub(super) struct Rcpt {
    pub(super) address: String,
    pub(super) users: Vec<User>,
}

/// The mail transaction under way.
#[derive(Debug, Default)]
pub(super) struct Txn {
    pub(super) from: Option<ReversePath>,
    /// Every accepted RCPT, duplicates included: each gets its own reply.
    pub(super) rcpts: Vec<Rcpt>,
    /// The message: the `Received:` field, then the data (at most the size limit:
    /// the decoder hands out nothing beyond it).
    pub(super) message: Vec<u8>,
}

/// An event taken out of the session's step, so the read buffer is free again.
enum Next {
    Act(Action),
    Mail(ReversePath),
    Rcpt(ForwardPath),
    Data,
    End,
    Aborted(Action),
    Auth,
}

pub(super) struct Conn {
    io: LineIo,
    pub(super) peer: SocketAddr,
    pub(super) shared: Arc<Shared>,
    pub(super) session: Session,
    pub(super) txn: Txn,
    born: Instant,
    phase_start: Instant,
    pub(super) data_started: Instant,
    shutdown: Shutdown,
}

/// Serves one accepted connection to its end.
pub(super) async fn serve(accepted: Accepted<()>, shared: Arc<Shared>, slot: ClientSlot) {
    let Accepted {
        stream,
        peer,
        permit: _permit,
        shutdown,
        ..
    } = accepted;
    let _ = stream.set_nodelay(true);
    let now = Instant::now();
    let mut conn = Conn {
        io: LineIo::new(Stream::Plain(stream), READ_CHUNK, MAX_BUFFERED),
        peer,
        session: Session::new(Arc::clone(&shared.session)),
        shared,
        txn: Txn::default(),
        born: now,
        phase_start: now,
        data_started: now,
        shutdown,
    };
    let result = if slot.over_limit() {
        tracing::info!("{peer}: too many LMTP connections from this address");
        let reply = Reply::new(
            421,
            EnhancedStatus::new(4, 7, 0),
            "Error: too many connections from your address",
        );
        reply.write_to(conn.io.out());
        conn.flush().await
    } else {
        conn.run().await
    };
    if let Err(e) = result {
        tracing::debug!("{peer}: LMTP connection ended: {e}");
    }
    let _ = conn.io.shutdown(CLOSE_TIMEOUT).await;
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
                    tracing::info!("{}: LMTP timeout", self.peer);
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
                    self.txn.message.extend_from_slice(data);
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
                Event::Auth(_) => Some(Next::Auth),
            };
            self.io.consume(consumed);
            let Some(next) = next else {
                return Ok(Flow::Continue);
            };
            self.phase_start = Instant::now();
            if self.step(next).await? == Flow::Close {
                return Ok(Flow::Close);
            }
            self.phase_start = Instant::now();
        }
    }

    /// Answers one event: decides it (the end of a message once per recipient) and
    /// queues the replies.
    async fn step(&mut self, next: Next) -> io::Result<Flow> {
        let decision = match next {
            Next::Act(action) => return self.act(action).await,
            Next::Aborted(action) => {
                self.txn = Txn::default();
                return self.act(action).await;
            }
            Next::End => return self.end_of_message().await,
            Next::Mail(from) => self.on_mail(from),
            Next::Rcpt(to) => self.on_rcpt(to).await,
            Next::Data => self.on_data(),
            // AUTH is disabled, so the session never asks; refuse if it does.
            Next::Auth => Decision::Reject(Reply::auth_failed()),
        };
        let action = self.session.decide(decision);
        self.act(action).await
    }

    /// The final dot: deliver, then one reply per accepted recipient, in order.
    async fn end_of_message(&mut self) -> io::Result<Flow> {
        let mut decisions = self.on_end().await.into_iter();
        // The session counts the recipients; a shortfall (which would be a bug
        // here) is answered as a local error rather than left pending.
        while self.session.pending_decisions() > 0 {
            let decision = decisions
                .next()
                .unwrap_or_else(|| Decision::Reject(Reply::local_error()));
            let action = self.session.decide(decision);
            if self.act(action).await? == Flow::Close {
                return Ok(Flow::Close);
            }
        }
        Ok(Flow::Continue)
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
            // STARTTLS is never offered over LMTP.
            Action::Close(reply) | Action::StartTls { reply, .. } => {
                reply.write_to(self.io.out());
                Ok(Flow::Close)
            }
        }
    }

    /// The deadline of the current wait for input (SMTP's rules).
    fn deadline(&self) -> Instant {
        let limits = &self.shared.config.limits;
        let phase = if self.session.in_data() {
            let received = self.txn.message.len() as u64;
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

    async fn flush(&mut self) -> io::Result<()> {
        self.io.flush(self.shared.config.limits.send_timeout).await
    }
}
