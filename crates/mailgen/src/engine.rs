//! The load of one level: four Poisson streams over the random and retry pools,
//! delivery probes, and the measurement window (`mail2001.md` §1.3–§1.10, §2.2,
//! §2.7).
//!
//! An [`Engine`] lives for a whole run, so the retry pool's "last checked" times
//! and the mailboxes in use carry over from one level to the next, as they would
//! on one continuous run. [`Engine::run_level`] offers the load of one level:
//!
//! - **Streams**: user SMTP, remote-MTA SMTP, initial POP checks and repeated POP
//!   checks, each its own Poisson process (exponential gaps at the level's rate),
//!   open-loop: a slow server does not slow the schedule. A session that starts
//!   more than [`LATE_START`] after its scheduled time counts as a late start
//!   (the harness fell behind, not the server).
//! - **Sessions**: one message per SMTP session (recipients from
//!   `MSG_RECP_DISTRIBUTION`, each local with 10 % in user mail, all local in
//!   remote-MTA mail; sizes from `MSG_SIZE_DISTRIBUTION`); 90 % of user sessions,
//!   SMTP and POP, at modem speed; remote-MTA sessions at full speed. POP checks
//!   retrieve and delete everything.
//! - **Pools**: 7.5 % of the accounts, chosen at random per run, form the retry
//!   pool; initial checks pick random-pool mailboxes, repeated checks pick a
//!   retry-pool mailbox not checked for 300 s. A mailbox in a POP session or
//!   under a probe is never picked by another POP session.
//! - **Probes**: a share of SMTP sessions ([`Workload::probe_share`]) carry a
//!   tagged message to a reserved mailbox (always at full speed: a 1 MB upload
//!   at modem speed alone would take 171 s), which is then polled by POP every
//!   [`PROBE_POLL`] until the message appears (delivery time from the start of
//!   the SMTP session) or [`PROBE_GIVE_UP`] passes (lost).
//! - **Window**: sessions starting in the measurement window are judged; load goes
//!   on through the cool-down, then the level waits (at most its drain limit) for
//!   the judged sessions and probes to end; sessions still running are aborted
//!   and counted as unfinished.
//!
//! # Parts of a run
//!
//! One run can be offered by several engines, each its [`Part`]: the whole of it
//! in one process ([`Part::Whole`]), or, for `stoa bench mail --agents`, one
//! share per load generator ([`Part::Agent`]) plus the prime's delivery probes
//! ([`Part::Probes`]). The split keeps the single process's load and its
//! per-mailbox behaviour (`mail2001.md` §2.7: "λ divided by the number of
//! generators"):
//!
//! - **Probes are thinned out of the SMTP streams.** In one process a share
//!   `p` of SMTP sessions carries a probe. With agents, the prime offers each
//!   SMTP stream at `p × λ`, every session a probe, and the `n` agents offer
//!   it at `(1 − p) × λ / n` without probes: by the thinning property of a
//!   Poisson process the sum is the same stream. Sending and polling a probe
//!   in one process keeps its delivery time on one clock.
//! - **Mailboxes are shared out, not the rate alone.** Each agent keeps a
//!   disjoint share of the random and the retry pool (the same pools from the
//!   run's seed, every `n`-th mailbox, `Pools::keep_share`) and offers the
//!   POP streams at the rate times its share of the pool, so each mailbox is
//!   checked as often as in one process, only ever by one agent, and the retry
//!   pool's "last checked" times live with the only agent that checks them.
//! - **Probe mailboxes are reserved on the agent that owns them.** The prime
//!   asks an agent (chosen by the size of its random-pool share) for a free
//!   mailbox through [`ProbeMailboxes`]; the agent marks it busy
//!   ([`Engine::reserve_for_probe`]) until the prime releases it, so a probed
//!   mailbox is never POP-checked and every random-pool mailbox can be probed,
//!   as in one process.
//! - **Each part has its own seeds and message numbers**, so agents' schedules
//!   are independent and every message's tag is unique in the run.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use fastrand::Rng;
use serde::{Deserialize, Serialize};
use stoa_mail2001::{Rates, disconnect, dist};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::access::Access;
use crate::message::{Message, Tag};
use crate::pace::Pace;
use crate::pools::Pools;
use crate::pop_client::{PopPlan, ProbeResult};
use crate::qos::DELIVERY_LIMIT_SECS;
use crate::receipts::Receipts;
use crate::sink::SinkMessage;
use crate::smtp_client::{SmtpPlan, smtp_session};
use crate::tally::LevelTally;

/// A session starting later than this after its scheduled time is a late start.
pub const LATE_START: Duration = Duration::from_secs(1);
/// How often a delivery probe polls its mailbox.
pub const PROBE_POLL: Duration = Duration::from_secs(1);
/// When a probe stops polling and counts its message as lost: twice the 60 s limit,
/// so the delivery-time chart shows how late the late ones were.
pub const PROBE_GIVE_UP: Duration = Duration::from_secs(120);
/// The minimum time between two checks of one retry-pool mailbox (§1.5).
pub const RETRY_INTERVAL: Duration = Duration::from_secs(300);
/// How long after the end of a level's measurement window the sink's receipts
/// still count for Remote Message Delivery: the delivery-time limit (§2.2,
/// §2.3: "within the test phase", which a message sent in the window's last
/// second could not meet otherwise).
pub const REMOTE_GRACE: Duration = Duration::from_secs(DELIVERY_LIMIT_SECS as u64);

/// The server under test and the accounts: fixed for a whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    /// The SMTP service.
    pub smtp: SocketAddr,
    /// The service the mailboxes are read from: POP3, or IMAP with
    /// [`Access::Imap`].
    pub read_addr: SocketAddr,
    /// The protocol the mailboxes are read with.
    #[serde(default)]
    pub access: Access,
    /// The local domain: accounts are `user1@DOMAIN` … `userN@DOMAIN`.
    pub domain: String,
    /// The remote domain, which the server relays to the sink.
    pub remote_domain: String,
    /// Accounts in the store (N).
    pub users: u32,
    /// Accounts in the retry pool, drawn per run (§1.5): the kit's 7.5 % of
    /// the store ([`Workload::kit_retry_pool`]), or more for a store declared
    /// smaller than the rate needs, so that its re-check interval still holds.
    pub retry_pool: u32,
    /// Every account's password.
    pub password: String,
    /// How long a reply may take before it is an error (60 s, §2.4).
    pub reply_timeout: Duration,
    /// Share of SMTP sessions carrying a delivery probe (0.01 in the white paper).
    pub probe_share: f64,
    /// The run's seed.
    pub seed: u64,
    /// The run's id, in every message's tag.
    pub run_id: u32,
}

impl Workload {
    /// The kit's retry pool for a store of `users` accounts: 7.5 % of them.
    pub fn kit_retry_pool(users: u32) -> u32 {
        (f64::from(users) * stoa_mail2001::profile::RETRY_POOL_SHARE).round() as u32
    }

    /// The address (and POP login) of account `n`.
    pub fn account(&self, n: u32) -> String {
        format!("user{n}@{}", self.domain)
    }

    fn pop_plan(&self, user: u32, pace: Pace) -> PopPlan {
        PopPlan {
            addr: self.read_addr,
            user: self.account(user),
            password: self.password.clone(),
            pace,
            reply_timeout: self.reply_timeout,
            drop: None,
        }
    }
}

/// One level's plan.
#[derive(Debug, Clone, Copy)]
pub struct LevelPlan {
    /// The level's index in the run (in the messages' tags).
    pub index: u8,
    /// The stream rates.
    pub rates: Rates,
    /// Load before the window.
    pub warmup: Duration,
    /// The measurement window.
    pub run: Duration,
    /// Load after the window.
    pub cooldown: Duration,
    /// The longest wait after the cool-down for the window's sessions and probes.
    pub drain_limit: Duration,
}

/// Where a level is, for the progress line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Load, not measured.
    Warmup,
    /// The measurement window.
    Measure,
    /// Load after the window.
    Cooldown,
    /// No new sessions; waiting for the window's sessions and probes.
    Drain,
    /// Over.
    Done,
}

/// Live counters for the progress line (relaxed atomics).
#[derive(Debug, Default)]
pub struct Live {
    /// Sessions and probes running.
    pub active: AtomicU64,
    /// Sessions started in this level.
    pub started: AtomicU64,
    /// Sessions that failed in this level.
    pub failed: AtomicU64,
    /// Judged sessions (and probes) not yet awaited during the drain.
    pub pending: AtomicU64,
    phase: AtomicU64,
}

impl Live {
    /// The current phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Relaxed) {
            0 => Phase::Warmup,
            1 => Phase::Measure,
            2 => Phase::Cooldown,
            3 => Phase::Drain,
            _ => Phase::Done,
        }
    }

    fn set_phase(&self, p: Phase) {
        self.phase.store(p as u64, Ordering::Relaxed);
    }
}

/// What one [`Live`] says, for an agent's progress messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveCounts {
    /// Sessions and probes running.
    pub active: u64,
    /// Sessions started in this level.
    pub started: u64,
    /// Sessions that failed in this level.
    pub failed: u64,
    /// Judged sessions (and probes) not yet awaited during the drain.
    pub pending: u64,
}

impl std::ops::AddAssign for LiveCounts {
    fn add_assign(&mut self, o: LiveCounts) {
        self.active += o.active;
        self.started += o.started;
        self.failed += o.failed;
        self.pending += o.pending;
    }
}

impl Live {
    /// The counters now.
    pub fn counts(&self) -> LiveCounts {
        LiveCounts {
            active: self.active.load(Ordering::Relaxed),
            started: self.started.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            pending: self.pending.load(Ordering::Relaxed),
        }
    }
}

/// Load generator `index` (from 0) of `agents`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// This generator's number, from 0.
    pub index: u32,
    /// Generators in the run (at least 1).
    pub agents: u32,
}

/// Where the prime's probes get their mailboxes in an agents run: a free
/// random-pool mailbox of some agent, kept from that agent's POP sessions
/// until released.
pub trait ProbeMailboxes: Send + Sync {
    /// A free random-pool mailbox, now reserved; `None` when none could be had
    /// (the session then goes without a probe, as in one process).
    fn take(&self) -> Pin<Box<dyn Future<Output = Option<u32>> + Send + '_>>;
    /// Gives back a mailbox `take` returned. Must not block: it runs when a
    /// probe's task ends or is aborted.
    fn release(&self, user: u32);
}

/// Which part of a run's load an engine offers (the module docs: Parts of a
/// run).
#[derive(Clone)]
pub enum Part {
    /// All of it, in this process: the four streams over every account, and
    /// probes on a share of the SMTP sessions.
    Whole,
    /// One load generator's share: the SMTP streams at `(1 − probe share) /
    /// agents` of their rate without probes, the POP streams over its share of
    /// the pools at its share of their rate.
    Agent(Share),
    /// The prime's: only the probe sessions (each SMTP stream at the probe
    /// share of its rate, every session a probe), their mailboxes from the
    /// agents.
    Probes(Arc<dyn ProbeMailboxes>),
}

impl std::fmt::Debug for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Part::Whole => f.write_str("Whole"),
            Part::Agent(s) => f.debug_tuple("Agent").field(s).finish(),
            Part::Probes(_) => f.write_str("Probes"),
        }
    }
}

/// Where a session's mailbox comes from and goes back to.
#[derive(Clone)]
enum Mailboxes {
    /// This engine's pools.
    Local(Arc<Mutex<Pools>>),
    /// The agents' pools, through the prime.
    Remote(Arc<dyn ProbeMailboxes>),
}

impl Mailboxes {
    /// A free random-pool mailbox, held until the guard drops.
    async fn take_random(&self, rng: &mut Rng) -> Option<Held> {
        let user = match self {
            Mailboxes::Local(pools) => lock(pools).take_random(rng),
            Mailboxes::Remote(remote) => remote.take().await,
        }?;
        Some(Held {
            from: self.clone(),
            user,
        })
    }
}

/// A mailbox in use by a POP session or a probe: released when dropped, also
/// when the session's task is aborted at the end of a level.
struct Held {
    from: Mailboxes,
    user: u32,
}

impl Drop for Held {
    fn drop(&mut self) {
        match &self.from {
            Mailboxes::Local(pools) => lock(pools).release(self.user),
            Mailboxes::Remote(remote) => remote.release(self.user),
        }
    }
}

/// A level's load offered, its remote mail not yet counted at the sink
/// ([`Engine::count_remote`]).
#[derive(Debug)]
pub struct Offered {
    /// What the window measured; add the other parts' tallies before counting.
    pub tally: LevelTally,
    level: u8,
    receipts_until: Instant,
}

/// Which stream a session belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    UserSmtp,
    RemoteSmtp,
    InitialPop,
    RepeatedPop,
}

/// The harness's load engine for one run.
#[derive(Debug)]
pub struct Engine {
    workload: Arc<Workload>,
    part: Part,
    pools: Arc<Mutex<Pools>>,
    /// This engine's share of the random and of the retry pool (1 for the
    /// whole run): the factors of its POP streams' rates.
    pool_share: (f64, f64),
    /// Draws the mailboxes an agent reserves for the prime's probes.
    picker: Mutex<Rng>,
    sink: Arc<Mutex<Receipts>>,
    /// Bumped on every sink receipt, so a level can wait for its remote mail.
    sink_changed: Arc<watch::Sender<u64>>,
    seq: Arc<AtomicU64>,
}

/// Locks a mutex, ignoring poisoning (the data stays consistent: every critical
/// section is a few assignments).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Engine {
    /// An engine for the whole of `workload`; the retry pool is drawn from its
    /// seed.
    pub fn new(workload: Workload) -> Engine {
        Engine::with_part(workload, Part::Whole)
    }

    /// An engine for `part` of `workload`'s load. Every part draws the same
    /// pools from the seed; an agent keeps its share of them.
    pub fn with_part(workload: Workload, part: Part) -> Engine {
        let mut rng = Rng::with_seed(workload.seed ^ 0x7e7a_9001);
        let mut pools = Pools::new(workload.users, workload.retry_pool, &mut rng);
        let mut pool_share = (1.0, 1.0);
        let mut seq = 0;
        if let Part::Agent(share) = &part {
            let (random, retry) = (pools.random_len(), pools.retry_len());
            pools.keep_share(share.index, share.agents);
            let ratio = |mine: usize, all: usize| {
                if all == 0 {
                    0.0
                } else {
                    mine as f64 / all as f64
                }
            };
            pool_share = (
                ratio(pools.random_len(), random),
                ratio(pools.retry_len(), retry),
            );
            // Message numbers of agent k start at (k + 1) << 40: unique in the run.
            seq = (u64::from(share.index) + 1) << 40;
        }
        let picker = Rng::with_seed(workload.seed ^ part_salt(&part) ^ 0x009b_0be5);
        Engine {
            workload: Arc::new(workload),
            part,
            pools: Arc::new(Mutex::new(pools)),
            pool_share,
            picker: Mutex::new(picker),
            sink: Arc::new(Mutex::new(Receipts::default())),
            sink_changed: Arc::new(watch::Sender::new(0)),
            seq: Arc::new(AtomicU64::new(seq)),
        }
    }

    /// The part of the run this engine offers.
    pub fn part(&self) -> &Part {
        &self.part
    }

    /// The rates at which this engine offers the four streams of a level at
    /// `rates` (user SMTP, remote SMTP, initial POP, repeated POP), and the
    /// chance that one of its SMTP sessions carries a probe.
    pub fn part_rates(&self, rates: &Rates) -> ([f64; 4], f64) {
        let p = self.workload.probe_share.clamp(0.0, 1.0);
        let (smtp, initial, repeated, chance) = match &self.part {
            Part::Whole => (1.0, 1.0, 1.0, p),
            Part::Agent(s) => (
                (1.0 - p) / f64::from(s.agents.max(1)),
                self.pool_share.0,
                self.pool_share.1,
                0.0,
            ),
            Part::Probes(_) => (p, 0.0, 0.0, 1.0),
        };
        (
            [
                rates.user_smtp * smtp,
                rates.remote_smtp * smtp,
                rates.initial_pop * initial,
                rates.repeated_pop * repeated,
            ],
            chance,
        )
    }

    /// An agent's side of the prime's probes: a free mailbox of this engine's
    /// random-pool share, marked busy until [`Engine::release_probe`].
    pub fn reserve_for_probe(&self) -> Option<u32> {
        let mut rng = lock(&self.picker);
        lock(&self.pools).take_random(&mut rng)
    }

    /// Gives back a mailbox [`Engine::reserve_for_probe`] returned.
    pub fn release_probe(&self, user: u32) {
        lock(&self.pools).release(user);
    }

    /// Mailboxes in this engine's share of the random and of the retry pool.
    pub fn pool_sizes(&self) -> (usize, usize) {
        let pools = lock(&self.pools);
        (pools.random_len(), pools.retry_len())
    }

    /// The workload.
    pub fn workload(&self) -> &Workload {
        &self.workload
    }

    /// The sink's callback: counts the recipients of this run's judged
    /// messages, by the time they arrive (inside or outside their level's
    /// window, [`REMOTE_GRACE`]).
    pub fn on_sink_message(&self) -> Arc<dyn Fn(SinkMessage) + Send + Sync> {
        let sink = Arc::clone(&self.sink);
        let changed = Arc::clone(&self.sink_changed);
        let run = self.workload.run_id;
        Arc::new(move |m: SinkMessage| {
            lock(&sink).record(m.tag, m.recipients, run, Instant::now());
            changed.send_modify(|n| *n = n.wrapping_add(1));
        })
    }

    /// Messages the sink received that were not this run's (older runs' mail
    /// still in the server's queue, or the initial fill's).
    pub fn sink_foreign(&self) -> u64 {
        lock(&self.sink).foreign
    }

    /// Offers one level's load and returns what its window measured.
    pub async fn run_level(&self, plan: &LevelPlan, live: &Arc<Live>) -> LevelTally {
        let offered = self.offer_level(plan, live).await;
        self.count_remote(offered, live).await
    }

    /// Offers one level's load (this engine's part of it): warm-up, window,
    /// cool-down and the drain of the judged sessions. The sink's count of
    /// the level's remote mail is [`Engine::count_remote`]'s, once every part's
    /// tally is in.
    pub async fn offer_level(&self, plan: &LevelPlan, live: &Arc<Live>) -> Offered {
        live.started.store(0, Ordering::Relaxed);
        live.failed.store(0, Ordering::Relaxed);
        live.pending.store(0, Ordering::Relaxed);
        live.set_phase(Phase::Warmup);
        let tally = Arc::new(Mutex::new(LevelTally {
            access: self.workload().access,
            window_secs: plan.run.as_secs_f64(),
            ..LevelTally::default()
        }));
        let times = LevelTimes::from_now(plan);
        let receipts_until = times.window.1 + REMOTE_GRACE;
        lock(&self.sink).open(plan.index, times.window.0, receipts_until);
        let (judged_tx, mut judged_rx) = tokio::sync::mpsc::unbounded_channel();
        let streams = self.spawn_streams(plan, &tally, live, times, &judged_tx);
        drop(judged_tx);
        // Phases, for the progress line.
        let phase_clock = tokio::spawn(phase_clock(Arc::clone(live), times));
        end_streams(streams, phase_clock, live).await;
        let unfinished = drain_judged(&mut judged_rx, plan.drain_limit, live).await;
        let mut t = lock(&tally).clone();
        t.counters.unfinished += unfinished;
        Offered {
            tally: t,
            level: plan.index,
            receipts_until,
        }
    }

    /// Counts the level's remote mail at the sink into `offered`'s tally:
    /// waits (at most until the end of the window plus [`REMOTE_GRACE`]) for
    /// the recipients of its accepted messages, then takes the sink's counts.
    pub async fn count_remote(&self, offered: Offered, live: &Live) -> LevelTally {
        let Offered {
            tally: mut t,
            level,
            receipts_until,
        } = offered;
        let deliverable = t.remote.sent - t.remote.dropped.min(t.remote.sent);
        self.await_remote(level, deliverable, receipts_until).await;
        live.set_phase(Phase::Done);
        (t.remote.received, t.remote.outside) = lock(&self.sink).counts(level);
        t
    }

    /// Waits, at most until `deadline` (the end of the level's window plus
    /// [`REMOTE_GRACE`]), for the sink to receive the level's `sent` remote
    /// recipients (those of accepted messages): a short cool-down must not cut
    /// their time short.
    async fn await_remote(&self, level: u8, sent: u64, deadline: Instant) {
        let mut changes = self.sink_changed.subscribe();
        loop {
            let (received, _) = lock(&self.sink).counts(level);
            if received >= sent || Instant::now() >= deadline {
                return;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return,
            }
        }
    }

    /// Starts the level's four streams, each with its own seed. Judged sessions'
    /// handles go to `judged_tx`; each stream ends with its unjudged sessions.
    fn spawn_streams(
        &self,
        plan: &LevelPlan,
        tally: &Arc<Mutex<LevelTally>>,
        live: &Arc<Live>,
        times: LevelTimes,
        judged_tx: &Judged,
    ) -> JoinSet<JoinSet<()>> {
        let ([user_smtp, remote_smtp, initial_pop, repeated_pop], probe_chance) =
            self.part_rates(&plan.rates);
        let mailboxes = match &self.part {
            Part::Probes(remote) => Mailboxes::Remote(Arc::clone(remote)),
            Part::Whole | Part::Agent(_) => Mailboxes::Local(Arc::clone(&self.pools)),
        };
        let salt = part_salt(&self.part);
        let mut streams = JoinSet::new();
        for (k, (stream, rate)) in [
            (Stream::UserSmtp, user_smtp),
            (Stream::RemoteSmtp, remote_smtp),
            (Stream::InitialPop, initial_pop),
            (Stream::RepeatedPop, repeated_pop),
        ]
        .into_iter()
        .enumerate()
        {
            let ctx = SessionCtx {
                workload: Arc::clone(&self.workload),
                pools: Arc::clone(&self.pools),
                mailboxes: mailboxes.clone(),
                tally: Arc::clone(tally),
                live: Arc::clone(live),
                seq: Arc::clone(&self.seq),
                level: plan.index,
                probe_share: probe_chance,
            };
            let seed = self.workload.seed
                ^ salt
                ^ (u64::from(plan.index) << 32)
                ^ ((k as u64 + 1) * 0x9e37_79b9);
            streams.spawn(schedule(ctx, stream, rate, seed, times, judged_tx.clone()));
        }
        streams
    }
}

/// What sets a part's random streams apart from the other parts' (0 for the
/// whole run, so its seeds are what they always were).
fn part_salt(part: &Part) -> u64 {
    match part {
        Part::Whole => 0,
        Part::Agent(s) => (u64::from(s.index) + 1).wrapping_mul(0xa076_1d64_78bd_642f),
        Part::Probes(_) => 0xe703_7ed1_a0b4_28db,
    }
}

/// Where judged sessions' handles go, to be awaited during the drain.
type Judged = tokio::sync::mpsc::UnboundedSender<tokio::task::JoinHandle<()>>;

/// A level's timeline: its start, its measurement window, the end of its load.
#[derive(Debug, Clone, Copy)]
struct LevelTimes {
    t0: Instant,
    window: (Instant, Instant),
    load_end: Instant,
}

impl LevelTimes {
    /// The timeline of `plan` starting now.
    fn from_now(plan: &LevelPlan) -> LevelTimes {
        let t0 = Instant::now();
        let window = (t0 + plan.warmup, t0 + plan.warmup + plan.run);
        LevelTimes {
            t0,
            window,
            load_end: window.1 + plan.cooldown,
        }
    }
}

/// Moves the progress line's phase along the level's timeline.
async fn phase_clock(live: Arc<Live>, times: LevelTimes) {
    tokio::time::sleep_until(times.window.0).await;
    live.set_phase(Phase::Measure);
    tokio::time::sleep_until(times.window.1).await;
    live.set_phase(Phase::Cooldown);
    tokio::time::sleep_until(times.load_end).await;
    live.set_phase(Phase::Drain);
}

/// Waits for the streams, which end at `load_end`, each handing back its
/// unjudged sessions (aborted now) while judged ones come through the channel.
async fn end_streams(
    mut streams: JoinSet<JoinSet<()>>,
    phase_clock: tokio::task::JoinHandle<()>,
    live: &Live,
) {
    let mut unjudged = Vec::new();
    while let Some(joined) = streams.join_next().await {
        if let Ok(set) = joined {
            unjudged.push(set);
        }
    }
    let _ = phase_clock.await;
    live.set_phase(Phase::Drain);
    for mut set in unjudged {
        set.abort_all();
        while set.join_next().await.is_some() {}
    }
}

/// Drains the judged sessions, bounded by `drain_limit`: how many were still
/// running and aborted.
async fn drain_judged(
    judged_rx: &mut tokio::sync::mpsc::UnboundedReceiver<tokio::task::JoinHandle<()>>,
    drain_limit: Duration,
    live: &Live,
) -> u64 {
    let mut judged: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    while let Ok(h) = judged_rx.try_recv() {
        judged.push(h);
    }
    let deadline = Instant::now() + drain_limit;
    let mut unfinished = 0u64;
    let mut left = judged.len() as u64;
    for mut h in judged {
        live.pending.store(left, Ordering::Relaxed);
        left -= 1;
        if tokio::time::timeout_at(deadline, &mut h).await.is_err() {
            h.abort();
            let _ = h.await;
            unfinished += 1;
        }
    }
    unfinished
}

/// What every session task of a level shares.
#[derive(Clone)]
struct SessionCtx {
    workload: Arc<Workload>,
    pools: Arc<Mutex<Pools>>,
    /// Where probes get their mailboxes.
    mailboxes: Mailboxes,
    tally: Arc<Mutex<LevelTally>>,
    live: Arc<Live>,
    seq: Arc<AtomicU64>,
    level: u8,
    /// The chance that an SMTP session carries a probe.
    probe_share: f64,
}

/// One stream: sessions at exponential gaps from `t0` until `load_end`. Judged
/// sessions' handles go to `judged`; the others are returned for aborting.
async fn schedule(
    ctx: SessionCtx,
    stream: Stream,
    rate: f64,
    seed: u64,
    times: LevelTimes,
    judged: Judged,
) -> JoinSet<()> {
    let mut rng = Rng::with_seed(seed);
    let mut others = JoinSet::new();
    let mut at = times.t0;
    loop {
        let gap = dist::exponential_secs(&mut rng, rate);
        if !gap.is_finite() {
            break;
        }
        at += Duration::from_secs_f64(gap);
        if at >= times.load_end {
            break;
        }
        tokio::time::sleep_until(at).await;
        // Reap finished unjudged sessions so the set stays small.
        while others.try_join_next().is_some() {}
        let measured = at >= times.window.0 && at < times.window.1;
        let late = Instant::now().duration_since(at) > LATE_START;
        let fut = session_task(ctx.clone(), stream, measured, late, rng.fork());
        if measured {
            let _ = judged.send(tokio::spawn(fut));
        } else {
            others.spawn(fut);
        }
    }
    others
}

/// One session as a task: counted live (and, when judged, as started and maybe
/// late), then run.
async fn session_task(ctx: SessionCtx, stream: Stream, measured: bool, late: bool, rng: Rng) {
    ctx.live.active.fetch_add(1, Ordering::Relaxed);
    ctx.live.started.fetch_add(1, Ordering::Relaxed);
    if measured {
        let mut t = lock(&ctx.tally);
        if late {
            t.counters.late_starts += 1;
        }
        match stream {
            Stream::UserSmtp => t.started.user_smtp += 1,
            Stream::RemoteSmtp => t.started.remote_smtp += 1,
            Stream::InitialPop => t.started.initial_pop += 1,
            Stream::RepeatedPop => t.started.repeated_pop += 1,
        }
    }
    run_session(&ctx, stream, measured, rng).await;
    ctx.live.active.fetch_sub(1, Ordering::Relaxed);
}

/// Picks `n` distinct accounts at random (fewer if there are not enough).
fn distinct_accounts(rng: &mut Rng, users: u32, n: usize, exclude: Option<u32>) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::with_capacity(n);
    let available = users as usize - usize::from(exclude.is_some());
    let mut tries = 0;
    while out.len() < n.min(available) && tries < n * 20 + 100 {
        tries += 1;
        let u = rng.u32(1..=users);
        if Some(u) != exclude && !out.contains(&u) {
            out.push(u);
        }
    }
    out
}

/// Runs one session of `stream` (and its probe, if it carries one).
async fn run_session(ctx: &SessionCtx, stream: Stream, measured: bool, rng: Rng) {
    match stream {
        Stream::InitialPop | Stream::RepeatedPop => run_pop(ctx, stream, measured, rng).await,
        Stream::UserSmtp => run_smtp(ctx, true, measured, rng).await,
        Stream::RemoteSmtp => run_smtp(ctx, false, measured, rng).await,
    }
}

/// One POP check of a free mailbox from the stream's pool (initial checks the
/// random pool, repeated checks the retry pool).
async fn run_pop(ctx: &SessionCtx, stream: Stream, measured: bool, mut rng: Rng) {
    let user = {
        let mut pools = lock(&ctx.pools);
        if stream == Stream::InitialPop {
            pools.take_random(&mut rng)
        } else {
            pools.take_retry(&mut rng, Instant::now())
        }
    };
    let Some(held) = user.map(|user| Held {
        from: Mailboxes::Local(Arc::clone(&ctx.pools)),
        user,
    }) else {
        if measured && stream == Stream::RepeatedPop {
            lock(&ctx.tally).counters.retry_pool_exhausted += 1;
        }
        return;
    };
    let pace = if dist::session_is_modem(&mut rng) {
        Pace::modem()
    } else {
        Pace::full()
    };
    let plan = PopPlan {
        drop: Some(disconnect::pop_drop(&mut rng)),
        ..ctx.workload.pop_plan(held.user, pace)
    };
    let record = ctx.workload.access.session(&plan).await;
    drop(held);
    if record.failure().is_some() {
        ctx.live.failed.fetch_add(1, Ordering::Relaxed);
    }
    if measured {
        lock(&ctx.tally).add_session(&record);
    }
}

/// One SMTP session, user mail or remote-MTA mail, and its probe if it carries
/// one.
async fn run_smtp(ctx: &SessionCtx, user_mail: bool, measured: bool, mut rng: Rng) {
    let held = if rng.f64() < ctx.probe_share {
        ctx.mailboxes.take_random(&mut rng).await
    } else {
        None
    };
    let probe_user = held.as_ref().map(|h| h.user);
    let (mut plan, tag) = smtp_plan(ctx, &mut rng, user_mail, measured, probe_user);
    // A probe is the harness's instrument, never dropped.
    plan.drop_mid_data = probe_user.is_none() && disconnect::smtp_drops(&mut rng);
    let started = Instant::now();
    let record = smtp_session(&plan).await;
    let accepted = record
        .transfers
        .iter()
        .any(|t| t.ok && t.kind == crate::tally::Sized::DataResponse);
    if record.failure().is_some() {
        ctx.live.failed.fetch_add(1, Ordering::Relaxed);
    }
    if measured {
        let mut t = lock(&ctx.tally);
        t.add_session(&record);
        // The kit counted a dropped session's remote recipients too: on the
        // published page Remote Message Delivery's attempts equal SMTP To
        // Remote and about 1 % of them, the disconnects' share, never arrive.
        if accepted || record.dropped {
            t.remote.sent += u64::from(record.to_remote);
        }
        if record.dropped {
            t.remote.dropped += u64::from(record.to_remote);
        }
        // A probe counts once its message is accepted, so one still polling
        // when the level ends counts as not delivered.
        if accepted && probe_user.is_some() {
            t.delivery.attempts += 1;
        }
    }
    if let Some(p) = probe_user
        && accepted
    {
        probe(ctx, p, &tag, started, measured).await;
    }
    drop(held);
}

/// An SMTP session's plan and its message's tag: recipients, envelope, pace
/// and message size, drawn from `rng` in that order.
fn smtp_plan(
    ctx: &SessionCtx,
    rng: &mut Rng,
    user_mail: bool,
    measured: bool,
    probe_user: Option<u32>,
) -> (SmtpPlan, Tag) {
    let w = &ctx.workload;
    let rcpts = recipients(rng, w, user_mail, probe_user);
    let seq = ctx.seq.fetch_add(1, Ordering::Relaxed);
    let tag = Tag {
        run: w.run_id,
        level: ctx.level,
        measured,
        seq,
        probe: probe_user.is_some(),
    };
    let (mail_from, helo, pace) = envelope(rng, w, user_mail, seq, probe_user.is_some());
    let size = dist::message_size_bytes(rng) as usize;
    let to = rcpts.first().map_or("", |r| r.0.as_str()).to_owned();
    let plan = SmtpPlan {
        addr: w.smtp,
        helo,
        mail_from: mail_from.clone(),
        rcpts,
        message: Message::new(&mail_from, &to, &tag, size),
        pace,
        reply_timeout: w.reply_timeout,
        drop_mid_data: false,
    };
    (plan, tag)
}

/// A message's recipients, each with whether it is local: the probe's mailbox
/// first, then distinct local accounts and remote addresses (all local in
/// remote-MTA mail).
fn recipients(
    rng: &mut Rng,
    w: &Workload,
    user_mail: bool,
    probe_user: Option<u32>,
) -> Vec<(String, bool)> {
    let n = dist::recipient_count(rng) as usize;
    let mut rcpts: Vec<(String, bool)> = Vec::with_capacity(n);
    if let Some(p) = probe_user {
        rcpts.push((w.account(p), true));
    }
    let locals: Vec<bool> = (rcpts.len()..n)
        .map(|_| !user_mail || dist::recipient_is_local(rng))
        .collect();
    let local_n = locals.iter().filter(|&&l| l).count();
    let mut local_accounts = distinct_accounts(rng, w.users, local_n, probe_user).into_iter();
    for local in locals {
        if local {
            if let Some(u) = local_accounts.next() {
                rcpts.push((w.account(u), true));
            }
        } else {
            let u = rng.u32(1..=w.users.max(1));
            let addr = format!("user{u}.{}@{}", rcpts.len(), w.remote_domain);
            rcpts.push((addr, false));
        }
    }
    rcpts
}

/// The envelope sender, the `HELO` name and the pace: a user at a dial-up
/// host (mostly at modem speed), or a remote MTA at full speed.
fn envelope(
    rng: &mut Rng,
    w: &Workload,
    user_mail: bool,
    seq: u64,
    probe: bool,
) -> (String, String, Pace) {
    if !user_mail {
        return (
            format!("sender{seq}@{}", w.remote_domain),
            format!("mta{}.{}", seq % 64, w.remote_domain),
            Pace::full(),
        );
    }
    let sender = w.account(rng.u32(1..=w.users.max(1)));
    // A probe is the harness's instrument: sent at full speed, so its
    // delivery time is the server's, not a modem's upload time.
    let pace = if dist::session_is_modem(rng) && !probe {
        Pace::modem()
    } else {
        Pace::full()
    };
    (sender, format!("dialup{seq}.{}", w.domain), pace)
}

/// Polls mailbox `user` until the probe message `tag` appears or the give-up
/// time passes, and records the delivery time.
async fn probe(ctx: &SessionCtx, user: u32, tag: &Tag, started: Instant, measured: bool) {
    let plan = ctx.workload.pop_plan(user, Pace::full());
    let mut connect_errors = 0u64;
    let found = loop {
        match ctx.workload.access.probe_poll(&plan, tag).await {
            ProbeResult::Found => break Some(started.elapsed()),
            ProbeResult::NotFound => {}
            ProbeResult::Failed(_) => connect_errors += 1,
        }
        if started.elapsed() >= PROBE_GIVE_UP {
            break None;
        }
        tokio::time::sleep(PROBE_POLL).await;
    };
    if !measured {
        return;
    }
    let mut t = lock(&ctx.tally);
    let d = &mut t.delivery;
    d.connect_errors += connect_errors;
    match found {
        Some(elapsed) => {
            d.times.record_ms(elapsed.as_secs_f64() * 1000.0);
            if elapsed.as_secs_f64() <= DELIVERY_LIMIT_SECS {
                d.pass += 1;
            } else {
                d.late += 1;
            }
        }
        None => d.lost += 1,
    }
    t.counters.delivery_time_connect_error += connect_errors;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> Workload {
        Workload {
            smtp: "127.0.0.1:25".parse().expect("addr"),
            read_addr: "127.0.0.1:110".parse().expect("addr"),
            access: Access::Pop3,
            domain: "stoa.test".into(),
            remote_domain: "remote.test".into(),
            users: 1000,
            retry_pool: 75,
            password: "pw".into(),
            reply_timeout: Duration::from_secs(60),
            probe_share: 0.01,
            seed: 7,
            run_id: 7,
        }
    }

    /// A prime's mailboxes that never has one.
    struct NoMailboxes;

    impl ProbeMailboxes for NoMailboxes {
        fn take(&self) -> Pin<Box<dyn Future<Output = Option<u32>> + Send + '_>> {
            Box::pin(async { None })
        }
        fn release(&self, _: u32) {}
    }

    /// Three agents and the prime's probes offer, together, exactly the one
    /// process's streams; their random-pool shares cover the pool.
    #[test]
    fn parts_add_up_to_the_whole() {
        let rates = Rates::at(5.0);
        let (whole, chance) = Engine::new(workload()).part_rates(&rates);
        assert_eq!(chance, 0.01);
        let probes = Engine::with_part(workload(), Part::Probes(Arc::new(NoMailboxes)));
        let (mut sum, chance) = probes.part_rates(&rates);
        assert_eq!(chance, 1.0);
        assert_eq!((sum[2], sum[3]), (0.0, 0.0), "the prime checks no mailbox");
        let mut random = 0;
        for index in 0..3 {
            let e = Engine::with_part(workload(), Part::Agent(Share { index, agents: 3 }));
            let (r, chance) = e.part_rates(&rates);
            assert_eq!(chance, 0.0, "agents send no probes");
            for (a, b) in sum.iter_mut().zip(r) {
                *a += b;
            }
            random += e.pool_sizes().0;
        }
        for (a, b) in sum.iter().zip(whole) {
            assert!((a - b).abs() <= b * 1e-12, "{sum:?} vs {whole:?}");
        }
        assert_eq!(random, Engine::new(workload()).pool_sizes().0);
    }

    /// A reserved mailbox goes back to the pool when its holder drops, as a
    /// session's task aborted at the end of a level does.
    #[test]
    fn held_mailboxes_are_released_on_drop() {
        let engine = Engine::with_part(
            workload(),
            Part::Agent(Share {
                index: 0,
                agents: 1,
            }),
        );
        let pools = Mailboxes::Local(Arc::clone(&engine.pools));
        let n = engine.pool_sizes().0;
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let mut rng = Rng::with_seed(1);
        let held: Vec<Held> = (0..n)
            .map(|_| rt.block_on(pools.take_random(&mut rng)).expect("free"))
            .collect();
        assert!(
            engine.reserve_for_probe().is_none(),
            "every mailbox is held"
        );
        drop(held);
        let u = engine.reserve_for_probe().expect("released");
        engine.release_probe(u);
        assert!(engine.reserve_for_probe().is_some());
    }

    #[test]
    fn distinct_accounts_are_distinct() {
        let mut rng = Rng::with_seed(3);
        let v = distinct_accounts(&mut rng, 20, 20, Some(5));
        assert_eq!(v.len(), 19);
        assert!(!v.contains(&5));
        let mut s = v.clone();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s.len(), 19);
    }
}
