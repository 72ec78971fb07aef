//! Sans-IO pieces that SMTP, LMTP, POP3 and (soon) IMAP share, for Stoa.
//!
//! The mail protocols are line-based and authenticate with SASL; each codec
//! (`stoa-smtp-proto`, `stoa-pop3-proto`) builds its own commands, replies and
//! session on the pieces here, so that the framing and the credential rules are
//! written, tested and fuzzed once.
//!
//! # Layout
//!
//! - [`line`](mod@line): [`next_line`], one CRLF-terminated line out of a byte buffer, within a
//!   length limit, with a bare LF and an overlong line reported as such ([`Line`]).
//! - [`sasl`]: base64 SASL responses ([`sasl::decode`], with RFC 4954's and RFC 5034's
//!   `=` for an empty initial response) and PLAIN messages ([`sasl::plain`], RFC 4616)
//!   into [`Credentials`].
//! - [`mutf7`]: modified UTF-7, the spelling of mailbox names in IMAP4rev1 and on
//!   disk in Maildir++ (the IMAP codec and the mail store's export use it).
//! - [`Status`]: "parsed" or "need more bytes", for the parsers built on these
//!   pieces (the SMTP client's reply parser among them).
//! - [`Error`]: why a SASL response was refused.
//!
//! # What it does not do
//!
//! No I/O, no clock, no protocol: commands, replies and the order of a conversation
//! belong to each protocol's codec, and whether credentials are right to the server.

mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod line;
pub mod mutf7;
pub mod sasl;

pub use error::Error;
pub use line::{Line, next_line};
pub use sasl::Credentials;

/// The outcome of a parser on input that is not (yet) malformed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status<T> {
    /// A whole item was parsed.
    Complete(T),
    /// The item is not complete: read more bytes and call again with all of them.
    Partial,
}
