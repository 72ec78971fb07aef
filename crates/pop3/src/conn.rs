//! One POP3 connection: the read → advance → act → write loop around
//! [`stoa_pop3_proto::Session`], its deadlines, STLS and POP3S, and the mailbox it
//! holds once logged in.
//!
//! [`Conn`] holds the connection's [`LineIo`] (netkit's owner of the socket, the read
//! buffer and the response queue). The loop hands every unread byte to the session
//! and acts on each event: a login (`login.rs`), a message to stream (`retrieve.rs`),
//! the deletions at QUIT (`update.rs`). Responses
//! are queued and written once the buffer yields nothing more (or the queue passes
//! [`OUT_HIGH`]), so a pipelining client's batch is answered in one write.
//!
//! Deadlines: before login each command must come within `login_timeout` of the
//! previous one, after it within `idle_timeout` (the autologout timer; the session is
//! closed with `-ERR` and without UPDATE, so nothing is deleted); everything within
//! `session_timeout`; each write within `send_timeout`, and a TLS handshake within
//! `login_timeout`. On shutdown a session waiting for a command gets
//! `-ERR [SYS/TEMP] Server shutting down` and nothing is deleted; a retrieval or a
//! QUIT under way finishes first.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stoa_mailstore::MailboxSession;
use stoa_netkit::line::{Flow, LineIo, ReadEnd};
use stoa_netkit::server::{Accepted, ClientSlot};
use stoa_netkit::shutdown::Shutdown;
use stoa_netkit::throttle::Attempt;
use stoa_netkit::tls::Stream;
use stoa_pop3_proto::{Action, Event, Phase, Response, ResponseCode, Session};

use crate::login::Auth;
use crate::proxy::LoggedIn;
use crate::shared::Shared;

/// Bytes read at a time. Commands are at most 255 octets (SASL lines 1 KiB), and
/// the session consumes every complete line before the next read, so the buffer
/// stays near this size.
const READ_CHUNK: usize = 4 * 1024;

/// The read buffer's bound. The session leaves less than one command or SASL line
/// unread and each read reserves [`READ_CHUNK`] after it, so the buffer always stayed
/// within twice the chunk; that size is the limit, and reads are as large as they
/// were.
const MAX_BUFFERED: usize = 2 * READ_CHUNK;

/// How long the close of the write side may take once the session is over.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Queued response bytes past which the loop writes them out before taking the next
/// pipelined command: a batch of LISTs over a large mailbox must not grow the queue
/// without bound.
pub(crate) const OUT_HIGH: usize = 64 * 1024;

/// What the listener is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// POP3: plain text, STLS when there is a certificate.
    Plain,
    /// POP3S: TLS from the first byte.
    Tls,
}

/// What the loop does after the input it has.
enum Next {
    /// Read more.
    Read,
    /// Write out what is queued and close.
    Close,
    /// The proxy logged the user in at a store host: relay from now on.
    Relay(LoggedIn),
}

pub(crate) struct Conn {
    pub(crate) io: LineIo,
    /// The client: the peer, or the client a trusted proxy forwarded.
    pub(crate) peer: SocketAddr,
    /// The client's place in the per-address count.
    slot: ClientSlot,
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: Session,
    /// The locked mailbox, from login to QUIT. Shared only with the blocking task
    /// reading one of its messages, which the loop always awaits.
    pub(crate) mailbox: Option<Arc<MailboxSession>>,
    /// The wait before the next `-ERR [AUTH]`, set when a login fails.
    pub(crate) login_delay: Option<Duration>,
    /// The login being checked, counted by the throttle until it ends.
    pub(crate) attempt: Option<Attempt>,
    born: Instant,
    phase_start: Instant,
    shutdown: Shutdown,
}

/// A session for a client at `peer` (TLS from the start when `tls`): secure for
/// passwords on the configured networks, forwarding allowed from trusted proxies.
fn new_session(shared: &Shared, peer: SocketAddr, tls: bool) -> Session {
    let config = Arc::clone(&shared.session);
    let mut session = match tls {
        true => Session::new_tls(config),
        false => Session::new(config),
    };
    session.set_secure_channel(shared.is_secure(peer.ip()));
    session.allow_forwarding(shared.is_trusted_proxy(peer.ip()));
    session
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
    let Some(stream) = stoa_netkit::accept::register(stream, peer) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let now = Instant::now();
    let session = new_session(&shared, peer, false);
    let mut conn = Conn {
        io: LineIo::new(Stream::Plain(stream), READ_CHUNK, MAX_BUFFERED),
        peer,
        slot,
        shared,
        session,
        mailbox: None,
        login_delay: None,
        attempt: None,
        born: now,
        phase_start: now,
        shutdown,
    };
    let result = if conn.slot.over_limit() {
        tracing::info!("{peer}: too many connections from this address");
        let response = Response::err_code(
            ResponseCode::SysTemp,
            "Too many connections from your address",
        );
        response.write_to(conn.io.out());
        conn.flush().await
    } else {
        conn.start(kind).await
    };
    if let Err(e) = result {
        tracing::debug!("{peer}: connection ended: {e}");
    }
    // Whatever happened, a session that did not commit at QUIT deletes nothing:
    // dropping it releases the mailbox lock.
    conn.mailbox = None;
    let _ = conn.io.shutdown(CLOSE_TIMEOUT).await;
    tracing::debug!("{peer}: session closed");
}

impl Conn {
    /// The TLS handshake of a POP3S connection, then the session.
    async fn start(&mut self, kind: Kind) -> io::Result<()> {
        if kind == Kind::Tls {
            self.handshake().await?;
            self.session = new_session(&self.shared, self.peer, true);
        }
        self.run().await
    }

    async fn run(&mut self) -> io::Result<()> {
        self.session.greeting().write_to(self.io.out());
        self.flush().await?;
        self.phase_start = Instant::now();
        loop {
            match self.process().await? {
                Next::Read => {}
                Next::Close => return self.flush().await,
                Next::Relay(session) => return self.relay(session).await,
            }
            self.flush().await?;
            match self.read().await? {
                ReadEnd::Data => {}
                ReadEnd::Eof => return Ok(()),
                ReadEnd::Timeout => {
                    tracing::info!("{}: autologout after {:?}", self.peer, self.idle_limit());
                    Response::autologout().write_to(self.io.out());
                    return self.flush().await;
                }
                ReadEnd::Draining => {
                    Response::shutting_down().write_to(self.io.out());
                    return self.flush().await;
                }
            }
        }
    }

    /// Runs the session over every unread byte; stops when it needs more input or
    /// the connection must close.
    async fn process(&mut self) -> io::Result<Next> {
        loop {
            let step = self.session.advance(self.io.unread());
            self.io.consume(step.consumed);
            let event = match step.event {
                Event::NeedMore => return Ok(Next::Read),
                event => event,
            };
            // A command arrived: the inactivity timer starts again after it.
            self.phase_start = Instant::now();
            let flow = match event {
                Event::NeedMore => Flow::Continue,
                Event::Action(action) => self.act(action).await?,
                Event::Auth(credentials) => match self.on_auth(credentials).await {
                    Auth::Decided(decision) => {
                        crate::metrics::count_login(&decision);
                        let action = self.session.decide_login(decision);
                        self.act(action).await?
                    }
                    Auth::Proxied(session) => {
                        crate::metrics::count_proxied_login();
                        return Ok(Next::Relay(session));
                    }
                },
                Event::Retrieve(retrieval) => self.retrieve(retrieval).await?,
                Event::Quit { deleted } => {
                    let action = self.on_quit(deleted).await;
                    self.act(action).await?
                }
            };
            self.phase_start = Instant::now();
            if flow == Flow::Close {
                return Ok(Next::Close);
            }
            if self.io.queued() >= OUT_HIGH {
                self.flush().await?;
            }
        }
    }

    async fn act(&mut self, action: Action) -> io::Result<Flow> {
        match action {
            Action::Reply(response) => {
                response.write_to(self.io.out());
                Ok(Flow::Continue)
            }
            Action::Close(response) => {
                response.write_to(self.io.out());
                Ok(Flow::Close)
            }
            Action::StartTls {
                response,
                discarded,
            } => {
                response.write_to(self.io.out());
                self.flush().await?;
                if discarded > 0 {
                    tracing::info!("{}: {discarded} bytes after STLS discarded", self.peer);
                }
                // The session consumed everything buffered, and the upgrade drops
                // it: nothing read in clear text survives into the TLS session.
                self.handshake().await?;
                Ok(Flow::Continue)
            }
            Action::Forward { client, response } => {
                let forwarded = SocketAddr::new(client.addr, client.port.unwrap_or(0));
                tracing::info!("{}: proxy for {forwarded}", self.peer);
                let slot = self.shared.clients.enter(forwarded.ip());
                self.peer = forwarded;
                if slot.over_limit() {
                    tracing::info!("{forwarded}: too many connections from this address");
                    let response = Response::err_code(
                        ResponseCode::SysTemp,
                        "Too many connections from your address",
                    );
                    response.write_to(self.io.out());
                    return Ok(Flow::Close);
                }
                // The count moves from the proxy's address to the client's.
                self.slot = slot;
                response.write_to(self.io.out());
                Ok(Flow::Continue)
            }
            Action::LoginFailed { response, close } => {
                // Earlier pipelined answers go first; the refusal waits.
                self.flush().await?;
                let delay = self
                    .login_delay
                    .take()
                    .unwrap_or(self.shared.throttle.config().delay);
                // Shutdown cuts the wait short: the refusal goes out, then the
                // session ends (it holds no mailbox yet, so nothing is lost).
                let draining = tokio::select! {
                    () = tokio::time::sleep(delay) => false,
                    () = self.shutdown.wait() => true,
                };
                response.write_to(self.io.out());
                if draining {
                    Response::shutting_down().write_to(self.io.out());
                }
                Ok(if close || draining {
                    Flow::Close
                } else {
                    Flow::Continue
                })
            }
        }
    }

    /// The proxied session: the store host's `+OK` to the client, then bytes both
    /// ways (what the client pipelined behind its login first).
    async fn relay(&mut self, session: LoggedIn) -> io::Result<()> {
        let LoggedIn {
            stream,
            reply,
            after,
        } = session;
        let out = self.io.out();
        out.extend(stoa_netkit::relay::sanitized(&reply));
        out.extend_from_slice(&after);
        let limits = &self.shared.config.limits;
        let relay_limits = stoa_netkit::relay::Limits {
            idle: limits.idle_timeout,
            end: self.born + limits.session_timeout,
            send: limits.send_timeout,
        };
        stoa_netkit::relay::take_over(&mut self.io, stream, relay_limits, self.peer).await
    }

    /// The TLS handshake (STLS or POP3S), within the login timeout.
    async fn handshake(&mut self) -> io::Result<()> {
        let Some(acceptor) = self.shared.tls.clone() else {
            return Err(io::Error::other("TLS without a certificate"));
        };
        let timeout = self.shared.config.limits.login_timeout;
        self.io.start_tls(&acceptor, timeout).await
    }

    /// The inactivity limit of the current phase.
    fn idle_limit(&self) -> Duration {
        let limits = &self.shared.config.limits;
        match self.session.phase() {
            Phase::Transaction => limits.idle_timeout,
            _ => limits.login_timeout,
        }
    }

    /// The deadline of the current wait for input.
    fn deadline(&self) -> Instant {
        let session_end = self.born + self.shared.config.limits.session_timeout;
        (self.phase_start + self.idle_limit()).min(session_end)
    }

    /// Waits for input until the deadline or shutdown.
    async fn read(&mut self) -> io::Result<ReadEnd> {
        let deadline = self.deadline();
        self.io.read(deadline, Some(&mut self.shutdown)).await
    }

    /// Writes the queued responses out.
    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        self.io.flush(self.shared.config.limits.send_timeout).await
    }
}
