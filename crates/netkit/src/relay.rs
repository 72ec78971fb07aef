//! The relay of a proxied session (the POP3 and IMAP proxies'): bytes both ways
//! between the client and its upstream server, until either side closes, nothing
//! moves for the idle timeout, or the session's time is up.
//!
//! The relay does not parse what it copies: the upstream server runs the session
//! (its autologout, its limits, its commit at QUIT or LOGOUT). When the client
//! closes, the upstream server is told (its write side shut) and what it still
//! sends is passed on until it closes too, so a QUIT that was the client's last
//! word still commits; when the upstream server closes, the relay ends at once.
//! Each write has the send timeout; buffers are one fixed 16 KiB each way.

use std::io;
use std::time::{Duration, Instant};

use crate::line::LineIo;
use crate::tls::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long the close of the upstream server's write side may take at the end.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Bytes read at a time in each direction.
const CHUNK: usize = 16 * 1024;

/// The relay's limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest time with no byte in either direction.
    pub idle: Duration,
    /// When the session must end whatever happens.
    pub end: Instant,
    /// Longest wait for one write to be taken.
    pub send: Duration,
}

/// What went through, for the log.
#[derive(Debug, Default, Clone, Copy)]
pub struct Totals {
    /// Client to upstream server.
    pub up: u64,
    /// Upstream server to client.
    pub down: u64,
}

/// Hands a line-protocol connection over to the relay: what `io` has queued goes
/// to the client first (the upstream server's answer to the login, which the
/// caller wrote there), then the client's unread bytes (commands pipelined behind
/// the login) go up, then [`relay`]; at the end the upstream server's write side
/// is shut, and what went through is logged for the client `peer`.
pub async fn take_over(
    io: &mut LineIo,
    mut upstream: Stream,
    limits: Limits,
    peer: std::net::SocketAddr,
) -> io::Result<()> {
    io.flush(limits.send).await?;
    let pending = io.unread().to_vec();
    io.consume(pending.len());
    let result = relay(io.stream_mut(), &pending, &mut upstream, limits).await;
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, upstream.shutdown()).await;
    let Totals { up, down } = result?;
    tracing::debug!("{peer}: proxied session ended ({up} bytes up, {down} down)");
    Ok(())
}

/// `reply` as it may go to a client: each byte that is not printable ASCII, CR
/// or LF a `?` (a store host's login answer is relayed, not trusted).
pub fn sanitized(reply: &[u8]) -> impl Iterator<Item = u8> + '_ {
    reply.iter().map(|&b| match b {
        b' '..=b'~' | b'\r' | b'\n' => b,
        _ => b'?',
    })
}

/// Relays between `client` and `upstream` (after `pending`, the client's bytes
/// already read, go up first).
pub async fn relay(
    client: &mut Stream,
    pending: &[u8],
    upstream: &mut Stream,
    limits: Limits,
) -> io::Result<Totals> {
    let mut totals = Totals::default();
    if !pending.is_empty() {
        upstream.write_all_within(pending, limits.send).await?;
        totals.up += pending.len() as u64;
    }
    let mut up = vec![0u8; CHUNK];
    let mut down = vec![0u8; CHUNK];
    let mut client_open = true;
    loop {
        let deadline = (Instant::now() + limits.idle).min(limits.end);
        let deadline = tokio::time::Instant::from_std(deadline);
        tokio::select! {
            read = client.read(&mut up), if client_open => match read? {
                0 => {
                    client_open = false;
                    let _ = tokio::time::timeout(limits.send, upstream.shutdown()).await;
                }
                n => {
                    upstream.write_all_within(&up[..n], limits.send).await?;
                    totals.up += n as u64;
                }
            },
            read = upstream.read(&mut down) => match read? {
                0 => return Ok(totals),
                n => {
                    // A client that closed its side may still read (a QUIT's
                    // answer); one that is gone altogether ends the relay.
                    match client.write_all_within(&down[..n], limits.send).await {
                        Ok(()) => totals.down += n as u64,
                        Err(_) if !client_open => return Ok(totals),
                        Err(e) => return Err(e),
                    }
                }
            },
            () = tokio::time::sleep_until(deadline) => {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "proxied session timed out"));
            }
        }
    }
}
