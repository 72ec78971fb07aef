//! Stoa's SMTP server (RFC 5321): it accepts mail for local users and, from
//! trusted or authenticated clients, mail to other domains; queues every message
//! durably before saying `250`; and delivers it into local mailboxes, over LMTP to
//! the store host a user's `mailHost` names, or through a smart host, retrying on Postfix's schedule and bouncing what cannot be delivered.
//!
//! # Layout
//!
//! - [`Server`] (`server.rs`): binds the MX and submission listeners on every
//!   worker (one event loop per core, `SO_REUSEPORT`, as the web server), starts
//!   the queue thread, drains on shutdown.
//! - [`QueueRunner`] (`runner.rs`): the queue directory, recovered, and its
//!   delivery thread: a server's own, or one that outlives servers, so a reload's
//!   new server and the one it replaces feed one scheduler.
//! - `driver.rs`: the connection driver of both dialects, SMTP and LMTP: one
//!   connection owns the socket (plain, or TLS after STARTTLS), the read and reply
//!   buffers and the transaction, and drives [`stoa_smtp_proto::Session`] with
//!   deadlines (command, DATA with a minimum rate, session cap, send) and shutdown;
//!   netkit's `Handler` spawns it. What a dialect adds is a `Policy` (generic, so
//!   no dynamic dispatch per command): its transaction and its answers, at the end
//!   of a message one (SMTP) or one per recipient (LMTP).
//! - `conn.rs`: SMTP's policy: the MX and submission kinds, the transaction
//!   (sender, recipients, the queue spool).
//! - `policy.rs`: the answers to the session's events: free space at MAIL
//!   (`452 4.3.1`), the relay rules and directory lookups at RCPT, the spool and the
//!   `Received:` field at DATA, the durable commit at the end of the message
//!   (`250` or `451 4.3.0`), password checks at AUTH (on blocking threads).
//! - [`queue`]: the queue directory: message and envelope files, the order of
//!   writes and fsyncs, crash recovery; the per-message lock, and what the
//!   operator's `stoa queue` commands do (`queue::admin`, `queue::control`).
//! - [`delivery`]: the scheduler, the routing of each user by its `mailHost`,
//!   [`LocalDelivery`] with [`StoreDelivery`] (the `stoa-mailstore` store), the
//!   LMTP client to other store hosts (a small per-host connection pool), the
//!   smart-host client (both over one SMTP client core), DSN bounces.
//! - [`lmtp`]: the LMTP server (RFC 2033) of a store host: the same codec in its
//!   LMTP dialect, the same driver, limits and local delivery, no queue (each recipient's
//!   reply after the final dot says whether its copy is on disk) and no relaying.
//!   Why it is a module here and not a crate of its own is in its docs.
//! - `headers.rs`: `Received:` and dates.
//! - [`metrics`]: this process's session, message, queue and delivery counters.
//! - [`config`]: the plain configuration structs.
//!
//! # What it does not do
//!
//! Parse SMTP (the sans-IO `stoa-smtp-proto` crate does), parse configuration
//! files or handle signals (the `stoa` binary does), lay out mailboxes (the
//! `stoa-mailstore` crate does, behind [`StoreDelivery`]), look
//! up MX records (non-local mail goes to one smart host; store hosts without a
//! `[[mail_host]]` entry are found by the system resolver), speak TLS to the smart
//! host or the store hosts, or offer DSN/SMTPUTF8/CHUNKING.
//!
//! # Crash points
//!
//! With the `failpoints` feature, the `fail` crate's points
//! `queue::after_write_before_fsync`, `queue::after_fsync_before_rename`,
//! `queue::after_rename_before_dir_fsync`, `smtp::before_250`,
//! `deliver::before_queue_remove` and `lmtp::before_reply` can be set
//! (`FAILPOINTS=name=pause` for a `kill -9` test, `name=return` for an I/O error).
//! Without the feature they compile to nothing.

pub mod config;
mod conn;
pub mod delivery;
mod driver;
mod headers;
pub mod lmtp;
pub mod metrics;
mod policy;
pub mod queue;
mod runner;
mod server;
mod shared;

pub use config::Config;
pub use delivery::{DeliveryError, LocalDelivery, StoreDelivery};
pub use runner::QueueRunner;
pub use server::{Error, Server};
