//! HTTP/2 over TLS (ALPN `h2`), on the h2 crate, in front of the HTTP/1 handlers.
//!
//! Each HTTP/2 request is translated into an HTTP/1.1 request ([`request`]):
//! `:method` and `:path` make the request line, `:authority` the `Host`, the
//! fields follow as they came (cookies joined into one line), and the body,
//! gathered whole, gets its `Content-Length`. That request goes through the same
//! parser, limits and [`crate::dispatch::answer`] as one read from an HTTP/1.1
//! connection, and the answer queued on an [`crate::output::Output`] is
//! translated back ([`response`]): the status and fields of its head, minus the
//! connection-specific ones, then its body as DATA frames under the client's flow
//! control. So every handler (static files with conditionals, ranges and
//! compression, the SPECweb99 API, CGI, error pages, listings) and every check on
//! a request works the same on both protocols, as Apache's mod_http2 does it; the
//! price is one parse of a head we wrote ourselves. The access log names the
//! protocol the client spoke (`HTTP/2.0`).
//!
//! One task per connection ([`serve`]) drives the h2 connection: reading,
//! writing, accepting streams, and the timeouts. A request without a body whose
//! answer is ready at once and at most [`SEND_BUFFER`] long (a file, a cached
//! page, an error) is answered on that task ([`stream::start`]): its frames join
//! h2's queue and leave with those of the other streams read in the same batch,
//! in one flush; only as much of its body as the client's window takes at once
//! is read and queued, never more. Any other stream (a request body to gather, a
//! CGI script or a dynamic answer to wait for, a large file, the rest of an
//! answer the window did not take) becomes a task of its own on the same worker
//! ([`stream::serve`]), so a script or a client slow to read holds only its
//! stream, and a file not yet sent stays an open descriptor.
//!
//! # Limits
//!
//! Besides those of HTTP/1 (robustness.md §3.7), which every translated request
//! meets again:
//!
//! - streams open at once: `limits.h2_max_streams`
//!   (`SETTINGS_MAX_CONCURRENT_STREAMS`);
//! - the header list: `limits.head.max_head` (`SETTINGS_MAX_HEADER_LIST_SIZE`).
//!   h2 counts decoded bytes, so an HPACK bomb (one large field in the dynamic
//!   table, referred to over and over) is refused as soon as it decodes past the
//!   limit, and so is a HEADERS frame followed by endless CONTINUATION frames
//!   (CVE-2024-27316 and its kin); the decoder's table stays at 4 KiB;
//! - rapid reset (CVE-2023-44487): a stream the client resets stops its work
//!   at once (its task is dropped, a CGI script with it), and a connection
//!   never runs more stream tasks than `limits.h2_max_streams`, reset or not:
//!   at the limit it accepts no stream until one ends, so the client's new
//!   streams wait in h2's queue, where those it resets count towards
//!   [`PENDING_ACCEPT_RESETS`], then GOAWAY `ENHANCE_YOUR_CALM`. A client
//!   that resets more than [`RESET_LIMIT`] running streams, and more than half
//!   of those it opened, gets the same GOAWAY;
//! - resets the server has to send for the client's protocol errors:
//!   [`LOCAL_ERROR_RESETS`] per connection, then GOAWAY `ENHANCE_YOUR_CALM` (h2);
//! - SETTINGS and PING floods: h2 owes one answer at a time and reads no further
//!   frames while it cannot send it, so a client that floods without reading
//!   stalls only its own connection;
//! - request bodies: the largest any handler takes, gathered within
//!   `limits.body_timeout`;
//! - a connection with no stream open for `limits.keepalive_timeout` (the first
//!   stream: within `limits.head_timeout` of the accept) gets GOAWAY and is
//!   closed; a stream task whose client stops reading is reset after
//!   `limits.send_timeout` without a window update. Answers queued on the
//!   connection's task keep it open while the socket keeps taking bytes; once
//!   it has taken none for `limits.send_timeout`, the keep-alive timeout runs.

mod request;
mod response;
mod stream;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use std::future::poll_fn;
use std::task::{Context, Poll};

use h2::Reason;
use tokio::sync::{Notify, OwnedSemaphorePermit};

use crate::conn::Origin;
use crate::dispatch::Client;
use crate::shared::Shared;
use crate::tls;

/// Each stream's receive window: what a client may send of a request body before
/// the server reads it (h2's default, the protocol's initial value).
const STREAM_WINDOW: u32 = 65_535;

/// The connection's receive window: a few bodies' worth, so one slow body does
/// not stall the others.
const CONNECTION_WINDOW: u32 = 1024 * 1024;

/// Bytes of a response buffered per stream ahead of the socket; the rest waits
/// for the client's window and the socket.
const SEND_BUFFER: usize = 64 * 1024;

/// Streams reset by the client before the server accepted them, waiting in
/// h2's queue, before the connection is closed with `ENHANCE_YOUR_CALM`.
const PENDING_ACCEPT_RESETS: usize = 20;

/// Streams the server may reset for the client's protocol errors before the
/// connection is closed with `ENHANCE_YOUR_CALM` (h2's default).
const LOCAL_ERROR_RESETS: usize = 1024;

/// Streams the client may reset while they run (see "Limits"): browsers cancel
/// some (a page left before its images came), an attack cancels nearly all.
const RESET_LIMIT: u32 = 100;

/// How often an idle connection looks at its deadlines and at the server's
/// draining.
const TICK: Duration = Duration::from_secs(1);

/// What a connection's stream tasks share with it.
#[derive(Debug)]
struct Link {
    shared: Arc<Shared>,
    client: Client,
    /// This end's address, for CGI.
    here: Option<SocketAddr>,
    /// Streams running now.
    open: AtomicUsize,
    /// Streams accepted, and of those, reset by the client while they ran.
    opened: AtomicU32,
    resets: AtomicU32,
    /// Told when a stream ends, so a connection at its limit accepts again.
    ended: Notify,
}

impl Link {
    /// Whether the client resets too many of its streams (see "Limits").
    fn resets_too_many(&self) -> bool {
        let resets = self.resets.load(Ordering::Relaxed);
        resets > RESET_LIMIT && resets.saturating_mul(2) > self.opened.load(Ordering::Relaxed)
    }
}

/// Serves an HTTP/2 connection whose TLS handshake chose `h2`, until it closes.
pub(crate) async fn serve(
    io: tls::Io,
    origin: Origin,
    shared: Arc<Shared>,
    permit: OwnedSemaphorePermit,
) {
    // Held until the connection ends: it counts against `max_connections`.
    let _permit = permit;
    let limits = shared.config.limits;
    let here = io.local_addr().ok();
    let cork = io.cork();
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(limits.h2_max_streams)
        .max_header_list_size(u32::try_from(limits.head.max_head).unwrap_or(u32::MAX))
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_send_buffer_size(SEND_BUFFER)
        .max_pending_accept_reset_streams(PENDING_ACCEPT_RESETS)
        .max_local_error_reset_streams(Some(LOCAL_ERROR_RESETS));
    // The client's preface and SETTINGS are part of its first request's time.
    let deadline = origin.born + limits.head_timeout;
    let mut conn = match tokio::time::timeout_at(deadline.into(), builder.handshake(io)).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            tracing::debug!("{}: HTTP/2 preface failed: {e}", origin.peer);
            return;
        }
        Err(_) => {
            tracing::debug!("{}: HTTP/2 preface timed out", origin.peer);
            return;
        }
    };
    let link = Arc::new(Link {
        client: Client {
            peer: origin.peer,
            served: 0,
            born: origin.born,
            sni: origin.sni,
            http2: true,
        },
        shared,
        here,
        open: AtomicUsize::new(0),
        opened: AtomicU32::new(0),
        resets: AtomicU32::new(0),
        ended: Notify::new(),
    });
    let most = limits.h2_max_streams as usize;
    let mut tick = tokio::time::interval_at((Instant::now() + TICK).into(), TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Until the first stream: the head deadline; then the keep-alive timeout
    // from the moment no stream is open.
    let mut idle_until = deadline;
    let mut going_away: Option<Instant> = None;
    // When the socket last took everything written: answers queued whole on
    // this task (see `stream::start`) are leaving while it moves.
    let (mut sent, mut moved) = (cork.sent(), Instant::now());
    loop {
        // At the limit of running streams no stream is accepted (those the
        // client opens wait in h2's queue, and resetting them there counts
        // towards `PENDING_ACCEPT_RESETS`), but the connection is still driven.
        let full = link.open.load(Ordering::Relaxed) >= most;
        let mut poll = |cx: &mut Context<'_>| match full {
            false => conn.poll_accept(cx),
            // Ready only when the connection has ended.
            true => conn.poll_closed(cx).map(|closed| closed.err().map(Err)),
        };
        // h2 flushes whenever it is polled: with the cork held, the answers
        // queued for the streams of one read wait until none is left to accept,
        // then a second poll flushes them together.
        let driven = poll_fn(|cx| {
            cork.hold();
            let first = poll(cx);
            cork.release();
            match first {
                Poll::Pending => poll(cx),
                ready => ready,
            }
        });
        let accepted = tokio::select! {
            accepted = driven => accepted,
            () = link.ended.notified(), if full => continue,
            _ = tick.tick() => {
                let now = Instant::now();
                let open = link.open.load(Ordering::Relaxed);
                if cork.sent() != sent {
                    (sent, moved) = (cork.sent(), now);
                }
                // Streams whose answers are queued with h2 keep the connection
                // as long as their bytes keep leaving (a stream task has its
                // own send timeout).
                let leaving = conn.has_streams() && now < moved + limits.send_timeout;
                if open > 0 || leaving {
                    idle_until = now + limits.keepalive_timeout;
                }
                let shared = &link.shared;
                let stop = shared.draining.load(Ordering::Relaxed)
                    || shared.closing.load(Ordering::Relaxed)
                    || now >= idle_until;
                match going_away {
                    None if stop => {
                        conn.graceful_shutdown();
                        going_away = Some(now);
                    }
                    // A client that does not answer the GOAWAY's PING, with
                    // nothing left to send it, is not waited for.
                    Some(since) if open == 0 && !leaving && now >= since + limits.linger_idle => {
                        break;
                    }
                    _ => {}
                }
                continue;
            }
        };
        match accepted {
            Some(Ok((request, respond))) => {
                link.opened.fetch_add(1, Ordering::Relaxed);
                if let Some(rest) = stream::start(request, respond, &link) {
                    link.open.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(stream::serve(rest, Arc::clone(&link)));
                }
            }
            Some(Err(e)) => {
                tracing::debug!("{}: HTTP/2 connection error: {e}", link.client.peer);
                break;
            }
            None => break,
        }
        if link.resets_too_many() {
            tracing::debug!(
                "{}: HTTP/2 client reset {} streams: GOAWAY",
                link.client.peer,
                link.resets.load(Ordering::Relaxed)
            );
            conn.abrupt_shutdown(Reason::ENHANCE_YOUR_CALM);
            // Drives the GOAWAY out; the connection ends with it.
            let flush = async { while let Some(Ok(_)) = conn.accept().await {} };
            let _ = tokio::time::timeout(limits.linger_idle, flush).await;
            break;
        }
        idle_until = Instant::now() + limits.keepalive_timeout;
    }
}
