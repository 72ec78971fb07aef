//! Stoa's load engine: SPECweb99-style load generators over real sockets.
//!
//! Each generator is one emulated user holding one connection at a time (18.92 %
//! of them keep-alive for 5–15 requests), sending the requests of its deck back to
//! back, reading every response in 1460-byte blocks and sleeping off the credit
//! of the emulated 400 kbit/s line (`stoa_web99::metrics::RatedReceive`). Every
//! response is checked the way the kit's client checks it (`check`). Counters are
//! per generator and merged at the end, so the hot path takes no lock.
//!
//! # Layout
//!
//! - [`Plan`]: what to run; [`run`] runs it and returns a [`Tally`].
//! - `generator.rs`: one generator's loop, the paced receive, keep-alive.
//! - `check.rs`: the per-response checks of `web99.md` §7.1.
//!
//! # What it does not do
//!
//! Reset the server, audit post.log or render reports: the `stoa bench` command
//! does those around [`run`].

mod check;
mod generator;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use stoa_web99::metrics::GeneratorStats;
use stoa_web99::workload::Targets;

/// One measured run (an iteration) of one client.
#[derive(Debug, Clone)]
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
}

/// Everything the generators counted.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// Per-generator counters (measurement phase only).
    pub generators: Vec<GeneratorStats>,
    /// Failed operations by reason (measurement phase only).
    pub errors: BTreeMap<String, u64>,
    /// POSTs sent per class in every phase (for the post.log audit).
    pub posts: [u64; 4],
    /// Operations finished in each second since the start, all phases.
    pub timeline: Vec<u64>,
    /// Times of successful measured operations, ms (pacing included).
    pub latency_ms: Vec<f32>,
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
        self.latency_ms.extend(other.latency_ms);
    }
}

/// The seed of generator `index` of `client`: the kit seeds each client with
/// `2331 + 256 × client`; each of its generators gets its own stream from there.
pub fn generator_seed(client: u32, index: u32) -> i32 {
    stoa_web99::workload::client_seed(client).wrapping_add(7919_i32.wrapping_mul(index as i32))
}

/// Runs `plan` to the end of its ramp-down on the current tokio runtime.
pub async fn run(plan: &Plan) -> Tally {
    let base = Instant::now();
    let clock = generator::Clock {
        base,
        run_start: plan.warmup,
        run_end: plan.warmup + plan.run,
        end: plan.warmup + plan.run + plan.rampdown,
    };
    let plan = std::sync::Arc::new(plan.clone());
    let tasks: Vec<_> = (0..plan.connections)
        .map(|i| {
            let plan = std::sync::Arc::clone(&plan);
            tokio::spawn(async move { generator::run(&plan, i, clock).await })
        })
        .collect();
    let mut total = Tally::default();
    for task in tasks {
        if let Ok(tally) = task.await {
            total.merge(tally);
        }
    }
    total
}
