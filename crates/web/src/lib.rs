//! Stoa's HTTP/1.0, HTTP/1.1 and HTTP/2 server.
//!
//! It serves static files, over HTTP and HTTPS (rustls), the way TUX and Zeus did: one event loop per core, each with
//! its own `SO_REUSEPORT` listener, no hand-off between threads, small files from
//! memory in one `writev`, large ones with `sendfile`, and a per-worker cache of open
//! files revalidated about once a second.
//!
//! # Layout
//!
//! From the top down; no module imports one above it
//! (`scripts/module-cycles.py crates/web/src --fail` keeps it so).
//!
//! - [`Server`] (`server.rs`): binds, starts the workers, hands each accepted
//!   connection to `conn/` (plain HTTP) or to `tls/`'s handshake and then `h2/`
//!   or `conn/` (HTTPS, by ALPN), drains on shutdown.
//! - `h2/`: HTTP/2 over TLS (ALPN `h2`, the h2 crate): each request translated
//!   into an HTTP/1.1 head for the same handlers, each answer back into HTTP/2,
//!   with the limits the protocol's known attacks need.
//! - `conn/`: the HTTP/1 connection loop: keep-alive, pipelining, timeouts,
//!   lingering close, parking. It owns the socket and its buffers. A plain-HTTP
//!   connection runs it without a task until a step must wait, then in a task
//!   from there. Split as hyper splits its own: `io.rs` (the socket, the
//!   buffers, reads and writes), `machine.rs` (the state machine), `park.rs`
//!   (serving without a task, parking, the worker's parking loop), `log.rs`
//!   (the access-log batching).
//! - `tls/`: HTTPS: `setup.rs` (ALPN, the sites' and listeners' configurations),
//!   `handshake.rs` (bounded per worker, inside the head deadline),
//!   `session.rs` (decryption into the read buffer, encryption of the write
//!   queue in batches; files read into a buffer: no `sendfile` over TLS),
//!   `io.rs` (the session as HTTP/2's byte stream).
//! - `dispatch/`: from a parsed head to a queued answer: routing (once per
//!   request), the keep-alive decision, gathering or skipping request bodies, and
//!   the calls into the handlers below.
//! - `local.rs`: the per-thread state (caches, pools, log buffers, the idle set).
//! - `idle.rs`: the idle set: a kept-alive connection with nothing to do (at
//!   once when served without a task, after 50 ms of silence in a task) waits in
//!   a slot of the worker's idle set, woken by its socket's readiness with no
//!   system call, so an idle keep-alive connection costs a few hundred bytes
//!   instead of a task's 1.3 KiB.
//! - `shared.rs`: the state every worker shares (configuration, sites, log
//!   writers, the shutdown flags), which the connection layers above read.
//! - `static_files/`: GET/HEAD of files, conditionals, ranges, directories,
//!   error pages, directory listings (`listing.rs`).
//! - `vhost.rs`: the sites (virtual hosts) and the host-name lookup that picks
//!   one per request (and per TLS handshake, by SNI).
//! - `web99/`: the SPECweb99 dynamic API (`--web99`): dynamic and custom-ad GETs,
//!   POSTs with a durable post.log, Reset and Fetch, behind one entry point.
//! - `cgi/`: CGI/1.1 scripts, one process per request, in their own process group,
//!   with a timeout and a cap on concurrent scripts.
//! - [`precompress`] (`precompress.rs`): writing the precompressed siblings that
//!   `static_files/` chooses (`stoa compress DIR`).
//! - `encoding.rs`: `Content-Encoding`: gzip and brotli on the fly with a
//!   per-worker cache of the results, and the lines of an encoded response.
//! - `cache/`: the per-worker open-file cache (`openat2(RESOLVE_BENEATH)`).
//! - `response.rs`: response heads and generated status pages.
//! - `output.rs`: the write queue that turns a batch of responses into few
//!   system calls.
//! - `access_log.rs`: Common/combined log lines, batched to one writer thread per
//!   log (the server's, a site's own).
//! - [`metrics`] (`metrics.rs`): this process's request, byte and CGI counters,
//!   sharded per thread.
//! - [`config`] (`config.rs`): the plain configuration structs.
//!
//! # What it does not do
//!
//! Parse configuration files (the `stoa` binary does), parse HTTP (the
//! `stoa-http-proto` crate does), or handle signals (the binary hands it a
//! [`stoa_netkit::shutdown::Shutdown`] and calls [`LogReopener::reopen`]).

mod access_log;
mod cache;
mod cgi;
pub mod config;
mod conn;
mod dispatch;
mod encoding;
mod h2;
mod idle;
mod local;
pub mod metrics;
mod output;
pub mod precompress;
mod response;
mod server;
mod shared;
mod static_files;
mod tls;
mod vhost;
mod web99;

pub use access_log::LogReopener;
pub use config::Config;
pub use server::{Error, Server};
