//! The client side of SMTP and LMTP that the relay ([`super::relay`]) and the LMTP
//! client ([`super::lmtp`]) share: replies read with a deadline and parsed
//! (multi-line, enhanced status codes), commands, `RCPT` per recipient, and the
//! message in wire form.

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest reply accepted from a server (many lines of EHLO included).
const MAX_REPLY: usize = 64 * 1024;

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

/// One reply: its code and its text lines joined with spaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reply {
    pub(crate) code: u16,
    pub(crate) text: String,
}

impl Reply {
    /// The outcome this (negative) reply means for the recipients it concerns.
    pub(crate) fn failure(&self, host: &str) -> Outcome {
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
        self.text.split(' ').any(|w| w.eq_ignore_ascii_case(name))
    }
}

/// `x.y.z` at the start of a reply text, if any.
pub(crate) fn enhanced_status(text: &str) -> Option<String> {
    let word = text.split(' ').next()?;
    let parts: Vec<&str> = word.split('.').collect();
    let ok = parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit()));
    ok.then(|| word.to_owned())
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
        let mut lines = Vec::new();
        loop {
            let Some(end) = memchr::memmem::find(&self.buf, b"\r\n") else {
                self.fill().await?;
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

    /// Reads more bytes into the buffer.
    async fn fill(&mut self) -> io::Result<()> {
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
        assert_eq!(r(250, "2.1.5 ok").outcome("h"), Outcome::Delivered);
        assert!(r(250, "x PIPELINING SIZE 100 ENHANCEDSTATUSCODES").offers("size"));
        assert_eq!(enhanced_status("4.7.1 x"), Some("4.7.1".into()));
        assert_eq!(enhanced_status("4.7 x"), None);
    }
}
