//! What the kit's manager derives from its list of clients (`web99.md` §6.6):
//! the `maxthread` of the Reset.
//!
//! The manager weighs clients by a speed rating; Stoa's clients (the local
//! harness, or `stoa bench agent`s) all have the same, so this is the
//! manager's arithmetic for equal speeds.

/// The Reset's `maxthread`: clients × the largest share of the connections,
/// where the manager takes the largest share (`floor(connections / clients)`
/// each) before it hands out the remainder, so with uneven shares it is clients
/// × the smaller share (10 connections on 3 clients: 3 × 3 = 9, though one
/// client runs 4). No clients: one client. The server's user table is sized by
/// `max(maxload, maxthread)`, and `maxload` is the connection count, so every
/// user is in it.
pub fn maxthread(connections: u32, clients: u32) -> u32 {
    let clients = clients.max(1);
    clients * (connections / clients)
}

#[cfg(test)]
mod tests {
    use super::*;

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
