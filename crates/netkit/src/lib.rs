//! Runtime plumbing shared by Stoa's servers. It knows sockets, threads, signals,
//! time and TLS configuration, and nothing about any application protocol.
//!
//! # Layout
//!
//! - [`listener`]: TCP listeners with `SO_REUSEPORT`, one per worker on one port
//!   ([`listener::bind_group`]), so the kernel spreads connections across workers and
//!   no connection is ever handed from one thread to another.
//! - [`worker`]: the thread-per-core model: N threads, each running its own
//!   single-threaded tokio runtime ([`worker::spawn`]).
//! - [`accept`]: accept with backoff, so a full file table slows the accept loop
//!   down instead of spinning it.
//! - [`shutdown`]: a cloneable shutdown signal ([`shutdown::channel`]).
//! - [`signals`]: SIGTERM, SIGINT and SIGHUP as a stream of [`signals::Signal`]s.
//! - [`limits`]: process limits (`RLIMIT_NOFILE`).
//! - [`server`]: the server skeleton every protocol server runs on: listeners bound
//!   per worker, accept loops behind a connection semaphore, drain on shutdown; a
//!   protocol is a [`server::Handler`], and a bound server a [`server::Service`].
//! - [`line`](mod@line): the buffered I/O of a line-protocol connection ([`line::LineIo`]):
//!   the stream, a bounded read buffer, the output queue, reads against a deadline
//!   and the shutdown signal, sends within a timeout, and the TLS upgrade.
//! - [`tls`]: rustls server configurations from PEM files: TLS 1.3/1.2, SNI among
//!   several certificates, ALPN, session cache and rotating ticket keys.
//! - [`upstream`]: a proxy's leg to its upstream server before the relay: connect
//!   (plain or TLS), reply lines bounded in length and time, the TLS upgrade.
//! - [`relay`]: a proxied session's bytes copied both ways until either side
//!   closes or goes quiet (the POP3 and IMAP proxies').
//! - [`throttle`]: failed logins per client address ([`throttle::Throttle`]), one
//!   table the password-checking servers of a process share: the delay before each
//!   refusal, and the refusal of an address that keeps failing.
//! - [`metrics`]: this process's connections open per server and TLS handshakes by
//!   outcome, for the binary's `/metrics`.

pub mod accept;
pub mod limits;
pub mod line;
pub mod listener;
pub mod metrics;
pub mod relay;
pub mod server;
pub mod shutdown;
pub mod signals;
pub mod throttle;
pub mod tls;
pub mod upstream;
pub mod worker;
