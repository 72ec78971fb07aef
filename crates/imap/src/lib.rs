//! Stoa's IMAP server (IMAP4rev2, RFC 9051, serving IMAP4rev1 clients too): users
//! log in with their directory password and read, file and flag the mail the SMTP
//! server delivered, in folders kept by the mail store.
//!
//! # Layout
//!
//! - `view.rs`: a session's numbering of its selected folder and the untagged
//!   updates (EXPUNGE, EXISTS, FETCH FLAGS) that bring the client up to date with
//!   the store.
//! - `watch.rs`: the logged-in sessions per mailbox: the per-user limit, and the
//!   wake-up the store's observer sends them (IDLE).
//!
//! # What it does not do (yet)
//!
//! This crate is being built (issue 52): the connection loop, the commands and the
//! listener come next; until then the `stoa` binary does not start it.

// Used by the connection loop, which lands next (issue 52).
#[cfg_attr(not(test), allow(dead_code))]
mod view;
#[cfg_attr(not(test), allow(dead_code))]
mod watch;
