//! `stoa bench mail --agents`: the SPECmail2001-style streams on agents, the
//! sink, probes, QoS tally and report on the prime.
//!
//! # How the load is split
//!
//! The split is the engine's ([`stoa_mailgen::engine`], "Parts of a run"); in
//! short, for `n` agents and a probe share `p`:
//!
//! - agent `k` runs the user and remote-MTA SMTP streams at `(1 − p) / n` of
//!   their rates, without probes, and the initial and repeated POP streams
//!   over its own share of the random and retry pools (every `n`-th mailbox
//!   of the pools drawn from the run's seed) at that share of their rates: the
//!   sum is the single process's load, each mailbox is checked as often as
//!   there, by one agent only, and the retry pool's 300 s rule holds because
//!   each retry mailbox's "last checked" time lives with the one agent that
//!   checks it, for the whole run (one session spans every level);
//! - the prime sends the probes: each SMTP stream at `p` of its rate, every
//!   session a probe, and polls them by POP, so a delivery time is measured on
//!   one clock. A probe's mailbox is reserved on the agent that owns it (the
//!   prime asks one, chosen by the size of its random-pool share; the agent
//!   marks it busy until the prime releases it), so no agent checks a probed
//!   mailbox and every random-pool mailbox can be probed, as in one process;
//! - the prime keeps the sink (the server relays remote mail to it) and counts
//!   each level's remote mail against the merged tally, judges the merged
//!   tally and writes one report, which names the agents and their shares.
//!
//! The prime fills and checks the store before the first level, from its own
//! host, as it does alone.
//!
//! # Protocol
//!
//! After the plan (`{"plan": {"version": "…", "mail": {"workload": {…},
//! "share": {"index": k, "agents": n}}}}`, the module [`super`]) and the
//! agent's `{"ready": {"threads": N}}` (sent once it has reached the SMTP and
//! POP3 services), one round per load level:
//!
//! 1. prime → agent: `{"level": {…}}` (the whole run's rates; the agent takes
//!    its share); agent → prime: `{"ready": …}` or `{"error": "…"}`.
//! 2. prime → agent, to every agent once all are ready: `"go"`. The prime starts
//!    its own clock (probes, the sink's window) as it sends it.
//! 3. agent → prime: `{"progress": {…}}` each second, then `{"tally": {"tally":
//!    {…}, "cpu_ms": …}}` once the level has drained.
//!
//! At any time after the plan, the prime may send `{"reserve": {"id": i}}`
//! (answered by `{"reserved": {"id": i, "user": u | null}}`) and
//! `{"release": {"user": u}}`. After the last level it sends `"end"`. An agent
//! whose prime goes away stops its level and ends the session; a prime whose
//! agent goes away fails the run, naming the agent. Every wait is bounded: a
//! step by [`STEP_TIMEOUT`], a level by its phases plus its drain limit, the
//! wait for the next level (the prime may be filling the store) by
//! [`MAX_RUN`].

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use stoa_mail2001::Rates;
use stoa_mailgen::engine::{
    Engine, LevelPlan, Live, LiveCounts, Part, ProbeMailboxes, REMOTE_GRACE, Share, Workload,
};
use stoa_mailgen::tally::{LevelTally, Started};
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::{MAX_PLAN, MAX_RUN, STEP_TIMEOUT, receive, write_loop};

/// Largest message the prime reads (a level's tally is tens of KiB).
const MAX_TALLY: u64 = 64 * 1024 * 1024;
/// Most agents one run takes.
pub(crate) const MAX_AGENTS: usize = 1024;
/// Most accounts a plan may name.
const MAX_USERS: u32 = 100_000_000;
/// Highest stream rate, sessions per second, a level may ask of an agent.
const MAX_RATE: f64 = 100_000.0;
/// Messages queued for one connection's writer.
const OUT_QUEUE: usize = 4096;
/// Messages from the prime queued for the agent's session.
const IN_QUEUE: usize = 1024;
/// Reservations the prime waits for at once.
const MAX_PENDING: usize = 100_000;
/// How long a probe waits for its mailbox before it goes without one.
const RESERVE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long an agent tries to reach the server's services before it refuses
/// the plan.
const REACH_TIMEOUT: Duration = Duration::from_secs(10);

/// An agent's part of a mail run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Plan {
    /// The server and the accounts, as the prime's.
    pub(crate) workload: Workload,
    /// Which share is this agent's.
    pub(crate) share: Share,
}

/// A level as the prime orders it: the whole run's rates and the phases.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Level {
    index: u8,
    mpm: f64,
    load: f64,
    users: f64,
    /// Per second, the whole run's: user SMTP, remote SMTP, initial POP,
    /// repeated POP.
    rates: [f64; 4],
    warmup: Duration,
    run: Duration,
    cooldown: Duration,
    drain_limit: Duration,
}

impl Level {
    fn of(p: &LevelPlan) -> Level {
        let r = &p.rates;
        Level {
            index: p.index,
            mpm: r.mpm,
            load: r.load,
            users: r.users,
            rates: [r.user_smtp, r.remote_smtp, r.initial_pop, r.repeated_pop],
            warmup: p.warmup,
            run: p.run,
            cooldown: p.cooldown,
            drain_limit: p.drain_limit,
        }
    }

    fn plan(&self) -> LevelPlan {
        let [user_smtp, remote_smtp, initial_pop, repeated_pop] = self.rates;
        LevelPlan {
            index: self.index,
            rates: Rates {
                mpm: self.mpm,
                load: self.load,
                users: self.users,
                user_smtp,
                remote_smtp,
                initial_pop,
                repeated_pop,
            },
            warmup: self.warmup,
            run: self.run,
            cooldown: self.cooldown,
            drain_limit: self.drain_limit,
        }
    }

    /// The longest the level may take, its drain and the sink's grace included.
    fn bound(&self) -> Duration {
        self.warmup + self.run + self.cooldown + self.drain_limit + REMOTE_GRACE
    }

    /// Bounds an agent accepts.
    fn check(&self) -> Result<(), String> {
        if !self
            .rates
            .iter()
            .all(|r| r.is_finite() && (0.0..=MAX_RATE).contains(r))
        {
            return Err(format!(
                "level {}: a stream rate outside 0–{MAX_RATE}/s",
                self.index
            ));
        }
        if self.run.is_zero() || self.bound() > MAX_RUN {
            return Err(format!(
                "level {}: a measurement window of zero, or a level longer than 24 hours",
                self.index
            ));
        }
        Ok(())
    }
}

/// Prime → agent, after the plan.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ToAgent {
    Level(Box<Level>),
    Go,
    Reserve { id: u64 },
    Release { user: u32 },
    End,
}

/// Agent → prime.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FromAgent {
    Ready {
        threads: u32,
    },
    Progress(LiveCounts),
    Reserved {
        id: u64,
        user: Option<u32>,
    },
    Tally {
        tally: Box<LevelTally>,
        cpu_ms: Option<u64>,
    },
    Error(String),
}

/// Locks a mutex, ignoring poisoning (every critical section here is a few
/// assignments).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------
// The agent's side
// ---------------------------------------------------------------------------

/// Bounds an agent accepts.
fn check_plan(plan: &Plan) -> Result<(), String> {
    let (w, s) = (&plan.workload, &plan.share);
    if w.users == 0 || w.users > MAX_USERS {
        return Err(format!("users {} outside 1–{MAX_USERS}", w.users));
    }
    if w.retry_pool > w.users {
        return Err(format!(
            "retry pool of {} accounts in a store of {}",
            w.retry_pool, w.users
        ));
    }
    if s.agents == 0 || s.agents as usize > MAX_AGENTS || s.index >= s.agents {
        return Err(format!("share {} of {} agents", s.index, s.agents));
    }
    if !(0.0..=1.0).contains(&w.probe_share) {
        return Err(format!("probe share {} outside 0–1", w.probe_share));
    }
    if w.reply_timeout.is_zero() || w.reply_timeout > Duration::from_secs(3600) {
        return Err("a reply timeout of zero or over an hour".into());
    }
    for (what, name) in [("domain", &w.domain), ("remote domain", &w.remote_domain)] {
        if name.is_empty() || name.len() > 253 || !name.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(format!("{what} {name:?}: not a domain name"));
        }
    }
    if w.password.len() > 1024 || w.password.bytes().any(|b| b == b'\r' || b == b'\n') {
        return Err("a password longer than 1,024 bytes or with a line break".into());
    }
    Ok(())
}

/// Whether this agent can open connections to `addr` (the server's `what`
/// service): a plan naming a service the agent cannot reach (the built-in
/// server on the prime's loopback, a firewall) is refused before any load.
async fn reach(what: &str, addr: SocketAddr) -> Result<(), String> {
    match tokio::time::timeout(REACH_TIMEOUT, TcpStream::connect(addr)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(format!("cannot reach the {what} service at {addr}: {e}")),
        Err(_) => Err(format!(
            "cannot reach the {what} service at {addr}: no connection within {} s",
            REACH_TIMEOUT.as_secs()
        )),
    }
}

/// A level running on the agent.
struct Running {
    index: u8,
    live: Arc<Live>,
    handle: tokio::task::JoinHandle<(LevelTally, Option<Duration>)>,
    until: Instant,
}

/// Where an agent's session is between messages.
enum State {
    /// Waiting for the next level (or the end).
    Idle,
    /// A level accepted, waiting for `go`.
    Ready(Level),
    /// A level under way.
    Running(Running),
}

/// One prime's run on this agent, after its plan: every level of it.
pub(super) async fn session(
    read: BufReader<OwnedReadHalf>,
    write: OwnedWriteHalf,
    plan: Plan,
    threads: u32,
) -> anyhow::Result<()> {
    let (out, out_rx) = mpsc::channel::<FromAgent>(OUT_QUEUE);
    let writer = tokio::spawn(write_loop(write, out_rx, |m| {
        matches!(m, FromAgent::Error(_))
    }));
    let result = async {
        let checked = async {
            check_plan(&plan)?;
            reach("SMTP", plan.workload.smtp).await?;
            reach(plan.workload.access.name(), plan.workload.read_addr).await
        };
        if let Err(why) = checked.await {
            let _ = out.send(FromAgent::Error(why.clone())).await;
            bail!(why);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1) as usize)
            .enable_all()
            .build()
            .context("cannot start the load runtime")?;
        eprintln!(
            "stoa bench agent: mail run against SMTP {} and {} {} as agent {} of {}",
            plan.workload.smtp,
            plan.workload.access.name(),
            plan.workload.read_addr,
            plan.share.index + 1,
            plan.share.agents
        );
        let engine = Arc::new(Engine::with_part(plan.workload, Part::Agent(plan.share)));
        let (in_tx, in_rx) = mpsc::channel::<ToAgent>(IN_QUEUE);
        let reader = tokio::spawn(read_loop(read, in_tx));
        let served = async {
            send_out(&out, FromAgent::Ready { threads }).await?;
            levels(&runtime, &engine, in_rx, &out, threads).await
        }
        .await;
        reader.abort();
        // Sessions still running (a prime gone mid-level) end with the runtime.
        runtime.shutdown_background();
        served
    }
    .await;
    drop(out);
    let _ = tokio::time::timeout(STEP_TIMEOUT, writer).await;
    result
}

/// The prime's messages, parsed, until it closes or sends one that does not
/// parse.
async fn read_loop(mut read: BufReader<OwnedReadHalf>, tx: mpsc::Sender<ToAgent>) {
    while let Ok(msg) = receive::<ToAgent>(&mut read, MAX_PLAN).await {
        if tx.send(msg).await.is_err() {
            return;
        }
    }
}

async fn send_out(out: &mpsc::Sender<FromAgent>, msg: FromAgent) -> anyhow::Result<()> {
    out.send(msg).await.ok().context("the prime went away")
}

/// The session's rounds: levels, reservations and releases, until `end`.
async fn levels(
    runtime: &tokio::runtime::Runtime,
    engine: &Arc<Engine>,
    mut rx: mpsc::Receiver<ToAgent>,
    out: &mpsc::Sender<FromAgent>,
    threads: u32,
) -> anyhow::Result<()> {
    // Mailboxes reserved for the prime's probes: only those may be released.
    let mut held: HashSet<u32> = HashSet::new();
    let mut state = State::Idle;
    let mut deadline = Instant::now() + MAX_RUN;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let running = matches!(state, State::Running(_));
        let wake = until(&state, deadline);
        tokio::select! {
            msg = rx.recv() => {
                let Some(msg) = msg else {
                    if let State::Running(r) = &state {
                        r.handle.abort();
                        bail!("the prime went away during level {}", r.index);
                    }
                    bail!("the prime went away");
                };
                match (msg, &state) {
                    (ToAgent::Reserve { id }, _) => {
                        let user = engine.reserve_for_probe();
                        if let Some(u) = user {
                            held.insert(u);
                        }
                        send_out(out, FromAgent::Reserved { id, user }).await?;
                    }
                    (ToAgent::Release { user }, _) => {
                        if held.remove(&user) {
                            engine.release_probe(user);
                        }
                    }
                    (ToAgent::Level(level), State::Idle) => {
                        if let Err(why) = level.check() {
                            let _ = out.send(FromAgent::Error(why.clone())).await;
                            bail!(why);
                        }
                        send_out(out, FromAgent::Ready { threads }).await?;
                        state = State::Ready(*level);
                        deadline = Instant::now() + STEP_TIMEOUT;
                    }
                    (ToAgent::Go, State::Ready(level)) => {
                        state = State::Running(start_level(runtime, engine, level));
                    }
                    (ToAgent::End, State::Idle) => return Ok(()),
                    (msg, _) => {
                        let why = format!("unexpected {msg:?} from the prime");
                        let _ = out.send(FromAgent::Error(why.clone())).await;
                        bail!(why);
                    }
                }
            }
            done = join(&mut state), if running => {
                let index = match &state {
                    State::Running(r) => r.index,
                    _ => 0,
                };
                let (tally, cpu) = done.context("the level's task failed")?;
                let s = &tally.started;
                eprintln!(
                    "stoa bench agent: level {index} done: judged {} user SMTP, {} remote SMTP, {} initial POP, {} repeated POP sessions",
                    s.user_smtp, s.remote_smtp, s.initial_pop, s.repeated_pop
                );
                let cpu_ms = cpu.map(|d| d.as_millis() as u64);
                send_out(out, FromAgent::Tally { tally: Box::new(tally), cpu_ms }).await?;
                state = State::Idle;
                deadline = Instant::now() + MAX_RUN;
            }
            _ = tick.tick(), if running => {
                if let State::Running(r) = &state {
                    send_out(out, FromAgent::Progress(r.live.counts())).await?;
                }
            }
            () = tokio::time::sleep_until(wake) => {
                if let State::Running(r) = &state {
                    r.handle.abort();
                }
                bail!("no word from the prime in time");
            }
        }
    }
}

/// When the current state times out.
fn until(state: &State, deadline: Instant) -> Instant {
    match state {
        State::Running(r) => r.until,
        State::Idle | State::Ready(_) => deadline,
    }
}

/// The running level's result (only polled while one runs).
async fn join(state: &mut State) -> Result<(LevelTally, Option<Duration>), tokio::task::JoinError> {
    match state {
        State::Running(r) => (&mut r.handle).await,
        State::Idle | State::Ready(_) => std::future::pending().await,
    }
}

/// Starts `level` on the load runtime: this agent's share of its streams.
fn start_level(runtime: &tokio::runtime::Runtime, engine: &Arc<Engine>, level: &Level) -> Running {
    let plan = level.plan();
    let live = Arc::new(Live::default());
    let (engine, task_live) = (Arc::clone(engine), Arc::clone(&live));
    let handle = runtime.spawn(async move {
        let pid = [std::process::id()];
        let cpu0 = crate::cpu_of(&pid);
        let offered = engine.offer_level(&plan, &task_live).await;
        let cpu = cpu0
            .zip(crate::cpu_of(&pid))
            .map(|(a, b)| b.saturating_sub(a));
        (offered.tally, cpu)
    });
    Running {
        index: level.index,
        live,
        handle,
        until: Instant::now() + level.bound() + STEP_TIMEOUT,
    }
}

// ---------------------------------------------------------------------------
// The prime's side
// ---------------------------------------------------------------------------

/// One agent of the run, as the report names it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct AgentInfo {
    /// The address it was reached at (`--agents`).
    pub(crate) addr: String,
    /// Its load threads.
    pub(crate) threads: u32,
    /// Its mailboxes of the random pool (initial checks, probes).
    pub(crate) random_mailboxes: u64,
    /// Its mailboxes of the retry pool (repeated checks).
    pub(crate) retry_mailboxes: u64,
}

/// Who offered what of one level.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Generator {
    /// The agent's address, or "prime" for this host's probes.
    pub(crate) name: String,
    /// Its sessions started in the window, per stream.
    pub(crate) started: Started,
}

/// What an agent's connection tells the run.
enum Event {
    Ready,
    Tally(Box<LevelTally>, Option<Duration>),
    Failed(String),
}

/// The prime's connection to one agent.
struct Conn {
    info: AgentInfo,
    tx: mpsc::Sender<ToAgent>,
    reader: tokio::task::JoinHandle<()>,
    writer: tokio::task::JoinHandle<()>,
}

/// The agents of a mail run, connected and ready for their first level.
pub(crate) struct Agents {
    conns: Vec<Conn>,
    events: mpsc::Receiver<(usize, Event)>,
    broker: Arc<Broker>,
    /// Each agent's latest live counters (index = agent).
    live: Arc<Mutex<Vec<LiveCounts>>>,
}

impl Agents {
    /// Connects to every agent of `addrs`, gives each its share of
    /// `workload`'s run and waits until all are ready: an agent that cannot be
    /// reached, is busy, runs another version or cannot reach the server fails
    /// the run here, before any load.
    pub(crate) async fn connect(addrs: &[String], workload: &Workload) -> anyhow::Result<Agents> {
        if addrs.len() > MAX_AGENTS {
            bail!("--agents: at most {MAX_AGENTS} agents");
        }
        for (i, a) in addrs.iter().enumerate() {
            if addrs[..i].contains(a) {
                bail!("--agents names {a} twice");
            }
        }
        let n = addrs.len() as u32;
        let (events_tx, events) = mpsc::channel(8 * addrs.len().max(1));
        let live = Arc::new(Mutex::new(vec![LiveCounts::default(); addrs.len()]));
        let mut opened = Vec::new();
        for (index, addr) in addrs.iter().enumerate() {
            let share = Share {
                index: index as u32,
                agents: n,
            };
            let plan = Plan {
                workload: workload.clone(),
                share,
            };
            let (read, write, threads) =
                super::open(addr, super::Workload::Mail(Box::new(plan))).await?;
            // The agent's share, as it draws it from the same seed.
            let (random, retry) =
                Engine::with_part(workload.clone(), Part::Agent(share)).pool_sizes();
            let info = AgentInfo {
                addr: addr.clone(),
                threads,
                random_mailboxes: random as u64,
                retry_mailboxes: retry as u64,
            };
            opened.push((info, read, write));
        }
        let mut senders = Vec::new();
        let mut writers = Vec::new();
        let mut reads = Vec::new();
        for (info, read, write) in opened {
            let (tx, rx) = mpsc::channel(OUT_QUEUE);
            writers.push(tokio::spawn(write_loop(write, rx, |m| {
                matches!(m, ToAgent::End)
            })));
            senders.push(tx);
            reads.push((info, read));
        }
        let broker = Arc::new(Broker {
            weights: reads.iter().map(|(i, _)| i.random_mailboxes).collect(),
            senders: senders.clone(),
            pending: Mutex::new(HashMap::new()),
            owner: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            rng: Mutex::new(fastrand::Rng::with_seed(workload.seed ^ 0x009e_0be5)),
        });
        let mut conns = Vec::new();
        for (i, ((info, read), (tx, writer))) in reads
            .into_iter()
            .zip(senders.into_iter().zip(writers))
            .enumerate()
        {
            let reader = tokio::spawn(prime_reader(
                i,
                read,
                Arc::clone(&live),
                Arc::clone(&broker),
                events_tx.clone(),
            ));
            conns.push(Conn {
                info,
                tx,
                reader,
                writer,
            });
        }
        Ok(Agents {
            conns,
            events,
            broker,
            live,
        })
    }

    /// Where the prime's probes get their mailboxes: the agents.
    pub(crate) fn mailboxes(&self) -> Arc<dyn ProbeMailboxes> {
        Arc::clone(&self.broker) as Arc<dyn ProbeMailboxes>
    }

    /// The agents, as the report names them.
    pub(crate) fn infos(&self) -> Vec<AgentInfo> {
        self.conns.iter().map(|c| c.info.clone()).collect()
    }

    /// Each agent's latest live counters, for the progress line.
    pub(crate) fn live(&self) -> Arc<Mutex<Vec<LiveCounts>>> {
        Arc::clone(&self.live)
    }

    fn addr(&self, i: usize) -> &str {
        self.conns.get(i).map_or("?", |c| c.info.addr.as_str())
    }

    /// An agent's event as an error naming it, when it is one.
    fn failure(&self, i: usize, event: &Event, during: &str) -> Option<anyhow::Error> {
        match event {
            Event::Failed(e) => Some(anyhow::anyhow!("agent {}: {e} ({during})", self.addr(i))),
            _ => None,
        }
    }

    /// Runs one level: every agent's share and `engine`'s probes, from one
    /// `go`; the merged tally (remote mail counted at the sink), who offered
    /// what, and the agents' CPU time.
    pub(crate) async fn run_level(
        &mut self,
        engine: &Engine,
        plan: &LevelPlan,
        live: &Arc<Live>,
    ) -> anyhow::Result<(LevelTally, Vec<Generator>, Option<Duration>)> {
        let order = Level::of(plan);
        order.check().map_err(|e| anyhow::anyhow!(e))?;
        let during = format!("level {}", plan.index);
        for i in 0..self.conns.len() {
            let sent = self.conns[i].tx.send(ToAgent::Level(Box::new(order))).await;
            if sent.is_err() {
                bail!("agent {}: connection closed ({during})", self.addr(i));
            }
        }
        let mut ready = vec![false; self.conns.len()];
        let step_end = Instant::now() + STEP_TIMEOUT;
        while ready.contains(&false) {
            let (i, event) = self.next_event(step_end, &ready, &during).await?;
            if let Some(e) = self.failure(i, &event, &during) {
                return Err(e);
            }
            match event {
                Event::Ready => ready[i] = true,
                _ => bail!("agent {}: a tally before go ({during})", self.addr(i)),
            }
        }
        *lock(&self.live) = vec![LiveCounts::default(); self.conns.len()];
        for i in 0..self.conns.len() {
            if self.conns[i].tx.send(ToAgent::Go).await.is_err() {
                bail!("agent {}: connection closed ({during})", self.addr(i));
            }
        }
        let level_end = Instant::now() + order.bound() + STEP_TIMEOUT;
        let own = engine.offer_level(plan, live);
        tokio::pin!(own);
        let mut offered = None;
        let mut tallies: Vec<Option<(LevelTally, Option<Duration>)>> =
            (0..self.conns.len()).map(|_| None).collect();
        while offered.is_none() || tallies.iter().any(Option::is_none) {
            let waiting: Vec<bool> = tallies.iter().map(Option::is_some).collect();
            tokio::select! {
                o = &mut own, if offered.is_none() => offered = Some(o),
                got = self.next_event(level_end, &waiting, &during), if waiting.contains(&false) => {
                    let (i, event) = got?;
                    if let Some(e) = self.failure(i, &event, &during) {
                        return Err(e);
                    }
                    match event {
                        Event::Tally(t, cpu) => tallies[i] = Some((*t, cpu)),
                        _ => bail!("agent {}: ready twice ({during})", self.addr(i)),
                    }
                }
            }
        }
        let mut offered = offered.context("invariant: the prime's part ended")?;
        let mut generators = vec![Generator {
            name: "prime".into(),
            started: offered.tally.started,
        }];
        let mut cpu = Some(Duration::ZERO);
        for (i, t) in tallies.into_iter().enumerate() {
            let (t, c) = t.context("invariant: every tally is in")?;
            offered.tally.merge(&t);
            generators.push(Generator {
                name: self.addr(i).to_owned(),
                started: t.started,
            });
            cpu = cpu.zip(c).map(|(a, b)| a + b);
        }
        Ok((engine.count_remote(offered, live).await, generators, cpu))
    }

    /// The next event of an agent whose `done` is false, by `deadline`; an
    /// agent that says nothing by then fails the run, named.
    async fn next_event(
        &mut self,
        deadline: Instant,
        done: &[bool],
        during: &str,
    ) -> anyhow::Result<(usize, Event)> {
        match tokio::time::timeout_at(deadline, self.events.recv()).await {
            Ok(Some(e)) => Ok(e),
            Ok(None) => bail!("every agent's connection closed ({during})"),
            Err(_) => {
                let late: Vec<&str> = (0..self.conns.len())
                    .filter(|&i| !done.get(i).copied().unwrap_or(true))
                    .map(|i| self.addr(i))
                    .collect();
                bail!(
                    "agent {}: no answer in time ({during})",
                    late.join(", agent ")
                )
            }
        }
    }

    /// Tells every agent the run is over and closes the connections.
    pub(crate) async fn end(self) {
        for c in &self.conns {
            let _ = c.tx.send(ToAgent::End).await;
        }
        for c in self.conns {
            let _ = tokio::time::timeout(STEP_TIMEOUT, c.writer).await;
            c.reader.abort();
        }
    }
}

/// An agent's messages, read by the prime: progress into the live slots,
/// reservations to the broker, the rest to the run as events.
async fn prime_reader(
    i: usize,
    mut read: BufReader<OwnedReadHalf>,
    live: Arc<Mutex<Vec<LiveCounts>>>,
    broker: Arc<Broker>,
    events: mpsc::Sender<(usize, Event)>,
) {
    let why = loop {
        match receive::<FromAgent>(&mut read, MAX_TALLY).await {
            Ok(FromAgent::Progress(c)) => {
                if let Some(slot) = lock(&live).get_mut(i) {
                    *slot = c;
                }
            }
            Ok(FromAgent::Reserved { id, user }) => broker.answer(i, id, user),
            Ok(FromAgent::Ready { .. }) => {
                if events.send((i, Event::Ready)).await.is_err() {
                    return;
                }
            }
            Ok(FromAgent::Tally { tally, cpu_ms }) => {
                let cpu = cpu_ms.map(Duration::from_millis);
                if events.send((i, Event::Tally(tally, cpu))).await.is_err() {
                    return;
                }
            }
            Ok(FromAgent::Error(e)) => break e,
            Err(e) => break format!("{e:#}"),
        }
    };
    let _ = events.send((i, Event::Failed(why))).await;
}

/// The prime's probe mailboxes: reserved on the agents.
struct Broker {
    senders: Vec<mpsc::Sender<ToAgent>>,
    /// Each agent's random-pool mailboxes: the odds it is asked.
    weights: Vec<u64>,
    /// Reservations asked for and not yet answered.
    pending: Mutex<HashMap<u64, oneshot::Sender<Option<u32>>>>,
    /// Which agent holds each reserved mailbox.
    owner: Mutex<HashMap<u32, usize>>,
    next: AtomicU64,
    rng: Mutex<fastrand::Rng>,
}

impl Broker {
    /// An agent, by the size of its random-pool share.
    fn pick(&self) -> Option<usize> {
        let total: u64 = self.weights.iter().sum();
        if total == 0 {
            return None;
        }
        let mut x = lock(&self.rng).u64(..total);
        self.weights.iter().position(|&w| {
            if x < w {
                true
            } else {
                x -= w;
                false
            }
        })
    }

    /// Agent `agent`'s answer to reservation `id`. One nobody waits for any
    /// more (it came too late) is given back at once.
    fn answer(&self, agent: usize, id: u64, user: Option<u32>) {
        let waiting = lock(&self.pending).remove(&id);
        let Some(user) = user else { return };
        lock(&self.owner).insert(user, agent);
        if waiting.is_none_or(|w| w.send(Some(user)).is_err()) {
            self.release(user);
        }
    }

    async fn reserve(&self) -> Option<u32> {
        let agent = self.pick()?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, mut rx) = oneshot::channel();
        {
            let mut pending = lock(&self.pending);
            if pending.len() >= MAX_PENDING {
                return None;
            }
            pending.insert(id, tx);
        }
        let asked = self.senders[agent].send(ToAgent::Reserve { id });
        let asked = tokio::time::timeout(RESERVE_TIMEOUT, asked).await;
        if !matches!(asked, Ok(Ok(()))) {
            lock(&self.pending).remove(&id);
            return None;
        }
        match tokio::time::timeout(RESERVE_TIMEOUT, &mut rx).await {
            Ok(Ok(user)) => user,
            Ok(Err(_)) => None,
            Err(_) => {
                // Too late: an answer still on its way is given back by
                // `answer`; one that came just now, here.
                if lock(&self.pending).remove(&id).is_none()
                    && let Ok(Some(user)) = rx.try_recv()
                {
                    self.release(user);
                }
                None
            }
        }
    }
}

impl ProbeMailboxes for Broker {
    fn take(&self) -> Pin<Box<dyn Future<Output = Option<u32>> + Send + '_>> {
        Box::pin(self.reserve())
    }

    fn release(&self, user: u32) {
        let owner = lock(&self.owner).remove(&user);
        if let Some(agent) = owner {
            // A full queue means the agent has stopped reading; the run fails
            // on its silence, and the mailbox with it.
            let _ = self.senders[agent].try_send(ToAgent::Release { user });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn workload() -> Workload {
        Workload {
            smtp: "127.0.0.1:25".parse().expect("addr"),
            read_addr: "127.0.0.1:110".parse().expect("addr"),
            access: stoa_mailgen::access::Access::Pop3,
            domain: "stoa.test".into(),
            remote_domain: "remote.test".into(),
            users: 1000,
            retry_pool: 75,
            password: "pw".into(),
            reply_timeout: Duration::from_secs(60),
            probe_share: 0.01,
            seed: 3,
            run_id: 3,
        }
    }

    #[test]
    fn plans_out_of_bounds_are_refused() {
        let ok = Plan {
            workload: workload(),
            share: Share {
                index: 1,
                agents: 2,
            },
        };
        assert_eq!(check_plan(&ok), Ok(()));
        let mut bad = ok.clone();
        bad.share.index = 2;
        assert_eq!(check_plan(&bad), Err("share 2 of 2 agents".into()));
        let mut bad = ok.clone();
        bad.workload.users = 0;
        assert!(check_plan(&bad).is_err());
        let mut bad = ok.clone();
        bad.workload.probe_share = f64::NAN;
        assert!(check_plan(&bad).is_err());
        let mut bad = ok;
        bad.workload.domain = "a b".into();
        assert!(check_plan(&bad).is_err());
    }

    #[test]
    fn levels_cross_the_wire_whole() {
        let plan = LevelPlan {
            index: 2,
            rates: Rates::at_load(5.0, 1.2),
            warmup: Duration::from_secs(1),
            run: Duration::from_secs(30),
            cooldown: Duration::from_secs(2),
            drain_limit: Duration::from_secs(20),
        };
        let wire =
            serde_json::to_string(&ToAgent::Level(Box::new(Level::of(&plan)))).expect("serialise");
        let ToAgent::Level(back) = serde_json::from_str(&wire).expect("parse") else {
            panic!("{wire}");
        };
        assert_eq!(back.check(), Ok(()));
        let p = back.plan();
        assert_eq!(
            (p.index, p.rates.initial_pop, p.run, p.drain_limit),
            (2, plan.rates.initial_pop, plan.run, plan.drain_limit)
        );
        let mut bad = Level::of(&plan);
        bad.rates[1] = f64::INFINITY;
        assert!(bad.check().is_err());
        bad = Level::of(&plan);
        bad.run = Duration::ZERO;
        assert!(bad.check().is_err());
    }

    /// The prime asks agents in proportion to their random-pool shares, and
    /// a reservation answered after its probe gave up is given back.
    #[test]
    fn the_broker_weighs_agents_and_returns_late_answers() {
        let (tx0, mut rx0) = mpsc::channel(16);
        let (tx1, _rx1) = mpsc::channel(16);
        let broker = Broker {
            senders: vec![tx0, tx1],
            weights: vec![3, 0],
            pending: Mutex::new(HashMap::new()),
            owner: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            rng: Mutex::new(fastrand::Rng::with_seed(1)),
        };
        assert!((0..100).all(|_| broker.pick() == Some(0)));
        broker.answer(0, 41, Some(7));
        match rx0.try_recv() {
            Ok(ToAgent::Release { user: 7 }) => {}
            other => panic!("{other:?}"),
        }
        assert!(lock(&broker.owner).is_empty());
    }
}
