//! A small SMTP client for the smart host: one connection per message, one
//! outcome per recipient.
//!
//! The conversation is the plain RFC 5321 one (EHLO, falling back to HELO; MAIL
//! with `SIZE` when offered; one RCPT per recipient; DATA), without pipelining or
//! TLS: the smart host is a trusted next hop on the local network. Every reply has
//! a deadline (Postfix's `smtp_*_timeout`; the end of data its own, longer one), and
//! a connection that breaks or times out is a temporary failure for everyone not
//! yet answered for.
//!
//! The message leaves normalised: every line ends in CRLF (a stray CR or LF is made
//! a line end, so a smuggled `\n.\n` cannot end the message early on the next hop)
//! and lines starting with `.` are dot-stuffed.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest reply accepted from the smart host (many lines of EHLO included).
const MAX_REPLY: usize = 64 * 1024;

/// Where and how to relay.
#[derive(Debug, Clone)]
pub struct Relay {
    /// `HOST:PORT`.
    pub host: String,
    /// Our name for EHLO.
    pub helo: String,
    /// Time to connect.
    pub connect_timeout: Duration,
    /// Time for each reply.
    pub command_timeout: Duration,
    /// Time for the reply to the end of the message.
    pub data_timeout: Duration,
}

/// What happened to one recipient.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The smart host took responsibility.
    Delivered,
    /// Try again later: enhanced status and diagnostic.
    Temporary(String, String),
    /// Bounce: enhanced status and diagnostic.
    Permanent(String, String),
}

/// One reply: its code and its text lines joined with spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reply {
    code: u16,
    text: String,
}

impl Reply {
    /// The outcome this (negative) reply means for the recipients it concerns.
    fn failure(&self, host: &str) -> Outcome {
        let class = if self.code >= 500 { '5' } else { '4' };
        let status = enhanced_status(&self.text)
            .filter(|s| s.starts_with(class))
            .unwrap_or_else(|| format!("{class}.0.0"));
        let diagnostic = format!("host {host} said: {} {}", self.code, self.text);
        if class == '5' {
            Outcome::Permanent(status, diagnostic)
        } else {
            Outcome::Temporary(status, diagnostic)
        }
    }
}

/// `x.y.z` at the start of a reply text, if any.
fn enhanced_status(text: &str) -> Option<String> {
    let word = text.split(' ').next()?;
    let parts: Vec<&str> = word.split('.').collect();
    let ok = parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()));
    ok.then(|| word.to_owned())
}

/// The connection to the smart host.
struct Client {
    stream: TcpStream,
    buf: Vec<u8>,
    host: String,
}

impl Client {
    async fn reply(&mut self, timeout: Duration) -> io::Result<Reply> {
        tokio::time::timeout(timeout, self.read_reply())
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "timed out waiting for a reply"))?
    }

    async fn read_reply(&mut self) -> io::Result<Reply> {
        let mut lines = Vec::new();
        loop {
            let Some(end) = memchr::memmem::find(&self.buf, b"\r\n") else {
                if self.buf.len() > MAX_REPLY {
                    return Err(io::Error::other("reply too long"));
                }
                let mut chunk = [0u8; 4096];
                let n = self.stream.read(&mut chunk).await?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed",
                    ));
                }
                self.buf.extend_from_slice(&chunk[..n]);
                continue;
            };
            let line: Vec<u8> = self.buf.drain(..end + 2).take(end).collect();
            let line = String::from_utf8_lossy(&line).into_owned();
            let code = line
                .get(..3)
                .and_then(|c| c.parse::<u16>().ok())
                .filter(|c| (200..600).contains(c))
                .ok_or_else(|| io::Error::other(format!("malformed reply {line:?}")))?;
            let last = line.as_bytes().get(3) != Some(&b'-');
            lines.push(line.get(4..).unwrap_or("").to_owned());
            if last {
                return Ok(Reply {
                    code,
                    text: lines.join(" "),
                });
            }
        }
    }

    async fn command(&mut self, line: &str, timeout: Duration) -> io::Result<Reply> {
        let bytes = format!("{line}\r\n");
        tokio::time::timeout(timeout, self.stream.write_all(bytes.as_bytes()))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "timed out sending"))??;
        self.reply(timeout).await
    }
}

/// Relays `message` from `sender` (empty for `<>`) to `recipients` through the smart
/// host; one outcome per recipient, in order.
pub async fn send(
    relay: &Relay,
    sender: &str,
    recipients: &[String],
    message: &[u8],
) -> Vec<Outcome> {
    let mut outcomes: Vec<Option<Outcome>> = vec![None; recipients.len()];
    let result = conversation(relay, sender, recipients, message, &mut outcomes).await;
    let fallback = match result {
        Ok(()) => Outcome::Temporary("4.0.0".into(), "no reply".into()),
        Err(e) => Outcome::Temporary(
            "4.4.2".into(),
            format!("conversation with {} failed: {e}", relay.host),
        ),
    };
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| fallback.clone()))
        .collect()
}

/// The conversation; fills `outcomes` as replies come. Recipients left `None` get
/// the result's outcome.
async fn conversation(
    relay: &Relay,
    sender: &str,
    recipients: &[String],
    message: &[u8],
    outcomes: &mut [Option<Outcome>],
) -> io::Result<()> {
    let mut c = Client::connect(relay).await?;
    let t = relay.command_timeout;
    let offers_size = match c.hello(relay).await? {
        Ok(offers_size) => offers_size,
        Err(refused) => {
            answer_unanswered(outcomes, &refused);
            return Ok(());
        }
    };
    let reply = c
        .command(&mail_from(sender, offers_size, message), t)
        .await?;
    if reply.code != 250 {
        answer_unanswered(outcomes, &reply.failure(&c.host));
        return Ok(());
    }
    let accepted = c.recipients(recipients, t, outcomes).await?;
    if accepted.is_empty() {
        let _ = c.command("QUIT", t).await;
        return Ok(());
    }
    let reply = c.command("DATA", t).await?;
    if reply.code != 354 {
        answer(outcomes, &accepted, &reply.failure(&c.host));
        return Ok(());
    }
    let outcome = c.message(relay, message).await?;
    answer(outcomes, &accepted, &outcome);
    let _ = c.command("QUIT", t).await;
    Ok(())
}

/// Gives `outcome` to every recipient not yet answered for.
fn answer_unanswered(outcomes: &mut [Option<Outcome>], outcome: &Outcome) {
    for slot in outcomes.iter_mut().filter(|s| s.is_none()) {
        *slot = Some(outcome.clone());
    }
}

/// Gives `outcome` to the recipients at `indices`.
fn answer(outcomes: &mut [Option<Outcome>], indices: &[usize], outcome: &Outcome) {
    for &i in indices {
        outcomes[i] = Some(outcome.clone());
    }
}

/// The `MAIL` command, with the message's size when the smart host offers `SIZE`.
fn mail_from(sender: &str, offers_size: bool, message: &[u8]) -> String {
    let mut mail = format!("MAIL FROM:<{sender}>");
    if offers_size {
        mail.push_str(&format!(" SIZE={}", message.len()));
    }
    mail
}

impl Client {
    async fn connect(relay: &Relay) -> io::Result<Client> {
        let stream = tokio::time::timeout(relay.connect_timeout, TcpStream::connect(&relay.host))
            .await
            .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
        let _ = stream.set_nodelay(true);
        Ok(Client {
            stream,
            buf: Vec::new(),
            host: relay.host.clone(),
        })
    }

    /// The greeting, then EHLO (falling back to HELO): whether the smart host
    /// offers `SIZE`, or the outcome for every recipient when it refuses.
    async fn hello(&mut self, relay: &Relay) -> io::Result<Result<bool, Outcome>> {
        let t = relay.command_timeout;
        let greeting = self.reply(t).await?;
        if greeting.code != 220 {
            // A refusing greeting is temporary whatever its code (Postfix does the same).
            let diagnostic = format!(
                "host {} refused the connection: {} {}",
                self.host, greeting.code, greeting.text
            );
            return Ok(Err(Outcome::Temporary("4.4.2".into(), diagnostic)));
        }
        let mut ehlo = self.command(&format!("EHLO {}", relay.helo), t).await?;
        if ehlo.code != 250 {
            ehlo = self.command(&format!("HELO {}", relay.helo), t).await?;
            if ehlo.code != 250 {
                return Ok(Err(ehlo.failure(&self.host)));
            }
        }
        Ok(Ok(ehlo
            .text
            .split(' ')
            .any(|w| w.eq_ignore_ascii_case("SIZE"))))
    }

    /// One `RCPT` per recipient, each refusal its outcome: the indices accepted.
    async fn recipients(
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

    /// After `354`: the message and the reply to its end, as the accepted
    /// recipients' outcome.
    async fn message(&mut self, relay: &Relay, message: &[u8]) -> io::Result<Outcome> {
        let wire = normalise(message);
        tokio::time::timeout(relay.data_timeout, self.stream.write_all(&wire))
            .await
            .map_err(|_| {
                io::Error::new(io::ErrorKind::TimedOut, "timed out sending the message")
            })??;
        let reply = self.reply(relay.data_timeout).await?;
        Ok(if reply.code == 250 {
            Outcome::Delivered
        } else {
            reply.failure(&self.host)
        })
    }
}

/// The message in wire form: CRLF line ends only, dot-stuffed, ending in
/// `CRLF.CRLF`.
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

    #[test]
    fn failures() {
        let r = |code, text: &str| Reply {
            code,
            text: text.into(),
        };
        assert_eq!(
            r(550, "5.1.1 no such user").failure("h"),
            Outcome::Permanent("5.1.1".into(), "host h said: 550 5.1.1 no such user".into())
        );
        assert_eq!(
            r(451, "try later").failure("h"),
            Outcome::Temporary("4.0.0".into(), "host h said: 451 try later".into())
        );
        assert_eq!(enhanced_status("4.7.1 x"), Some("4.7.1".into()));
        assert_eq!(enhanced_status("4.7 x"), None);
    }
}
