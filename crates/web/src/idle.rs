//! Parked connections: kept-alive connections that stay quiet leave their task.
//!
//! A connection waiting for its next request inside a tokio task costs about a
//! kilobyte of user-space memory: the task with its future, and tokio's readiness
//! record for the socket (a 128-byte-aligned `ScheduledIo`). nginx keeps an idle
//! keep-alive connection in a few hundred bytes. So a connection idle for longer
//! than [`PARK_AFTER`] is *parked*: its socket leaves tokio's registry and joins
//! this worker's own epoll set, the task ends, and what remains is a [`Parked`]
//! record of under a hundred bytes. When the client sends its next request, the
//! worker's [`run`] loop (one task per worker) takes the socket out of the set and
//! starts a connection task for it again; when the idle deadline passes, the socket
//! is closed.
//!
//! Busy connections never park: a client that reuses its connection within
//! [`PARK_AFTER`] (every benchmark client, and browsers mostly) pays nothing. A
//! parked connection costs two `epoll_ctl` calls and a task spawn when it wakes.
//! Parking exists only on the per-core runtime, whose thread-local state is the
//! worker's; the multi-thread model keeps idle connections in their tasks, and so
//! do HTTPS connections (their TLS state would have to be parked too).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustix::event::epoll::{self, EventData, EventFlags};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::{Notify, OwnedSemaphorePermit};

use crate::server::Shared;
use crate::{conn, local};

/// Idle time after which a connection waiting for a request is parked. Long
/// enough that a client pipelining or paced by its own think time (a SPECweb99
/// client re-requests at once) never pays for waking; short enough that thousands of
/// idle browsers soon cost almost nothing.
pub(crate) const PARK_AFTER: Duration = Duration::from_secs(1);

/// Events read per `epoll_wait`.
const EVENTS_PER_WAIT: usize = 256;

/// What a connection needs to resume: everything but its buffers.
#[derive(Debug)]
pub(crate) struct Parked {
    pub(crate) stream: std::net::TcpStream,
    pub(crate) peer: SocketAddr,
    /// Requests answered so far.
    pub(crate) served: u32,
    pub(crate) born: Instant,
    /// The connection keeps its place under the worker's connection limit.
    pub(crate) permit: OwnedSemaphorePermit,
}

#[derive(Debug)]
struct Slot {
    /// Bumped on every reuse, so stale epoll events and deadlines are ignored.
    generation: u32,
    conn: Option<(Parked, Instant)>,
}

/// One worker's parked connections.
#[derive(Debug)]
pub(crate) struct IdleSet {
    epoll: Arc<OwnedFd>,
    slots: Vec<Slot>,
    free: Vec<u32>,
    deadlines: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// Tells [`run`] that an earlier deadline than the one it sleeps for arrived.
    rearm: Arc<Notify>,
}

fn key(slot: u32, generation: u32) -> u64 {
    u64::from(slot) << 32 | u64::from(generation)
}

impl IdleSet {
    /// An empty set with room for `capacity` connections, reserved up front: the
    /// tables then never move, and (being large) live in their own mappings, so
    /// they cannot pin the heap and keep memory freed by a burst of connections
    /// from returning to the system. Untouched pages cost nothing.
    fn new(epoll: Arc<OwnedFd>, rearm: Arc<Notify>, capacity: usize) -> IdleSet {
        IdleSet {
            epoll,
            slots: Vec::with_capacity(capacity),
            free: Vec::with_capacity(capacity),
            deadlines: BinaryHeap::with_capacity(capacity),
            rearm,
        }
    }

    /// Parks `conn` until it becomes readable or `deadline` passes. On failure the
    /// connection is closed (it was idle; the client reconnects).
    pub(crate) fn park(&mut self, conn: Parked, deadline: Instant) {
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot {
                generation: 0,
                conn: None,
            });
            (self.slots.len() - 1) as u32
        });
        let entry = &mut self.slots[slot as usize];
        entry.generation = entry.generation.wrapping_add(1);
        let generation = entry.generation;
        let flags = EventFlags::IN | EventFlags::RDHUP;
        if let Err(e) = epoll::add(
            &*self.epoll,
            &conn.stream,
            EventData::new_u64(key(slot, generation)),
            flags,
        ) {
            tracing::debug!("cannot park {}: {e}", conn.peer);
            self.free.push(slot);
            return;
        }
        entry.conn = Some((conn, deadline));
        if self.next_deadline().is_none_or(|next| deadline < next) {
            self.rearm.notify_one();
        }
        self.deadlines.push(Reverse((deadline, slot, generation)));
    }

    /// Takes the connection an event was for out of the set.
    fn take(&mut self, key: u64) -> Option<Parked> {
        let (slot, generation) = ((key >> 32) as u32, key as u32);
        let entry = self.slots.get_mut(slot as usize)?;
        if entry.generation != generation {
            return None;
        }
        let (conn, _) = entry.conn.take()?;
        self.free.push(slot);
        // Leave our set before joining tokio's; closing would also remove it.
        let _ = epoll::delete(&*self.epoll, &conn.stream);
        Some(conn)
    }

    /// Closes the connections whose deadline has passed.
    fn expire(&mut self, now: Instant) {
        while let Some(Reverse((deadline, slot, generation))) = self.deadlines.peek().copied() {
            if deadline > now {
                return;
            }
            self.deadlines.pop();
            let entry = &mut self.slots[slot as usize];
            if entry.generation == generation && entry.conn.take().is_some() {
                self.free.push(slot);
            }
        }
    }

    /// Closes every parked connection (the server is shutting down).
    pub(crate) fn close_all(&mut self) {
        self.slots.clear();
        self.free.clear();
        self.deadlines.clear();
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.deadlines.peek().map(|Reverse((t, _, _))| *t)
    }
}

/// The worker's parking loop: installs the worker's [`IdleSet`] and wakes or
/// expires parked connections until the worker stops.
pub(crate) async fn run(shared: Arc<Shared>) -> io::Result<()> {
    let epoll = Arc::new(epoll::create(epoll::CreateFlags::CLOEXEC)?);
    #[allow(
        deprecated,
        reason = "the replacement is `unsafe`; this use is sound: the AsyncFd owns an Arc of \
                  the OwnedFd, so the descriptor stays open and unchanged while registered"
    )]
    let ready = AsyncFd::with_interest(Arc::clone(&epoll), Interest::READABLE)?;
    let rearm = Arc::new(Notify::new());
    let capacity = shared.config.limits.max_connections;
    local::with(&shared, |l| {
        l.idle = Some(IdleSet::new(
            Arc::clone(&epoll),
            Arc::clone(&rearm),
            capacity,
        ));
    });
    let mut events = Vec::with_capacity(EVENTS_PER_WAIT);
    loop {
        let next = local::with(&shared, |l| {
            l.idle.as_ref().and_then(IdleSet::next_deadline)
        });
        let expiry = async {
            match next {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            guard = ready.readable() => {
                let mut guard = guard?;
                events.clear();
                epoll::wait(&*epoll, rustix::buffer::spare_capacity(&mut events), Some(&rustix::time::Timespec::default()))?;
                if events.is_empty() {
                    guard.clear_ready();
                }
                for event in events.drain(..) {
                    wake(&shared, event);
                }
            }
            () = expiry => local::with(&shared, |l| {
                if let Some(idle) = &mut l.idle {
                    idle.expire(Instant::now());
                }
            }),
            () = rearm.notified() => {}
        }
    }
}

fn wake(shared: &Arc<Shared>, event: epoll::Event) {
    // Copies: the event struct is packed.
    let (flags, data) = (event.flags, event.data);
    let Some(parked) = local::with(shared, |l| l.idle.as_mut().and_then(|i| i.take(data.u64())))
    else {
        return;
    };
    if !flags.contains(EventFlags::IN) {
        // Hung up without sending anything: just close.
        return;
    }
    match tokio::net::TcpStream::from_std(parked.stream) {
        Ok(stream) => {
            let resumed = conn::Origin {
                peer: parked.peer,
                served: parked.served,
                born: parked.born,
                sni: None,
            };
            tokio::spawn(conn::serve(
                stream,
                resumed,
                Arc::clone(shared),
                parked.permit,
                None,
            ));
        }
        Err(e) => tracing::debug!("cannot resume {}: {e}", parked.peer),
    }
}
