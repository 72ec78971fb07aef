//! `TCP_DEFER_ACCEPT` on a listening socket, the one socket option Stoa sets
//! that neither rustix, socket2 nor stable std can (std's
//! `TcpStreamExt::set_deferaccept` is still unstable).
//!
//! **What it does.** With the option on, Linux does not queue a new connection
//! for `accept` when the handshake completes, but when the client's first data
//! arrives (or, for a client that sends nothing, once the period has passed and
//! the client has answered a retransmitted SYN-ACK). An HTTP server's accepted
//! connection then always has its request waiting: the first `recv` finds it,
//! with no `EAGAIN`, no wait for readiness and no extra wake-up in between. It
//! is what nginx's `listen … deferred` sets. Only for protocols where the client
//! speaks first (HTTP, TLS): an SMTP or POP3 client waits for the greeting, so
//! its connections would sit in the kernel until the period ended.
//!
//! **Why this crate.** A socket option none of those crates names needs a raw
//! `setsockopt`, a foreign call, so it needs `unsafe`, which every other crate
//! forbids. This crate has `unsafe_code` at `deny` and allows it for the two
//! calls, each with its safety argument beside it (the precedent is
//! `stoa-alloc`).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::Duration;

/// Turns `TCP_DEFER_ACCEPT` on for `listener` with `period` (rounded up to
/// whole seconds; the kernel then rounds it to SYN-ACK retransmissions), or off
/// with [`Duration::ZERO`]. Setting it on a socket that already listens takes
/// effect for the connections that arrive from then on.
pub fn set_defer_accept(listener: &impl AsFd, period: Duration) -> io::Result<()> {
    let secs = if period.is_zero() {
        0
    } else {
        let whole = period.as_secs() + u64::from(period.subsec_nanos() > 0);
        libc::c_int::try_from(whole).unwrap_or(libc::c_int::MAX)
    };
    set_tcp_int(listener.as_fd(), libc::TCP_DEFER_ACCEPT, secs)
}

/// The period in force on `listener`, as the kernel reports it (a period of
/// one second reads back as three: one SYN-ACK retransmission's worth);
/// [`Duration::ZERO`] when off.
pub fn defer_accept(listener: &impl AsFd) -> io::Result<Duration> {
    let secs = tcp_int(listener.as_fd(), libc::TCP_DEFER_ACCEPT)?;
    Ok(Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
}

/// `setsockopt(fd, IPPROTO_TCP, option, &value, sizeof(int))`.
fn set_tcp_int(fd: BorrowedFd<'_>, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
    let len = libc::socklen_t::try_from(size_of::<libc::c_int>()).unwrap_or(4);
    #[allow(unsafe_code)]
    // SAFETY: `fd` is a live descriptor borrowed for the call; the value pointer
    // points at an `int` on this stack frame and `len` is its size, which is
    // what the kernel reads for an integer TCP option; nothing is retained.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            option,
            (&raw const value).cast(),
            len,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `getsockopt(fd, IPPROTO_TCP, option, &value, &len)` for an integer option.
fn tcp_int(fd: BorrowedFd<'_>, option: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = libc::socklen_t::try_from(size_of::<libc::c_int>()).unwrap_or(4);
    #[allow(unsafe_code)]
    // SAFETY: `fd` is a live descriptor borrowed for the call; `value` and `len`
    // are on this stack frame, `len` holds `value`'s size, and the kernel writes
    // at most that many bytes into `value` and the length it wrote into `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            option,
            (&raw mut value).cast(),
            &raw mut len,
        )
    };
    if rc == 0 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn the_period_is_set_read_back_and_cleared() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        assert_eq!(defer_accept(&listener).expect("get"), Duration::ZERO);
        set_defer_accept(&listener, Duration::from_millis(1)).expect("set");
        // Rounded up to a second, then to retransmissions: never zero.
        assert!(defer_accept(&listener).expect("get") >= Duration::from_secs(1));
        set_defer_accept(&listener, Duration::ZERO).expect("clear");
        assert_eq!(defer_accept(&listener).expect("get"), Duration::ZERO);
    }

    #[test]
    fn a_connection_is_accepted_only_once_its_data_is_there() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        set_defer_accept(&listener, Duration::from_secs(30)).expect("set");
        let mut client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        // On loopback the handshake is complete when connect returns: without
        // the option the connection would be waiting in the accept queue now.
        listener.set_nonblocking(true).expect("nonblocking");
        let early = listener.accept().map(|_| ()).map_err(|e| e.kind());
        assert_eq!(early, Err(io::ErrorKind::WouldBlock));
        client.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("send");
        listener.set_nonblocking(false).expect("blocking");
        let (mut accepted, _) = listener.accept().expect("accept");
        accepted.set_nonblocking(true).expect("nonblocking");
        let mut buf = [0; 64];
        let n = accepted
            .read(&mut buf)
            .expect("the request is already waiting");
        assert_eq!(&buf[..n], b"GET / HTTP/1.1\r\n\r\n");
    }

    #[test]
    fn a_socket_that_is_not_tcp_is_an_error() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().expect("pair");
        assert!(set_defer_accept(&a, Duration::from_secs(1)).is_err());
    }
}
