//! The one server skeleton every Stoa protocol server runs on: listeners bound once
//! per worker, an accept loop per listener behind a per-worker connection
//! semaphore, and a drain on shutdown.
//!
//! A protocol server is a [`Handler`]: it says what to do with an accepted
//! connection (spawn its session) and how to drain (what counts as work in flight,
//! how long to wait). Everything else is here, once:
//!
//! 1. [`Listeners::bind`] binds each address on every worker (`SO_REUSEPORT`, port 0
//!    resolved once) and tags it with the handler's [`Handler::Kind`] (MX or
//!    submission, POP3 or POP3S, HTTP or HTTPS).
//! 2. [`run`] starts the workers ([`RuntimeModel::PerCore`]: one thread and one
//!    current-thread runtime each; [`RuntimeModel::MultiThread`]: one work-stealing
//!    runtime sharing every listener, kept for measurement). Each worker calls
//!    [`Handler::start_worker`], then accepts: a connection slot first (beyond
//!    [`Handler::max_connections`] connections wait in the kernel's backlog, costing
//!    nothing here), then [`accept`](crate::accept::accept) with backoff, then
//!    [`Handler::accept`].
//! 3. On shutdown each worker stops accepting, calls [`Handler::begin_drain`],
//!    waits until [`Handler::in_flight`] is zero or [`Handler::grace`] is over, and
//!    calls [`Handler::stop_worker`]. A hand-over ([`crate::shutdown`]: a reload's
//!    servers took the listeners) comes before that: the worker stops accepting,
//!    calls [`Handler::begin_hand_over`] and waits until its last connection has
//!    ended (or the stop comes), then drains as on shutdown, with nothing left.
//!
//! [`ClientCounts`] is the per-client-address connection count the mail servers
//! share across workers; [`Service`] is what a bound server looks like to the
//! binary (its addresses, and run until shutdown).

mod clients;
mod service;

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::listener::Pool;
use crate::shutdown::Shutdown;

pub use clients::{ClientCounts, ClientSlot};
pub use service::{BoxError, Endpoint, Service};

/// How often a draining worker looks at [`Handler::in_flight`]: short enough that
/// a quiet server exits at once, long enough to cost nothing.
const DRAIN_POLL: Duration = Duration::from_millis(10);

/// How long the multi-thread runtime waits for its tasks once the drain is over.
const RUNTIME_SHUTDOWN: Duration = Duration::from_secs(1);

/// How the event loops are arranged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeModel {
    /// One thread per worker, each with a current-thread runtime and its own
    /// `SO_REUSEPORT` listener; connections never change threads.
    PerCore,
    /// One tokio multi-thread (work-stealing) runtime with `workers` threads sharing
    /// the listeners. Kept for measurement only.
    MultiThread,
}

/// Where a worker runs: which of the per-core workers, or the one multi-thread
/// runtime standing for all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerScope {
    /// Per-core worker number `index`, on its own thread.
    PerCore {
        /// The worker's number, from 0.
        index: usize,
    },
    /// The multi-thread runtime, doing the work of `workers` workers.
    Shared {
        /// How many workers it stands for: per-worker limits are multiplied by it.
        workers: usize,
    },
}

impl WorkerScope {
    /// How many workers' worth of connections this worker takes.
    pub fn scale(self) -> usize {
        match self {
            WorkerScope::PerCore { .. } => 1,
            WorkerScope::Shared { workers } => workers.max(1),
        }
    }
}

/// One accepted connection, handed to [`Handler::accept`].
#[derive(Debug)]
pub struct Accepted<K> {
    /// The connection: non-blocking, and not registered with tokio's reactor
    /// yet. A handler that serves it in a task registers it
    /// (`tokio::net::TcpStream::from_std`); one that can answer it at once may
    /// close it without ever registering it, which saves the `epoll_ctl` calls
    /// that add it and, at its close, remove it.
    pub stream: std::net::TcpStream,
    /// The client's address.
    pub peer: SocketAddr,
    /// What the listener it came from is for.
    pub kind: K,
    /// The worker's connection slot; drop it when the connection ends.
    pub permit: OwnedSemaphorePermit,
    /// The server's shutdown signal.
    pub shutdown: Shutdown,
}

/// A protocol server on the skeleton: what to do with each connection and how to
/// drain. Implemented by each server's shared state.
pub trait Handler: Send + Sync + Sized + 'static {
    /// What distinguishes one listener from another (MX or submission, plain or
    /// TLS); cloned for every connection, so keep it cheap.
    type Kind: Clone + Send + Sync + 'static;
    /// Per-worker state (TLS handshake slots, the worker's periodic tasks), made on
    /// the worker's thread by [`Handler::start_worker`].
    type Worker: Send + Sync + 'static;

    /// The protocol's name in thread names and log lines (`web`, `SMTP`, `POP3`).
    const NAME: &'static str;

    /// Connections one worker holds at once.
    fn max_connections(&self) -> usize;
    /// How long a drain waits for [`Handler::in_flight`] to reach zero.
    fn grace(&self) -> Duration;
    /// Connections the drain waits for (all open ones, or those mid-request).
    fn in_flight(&self) -> usize;

    /// Called on each worker before it accepts.
    fn start_worker(self: &Arc<Self>, scope: WorkerScope) -> Self::Worker;
    /// Starts serving one connection (typically `tokio::spawn`s its session). Runs
    /// in the accept loop: keep it short.
    fn accept(self: &Arc<Self>, worker: &Arc<Self::Worker>, conn: Accepted<Self::Kind>);
    /// A hand-over has started (a reload's servers took the listeners): called on
    /// each worker after it stopped accepting. Its connections carry on until they
    /// end or the stop comes; a server may end them sooner where its protocol
    /// allows it cleanly (the web server closes after the next response).
    fn begin_hand_over(&self, _worker: &Self::Worker) {}
    /// The stop has started: called on each worker once it no longer accepts.
    fn begin_drain(&self, _worker: &Self::Worker) {}
    /// The drain is over: called on each worker last.
    fn stop_worker(&self, _worker: &Self::Worker) {}
    /// Logs that the grace ran out with `left` connections still in flight.
    fn grace_over(&self, left: usize) {
        tracing::warn!(
            "shutdown grace over; dropping {left} {} connections",
            Self::NAME
        );
    }
    /// Multi-thread runtime only: a runtime thread is about to sleep.
    fn on_thread_park(&self) {}
    /// Multi-thread runtime only: a runtime thread is ending.
    fn on_thread_stop(&self) {}
}

/// Listening sockets bound on every worker, each tagged with its kind.
#[derive(Debug)]
pub struct Listeners<K> {
    /// One group per worker, one listener per address in each.
    groups: Vec<Vec<(std::net::TcpListener, K)>>,
    /// Where the sockets come from.
    pool: Pool,
}

impl<K: Clone> Listeners<K> {
    /// No listeners yet, for `workers` workers (at least one); each bind is fresh.
    pub fn new(workers: usize) -> Listeners<K> {
        Listeners::with_pool(workers, Pool::default())
    }

    /// [`Listeners::new`], taking sockets from `pool`: the ones of the servers a
    /// reload replaces, where the address is the same.
    pub fn with_pool(workers: usize, pool: Pool) -> Listeners<K> {
        Listeners {
            groups: (0..workers.max(1)).map(|_| Vec::new()).collect(),
            pool,
        }
    }

    /// Binds `addr` once per worker ([`Pool::bind_group`]); returns the bound
    /// address (port 0 resolved).
    pub fn bind(&mut self, addr: SocketAddr, kind: K) -> io::Result<SocketAddr> {
        self.bind_with(addr, kind, |_| Ok(()))
    }

    /// [`Listeners::bind`], then `configure` on each socket of the group (a
    /// socket option the service wants), fresh or taken over from the pool.
    pub fn bind_with(
        &mut self,
        addr: SocketAddr,
        kind: K,
        configure: impl Fn(&std::net::TcpListener) -> io::Result<()>,
    ) -> io::Result<SocketAddr> {
        let group =
            self.pool
                .bind_group(addr, self.groups.len(), crate::listener::DEFAULT_BACKLOG)?;
        for listener in &group {
            configure(listener)?;
        }
        let bound = group
            .first()
            .map_or(Ok(addr), std::net::TcpListener::local_addr)?;
        for (worker, listener) in group.into_iter().enumerate() {
            self.groups[worker].push((listener, kind.clone()));
        }
        Ok(bound)
    }

    /// Binds each of `addrs` ([`Listeners::bind`]); returns the bound addresses in
    /// order, or the first address that could not be bound and why.
    pub fn bind_all(
        &mut self,
        addrs: &[SocketAddr],
        kind: &K,
    ) -> Result<Vec<SocketAddr>, (SocketAddr, io::Error)> {
        self.bind_all_with(addrs, kind, |_| Ok(()))
    }

    /// [`Listeners::bind_all`], with `configure` on every socket
    /// ([`Listeners::bind_with`]).
    pub fn bind_all_with(
        &mut self,
        addrs: &[SocketAddr],
        kind: &K,
        configure: impl Fn(&std::net::TcpListener) -> io::Result<()>,
    ) -> Result<Vec<SocketAddr>, (SocketAddr, io::Error)> {
        addrs
            .iter()
            .map(|&addr| {
                self.bind_with(addr, kind.clone(), &configure)
                    .map_err(|e| (addr, e))
            })
            .collect()
    }

    /// How many workers the listeners are bound for.
    pub fn workers(&self) -> usize {
        self.groups.len()
    }
}

/// Serves `handler` on `listeners` until `shutdown` fires, then drains (module
/// docs). Blocks the calling thread until every worker has finished.
pub fn run<H: Handler>(
    handler: &Arc<H>,
    listeners: Listeners<H::Kind>,
    model: RuntimeModel,
    shutdown: Shutdown,
) -> io::Result<()> {
    match model {
        RuntimeModel::PerCore => run_per_core(handler, listeners, shutdown),
        RuntimeModel::MultiThread => run_multi_thread(handler, listeners, shutdown),
    }
}

fn run_per_core<H: Handler>(
    handler: &Arc<H>,
    listeners: Listeners<H::Kind>,
    shutdown: Shutdown,
) -> io::Result<()> {
    let count = listeners.groups.len();
    // Each worker takes its own group, once, on its own thread.
    let groups = Arc::new(Mutex::new(
        listeners.groups.into_iter().map(Some).collect::<Vec<_>>(),
    ));
    let handler = Arc::clone(handler);
    // The workers still handing over their connections (see `serve_worker`).
    let workers = Arc::new(AtomicUsize::new(count));
    let name = format!("stoa-{}", H::NAME.to_ascii_lowercase());
    let handles = crate::worker::spawn(count, &name, move |index| {
        let group = groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(index)
            .and_then(Option::take)
            .unwrap_or_default();
        let (handler, ends) = (
            Arc::clone(&handler),
            (shutdown.clone(), Arc::clone(&workers)),
        );
        async move { serve_worker(handler, group, WorkerScope::PerCore { index }, ends).await }
    })?;
    for h in handles {
        if h.join().is_err() {
            tracing::error!("a {} worker panicked", H::NAME);
        }
    }
    Ok(())
}

fn run_multi_thread<H: Handler>(
    handler: &Arc<H>,
    listeners: Listeners<H::Kind>,
    shutdown: Shutdown,
) -> io::Result<()> {
    let workers = listeners.groups.len();
    let (park, stop) = (Arc::clone(handler), Arc::clone(handler));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name(format!("stoa-{}-mt", H::NAME.to_ascii_lowercase()))
        .enable_all()
        .on_thread_park(move || park.on_thread_park())
        .on_thread_stop(move || stop.on_thread_stop())
        .build()?;
    let group = listeners.groups.into_iter().flatten().collect();
    let scope = WorkerScope::Shared { workers };
    let ends = (shutdown, Arc::new(AtomicUsize::new(1)));
    runtime.block_on(serve_worker(Arc::clone(handler), group, scope, ends));
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    Ok(())
}

/// One worker: accept on `group` until shutdown, then drain.
async fn serve_worker<H: Handler>(
    handler: Arc<H>,
    group: Vec<(std::net::TcpListener, H::Kind)>,
    scope: WorkerScope,
    (mut shutdown, handing_over): (Shutdown, Arc<AtomicUsize>),
) {
    let worker = Arc::new(handler.start_worker(scope));
    let slots = handler.max_connections().max(1) * scope.scale();
    let limit = Arc::new(Semaphore::new(slots));
    let accepting = crate::metrics::register_limit(H::NAME, slots, Arc::downgrade(&limit));
    let mut accepts = Vec::new();
    for (listener, kind) in group {
        // Not `TcpListener::from_std`: tokio's listener registers every socket
        // it accepts; the raw accept (`crate::accept`) leaves that to the handler.
        // The safe constructor is deprecated for file descriptors that could be
        // closed under it; an owned `std` listener cannot be.
        #[allow(deprecated)]
        let registered = AsyncFd::with_interest(listener, Interest::READABLE);
        match registered {
            Ok(listener) => accepts.push(tokio::spawn(accept_loop(
                listener,
                kind,
                Arc::clone(&handler),
                Arc::clone(&worker),
                (Arc::clone(&limit), Arc::clone(&accepting)),
                shutdown.clone(),
            ))),
            Err(e) => tracing::error!("cannot register a {} listener: {e}", H::NAME),
        }
    }
    shutdown.accepting_ends().await;
    for a in &accepts {
        a.abort();
    }
    if !shutdown.is_triggered() {
        // A hand-over: every connection ends on its own, unless the stop comes
        // first. Each holds a slot, so all slots free means none is left.
        handler.begin_hand_over(&worker);
        let mut poll = tokio::time::interval(DRAIN_POLL);
        while limit.available_permits() < slots && !shutdown.is_triggered() {
            poll.tick().await;
        }
        // What a drain does is server-wide (the web server's answers all close):
        // it waits until no worker has a connection left.
        handing_over.fetch_sub(1, Ordering::AcqRel);
        while handing_over.load(Ordering::Acquire) > 0 && !shutdown.is_triggered() {
            poll.tick().await;
        }
    }
    handler.begin_drain(&worker);
    drain(&*handler).await;
    handler.stop_worker(&worker);
}

async fn accept_loop<H: Handler>(
    listener: AsyncFd<std::net::TcpListener>,
    kind: H::Kind,
    handler: Arc<H>,
    worker: Arc<H::Worker>,
    (limit, accepting): (Arc<Semaphore>, Arc<crate::metrics::Accepting>),
    shutdown: Shutdown,
) {
    loop {
        // A free slot before accepting: beyond the limit, connections wait in the
        // kernel's backlog instead of costing memory here.
        let Ok(permit) = Arc::clone(&limit).acquire_owned().await else {
            return;
        };
        // Not a connection while it waits (`metrics::connections_open`).
        let wait = accepting.wait();
        let (stream, peer) = crate::accept::accept(&listener).await;
        drop(wait);
        if shutdown.accepting_has_ended() {
            // The worker has not aborted this loop yet. A connection taken from
            // the queue now ends as the listener's queued ones do when it closes:
            // not served. (A handler may answer at once, before the worker has
            // told it the server is draining.)
            return;
        }
        let conn = Accepted {
            stream,
            peer,
            kind: kind.clone(),
            permit,
            shutdown: shutdown.clone(),
        };
        handler.accept(&worker, conn);
    }
}

/// Waits until nothing is in flight, or the grace period ends.
async fn drain<H: Handler>(handler: &H) {
    let deadline = Instant::now() + handler.grace();
    let mut poll = tokio::time::interval(DRAIN_POLL);
    while handler.in_flight() > 0 && Instant::now() < deadline {
        poll.tick().await;
    }
    let left = handler.in_flight();
    if left > 0 {
        handler.grace_over(left);
    }
}

#[cfg(test)]
mod tests;
