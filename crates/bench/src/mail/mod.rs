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
//! With `--agents` the four streams run on `stoa bench agent` daemons, each an
//! even share of every stream and a disjoint share of the mailboxes, while this
//! process keeps the sink, the store's fill and check, the delivery probes, the
//! QoS tally and the report (`crate::agent::mail` says how the load is split).
//!
//! Figures are "SPECmail2001-style, not SPEC results": SPEC and SPECmail are
//! trademarks of the Standard Performance Evaluation Corporation.

mod compliance;
mod fill;
mod level;
mod options;
pub(crate) mod run;
mod server;
pub(crate) mod tiers;

use std::io::Write as _;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail};
use stoa_mail2001::Rates;
use stoa_mailgen::engine::{Engine, Part, RETRY_INTERVAL, Workload};
use stoa_mailgen::sink::Sink;

pub(crate) use compliance::{NOTE as COMPLIANCE_NOTE, kit_run};
pub use fill::default_journal;
use fill::{check_store, fill_store, print_store_check};
use level::run_level;
pub use options::{AccessName, Options, ProfileName, UsersFormat, UsersOptions};
use run::{LevelResult, MailRun, Phases, StoreCheck, Trial};
pub use tiers::{Front, TierCount, TierNote, TierSpec};

/// The white paper's phases: 5 min warm-up, 60 min measurement, 15 min
/// cool-down per level ((WP) figure "Phases of a Benchmark Run").
const STANDARD: Phases = Phases {
    profile: "standard",
    warmup: Duration::from_secs(300),
    run: Duration::from_secs(3600),
    cooldown: Duration::from_secs(900),
};

/// Short phases for a first run: measured long enough that, with the probe
/// share the quick profile raises ([`quick_probe_share`]), every level of the
/// default run (20 msgs/min) has the probes its Delivery Time row needs, so
/// the run ends with a verdict. About 3.5 min per level.
const QUICK: Phases = Phases {
    profile: "quick",
    warmup: Duration::from_secs(10),
    run: Duration::from_secs(180),
    cooldown: Duration::from_secs(20),
};

/// Delivery probes the quick profile plans for its lowest level: the 59 a
/// Delivery Time row needs (`qos::MIN_DELIVERY_PROBES`) with room for chance
/// (Poisson with mean 80: fewer than 59 in under 1 % of levels).
const QUICK_PROBES: f64 = 80.0;

/// The rate of the built-in run when neither --rate nor --users is given.
const DEFAULT_RATE: f64 = 20.0;
/// The white paper's probe share: 1 % of the mail (§2.2), at every rate.
const PROBE_SHARE: f64 = 0.01;
/// Most `--find-max` trials.
const MAX_TRIALS: usize = 12;
/// The default sink address for an external server.
const DEFAULT_SINK: &str = "127.0.0.1:2526";

/// The interpretations printed in every report's notes.
const CHOICES: [&str; 11] = [
    "A session is judged if it starts inside the measurement window; load continues through the cool-down, then the level waits for judged sessions (quick profile: at most 2 min, standard: 20 min) and counts those still running as unfinished, not as errors.",
    "\"SMTP Data\" and \"POP Retrieve\" (5 s) time the command's first reply (354, +OK); the whole transfer is judged against 5 s + size / 3,000 B/s as \"SMTP Data Response Time\" and \"POP Retrieve Response Time\".",
    "Error rate = sessions that ended in an error (SMTP and POP connect errors, protocol errors and timeouts) / all sessions (SMTP and POP Sessions + Disconnects), the formula that gives the published Sun page's 0.00 %, 0.00 % and 2.52 % from its own counters; the delivery probes' polls are not in it. An error is an unexpected reply, no reply within the reply timeout, or the server closing the connection (a connect error before the greeting, a protocol error after it). A connect error is not an attempt of the SMTP/POP Connect rows (on the Sun page POP Connect's attempts are the connections made: POP Quit + POP Disconnect), so those rows judge the greetings of the connections made.",
    "Deliberate disconnects, modelled on the published Sun page's counters (the white paper never mentions them): 1.00 % of SMTP sessions (probes excepted) send half the message after DATA's 354 and hang up without the final dot; each RETR is, with 0.27 %, where the POP session hangs up, right after RETR's +OK (52 %) or after the body, before DELE (48 %), so nothing is deleted. They count as SMTP/POP Disconnect, not as Session and not as errors; as on that page, the broken-off transfer counts as a Response Time attempt that did not pass and the dropped message's remote recipients count in Remote Message Delivery, which caps those rows near 99 %.",
    "Remote Message Delivery counts recipients (as the published row equals \"SMTP To Remote\"); a recipient counts if the sink received it within its level's measurement window plus the 60 s delivery limit (not later in the cool-down or drain); the level waits for that time when its cool-down is shorter, unless all remote mail has arrived.",
    "Delivery probes are 1 % of SMTP sessions at every rate in the standard profile (the white paper's share); the quick profile, its phases unchanged and without --find-max, raises the share (to a whole percent, at most 100 %) so that its lowest level expects 80 probes, as its minutes-long levels would otherwise have one or two; --probe-share overrides both, and the report lists any share but 1 % as a deviation. The Delivery Time row is judged only on 59 probes or more: with fewer, even 100 % cannot tell a server that delivers 95 % in time from a perfect one (0.95^59 < 5 %), so the row and its level are reported as \"too few probes to judge\", neither passed nor failed; no msgs/min is established on such a level, and --find-max carries on past it (only a failing row stops the search) but counts only fully judged trials as passing.",
    "Delivery time runs from the start of the probe's SMTP session (sent at full speed) until a POP poll (every 1 s, TOP of each message) finds it; a probe not found after 120 s, or still polling when its level ends, is not delivered. Probed mailboxes are kept from other POP sessions.",
    "Message sizes are the table's point sizes with 1 KB = 1,024 bytes; SMTP uses HELO; every account has the same password.",
    "Modem sessions (90 % of user SMTP and POP sessions) send and receive at 6,000 B/s throughout; remote-MTA sessions run at full speed.",
    "The retry pool (7.5 % of the accounts) is drawn per run; a repeated check takes a pool mailbox not checked for 300 s, or is skipped and counted as \"Retry Pool Exhausted\".",
    "The store is filled once by SMTP to the steady state (its contents fixed by --store-seed) and checked on a sample of mailboxes before the run; a store with more accounts than 200 × rate serves lower rates. A store declared smaller (--store-users) takes the rate's streams over fewer mailboxes, each receiving and checked more often, with a retry pool of 7.5 % of the 200 × rate accounts the kit would have (at most 90 % of the store), so that re-checks keep the kit's interval. Before the first level the harness writes this machine's dirty pages to disk (sync(2)), so that no run's load starts while its fill is still being written back.",
];

/// How an IMAP run reads the mailboxes, printed with the choices.
const IMAP_CHOICE: &str = "Mailboxes are read over IMAP (--access imap), not POP3 as in the kit: each POP check is LOGIN (the \"IMAP Login\" row, where POP has User ID and Password), SELECT INBOX (\"IMAP Select\", as POP Status), then for each message FETCH n (BODY.PEEK[]) (\"IMAP Fetch\", timed to the first line of its data as POP Retrieve to its +OK; the whole response to the tagged OK is \"IMAP Fetch Response Time\", judged against 5 s + size / 3,000 B/s) and STORE n +FLAGS.SILENT (\\Deleted) (\"IMAP Store\", as POP Delete), EXPUNGE when there was mail (\"IMAP Expunge\", not judged, as POP has no command for it) and LOGOUT (\"IMAP Logout\", as POP Quit); the judged rows and their limits are POP's. Delivery probes poll with FETCH n (BODY.PEEK[HEADER]) as POP's TOP n 0, and the store check counts with EXAMINE and FETCH 1:n (RFC822.SIZE). The IMAP counters count as the POP ones.";

/// The interpretations of a run reading over `access`.
fn choices(access: stoa_mailgen::access::Access) -> Vec<&'static str> {
    let mut choices = CHOICES.to_vec();
    if access == stoa_mailgen::access::Access::Imap {
        choices.push(IMAP_CHOICE);
    }
    choices
}

/// Runs `stoa bench mail`: the sink, the store (filled and checked), the load
/// levels (or the `--find-max` search) and the reports.
pub fn run(args: &Options) -> anyhow::Result<()> {
    args.archive.check()?;
    if args.smtp.is_some() && args.server_cpus.is_some() {
        bail!("--server-cpus pins the built-in server; start an external one with taskset -c LIST");
    }
    // Before the runtime's threads start: they inherit the pinning.
    crate::cpus::pin_harness(args.harness_cpus.as_ref(), args.server_cpus.as_ref())?;
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
    /// Whether the store's size was declared (`--store-users`) instead of
    /// following the rate.
    declared_store: bool,
    /// The highest rate the store carries: 200 accounts per msgs/min, or for
    /// a declared store the rate whose re-checks its retry pool still holds.
    rate_cap: f64,
    /// Accounts in the retry pool.
    retry_pool: u32,
    phases: Phases,
    reply_timeout: Duration,
    drain_limit: Duration,
    seed: u64,
    /// `--tier`s, checked.
    tiers: Arc<tiers::Tiers>,
}

fn settings(args: &Options) -> anyhow::Result<Settings> {
    let store = store(args)?;
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
        rate: store.rate,
        users: store.users,
        declared_store: store.declared,
        rate_cap: store.rate_cap,
        retry_pool: store.retry_pool,
        phases,
        reply_timeout,
        drain_limit,
        seed,
        tiers: Arc::new(tiers::Tiers::new(
            &args.tiers,
            &args.tier_notes,
            &args.tier_counts,
        )?),
    })
}

/// The store's accounts, the rate and what the store carries.
struct Store {
    users: u32,
    declared: bool,
    rate: f64,
    rate_cap: f64,
    retry_pool: u32,
}

/// Share of a declared store the retry pool may take: the rest stays the
/// random pool, which initial checks and delivery probes draw from.
const MAX_RETRY_SHARE: f64 = 0.9;

/// The store of a run: `--users` (at least 200 × rate, the kit's rule) or a
/// declared `--store-users` of any size, and the rate (`--rate`, else what
/// the store holds by the kit's rule).
///
/// A declared store below 200 × rate keeps the kit's re-check interval by a
/// larger retry pool: 7.5 % of the 200 × rate accounts the kit would have
/// (the pool the kit's 600 s mean interval is made for), at most 90 % of the
/// store. With --find-max the trials' rates are not known in advance, so the
/// pool takes the 90 % from the start, and the search stops at the rate whose
/// re-checks that pool still holds (one per mailbox per 300 s): above it,
/// repeated checks would be skipped as "Retry Pool Exhausted".
fn store(args: &Options) -> anyhow::Result<Store> {
    let accounts_for = |r: f64| -> anyhow::Result<u32> {
        let u = (r * 200.0).ceil();
        if u > f64::from(u32::MAX) {
            bail!("--rate {r} needs more than {} accounts", u32::MAX);
        }
        Ok(u as u32)
    };
    if let Some(n) = args.store_users {
        let compliant = f64::from(n) / 200.0;
        let largest_pool = (f64::from(n) * MAX_RETRY_SHARE).floor();
        // Re-checks per second at 100 % are rate / 40 (§1.3): the pool holds
        // RETRY_INTERVAL × rate / 40 of them.
        let per_mpm = Rates::at_load(1.0, 1.0).repeated_pop * RETRY_INTERVAL.as_secs_f64();
        let rate_cap = (largest_pool / per_mpm).max(compliant);
        // A declared store is smaller than the rate needs, so a search starts
        // where the store would be the kit's: the knee is above.
        let rate = args.rate.unwrap_or(compliant);
        if rate > rate_cap + 1e-9 {
            bail!(
                "--rate {rate} needs more repeated POP checks than a store of {n} accounts holds \
                 (one per retry-pool mailbox per {} s, the pool at most {:.0} % of the store): \
                 at most {rate_cap:.1} msgs/min; raise --store-users",
                RETRY_INTERVAL.as_secs(),
                MAX_RETRY_SHARE * 100.0
            );
        }
        let kit_pool = Workload::kit_retry_pool(accounts_for(rate)?);
        let retry_pool = if args.find_max && rate_cap > compliant {
            largest_pool as u32
        } else if f64::from(n) < rate * 200.0 {
            kit_pool.min(largest_pool as u32)
        } else {
            Workload::kit_retry_pool(n)
        };
        return Ok(Store {
            users: n,
            declared: true,
            rate,
            rate_cap,
            retry_pool,
        });
    }
    let users = match (args.users, args.rate) {
        (Some(u), _) => u,
        (None, Some(r)) => accounts_for(r)?,
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
            "--rate {rate} needs {} accounts, but --users is {users}: the store must hold 200 × \
             rate accounts (--store-users declares a smaller one, a non-compliant run)",
            (rate * 200.0).ceil()
        );
    }
    Ok(Store {
        users,
        declared: false,
        rate,
        rate_cap: cap,
        retry_pool: Workload::kit_retry_pool(users),
    })
}

fn resolve(text: &str, flag: &str) -> anyhow::Result<SocketAddr> {
    text.to_socket_addrs()
        .with_context(|| format!("{flag} {text}: not an address (HOST:PORT)"))?
        .next()
        .with_context(|| format!("{flag} {text}: the name has no address"))
}

/// The probe share: `--probe-share`; else, for levels run with the quick
/// profile's phases unchanged, its raised share ([`quick_probe_share`]), so
/// that a first run ends with a verdict; else the white paper's 1 % at every
/// rate (the standard profile, changed phases and `--find-max`, whose trials'
/// rates are not known in advance: a level with too few probes reports its
/// Delivery Time row as "too few probes to judge", `qos::MIN_DELIVERY_PROBES`).
/// A share other than 1 % is a listed deviation.
fn probe_share(args: &Options, s: &Settings) -> f64 {
    if let Some(p) = args.probe_share {
        return p;
    }
    if s.phases.profile != QUICK.profile || args.find_max {
        return PROBE_SHARE;
    }
    let lowest = args
        .levels
        .iter()
        .min()
        .map_or(1.0, |&l| f64::from(l) / 100.0);
    quick_probe_share(s.rate, lowest, s.phases.run)
}

/// The delivery probes a level at `load` × `rate` msgs/min, measured for
/// `run` with `share` of its SMTP sessions probed, expects (`mail2001.md` §1.3:
/// user and remote-MTA sessions both carry probes).
fn expected_probes(rate: f64, load: f64, run: Duration, share: f64) -> f64 {
    Rates::at_load(rate, load).smtp_total() * run.as_secs_f64() * share
}

/// The quick profile's probe share: enough for [`QUICK_PROBES`] expected
/// probes at the lowest load, rounded up to a whole percent, never below the
/// white paper's 1 % nor above every SMTP session. At the default 20 msgs/min
/// and 180 s that is 88 %: nearly all SMTP sessions then run at full speed to
/// a probe mailbox (as its first recipient), which the report lists. Below
/// about 18 msgs/min even 100 % cannot reach 80 probes in 180 s.
fn quick_probe_share(rate: f64, load: f64, run: Duration) -> f64 {
    let sessions = expected_probes(rate, load, run, 1.0);
    if sessions <= 0.0 {
        return 1.0;
    }
    ((QUICK_PROBES / sessions * 100.0).ceil() / 100.0).clamp(PROBE_SHARE, 1.0)
}

async fn run_async(args: &Options) -> anyhow::Result<()> {
    let s = settings(args)?;
    if args.init_only && !args.agents.is_empty() {
        bail!("--init-only fills the store from this host; --agents is for load levels");
    }
    let started = http_date();
    let external = args.smtp.is_some();
    let listener = bind_sink(args, external).await?;
    let sink_addr = listener.local_addr().context("the sink's address")?;
    let access = args.access.access();
    let (smtp, read_addr, mut server) = match external_addresses(args)? {
        Some((smtp, read_addr)) => (smtp, read_addr, None),
        None => {
            let exe = crate::stoa_exe(args.server_exe.as_deref())?;
            let users = server::Users {
                domain: &args.domain,
                count: s.users,
                password: &args.password,
                scheme: args.password_scheme,
            };
            let b = server::BuiltIn::start(
                &exe,
                &users,
                sink_addr,
                &args.server_set,
                args.server_cpus.as_ref(),
                access,
            )
            .await?;
            (b.smtp, b.read_addr, Some(b))
        }
    };
    let workload = workload(args, &s, smtp, read_addr);
    // The agents are reached, checked and given their shares before any load.
    let mut agents = if args.agents.is_empty() {
        None
    } else {
        let a = crate::agent::mail::Agents::connect(&args.agents, &workload).await?;
        eprintln!(
            "stoa bench: {} ready: {}",
            crate::report::count(args.agents.len() as u64, "agent"),
            args.agents.join(", ")
        );
        Some(a)
    };
    let engine = match &agents {
        Some(a) => Engine::with_part(workload, Part::Probes(a.mailboxes())),
        None => Engine::new(workload),
    };
    let sink = Sink::start(listener, engine.on_sink_message());
    eprintln!("stoa bench: sink listening on {}", sink.local_addr());

    let store = prepare_store(&engine, args, smtp, external).await?;
    if args.init_only {
        sink.stop();
        return init_only_result(&store, &s);
    }
    require_steady_state(&store, external, s.users)?;

    let server_pids: Vec<u32> = match &server {
        Some(b) => b.pid().into_iter().collect(),
        None => args.server_pid.clone(),
    };
    let placement = crate::cpus::Placement::measure(&server_pids);
    eprintln!(
        "stoa bench: harness on {}, server on {}",
        placement.harness_words(),
        placement.server_words()
    );
    let (mpm, levels, search) = if args.find_max {
        let (best, trials, results) = find_max(
            &engine,
            &s,
            &server_pids,
            &mut server,
            agents.as_mut(),
            (&placement, args.threads),
        )
        .await?;
        (best.unwrap_or(0.0), results, trials)
    } else {
        let mut levels = Vec::new();
        for (i, &percent) in args.levels.iter().enumerate() {
            let load = f64::from(percent) / 100.0;
            let index = i as u8;
            let level = run_level(
                &engine,
                &s,
                s.rate,
                load,
                index,
                &server_pids,
                agents.as_mut(),
            );
            levels.push(level.await?);
            if let Some(b) = server.as_mut() {
                b.check_alive()?;
            }
        }
        (s.rate, levels, Vec::new())
    };
    sink.stop();
    let agent_infos = agents.as_ref().map(|a| a.infos()).unwrap_or_default();
    if let Some(a) = agents {
        a.end().await;
    }

    let server_software = args.server_software.clone().unwrap_or_else(|| {
        if external {
            "unnamed server".to_owned()
        } else {
            let version = env!("CARGO_PKG_VERSION");
            if args.server_set.is_empty() {
                format!("Stoa {version} (built-in)")
            } else {
                format!("Stoa {version} (built-in; {})", args.server_set.join(", "))
            }
        }
    });
    let run = MailRun {
        server_software,
        password_scheme: (!external).then(|| args.password_scheme.dovecot_name()),
        mpm,
        users: u64::from(s.users),
        declared_store: s.declared_store,
        capacity_mpm: s.rate_cap,
        retry_pool: u64::from(s.retry_pool),
        domain: args.domain.clone(),
        remote_domain: args.remote_domain.clone(),
        smtp: smtp.to_string(),
        access,
        read_addr: read_addr.to_string(),
        sink: sink.local_addr().to_string(),
        phases: s.phases,
        levels,
        search,
        store: Some(store),
        sink_stats: sink.stats(),
        probe_share: engine.workload().probe_share,
        deviations: compliance::deviations(args, &s, mpm, engine.workload().probe_share),
        threads: args.threads,
        agents: agent_infos,
        seed: s.seed,
        started,
        choices: choices(access),
        tiers: s.tiers.summary(),
        placement,
    };
    // Read while the built-in server still runs.
    let processes = crate::archive::command_lines(&server_pids);
    drop(server);
    print_reports(&run, args.out.as_deref())?;
    crate::archive::keep_run(
        &args.archive,
        crate::archive::Kind::Mail,
        crate::report::mail::json(&run),
        (
            &run.server_software,
            format!("SMTP {}, {} {}", run.smtp, access.name(), run.read_addr),
        ),
        processes,
    );
    Ok(())
}

/// Binds the sink's listener: `--sink-listen`, else the default port for an
/// external server (its relay is configured to it) or any free one.
async fn bind_sink(args: &Options, external: bool) -> anyhow::Result<tokio::net::TcpListener> {
    let sink_text = args.sink_listen.clone().unwrap_or_else(|| {
        if external {
            DEFAULT_SINK.to_owned()
        } else {
            "127.0.0.1:0".to_owned()
        }
    });
    let sink_addr = resolve(&sink_text, "--sink-listen")?;
    tokio::net::TcpListener::bind(sink_addr)
        .await
        .with_context(|| format!("cannot listen on {sink_addr} for the sink (--sink-listen)"))
}

/// The addresses of an external server: `--smtp`, and `--pop3` or, with
/// `--access imap`, `--imap`; `None` for the built-in server.
fn external_addresses(args: &Options) -> anyhow::Result<Option<(SocketAddr, SocketAddr)>> {
    let Some(smtp) = &args.smtp else {
        return Ok(None);
    };
    let smtp = resolve(smtp, "--smtp")?;
    let read = match (args.access, &args.pop3, &args.imap) {
        (AccessName::Pop3, Some(pop3), _) => resolve(pop3, "--pop3")?,
        (AccessName::Imap, _, Some(imap)) => resolve(imap, "--imap")?,
        (AccessName::Pop3, None, Some(_)) => {
            bail!("--imap is read with --access imap; without it, give --pop3")
        }
        (AccessName::Pop3, None, None) => bail!("--smtp needs --pop3 (or --access imap --imap)"),
        (AccessName::Imap, _, None) => bail!("--access imap with --smtp needs --imap"),
    };
    Ok(Some((smtp, read)))
}

/// The load's settings for the server at `smtp`, its mailboxes read at
/// `read_addr` over `--access`.
fn workload(args: &Options, s: &Settings, smtp: SocketAddr, read_addr: SocketAddr) -> Workload {
    Workload {
        smtp,
        read_addr,
        access: args.access.access(),
        domain: args.domain.clone(),
        remote_domain: args.remote_domain.clone(),
        users: s.users,
        retry_pool: s.retry_pool,
        password: args.password.clone(),
        reply_timeout: s.reply_timeout,
        probe_share: probe_share(args, s),
        seed: s.seed,
        run_id: (s.seed as u32) ^ ((s.seed >> 32) as u32) ^ 0x5eed_0001,
    }
}

/// The store: the built-in server is filled for every run, an external one by
/// --init-only (resumably, through the journal); then a sample is checked.
async fn prepare_store(
    engine: &Engine,
    args: &Options,
    smtp: SocketAddr,
    external: bool,
) -> anyhow::Result<StoreCheck> {
    if !external || args.init_only {
        let journal = if external {
            Some(match &args.init_journal {
                Some(path) => path.clone(),
                None => default_journal(smtp)?,
            })
        } else {
            None
        };
        fill_store(engine, args, journal.as_deref()).await?;
    }
    let store = check_store(engine, args).await;
    print_store_check(&store);
    // The fill's writes still in the page cache would be written back during
    // the first level, on the disk a server on this machine shares: flushed
    // now, every run (the built-in server filled just now, an external one by
    // --init-only earlier) starts its load from the same clean state.
    let started = std::time::Instant::now();
    tokio::task::spawn_blocking(rustix::fs::sync)
        .await
        .context("sync(2) panicked")?;
    eprintln!(
        "stoa bench: dirty pages written to disk (sync) in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(store)
}

/// The end of an --init-only run: whether the store is ready.
fn init_only_result(store: &StoreCheck, s: &Settings) -> anyhow::Result<()> {
    if !store.passed {
        bail!(
            "the store does not look like the steady state: {}",
            store.notes.join("; ")
        );
    }
    if s.declared_store {
        eprintln!(
            "stoa bench: the store is ready for --store-users {} runs up to {:.0} msgs/min \
             (compliant up to {} msgs/min, 200 accounts each)",
            s.users,
            s.rate_cap,
            s.users / 200
        );
    } else {
        eprintln!(
            "stoa bench: the store is ready for runs up to {} msgs/min",
            s.users / 200
        );
    }
    Ok(())
}

/// A run measures only a store in the steady state.
fn require_steady_state(store: &StoreCheck, external: bool, users: u32) -> anyhow::Result<()> {
    if store.passed {
        return Ok(());
    }
    if external {
        bail!(
            "the store does not look like the steady state ({}); fill it first with \
             `stoa bench mail --init-only --smtp … --pop3 … --users {users}` (or --access imap \
             --imap …)",
            store.notes.join("; "),
        );
    }
    bail!(
        "the built-in store failed its check: {}",
        store.notes.join("; ")
    );
}

/// The text report on standard output; all three in `out` when given.
fn print_reports(run: &MailRun, out: Option<&Path>) -> anyhow::Result<()> {
    let text = crate::report::mail::text(run);
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .context("cannot write the report")?;
    if let Some(dir) = out {
        let paths = crate::report::mail::write_all(run, dir)?;
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

/// `--find-max`: doubles the rate from the first one until a 100 % level fails
/// (or the store's capacity, `Settings::rate_cap`, is reached), then bisects to 5 %.
async fn find_max(
    engine: &Engine,
    s: &Settings,
    server_pids: &[u32],
    server: &mut Option<server::BuiltIn>,
    mut agents: Option<&mut crate::agent::mail::Agents>,
    (placement, threads): (&crate::cpus::Placement, u32),
) -> anyhow::Result<(Option<f64>, Vec<Trial>, Vec<LevelResult>)> {
    let cap = s.rate_cap;
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
        let r = run_level(
            engine,
            s,
            rate,
            1.0,
            i as u8,
            server_pids,
            agents.as_deref_mut(),
        )
        .await?;
        if let Some(b) = server.as_mut() {
            b.check_alive()?;
        }
        // The search follows the judged rows: a level with too few probes to
        // judge its Delivery Time has not failed, and higher rates bring more
        // probes. Only a plain pass counts as passing in the report.
        let no_failure = r.verdict.failures.is_empty();
        trials.push(Trial {
            mpm: rate,
            passed: r.verdict.passed,
            failures: r.verdict.failures.clone(),
            unjudged: r.verdict.unjudged.clone(),
            harness: run::harness_load(placement, threads, &r),
            server: run::server_load(placement, &r),
        });
        if no_failure {
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

/// `stoa bench mail-users`: the accounts for another server. The dovecot format
/// holds one `{SCHEME}value` of `--scheme` for every account, the string
/// Dovecot's passwd-file and Stoa's embedded directory both verify.
pub fn write_users(args: &UsersOptions) -> anyhow::Result<()> {
    use std::io::BufWriter;
    let domain = stoa_directory::address::normalize_domain(&args.domain)
        .map_err(|e| anyhow::anyhow!("--domain {}: {e}", args.domain))?;
    let hash = if args.format == UsersFormat::Dovecot {
        let cost = stoa_directory::scheme::Cost::default();
        Some(
            stoa_directory::scheme::hash(&args.password, args.scheme, &cost)
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
                Some(h) => writeln!(out, "user{n}@{domain}:{h}"),
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
mod tests;
