//! Sans-IO IMAP for Stoa, the server's side and a client's reading of replies, (IMAP4rev2, RFC 9051, serving IMAP4rev1
//! clients, RFC 3501, and the extensions Stoa advertises: LITERAL+/LITERAL-,
//! SASL-IR, ENABLE, ID, NAMESPACE, IDLE, UNSELECT, UIDPLUS, MOVE, CONDSTORE/QRESYNC,
//! LIST-EXTENDED, LIST-STATUS, SPECIAL-USE, ESEARCH, SEARCHRES, COMPRESS, STARTTLS,
//! BINARY fetches and UTF8=ACCEPT names).
//!
//! This crate turns the bytes a client sends into commands, and the server's answers
//! into response bytes. It never touches a socket, a file or a clock: the server
//! hands [`CommandReader::next`] its whole read buffer and gets back how many bytes
//! were used and what happened (a [`Command`], "read more", "send a continuation
//! request", or a [`Rejection`] that says what to answer and whether to close). The
//! result does not depend on how the input was cut into reads, and every byte is
//! treated as hostile: lines, literals, commands and nesting are bounded, and a
//! literal's data is skipped by its length, never rescanned.
//!
//! # Layout
//!
//! - [`command`]: the [`Command`] types ([`CommandKind`], [`command::SearchKey`],
//!   [`command::FetchAttribute`], [`command::Flag`], [`command::StatusItem`],
//!   [`command::List`]...), the parser of one complete command
//!   ([`command::parse_command`]), the framing with literals ([`CommandReader`],
//!   [`Limits`], [`Step`], [`Event`]), and the lines that are not commands
//!   ([`command::auth_response`], [`command::idle_done`], with
//!   [`command::sasl_plain`] for PLAIN messages).
//! - [`state`]: [`State`] and [`state::check`], which commands each state allows.
//! - [`response`]: tagged, untagged and continuation responses, the response
//!   [`response::Code`]s, untagged data (CAPABILITY, ENABLED, ID, NAMESPACE, LIST,
//!   LSUB, STATUS, FLAGS, EXISTS, EXPUNGE, VANISHED, SEARCH, ESEARCH) and
//!   [`response::FetchWriter`] for FETCH responses.
//! - [`sequence`]: [`SequenceSet`] (ranges, `*`, `$`) resolved against the mailbox,
//!   and the compact form of a list of numbers ([`sequence::write_sequence`]).
//! - [`mailbox`]: mailbox names, modified UTF-7 or UTF-8, and `INBOX`.
//! - [`date`]: `date` and `date-time`, to and from unix seconds.
//! - [`section`]: [`Section`], the part of a message a `BODY[...]` fetch names.
//! - [`string`]: how IMAP strings go on the wire (atom, quoted or literal), shared by
//!   every response encoder, the message structure's included.
//! - [`reply`]: the client side, one line of a server's response at a time
//!   (status responses and their codes, the CAPABILITY list, continuations,
//!   untagged data, a literal at the line's end), for the IMAP proxy and the load
//!   generator.
//! - [`Error`] and [`Rejection`]: why a command was refused, and the one mapping to
//!   the answer (`tag BAD`, `tag NO [TOOBIG]`, `* BAD`, or `* BYE` then close).
//!
//! # What it does not do
//!
//! No I/O and no clock: timeouts, TLS, COMPRESS's deflate stream and the order of a
//! conversation (which response follows which command, when the state changes) are
//! the server's; [`state::check`] only says what a state allows. No mailbox access:
//! searching, fetching and flag changes are the mail store's, and ENVELOPE and
//! BODYSTRUCTURE are rendered by the message structure and written here as
//! pre-rendered items. Charsets other than US-ASCII and UTF-8 in SEARCH are the
//! server's to refuse (`[BADCHARSET]`); MULTIAPPEND, CATENATE, the APPEND `UTF8`
//! data item, NOTIFY, METADATA, QUOTA, ACL, SORT and THREAD are not parsed; the
//! `MODSEQ` search key's entry name is kept but not interpreted. SASL mechanisms
//! other than PLAIN are the server's. The client side reads lines, not whole
//! responses: literals and the structure of untagged data are the caller's.

pub mod command;
pub mod date;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod mailbox;
pub mod reply;
pub mod response;
pub mod section;
pub mod sequence;
pub mod state;
pub mod string;

pub use command::{Command, CommandKind, CommandReader, Event, Limits, Step};
pub use error::{Error, Rejection};
pub use section::{Section, SectionText};
pub use sequence::SequenceSet;
pub use state::State;
