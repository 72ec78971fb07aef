//! The mail sink: the SMTP server the server under test relays remote mail to,
//! playing every remote MTA (`mail2001.md` §2.3, §4.3). It accepts any sender
//! and recipient, answers at once, reads each message to its terminating dot
//! keeping only the first few KiB (for the [`Tag`]), and reports every accepted
//! message through a callback and in [`SinkStats`].
//!
//! It speaks enough ESMTP for Postfix and Stoa's relay: `EHLO` (advertising
//! `PIPELINING`, `8BITMIME` and `SIZE`), `HELO`, `MAIL`, `RCPT`, `DATA`,
//! `RSET`, `NOOP`, `QUIT`, several transactions per connection, pipelined
//! commands (replies are written when no further command is buffered).
//! Everything is bounded: line length, connections, idle time, message size.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::io::AsyncWriteExt;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout};

use crate::message::Tag;
use crate::pace::{Pace, ReadError, Reader, read_dot_body};

/// The longest command line (RFC 5321 allows 512 octets; generous for
/// extensions).
const MAX_LINE: usize = 4 * 1024;
/// The read buffer; larger than [`MAX_LINE`] so a too-long line is recognised.
const READ_BUFFER: usize = 8 * 1024;
/// Connections served at once; the server under test relays over far fewer, so
/// more means something is leaking connections.
const MAX_CONNECTIONS: usize = 10_000;
/// How long a connection may stay silent (RFC 5321 §4.5.3.2 suggests 5 min).
const IDLE_TIMEOUT: Duration = Duration::from_secs(300);
/// The largest message accepted (the generator's largest is 2.7 MB).
const MAX_MESSAGE: u64 = 64 * 1024 * 1024;
/// How much of a message is kept to find its tag: the header section of a
/// generated message plus a relay's trace fields.
const HEAD_KEEP: usize = 8 * 1024;
/// The pause after a failed accept (out of descriptors…) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);
/// How long the `421` to a connection over the limit may take.
const REFUSE_GRACE: Duration = Duration::from_secs(1);

/// The `EHLO` reply.
const EHLO_REPLY: &[u8] = b"250-sink.stoa.test\r\n250-PIPELINING\r\n250-8BITMIME\r\n\
    250 SIZE 67108864\r\n";

/// One message the sink accepted.
#[derive(Debug, Clone, Copy)]
pub struct SinkMessage {
    /// The message's tag, if its header section carries one.
    pub tag: Option<Tag>,
    /// The envelope recipients.
    pub recipients: u32,
    /// The message's octets (after un-dot-stuffing, without the terminator).
    pub bytes: u64,
}

/// What the sink has seen since it started.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SinkStats {
    /// Connections served.
    pub sessions: u64,
    /// Messages accepted.
    pub messages: u64,
    /// Recipients of the accepted messages.
    pub recipients: u64,
    /// Octets of the accepted messages.
    pub bytes: u64,
    /// Protocol violations, broken or refused connections, oversized messages.
    pub errors: u64,
}

/// The counters behind [`SinkStats`].
#[derive(Default)]
struct Counters {
    sessions: AtomicU64,
    messages: AtomicU64,
    recipients: AtomicU64,
    bytes: AtomicU64,
    errors: AtomicU64,
}

/// Adds `n` to a counter (the counters are independent tallies).
fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// What every connection of a sink shares.
struct Shared {
    counters: Counters,
    on_message: Arc<dyn Fn(SinkMessage) + Send + Sync>,
}

/// A running sink; dropping it stops it.
pub struct Sink {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl Sink {
    /// Serves SMTP on `listener` until stopped or dropped, calling `on_message`
    /// for every accepted message. Must be called inside a tokio runtime.
    pub fn start(
        listener: TcpListener,
        on_message: Arc<dyn Fn(SinkMessage) + Send + Sync>,
    ) -> Sink {
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
        let shared = Arc::new(Shared {
            counters: Counters::default(),
            on_message,
        });
        let (shutdown, stopped) = watch::channel(false);
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared), stopped));
        Sink {
            addr,
            shared,
            shutdown,
            accept,
        }
    }

    /// The address the sink listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The counters so far.
    pub fn stats(&self) -> SinkStats {
        let c = &self.shared.counters;
        SinkStats {
            sessions: c.sessions.load(Ordering::Relaxed),
            messages: c.messages.load(Ordering::Relaxed),
            recipients: c.recipients.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting and ends every connection.
    pub fn stop(&self) {
        self.shutdown.send_replace(true);
        self.accept.abort();
    }
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("addr", &self.addr)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Accepts connections, one task each, up to [`MAX_CONNECTIONS`] at once.
async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, stopped: watch::Receiver<bool>) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            add(&shared.counters.errors, 1);
            tokio::spawn(refuse(stream));
            continue;
        };
        add(&shared.counters.sessions, 1);
        let shared = Arc::clone(&shared);
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let _permit = permit;
            tokio::select! {
                () = serve(stream, &shared) => {}
                _ = stopped.wait_for(|stop| *stop) => {}
            }
        });
    }
}

/// Turns away a connection over the limit.
async fn refuse(mut stream: TcpStream) {
    let _ = timeout(
        REFUSE_GRACE,
        stream.write_all(b"421 4.3.2 too many connections\r\n"),
    )
    .await;
}

/// An SMTP command, as far as the sink cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    Helo,
    Ehlo,
    Mail,
    Rcpt,
    Data,
    Rset,
    Noop,
    Quit,
    /// `MAIL` or `RCPT` without its `FROM:`/`TO:`.
    Syntax,
    Unknown,
}

/// Parses a command line (without its CRLF).
fn parse(line: &[u8]) -> Command {
    let verb = line.split(|&b| b == b' ').next().unwrap_or(line);
    let starts = |prefix: &[u8]| {
        line.get(..prefix.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(prefix))
    };
    match verb.to_ascii_uppercase().as_slice() {
        b"HELO" => Command::Helo,
        b"EHLO" => Command::Ehlo,
        b"MAIL" if starts(b"MAIL FROM:") => Command::Mail,
        b"RCPT" if starts(b"RCPT TO:") => Command::Rcpt,
        b"MAIL" | b"RCPT" => Command::Syntax,
        b"DATA" => Command::Data,
        b"RSET" => Command::Rset,
        b"NOOP" => Command::Noop,
        b"QUIT" => Command::Quit,
        _ => Command::Unknown,
    }
}

/// Where a connection is in a mail transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Txn {
    /// No `MAIL` yet.
    Idle,
    /// `MAIL` accepted, no recipient yet.
    Mail,
    /// This many recipients accepted.
    Rcpt(u32),
}

/// What a command asks of the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    /// Queue this reply.
    Reply(&'static [u8]),
    /// Count a protocol violation and queue this reply.
    Violation(&'static [u8]),
    /// Read a message for this many recipients.
    Data(u32),
    /// Say goodbye and close.
    Quit,
}

/// The transaction state after `command` in `txn`, and what to do for it.
fn step(command: Command, txn: Txn) -> (Txn, Action) {
    use Action::{Reply, Violation};
    match (command, txn) {
        (Command::Helo, _) => (Txn::Idle, Reply(b"250 sink.stoa.test\r\n")),
        (Command::Ehlo, _) => (Txn::Idle, Reply(EHLO_REPLY)),
        (Command::Mail, Txn::Idle) => (Txn::Mail, Reply(b"250 2.1.0 ok\r\n")),
        (Command::Rcpt, Txn::Mail) => (Txn::Rcpt(1), Reply(b"250 2.1.5 ok\r\n")),
        (Command::Rcpt, Txn::Rcpt(n)) => {
            (Txn::Rcpt(n.saturating_add(1)), Reply(b"250 2.1.5 ok\r\n"))
        }
        (Command::Data, Txn::Rcpt(n)) => (Txn::Idle, Action::Data(n)),
        (Command::Rset, _) => (Txn::Idle, Reply(b"250 2.0.0 ok\r\n")),
        (Command::Noop, _) => (txn, Reply(b"250 2.0.0 ok\r\n")),
        (Command::Quit, _) => (txn, Action::Quit),
        (Command::Mail | Command::Rcpt | Command::Data, _) => {
            (txn, Violation(b"503 5.5.1 bad sequence of commands\r\n"))
        }
        (Command::Syntax, _) => (txn, Violation(b"501 5.5.4 syntax error\r\n")),
        (Command::Unknown, _) => (txn, Violation(b"502 5.5.2 command not implemented\r\n")),
    }
}

/// One connection.
struct Conn<'a> {
    reader: Reader<tokio::net::tcp::OwnedReadHalf>,
    writer: OwnedWriteHalf,
    out: Vec<u8>,
    shared: &'a Shared,
}

impl Conn<'_> {
    /// Writes the pending replies; `false` when the connection failed.
    async fn flush(&mut self) -> bool {
        let ok = matches!(
            timeout(IDLE_TIMEOUT, self.writer.write_all(&self.out)).await,
            Ok(Ok(()))
        );
        self.out.clear();
        ok
    }

    /// Counts a protocol violation and queues `reply`.
    fn violation(&mut self, reply: &[u8]) {
        add(&self.shared.counters.errors, 1);
        self.out.extend_from_slice(reply);
    }

    /// After `354`: reads the message, counts and reports it, queues the reply.
    /// `false` when the connection failed.
    async fn handle_data(&mut self, recipients: u32) -> bool {
        let mut bytes = 0;
        let mut head = Vec::new();
        let body = read_dot_body(&mut self.reader, &mut bytes, |data| {
            let room = HEAD_KEEP.saturating_sub(head.len()).min(data.len());
            head.extend_from_slice(&data[..room]);
        })
        .await;
        if body.is_err() {
            add(&self.shared.counters.errors, 1);
            return false;
        }
        if bytes > MAX_MESSAGE {
            self.violation(b"552 5.3.4 message too big\r\n");
            return true;
        }
        let c = &self.shared.counters;
        add(&c.messages, 1);
        add(&c.recipients, u64::from(recipients));
        add(&c.bytes, bytes);
        (self.shared.on_message)(SinkMessage {
            tag: Tag::find(&head),
            recipients,
            bytes,
        });
        self.out.extend_from_slice(b"250 2.0.0 ok\r\n");
        true
    }

    /// The next command; `None` when the connection is over (a read error is
    /// answered first, if the client can still hear it).
    async fn command(&mut self, txn: Txn) -> Option<Command> {
        let e = match self.reader.line(MAX_LINE).await {
            Ok(line) => return Some(parse(line)),
            Err(e) => e,
        };
        let reply: &[u8] = match e {
            ReadError::TooLong => b"500 5.5.2 line too long\r\n",
            ReadError::Timeout => b"421 4.4.2 idle too long\r\n",
            // A client may hang up between transactions.
            ReadError::Eof if txn == Txn::Idle => return None,
            ReadError::Eof | ReadError::Io(_) => b"",
        };
        self.violation(reply);
        self.flush().await;
        None
    }

    /// Does what a command asked; `false` when the connection is over.
    async fn act(&mut self, action: Action) -> bool {
        match action {
            Action::Reply(reply) => self.out.extend_from_slice(reply),
            Action::Violation(reply) => self.violation(reply),
            Action::Data(recipients) => {
                self.out
                    .extend_from_slice(b"354 end with <CRLF>.<CRLF>\r\n");
                return self.flush().await && self.handle_data(recipients).await;
            }
            Action::Quit => {
                self.out.extend_from_slice(b"221 2.0.0 bye\r\n");
                self.flush().await;
                return false;
            }
        }
        true
    }
}

/// Serves one connection to its end.
async fn serve(stream: TcpStream, shared: &Shared) {
    // Only latency suffers without it.
    let _ = stream.set_nodelay(true);
    let (rd, writer) = stream.into_split();
    let mut conn = Conn {
        reader: Reader::new(rd, READ_BUFFER, Pace::full(), IDLE_TIMEOUT),
        writer,
        out: b"220 sink.stoa.test ESMTP stoa sink\r\n".to_vec(),
        shared,
    };
    let mut txn = Txn::Idle;
    loop {
        if !conn.reader.has_line() && !conn.out.is_empty() && !conn.flush().await {
            add(&shared.counters.errors, 1);
            return;
        }
        let Some(command) = conn.command(txn).await else {
            return;
        };
        let action;
        (txn, action) = step(command, txn);
        if !conn.act(action).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands() {
        assert_eq!(parse(b"ehlo relay.test"), Command::Ehlo);
        assert_eq!(parse(b"HELO x"), Command::Helo);
        assert_eq!(parse(b"MAIL FROM:<a@b> SIZE=10"), Command::Mail);
        assert_eq!(parse(b"mail from:<>"), Command::Mail);
        assert_eq!(parse(b"MAIL <a@b>"), Command::Syntax);
        assert_eq!(parse(b"RCPT TO:<a@b>"), Command::Rcpt);
        assert_eq!(parse(b"RCPT"), Command::Syntax);
        assert_eq!(parse(b"DATA"), Command::Data);
        assert_eq!(parse(b"rset"), Command::Rset);
        assert_eq!(parse(b"NOOP"), Command::Noop);
        assert_eq!(parse(b"QUIT"), Command::Quit);
        assert_eq!(parse(b"VRFY x"), Command::Unknown);
        assert_eq!(parse(b""), Command::Unknown);
    }

    #[test]
    fn transactions() {
        let mut txn = Txn::Idle;
        for (command, expect) in [
            (Command::Rcpt, Txn::Idle),
            (Command::Mail, Txn::Mail),
            (Command::Mail, Txn::Mail),
            (Command::Rcpt, Txn::Rcpt(1)),
            (Command::Noop, Txn::Rcpt(1)),
            (Command::Rcpt, Txn::Rcpt(2)),
            (Command::Data, Txn::Idle),
        ] {
            txn = step(command, txn).0;
            assert_eq!(txn, expect, "after {command:?}");
        }
        assert_eq!(step(Command::Data, Txn::Rcpt(2)).1, Action::Data(2));
        assert!(
            matches!(step(Command::Data, Txn::Mail).1, Action::Violation(b) if b.starts_with(b"503"))
        );
        assert_eq!(step(Command::Quit, Txn::Mail), (Txn::Mail, Action::Quit));
    }
}
