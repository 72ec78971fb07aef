//! Stoa's load engine: SPECweb99-style load generators over real sockets.
//!
//! Each generator is one emulated user holding one connection at a time (18.92 %
//! of them keep-alive for 5–15 requests), sending the requests of its deck back to
//! back, reading every response in 1460-byte blocks and sleeping off the credit
//! of the emulated 400 kbit/s line (`stoa_web99::metrics::RatedReceive`). Every
//! response is checked the way the kit's client checks it (`check`).
//!
//! Generators run on [`Plan::threads`] load threads, each a current-thread tokio
//! runtime. A generator keeps its own class counters; the rest (operation-time
//! histogram, per-second timeline, error counts) goes to its thread's shard, which
//! only that thread touches. Shards and generators are merged when the run ends,
//! so the hot path takes no lock. [`Live`] carries a few relaxed atomic counters
//! for the progress line.
//!
//! # Layout
//!
//! - [`Plan`]: what to run; [`run`] runs it and returns a [`Tally`]. Both are
//!   serde types: `stoa bench agent` receives a plan and answers with a tally.
//! - `generator.rs`: one generator's loop, the paced receive, keep-alive.
//! - `check.rs`: the per-response checks of `web99.md` §7.1.
//! - [`Latency`]: the operation-time histogram (from `stoa-latency`).
//!
//! # What it does not do
//!
//! Reset the server, audit post.log or render reports: the `stoa bench` command
//! does those around [`run`].

mod check;
mod generator;
mod transport;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use stoa_web99::metrics::{ClassStats, GeneratorStats, class_totals};
use stoa_web99::workload::Targets;

pub use stoa_latency::Latency;
pub use transport::{
    ConnectError, Connector, Handshake, Stream, TlsParameters, TlsPlan, TlsSetupError,
};

/// One measured run (an iteration) of one client.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Plan {
    /// The server.
    pub addr: SocketAddr,
    /// Paths, `Host` and HTTP version.
    pub targets: Targets,
    /// Simultaneous connections (generators).
    pub connections: u32,
    /// Directories of the file set the generators may use (`MAX_DIR`).
    pub directories: u32,
    /// Load before measuring.
    pub warmup: Duration,
    /// The measurement.
    pub run: Duration,
    /// Load after measuring.
    pub rampdown: Duration,
    /// Only static GETs (for servers without the dynamic API).
    pub static_only: bool,
    /// First ads of the expired ranges of the last Reset.
    pub expired: [u32; 2],
    /// Client number (seeds its generators as the kit seeds its clients).
    pub client: u32,
    /// Offset of this client's user ids (`10000 + first_user + generator`).
    pub first_user: u32,
    /// Entries per deck.
    pub deck_size: usize,
    /// Closed loop: no pacing sleep and every connection kept alive, so each
    /// generator sends its next request as soon as a response is in (wrk's model).
    /// A throughput mode for cross-checking; conformance means nothing in it.
    pub closed_loop: bool,
    /// Load threads; each runs its share of the generators on its own event
    /// loop. The machine that runs the plan chooses it (an agent overrides it).
    #[serde(default = "one_thread")]
    pub threads: u32,
    /// HTTPS: how the generators speak TLS. `None` for plain HTTP.
    #[serde(default)]
    pub tls: Option<TlsPlan>,
}

fn one_thread() -> u32 {
    1
}

/// Everything the generators counted.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Tally {
    /// Per-generator counters (measurement phase only).
    pub generators: Vec<GeneratorStats>,
    /// Failed operations by reason (measurement phase only).
    pub errors: BTreeMap<String, u64>,
    /// POSTs sent per class in every phase (for the post.log audit).
    pub posts: [u64; 4],
    /// Operations finished in each second since the start, all phases.
    pub timeline: Vec<u64>,
    /// Times of successful measured operations (pacing included).
    pub latency: Latency,
    /// CPU time (user + system) the load engine's process used during the run,
    /// summed over the machines that ran it.
    pub cpu: Duration,
    /// TLS handshakes in every phase: full, resumed.
    #[serde(default)]
    pub handshakes: [u64; 2],
    /// Each client's class totals (one per [`run`]; merging appends), for the
    /// manager's per-client error check.
    #[serde(default)]
    pub clients: Vec<ClientTotals>,
}

/// One client's counters summed over its generators, by class (the kit's `604`
/// lines): what the manager checks per client (`web99.md` §7.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientTotals {
    /// The client number ([`Plan::client`]).
    pub client: u32,
    /// Its generators' counters summed.
    pub classes: [ClassStats; 4],
}

impl Tally {
    fn timeline_op(&mut self, at: Duration) {
        let second = at.as_secs() as usize;
        if self.timeline.len() <= second {
            self.timeline.resize(second + 1, 0);
        }
        self.timeline[second] += 1;
    }

    /// Adds another tally's counts (generators are appended).
    pub fn merge(&mut self, other: Tally) {
        self.generators.extend(other.generators);
        for (k, v) in other.errors {
            *self.errors.entry(k).or_default() += v;
        }
        for (a, b) in self.posts.iter_mut().zip(other.posts) {
            *a += b;
        }
        if self.timeline.len() < other.timeline.len() {
            self.timeline.resize(other.timeline.len(), 0);
        }
        for (a, b) in self.timeline.iter_mut().zip(other.timeline) {
            *a += b;
        }
        self.latency.merge(&other.latency);
        self.cpu += other.cpu;
        for (a, b) in self.handshakes.iter_mut().zip(other.handshakes) {
            *a += b;
        }
        self.clients.extend(other.clients);
    }
}

/// Counters a progress display reads while the run goes on (relaxed atomics;
/// written once per operation).
#[derive(Debug, Default)]
pub struct Live {
    ops: AtomicU64,
    measured: AtomicU32,
    conforming: AtomicU32,
    stopped: AtomicBool,
}

/// A reading of [`Live`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveSnapshot {
    /// Operations finished since the start, all phases.
    pub ops: u64,
    /// Generators with at least one measured operation.
    pub measured: u32,
    /// Of those, the ones whose bit rate so far is at least 320 kbit/s.
    pub conforming: u32,
}

impl Live {
    /// The counters now.
    pub fn snapshot(&self) -> LiveSnapshot {
        LiveSnapshot {
            ops: self.ops.load(Ordering::Relaxed),
            measured: self.measured.load(Ordering::Relaxed),
            conforming: self.conforming.load(Ordering::Relaxed),
        }
    }

    /// Asks the generators to stop early: each finishes its current operation
    /// (at most its 30 s timeout) and ends.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }
}

impl std::ops::AddAssign for LiveSnapshot {
    fn add_assign(&mut self, other: LiveSnapshot) {
        self.ops += other.ops;
        self.measured += other.measured;
        self.conforming += other.conforming;
    }
}

/// The seed of generator `index` of `client`: the kit seeds each client with
/// `2331 + 256 × client`; each of its generators gets its own stream from there.
pub fn generator_seed(client: u32, index: u32) -> i32 {
    stoa_web99::workload::client_seed(client).wrapping_add(7919_i32.wrapping_mul(index as i32))
}

/// CPU time this process has used so far (all threads, user + system).
pub fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// Runs `plan` to the end of its ramp-down on `plan.threads` load threads of its
/// own, updating `live` as operations finish. The caller's runtime only waits.
pub async fn run(plan: &Plan, live: Arc<Live>) -> Tally {
    let cpu_before = process_cpu();
    let base = Instant::now();
    let clock = generator::Clock {
        base,
        run_start: plan.warmup,
        run_end: plan.warmup + plan.run,
        end: plan.warmup + plan.run + plan.rampdown,
    };
    let threads = plan.threads.clamp(1, plan.connections.max(1));
    let plan = Arc::new(plan.clone());
    let mut total = Tally::default();
    let mut waiting = Vec::new();
    for thread in 0..threads {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (plan, live) = (Arc::clone(&plan), Arc::clone(&live));
        let spawned = std::thread::Builder::new()
            .name(format!("stoa-load-{thread}"))
            .spawn(move || {
                let _ = tx.send(run_thread(&plan, thread, threads, clock, &live));
            });
        match spawned {
            Ok(_) => waiting.push(rx),
            Err(_) => {
                *total
                    .errors
                    .entry("cannot start a load thread".to_owned())
                    .or_default() += 1;
            }
        }
    }
    for rx in waiting {
        if let Ok(tally) = rx.await {
            total.merge(tally);
        }
    }
    total.cpu = process_cpu().saturating_sub(cpu_before);
    total.clients = vec![ClientTotals {
        client: plan.client,
        classes: class_totals(&total.generators),
    }];
    total
}

/// One load thread: generators `thread`, `thread + threads`, … on a
/// current-thread runtime, sharing one shard.
fn run_thread(
    plan: &Arc<Plan>,
    thread: u32,
    threads: u32,
    clock: generator::Clock,
    live: &Arc<Live>,
) -> Tally {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("invariant: a current-thread runtime builds");
    let local = tokio::task::LocalSet::new();
    let shard = Rc::new(RefCell::new(Tally::default()));
    let connector = match Connector::new(plan.tls.as_ref()) {
        Ok(c) => Rc::new(c),
        Err(e) => {
            // Every generator of this thread fails as a whole (the prime checks
            // the same plan before the run, so this is rare).
            let mut tally = Tally::default();
            tally.errors.insert(format!("TLS setup: {e}"), 1);
            let count = (thread..plan.connections).step_by(threads as usize).count();
            tally.generators = vec![GeneratorStats::default(); count];
            return tally;
        }
    };
    let shared = Rc::new(generator::Local::new(plan.directories));
    let generators = local.block_on(&runtime, async {
        let tasks: Vec<_> = (thread..plan.connections)
            .step_by(threads as usize)
            .map(|i| {
                let (plan, shard, live) = (Arc::clone(plan), Rc::clone(&shard), Arc::clone(live));
                let (connector, shared) = (Rc::clone(&connector), Rc::clone(&shared));
                tokio::task::spawn_local(async move {
                    generator::run(&plan, i, clock, &shard, &live, &connector, &shared).await
                })
            })
            .collect();
        let mut generators = Vec::with_capacity(tasks.len());
        for task in tasks {
            if let Ok(stats) = task.await {
                generators.push(stats);
            }
        }
        generators
    });
    let mut tally = shard.take();
    tally.generators = generators;
    tally
}
