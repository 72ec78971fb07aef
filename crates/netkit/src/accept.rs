//! Accepting connections without spinning on errors, and without registering
//! them: the socket is handed over as a plain non-blocking `std` socket, so a
//! server that answers a connection at once and closes it costs tokio's reactor
//! nothing (no `epoll_ctl` to add it, none to remove it). tokio's own
//! `TcpListener::accept` registers every socket it returns.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use rustix::net::SocketFlags;
use tokio::io::unix::AsyncFd;

/// First pause after an accept error that is not the peer's fault.
const FIRST_BACKOFF: Duration = Duration::from_millis(5);
/// Longest pause: long enough to let file descriptors free up, short enough to
/// resume service quickly.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Accepts the next connection: a non-blocking socket that tokio's reactor does
/// not know yet (see [`crate::server::Accepted::stream`]). Errors caused by one
/// peer (it reset before we accepted) are skipped at once; resource errors
/// (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`) are logged and retried with
/// exponential backoff, the approach of mini-redis's accept loop.
pub async fn accept(listener: &AsyncFd<TcpListener>) -> (TcpStream, SocketAddr) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        let accepted = std::future::poll_fn(|cx| poll_accept(listener, cx)).await;
        match accepted {
            Ok(conn) => return conn,
            Err(e) if is_peer_error(&e) => continue,
            Err(e) => {
                tracing::warn!("accept failed: {e}; retrying in {backoff:?}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// One accept once the listener is readable. A `WouldBlock` clears the
/// listener's readiness, and the next poll waits for the reactor's next edge.
/// `poll_read_ready` leaves the waker in the listener's one reader slot, where
/// `readable().await` queues a waiter in a list and takes it out again: about
/// 360 instructions less per connection (`bench/callgrind-keepalive.sh
/// --fresh`). The listener's one accept loop is its only reader.
fn poll_accept(
    listener: &AsyncFd<TcpListener>,
    cx: &mut Context<'_>,
) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
    loop {
        let mut ready = ready!(listener.poll_read_ready(cx))?;
        if let Ok(accepted) = ready.try_io(|l| accept_now(l.get_ref())) {
            return Poll::Ready(accepted);
        }
    }
}

/// One `accept4`, the socket non-blocking and closed on exec, with its peer's
/// address from the same call.
fn accept_now(listener: &TcpListener) -> io::Result<(TcpStream, SocketAddr)> {
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let (fd, peer) = rustix::net::acceptfrom_with(listener, flags)?;
    let peer = peer
        .and_then(|p| SocketAddr::try_from(p).ok())
        .ok_or_else(|| io::Error::other("accepted a connection without an IP address"))?;
    Ok((TcpStream::from(fd), peer))
}

/// Registers an accepted socket with the calling runtime's reactor
/// (`epoll_ctl(ADD)`), for a connection that is going to wait. `None` when that
/// fails (the reactor is gone, or the kernel refuses another watch): logged,
/// and the socket closes.
pub fn register(stream: TcpStream, peer: SocketAddr) -> Option<tokio::net::TcpStream> {
    tokio::net::TcpStream::from_std(stream)
        .inspect_err(|e| tracing::warn!("{peer}: cannot register the connection: {e}"))
        .ok()
}

fn is_peer_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    ) || e.raw_os_error() == Some(rustix::io::Errno::PROTO.raw_os_error())
}
