//! The one error type of the codec, and the one place it becomes a response.

use std::fmt;

use crate::command::Verb;
use crate::response::{Response, ResponseCode};

/// Why the session refused what the client sent.
///
/// Every variant is the client's doing and counts toward the session's error limit
/// ([`crate::session::Limits::max_errors`]). [`Error::response`] is what the client is
/// told; [`Error::closes`] says whether the connection must close after it. Failed
/// logins are not errors of this kind: the server decides them (see
/// [`crate::session::LoginDecision`]) and they have their own limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A command line longer than the limit; the rest of it is discarded.
    LineTooLong,
    /// A line ended by LF without CR (then close: the client's framing is not ours).
    BareLf,
    /// A CR not followed by LF inside a line (`RETR 1\rDELE 1` is one bad command).
    BareCr,
    /// A control byte, invalid UTF-8, or 8-bit text outside USER and PASS.
    BadCharacter,
    /// An unknown keyword (APOP among them: it is not offered).
    UnknownCommand,
    /// A known keyword with malformed or missing arguments.
    Syntax(Verb),
    /// A command not valid in the current state (STAT before login, USER after it,
    /// STLS after login...).
    WrongState(Verb),
    /// A message number that is 0 or beyond the mailbox listing.
    NoSuchMessage,
    /// A message number marked deleted in this session.
    MessageDeleted,
    /// PASS without a USER before it.
    NeedUser,
    /// USER, PASS or AUTH before STLS where the configuration requires TLS
    /// (`-ERR [SYS/PERM]`).
    TlsRequired,
    /// STLS when TLS is already on.
    TlsActive,
    /// STLS where it is not offered (no certificate).
    StlsUnavailable,
    /// AUTH where SASL is not offered.
    AuthUnavailable,
    /// AUTH with a mechanism other than PLAIN.
    UnknownMechanism,
    /// The client cancelled the SASL exchange with `*`.
    AuthAborted,
    /// A SASL response that is not base64 or not a well-formed PLAIN message.
    BadAuthResponse,
    /// XCLIENT from a client that is not a trusted proxy.
    ForwardingRefused,
    /// The error limit was reached (then close).
    TooManyErrors,
}

impl Error {
    /// The response the client gets.
    pub fn response(&self) -> Response {
        let text = match self {
            Error::LineTooLong => "Line too long",
            Error::BareLf => "Line not ended by CRLF",
            Error::BareCr => "Bare CR in command",
            Error::BadCharacter => "Invalid characters in command",
            Error::UnknownCommand => "Unknown command",
            Error::Syntax(verb) => verb.usage(),
            Error::WrongState(_) => "Command not valid in this state",
            Error::NoSuchMessage => "No such message",
            Error::MessageDeleted => "Message is deleted",
            Error::NeedUser => "No username given",
            Error::TlsRequired => {
                return Response::err_code(
                    ResponseCode::SysPerm,
                    "Plaintext authentication disallowed without TLS",
                );
            }
            Error::TlsActive => "TLS already active",
            Error::StlsUnavailable => "STLS not available",
            Error::AuthUnavailable => "AUTH not available",
            Error::UnknownMechanism => "Unsupported authentication mechanism",
            Error::AuthAborted => "Authentication aborted",
            Error::BadAuthResponse => "Invalid SASL response",
            Error::ForwardingRefused => "XCLIENT not allowed from your address",
            Error::TooManyErrors => "Too many bad commands",
        };
        Response::err(text)
    }

    /// Whether the connection must close after the response: the client's framing is
    /// broken, or it has made too many errors.
    pub fn closes(&self) -> bool {
        matches!(self, Error::BareLf | Error::TooManyErrors)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syntax(verb) => write!(f, "malformed {} command", verb.as_str()),
            Error::WrongState(verb) => write!(f, "{} not valid in this state", verb.as_str()),
            other => f.write_str(&other.response().text().to_ascii_lowercase()),
        }
    }
}

/// Every malformed SASL response is one refusal: the client learns nothing from
/// which rule it broke.
impl From<stoa_mail_proto::Error> for Error {
    fn from(_: stoa_mail_proto::Error) -> Error {
        Error::BadAuthResponse
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_and_display() {
        assert_eq!(
            Error::TlsRequired.response().to_bytes(),
            b"-ERR [SYS/PERM] Plaintext authentication disallowed without TLS\r\n"
        );
        assert_eq!(
            Error::Syntax(Verb::Top).response().to_bytes(),
            b"-ERR Syntax: TOP msg lines\r\n"
        );
        assert_eq!(Error::NoSuchMessage.to_string(), "no such message");
        assert_eq!(
            Error::Syntax(Verb::Retr).to_string(),
            "malformed RETR command"
        );
        assert_eq!(
            Error::WrongState(Verb::Stat).to_string(),
            "STAT not valid in this state"
        );
        assert!(Error::BareLf.closes() && Error::TooManyErrors.closes());
        assert!(!Error::LineTooLong.closes() && !Error::NoSuchMessage.closes());
    }
}
