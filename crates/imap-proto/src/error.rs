//! The codec's error type, and [`Rejection`]: an error together with what the server
//! answers and how it recovers.

use crate::response::{self, Code, Condition};

/// Why a command (or a line of one) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The command does not follow the grammar; the text says which part.
    #[error("syntax error: {0}")]
    Syntax(&'static str),
    /// The line does not start with a valid tag.
    #[error("missing or invalid tag")]
    BadTag,
    /// The command name is not one this codec knows.
    #[error("unknown command")]
    UnknownCommand,
    /// A line (outside literals) longer than [`crate::Limits::max_line`].
    #[error("line too long")]
    LineTooLong,
    /// The whole command (lines and literals) is over [`crate::Limits::max_command`].
    #[error("command too long")]
    CommandTooLong,
    /// A literal over [`crate::Limits::max_literal`] (or a non-synchronizing one over
    /// 4096 bytes under LITERAL-).
    #[error("literal of {size} bytes too large")]
    LiteralTooLarge {
        /// The size the client announced.
        size: u64,
        /// `{n}` (the client waits, so it can be refused) rather than `{n+}` (the data
        /// is already on its way).
        synchronizing: bool,
    },
    /// A line ended by LF without CR.
    #[error("line not ended by CRLF")]
    BareLf,
    /// Text that must be UTF-8 is not.
    #[error("invalid UTF-8")]
    NotUtf8,
    /// A mailbox name that is not valid modified UTF-7 (or UTF-8 under UTF8=ACCEPT).
    #[error("invalid mailbox name")]
    BadMailboxName,
    /// Parentheses nested deeper than the parser allows.
    #[error("nesting too deep")]
    TooDeep,
    /// An AUTHENTICATE response (or SASL-IR initial response) that is not base64, or
    /// a PLAIN message that is malformed.
    #[error("invalid SASL response")]
    BadSaslResponse,
    /// The client cancelled an AUTHENTICATE exchange with `*`.
    #[error("authentication cancelled")]
    AuthCancelled,
    /// A line other than `DONE` during IDLE.
    #[error("expected DONE")]
    ExpectedDone,
}

impl Error {
    /// The text of the BAD (or NO) response.
    pub fn text(&self) -> &'static str {
        match self {
            Error::Syntax(what) => what,
            Error::BadTag => "Missing or invalid tag",
            Error::UnknownCommand => "Unknown command",
            Error::LineTooLong => "Line too long",
            Error::CommandTooLong => "Command too long",
            Error::LiteralTooLarge { .. } => "Literal too large",
            Error::BareLf => "Line not ended by CRLF",
            Error::NotUtf8 => "Invalid UTF-8",
            Error::BadMailboxName => "Invalid mailbox name",
            Error::TooDeep => "Too deeply nested",
            Error::BadSaslResponse => "Invalid SASL response",
            Error::AuthCancelled => "Authentication cancelled",
            Error::ExpectedDone => "Expected DONE",
        }
    }
}

/// Every malformed SASL message is one refusal: the client learns nothing from which
/// rule it broke.
impl From<stoa_mail_proto::Error> for Error {
    fn from(_: stoa_mail_proto::Error) -> Error {
        Error::BadSaslResponse
    }
}

/// A refused command: the error, the tag when one was read, and whether the
/// connection must close.
///
/// [`Rejection::write_response`] writes the answer: `tag BAD text` (or
/// `tag NO [TOOBIG] text` for a synchronizing literal over the limit, whose data the
/// client will not send), `* BAD text` when no tag could be read; when fatal,
/// `tag BAD [TOOBIG] text` (RFC 7888 §4, when the tag is known) then `* BYE text`. After a non-fatal rejection the session goes on with the next command; the
/// reader has already skipped (or will skip) the bad command's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The command's tag, when the line started with a valid one.
    pub tag: Option<String>,
    /// What was wrong.
    pub error: Error,
}

impl Rejection {
    /// Whether the server must send `* BYE` and close: a non-synchronizing literal
    /// over the limit, whose data is already on its way and cannot be told apart
    /// from the commands after it.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self.error,
            Error::LiteralTooLarge {
                synchronizing: false,
                ..
            }
        )
    }

    /// Appends the response to `out`.
    pub fn write_response(&self, out: &mut Vec<u8>) {
        let text = self.error.text();
        if self.is_fatal() {
            if let Some(tag) = &self.tag {
                response::write_tagged(out, tag, Condition::Bad, Some(&Code::TooBig), text);
            }
            response::write_bye(out, None, text);
            return;
        }
        let Some(tag) = &self.tag else {
            response::write_untagged(out, Condition::Bad, None, text);
            return;
        };
        match self.error {
            Error::LiteralTooLarge { .. } | Error::CommandTooLong => {
                response::write_tagged(out, tag, Condition::No, Some(&Code::TooBig), text);
            }
            _ => response::write_tagged(out, tag, Condition::Bad, None, text),
        }
    }
}
