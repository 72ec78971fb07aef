//! The SMTP client (`mail2001.md` §1.4, §4.1): one session per message
//! ([`smtp_session`]: connect, `HELO`, `MAIL`, one `RCPT` per recipient, `DATA`,
//! the body, `QUIT`), timed step by step into a [`SessionRecord`], and the
//! many-messages-per-connection sender of the initial fill ([`smtp_fill`]).
//!
//! Every reply must come within the plan's reply timeout (§2.4); an unexpected
//! reply ends the session after a best-effort `QUIT`. Modem sessions pace what
//! they send and read ([`crate::pace`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use stoa_smtp_proto::reply::Status;
use stoa_smtp_proto::{ReplyLimits, parse_reply};
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::time::{Instant, timeout};

use crate::message::Message;
use crate::pace::{Pace, Pacer, ReadError, Reader, write_paced};
use crate::tally::{Failure, Function, SessionRecord, Sized};

/// The longest reply or command line read (RFC 5321 allows 512; servers'
/// multi-line texts stay far below this).
pub(crate) const MAX_LINE: usize = 4 * 1024;
/// The read buffer of a client connection: a few reply lines or POP body pieces.
pub(crate) const READ_BUFFER: usize = 8 * 1024;
/// Most lines accepted in one multi-line reply (EHLO lists a dozen at most).
const MAX_REPLY_LINES: usize = 100;
/// The limits replies are read with.
const REPLY_LIMITS: ReplyLimits = ReplyLimits {
    max_line: MAX_LINE,
    max_lines: MAX_REPLY_LINES,
};
/// Most characters of a reply kept for the failure detail.
const MAX_DETAIL: usize = 200;
/// How long a best-effort `QUIT` after a failure may take.
const QUIT_GRACE: Duration = Duration::from_secs(1);

/// One SMTP session to run.
#[derive(Debug, Clone)]
pub struct SmtpPlan {
    /// The server.
    pub addr: SocketAddr,
    /// The `HELO` name, e.g. `client7.remote.test`.
    pub helo: String,
    /// The envelope sender, without `<>`.
    pub mail_from: String,
    /// The envelope recipients and whether each is local.
    pub rcpts: Vec<(String, bool)>,
    /// The message.
    pub message: Message,
    /// Modem or full speed.
    pub pace: Pace,
    /// The longest wait for a reply (60 s in runs, §2.4).
    pub reply_timeout: Duration,
    /// Drop the connection halfway through the message, as the kit's client
    /// did in 1 % of sessions (`stoa_mail2001::disconnect`): after `DATA`'s
    /// `354`, send half the message's bytes, then close without the final dot
    /// (the server must discard the partial message; it never acknowledged it).
    pub drop_mid_data: bool,
}

/// One message of the initial fill.
#[derive(Debug, Clone)]
pub struct FillMessage {
    /// The envelope sender, without `<>`.
    pub mail_from: String,
    /// The one envelope recipient, without `<>`.
    pub rcpt: String,
    /// The message.
    pub message: Message,
}

/// Why a step failed, and what the server said (or the I/O error).
#[derive(Debug)]
pub(crate) struct StepError {
    /// The kind, as tallied.
    pub(crate) failure: Failure,
    /// The reply or the error, for logs.
    pub(crate) detail: String,
}

impl StepError {
    /// A protocol failure with `detail`.
    pub(crate) fn protocol(detail: impl Into<String>) -> StepError {
        StepError {
            failure: Failure::Protocol,
            detail: detail.into(),
        }
    }

    /// A failure to open the connection.
    pub(crate) fn connect(err: &io::Error) -> StepError {
        StepError {
            failure: Failure::Connect,
            detail: err.to_string(),
        }
    }

    /// A failed write: a timeout or a broken connection.
    pub(crate) fn write(err: &io::Error) -> StepError {
        let failure = if err.kind() == io::ErrorKind::TimedOut {
            Failure::Timeout
        } else {
            Failure::Closed
        };
        StepError {
            failure,
            detail: err.to_string(),
        }
    }
}

impl From<ReadError> for StepError {
    fn from(err: ReadError) -> StepError {
        let failure = match err {
            ReadError::Eof | ReadError::Io(_) => Failure::Closed,
            ReadError::Timeout => Failure::Timeout,
            ReadError::TooLong => Failure::Protocol,
        };
        StepError {
            failure,
            detail: err.to_string(),
        }
    }
}

/// A reply line as text for a failure detail, shortened.
pub(crate) fn detail(line: &[u8]) -> String {
    let text = String::from_utf8_lossy(line);
    text.chars().take(MAX_DETAIL).collect()
}

/// Milliseconds since `start`.
pub(crate) fn ms_since(start: Instant) -> f64 {
    start.elapsed().as_secs_f64() * 1000.0
}

/// Runs `fut` as one step of `rec`: timed from now to its end, recorded with its
/// outcome.
pub(crate) async fn step<T>(
    rec: &mut SessionRecord,
    function: Function,
    fut: impl Future<Output = Result<T, StepError>>,
) -> Result<T, StepError> {
    let start = Instant::now();
    let result = fut.await;
    let outcome = result.as_ref().map(|_| ()).map_err(|e| e.failure);
    rec.step(function, ms_since(start), outcome);
    result
}

/// Opens a TCP connection within `limit`, with Nagle off (requests are small
/// and each waits for its reply).
pub(crate) async fn open(addr: SocketAddr, limit: Duration) -> Result<TcpStream, StepError> {
    let stream = match timeout(limit, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(StepError::connect(&e)),
        Err(_) => {
            return Err(StepError {
                failure: Failure::Connect,
                detail: "connect timed out".into(),
            });
        }
    };
    // Only latency suffers without it; not worth failing the session over.
    let _ = stream.set_nodelay(true);
    Ok(stream)
}

/// Reads one SMTP reply, multi-line or not, with `stoa-smtp-proto`'s parser in
/// the reader's buffer; returns its code and last line (code included).
///
/// A reply must fit the read buffer ([`READ_BUFFER`]) whole; a longer one is a
/// protocol failure (`line too long`), like a line longer than [`MAX_LINE`].
async fn read_reply<R: AsyncRead + Unpin>(
    reader: &mut Reader<R>,
) -> Result<(u16, String), StepError> {
    loop {
        match parse_reply(reader.buffered(), &REPLY_LIMITS) {
            Ok(Status::Complete(reply)) => {
                let code = reply.code();
                let mut line = code.to_string().into_bytes();
                if let Some(text) = reply.lines().last().filter(|t| !t.is_empty()) {
                    line.push(b' ');
                    line.extend_from_slice(text);
                }
                let found = (code, detail(&line));
                reader.consume(reply.consumed());
                return Ok(found);
            }
            Ok(Status::Partial) => reader.read_more().await?,
            Err(e) => {
                let buffered = reader.buffered();
                let line = buffered.split(|&b| b == b'\n').next().unwrap_or_default();
                return Err(StepError::protocol(format!("{e}: {}", detail(line))));
            }
        }
    }
}

/// An open client connection, SMTP's or POP3's: the paced reader and writer.
pub(crate) struct Line {
    pub(crate) reader: Reader<OwnedReadHalf>,
    pub(crate) writer: OwnedWriteHalf,
    pub(crate) pace: Pace,
    pub(crate) limit: Duration,
}

impl Line {
    /// Connects (the greeting is read by the protocol's client).
    pub(crate) async fn open(
        addr: SocketAddr,
        pace: Pace,
        limit: Duration,
    ) -> Result<Line, StepError> {
        let (rd, writer) = open(addr, limit).await?.into_split();
        Ok(Line {
            reader: Reader::new(rd, READ_BUFFER, pace, limit),
            writer,
            pace,
            limit,
        })
    }

    /// Sends one command line (CRLF added); the reply starts a new read schedule.
    pub(crate) async fn send(&mut self, command: &str) -> Result<(), StepError> {
        self.reader.begin_transfer();
        let line = format!("{command}\r\n");
        let mut pacer = Pacer::new(self.pace);
        write_paced(&mut self.writer, &mut pacer, line.as_bytes(), self.limit)
            .await
            .map_err(|e| StepError::write(&e))
    }
}

/// An open SMTP connection.
struct Client {
    line: Line,
}

impl Client {
    /// Connects (the banner is read separately, by [`Client::expect`]).
    async fn open(addr: SocketAddr, pace: Pace, limit: Duration) -> Result<Client, StepError> {
        Ok(Client {
            line: Line::open(addr, pace, limit).await?,
        })
    }

    /// Sends one command line (CRLF added).
    async fn send(&mut self, command: &str) -> Result<(), StepError> {
        self.line.send(command).await
    }

    /// Reads a reply and checks its code.
    async fn expect(&mut self, code: u16) -> Result<(), StepError> {
        let (got, text) = read_reply(&mut self.line.reader).await?;
        if got == code {
            Ok(())
        } else {
            Err(StepError::protocol(text))
        }
    }

    /// Sends `command` and expects `code`.
    async fn command(&mut self, command: &str, code: u16) -> Result<(), StepError> {
        self.send(command).await?;
        self.expect(code).await
    }

    /// Sends the message and the terminating dot on one schedule (the message
    /// needs no dot-stuffing, see [`crate::message`]), then expects `250`.
    async fn data(&mut self, message: &Message) -> Result<(), StepError> {
        self.line.reader.begin_transfer();
        let mut pacer = Pacer::new(self.line.pace);
        for part in [&message.head[..], message.body, b".\r\n"] {
            write_paced(&mut self.line.writer, &mut pacer, part, self.line.limit)
                .await
                .map_err(|e| StepError::write(&e))?;
        }
        self.expect(250).await
    }

    /// Sends the first `bytes` of the message (paced), no terminating dot: the
    /// transfer a deliberate drop breaks off.
    async fn data_part(&mut self, message: &Message, bytes: usize) -> Result<(), StepError> {
        let mut pacer = Pacer::new(self.line.pace);
        let head = &message.head[..bytes.min(message.head.len())];
        let body = &message.body[..bytes.saturating_sub(head.len()).min(message.body.len())];
        for part in [head, body] {
            write_paced(&mut self.line.writer, &mut pacer, part, self.line.limit)
                .await
                .map_err(|e| StepError::write(&e))?;
        }
        Ok(())
    }

    /// After a protocol failure: `QUIT`, briefly waiting for the reply, ignoring
    /// any error.
    async fn quit_best_effort(&mut self) {
        let _ = timeout(QUIT_GRACE, async {
            let _ = self.line.writer.write_all(b"QUIT\r\n").await;
            let _ = read_reply(&mut self.line.reader).await;
        })
        .await;
    }
}

/// One session: connect and the `220` banner ([`Function::SmtpConnect`]), `HELO`,
/// `MAIL FROM`, one `RCPT TO` per recipient (accepted ones counted in
/// `to_local`/`to_remote`), `DATA` → `354`, the body (paced) up to its `250` (a
/// [`Sized::DataResponse`] transfer timed from the first body byte), `QUIT`.
///
/// Each step is timed from just before its request is written to its reply
/// (the connect step from the start of the connect to the banner). An
/// unexpected reply is a [`Failure::Protocol`] and ends the session after a
/// best-effort, unrecorded `QUIT`; a closed or reset connection is a
/// [`Failure::Closed`], a late reply a [`Failure::Timeout`], a connection
/// that cannot be made a [`Failure::Connect`]. When the body's final reply
/// fails, the transfer is recorded with `ok = false` and the failure as a
/// second, failed [`Function::SmtpData`] step.
///
/// With [`SmtpPlan::drop_mid_data`] the session ends halfway through the
/// body: the transfer is recorded with `ok = false` (attempted, not passed,
/// as the kit counted it), no step fails, and the record is marked
/// [`SessionRecord::dropped`]; the connection closes when the session returns.
pub async fn smtp_session(plan: &SmtpPlan) -> SessionRecord {
    let mut rec = SessionRecord::default();
    let start = Instant::now();
    let mut client = match Client::open(plan.addr, plan.pace, plan.reply_timeout).await {
        Ok(client) => client,
        Err(e) => {
            rec.step(Function::SmtpConnect, ms_since(start), Err(e.failure));
            return rec;
        }
    };
    if let Err(e) = converse(&mut client, plan, &mut rec, start).await
        && e.failure == Failure::Protocol
    {
        client.quit_best_effort().await;
    }
    rec
}

/// The session after the TCP connect, which began at `start`.
async fn converse(
    c: &mut Client,
    plan: &SmtpPlan,
    rec: &mut SessionRecord,
    start: Instant,
) -> Result<(), StepError> {
    let banner = c.expect(220).await;
    let outcome = banner.as_ref().map(|_| ()).map_err(|e| e.failure);
    rec.step(Function::SmtpConnect, ms_since(start), outcome);
    banner?;
    let helo = format!("HELO {}", plan.helo);
    step(rec, Function::SmtpHello, c.command(&helo, 250)).await?;
    let mail = format!("MAIL FROM:<{}>", plan.mail_from);
    step(rec, Function::SmtpMailFrom, c.command(&mail, 250)).await?;
    for (rcpt, local) in &plan.rcpts {
        let command = format!("RCPT TO:<{rcpt}>");
        step(rec, Function::SmtpRcptTo, c.command(&command, 250)).await?;
        if *local {
            rec.to_local += 1;
        } else {
            rec.to_remote += 1;
        }
    }
    step(rec, Function::SmtpData, c.command("DATA", 354)).await?;
    let body_start = Instant::now();
    if plan.drop_mid_data {
        return drop_mid_data(c, plan, rec, body_start).await;
    }
    let sent = c.data(&plan.message).await;
    let ms = ms_since(body_start);
    rec.transfer(
        Sized::DataResponse,
        ms,
        plan.message.len() as u64,
        sent.is_ok(),
    );
    if let Err(e) = sent {
        rec.step(Function::SmtpData, ms, Err(e.failure));
        return Err(e);
    }
    step(rec, Function::SmtpQuit, c.command("QUIT", 221)).await?;
    rec.completed = true;
    Ok(())
}

/// A deliberate drop: half the message, then the session ends (the caller
/// closes the connection) without the final dot and without `QUIT`.
async fn drop_mid_data(
    c: &mut Client,
    plan: &SmtpPlan,
    rec: &mut SessionRecord,
    body_start: Instant,
) -> Result<(), StepError> {
    let bytes = plan.message.len() / 2;
    let sent = c.data_part(&plan.message, bytes).await;
    let ms = ms_since(body_start);
    rec.transfer(Sized::DataResponse, ms, plan.message.len() as u64, false);
    if let Err(e) = sent {
        // The server closed first: its failure, not a drop.
        rec.step(Function::SmtpData, ms, Err(e.failure));
        return Err(e);
    }
    rec.dropped = true;
    Ok(())
}

/// The initial fill's sender: one full-speed connection, `HELO` once, then for
/// each message `MAIL`, one `RCPT`, `DATA` and the body up to its `250`, then
/// `QUIT`. Returns how many messages were accepted before the first failure, and
/// that failure: the step, its kind and the reply or I/O error.
pub async fn smtp_fill(
    addr: SocketAddr,
    helo: &str,
    messages: &[FillMessage],
    reply_timeout: Duration,
) -> (usize, Option<(Function, Failure, String)>) {
    let mut accepted = 0;
    let result = fill(addr, helo, messages, reply_timeout, &mut accepted).await;
    (
        accepted,
        result.err().map(|(f, e)| (f, e.failure, e.detail)),
    )
}

/// [`smtp_fill`]'s conversation; counts accepted messages in `accepted`.
async fn fill(
    addr: SocketAddr,
    helo: &str,
    messages: &[FillMessage],
    limit: Duration,
    accepted: &mut usize,
) -> Result<(), (Function, StepError)> {
    let at = |f: Function| move |e: StepError| (f, e);
    let mut c = Client::open(addr, Pace::full(), limit)
        .await
        .map_err(at(Function::SmtpConnect))?;
    let result = async {
        c.expect(220).await.map_err(at(Function::SmtpConnect))?;
        c.command(&format!("HELO {helo}"), 250)
            .await
            .map_err(at(Function::SmtpHello))?;
        for m in messages {
            c.command(&format!("MAIL FROM:<{}>", m.mail_from), 250)
                .await
                .map_err(at(Function::SmtpMailFrom))?;
            c.command(&format!("RCPT TO:<{}>", m.rcpt), 250)
                .await
                .map_err(at(Function::SmtpRcptTo))?;
            c.command("DATA", 354)
                .await
                .map_err(at(Function::SmtpData))?;
            c.data(&m.message).await.map_err(at(Function::SmtpData))?;
            *accepted += 1;
        }
        c.command("QUIT", 221).await.map_err(at(Function::SmtpQuit))
    }
    .await;
    if let Err((_, e)) = &result
        && e.failure == Failure::Protocol
    {
        c.quit_best_effort().await;
    }
    result
}
