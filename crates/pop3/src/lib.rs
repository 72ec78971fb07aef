//! Stoa's POP3 server (RFC 1939 with RFC 2449 CAPA, RFC 2595 STLS and POP3S, SASL
//! PLAIN): users log in with their directory password, read the mail the SMTP
//! server delivered into the mail store, and delete it at QUIT.
//!
//! # Layout
//!
//! - [`Server`] (`server.rs`): binds the POP3 and POP3S listeners on every worker
//!   (one event loop per core, `SO_REUSEPORT`, as the web and SMTP servers), counts
//!   connections per worker and per client address, drains on shutdown.
//! - `conn.rs`: one connection: it owns the socket (plain, or TLS after STLS or from
//!   the start; `stoa_netkit::tls::Stream`), the read and response buffers and, once logged in, the
//!   locked mailbox, and drives [`stoa_pop3_proto::Session`] with deadlines (login,
//!   autologout, session cap, send).
//! - `login.rs`: the answer to credentials: the per-address throttle
//!   (`stoa_netkit::throttle`, shared with SMTP AUTH when `stoa serve` runs both), the password check and the mailbox lock on a blocking thread,
//!   the listing from the store's snapshot.
//! - `retrieve.rs`: RETR and TOP, the stored file streamed through the codec's
//!   byte-stuffing encoder in 64 KiB chunks.
//! - `update.rs`: QUIT, the store's commit of the marked messages.
//! - [`proxy`]: the POP3 proxy role ([`Server::bind_proxy`]): the same
//!   connection loop up to the login, then the user's store host (`mailHost`)
//!   logged in for the user and the bytes relayed both ways.
//! - [`metrics`]: this process's login and retrieval counters.
//! - [`config`]: the plain configuration structs.
//!
//! # The rules it keeps
//!
//! - **One session per mailbox.** The store's lock is taken at login; a second
//!   login gets `-ERR [IN-USE]` (RFC 1939's exclusive model, docs/robustness.md §4.3).
//! - **Snapshot numbering.** A session numbers the messages listed at login; mail
//!   delivered during it is not numbered and not deleted by its QUIT.
//! - **Deletions only at QUIT.** DELE marks, RSET unmarks, and only QUIT in the
//!   TRANSACTION state removes anything (each message one `unlink`, the directory
//!   fsynced once). A dropped connection, an autologout, a shutdown or a crash
//!   deletes nothing.
//! - **Sizes are what RETR sends.** LIST and STAT give the stored size, which is the
//!   message RETR streams before byte-stuffing (the store checks it at open, the
//!   server at every read).
//! - **Passwords only over TLS** unless [`Config::allow_plaintext_auth`] says
//!   otherwise, or the client is on a [`Config::secure_networks`] network
//!   (loopback by default) or a trusted proxy: before STLS, USER, PASS and AUTH
//!   are refused with `-ERR [SYS/PERM]`. Plain text that followed STLS in the
//!   same read is dropped unread.
//! - **The client's address, even behind a proxy.** A peer in
//!   [`Config::trusted_proxies`] may name its client (`XCLIENT ADDR=… PORT=…`,
//!   once, before the login); the per-address count, the throttle and the log
//!   then use that address. From anyone else XCLIENT is refused.
//! - **Failed logins cost time.** Each `-ERR [AUTH]` waits 2 s, doubled per recent
//!   failure of the client address up to 15 s; after 10 failures the address is
//!   refused outright (the same `-ERR [AUTH]`, the password unchecked) until it
//!   stays quiet for 10 minutes ([`config::AuthThrottle`]). The answer never says
//!   whether the user or the password was wrong. The count is per address, not per
//!   service: [`Server::bind_with_throttle`] shares it with the SMTP server's AUTH.
//!
//! # What it does not do
//!
//! Parse POP3 (the sans-IO `stoa-pop3-proto` crate does), parse configuration files
//! or handle signals (the `stoa` binary does), lay out mailboxes (the
//! `stoa-mailstore` crate does), APOP (the directory keeps no plaintext passwords),
//! or IMAP. A store host refuses a user whose `mailHost` is another host
//! (`-ERR [SYS/PERM]`): the proxy role is what sends users to their host.

pub mod config;
mod conn;
mod login;
pub mod metrics;
pub mod proxy;
mod retrieve;
mod server;
mod shared;
mod update;

pub use config::Config;
pub use proxy::{BackendTls, ProxyConfig, StoreHost};
pub use server::{Error, Server};
