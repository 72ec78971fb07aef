//! Accepting connections without spinning on errors.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};

/// First pause after an accept error that is not the peer's fault.
const FIRST_BACKOFF: Duration = Duration::from_millis(5);
/// Longest pause: long enough to let file descriptors free up, short enough to
/// resume service quickly.
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Accepts the next connection. Errors caused by one peer (it reset before we
/// accepted) are skipped at once; resource errors (`EMFILE`, `ENFILE`, `ENOBUFS`,
/// `ENOMEM`) are logged and retried with exponential backoff, the approach of
/// mini-redis's accept loop.
pub async fn accept(listener: &TcpListener) -> (TcpStream, SocketAddr) {
    let mut backoff = FIRST_BACKOFF;
    loop {
        match listener.accept().await {
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

fn is_peer_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    ) || e.raw_os_error() == Some(rustix::io::Errno::PROTO.raw_os_error())
}
