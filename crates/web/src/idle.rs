//! Parked connections: kept-alive connections that stay quiet leave their task.
//!
//! A connection waiting inside a tokio task costs about 1.3 KiB of user-space
//! memory, nearly all of it the task with its future; nginx keeps an idle
//! keep-alive connection in about 500 bytes. So a plain-HTTP connection on the
//! per-core runtime idle for longer than [`PARK_AFTER`] is *parked*: its task
//! ends and what remains is a [`Parked`] record in this worker's [`IdleSet`], with
//! the socket still registered in tokio's reactor (its 256-byte readiness record).
//! Parking and waking make no system call: the set asks the socket's readiness to
//! wake a waker of its own, one per slot of the set, and the worker's [`run`] loop
//! starts a connection task again for each socket so woken that has input (or an
//! end of input) waiting. Deadlines (the keep-alive timeout, or the head timeout
//! of a connection that has not sent its first request) live in a timer wheel
//! (`tokio_util`'s `DelayQueue`); a parked connection whose deadline passes is
//! closed.
//!
//! Why wait [`PARK_AFTER`] first: a park and its wake cost about 4,000
//! instructions (a task spawned again, the wheel's insert and removal, the wake
//! hop through [`run`]), half a small keep-alive request's whole cost, while
//! waiting in the task costs only the timer it sets anyway for its deadline. A
//! client that sends its next request at once (`wrk`, pipelining browsers, the
//! kit's class 0 files drained in a few milliseconds) never parks; one that
//! stays quiet longer parks after a few tens of milliseconds, so idle connections
//! are cheap almost from the start. Parking exists only on the per-core runtime,
//! whose thread-local state is the worker's; the multi-thread model keeps idle
//! connections in their tasks, and so do HTTPS connections (their TLS state
//! would have to be parked too).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use tokio_util::time::DelayQueue;
use tokio_util::time::delay_queue::Key;

use crate::server::Shared;
use crate::{conn, local};

/// Idle time after which a connection waiting for a request is parked (see the
/// module's notes for the trade).
pub(crate) const PARK_AFTER: Duration = Duration::from_millis(50);

/// What a connection needs to resume: everything but its buffers.
#[derive(Debug)]
pub(crate) struct Parked {
    /// Still registered in tokio's reactor.
    pub(crate) stream: TcpStream,
    pub(crate) peer: SocketAddr,
    /// Requests answered so far.
    pub(crate) served: u32,
    pub(crate) born: Instant,
    /// The connection keeps its place under the worker's connection limit.
    pub(crate) permit: OwnedSemaphorePermit,
}

/// One place in the set. Slots are reused, each with the same waker, so parking
/// allocates nothing once the set has grown to the worker's peak.
#[derive(Debug)]
struct Slot {
    /// The parked connection and its entry in the deadline wheel.
    conn: Option<(Parked, Key)>,
    /// Wakes [`run`] for this slot (see [`SlotWaker`]).
    waker: Waker,
}

/// One worker's parked connections.
#[derive(Debug)]
pub(crate) struct IdleSet {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Each parked connection's deadline, by slot.
    deadlines: DelayQueue<u32>,
    woken: Arc<Woken>,
}

/// The slots whose socket's readiness changed since [`run`] last looked, and
/// [`run`]'s own waker. Wakers must be `Send + Sync`, hence the mutex; on the
/// per-core runtime only the worker's own thread ever takes it.
#[derive(Debug, Default)]
struct Woken {
    inner: Mutex<WokenInner>,
}

#[derive(Debug, Default)]
struct WokenInner {
    slots: VecDeque<u32>,
    run: Option<Waker>,
}

impl Woken {
    fn lock(&self) -> std::sync::MutexGuard<'_, WokenInner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The waker a parked socket's readiness holds: queues its slot for [`run`].
/// A wake may be stale (the slot's connection resumed and another took its
/// place): [`run`] looks at the socket's readiness again before resuming it.
#[derive(Debug)]
struct SlotWaker {
    slot: u32,
    woken: Arc<Woken>,
}

impl Wake for SlotWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let run = {
            let mut inner = self.woken.lock();
            inner.slots.push_back(self.slot);
            inner.run.take()
        };
        if let Some(run) = run {
            run.wake();
        }
    }
}

impl IdleSet {
    /// An empty set with room for `capacity` connections, reserved up front: the
    /// tables then never move, and (being large) live in their own mappings, so
    /// they cannot pin the heap and keep memory freed by a burst of connections
    /// from returning to the system. Untouched pages cost nothing.
    fn new(woken: Arc<Woken>, capacity: usize) -> IdleSet {
        IdleSet {
            slots: Vec::with_capacity(capacity),
            free: Vec::with_capacity(capacity),
            deadlines: DelayQueue::with_capacity(capacity),
            woken,
        }
    }

    /// Parks `conn` until it becomes readable or `deadline` passes. Input that
    /// is already waiting resumes it at once.
    pub(crate) fn park(&mut self, shared: &Arc<Shared>, conn: Parked, deadline: Instant) {
        let slot = self.free.pop().unwrap_or_else(|| {
            let slot = self.slots.len() as u32;
            let waker = Waker::from(Arc::new(SlotWaker {
                slot,
                woken: Arc::clone(&self.woken),
            }));
            self.slots.push(Slot { conn: None, waker });
            slot
        });
        let entry = &mut self.slots[slot as usize];
        let mut cx = Context::from_waker(&entry.waker);
        if conn.stream.poll_read_ready(&mut cx).is_ready() {
            self.free.push(slot);
            resume(shared, conn);
            return;
        }
        let key = self.deadlines.insert_at(slot, deadline.into());
        entry.conn = Some((conn, key));
    }

    /// The connection in `slot` if its socket has input, an end of input or an
    /// error waiting (a wake may be stale); it leaves the set.
    fn take_ready(&mut self, slot: u32) -> Option<Parked> {
        let entry = self.slots.get_mut(slot as usize)?;
        let (conn, _) = entry.conn.as_ref()?;
        let mut cx = Context::from_waker(&entry.waker);
        if conn.stream.poll_read_ready(&mut cx).is_pending() {
            return None;
        }
        let (conn, key) = entry.conn.take()?;
        self.deadlines.remove(&key);
        self.free.push(slot);
        Some(conn)
    }

    /// Closes the connections whose deadline has passed; the wheel then wakes
    /// `cx` at the next deadline.
    fn expire(&mut self, cx: &mut Context<'_>) {
        while let Poll::Ready(Some(expired)) = self.deadlines.poll_expired(cx) {
            let slot = expired.into_inner();
            if let Some(entry) = self.slots.get_mut(slot as usize)
                && entry.conn.take().is_some()
            {
                self.free.push(slot);
            }
        }
    }

    /// Closes every parked connection (the server is shutting down).
    pub(crate) fn close_all(&mut self) {
        for (slot, entry) in self.slots.iter_mut().enumerate() {
            if entry.conn.take().is_some() {
                self.free.push(slot as u32);
            }
        }
        self.deadlines.clear();
    }
}

/// The worker's parking loop: installs the worker's [`IdleSet`], then resumes
/// parked connections whose socket has input and closes those whose deadline
/// passed, until the worker stops.
pub(crate) async fn run(shared: Arc<Shared>) {
    let woken = Arc::new(Woken::default());
    let capacity = shared.config.limits.max_connections;
    local::with(&shared, |l| {
        l.idle = Some(IdleSet::new(Arc::clone(&woken), capacity));
    });
    let mut batch = VecDeque::new();
    std::future::poll_fn(|cx| {
        {
            let mut inner = woken.lock();
            std::mem::swap(&mut batch, &mut inner.slots);
            if !inner.run.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                inner.run = Some(cx.waker().clone());
            }
        }
        local::with(&shared, |l| {
            let Some(idle) = &mut l.idle else {
                return;
            };
            for slot in batch.drain(..) {
                if let Some(conn) = idle.take_ready(slot) {
                    resume(&shared, conn);
                }
            }
            idle.expire(cx);
        });
        Poll::<()>::Pending
    })
    .await;
}

/// Starts a connection task again for a parked connection.
fn resume(shared: &Arc<Shared>, parked: Parked) {
    let resumed = conn::Origin {
        peer: parked.peer,
        served: parked.served,
        born: parked.born,
        sni: None,
    };
    tokio::spawn(conn::serve(
        parked.stream,
        resumed,
        Arc::clone(shared),
        parked.permit,
        None,
    ));
}
