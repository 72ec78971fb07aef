//! The relay of a proxied session: bytes both ways between the client and its
//! store host, until either side closes, nothing moves for the idle timeout, or
//! the session's time is up.
//!
//! The proxy does not parse what it relays: the store host runs the session (its
//! autologout, its limits, its UPDATE at QUIT). When the client closes, the store
//! host is told (its write side shut) and what it still sends is passed on until it
//! closes too, so a QUIT that was the client's last word still commits; when the
//! store host closes, the client's side is shut at once. Each write has the send
//! timeout; buffers are one fixed 16 KiB each way.

use std::io;
use std::time::{Duration, Instant};

use stoa_netkit::tls::Stream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Bytes read at a time in each direction.
const CHUNK: usize = 16 * 1024;

/// The relay's limits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Longest time with no byte in either direction.
    pub(crate) idle: Duration,
    /// When the session must end whatever happens.
    pub(crate) end: Instant,
    /// Longest wait for one write to be taken.
    pub(crate) send: Duration,
}

/// What went through, for the log.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Totals {
    /// Client to store host.
    pub(crate) up: u64,
    /// Store host to client.
    pub(crate) down: u64,
}

/// Relays between `client` and `upstream` (after `pending`, the client's bytes
/// already read, go up first).
pub(crate) async fn relay(
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
