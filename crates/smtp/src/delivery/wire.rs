//! The client side of SMTP and LMTP that the relay ([`super::relay`]) and the LMTP
//! client ([`super::lmtp`]) share: replies read with a deadline and parsed by
//! `stoa-smtp-proto`'s [`parse_reply`] (multi-line, one code throughout, enhanced
//! status codes, capped lines), commands, `RCPT` per recipient, and the message in
//! wire form.

use std::fmt;
use std::io;
use std::time::Duration;

use stoa_smtp_proto::reply::Status;
use stoa_smtp_proto::{EnhancedStatus, ParsedReply, ReplyLimits, parse_reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The limits replies are read with: the parser's defaults (2048-byte lines, 32 of
/// them), which bound what one reply may make the client buffer to 64 KiB.
const REPLY_LIMITS: ReplyLimits = ReplyLimits {
    max_line: 2048,
    max_lines: 32,
};

/// Most bytes of a malformed reply quoted in the error.
const MAX_QUOTED: usize = 200;

/// What happened to one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The next hop took responsibility (the smart host accepted, or the store host
    /// stored it).
    Delivered,
    /// Try again later: enhanced status and diagnostic.
    Temporary(String, String),
    /// Bounce: enhanced status and diagnostic.
    Permanent(String, String),
}

/// One reply, owned: its code, its enhanced status code, and the lines as the
/// server sent them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) code: u16,
    pub(crate) status: Option<EnhancedStatus>,
    /// The reply's bytes, which [`parse_reply`] accepted.
    wire: Vec<u8>,
}

impl Reply {
    /// The reply `parsed`, copied out of the read buffer.
    fn new(parsed: &ParsedReply<'_>) -> Reply {
        Reply {
            code: parsed.code(),
            status: parsed.status(),
            wire: parsed.as_bytes().to_vec(),
        }
    }

    /// The reply read again, for its lines.
    fn parsed(&self) -> ParsedReply<'_> {
        match parse_reply(&self.wire, &REPLY_LIMITS) {
            Ok(Status::Complete(parsed)) => parsed,
            _ => unreachable!("invariant: `wire` is a reply parse_reply accepted"),
        }
    }

    /// The text lines joined with spaces (enhanced status codes included), for
    /// diagnostics.
    pub(crate) fn text(&self) -> String {
        let lines: Vec<_> = self.parsed().lines().map(String::from_utf8_lossy).collect();
        lines.join(" ")
    }

    /// The outcome this (negative) reply means for the recipients it concerns.
    pub(crate) fn failure(&self, host: &str) -> Outcome {
        let class = if self.code >= 500 { 5 } else { 4 };
        let status = self
            .status
            .filter(|s| s.class == class)
            .map_or_else(|| format!("{class}.0.0"), |s| s.to_string());
        let diagnostic = format!("host {host} said: {self}");
        if class == 5 {
            Outcome::Permanent(status, diagnostic)
        } else {
            Outcome::Temporary(status, diagnostic)
        }
    }

    /// `Delivered` for `250`, else the failure.
    pub(crate) fn outcome(&self, host: &str) -> Outcome {
        if self.code == 250 {
            Outcome::Delivered
        } else {
            self.failure(host)
        }
    }

    /// Whether the extension `name` is among an EHLO/LHLO reply's keywords.
    pub(crate) fn offers(&self, name: &str) -> bool {
        self.parsed().extension(name).is_some()
    }
}

impl fmt::Display for Reply {
    /// `550 5.1.1 text / more`: the code and the text lines, for diagnostics.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code, self.text())
    }
}

/// A connection to an SMTP or LMTP server.
#[derive(Debug)]
pub(crate) struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    /// The server, for diagnostics.
    pub(crate) host: String,
}

impl Client {
    /// Connects to `addr` (`HOST:PORT`, a name resolved by the system resolver).
    pub(crate) async fn connect(addr: &str, timeout: Duration) -> io::Result<Client> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
        let _ = stream.set_nodelay(true);
        Ok(Client {
            stream,
            buf: Vec::new(),
            host: addr.to_owned(),
        })
    }

    /// The next reply, within `timeout`.
    pub(crate) async fn reply(&mut self, timeout: Duration) -> io::Result<Reply> {
        tokio::time::timeout(timeout, self.read_reply())
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "timed out waiting for a reply"))?
    }

    async fn read_reply(&mut self) -> io::Result<Reply> {
        loop {
            match parse_reply(&self.buf, &REPLY_LIMITS) {
                Ok(Status::Complete(parsed)) => {
                    let reply = Reply::new(&parsed);
                    self.buf.drain(..parsed.consumed());
                    return Ok(reply);
                }
                // The reply so far is within the limits: the buffer holds at most
                // 64 KiB of it, and one read more.
                Ok(Status::Partial) => self.fill().await?,
                Err(e) => {
                    let start = &self.buf[..self.buf.len().min(MAX_QUOTED)];
                    let quoted = String::from_utf8_lossy(start);
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("malformed reply ({e}): {quoted:?}"),
                    ));
                }
            }
        }
    }

    /// Reads more bytes into the buffer.
    async fn fill(&mut self) -> io::Result<()> {
        let mut chunk = [0u8; 4096];
        let n = self.stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed",
            ));
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    /// Sends `line` and reads the reply, each within `timeout`.
    pub(crate) async fn command(&mut self, line: &str, timeout: Duration) -> io::Result<Reply> {
        let bytes = format!("{line}\r\n");
        self.send(bytes.as_bytes(), timeout).await?;
        self.reply(timeout).await
    }

    /// Writes `bytes` within `timeout`.
    pub(crate) async fn send(&mut self, bytes: &[u8], timeout: Duration) -> io::Result<()> {
        tokio::time::timeout(timeout, self.stream.write_all(bytes))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "timed out sending"))?
    }

    /// One `RCPT` per recipient, each refusal its outcome: the indices accepted.
    pub(crate) async fn recipients(
        &mut self,
        recipients: &[String],
        t: Duration,
        outcomes: &mut [Option<Outcome>],
    ) -> io::Result<Vec<usize>> {
        let mut accepted = Vec::new();
        for (i, rcpt) in recipients.iter().enumerate() {
            let reply = self.command(&format!("RCPT TO:<{rcpt}>"), t).await?;
            if reply.code == 250 || reply.code == 251 {
                accepted.push(i);
            } else {
                outcomes[i] = Some(reply.failure(&self.host));
            }
        }
        Ok(accepted)
    }
}

/// The `MAIL` command, with the message's size when the server offers `SIZE`.
pub(crate) fn mail_from(sender: &str, offers_size: bool, message: &[u8]) -> String {
    let mut mail = format!("MAIL FROM:<{sender}>");
    if offers_size {
        mail.push_str(&format!(" SIZE={}", message.len()));
    }
    mail
}

/// Gives `outcome` to every recipient not yet answered for.
pub(crate) fn answer_unanswered(outcomes: &mut [Option<Outcome>], outcome: &Outcome) {
    for slot in outcomes.iter_mut().filter(|s| s.is_none()) {
        *slot = Some(outcome.clone());
    }
}

/// The message in wire form: CRLF line ends only, dot-stuffed, ending in
/// `CRLF.CRLF`.
///
/// A stray CR or LF is made a line end, so a smuggled `\n.\n` cannot end the
/// message early on the next hop.
pub fn normalise(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + message.len() / 50 + 5);
    let mut at_line_start = true;
    let mut i = 0;
    while i < message.len() {
        let b = message[i];
        match b {
            b'\r' | b'\n' => {
                out.extend_from_slice(b"\r\n");
                if b == b'\r' && message.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                at_line_start = true;
            }
            _ => {
                if at_line_start && b == b'.' {
                    out.push(b'.');
                }
                out.push(b);
                at_line_start = false;
            }
        }
        i += 1;
    }
    if !at_line_start {
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b".\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalisation() {
        assert_eq!(normalise(b"a\r\nb\r\n"), b"a\r\nb\r\n.\r\n");
        assert_eq!(normalise(b"a"), b"a\r\n.\r\n");
        assert_eq!(normalise(b""), b".\r\n");
        assert_eq!(normalise(b".x\r\n..\r\n"), b"..x\r\n...\r\n.\r\n");
        // The smuggling endings become plain lines, the dots stuffed.
        assert_eq!(
            normalise(b"a\n.\nMAIL FROM:<x>\r.\r\nb\r\n"),
            b"a\r\n..\r\nMAIL FROM:<x>\r\n..\r\nb\r\n.\r\n"
        );
    }

    /// The reply `wire` holds.
    fn r(wire: &[u8]) -> Reply {
        match parse_reply(wire, &REPLY_LIMITS) {
            Ok(Status::Complete(parsed)) => Reply::new(&parsed),
            other => panic!("{wire:?}: {other:?}"),
        }
    }

    #[test]
    fn failures() {
        let cases: &[(&[u8], Outcome)] = &[
            (
                b"550 5.1.1 no such user\r\n",
                Outcome::Permanent("5.1.1".into(), "host h said: 550 5.1.1 no such user".into()),
            ),
            (
                b"451 try later\r\n",
                Outcome::Temporary("4.0.0".into(), "host h said: 451 try later".into()),
            ),
            (
                b"452-4.2.2 over quota\r\n452 4.2.2 try later\r\n",
                Outcome::Temporary(
                    "4.2.2".into(),
                    "host h said: 452 4.2.2 over quota 4.2.2 try later".into(),
                ),
            ),
            // A status of another class is text: the code's class decides.
            (
                b"554 4.7.1 odd\r\n",
                Outcome::Permanent("5.0.0".into(), "host h said: 554 4.7.1 odd".into()),
            ),
            (
                b"421 4.7 x\r\n",
                Outcome::Temporary("4.0.0".into(), "host h said: 421 4.7 x".into()),
            ),
            // A success where another answer was due fails as temporary.
            (
                b"250 2.0.0 ok\r\n",
                Outcome::Temporary("4.0.0".into(), "host h said: 250 2.0.0 ok".into()),
            ),
        ];
        for (wire, outcome) in cases {
            assert_eq!(r(wire).failure("h"), *outcome, "{wire:?}");
        }
        assert_eq!(r(b"250 2.1.5 ok\r\n").outcome("h"), Outcome::Delivered);
    }

    #[test]
    fn extensions_are_ehlo_keywords() {
        let ehlo = r(b"250-mx Hello SIZE\r\n250-PIPELINING\r\n250-SIZE 100\r\n250 8BITMIME\r\n");
        assert!(ehlo.offers("size"));
        assert!(ehlo.offers("8bitmime"));
        assert!(!ehlo.offers("Hello"), "the greeting line holds no keyword");
        assert!(!r(b"250-mx\r\n250 PIPELINING\r\n").offers("SIZE"));
    }
}
