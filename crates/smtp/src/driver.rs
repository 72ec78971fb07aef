//! The connection driver both dialects share: the read → advance → decide → reply
//! loop around [`stoa_smtp_proto::Session`], its deadlines, STARTTLS, shutdown, and
//! netkit's [`Handler`] that spawns it on every accepted connection.
//!
//! What differs between the SMTP server and the LMTP server is a [`Policy`],
//! implemented by each server's shared state: which session settings a listener
//! gets, the transaction a connection builds (a queue spool, or the message in
//! memory), and the answers to MAIL, RCPT, DATA, AUTH and the end of a message
//! (SMTP queues once and answers once; LMTP stores, then answers once per
//! recipient). The greeting and LHLO are the codec's (`Config::dialect`). [`Conn`]
//! is generic over the policy, so every hook is a direct call: no trait object and
//! no allocation per command.
//!
//! [`Conn`] holds the connection's [`LineIo`] (netkit's owner of the socket, the read
//! buffer and the reply queue). The loop hands every unread byte to the session, acts
//! on each event, writes the replies out once the buffer yields nothing more, and only
//! then reads again: the order RFC 2920 asks of a pipelining server and the one the
//! session's unauthorised-pipelining check relies on.
//!
//! Deadlines: each command must arrive within `command_timeout` of the previous
//! answer (a trickled line does not extend it); a message within `data_timeout` plus
//! one second per `data_min_rate` bytes received; everything within
//! `session_timeout`; each write within `send_timeout`. A client past a deadline gets
//! `421 4.4.2` and the connection closes. On shutdown a connection waiting for a
//! command gets `421 4.3.2`; one in the middle of a message finishes it first.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stoa_netkit::line::{Flow, LineIo, ReadEnd};
use stoa_netkit::server::{
    Accepted, ClientCounts, ClientSlot, Handler, Listeners, RuntimeModel, WorkerScope,
};
use stoa_netkit::shutdown::Shutdown;
use stoa_netkit::tls::Stream;
use stoa_smtp_proto::session::{Action, Config as SessionConfig, Credentials};
use stoa_smtp_proto::{Decision, EnhancedStatus, Event, ForwardPath, Reply, ReversePath, Session};

use crate::config::Limits;
use crate::metrics::{self, Dialect, Reject};
use crate::server::Error;

/// Bytes read at a time. Commands are at most `max_line` (2 KiB) and the DATA
/// decoder consumes everything it is given, so the buffer stays near this size.
const READ_CHUNK: usize = 16 * 1024;

/// The read buffer's bound. The session leaves less than one command line
/// (`max_line`) unread and each read reserves [`READ_CHUNK`] after it, so the buffer
/// always stayed within twice the chunk; that size is the limit, and reads are as
/// large as they were.
const MAX_BUFFERED: usize = 2 * READ_CHUNK;

/// How long the close of the write side may take once the session is over.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Pause before each error reply once the client passed the soft error limit
/// (Postfix's `smtpd_error_sleep_time`).
const ERROR_DELAY: Duration = Duration::from_secs(1);

/// What a server of one dialect adds to the driver: implemented by its shared
/// state, one value for every worker and connection.
///
/// The hooks get the whole connection, so they can read the session (HELO name,
/// authenticated user) and keep their transaction in [`Conn::txn`]; their futures
/// are `Send` because connections are spawned.
pub(crate) trait Policy: Send + Sync + Sized + 'static {
    /// What distinguishes one listener from another (MX or submission).
    type Kind: Clone + Send + Sync + 'static;
    /// The mail transaction a connection builds.
    type Txn: Default + Send + 'static;
    /// The decisions at the end of a message, one per reply the session waits for.
    type Decisions: Iterator<Item = Decision> + Send;

    /// The protocol's name in thread names and netkit's log lines.
    const NAME: &'static str;
    /// Put before some of the driver's log lines (`""` or `"LMTP "`).
    const LOG_PREFIX: &'static str;
    /// Which sessions it counts ([`crate::metrics`]); SMTP's refusals only are
    /// counted by reason.
    const DIALECT: Dialect;

    /// The session settings of a connection from a `kind` listener.
    fn session_config(&self, kind: &Self::Kind) -> Arc<SessionConfig>;
    /// The connection limits and deadlines.
    fn limits(&self) -> &Limits;
    /// How long a drain waits for the connections still open.
    fn grace(&self) -> Duration;
    /// The STARTTLS acceptor, when STARTTLS is offered.
    fn tls(&self) -> Option<&tokio_rustls::TlsAcceptor>;

    /// A piece of the message, as the decoder hands it out.
    fn message_data(txn: &mut Self::Txn, data: &[u8]);
    /// Bytes of the message received so far (for the DATA deadline).
    fn received(txn: &Self::Txn) -> u64;
    /// The message under way is refused, or the connection ends: drop what was
    /// received of it.
    fn drop_message(conn: &mut Conn<Self>);

    /// MAIL FROM.
    fn on_mail(conn: &mut Conn<Self>, from: ReversePath) -> Decision;
    /// RCPT TO.
    fn on_rcpt(conn: &mut Conn<Self>, to: ForwardPath) -> impl Future<Output = Decision> + Send;
    /// DATA (set [`Conn::data_started`] when accepting).
    fn on_data(conn: &mut Conn<Self>) -> Decision;
    /// The final dot: the decisions, in the order of the replies.
    fn on_end(conn: &mut Conn<Self>) -> impl Future<Output = Self::Decisions> + Send;
    /// AUTH; a refusal may set [`Conn::auth_delay`], which the driver waits out
    /// before the reply.
    fn on_auth(
        conn: &mut Conn<Self>,
        credentials: Credentials,
    ) -> impl Future<Output = Decision> + Send;
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

/// One connection of a `P` server.
pub(crate) struct Conn<P: Policy> {
    io: LineIo,
    pub(crate) peer: SocketAddr,
    pub(crate) shared: Arc<P>,
    pub(crate) session: Session,
    pub(crate) txn: P::Txn,
    born: Instant,
    phase_start: Instant,
    pub(crate) data_started: Instant,
    /// The wait owed before the reply to the AUTH just refused (the throttle's).
    pub(crate) auth_delay: Option<Duration>,
    shutdown: Shutdown,
}

/// Counts a refusal by the SMTP server (LMTP's are not counted by reason).
fn count_rejected<P: Policy>(reason: Reject) {
    if P::DIALECT == Dialect::Smtp {
        metrics::count_rejected(reason);
    }
}

/// Serves one accepted connection to its end.
async fn serve<P: Policy>(accepted: Accepted<P::Kind>, shared: Arc<P>, slot: ClientSlot) {
    let Accepted {
        stream,
        peer,
        kind,
        permit: _permit,
        shutdown,
    } = accepted;
    let Some(stream) = stoa_netkit::accept::register(stream, peer) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let now = Instant::now();
    let mut conn = Conn {
        io: LineIo::new(Stream::Plain(stream), READ_CHUNK, MAX_BUFFERED),
        peer,
        session: Session::new(shared.session_config(&kind)),
        shared,
        txn: P::Txn::default(),
        born: now,
        phase_start: now,
        data_started: now,
        auth_delay: None,
        shutdown,
    };
    let prefix = P::LOG_PREFIX;
    metrics::count_session(P::DIALECT);
    let result = if slot.over_limit() {
        tracing::info!("{peer}: too many {prefix}connections from this address");
        count_rejected::<P>(Reject::Throttled);
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
        tracing::debug!("{peer}: {prefix}connection ended: {e}");
    }
    P::drop_message(&mut conn);
    let _ = conn.io.shutdown(CLOSE_TIMEOUT).await;
    tracing::debug!("{peer}: {prefix}session closed");
}

impl<P: Policy> Conn<P> {
    async fn run(&mut self) -> io::Result<()> {
        self.session.greeting().write_to(self.io.out());
        self.flush().await?;
        self.phase_start = Instant::now();
        loop {
            if self.process().await? == Flow::Close {
                return self.flush().await;
            }
            self.flush().await?;
            let end = self.read().await?;
            let hostname = &self.session.config().hostname;
            match end {
                ReadEnd::Data => {}
                ReadEnd::Eof => return Ok(()),
                ReadEnd::Timeout => {
                    tracing::info!("{}: {}timeout", self.peer, P::LOG_PREFIX);
                    Reply::timeout(hostname).write_to(self.io.out());
                    return self.flush().await;
                }
                ReadEnd::Draining => {
                    Reply::shutting_down(hostname).write_to(self.io.out());
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
                    P::message_data(&mut self.txn, data);
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
                    count_rejected::<P>(Reject::of_aborted(&error));
                    Some(Next::Aborted(action))
                }
                Event::Auth(credentials) => Some(Next::Auth(credentials)),
            };
            self.io.consume(consumed);
            let Some(next) = next else {
                return Ok(Flow::Continue);
            };
            if self.answer(next).await? == Flow::Close {
                return Ok(Flow::Close);
            }
            // The next command's deadline runs from here.
            self.phase_start = Instant::now();
        }
    }

    /// Decides one event through the policy and queues the replies.
    async fn answer(&mut self, next: Next) -> io::Result<Flow> {
        let decision = match next {
            Next::Act(action) => return self.act(action).await,
            Next::Aborted(action) => {
                P::drop_message(self);
                return self.act(action).await;
            }
            Next::End => return self.end_of_message().await,
            Next::Mail(from) => P::on_mail(self, from),
            Next::Rcpt(to) => P::on_rcpt(self, to).await,
            Next::Data => P::on_data(self),
            Next::Auth(credentials) => {
                let decision = P::on_auth(self, credentials).await;
                self.wait_auth_delay(decision).await?
            }
        };
        let action = self.session.decide(decision);
        self.act(action).await
    }

    /// The final dot: the policy's decisions, one per reply the session waits for
    /// (one in SMTP, one per accepted recipient in LMTP).
    async fn end_of_message(&mut self) -> io::Result<Flow> {
        let mut decisions = P::on_end(self).await;
        // A shortfall (which would be a bug in the policy) is answered as a local
        // error rather than left pending.
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
                let Some(acceptor) = self.shared.tls().cloned() else {
                    return Ok(Flow::Close);
                };
                let timeout = self.shared.limits().command_timeout;
                self.io.start_tls(&acceptor, timeout).await?;
                Ok(Flow::Continue)
            }
        }
    }

    /// Waits out the delay a refused AUTH owes ([`Conn::auth_delay`]) on the event
    /// loop's timer, after the replies queued before it; shutdown ends the wait with
    /// `421 4.3.2` instead of `decision`.
    async fn wait_auth_delay(&mut self, decision: Decision) -> io::Result<Decision> {
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
        let limits = self.shared.limits();
        let phase = if self.session.in_data() {
            let received = P::received(&self.txn);
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
    async fn flush(&mut self) -> io::Result<()> {
        self.io.flush(self.shared.limits().send_timeout).await
    }

    /// A decision's text for the log.
    pub(crate) fn decision_log(decision: &Decision) -> String {
        match decision {
            Decision::Accept => "accepted".into(),
            Decision::AcceptWith(r) | Decision::Reject(r) | Decision::Close(r) => r.to_string(),
        }
    }
}

/// netkit's view of a `P` server: every accepted connection takes a per-client
/// slot and is spawned as the driver.
struct Driver<P> {
    policy: Arc<P>,
    /// Connections per client address (and in all), across workers.
    clients: Arc<ClientCounts>,
}

impl<P: Policy> Handler for Driver<P> {
    type Kind = P::Kind;
    type Worker = ();
    const NAME: &'static str = P::NAME;

    fn max_connections(&self) -> usize {
        self.policy.limits().max_connections
    }

    fn grace(&self) -> Duration {
        self.policy.grace()
    }

    /// Every open connection: on shutdown those waiting for a command get `421`
    /// and close, those receiving a message finish it.
    fn in_flight(&self) -> usize {
        self.clients.open()
    }

    fn start_worker(self: &Arc<Self>, _scope: WorkerScope) {}

    fn accept(self: &Arc<Self>, _worker: &Arc<()>, conn: Accepted<P::Kind>) {
        let slot = self.clients.enter(conn.peer.ip());
        tokio::spawn(serve(conn, Arc::clone(&self.policy), slot));
    }
}

/// Binds each of `addrs` for `kind` connections on every worker; the bound
/// addresses (port 0 resolved), in order.
pub(crate) fn bind<K: Clone>(
    listeners: &mut Listeners<K>,
    addrs: &[SocketAddr],
    kind: &K,
) -> Result<Vec<SocketAddr>, Error> {
    listeners
        .bind_all(addrs, kind)
        .map_err(|(addr, source)| Error::Listen { addr, source })
}

/// Serves `shared`'s listeners, one event loop per core, until `shutdown` fires,
/// then drains within [`Policy::grace`]. Blocks the calling thread.
pub(crate) fn run<P: Policy>(
    shared: &Arc<P>,
    listeners: Listeners<P::Kind>,
    shutdown: Shutdown,
) -> Result<(), Error> {
    let per_client = shared.limits().max_connections_per_client;
    let driver = Arc::new(Driver {
        policy: Arc::clone(shared),
        clients: Arc::new(ClientCounts::new(per_client)),
    });
    stoa_netkit::server::run(&driver, listeners, RuntimeModel::PerCore, shutdown)
        .map_err(Error::Workers)
}
