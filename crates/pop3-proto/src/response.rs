//! Server responses (RFC 1939 §3): `+OK`/`-ERR` status lines with the extended
//! response codes of RFC 2449 §8 and RFC 3206, multi-line responses, SASL
//! continuations (RFC 5034), and the stock responses a server needs for its own
//! decisions.
//!
//! Text never reaches the wire unchecked: [`Response::write_to`] replaces every byte
//! that is not printable ASCII with `?`, so a caller's text cannot split a response
//! or forge another one; the lines of a multi-line response are byte-stuffed; and
//! the first line is cut to RFC 2449 §4's 512 octets.

use std::borrow::Cow;
use std::fmt;

/// The longest first line of a response, CRLF included (RFC 2449 §4).
pub const MAX_RESPONSE_LINE: usize = 512;

/// The status indicator of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `+OK`
    Ok,
    /// `-ERR`
    Err,
    /// `+ ` : a SASL challenge, waiting for the client's response line.
    Continue,
}

/// The extended response codes Stoa sends (RFC 2449 §8, RFC 3206), in brackets
/// after `-ERR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseCode {
    /// `[AUTH]`: the credentials were wrong (RFC 3206 §5).
    Auth,
    /// `[IN-USE]`: the mailbox is locked by another session (RFC 2449 §8.1.2).
    InUse,
    /// `[LOGIN-DELAY]`: the user logged in too recently (RFC 2449 §8.1.1).
    LoginDelay,
    /// `[SYS/TEMP]`: a temporary problem on the server (RFC 3206 §4).
    SysTemp,
    /// `[SYS/PERM]`: a problem that retrying will not fix (RFC 3206 §4).
    SysPerm,
}

impl ResponseCode {
    /// The code as sent, without brackets.
    pub fn as_str(self) -> &'static str {
        match self {
            ResponseCode::Auth => "AUTH",
            ResponseCode::InUse => "IN-USE",
            ResponseCode::LoginDelay => "LOGIN-DELAY",
            ResponseCode::SysTemp => "SYS/TEMP",
            ResponseCode::SysPerm => "SYS/PERM",
        }
    }

    /// The code named `text` (no brackets, any case), if it is one of these.
    pub fn from_name(text: &str) -> Option<ResponseCode> {
        [
            ResponseCode::Auth,
            ResponseCode::InUse,
            ResponseCode::LoginDelay,
            ResponseCode::SysTemp,
            ResponseCode::SysPerm,
        ]
        .into_iter()
        .find(|c| c.as_str().eq_ignore_ascii_case(text))
    }
}

/// The status of a line another POP3 server sent (the proxy's leg to a store
/// host), CRLF removed: `+OK`, `-ERR` with its response code when it has one of
/// [`ResponseCode`]'s, or `+` (a SASL challenge). `None` for anything else, which
/// is not POP3.
pub fn parse_status_line(line: &[u8]) -> Option<(Status, Option<ResponseCode>)> {
    let (status, rest) = if let Some(rest) = strip_word(line, b"+OK") {
        (Status::Ok, rest)
    } else if let Some(rest) = strip_word(line, b"-ERR") {
        (Status::Err, rest)
    } else if line == b"+" || line.starts_with(b"+ ") {
        return Some((Status::Continue, None));
    } else {
        return None;
    };
    let code = rest
        .strip_prefix(b"[")
        .and_then(|r| r.iter().position(|&b| b == b']').map(|end| &r[..end]))
        .and_then(|name| std::str::from_utf8(name).ok())
        .and_then(ResponseCode::from_name);
    Some((status, code))
}

/// `line` after `word` and one space (or nothing), if it starts with that word.
fn strip_word<'a>(line: &'a [u8], word: &[u8]) -> Option<&'a [u8]> {
    let rest = line.strip_prefix(word)?;
    match rest {
        [] => Some(rest),
        [b' ', rest @ ..] => Some(rest),
        _ => None,
    }
}

/// One response: a status, an optional response code, a line of text, and for
/// multi-line responses (LIST, UIDL, CAPA) the lines that follow, ended by `.`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    status: Status,
    code: Option<ResponseCode>,
    text: Cow<'static, str>,
    lines: Option<Vec<Cow<'static, str>>>,
}

impl Response {
    /// `+OK text`
    pub fn ok(text: impl Into<Cow<'static, str>>) -> Response {
        Response::new(Status::Ok, None, text.into())
    }

    /// `-ERR text`
    pub fn err(text: impl Into<Cow<'static, str>>) -> Response {
        Response::new(Status::Err, None, text.into())
    }

    /// `-ERR [CODE] text`
    pub fn err_code(code: ResponseCode, text: impl Into<Cow<'static, str>>) -> Response {
        Response::new(Status::Err, Some(code), text.into())
    }

    /// `+ text`: a SASL challenge (PLAIN's is empty).
    pub fn continuation(text: impl Into<Cow<'static, str>>) -> Response {
        Response::new(Status::Continue, None, text.into())
    }

    fn new(status: Status, code: Option<ResponseCode>, text: Cow<'static, str>) -> Response {
        Response {
            status,
            code,
            text,
            lines: None,
        }
    }

    /// Makes the response multi-line with these lines (possibly none): they follow
    /// the status line, byte-stuffed, and a `.` line ends them.
    #[must_use]
    pub fn with_lines(mut self, lines: Vec<Cow<'static, str>>) -> Response {
        debug_assert_eq!(self.status, Status::Ok, "multi-line -ERR");
        self.lines = Some(lines);
        self
    }

    /// The status.
    pub fn status(&self) -> Status {
        self.status
    }

    /// Whether this is `+OK` (or a continuation).
    pub fn is_ok(&self) -> bool {
        self.status != Status::Err
    }

    /// The response code, if any.
    pub fn code(&self) -> Option<ResponseCode> {
        self.code
    }

    /// The text of the status line.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The lines of a multi-line response (unstuffed), or `None`.
    pub fn lines(&self) -> Option<impl Iterator<Item = &str>> {
        self.lines.as_ref().map(|l| l.iter().map(|l| l.as_ref()))
    }

    /// Appends the response in wire form to `out`.
    pub fn write_to(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(match self.status {
            Status::Ok => b"+OK",
            Status::Err => b"-ERR",
            Status::Continue => b"+ ",
        });
        if let Some(code) = self.code {
            out.extend_from_slice(b" [");
            out.extend_from_slice(code.as_str().as_bytes());
            out.push(b']');
        }
        if !self.text.is_empty() {
            if self.status != Status::Continue {
                out.push(b' ');
            }
            let room = (start + MAX_RESPONSE_LINE - 2).saturating_sub(out.len());
            push_sanitised(out, &self.text.as_bytes()[..self.text.len().min(room)]);
        }
        out.extend_from_slice(b"\r\n");
        if let Some(lines) = &self.lines {
            for line in lines {
                if line.starts_with('.') {
                    out.push(b'.');
                }
                push_sanitised(out, line.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b".\r\n");
        }
    }

    /// The response in wire form.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_to(&mut out);
        out
    }
}

/// Appends `text` with every byte outside printable ASCII replaced by `?`.
fn push_sanitised(out: &mut Vec<u8>, text: &[u8]) {
    out.extend(
        text.iter()
            .map(|&b| if (b' '..=b'~').contains(&b) { b } else { b'?' }),
    );
}

impl fmt::Display for Response {
    /// The status line, for logs: `-ERR [IN-USE] text`, plus `(+N lines)` when
    /// multi-line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.status {
            Status::Ok => "+OK",
            Status::Err => "-ERR",
            Status::Continue => "+",
        })?;
        if let Some(code) = self.code {
            write!(f, " [{}]", code.as_str())?;
        }
        if !self.text.is_empty() {
            write!(f, " {}", self.text)?;
        }
        if let Some(lines) = &self.lines {
            write!(f, " (+{} lines)", lines.len())?;
        }
        Ok(())
    }
}

/// Stock responses for the decisions the server takes; the session's own come from
/// [`crate::Error::response`] and the session itself.
impl Response {
    /// `-ERR [AUTH] Authentication failed`: the same for an unknown user and a wrong
    /// password, so a guesser learns nothing about which names exist.
    pub fn auth_failed() -> Response {
        Response::err_code(ResponseCode::Auth, "Authentication failed")
    }

    /// `-ERR [IN-USE] Mailbox is locked by another session`.
    pub fn in_use() -> Response {
        Response::err_code(ResponseCode::InUse, "Mailbox is locked by another session")
    }

    /// `-ERR [LOGIN-DELAY] Logged in too recently`.
    pub fn login_delay() -> Response {
        Response::err_code(ResponseCode::LoginDelay, "Logged in too recently")
    }

    /// `-ERR [SYS/TEMP] Temporary failure, try again later`: the directory or the
    /// store failed.
    pub fn temporary_failure() -> Response {
        Response::err_code(ResponseCode::SysTemp, "Temporary failure, try again later")
    }

    /// `-ERR [SYS/PERM] Mailbox unavailable`: a failure retrying will not fix.
    pub fn permanent_failure() -> Response {
        Response::err_code(ResponseCode::SysPerm, "Mailbox unavailable")
    }

    /// `-ERR [SYS/TEMP] Message cannot be read`: RETR or TOP of a message the store
    /// could not open. Once any of a message has been sent, a failure can only be
    /// answered by closing the connection.
    pub fn message_unavailable() -> Response {
        Response::err_code(ResponseCode::SysTemp, "Message cannot be read")
    }

    /// `-ERR Autologout; idle for too long`: the autologout timer (RFC 1939 §3) ran
    /// out. Close after it, without entering the UPDATE state.
    pub fn autologout() -> Response {
        Response::err("Autologout; idle for too long")
    }

    /// `-ERR [SYS/TEMP] Server shutting down`: the server is draining. Close after it,
    /// without entering the UPDATE state.
    pub fn shutting_down() -> Response {
        Response::err_code(ResponseCode::SysTemp, "Server shutting down")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_of_another_server() {
        let parse = |l: &[u8]| parse_status_line(l);
        assert_eq!(parse(b"+OK"), Some((Status::Ok, None)));
        assert_eq!(parse(b"+OK Logged in."), Some((Status::Ok, None)));
        assert_eq!(
            parse(b"-ERR [IN-USE] Locked"),
            Some((Status::Err, Some(ResponseCode::InUse)))
        );
        assert_eq!(
            parse(b"-ERR [sys/temp]"),
            Some((Status::Err, Some(ResponseCode::SysTemp)))
        );
        assert_eq!(parse(b"-ERR [XYZ] who knows"), Some((Status::Err, None)));
        assert_eq!(parse(b"-ERR [AUTH"), Some((Status::Err, None)));
        assert_eq!(parse(b"+ "), Some((Status::Continue, None)));
        assert_eq!(parse(b"+OKAY"), None);
        assert_eq!(parse(b"* OK IMAP"), None);
        assert_eq!(parse(b""), None);
    }

    fn wire(response: &Response) -> String {
        String::from_utf8(response.to_bytes()).expect("ascii")
    }

    #[test]
    fn status_lines() {
        assert_eq!(wire(&Response::ok("")), "+OK\r\n");
        assert_eq!(wire(&Response::ok("2 320")), "+OK 2 320\r\n");
        assert_eq!(
            wire(&Response::err("No such message")),
            "-ERR No such message\r\n"
        );
        assert_eq!(wire(&Response::continuation("")), "+ \r\n");
        assert_eq!(wire(&Response::continuation("abc=")), "+ abc=\r\n");
        assert_eq!(
            wire(&Response::err_code(ResponseCode::SysTemp, "")),
            "-ERR [SYS/TEMP]\r\n"
        );
    }

    #[test]
    fn multiline_is_stuffed() {
        let response = Response::ok("list follows").with_lines(vec![
            "1 100".into(),
            ".hidden".into(),
            ".".into(),
            "".into(),
        ]);
        assert_eq!(
            wire(&response),
            "+OK list follows\r\n1 100\r\n..hidden\r\n..\r\n\r\n.\r\n"
        );
        assert_eq!(
            wire(&Response::ok("").with_lines(Vec::new())),
            "+OK\r\n.\r\n"
        );
        assert_eq!(response.to_string(), "+OK list follows (+4 lines)");
    }

    #[test]
    fn text_cannot_inject_lines() {
        let evil = Response::err("x\r\n+OK forged\x00é");
        assert_eq!(wire(&evil), "-ERR x??+OK forged???\r\n");
        let evil = Response::ok("").with_lines(vec!["a\r\n.\r\n+OK".into()]);
        assert_eq!(wire(&evil), "+OK\r\na??.??+OK\r\n.\r\n");
    }

    #[test]
    fn first_line_is_bounded() {
        let long = Response::err_code(ResponseCode::SysPerm, "x".repeat(2000));
        let bytes = long.to_bytes();
        assert_eq!(bytes.len(), MAX_RESPONSE_LINE);
        assert!(bytes.starts_with(b"-ERR [SYS/PERM] xxx") && bytes.ends_with(b"x\r\n"));
    }

    #[test]
    fn stock_responses() {
        let cases = [
            (
                Response::auth_failed(),
                "-ERR [AUTH] Authentication failed\r\n",
            ),
            (
                Response::in_use(),
                "-ERR [IN-USE] Mailbox is locked by another session\r\n",
            ),
            (
                Response::login_delay(),
                "-ERR [LOGIN-DELAY] Logged in too recently\r\n",
            ),
            (
                Response::temporary_failure(),
                "-ERR [SYS/TEMP] Temporary failure, try again later\r\n",
            ),
            (
                Response::permanent_failure(),
                "-ERR [SYS/PERM] Mailbox unavailable\r\n",
            ),
            (
                Response::message_unavailable(),
                "-ERR [SYS/TEMP] Message cannot be read\r\n",
            ),
            (
                Response::autologout(),
                "-ERR Autologout; idle for too long\r\n",
            ),
            (
                Response::shutting_down(),
                "-ERR [SYS/TEMP] Server shutting down\r\n",
            ),
        ];
        for (response, expected) in cases {
            assert_eq!(wire(&response), expected);
        }
    }
}
