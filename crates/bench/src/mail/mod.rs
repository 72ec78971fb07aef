//! `stoa bench mail`: the SPECmail2001-style harness (`mail2001.md` §1–§4).
//!
//! A run: the SMTP sink starts (the server relays remote mail to it); without
//! `--smtp`/`--pop3` a built-in `stoa serve` starts with generated users and is
//! filled to the steady state; the store is checked (a sample of mailboxes
//! against the steady-state model); then each load level (80, 100, 120 % by
//! default) runs warm-up, measurement and cool-down with the four Poisson
//! streams (`stoa-mailgen`), and is judged by the QoS rules. `--find-max`
//! searches the highest rate whose 100 % level passes; `--init-only` fills an
//! external server's store (resumably) and stops.
//!
//! Figures are "SPECmail2001-style, not SPEC results": SPEC and SPECmail are
//! trademarks of the Standard Performance Evaluation Corporation.

mod options;
pub(crate) mod run;
mod server;

use std::collections::HashSet;
use std::io::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use stoa_mail2001::Rates;
use stoa_mailgen::engine::{Engine, LevelPlan, Live, Phase, Workload};
use stoa_mailgen::init::{self, FillProgress, StoreSample};
use stoa_mailgen::qos;
use stoa_mailgen::sink::Sink;

use crate::cpu_of;
pub use options::{Options, ProfileName, UsersFormat, UsersOptions};
use run::{LevelResult, MailRun, Phases, StoreCheck, Trial};

/// The white paper's phases: 5 min warm-up, 60 min measurement, 15 min
/// cool-down per level ((WP) figure "Phases of a Benchmark Run").
const STANDARD: Phases = Phases {
    profile: "standard",
    warmup: Duration::from_secs(300),
    run: Duration::from_secs(3600),
    cooldown: Duration::from_secs(900),
};

/// Short phases for the README and CI.
const QUICK: Phases = Phases {
    profile: "quick",
    warmup: Duration::from_secs(10),
    run: Duration::from_secs(60),
    cooldown: Duration::from_secs(20),
};

/// The rate of the built-in run when neither --rate nor --users is given.
const DEFAULT_RATE: f64 = 20.0;
/// Fewest probes per second when --probe-share is not given: one per 10 s.
const MIN_PROBE_RATE: f64 = 0.1;
/// The white paper's probe share: 1 % of the mail (§2.2).
const PROBE_SHARE: f64 = 0.01;
/// Longest wait for the fill's mail to show up in the mailboxes (a server may
/// accept faster than it delivers, and work off a queue of a million messages).
const FILL_SETTLE: Duration = Duration::from_secs(3600);
/// Most `--find-max` trials.
const MAX_TRIALS: usize = 12;
/// The default sink address for an external server.
const DEFAULT_SINK: &str = "127.0.0.1:2526";

/// The interpretations printed in every report's notes.
const CHOICES: [&str; 9] = [
    "A session is judged if it starts inside the measurement window; load continues through the cool-down, then the level waits for judged sessions (quick profile: at most 2 min, standard: 20 min) and counts those still running as unfinished, not as errors.",
    "\"SMTP Data\" and \"POP Retrieve\" (5 s) time the command's first reply (354, +OK); the whole transfer is judged against 5 s + size / 3,000 B/s as \"SMTP Data Response Time\" and \"POP Retrieve Response Time\".",
    "Error rate = failed steps / steps attempted over every function and the delivery probes; an error is an unexpected reply, a closed connection or no reply within the reply timeout.",
    "Remote Message Delivery counts recipients (as the published row equals \"SMTP To Remote\"); a recipient counts if the sink received it before its level ended.",
    "Delivery time runs from the start of the probe's SMTP session (sent at full speed) until a POP poll (every 1 s, TOP of each message) finds it; a probe not found after 120 s, or still polling when its level ends, is not delivered. Probed mailboxes are kept from other POP sessions.",
    "Message sizes are the table's point sizes with 1 KB = 1,024 bytes; SMTP uses HELO; every account has the same password.",
    "Modem sessions (90 % of user SMTP and POP sessions) send and receive at 6,000 B/s throughout; remote-MTA sessions run at full speed.",
    "The retry pool (7.5 % of the accounts) is drawn per run; a repeated check takes a pool mailbox not checked for 300 s, or is skipped and counted as \"Retry Pool Exhausted\".",
    "The store is filled once by SMTP to the steady state (its contents fixed by --store-seed) and checked on a sample of mailboxes before the run; a store with more accounts than 200 × rate serves lower rates.",
];

/// Runs `stoa bench mail`: the sink, the store (filled and checked), the load
/// levels (or the `--find-max` search) and the reports.
pub fn run(args: &Options) -> anyhow::Result<()> {
    // Thousands of sessions need thousands of descriptors.
    stoa_netkit::limits::raise_nofile();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads as usize)
        .enable_all()
        .build()
        .context("cannot start the harness runtime")?;
    runtime.block_on(run_async(args))
}

/// The settings a run derives from its arguments.
#[derive(Debug, Clone)]
struct Settings {
    /// The claimed rate (or the first rate of --find-max).
    rate: f64,
    /// Accounts.
    users: u32,
    phases: Phases,
    reply_timeout: Duration,
    drain_limit: Duration,
    seed: u64,
}

fn settings(args: &Options) -> anyhow::Result<Settings> {
    let users = match (args.users, args.rate) {
        (Some(u), _) => u,
        (None, Some(r)) => {
            let u = (r * 200.0).ceil();
            if u > f64::from(u32::MAX) {
                bail!("--rate {r} needs more than {} accounts", u32::MAX);
            }
            u as u32
        }
        (None, None) => (DEFAULT_RATE * 200.0) as u32,
    };
    let cap = f64::from(users) / 200.0;
    let rate = args.rate.unwrap_or(if args.find_max {
        (cap / 8.0).max(cap.min(1.0))
    } else {
        cap
    });
    if rate > cap + 1e-9 {
        bail!(
            "--rate {rate} needs {} accounts, but --users is {users}: the store must hold 200 × rate accounts",
            (rate * 200.0).ceil()
        );
    }
    let base = match args.profile {
        ProfileName::Standard => STANDARD,
        ProfileName::Quick => QUICK,
    };
    let phases = Phases {
        profile: if args.warmup.is_some() || args.run_time.is_some() || args.cooldown.is_some() {
            "custom"
        } else {
            base.profile
        },
        warmup: args.warmup.unwrap_or(base.warmup),
        run: args.run_time.unwrap_or(base.run),
        cooldown: args.cooldown.unwrap_or(base.cooldown),
    };
    if phases.run.is_zero() {
        bail!("--run-time must be longer than zero");
    }
    let reply_timeout = args.reply_timeout;
    if reply_timeout.is_zero() {
        bail!("--reply-timeout must be longer than zero");
    }
    let drain_limit = args.drain_limit.unwrap_or(if base.profile == "standard" {
        Duration::from_secs(1200)
    } else {
        Duration::from_secs(120)
    });
    let seed = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    Ok(Settings {
        rate,
        users,
        phases,
        reply_timeout,
        drain_limit,
        seed,
    })
}

fn resolve(text: &str, flag: &str) -> anyhow::Result<SocketAddr> {
    text.to_socket_addrs()
        .with_context(|| format!("{flag} {text}: not an address (HOST:PORT)"))?
        .next()
        .with_context(|| format!("{flag} {text}: the name has no address"))
}

/// The probe share for `rate`: the given one, or 1 % raised so that at least
/// [`MIN_PROBE_RATE`] probes start per second.
fn probe_share(args: &Options, rate: f64) -> f64 {
    args.probe_share.unwrap_or_else(|| {
        let smtp = Rates::at(rate).smtp_total();
        if smtp <= 0.0 {
            PROBE_SHARE
        } else {
            (MIN_PROBE_RATE / smtp).clamp(PROBE_SHARE, 0.5)
        }
    })
}

async fn run_async(args: &Options) -> anyhow::Result<()> {
    let s = settings(args)?;
    let started = http_date();
    let external = args.smtp.is_some();
    let sink_text = args.sink_listen.clone().unwrap_or_else(|| {
        if external {
            DEFAULT_SINK.to_owned()
        } else {
            "127.0.0.1:0".to_owned()
        }
    });
    let sink_addr = resolve(&sink_text, "--sink-listen")?;
    let listener = tokio::net::TcpListener::bind(sink_addr)
        .await
        .with_context(|| format!("cannot listen on {sink_addr} for the sink (--sink-listen)"))?;
    let sink_addr = listener.local_addr().context("the sink's address")?;

    let (smtp, pop3, mut server) = match (&args.smtp, &args.pop3) {
        (Some(smtp), Some(pop3)) => (resolve(smtp, "--smtp")?, resolve(pop3, "--pop3")?, None),
        _ => {
            let exe = crate::stoa_exe(args.server_exe.as_deref())?;
            let b = server::BuiltIn::start(&exe, &args.domain, s.users, &args.password, sink_addr)
                .await?;
            (b.smtp, b.pop3, Some(b))
        }
    };
    let run_id = (s.seed as u32) ^ ((s.seed >> 32) as u32) ^ 0x5eed_0001;
    let engine = Engine::new(Workload {
        smtp,
        pop3,
        domain: args.domain.clone(),
        remote_domain: args.remote_domain.clone(),
        users: s.users,
        password: args.password.clone(),
        reply_timeout: s.reply_timeout,
        probe_share: probe_share(args, s.rate),
        seed: s.seed,
        run_id,
    });
    let sink = Sink::start(listener, engine.on_sink_message());
    eprintln!("stoa bench: sink listening on {}", sink.local_addr());

    // The store: the built-in server is filled for every run; an external one
    // by --init-only, once.
    if !external || args.init_only {
        let journal = if external {
            Some(match &args.init_journal {
                Some(path) => path.clone(),
                None => default_journal(smtp)?,
            })
        } else {
            None
        };
        fill_store(&engine, args, journal.as_deref()).await?;
    }
    let store = check_store(&engine, args).await;
    print_store_check(&store);
    if args.init_only {
        sink.stop();
        if !store.passed {
            bail!(
                "the store does not look like the steady state: {}",
                store.notes.join("; ")
            );
        }
        eprintln!(
            "stoa bench: the store is ready for runs up to {} msgs/min",
            s.users / 200
        );
        return Ok(());
    }
    if !store.passed {
        if external {
            bail!(
                "the store does not look like the steady state ({}); fill it first with \
                 `stoa bench mail --init-only --smtp … --pop3 … --users {}`",
                store.notes.join("; "),
                s.users
            );
        }
        bail!(
            "the built-in store failed its check: {}",
            store.notes.join("; ")
        );
    }

    let server_pids: Vec<u32> = match &server {
        Some(b) => b.pid().into_iter().collect(),
        None => args.server_pid.clone(),
    };
    let mut levels = Vec::new();
    let mut search = Vec::new();
    let mpm;
    if args.find_max {
        let (best, trials, results) = find_max(&engine, &s, &server_pids, &mut server).await?;
        search = trials;
        levels = results;
        mpm = best.unwrap_or(0.0);
    } else {
        for (i, &percent) in args.levels.iter().enumerate() {
            let load = f64::from(percent) / 100.0;
            let r = run_level(&engine, &s, s.rate, load, i as u8, &server_pids).await;
            levels.push(r);
            if let Some(b) = server.as_mut() {
                b.check_alive()?;
            }
        }
        mpm = s.rate;
    }
    sink.stop();

    let server_software = args.server_software.clone().unwrap_or_else(|| {
        if external {
            "unnamed server".to_owned()
        } else {
            format!("Stoa {} (built-in)", env!("CARGO_PKG_VERSION"))
        }
    });
    let run = MailRun {
        server_software,
        mpm,
        users: u64::from(s.users),
        domain: args.domain.clone(),
        remote_domain: args.remote_domain.clone(),
        smtp: smtp.to_string(),
        pop3: pop3.to_string(),
        sink: sink.local_addr().to_string(),
        phases: s.phases,
        levels,
        search,
        store: Some(store),
        sink_stats: sink.stats(),
        probe_share: engine.workload().probe_share,
        threads: args.threads,
        seed: s.seed,
        started,
        choices: CHOICES.to_vec(),
    };
    drop(server);
    let text = crate::report::mail::text(&run);
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .context("cannot write the report")?;
    if let Some(dir) = &args.out {
        let paths = crate::report::mail::write_all(&run, dir)?;
        eprintln!(
            "stoa bench: reports in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// The current time as an IMF-fixdate.
fn http_date() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut out = Vec::new();
    stoa_http_proto::date::write_http_date(&mut out, secs);
    String::from_utf8_lossy(&out).into_owned()
}

/// Runs one level at `load` × `mpm`, with a progress line.
async fn run_level(
    engine: &Engine,
    s: &Settings,
    mpm: f64,
    load: f64,
    index: u8,
    server_pids: &[u32],
) -> LevelResult {
    let rates = Rates::at_load(mpm, load);
    let plan = LevelPlan {
        index,
        rates,
        warmup: s.phases.warmup,
        run: s.phases.run,
        cooldown: s.phases.cooldown,
        drain_limit: s.drain_limit,
    };
    let label = format!("{mpm:.1} msgs/min at {:.0}%", load * 100.0);
    eprintln!(
        "stoa bench: level {label}: {:.2} user SMTP/s, {:.2} remote SMTP/s, {:.2} initial POP/s, {:.2} repeated POP/s",
        rates.user_smtp, rates.remote_smtp, rates.initial_pop, rates.repeated_pop
    );
    let live = Arc::new(Live::default());
    let progress = progress(&label, &plan, &live);
    let self_pid = [std::process::id()];
    let (harness0, server0, machine0) = (cpu_of(&self_pid), cpu_of(server_pids), machine_busy());
    let started = Instant::now();
    let tally = engine.run_level(&plan, &live).await;
    let wall = started.elapsed();
    progress.abort();
    let diff = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let harness_cpu = diff(harness0, cpu_of(&self_pid));
    let server_cpu = diff(server0, cpu_of(server_pids));
    let machine_cpu = diff(machine0, machine_busy());
    let verdict = qos::verdict(&tally);
    eprintln!(
        "stoa bench: level {label}: {} ({} SMTP and {} POP sessions judged)",
        if verdict.passed {
            "passed".to_owned()
        } else {
            format!("failed: {}", verdict.failures.join(", "))
        },
        tally.started.user_smtp + tally.started.remote_smtp,
        tally.started.initial_pop + tally.started.repeated_pop,
    );
    LevelResult {
        load,
        rates,
        tally,
        verdict,
        wall,
        harness_cpu,
        server_cpu,
        machine_cpu,
    }
}

/// CPU time the machine has been busy since boot (user, nice, system, irq,
/// softirq, steal: everything but idle and I/O wait), from `/proc/stat`.
fn machine_busy() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is in user).
    let busy: u64 = fields
        .iter()
        .take(8)
        .enumerate()
        .filter(|&(i, _)| i != 3 && i != 4)
        .map(|(_, v)| v)
        .sum();
    let ticks = rustix::param::clock_ticks_per_second().max(1);
    Some(Duration::from_micros(busy * 1_000_000 / ticks))
}

/// Standard error when it is a terminal; nothing otherwise (a log gets plain
/// lines instead).
fn draw_target() -> indicatif::ProgressDrawTarget {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    }
}

/// A live progress line on a terminal (hidden otherwise): phase, time left,
/// sessions running, started and failed.
fn progress(label: &str, plan: &LevelPlan, live: &Arc<Live>) -> tokio::task::JoinHandle<()> {
    let bar = ProgressBar::with_draw_target(None, draw_target());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    let (label, live) = (label.to_owned(), Arc::clone(live));
    let ends = [
        plan.warmup,
        plan.warmup + plan.run,
        plan.warmup + plan.run + plan.cooldown,
    ];
    tokio::spawn(async move {
        let t0 = Instant::now();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            let phase = live.phase();
            let left = |end: Duration| end.saturating_sub(t0.elapsed()).as_secs();
            let state = match phase {
                Phase::Warmup => format!("warm-up {}s left", left(ends[0])),
                Phase::Measure => format!("measurement {}s left", left(ends[1])),
                Phase::Cooldown => format!("cool-down {}s left", left(ends[2])),
                Phase::Drain => format!(
                    "finishing {} judged sessions",
                    live.pending.load(Ordering::Relaxed)
                ),
                Phase::Done => break,
            };
            bar.set_message(format!(
                "{label}: {state} | running {} | started {} | failed {}",
                live.active.load(Ordering::Relaxed),
                live.started.load(Ordering::Relaxed),
                live.failed.load(Ordering::Relaxed),
            ));
            bar.tick();
        }
        bar.finish_and_clear();
    })
}

/// `--find-max`: doubles the rate from the first one until a 100 % level fails
/// (or the store's capacity, --users / 200, is reached), then bisects to 5 %.
async fn find_max(
    engine: &Engine,
    s: &Settings,
    server_pids: &[u32],
    server: &mut Option<server::BuiltIn>,
) -> anyhow::Result<(Option<f64>, Vec<Trial>, Vec<LevelResult>)> {
    let cap = f64::from(s.users) / 200.0;
    let round = |r: f64| {
        if cap >= 20.0 {
            r.round().max(1.0)
        } else {
            (r * 10.0).round().max(1.0) / 10.0
        }
    };
    let (mut best, mut lowest_fail): (Option<f64>, Option<f64>) = (None, None);
    let mut trials = Vec::new();
    let mut results: Vec<LevelResult> = Vec::new();
    let mut rate = round(s.rate.min(cap));
    for i in 0..MAX_TRIALS {
        eprintln!("stoa bench: find-max trial {}: {rate} msgs/min", i + 1);
        let r = run_level(engine, s, rate, 1.0, i as u8, server_pids).await;
        if let Some(b) = server.as_mut() {
            b.check_alive()?;
        }
        let passed = r.verdict.passed;
        trials.push(Trial {
            mpm: rate,
            passed,
            failures: r.verdict.failures.clone(),
        });
        if passed {
            best = Some(rate);
            results = vec![r];
        } else {
            lowest_fail = Some(rate);
            if best.is_none() {
                results = vec![r];
            }
        }
        let next = match (best, lowest_fail) {
            (Some(b), None) if b >= cap => break,
            (Some(b), None) => round((b * 2.0).min(cap)),
            (Some(b), Some(f)) => {
                if f - b <= (b * 0.05).max(if cap >= 20.0 { 1.0 } else { 0.1 }) {
                    break;
                }
                round((b + f) / 2.0)
            }
            (None, Some(f)) => {
                let n = round(f / 2.0);
                if n >= f {
                    break;
                }
                n
            }
            (None, None) => break,
        };
        if trials.iter().any(|t| (t.mpm - next).abs() < 1e-9) {
            break;
        }
        rate = next;
    }
    Ok((best, trials, results))
}

/// Fills the store (resuming from `journal` if given), then waits until the
/// fill's mail shows in a sample of mailboxes.
async fn fill_store(engine: &Engine, args: &Options, journal: Option<&Path>) -> anyhow::Result<()> {
    let w = engine.workload();
    let header = format!(
        "stoa-bench-mail-init v1 users={} domain={} store-seed={}",
        w.users, w.domain, args.store_seed
    );
    let done = match journal {
        Some(path) => read_journal(path, &header)?,
        None => HashSet::new(),
    };
    let writer: Option<Arc<std::sync::Mutex<std::fs::File>>> = match journal {
        Some(path) => {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open the journal {}", path.display()))?;
            if done.is_empty() {
                writeln!(f, "{header}")
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
            Some(Arc::new(std::sync::Mutex::new(f)))
        }
        None => None,
    };
    let todo = w.users as usize - done.len();
    let total_messages: usize = (1..=w.users)
        .filter(|u| !done.contains(u))
        .map(|u| init::initial_mailbox(args.store_seed, u).len())
        .sum();
    eprintln!(
        "stoa bench: filling {todo} mailboxes ({} already done) with {total_messages} messages over {} connections",
        done.len(),
        args.init_connections
    );
    if let Some(path) = journal {
        eprintln!("stoa bench: fill journal {}", path.display());
    }
    let progress = Arc::new(FillProgress::default());
    let on_done: Arc<dyn Fn(u32) + Send + Sync> = match writer {
        Some(f) => Arc::new(move |u: u32| {
            let mut f = f.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let _ = writeln!(f, "{u}");
        }),
        None => Arc::new(|_| {}),
    };
    let bar = ProgressBar::with_draw_target(Some(total_messages as u64), draw_target());
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} messages, {per_sec}, {eta} left")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let ticker = {
        let (bar, progress) = (bar.clone(), Arc::clone(&progress));
        // On a terminal the bar moves; in a log, a line every 30 s.
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            let mut ticks = 0u64;
            loop {
                tick.tick().await;
                ticks += 1;
                let sent = progress.messages.load(Ordering::Relaxed);
                bar.set_position(sent);
                if !terminal && ticks.is_multiple_of(60) {
                    eprintln!(
                        "stoa bench: fill: {sent} of {total_messages} messages, {} mailboxes done",
                        progress.users_done.load(Ordering::Relaxed)
                    );
                }
            }
        })
    };
    let started = Instant::now();
    let result = init::fill(
        w,
        args.store_seed,
        args.init_connections,
        &done,
        &progress,
        on_done,
    )
    .await;
    ticker.abort();
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    let messages = progress.messages.load(Ordering::Relaxed);
    let bytes = progress.bytes.load(Ordering::Relaxed);
    eprintln!(
        "stoa bench: fill sent {messages} messages ({:.1} MiB) in {secs:.1} s ({:.0} msgs/s)",
        bytes as f64 / 1_048_576.0,
        messages as f64 / secs.max(0.001)
    );
    result.map_err(|e| {
        let hint = if journal.is_some() {
            "; run --init-only again to resume"
        } else {
            ""
        };
        anyhow::anyhow!("{e}{hint}")
    })?;
    settle(engine, args.store_seed, &done).await
}

/// The fill's journal when `--init-journal` is not given: `init-ADDR.journal`
/// for the server's SMTP address, in the harness's cache directory (created
/// here). The journal describes that server's store, so it is kept where every
/// later `--init-only` against the same server finds it, whatever the current
/// directory or `--out`.
pub fn default_journal(smtp: SocketAddr) -> anyhow::Result<PathBuf> {
    let dir = crate::cache_dir("bench-mail");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir.join(format!("init-{smtp}.journal")))
}

/// Reads the accounts a previous fill finished; the header must match.
fn read_journal(path: &Path, header: &str) -> anyhow::Result<HashSet<u32>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut lines = text.lines();
    match lines.next() {
        None => return Ok(HashSet::new()),
        Some(h) if h == header => {}
        Some(h) => bail!(
            "{} is the journal of another fill ({h}); this one is {header}. Remove it to start over",
            path.display()
        ),
    }
    // A torn last line (a crash mid-write: "12" of "123") is ignored, that
    // account is redone: only lines ended by a newline count.
    let mut done: Vec<&str> = lines.collect();
    if !text.ends_with('\n') {
        done.pop();
    }
    Ok(done.iter().filter_map(|l| l.trim().parse().ok()).collect())
}

/// Waits until a sample of the accounts just filled hold at least their
/// initial messages (the server may still be delivering from its queue).
async fn settle(
    engine: &Engine,
    store_seed: u64,
    done_before: &HashSet<u32>,
) -> anyhow::Result<()> {
    let w = engine.workload();
    let mut rng = fastrand::Rng::with_seed(store_seed ^ 0x5e77);
    let mut sample: Vec<(u32, usize)> = (0..400)
        .map(|_| rng.u32(1..=w.users))
        .filter(|u| !done_before.contains(u))
        .map(|u| (u, init::initial_mailbox(store_seed, u).len()))
        .filter(|&(_, n)| n > 0)
        .collect();
    sample.sort_unstable();
    sample.dedup();
    sample.truncate(100);
    let start = Instant::now();
    let deadline = start + FILL_SETTLE;
    let mut said = start;
    loop {
        let users: Vec<u32> = sample.iter().map(|&(u, _)| u).collect();
        let (_, counts) = init::check_accounts(w, users, 8).await;
        let behind: Vec<u32> = counts
            .iter()
            .filter(|(u, n)| {
                let want = sample.iter().find(|(s, _)| s == u).map_or(0, |&(_, n)| n);
                n.is_none_or(|n| (n as usize) < want)
            })
            .map(|&(u, _)| u)
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "{} of {} sampled mailboxes still lack their initial mail after {} s (e.g. {}): is the server delivering?",
                behind.len(),
                sample.len(),
                FILL_SETTLE.as_secs(),
                w.account(behind[0])
            );
        }
        if said.elapsed() >= Duration::from_secs(15) {
            said = Instant::now();
            eprintln!(
                "stoa bench: waiting for the server to deliver the fill: {} of {} sampled mailboxes incomplete after {} s",
                behind.len(),
                sample.len(),
                start.elapsed().as_secs()
            );
        }
        sample.retain(|(u, _)| behind.contains(u));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Checks a random sample of mailboxes against the steady state.
async fn check_store(engine: &Engine, args: &Options) -> StoreCheck {
    let w = engine.workload();
    let sample: StoreSample =
        init::sample_store(w, args.check_sample.max(1), args.store_seed ^ 0xc4ec, 8).await;
    let notes = init::judge_sample(&sample);
    let checked = (sample.mailboxes - sample.failed).max(1);
    StoreCheck {
        mailboxes: sample.mailboxes,
        messages: sample.messages,
        octets: sample.octets,
        empty: sample.empty,
        mean_messages: sample.messages as f64 / checked as f64,
        mean_size: if sample.messages == 0 {
            0.0
        } else {
            sample.octets as f64 / sample.messages as f64
        },
        passed: notes.is_empty(),
        notes,
    }
}

fn print_store_check(c: &StoreCheck) {
    eprintln!(
        "stoa bench: store check: {} mailboxes, {:.2} messages each (steady state 3.43), {:.1} KB mean size (24.5), {:.1} % empty (26.5): {}",
        c.mailboxes,
        c.mean_messages,
        c.mean_size / 1024.0,
        c.empty as f64 * 100.0 / c.mailboxes.max(1) as f64,
        if c.passed {
            "ok".to_owned()
        } else {
            c.notes.join("; ")
        }
    );
}

/// `stoa bench mail-users`: the accounts for another server.
pub fn write_users(args: &UsersOptions) -> anyhow::Result<()> {
    use std::io::BufWriter;
    let domain = stoa_directory::address::normalize_domain(&args.domain)
        .map_err(|e| anyhow::anyhow!("--domain {}: {e}", args.domain))?;
    let hash = if args.format == UsersFormat::Dovecot {
        let cost = stoa_directory::password::PasswordCost::default();
        Some(
            stoa_directory::password::hash_password(&args.password, &cost)
                .context("cannot hash the password")?,
        )
    } else {
        None
    };
    let dir = args
        .out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("cannot create a file in {}", dir.display()))?;
    {
        let mut out = BufWriter::new(tmp.as_file_mut());
        for n in 1..=args.users {
            match &hash {
                Some(h) => writeln!(out, "user{n}@{domain}:{{ARGON2ID}}{h}"),
                None => writeln!(out, "user{n}@{domain}"),
            }
            .context("cannot write the users")?;
        }
        out.flush().context("cannot write the users")?;
    }
    tmp.as_file()
        .sync_all()
        .context("cannot sync the users file")?;
    tmp.persist(&args.out)
        .with_context(|| format!("cannot write {}", args.out.display()))?;
    eprintln!(
        "stoa bench: {} users of {domain} written to {}",
        args.users,
        args.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options of `stoa bench mail` plus `extra`, as the binary's defaults
    /// make them.
    fn args(extra: &[&str]) -> Options {
        let mut o = Options {
            smtp: None,
            pop3: None,
            rate: None,
            users: None,
            domain: "stoa.test".into(),
            remote_domain: "remote.test".into(),
            password: "stoa-bench".into(),
            sink_listen: None,
            profile: ProfileName::Quick,
            warmup: None,
            run_time: None,
            cooldown: None,
            levels: vec![80, 100, 120],
            find_max: false,
            init_only: false,
            init_journal: None,
            init_connections: 8,
            check_sample: 200,
            probe_share: None,
            reply_timeout: Duration::from_secs(60),
            threads: 1,
            drain_limit: None,
            seed: None,
            store_seed: 2001,
            server_software: None,
            server_pid: Vec::new(),
            out: None,
            server_exe: None,
        };
        let secs = |v: &str| Duration::from_secs(v.trim_end_matches('s').parse().expect("secs"));
        for pair in extra.chunks(2) {
            match pair {
                ["--rate", v] => o.rate = Some(v.parse().expect("rate")),
                ["--users", v] => o.users = Some(v.parse().expect("users")),
                ["--probe-share", v] => o.probe_share = Some(v.parse().expect("share")),
                ["--profile", "standard"] => o.profile = ProfileName::Standard,
                ["--run-time", v] => o.run_time = Some(secs(v)),
                ["--find-max", ..] => o.find_max = true,
                other => unreachable!("not a test flag: {other:?}"),
            }
        }
        o
    }

    #[test]
    fn settings_follow_the_rate_and_the_store() {
        let s = settings(&args(&[])).expect("defaults");
        assert_eq!((s.rate, s.users), (20.0, 4_000));
        assert_eq!(s.phases.run, Duration::from_secs(60));
        let s = settings(&args(&["--rate", "7.5"])).expect("rate");
        assert_eq!(s.users, 1_500);
        let s = settings(&args(&["--users", "1000"])).expect("users");
        assert_eq!(s.rate, 5.0);
        // A store may be bigger than the rate needs, never smaller.
        assert!(settings(&args(&["--users", "1000", "--rate", "2"])).is_ok());
        let e = settings(&args(&["--users", "1000", "--rate", "6"])).expect_err("too small");
        assert!(e.to_string().contains("1200 accounts"), "{e}");
        // --find-max starts at an eighth of the capacity.
        let s = settings(&args(&["--users", "80000", "--find-max"])).expect("find-max");
        assert_eq!(s.rate, 50.0);
        let s = settings(&args(&["--profile", "standard", "--run-time", "90s"])).expect("custom");
        assert_eq!(
            (s.phases.profile, s.phases.warmup),
            ("custom", Duration::from_secs(300))
        );
        assert!(settings(&args(&["--run-time", "0s"])).is_err());
        let mut zero = args(&[]);
        zero.reply_timeout = Duration::ZERO;
        assert!(settings(&zero).is_err());
    }

    #[test]
    fn probe_share_has_a_floor_at_small_rates() {
        // 1 % at 7,500 msgs/min (237.5 SMTP sessions/s: 2.4 probes/s).
        assert_eq!(probe_share(&args(&[]), 7_500.0), PROBE_SHARE);
        // At 20 msgs/min (0.63 SMTP sessions/s) one probe per 10 s is 15.8 %.
        let share = probe_share(&args(&[]), 20.0);
        assert!((share - 0.1 / (20.0 / 60.0 * 1.9)).abs() < 1e-9, "{share}");
        assert_eq!(probe_share(&args(&["--probe-share", "0.2"]), 20.0), 0.2);
    }

    #[test]
    fn the_journal_resumes_only_its_own_fill() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal");
        let header = "stoa-bench-mail-init v1 users=10 domain=stoa.test store-seed=1";
        assert!(
            read_journal(&path, header)
                .expect("missing is empty")
                .is_empty()
        );
        // A torn last line (a crash mid-write of "123") is ignored.
        std::fs::write(&path, format!("{header}\n3\n1\n7\n12")).expect("write");
        let done = read_journal(&path, header).expect("read");
        assert_eq!(done, HashSet::from([1, 3, 7]));
        std::fs::write(&path, format!("{header}\n3\n1\n7\n123\n")).expect("write");
        assert_eq!(read_journal(&path, header).expect("read").len(), 4);
        let other = "stoa-bench-mail-init v1 users=20 domain=stoa.test store-seed=1";
        let e = read_journal(&path, other).expect_err("another fill");
        assert!(e.to_string().contains("journal of another fill"), "{e}");
    }
}
