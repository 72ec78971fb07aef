//! What Stoa's integration tests share, so each crate's `tests/common/mod.rs` keeps
//! only what is its own.
//!
//! **Owns** the protocol- and server-neutral parts of a test:
//! - [`wait`]: polling a condition against a deadline ([`wait_until`]) and the one
//!   sanctioned pause ([`pause`]) for pacing a client;
//! - [`process`]: starting a binary ([`Process`]), collecting its standard error
//!   line by line and waiting for a line, reading its `listening on SCHEME://ADDR`
//!   readiness lines ([`listening_on`]), running a command to completion with a
//!   deadline ([`run`]);
//! - [`tls`]: self-signed test certificates written as PEM files ([`TestCert`]) and
//!   a rustls client that trusts them ([`client_config`], [`handshake`]);
//! - [`net`]: a bounded connect, and telling timeouts and resets apart
//!   ([`net::is_timeout`], [`net::is_reset`]);
//! - [`mod@line`]: a CRLF line conversation over TCP, plain or TLS, upgraded in place
//!   for STARTTLS/STLS ([`LineConn`]);
//! - [`http`]: HTTP/1.x request bytes, a parsed response ([`http::Response`]) and
//!   a raw client connection, plain or TLS, buffered for pipelining, that watches
//!   how the server closes ([`http::Client`]);
//! - [`fs`]: temporary directories, fixture files, and a tmpfs for disk-full tests
//!   ([`Tmpfs`]);
//! - [`fuzz`]: replaying the committed fuzz corpus through a target
//!   ([`fuzz::replay`]);
//! - [`slapd`]: a real OpenLDAP server in a temporary directory on a free port,
//!   loaded with `slapadd`, stopped and restarted at will ([`Slapd`]);
//! - [`base64()`], for AUTH commands.
//!
//! **Does not** know any Stoa server: it depends on no Stoa crate, so that every
//! crate (protocol, server or binary) can take it as a `[dev-dependency]`. What a
//! crate's tests start (its server with its configuration), its fixtures (users,
//! document roots, messages) and its protocol's reply grammar over [`LineConn`]
//! (SMTP's multi-line replies, POP3's dot-terminated lists) stay in that crate's
//! `tests/common`, built on these pieces. Nothing but tests may use the kit: it is
//! only ever a `[dev-dependency]`.
//!
//! Everything here panics with a message that says what was expected instead of
//! returning errors: it runs only inside tests, where a panic is a failure report.
//! Every wait is bounded.

pub mod fs;
pub mod fuzz;
pub mod http;
pub mod line;
pub mod net;
pub mod process;
pub mod slapd;
pub mod tls;
pub mod wait;

pub use fs::{Tmpfs, temp_dir, write_file};
pub use line::LineConn;
pub use process::{Finished, Process, listening_on, run};
pub use slapd::Slapd;
pub use tls::{TestCert, client_config, handshake};
pub use wait::{pause, wait_until};

use base64::Engine as _;

/// Standard base64 with padding (RFC 4648 §4), as SMTP and POP3 AUTH expect.
pub fn base64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
