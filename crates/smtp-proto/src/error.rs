//! The one error type of the codec, and the one place it becomes a reply.

use std::fmt;

use crate::address::AddressError;
use crate::command::Verb;
use crate::reply::{EnhancedStatus, Reply};

/// Why the session refused what the client sent.
///
/// Every variant is the client's doing and counts toward the session's error limits.
/// [`Error::reply`] is what the client is told (codes as in docs/robustness.md §3.7, wording
/// after Postfix); [`Error::closes`] says whether the connection must close after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A command line longer than the limit (`500 5.5.2`).
    LineTooLong,
    /// A command line ended by LF without CR (`550 5.5.2`, then close: the client's
    /// line framing cannot be trusted).
    BareLf,
    /// A CR not followed by LF inside a command line (`500 5.5.2`).
    BareCr,
    /// A control or non-ASCII byte in a command line (`500 5.5.2`).
    BadCharacter,
    /// An unknown command verb (`500 5.5.2`).
    UnknownCommand,
    /// A known verb with malformed arguments (`501 5.5.4`).
    Syntax(Verb),
    /// A malformed reverse-path (`501 5.1.7`).
    BadSender(AddressError),
    /// A malformed forward-path (`501 5.1.3`).
    BadRecipient(AddressError),
    /// A MAIL or RCPT parameter Stoa does not offer (`555 5.5.4`).
    UnsupportedParameter,
    /// A malformed or repeated MAIL parameter value (`501 5.5.4`).
    BadParameter,
    /// `SIZE=` above the limit, or a message that grew past it (`552 5.3.4`).
    MessageTooLarge,
    /// MAIL, RCPT, DATA, STARTTLS or AUTH before HELO/EHLO (`503 5.5.1`).
    NeedHelo,
    /// AUTH after HELO instead of EHLO (`503 5.5.1`).
    NeedEhlo,
    /// MAIL inside a transaction (`503 5.5.1`).
    NestedMail,
    /// RCPT or DATA without MAIL (`503 5.5.1`).
    NeedMail,
    /// DATA without any RCPT (`503 5.5.1`).
    NeedRcpt,
    /// DATA when every RCPT was refused (`554 5.5.1`).
    NoValidRecipients,
    /// RCPT beyond the recipient limit (`452 4.5.3`).
    TooManyRecipients,
    /// STARTTLS or AUTH inside a mail transaction (`503 5.5.1`).
    InTransaction,
    /// A command Stoa does not offer: EXPN, or STARTTLS without TLS (`502 5.5.1`).
    NotImplemented,
    /// STARTTLS when TLS is already on (`554 5.5.1`).
    TlsActive,
    /// MAIL on a listener that requires TLS, before STARTTLS (`530 5.7.0`).
    TlsRequired,
    /// AUTH where it is not offered (`503 5.5.1`).
    AuthUnavailable,
    /// AUTH before STARTTLS where TLS must come first (`538 5.7.11`).
    AuthNeedsTls,
    /// AUTH after a successful AUTH (`503 5.5.1`).
    AlreadyAuthenticated,
    /// AUTH with a mechanism other than PLAIN and LOGIN (`504 5.5.4`).
    UnknownMechanism,
    /// The client cancelled the SASL exchange with `*` (`501 5.7.0`).
    AuthAborted,
    /// A SASL response that is not base64 or not a well-formed PLAIN/LOGIN message
    /// (`501 5.5.2`).
    BadAuthResponse,
    /// MAIL on a listener that requires AUTH, before it (`530 5.7.0`).
    AuthRequired,
    /// A message line ended by LF without CR: an SMTP smuggling attempt or a broken
    /// client (`550 5.5.2`, then close).
    BareLfInMessage,
    /// A CR not followed by LF in a message (`550 5.5.2`, then close).
    BareCrInMessage,
    /// A message text line longer than the limit (`554 5.3.4`).
    MessageLineTooLong,
    /// Commands sent ahead where RFC 2920 forbids it, or before the greeting
    /// (`554 5.5.0`, then close).
    Pipelining,
    /// The hard error limit was reached (`421 4.7.0`, then close).
    TooManyErrors,
    /// HELO or EHLO in LMTP, which has LHLO instead (`500 5.5.1`; RFC 2033 §4.1
    /// forbids a positive reply and recommends 500).
    UseLhlo,
    /// MAIL, RCPT, DATA, STARTTLS or AUTH before LHLO in LMTP (`503 5.5.1`).
    NeedLhlo,
}

const fn status(class: u8, subject: u16, detail: u16) -> EnhancedStatus {
    EnhancedStatus::new(class, subject, detail)
}

impl Error {
    /// The reply the client gets.
    pub fn reply(&self) -> Reply {
        let (code, st, text) = match self {
            Error::LineTooLong => (500, status(5, 5, 2), "Error: line too long"),
            Error::BareLf => (550, status(5, 5, 2), "Error: bare <LF> received"),
            Error::BareCr => (500, status(5, 5, 2), "Error: bare <CR> received"),
            Error::BadCharacter => (500, status(5, 5, 2), "Error: bad character in command"),
            Error::UnknownCommand => (500, status(5, 5, 2), "Error: command not recognized"),
            Error::Syntax(verb) => (501, status(5, 5, 4), verb.usage()),
            Error::BadSender(_) => (501, status(5, 1, 7), "Bad sender address syntax"),
            Error::BadRecipient(_) => (501, status(5, 1, 3), "Bad recipient address syntax"),
            Error::UnsupportedParameter => (555, status(5, 5, 4), "Unsupported option"),
            Error::BadParameter => (501, status(5, 5, 4), "Bad parameter syntax"),
            Error::MessageTooLarge => (552, status(5, 3, 4), "Message size exceeds fixed limit"),
            Error::NeedHelo => (503, status(5, 5, 1), "Error: send HELO/EHLO first"),
            Error::NeedEhlo => (503, status(5, 5, 1), "Error: send EHLO first"),
            Error::NestedMail => (503, status(5, 5, 1), "Error: nested MAIL command"),
            Error::NeedMail => (503, status(5, 5, 1), "Error: need MAIL command"),
            Error::NeedRcpt => (503, status(5, 5, 1), "Error: need RCPT command"),
            Error::NoValidRecipients => (554, status(5, 5, 1), "Error: no valid recipients"),
            Error::TooManyRecipients => (452, status(4, 5, 3), "Error: too many recipients"),
            Error::InTransaction => (503, status(5, 5, 1), "Error: MAIL transaction in progress"),
            Error::NotImplemented => (502, status(5, 5, 1), "Error: command not implemented"),
            Error::TlsActive => (554, status(5, 5, 1), "Error: TLS already active"),
            Error::TlsRequired => (530, status(5, 7, 0), "Must issue a STARTTLS command first"),
            Error::AuthUnavailable => (503, status(5, 5, 1), "Error: authentication not enabled"),
            Error::AuthNeedsTls => (
                538,
                status(5, 7, 11),
                "Encryption required for requested authentication mechanism",
            ),
            Error::AlreadyAuthenticated => (503, status(5, 5, 1), "Error: already authenticated"),
            Error::UnknownMechanism => (504, status(5, 5, 4), "Unrecognized authentication type"),
            Error::AuthAborted => (501, status(5, 7, 0), "Authentication aborted"),
            Error::BadAuthResponse => (501, status(5, 5, 2), "Cannot decode response"),
            Error::AuthRequired => (530, status(5, 7, 0), "Authentication required"),
            Error::BareLfInMessage => (550, status(5, 5, 2), "Error: bare <LF> received"),
            Error::BareCrInMessage => (550, status(5, 5, 2), "Error: bare <CR> received"),
            Error::MessageLineTooLong => (554, status(5, 3, 4), "Error: message line too long"),
            Error::Pipelining => (554, status(5, 5, 0), "Error: SMTP protocol synchronization"),
            Error::TooManyErrors => (421, status(4, 7, 0), "Error: too many errors"),
            Error::UseLhlo => (500, status(5, 5, 1), "Error: this is LMTP, use LHLO"),
            Error::NeedLhlo => (503, status(5, 5, 1), "Error: send LHLO first"),
        };
        Reply::new(code, st, text)
    }

    /// Whether the connection must close after the reply: the client's framing is
    /// broken, it is out of sync, or it has made too many errors.
    pub fn closes(&self) -> bool {
        matches!(
            self,
            Error::BareLf
                | Error::BareLfInMessage
                | Error::BareCrInMessage
                | Error::Pipelining
                | Error::TooManyErrors
        )
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Syntax(verb) => write!(f, "malformed {} command", verb.as_str()),
            Error::BadSender(e) => write!(f, "bad sender address: {e}"),
            Error::BadRecipient(e) => write!(f, "bad recipient address: {e}"),
            other => {
                // The reply text minus Postfix's "Error: " prefix, lowercased.
                let reply = other.reply();
                let text = reply.lines().next().unwrap_or_default();
                let text = text.strip_prefix("Error: ").unwrap_or(text);
                f.write_str(&text.to_ascii_lowercase())
            }
        }
    }
}

/// Every malformed SASL response is one refusal (`501 5.5.2`): the client learns
/// nothing from which rule it broke.
impl From<stoa_mail_proto::Error> for Error {
    fn from(_: stoa_mail_proto::Error) -> Error {
        Error::BadAuthResponse
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::BadSender(e) | Error::BadRecipient(e) => Some(e),
            _ => None,
        }
    }
}
