//! One POP3 connection: the read → advance → act → write loop around
//! [`stoa_pop3_proto::Session`], its deadlines, STLS and POP3S, and the mailbox it
//! holds once logged in.
//!
//! [`Conn`] owns the socket, the read buffer and the response buffer. The loop hands
//! every unread byte to the session and acts on each event: a login (`login.rs`), a
//! message to stream (`retrieve.rs`), the deletions at QUIT (`update.rs`). Responses
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
use stoa_netkit::server::{Accepted, ClientSlot};
use stoa_netkit::shutdown::Shutdown;
use stoa_pop3_proto::{Action, Event, Phase, Response, ResponseCode, Session};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::shared::Shared;
use stoa_netkit::tls::Stream;

/// Bytes read at a time. Commands are at most 255 octets (SASL lines 1 KiB), and
/// the session consumes every complete line before the next read, so the buffer
/// stays near this size.
const READ_CHUNK: usize = 4 * 1024;

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

pub(crate) struct Conn {
    pub(crate) stream: Stream,
    pub(crate) peer: SocketAddr,
    pub(crate) shared: Arc<Shared>,
    pub(crate) session: Session,
    buf: Vec<u8>,
    start: usize,
    pub(crate) out: Vec<u8>,
    /// The locked mailbox, from login to QUIT. Shared only with the blocking task
    /// reading one of its messages, which the loop always awaits.
    pub(crate) mailbox: Option<Arc<MailboxSession>>,
    /// The wait before the next `-ERR [AUTH]`, set when a login fails.
    pub(crate) login_delay: Option<Duration>,
    born: Instant,
    phase_start: Instant,
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
    let now = Instant::now();
    let session = Session::new(Arc::clone(&shared.session));
    let mut conn = Conn {
        stream: Stream::Plain(stream),
        peer,
        shared,
        session,
        buf: Vec::with_capacity(READ_CHUNK),
        start: 0,
        out: Vec::with_capacity(512),
        mailbox: None,
        login_delay: None,
        born: now,
        phase_start: now,
        shutdown,
    };
    let result = if slot.over_limit() {
        tracing::info!("{peer}: too many connections from this address");
        let response = Response::err_code(
            ResponseCode::SysTemp,
            "Too many connections from your address",
        );
        response.write_to(&mut conn.out);
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
    let _ = tokio::time::timeout(Duration::from_secs(1), conn.stream.shutdown()).await;
    tracing::debug!("{peer}: session closed");
}

impl Conn {
    /// The TLS handshake of a POP3S connection, then the session.
    async fn start(&mut self, kind: Kind) -> io::Result<()> {
        if kind == Kind::Tls {
            self.handshake().await?;
            self.session = Session::new_tls(Arc::clone(&self.shared.session));
        }
        self.run().await
    }

    async fn run(&mut self) -> io::Result<()> {
        self.session.greeting().write_to(&mut self.out);
        self.flush().await?;
        self.phase_start = Instant::now();
        loop {
            if self.process().await? == Flow::Close {
                return self.flush().await;
            }
            self.flush().await?;
            match self.read().await? {
                ReadEnd::Data => {}
                ReadEnd::Eof => return Ok(()),
                ReadEnd::Timeout => {
                    tracing::info!("{}: autologout after {:?}", self.peer, self.idle_limit());
                    Response::autologout().write_to(&mut self.out);
                    return self.flush().await;
                }
                ReadEnd::Draining => {
                    Response::shutting_down().write_to(&mut self.out);
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
            self.start += step.consumed;
            let event = match step.event {
                Event::NeedMore => return Ok(Flow::Continue),
                event => event,
            };
            // A command arrived: the inactivity timer starts again after it.
            self.phase_start = Instant::now();
            let flow = match event {
                Event::NeedMore => Flow::Continue,
                Event::Action(action) => self.act(action).await?,
                Event::Auth(credentials) => {
                    let decision = self.on_auth(credentials).await;
                    let action = self.session.decide_login(decision);
                    self.act(action).await?
                }
                Event::Retrieve(retrieval) => self.retrieve(retrieval).await?,
                Event::Quit { deleted } => {
                    let action = self.on_quit(deleted).await;
                    self.act(action).await?
                }
            };
            self.phase_start = Instant::now();
            if flow == Flow::Close {
                return Ok(Flow::Close);
            }
            if self.out.len() >= OUT_HIGH {
                self.flush().await?;
            }
        }
    }

    async fn act(&mut self, action: Action) -> io::Result<Flow> {
        match action {
            Action::Reply(response) => {
                response.write_to(&mut self.out);
                Ok(Flow::Continue)
            }
            Action::Close(response) => {
                response.write_to(&mut self.out);
                Ok(Flow::Close)
            }
            Action::StartTls {
                response,
                discarded,
            } => {
                response.write_to(&mut self.out);
                self.flush().await?;
                if discarded > 0 {
                    tracing::info!("{}: {discarded} bytes after STLS discarded", self.peer);
                }
                // The session consumed everything buffered: nothing read in clear
                // text survives into the TLS session.
                self.buf.clear();
                self.start = 0;
                self.handshake().await?;
                Ok(Flow::Continue)
            }
            Action::LoginFailed { response, close } => {
                // Earlier pipelined answers go first; the refusal waits.
                self.flush().await?;
                let delay = self
                    .login_delay
                    .take()
                    .unwrap_or(self.shared.config.auth_throttle.delay);
                tokio::time::sleep(delay).await;
                response.write_to(&mut self.out);
                Ok(if close { Flow::Close } else { Flow::Continue })
            }
        }
    }

    /// The TLS handshake (STLS or POP3S), within the login timeout.
    async fn handshake(&mut self) -> io::Result<()> {
        let Some(acceptor) = self.shared.tls.clone() else {
            return Err(io::Error::other("TLS without a certificate"));
        };
        let timeout = self.shared.config.limits.login_timeout;
        match tokio::time::timeout(timeout, self.stream.start_tls(&acceptor)).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        }
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

    async fn read(&mut self) -> io::Result<ReadEnd> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        if self.shutdown.is_triggered() {
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
            _ = shutdown.wait() => Ok(ReadEnd::Draining),
        }
    }

    /// Writes the queued responses out.
    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let timeout = self.shared.config.limits.send_timeout;
        self.stream.write_all_within(&self.out, timeout).await?;
        self.out.clear();
        Ok(())
    }
}
