//! HTTPS: the TLS handshake of an accepted connection, and the TLS side of the
//! connection loop's reads and writes.
//!
//! rustls is driven sans-IO over the connection's own non-blocking socket, with the
//! readiness handling of the plain path (a direct system call first, tokio's
//! readiness after a `WouldBlock`), so `conn/` keeps one loop for both:
//!
//! - [`accept`] reads the ClientHello (rustls' `Acceptor`, at most 16 KiB), then
//!   takes one of the worker's handshake slots ([`Acceptor`]) to answer it, and
//!   runs the rest of the handshake; the server hands the connection with its
//!   [`Session`] to `conn::serve`, or to `h2::serve` through an [`Io`] when ALPN
//!   chose `h2`. The slot is held only from a complete ClientHello until the
//!   server's flight has been written: the key exchange and signature, the part
//!   that costs the server. A client that stalls before or after holds no slot,
//!   so it cannot make complete ClientHellos wait; it holds only its connection
//!   (within `max_connections`). Everything counts against the first request's head
//!   deadline, so a client that never finishes its handshake is closed like one
//!   that never finishes its request head.
//! - [`Session::read_into`] decrypts into the connection's read buffer.
//! - [`flush`] encrypts the write queue in batches of
//!   [`TLS_BATCH`](crate::local::TLS_BATCH) bytes: memory segments (heads,
//!   cached file bodies) are handed to rustls as they are, file ranges are read
//!   into the worker's scratch buffer (there is no `sendfile` without kernel
//!   TLS), rustls cuts 16 KiB records, and each batch leaves in one `sendmsg`.
//!
//! TLS connections never park when idle: parking hands a bare socket to the
//! worker's epoll set, and the TLS state would have to be kept beside it. An idle
//! HTTPS connection stays in its task until the keep-alive timeout.
//!
//! # Layout
//!
//! - `setup.rs`: the configurations, built once at bind: ALPN ([`alpn`]), each
//!   site's ([`site_configs`]), each listener's ([`Configs`]), and a worker's
//!   [`Acceptor`].
//! - `handshake.rs`: [`accept`]: the ClientHello, the handshake slot, the rest
//!   of the handshake.
//! - `session.rs`: an established connection's [`Session`] as HTTP/1 uses it
//!   (decrypting reads, [`flush`]), and the socket as rustls sees it.
//! - `io.rs`: the same session as HTTP/2's byte stream ([`Io`]), with the
//!   [`Cork`](io::Cork) that holds its flushes back.

mod handshake;
mod io;
mod session;
mod setup;

pub(crate) use handshake::accept;
pub(crate) use io::Io;
pub(crate) use session::{Session, flush};
pub(crate) use setup::{Acceptor, Configs, alpn, site_configs};
