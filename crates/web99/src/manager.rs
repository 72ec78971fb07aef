//! What the kit's manager derives from its list of clients (`web99.md` §6.6):
//! each client's share of the connections, and the `maxthread` of the Reset.
//!
//! The manager weighs clients by a speed rating; Stoa's clients (the local
//! harness, or `stoa bench agent`s) all have the same, so the shares here are the
//! manager's arithmetic for equal speeds.

/// Each of `clients` clients' share of `connections`, as the manager splits them:
/// `floor(connections / clients)` each, then one more to clients 1, 2, … until
/// the remainder is gone. Its loop counts the remainder down to 1 and uses the
/// count as the index, so client 0 never gets one. No clients: one client.
pub fn client_loads(connections: u32, clients: u32) -> Vec<u32> {
    let clients = clients.max(1);
    let base = connections / clients;
    let extra = connections % clients;
    (0..clients)
        .map(|c| base + u32::from(c >= 1 && c <= extra))
        .collect()
}

/// The Reset's `maxthread`: clients × the largest share, where the manager takes
/// the largest share before it hands out the remainder, so with uneven shares it
/// is clients × the smaller share (10 connections on 3 clients: 3 × 3 = 9, though
/// one client runs 4). The server's user table is sized by `max(maxload,
/// maxthread)`, and `maxload` is the connection count, so every user is in it.
pub fn maxthread(connections: u32, clients: u32) -> u32 {
    let clients = clients.max(1);
    clients * (connections / clients)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_as_the_manager_splits_them() {
        assert_eq!(client_loads(10, 3), vec![3, 4, 3]);
        assert_eq!(client_loads(11, 3), vec![3, 4, 4]);
        assert_eq!(client_loads(2, 3), vec![0, 1, 1]);
        assert_eq!(client_loads(7, 1), vec![7]);
        assert_eq!(client_loads(7, 0), vec![7]);
        for (n, k) in [(1000, 7), (1, 1), (99, 4), (5, 8)] {
            assert_eq!(client_loads(n, k).iter().sum::<u32>(), n);
        }
    }

    /// Issue 18, item 9: the harness sent `maxthread = connections`; the manager
    /// sends clients × the largest share before the remainder.
    #[test]
    fn maxthread_with_uneven_shares() {
        assert_eq!(maxthread(100, 1), 100);
        assert_eq!(maxthread(100, 4), 100);
        assert_eq!(maxthread(10, 3), 9);
        assert_eq!(maxthread(11, 3), 9);
        assert_eq!(maxthread(2, 3), 0);
        assert_eq!(maxthread(7, 0), 7);
    }
}
