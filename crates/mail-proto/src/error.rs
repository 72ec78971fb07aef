//! The one error type of the crate.

use std::fmt;

/// Why a SASL response was refused. Every variant is the client's doing; the
/// protocols answer all of them alike (SMTP `501 5.5.2`, POP3 `-ERR`), so that a
/// client learns nothing from the difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The response is not base64 (RFC 4648 §4, padded).
    BadBase64,
    /// A PLAIN message that is not `[authzid] NUL authcid NUL passwd`.
    MalformedPlain,
    /// A field of a PLAIN message that is not UTF-8 (RFC 4616 §2).
    NotUtf8,
    /// An empty user name or password.
    EmptyCredential,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::BadBase64 => "SASL response is not base64",
            Error::MalformedPlain => "PLAIN message is not three NUL-separated fields",
            Error::NotUtf8 => "PLAIN field is not UTF-8",
            Error::EmptyCredential => "empty user name or password",
        })
    }
}

impl std::error::Error for Error {}
