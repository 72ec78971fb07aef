//! Plain sockets for tests: a bounded connect, and telling a read timeout or a
//! reset from other errors.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// Connects to `addr` within `timeout`, and sets `timeout` on reads and writes, so
/// that no later step of the test can hang on this socket.
pub fn connect(addr: SocketAddr, timeout: Duration) -> TcpStream {
    let stream = TcpStream::connect_timeout(&addr, timeout)
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    set_timeouts(&stream, timeout);
    stream
}

/// Sets `timeout` on reads and writes of `stream`.
pub fn set_timeouts(stream: &TcpStream, timeout: Duration) {
    stream
        .set_read_timeout(Some(timeout))
        .expect("set read timeout");
    stream
        .set_write_timeout(Some(timeout))
        .expect("set write timeout");
}

/// A timeout from a socket with `SO_RCVTIMEO` or `SO_SNDTIMEO` set.
pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// The peer reset (or aborted) the connection.
pub fn is_reset(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted
    )
}
