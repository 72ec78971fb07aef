//! TCP listeners for the thread-per-core model, and the [`Pool`] that carries
//! them from one generation of servers to the next on a reload.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex, PoisonError};

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
///
/// A port another process already listens on is refused (`AddrInUse`), as nginx,
/// Postfix and Dovecot refuse it: `SO_REUSEPORT` lets any process of the same user
/// join a group, so a second `stoa serve` on the same address would otherwise start
/// silently and take a share of the connections. The check is a bind without
/// `SO_REUSEPORT` first, which the kernel refuses while anyone listens there.
pub fn bind_group(addr: SocketAddr, count: usize, backlog: i32) -> io::Result<Vec<TcpListener>> {
    if addr.port() != 0 {
        refuse_if_taken(addr)?;
    }
    let first = bind_reuseport(addr, backlog)?;
    let bound = first.local_addr()?;
    let mut group = Vec::with_capacity(count.max(1));
    group.push(first);
    for _ in 1..count {
        group.push(bind_reuseport(bound, backlog)?);
    }
    Ok(group)
}

/// Fails with `AddrInUse` when a socket (of any process) listens on `addr`.
fn refuse_if_taken(addr: SocketAddr) -> io::Result<()> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // Past a restart's TIME_WAIT sockets, not past a listener.
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_cloexec(true)?;
    match socket.bind(&addr.into()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("address already in use: another process listens on {addr}"),
        )),
        Err(e) => Err(e),
    }
}

/// The listening sockets of a process's servers, by configured address, so that
/// servers bound again on a reload take over the sockets (and the connections
/// waiting in their accept queues) of the servers they replace instead of binding
/// anew: no connection is refused or reset while a configuration changes, and a
/// privileged port stays bound after the process gave up root.
///
/// The default pool keeps nothing (every bind is fresh); [`Pool::shared`] makes
/// one that keeps. A kept socket stays open while its address is configured:
/// [`Pool::begin`] starts a generation, and [`Pool::commit`] closes the pool's
/// copies of addresses that generation did not bind (its servers' own copies
/// close with them), [`Pool::abandon`] those it bound first and gave up. An
/// address configured several times (port 0 for a test, say) is matched by
/// its place among them: the second `127.0.0.1:0` of a generation gets the
/// sockets of the second of the one before.
#[derive(Clone, Default)]
pub struct Pool {
    kept: Option<Arc<Mutex<Kept>>>,
}

/// The sockets a shared [`Pool`] holds, and the generation binding now.
#[derive(Debug, Default)]
struct Kept {
    generation: u64,
    groups: Vec<KeptGroup>,
    /// How often each address was bound in this generation so far.
    binds: Vec<(SocketAddr, usize)>,
}

/// One configured address's sockets (one per worker of the generation that bound
/// it first).
#[derive(Debug)]
struct KeptGroup {
    addr: SocketAddr,
    /// Which bind of `addr` in its generation it was, from 0.
    nth: usize,
    sockets: Vec<TcpListener>,
    first_bound_in: u64,
    last_bound_in: u64,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kept {
            None => f.write_str("Pool(fresh binds)"),
            Some(kept) => {
                let kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                f.debug_list()
                    .entries(kept.groups.iter().map(|g| g.addr))
                    .finish()
            }
        }
    }
}

impl Pool {
    /// A pool that keeps the sockets it binds, for the servers of one process.
    pub fn shared() -> Pool {
        Pool {
            kept: Some(Arc::default()),
        }
    }

    /// Binds `count` listeners on `addr` ([`bind_group`]), or, when the pool
    /// already holds `addr`, hands out duplicates of its sockets: worker `i`
    /// gets socket `i` modulo however many there are, so every kept socket is
    /// still accepted from.
    pub fn bind_group(
        &self,
        addr: SocketAddr,
        count: usize,
        backlog: i32,
    ) -> io::Result<Vec<TcpListener>> {
        let Some(kept) = self.kept.as_ref() else {
            return bind_group(addr, count, backlog);
        };
        let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
        let generation = kept.generation;
        let nth = match kept.binds.iter_mut().find(|(a, _)| *a == addr) {
            Some((_, n)) => {
                *n += 1;
                *n - 1
            }
            None => {
                kept.binds.push((addr, 1));
                0
            }
        };
        if let Some(group) = kept
            .groups
            .iter_mut()
            .find(|g| g.addr == addr && g.nth == nth)
        {
            group.last_bound_in = generation;
            let n = group.sockets.len();
            return (0..count.max(1))
                .map(|i| group.sockets[i % n].try_clone())
                .collect();
        }
        let sockets = bind_group(addr, count, backlog)?;
        let copies = sockets
            .iter()
            .map(TcpListener::try_clone)
            .collect::<io::Result<Vec<_>>>()?;
        kept.groups.push(KeptGroup {
            addr,
            nth,
            sockets: copies,
            first_bound_in: generation,
            last_bound_in: generation,
        });
        Ok(sockets)
    }

    /// Starts a new generation of binds (a reload's servers).
    pub fn begin(&self) {
        if let Some(kept) = &self.kept {
            let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
            kept.generation += 1;
            kept.binds.clear();
        }
    }

    /// The generation's servers are running: stop holding addresses it did not
    /// bind.
    pub fn commit(&self) {
        self.retain(|g, generation| g.last_bound_in == generation);
    }

    /// The generation's servers were given up: stop holding addresses that only
    /// it bound.
    pub fn abandon(&self) {
        self.retain(|g, generation| g.first_bound_in != generation);
    }

    /// The addresses the pool holds sockets for.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        self.kept.as_ref().map_or_else(Vec::new, |kept| {
            let kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
            kept.groups.iter().map(|g| g.addr).collect()
        })
    }

    fn retain(&self, keep: impl Fn(&KeptGroup, u64) -> bool) {
        if let Some(kept) = &self.kept {
            let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
            let generation = kept.generation;
            kept.groups.retain(|g| keep(g, generation));
        }
    }
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

    #[test]
    fn a_port_another_reuseport_group_holds_is_refused() {
        // Issue 56, defect 8: a second stoa joined the first one's group and took a
        // share of its connections. Another group (a fresh bind, as another process
        // makes) on the same port is now an error; a restart after the first one's
        // sockets closed binds again.
        let addr = free_addr();
        let first = bind_group(addr, 2, 16).expect("first group");
        let second = bind_group(addr, 2, 16).expect_err("second group");
        assert_eq!(second.kind(), io::ErrorKind::AddrInUse);
        assert!(second.to_string().contains("another process"), "{second}");
        drop(first);
        bind_group(addr, 2, 16).expect("free again");
    }

    fn free_addr() -> SocketAddr {
        let probe = TcpListener::bind("127.0.0.1:0").expect("bind");
        probe.local_addr().expect("addr")
    }

    #[test]
    fn a_shared_pool_hands_the_same_socket_to_the_next_generation() {
        let pool = Pool::shared();
        let addr = free_addr();
        // One socket: the kernel spreads a group's connections among its sockets.
        let first = pool.bind_group(addr, 1, 16).expect("first bind");
        pool.commit();
        pool.begin();
        // A fresh bind would fail: the port is held without SO_REUSEPORT's help
        // once the first generation's sockets are gone.
        drop(first);
        let second = pool.bind_group(addr, 3, 16).expect("second bind");
        assert_eq!(
            second.len(),
            3,
            "one duplicate of the kept socket per worker"
        );
        let client = std::net::TcpStream::connect(addr).expect("connect");
        second[0].set_nonblocking(false).expect("blocking");
        let (_, peer) = second[0].accept().expect("accepted by the kept socket");
        assert_eq!(peer, client.local_addr().expect("client addr"));
    }

    #[test]
    fn commit_and_abandon_close_what_no_generation_binds() {
        let pool = Pool::shared();
        let (old, new) = (free_addr(), free_addr());
        drop(pool.bind_group(old, 1, 16).expect("old"));
        pool.commit();
        pool.begin();
        drop(pool.bind_group(new, 1, 16).expect("new"));
        pool.abandon();
        assert_eq!(pool.addrs(), vec![old], "the given-up generation's address");
        pool.begin();
        drop(pool.bind_group(new, 1, 16).expect("new again"));
        pool.commit();
        assert_eq!(pool.addrs(), vec![new], "the address no longer configured");
        assert!(std::net::TcpStream::connect(old).is_err(), "old is closed");
    }

    #[test]
    fn port_zero_is_matched_by_its_place() {
        let pool = Pool::shared();
        let any: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        let port = |g: Vec<TcpListener>| g[0].local_addr().expect("addr").port();
        let (a, b) = (
            port(pool.bind_group(any, 1, 16).expect("a")),
            port(pool.bind_group(any, 1, 16).expect("b")),
        );
        assert_ne!(a, b);
        pool.commit();
        pool.begin();
        let again = (
            port(pool.bind_group(any, 1, 16).expect("a")),
            port(pool.bind_group(any, 1, 16).expect("b")),
        );
        assert_eq!(again, (a, b));
    }

    #[test]
    fn the_default_pool_keeps_nothing() {
        let pool = Pool::default();
        let addr = free_addr();
        drop(pool.bind_group(addr, 1, 16).expect("bind"));
        assert!(pool.addrs().is_empty());
        assert!(std::net::TcpStream::connect(addr).is_err());
    }
}
