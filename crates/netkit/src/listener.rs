//! TCP listeners for the thread-per-core model.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

/// The listen backlog. 4096 is the kernel's default `somaxconn` since Linux 5.4;
/// the kernel clamps it to `net.core.somaxconn` anyway.
pub const DEFAULT_BACKLOG: i32 = 4096;

/// Binds one non-blocking listener on `addr` with `SO_REUSEPORT` (and
/// `SO_REUSEADDR`, so a restart does not wait for TIME_WAIT). IPv6 listeners are
/// IPv6-only, so `[::]:80` and `0.0.0.0:80` can be configured side by side.
pub fn bind_reuseport(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.set_cloexec(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(socket.into())
}

/// Binds `count` listeners sharing `addr`, one per worker. Port 0 is resolved by the
/// first bind; the others join the port it got.
pub fn bind_group(addr: SocketAddr, count: usize, backlog: i32) -> io::Result<Vec<TcpListener>> {
    let first = bind_reuseport(addr, backlog)?;
    let bound = first.local_addr()?;
    let mut group = Vec::with_capacity(count.max(1));
    group.push(first);
    for _ in 1..count {
        group.push(bind_reuseport(bound, backlog)?);
    }
    Ok(group)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_shares_one_port() {
        let group = bind_group("127.0.0.1:0".parse().expect("addr"), 3, 16).expect("bind");
        let ports: Vec<u16> = group
            .iter()
            .map(|l| l.local_addr().expect("addr").port())
            .collect();
        assert_eq!(ports.len(), 3);
        assert!(ports.iter().all(|&p| p == ports[0] && p != 0));
    }

    #[test]
    fn taken_port_is_an_error() {
        // A plain listener without SO_REUSEPORT blocks the port for everyone.
        let plain = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = plain.local_addr().expect("addr");
        assert!(bind_reuseport(addr, 16).is_err());
    }
}
