//! Sans-IO SMTP, server side, for Stoa (RFC 5321 and the extensions Stoa offers:
//! PIPELINING, SIZE, 8BITMIME, ENHANCEDSTATUSCODES, STARTTLS, AUTH PLAIN/LOGIN), and
//! its local cousin LMTP (RFC 2033) as a [`Dialect`] of the same session.
//!
//! This crate turns the bytes a client sends into commands, message data and
//! decisions to take, and turns the answers into reply bytes. It never touches a
//! socket, a file or a clock: the server hands it its read buffer and gets back how
//! many bytes were used and what happened. Every rule is therefore testable with byte
//! strings, and the result does not depend on how the input was cut into reads.
//!
//! # Layout
//!
//! - [`session`]: [`Session`], the state machine of one conversation: command order,
//!   recipient and error limits, the SASL exchange, the DATA phase, unauthorised
//!   pipelining. It yields an [`Event`] per step; those that need the outside world
//!   (MAIL, RCPT, DATA, end of message, AUTH) wait for the server's [`Decision`].
//! - [`command`]: line framing ([`command::next_line`]: CRLF only, bounded) and the
//!   command parser ([`command::parse_command`] → [`Command`]).
//! - [`address`]: paths and mailboxes, normalised into [`Address`] `{ local, domain }`
//!   so the domain a relay decision is made on is never ambiguous; the policy on
//!   source routes, the percent hack, bang paths and quoted local parts is in the
//!   module docs.
//! - [`data`]: [`data::DataDecoder`], incremental dot-unstuffing that ends only at
//!   `CRLF.CRLF` and refuses the SMTP-smuggling endings.
//! - [`reply`]: [`Reply`] (codes, enhanced status codes, multiline), the EHLO
//!   capability list, and stock replies for the server's decisions; and the client
//!   side's [`parse_reply`], which reads another server's replies into a
//!   [`ParsedReply`] (multi-line, one code throughout, the enhanced status code,
//!   capped line length and line count) for the queue's SMTP and LMTP clients and the
//!   mail load generator.
//! - [`Error`]: everything a client can do wrong, and the one mapping to replies.
//!
//! # LMTP
//!
//! LMTP is SMTP with three differences, so it is a mode of [`Session`] rather than a
//! codec of its own ([`Config::dialect`] = [`Dialect::Lmtp`]): the greeting says
//! `LMTP`; LHLO takes the place of EHLO (HELO and EHLO get `500 5.5.1`, as RFC 2033
//! §4.1 recommends, and in SMTP LHLO stays an unknown command); and the end of a
//! message waits for one decision per accepted recipient, in RCPT order, so that the
//! server can answer each with its own delivery outcome (RFC 2033 §4.2). A refused
//! message is refused once per recipient. Everything else (framing, limits,
//! pipelining, DATA decoding) is shared, so LMTP gets SMTP's defences unchanged.
//!
//! # What it does not do
//!
//! No I/O, no timeouts (the server owns the clock and the deadlines of
//! docs/robustness.md §3.7), no TLS (the server upgrades the stream when told to), no
//! policy: which domains are local, who may relay and whose password is right are the
//! server's decisions. No BDAT/CHUNKING, DSN or SMTPUTF8, and of the client side only
//! the reply parser: the client's conversation is its caller's.
//!
//! # Why not the `smtp-proto` crate
//!
//! Stalwart's `smtp-proto` was evaluated as a base. Its parser skips CR bytes
//! anywhere and takes LF alone as a line end, returns addresses as one string, and
//! its DATA receiver passes bare LF through without reporting it. Those are exactly
//! the places where docs/robustness.md §4.2 asks for control (CRLF-only framing, `RSET\rQUIT`
//! as one bad command, typed addresses, smuggling detection), so the parser is ours;
//! it is small, and its only dependencies are `memchr` and `stoa-mail-proto` (line
//! framing and SASL decoding, shared with POP3).

pub mod address;
pub mod command;
pub mod data;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod reply;
pub mod session;

pub use address::{Address, Domain, ForwardPath, ReversePath};
pub use command::{Command, Mechanism};
pub use error::Error;
pub use reply::{EnhancedStatus, ParsedReply, Reply, ReplyError, ReplyLimits, parse_reply};
pub use session::{Action, Config, Decision, Dialect, Event, Session, Step};
