//! Stoa's IMAP server (IMAP4rev2, RFC 9051, serving IMAP4rev1 clients too): users
//! log in with their directory password and read, file and flag the mail the SMTP
//! server delivered, in folders kept by the mail store. POP3 reads the same INBOX.
//!
//! # Layout
//!
//! - [`Server`] (`server.rs`): binds the IMAP and IMAPS listeners on every worker
//!   (one event loop per core, as the other servers), registers the store's
//!   observer, drains on shutdown.
//! - `conn.rs`: one connection: the socket and its buffers (`LineIo`), the command
//!   framing (`stoa_imap_proto::CommandReader`), the state, the selected folder, the
//!   untagged updates owed after each command, deadlines, STARTTLS.
//! - `auth.rs`: LOGIN and AUTHENTICATE PLAIN (SASL-IR), the TLS rule, the shared
//!   failed-login throttle, the per-user session limit.
//! - `mailboxes.rs`: SELECT/EXAMINE (CONDSTORE, QRESYNC), CREATE, DELETE, RENAME,
//!   (UN)SUBSCRIBE, LIST (LIST-EXTENDED, LIST-STATUS, SPECIAL-USE), LSUB, STATUS,
//!   APPEND; `pattern.rs`: LIST's wildcards.
//! - `messages.rs`: FETCH (batched), STORE (UNCHANGEDSINCE), SEARCH (ESEARCH,
//!   SEARCHRES), COPY, MOVE, EXPUNGE, UID EXPUNGE, CLOSE, UNSELECT; `search.rs`:
//!   the criteria.
//! - `idle.rs`: IDLE, woken by the store's observer.
//! - `view.rs`: a session's numbering of its selected folder and the untagged
//!   updates (EXPUNGE or VANISHED, EXISTS, FETCH FLAGS) that bring the client up to
//!   date with the store.
//! - [`Sessions`] (`watch.rs`): the logged-in sessions per mailbox: the per-user
//!   limit, and the wake-up the store's observer sends them; one per store, which
//!   the binary keeps across reloads.
//! - [`proxy`]: the IMAP proxy role ([`Server::bind_proxy`]): the same
//!   connection loop up to the login, then the user's store host (`mailHost`)
//!   logged in for the user and the bytes relayed both ways.
//! - [`config`]: the plain configuration structs.
//!
//! # The client's address, even behind a proxy
//!
//! A peer in [`Config::trusted_proxies`] may name its client before the login
//! with Dovecot's `ID ("x-originating-ip" … "x-originating-port" …)`, once; the
//! per-address count, the throttle and the log then use that address, and the
//! connection counts as secure for the password rule. From anyone else those
//! fields are ignored.
//!
//! # What it does not do (yet)
//!
//! No COMPRESS=DEFLATE, no BINARY, no \Recent (no message is ever recent), no
//! cached message structure (ENVELOPE, BODYSTRUCTURE and header searches parse the
//! message each time), no shared or public namespaces, no ACLs or
//! quotas.

mod auth;
pub mod config;
mod conn;
mod idle;
mod mailboxes;
mod messages;
mod pattern;
pub mod proxy;
mod search;
mod server;
mod shared;
mod view;
mod watch;

pub use config::Config;
pub use proxy::{BackendTls, ProxyConfig, StoreHost};
pub use server::{Error, Server};
pub use watch::Sessions;
