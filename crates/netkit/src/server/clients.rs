//! Connections per client address, counted across every worker of a server.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// Open connections per client address, and in all, across workers. A connection
/// enters with [`ClientCounts::enter`] and leaves when its [`ClientSlot`] drops.
///
/// The map is behind a `std` mutex: it is locked twice per connection, for a
/// lookup, never across an `.await`.
#[derive(Debug)]
pub struct ClientCounts {
    /// Connections one address may hold; 0 is no limit.
    limit: usize,
    clients: Mutex<HashMap<IpAddr, usize>>,
    open: AtomicUsize,
}

impl ClientCounts {
    /// No connections yet; at most `limit` per address (0: no limit).
    pub fn new(limit: usize) -> ClientCounts {
        ClientCounts {
            limit,
            clients: Mutex::new(HashMap::new()),
            open: AtomicUsize::new(0),
        }
    }

    /// Counts a new connection from `ip`; it is counted until the slot drops, even
    /// when it is over the limit (the caller refuses it politely and closes).
    pub fn enter(self: &Arc<Self>, ip: IpAddr) -> ClientSlot {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        let count = clients.entry(ip).or_insert(0);
        *count += 1;
        let over = self.limit > 0 && *count > self.limit;
        drop(clients);
        self.open.fetch_add(1, Ordering::Relaxed);
        ClientSlot {
            counts: Arc::clone(self),
            ip,
            over,
        }
    }

    /// Connections open now, from every address.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

/// A connection's place in the per-client count; released on drop.
#[derive(Debug)]
pub struct ClientSlot {
    counts: Arc<ClientCounts>,
    ip: IpAddr,
    over: bool,
}

impl ClientSlot {
    /// Whether this connection is one too many for its client.
    pub fn over_limit(&self) -> bool {
        self.over
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut clients = self
            .counts
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = clients.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                clients.remove(&self.ip);
            }
        }
        drop(clients);
        self.counts.open.fetch_sub(1, Ordering::Relaxed);
    }
}
