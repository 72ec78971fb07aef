//! The POP3 proxy (the role of Sun's Messaging Multiplexor in the SPECmail2001
//! topology): it speaks POP3 to the client up to the login, checks the password in
//! the directory, finds the user's store host from `mailHost`, logs in there for
//! the user and then relays bytes both ways until either side closes.
//!
//! # The login's path
//!
//! 1. The client's session runs in the same `conn.rs` loop as a store host's
//!    (greeting, CAPA, STLS, USER/PASS, AUTH PLAIN, the per-address throttle and
//!    the failed-login delays, the timeouts), so it follows the POP3 server's rules
//!    to the letter.
//! 2. The credentials are checked here, in the directory: a wrong password or an
//!    unknown user is refused by the proxy (after its delay), and no store host
//!    ever sees the attempt.
//! 3. The user's `mailHost` names the store host; its POP3 address is its
//!    [`StoreHost`] entry (`[[mail_host]] pop3`), or the name itself on port 110
//!    (995 with [`BackendTls::Tls`]), resolved at every connection
//!    ([`stoa_directory::store_hosts`], shared with the IMAP proxy).
//! 4. `backend.rs` connects (plain, STLS or TLS from the first byte, through
//!    [`stoa_netkit::upstream`]), forwards the
//!    client's address with `XCLIENT ADDR=… PORT=…` (the store host accepts it only
//!    from its `trusted_proxies`), and logs in with AUTH PLAIN as the user the
//!    directory returned, with the client's password: the store host checks it
//!    again, so a proxy cannot open a mailbox without its password.
//! 5. The store host's `+OK` goes to the client and [`stoa_netkit::relay`] copies
//!    bytes both ways (commands the client pipelined behind its PASS first).
//!
//! A store host that cannot be reached, refuses the login or answers out of turn
//! gives the client `-ERR [SYS/TEMP]` (`[IN-USE]` and `[LOGIN-DELAY]` are passed
//! on), and the connection to it is closed: a session is relayed only after the
//! store host accepted exactly the user the directory named.

mod backend;

pub use stoa_directory::store_hosts::{BackendTls, ProxyConfig, StoreHost};
/// Why the proxy cannot start: its TLS client for the store hosts.
pub use stoa_netkit::tls::ClientError as SetupError;

pub(crate) use backend::{LoggedIn, Refusal, login};

/// The POP3 port of a store host without an entry (RFC 1939).
pub const DEFAULT_POP3_PORT: u16 = 110;
/// The POP3S port of a store host without an entry, with [`BackendTls::Tls`]
/// (RFC 8314).
pub const DEFAULT_POP3S_PORT: u16 = 995;

/// The proxy at run time: the routes to the store hosts' POP3 servers and the
/// TLS client.
pub(crate) type Proxy = stoa_directory::store_hosts::Backends;
