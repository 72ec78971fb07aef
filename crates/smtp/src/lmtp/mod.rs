//! LMTP (RFC 2033), the store host's door: an MTA hands it mail for local users,
//! and it answers each recipient with the outcome of that recipient's delivery.
//!
//! # What it does
//!
//! - [`Server`] (`server.rs`) binds the LMTP listeners on every worker and runs
//!   them on the crate's connection driver (`driver.rs`, the one the SMTP server
//!   runs on), which serves [`stoa_smtp_proto::Session`] in its
//!   [`Dialect::Lmtp`](stoa_smtp_proto::Dialect::Lmtp) mode: LHLO, PIPELINING,
//!   ENHANCEDSTATUSCODES, SIZE; no STARTTLS, no AUTH.
//! - `conn.rs` is LMTP's policy for that driver: the transaction (recipients, the
//!   message in memory) and the hooks it calls. The loop, the deadlines (`Limits`:
//!   command, DATA with a minimum rate, session, send), the error delay past the
//!   soft error limit and shutdown are the driver's, so they are SMTP's.
//! - `deliver.rs` answers the events: RCPT looks the recipient up in the
//!   directory; the end of the message stores one copy for every accepted
//!   recipient through [`crate::LocalDelivery`] (the same path the SMTP queue
//!   delivers through, which fsyncs before it returns) and only then sends the
//!   replies, one per accepted RCPT in RCPT order (RFC 2033 §4.2).
//!
//! # The rules it keeps
//!
//! - **No queue.** A `250` after the final dot means the message is on stable
//!   storage in that recipient's mailbox; a `4xx` means nothing was kept for that
//!   recipient and the client retries it.
//! - **No relaying.** Only the directory's local domains are served. A recipient
//!   in another domain or at an address literal, or with routing syntax (`%`,
//!   `!`), gets `550 5.1.2` at RCPT: the store host is simply not the destination
//!   system of that address (RFC 3463 X.1.2), and no credential could change that,
//!   which is why it is not Postfix's relay refusal `554 5.7.1` (RFC 5321 does not
//!   list 554 among RCPT's replies either). An alias that forwards outside the
//!   local domains is refused the same way: there is no queue to forward from.
//! - **Unknown users** get `550 5.1.1`; a user whose mailbox lives on another host
//!   (`mailHost`) gets `450 4.1.6`, temporary, because that happens while a user
//!   moves between stores and the MTA's routing will catch up; a directory that
//!   cannot answer gives `451 4.3.0`, as SMTP does.
//! - **Trusted network.** LMTP has no authentication: anyone who can connect can
//!   deliver to every local user. Listen on loopback or a private network only
//!   (the default configuration listens nowhere).
//!
//! # Why a module of this crate
//!
//! An LMTP server is the SMTP server without its queue: it needs the SMTP codec
//! (as a dialect), the connection driver and limits, the `Received:` field and the
//! local delivery path of this crate, and nothing of its own besides the
//! per-recipient end of message. A separate crate would have had to re-export or
//! copy those, so it lives here, beside the SMTP server, and shares its types.

mod conn;
mod deliver;
mod server;

use std::net::SocketAddr;
use std::time::Duration;

pub use server::Server;

use crate::config::{DEFAULT_SHUTDOWN_GRACE, Limits, default_hostname};

/// Connections per worker by default. Each holds up to one message in memory
/// (`max_message_size`, 10 MB by default) while it delivers, and LMTP's clients are
/// a few MTAs with pools of connections (Postfix's default is 20 per destination),
/// so the SMTP server's 4096 would only allow 40 GB of buffers.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Everything [`Server`] needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server's name in the greeting, the LHLO reply and `Received:` fields.
    pub hostname: String,
    /// Where to listen: loopback or a private network (see the module docs).
    pub listen: Vec<SocketAddr>,
    /// Worker threads, each with its own event loop and listeners.
    pub workers: usize,
    /// Where listening sockets come from: fresh binds by default; the binary's
    /// shared [`stoa_netkit::listener::Pool`], so that a reload's server takes
    /// over the sockets of the one it replaces.
    pub sockets: stoa_netkit::listener::Pool,
    /// Per-connection limits and timeouts, SMTP's (with
    /// [`DEFAULT_MAX_CONNECTIONS`] and no per-client limit by default: every client
    /// is an MTA).
    pub limits: Limits,
    /// How long SIGTERM waits for messages being received.
    pub shutdown_grace: Duration,
    /// Deliveries write `Delivered-To:` with each recipient's address; a
    /// message for several users is then stored once per user.
    pub delivered_to: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hostname: default_hostname(),
            listen: Vec::new(),
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            sockets: stoa_netkit::listener::Pool::default(),
            limits: Limits {
                max_connections: DEFAULT_MAX_CONNECTIONS,
                max_connections_per_client: 0,
                ..Limits::default()
            },
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            delivered_to: false,
        }
    }
}
