//! Sans-IO IMAP, server side, for Stoa (IMAP4rev2, RFC 9051, serving IMAP4rev1
//! clients, RFC 3501, and the extensions Stoa advertises).
//!
//! This crate turns the bytes a client sends into commands, and the server's answers
//! into response bytes. It never touches a socket, a file or a clock.
//!
//! # Layout
//!
//! - [`section`]: [`Section`], the part of a message a `BODY[...]` fetch names.
//! - [`string`]: how IMAP strings go on the wire (atom, quoted or literal), shared by
//!   every response encoder, the message structure's included.

pub mod command;
pub mod date;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod mailbox;
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
