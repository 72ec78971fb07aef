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

pub mod section;
pub mod string;

pub use section::{Section, SectionText};
