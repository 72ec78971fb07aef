//! Parked connections: plain-HTTP connections waiting for a request, without a task.
//!
//! A connection waiting inside a tokio task costs about 1.3 KiB of user-space
//! memory, nearly all of it the task with its future; nginx keeps an idle
//! keep-alive connection in about 500 bytes. So on the per-core runtime a
//! plain-HTTP connection with nothing to do is *parked*: what remains of it is a
//! [`Parked`] record in this worker's [`IdleSet`], with the socket still
//! registered in tokio's reactor (its 256-byte readiness record). Parking and
//! waking make no system call: the set asks the socket's readiness to wake a waker
//! of its own, one per slot of the set, and the worker's parking loop
//! ([`crate::conn::run_parking`]) serves each socket so woken that has input (or
//! an end of input) waiting, on its own stack (`conn::resume_now`: the read comes
//! first, and an end of input closes the socket before any connection state is
//! built). Deadlines (the keep-alive timeout, or the head timeout of a connection
//! that has not sent its first request) live in a min-heap ([`Deadlines`]), with
//! one tokio timer for the earliest; a parked connection whose deadline passes is
//! closed.
//!
//! A connection gets here two ways. Served without a task
//! ([`crate::conn::start_now`] for a new connection whose request came with it,
//! `conn::resume_now` for one woken here), it parks as soon as its answer is
//! written: most connections of the paced benchmark never have a task at all. A
//! connection that had to wait in a task (a response larger than its socket took
//! at once, a request in pieces, a dynamic answer) parks after [`PARK_AFTER`] of
//! silence: until then its task waits for the next request, which costs only the
//! timer it sets anyway for its deadline, whereas parking and waking it cost a
//! task ended and the wake's hop through the parking loop. Parking exists only on
//! the per-core runtime, whose thread-local state is the worker's; the
//! multi-thread model keeps idle connections in their tasks, and so do HTTPS
//! connections (their TLS state would have to be parked too).
//!
//! This module is the set alone, below the connections and the worker's state
//! that holds it ([`crate::local::Local::idle`]): moving connections into it and
//! out of it, and the parking loop, are the connection's (`conn/park.rs`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Wake, Waker};
use std::time::{Duration, Instant};

use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

/// Idle time after which a connection waiting for a request in its task is
/// parked (see the module's notes for the trade).
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
    /// The parked connection.
    conn: Option<Parked>,
    /// Counts the slot's parks: a deadline is this slot's only if it was set
    /// for the park now in it (see [`Deadlines`]).
    parks: u32,
    /// Wakes the parking loop for this slot (see [`SlotWaker`]).
    waker: Waker,
}

/// One worker's parked connections.
#[derive(Debug)]
pub(crate) struct IdleSet {
    slots: Vec<Slot>,
    free: Vec<u32>,
    deadlines: Deadlines,
    woken: Arc<Woken>,
}

/// The parked connections' deadlines: a min-heap of (deadline, slot, park),
/// pruned lazily. A connection that wakes leaves its entry behind (removing it
/// would cost a search); the entry is dropped when it comes to the top, its
/// slot having been parked again since or emptied, or when stale entries
/// outnumber the parked connections by more than [`STALE_SLACK`] (a rebuild,
/// linear, at most once per as many parks as there are connections). Deadlines are mostly set in increasing order
/// (now + the keep-alive timeout), so an insert rarely moves up the heap: a
/// park and its wake cost a push, and later a pop, against the timer wheel's
/// insert and removal (about 2,000 instructions per keep-alive request with
/// `tokio_util`'s `DelayQueue`, `bench/callgrind-keepalive.sh`).
#[derive(Debug)]
struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    /// Wakes the parking loop at the earliest deadline; armed on demand.
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// Where `timer` is set, if it is.
    armed: Option<Instant>,
}

impl Deadlines {
    fn with_capacity(capacity: usize) -> Deadlines {
        Deadlines {
            heap: BinaryHeap::with_capacity(2 * capacity + STALE_SLACK),
            timer: Box::pin(tokio::time::sleep_until(tokio::time::Instant::now())),
            armed: None,
        }
    }
}

/// Stale deadlines tolerated beyond the parked connections' count before the
/// heap is rebuilt.
const STALE_SLACK: usize = 1024;

/// The slots whose socket's readiness changed since the parking loop last
/// looked, and the loop's own waker. Wakers must be `Send + Sync`, hence the
/// mutex; on the per-core runtime only the worker's own thread ever takes it.
#[derive(Debug, Default)]
pub(crate) struct Woken {
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

    /// Moves the slots woken since the last call into `batch` (empty), and
    /// makes `cx`'s waker the one a wake calls: the parking loop's, each time
    /// it is polled.
    pub(crate) fn take_woken(&self, batch: &mut VecDeque<u32>, cx: &Context<'_>) {
        let mut inner = self.lock();
        std::mem::swap(batch, &mut inner.slots);
        if !inner.run.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            inner.run = Some(cx.waker().clone());
        }
    }

    /// Wakes the parking loop, for `slot`, or without one for its timer.
    fn wake_run(&self, slot: Option<u32>) {
        let run = {
            let mut inner = self.lock();
            inner.slots.extend(slot);
            inner.run.take()
        };
        if let Some(run) = run {
            run.wake();
        }
    }
}

/// The waker a parked socket's readiness holds: queues its slot for the parking
/// loop. A wake may be stale (the slot's connection resumed and another took
/// its place): the loop looks at the socket's readiness again before resuming
/// it ([`IdleSet::take_ready`]).
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
        self.woken.wake_run(Some(self.slot));
    }
}

impl IdleSet {
    /// An empty set with room for `capacity` connections, reserved up front: the
    /// tables then never move, and (being large) live in their own mappings, so
    /// they cannot pin the heap and keep memory freed by a burst of connections
    /// from returning to the system. Untouched pages cost nothing.
    pub(crate) fn new(woken: Arc<Woken>, capacity: usize) -> IdleSet {
        IdleSet {
            slots: Vec::with_capacity(capacity),
            free: Vec::with_capacity(capacity),
            deadlines: Deadlines::with_capacity(capacity),
            woken,
        }
    }

    /// Parks `conn` until it becomes readable or `deadline` passes. Input that
    /// is already waiting wakes its slot at once: the parking loop resumes it on
    /// its next turn, not this call, which may come from inside a connection's
    /// loop.
    pub(crate) fn park(&mut self, conn: Parked, deadline: Instant) {
        let slot = self.free.pop().unwrap_or_else(|| {
            let slot = self.slots.len() as u32;
            let waker = Waker::from(Arc::new(SlotWaker {
                slot,
                woken: Arc::clone(&self.woken),
            }));
            self.slots.push(Slot {
                conn: None,
                parks: 0,
                waker,
            });
            slot
        });
        let entry = &mut self.slots[slot as usize];
        entry.parks = entry.parks.wrapping_add(1);
        let mut cx = Context::from_waker(&entry.waker);
        let ready = conn.stream.poll_read_ready(&mut cx).is_ready();
        entry.conn = Some(conn);
        let parks = entry.parks;
        if ready {
            entry.waker.wake_by_ref();
        }
        let heap = &mut self.deadlines.heap;
        heap.push(Reverse((deadline, slot, parks)));
        let parked = self.slots.len() - self.free.len();
        if heap.len() > 2 * parked + STALE_SLACK {
            let slots = &self.slots;
            heap.retain(|Reverse((_, slot, parks))| {
                let entry = &slots[*slot as usize];
                entry.conn.is_some() && entry.parks == *parks
            });
        }
        if self.deadlines.armed.is_none_or(|at| deadline < at) {
            // No timer yet, or one set for later: the parking loop (re)arms it.
            self.deadlines.armed = None;
            self.woken.wake_run(None);
        }
    }

    /// The connection in `slot` if its socket has input, an end of input or an
    /// error waiting (a wake may be stale); it leaves the set (its deadline
    /// stays in the heap, stale).
    pub(crate) fn take_ready(&mut self, slot: u32) -> Option<Parked> {
        let entry = self.slots.get_mut(slot as usize)?;
        let conn = entry.conn.as_ref()?;
        let mut cx = Context::from_waker(&entry.waker);
        if conn.stream.poll_read_ready(&mut cx).is_pending() {
            return None;
        }
        let conn = entry.conn.take()?;
        self.free.push(slot);
        Some(conn)
    }

    /// Closes the connections whose deadline has passed, and sets the timer
    /// to wake `cx` at the next one.
    ///
    /// With no deadline left the timer is disarmed (`armed` cleared), so the
    /// next [`IdleSet::park`] wakes the loop to arm it: left set to the
    /// deadline just passed, it made every later park look covered by a timer
    /// that would never fire again, and a quiet worker never closed another
    /// idle connection (issue 56).
    pub(crate) fn expire(&mut self, cx: &mut Context<'_>) {
        let mut now = Instant::now();
        loop {
            let Some(&Reverse((at, slot, parks))) = self.deadlines.heap.peek() else {
                self.deadlines.armed = None;
                return;
            };
            if at > now {
                let deadlines = &mut self.deadlines;
                if deadlines.armed != Some(at) {
                    deadlines.timer.as_mut().reset(at.into());
                    deadlines.armed = Some(at);
                }
                if deadlines.timer.as_mut().poll(cx).is_pending() {
                    return;
                }
                // The deadline passed meanwhile.
                deadlines.armed = None;
                now = Instant::now();
                continue;
            }
            self.deadlines.heap.pop();
            if let Some(entry) = self.slots.get_mut(slot as usize)
                && entry.parks == parks
                && entry.conn.take().is_some()
            {
                self.free.push(slot);
            }
        }
    }

    /// Closes every parked connection (the server is shutting down), each after
    /// `before_close` has had its socket: the caller reads what it has received
    /// there, since a request that came in as the drain began must not make the
    /// close a reset, which would destroy the last answer if the kernel still
    /// holds part of it.
    pub(crate) fn close_all(&mut self, mut before_close: impl FnMut(&TcpStream)) {
        for (slot, entry) in self.slots.iter_mut().enumerate() {
            if let Some(parked) = entry.conn.take() {
                before_close(&parked.stream);
                self.free.push(slot as u32);
            }
        }
        self.deadlines.heap.clear();
    }
}
