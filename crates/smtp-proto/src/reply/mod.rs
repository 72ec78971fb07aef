//! Server replies: codes, enhanced status codes (RFC 3463, RFC 2034), multiline
//! encoding, the EHLO capability list, and the stock replies a server needs for its
//! own decisions (relay refused, unknown user, storage trouble...); and, for the
//! client side, [`parse_reply`]: the replies another server sends, read ([`parse`]).
//!
//! Reply text never reaches the wire unchecked: [`Reply::write_to`] replaces every
//! byte that is not printable ASCII with `?`, so a caller's text (an address, a queue
//! id) cannot split a reply or forge another one.

use std::borrow::Cow;
use std::fmt;

use crate::command::Mechanism;

pub mod parse;
#[cfg(test)]
mod parse_tests;

pub use parse::{ParsedReply, ReplyError, ReplyLimits, parse_reply};
/// [`parse_reply`]'s "parsed or need more bytes" (`stoa-mail-proto`'s, re-exported so
/// that callers need no other crate).
pub use stoa_mail_proto::Status;

/// An enhanced mail system status code, `class.subject.detail` (RFC 3463).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnhancedStatus {
    /// 2 (success), 4 (persistent transient failure) or 5 (permanent failure).
    pub class: u8,
    /// The subject: 0 other, 1 addressing, 2 mailbox, 3 mail system, 4 network,
    /// 5 protocol, 6 content, 7 security.
    pub subject: u16,
    /// The detail within the subject.
    pub detail: u16,
}

impl EnhancedStatus {
    /// `class.subject.detail`.
    pub const fn new(class: u8, subject: u16, detail: u16) -> EnhancedStatus {
        EnhancedStatus {
            class,
            subject,
            detail,
        }
    }
}

impl EnhancedStatus {
    /// The status at the start of a reply line's text, as RFC 3463 §2 writes it
    /// (`class "." subject "." detail`, a class of 2, 4 or 5, one to three digits for
    /// the others), followed by a space or the end of the text; `None` when the
    /// text does not start with one.
    pub fn parse(text: &[u8]) -> Option<EnhancedStatus> {
        let word = text.split(|&b| b == b' ').next().unwrap_or_default();
        let mut parts = word.split(|&b| b == b'.');
        let (Some(class), Some(subject), Some(detail), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let class = match class {
            [c @ (b'2' | b'4' | b'5')] => c - b'0',
            _ => return None,
        };
        Some(EnhancedStatus::new(
            class,
            number(subject)?,
            number(detail)?,
        ))
    }
}

/// One to three decimal digits.
fn number(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() || digits.len() > 3 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0, |n, &d| n * 10 + u16::from(d - b'0')))
}

impl fmt::Display for EnhancedStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.class, self.subject, self.detail)
    }
}

/// One reply: a three-digit code, an optional enhanced status code repeated on every
/// line (RFC 2034 §4), and one or more lines of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    code: u16,
    status: Option<EnhancedStatus>,
    lines: Vec<Cow<'static, str>>,
}

impl Reply {
    /// A reply with an enhanced status code. The status's class should match the code's
    /// first digit (2, 4 or 5).
    pub fn new(code: u16, status: EnhancedStatus, text: impl Into<Cow<'static, str>>) -> Reply {
        debug_assert_eq!(
            u16::from(status.class),
            code / 100,
            "class of {code} {status}"
        );
        Reply {
            code,
            status: Some(status),
            lines: vec![text.into()],
        }
    }

    /// A reply without an enhanced status code: the greeting, EHLO/HELO answers and
    /// 3xx intermediate replies (RFC 2034 exempts them).
    pub fn plain(code: u16, text: impl Into<Cow<'static, str>>) -> Reply {
        Reply {
            code,
            status: None,
            lines: vec![text.into()],
        }
    }

    /// Adds a line, making the reply multiline.
    #[must_use]
    pub fn with_line(mut self, text: impl Into<Cow<'static, str>>) -> Reply {
        self.lines.push(text.into());
        self
    }

    /// The three-digit code.
    pub fn code(&self) -> u16 {
        self.code
    }

    /// The enhanced status code, if any.
    pub fn status(&self) -> Option<EnhancedStatus> {
        self.status
    }

    /// The lines of text, without codes.
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().map(|l| l.as_ref())
    }

    /// 2xx or 3xx: the command was accepted (or is going on).
    pub fn is_positive(&self) -> bool {
        self.code < 400
    }

    /// Appends the reply in wire form (`250-first\r\n250 last\r\n`) to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let last = self.lines.len().saturating_sub(1);
        for (i, line) in self.lines.iter().enumerate() {
            let code = self.code.min(999);
            out.extend_from_slice(&[
                b'0' + (code / 100) as u8,
                b'0' + (code / 10 % 10) as u8,
                b'0' + (code % 10) as u8,
                if i == last { b' ' } else { b'-' },
            ]);
            if let Some(status) = self.status {
                out.extend_from_slice(status.to_string().as_bytes());
                if !line.is_empty() {
                    out.push(b' ');
                }
            }
            out.extend(
                line.bytes()
                    .map(|b| if (b' '..=b'~').contains(&b) { b } else { b'?' }),
            );
            out.extend_from_slice(b"\r\n");
        }
    }

    /// The reply in wire form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }
}

impl fmt::Display for Reply {
    /// The reply on one line, for logs: `550 5.1.1 text / more text`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.code)?;
        if let Some(status) = self.status {
            write!(f, " {status}")?;
        }
        for (i, line) in self.lines.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { " / " })?;
            f.write_str(line)?;
        }
        Ok(())
    }
}

/// What the EHLO reply advertises (RFC 5321 §4.1.1.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    /// `SIZE n` (RFC 1870), the largest message accepted; `None` leaves it out.
    pub size: Option<u64>,
    /// `PIPELINING` (RFC 2920).
    pub pipelining: bool,
    /// `8BITMIME` (RFC 6152).
    pub eight_bit_mime: bool,
    /// `ENHANCEDSTATUSCODES` (RFC 2034).
    pub enhanced_status_codes: bool,
    /// `STARTTLS` (RFC 3207).
    pub starttls: bool,
    /// `AUTH` (RFC 4954) with these mechanisms; empty leaves it out.
    pub auth: Vec<Mechanism>,
}

impl Capabilities {
    /// The multiline `250` answer to `EHLO`: the host name and a greeting on the first
    /// line, then one capability per line.
    pub fn ehlo_reply(&self, hostname: &str, client: &str) -> Reply {
        let mut reply = Reply::plain(250, format!("{hostname} Hello {client}"));
        if self.pipelining {
            reply = reply.with_line("PIPELINING");
        }
        if let Some(size) = self.size {
            reply = reply.with_line(format!("SIZE {size}"));
        }
        if self.starttls {
            reply = reply.with_line("STARTTLS");
        }
        if !self.auth.is_empty() {
            let names: Vec<&str> = self.auth.iter().map(|m| m.as_str()).collect();
            reply = reply.with_line(format!("AUTH {}", names.join(" ")));
        }
        if self.enhanced_status_codes {
            reply = reply.with_line("ENHANCEDSTATUSCODES");
        }
        if self.eight_bit_mime {
            reply = reply.with_line("8BITMIME");
        }
        reply
    }
}

/// Shorthand for the replies below.
const fn status(class: u8, subject: u16, detail: u16) -> EnhancedStatus {
    EnhancedStatus::new(class, subject, detail)
}

/// Stock replies for the decisions the server takes (the session's own replies come
/// from [`crate::Error::reply`] and the session itself). Wording follows Postfix, so
/// that tools written against Postfix (swaks, nmap scripts) read them the same way.
impl Reply {
    /// `554 5.7.1 <addr>: Relay access denied`: a recipient outside the local domains
    /// from a client that may not relay.
    pub fn relay_denied(recipient: &impl fmt::Display) -> Reply {
        Reply::new(
            554,
            status(5, 7, 1),
            format!("{recipient}: Relay access denied"),
        )
    }

    /// `550 5.1.1 <addr>: Recipient address rejected: User unknown`.
    pub fn user_unknown(recipient: &impl fmt::Display) -> Reply {
        Reply::new(
            550,
            status(5, 1, 1),
            format!("{recipient}: Recipient address rejected: User unknown"),
        )
    }

    /// `452 4.3.1 Insufficient system storage`: free space under the threshold.
    pub fn insufficient_storage() -> Reply {
        Reply::new(452, status(4, 3, 1), "Insufficient system storage")
    }

    /// `451 4.3.0 Error: queue file write error`: a write or fsync failed.
    pub fn local_error() -> Reply {
        Reply::new(451, status(4, 3, 0), "Error: queue file write error")
    }

    /// `250 2.0.0 Ok: queued as ID`: the message is on stable storage.
    pub fn queued(id: &impl fmt::Display) -> Reply {
        Reply::new(250, status(2, 0, 0), format!("Ok: queued as {id}"))
    }

    /// `535 5.7.8 Error: authentication failed`: the same for an unknown user and a
    /// wrong password.
    pub fn auth_failed() -> Reply {
        Reply::new(535, status(5, 7, 8), "Error: authentication failed")
    }

    /// `421 4.3.2 Service shutting down`: the server is draining.
    pub fn shutting_down(hostname: &str) -> Reply {
        Reply::new(
            421,
            status(4, 3, 2),
            format!("{hostname} Service shutting down"),
        )
    }

    /// `421 4.4.2 Error: timeout exceeded`: the client was too slow.
    pub fn timeout(hostname: &str) -> Reply {
        Reply::new(
            421,
            status(4, 4, 2),
            format!("{hostname} Error: timeout exceeded"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_multiline_encoding() {
        let one = Reply::new(250, EnhancedStatus::new(2, 1, 0), "Ok");
        assert_eq!(one.to_bytes(), b"250 2.1.0 Ok\r\n");
        let plain = Reply::plain(354, "End data with <CR><LF>.<CR><LF>");
        assert_eq!(plain.to_bytes(), b"354 End data with <CR><LF>.<CR><LF>\r\n");
        let multi = Reply::new(214, EnhancedStatus::new(2, 0, 0), "a")
            .with_line("b")
            .with_line("c");
        assert_eq!(
            multi.to_bytes(),
            b"214-2.0.0 a\r\n214-2.0.0 b\r\n214 2.0.0 c\r\n"
        );
        assert_eq!(Reply::plain(334, "").to_bytes(), b"334 \r\n");
        assert_eq!(
            Reply::new(235, EnhancedStatus::new(2, 7, 0), "").to_bytes(),
            b"235 2.7.0\r\n"
        );
        assert_eq!(multi.to_string(), "214 2.0.0 a / b / c");
    }

    #[test]
    fn text_cannot_inject_lines() {
        let evil = Reply::queued(&"x\r\n250 2.0.0 forged\x00é");
        assert_eq!(
            evil.to_bytes(),
            b"250 2.0.0 Ok: queued as x??250 2.0.0 forged???\r\n"
        );
    }

    #[test]
    fn ehlo_capabilities() {
        let caps = Capabilities {
            size: Some(10_240_000),
            pipelining: true,
            eight_bit_mime: true,
            enhanced_status_codes: true,
            starttls: true,
            auth: vec![Mechanism::Plain, Mechanism::Login],
        };
        let reply = caps.ehlo_reply("mx.example", "client.example");
        assert_eq!(
            String::from_utf8(reply.to_bytes()).expect("ascii"),
            "250-mx.example Hello client.example\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n\
             250-STARTTLS\r\n250-AUTH PLAIN LOGIN\r\n250-ENHANCEDSTATUSCODES\r\n250 8BITMIME\r\n"
        );
        let bare = Capabilities {
            size: None,
            pipelining: false,
            eight_bit_mime: false,
            enhanced_status_codes: false,
            starttls: false,
            auth: Vec::new(),
        };
        assert_eq!(bare.ehlo_reply("h", "c").to_bytes(), b"250 h Hello c\r\n");
    }

    #[test]
    fn stock_replies() {
        let cases = [
            (
                Reply::relay_denied(&"<a@b>"),
                "554 5.7.1 <a@b>: Relay access denied\r\n",
            ),
            (
                Reply::user_unknown(&"<a@b>"),
                "550 5.1.1 <a@b>: Recipient address rejected: User unknown\r\n",
            ),
            (
                Reply::insufficient_storage(),
                "452 4.3.1 Insufficient system storage\r\n",
            ),
            (
                Reply::local_error(),
                "451 4.3.0 Error: queue file write error\r\n",
            ),
            (
                Reply::auth_failed(),
                "535 5.7.8 Error: authentication failed\r\n",
            ),
            (Reply::queued(&"1A2B"), "250 2.0.0 Ok: queued as 1A2B\r\n"),
            (
                Reply::shutting_down("h"),
                "421 4.3.2 h Service shutting down\r\n",
            ),
            (
                Reply::timeout("h"),
                "421 4.4.2 h Error: timeout exceeded\r\n",
            ),
        ];
        for (reply, wire) in cases {
            assert_eq!(String::from_utf8(reply.to_bytes()).expect("ascii"), wire);
        }
    }
}
