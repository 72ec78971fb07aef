//! The directory's error type.

use std::io;
use std::path::PathBuf;

/// Why a directory operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The system error.
        #[source]
        source: io::Error,
    },
    /// The directory file is not in the expected format (hand-edited, truncated,
    /// written by a newer version).
    #[error("{path}:{line}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// Not an address the directory can hold (`local@domain`, ASCII dot-atom local
    /// part).
    #[error("invalid address {0:?}")]
    InvalidAddress(String),
    /// Not a valid domain or host name.
    #[error("invalid domain or host name {0:?}")]
    InvalidDomain(String),
    /// The address's domain is not one of the local domains.
    #[error("{0} is not a local domain")]
    NotLocalDomain(String),
    /// A user, alias or domain of that name already exists.
    #[error("{0} already exists")]
    Exists(String),
    /// No user, alias or domain of that name.
    #[error("no such entry: {0}")]
    NotFound(String),
    /// A domain that still has users or aliases cannot be removed.
    #[error("domain {0} still has users or aliases")]
    DomainInUse(String),
    /// An alias without targets, or with an invalid one.
    #[error("invalid alias targets for {0}")]
    InvalidAlias(String),
    /// A stored password value no scheme of [`crate::scheme`] checks, or a
    /// malformed one.
    #[error("invalid password hash for {0}")]
    InvalidHash(String),
    /// Not the name of a password scheme [`crate::scheme::Scheme`] makes.
    #[error(
        "unknown password scheme {0:?} (supported: argon2id, sha512-crypt, blf-crypt, ssha, plain)"
    )]
    UnknownScheme(String),
    /// A plain-text password where plain text is not allowed
    /// ([`crate::Options::allow_plain`]).
    #[error(
        "plain-text passwords are refused unless allowed (allow_plain_passwords, for benchmarks only)"
    )]
    PlainNotAllowed,
    /// A user whose password has no LDAP form (plain text), met while writing LDIF.
    #[error("{0} has a plain-text password, which has no LDAP form: give it a hashed one first")]
    NoLdapForm(String),
    /// Writing an export failed.
    #[error("cannot write the output: {0}")]
    Output(#[source] io::Error),
    /// The password could not be hashed (bad cost parameters, no randomness).
    #[error("password hashing failed: {0}")]
    Hashing(String),
    /// No directory server answered (refused, timed out, every connection busy):
    /// a temporary failure, never an unknown user. See [`Error::is_temporary`].
    #[error("directory server unavailable: {0}")]
    Unavailable(String),
    /// A check on a blocking thread did not finish (it panicked, or the runtime
    /// is shutting down).
    #[error("the password check did not finish: {0}")]
    Interrupted(String),
    /// The directory's settings are unusable (every problem, joined).
    #[error("invalid directory configuration: {0}")]
    InvalidConfig(String),
}

impl Error {
    /// Whether the same call may well succeed later: the servers answer it with a
    /// temporary failure (SMTP `451 4.4.3`, POP3 `-ERR [SYS/TEMP]`).
    pub fn is_temporary(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Error {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
