//! Sans-IO POP3, server side, for Stoa (RFC 1939 with RFC 2449 CAPA, RESP-CODES and
//! PIPELINING, RFC 3206 response codes, RFC 2595 STLS, RFC 5034 SASL PLAIN).
//!
//! This crate turns the bytes a client sends into commands and decisions to take,
//! keeps the session's state and its view of the mailbox, and turns answers and
//! messages into response bytes. It never touches a socket, a file or a clock: the
//! server hands it its read buffer and gets back how many bytes were used and what
//! happened. Every rule is therefore testable with byte strings, and the result does
//! not depend on how the input was cut into reads.
//!
//! # Layout
//!
//! - [`session`]: [`Session`], the state machine of one conversation
//!   (AUTHORIZATION → TRANSACTION → UPDATE): command order, the USER/PASS and SASL
//!   PLAIN logins, TLS-before-password, STLS injection, error and failed-login
//!   limits. It answers STAT, LIST, UIDL, DELE, RSET, NOOP and CAPA itself, and
//!   yields an [`Event`] for what needs the server: credentials ([`Event::Auth`] →
//!   [`Session::decide_login`] with a [`Listing`]), a message to send
//!   ([`Event::Retrieve`]), the deletions at QUIT ([`Event::Quit`] →
//!   [`Session::decide_update`]).
//! - [`command`]: line framing ([`command::next_line`]: CRLF only, bounded) and the
//!   parser ([`command::parse_command`] → [`Command`]).
//! - [`listing`]: [`Listing`], the mailbox snapshot taken at login (sizes and uids,
//!   checked), and the deletion marks on it; its docs say what a size counts.
//! - [`encode`]: [`MessageEncoder`], incremental byte-stuffing of RETR and TOP output
//!   over chunks of any size, and [`Retrieval`], what the server needs to send one.
//! - [`response`]: [`Response`] (`+OK`/`-ERR`, response codes, multi-line, SASL
//!   continuations) and the stock responses for the server's decisions.
//! - [`Error`]: everything a client can do wrong, and the one mapping to responses.
//!
//! # What it does not do
//!
//! No I/O and no clock: the autologout timer, the delay after a failed login and
//! per-address throttling belong to the server ([`Action::LoginFailed`] and
//! [`Session::phase`] tell it when they apply). No TLS (the server upgrades the
//! stream when told to), no password checking, no mailbox locking or deletion: those
//! are the server's, through the directory and the mail store. No APOP: it needs the
//! plaintext password on the server, and the directory keeps only argon2 hashes, so
//! it could never succeed and is not advertised (the greeting has no timestamp). No
//! EXPIRE capability (the server keeps mail until deleted), no UTF8 or LANG
//! (RFC 6856), no SASL mechanism but PLAIN, and no client side yet.

pub mod command;
pub mod encode;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod listing;
pub mod response;
pub mod session;

pub use command::{Command, Forwarded, Mechanism, Verb};
pub use encode::{MessageEncoder, Retrieval};
pub use error::Error;
pub use listing::{Entry, Listing, ListingError};
pub use response::{Response, ResponseCode, Status, parse_status_line};
pub use session::{
    Action, Config, Credentials, Event, Limits, LoginDecision, Phase, Session, Step, UpdateOutcome,
};
