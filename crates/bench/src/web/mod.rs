//! `stoa bench web`: the SPECweb99-style harness (`web99.md` §3–§8).
//!
//! A run: validation of every request type (§7.2, the run aborts on any error),
//! then for each iteration a `command/Reset`, warm-up (or ramp-up), measurement and
//! ramp-down with paced generators (`stoa-loadgen`), the post.log audit (§7.3), and
//! the manager's numbers; the reported value is the median iteration (§5.5).
//! Without `--target` the harness starts its own `stoa serve --web99` on loopback
//! over a file set kept in a cache directory.
//!
//! Figures are "SPECweb99-style, not SPEC results": SPEC and SPECweb are trademarks
//! of the Standard Performance Evaluation Corporation.

pub(crate) mod compliance;
mod control;
mod options;
mod progress;
mod server;

use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use std::sync::{Arc, Mutex};

use stoa_loadgen::{Live, LiveSnapshot, Plan, Tally};
use stoa_web99::ads::ResetParams;
use stoa_web99::fileset;
use stoa_web99::metrics::{
    GeneratorStats, Iteration, MAX_CLIENT_ERROR_RATE, Validity, client_error_rates,
};
use stoa_web99::workload::{DEFAULT_DECK, Targets};

use crate::agent;
use crate::cpu_of;
pub(crate) use control::INTERPRETATIONS;
pub(crate) use options::http_label;
pub use options::{FilesetWriter, Http, Options, ProfileName};
use server::Wiring;
pub(crate) use server::terminate;

/// Phase lengths of a run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Profile {
    pub(crate) name: &'static str,
    pub(crate) warmup: Duration,
    pub(crate) rampup: Duration,
    pub(crate) run: Duration,
    pub(crate) rampdown: Duration,
    /// Iterations unless `--iterations` says otherwise.
    pub(crate) iterations: u32,
    /// Entries per deck.
    pub(crate) deck: usize,
    /// What makes a connection valid.
    pub(crate) validity: Validity,
}

impl Profile {
    /// Whether the report checks the class mix (§7.3): on standard runs only.
    /// With the quick profile's short phases, long class-3 operations often
    /// straddle a phase boundary and go uncounted, so the check would only
    /// measure that edge effect.
    pub(crate) fn checks_class_mix(&self) -> bool {
        self.name == STANDARD.name
    }
}

/// The kit's required times (§8.1).
const STANDARD: Profile = Profile {
    name: "standard",
    warmup: Duration::from_secs(1200),
    rampup: Duration::from_secs(300),
    run: Duration::from_secs(1200),
    rampdown: Duration::from_secs(300),
    iterations: 3,
    deck: DEFAULT_DECK,
    validity: Validity::EveryClass,
};

/// Short phases for CI and the README. The kit holds a generator valid only if it
/// completes an operation of every class; class 3 is 1 % of requests and takes
/// seconds each at 400 kbit/s, so in a one-minute window some generators meet
/// none (or theirs straddles a phase boundary and goes uncounted). The quick
/// profile therefore uses 100-entry decks (one class-3 entry each) and lets class
/// 3 go without operations; errors in it still invalidate. The report says so.
/// One iteration unless `--iterations` asks for more.
pub(crate) const QUICK: Profile = Profile {
    name: "quick",
    warmup: Duration::from_secs(5),
    rampup: Duration::from_secs(3),
    run: Duration::from_secs(60),
    rampdown: Duration::from_secs(3),
    iterations: 1,
    deck: 100,
    validity: Validity::Class3Optional,
};

/// One measured iteration.
#[derive(Debug)]
pub(crate) struct IterationResult {
    pub(crate) iteration: Iteration,
    pub(crate) tally: Tally,
    pub(crate) audit: Vec<String>,
    /// Time from the generators' start to their end.
    pub(crate) wall: Duration,
    /// CPU time of the server's processes over the same time, when known.
    pub(crate) server_cpu: Option<Duration>,
}

impl IterationResult {
    /// How busy the server was on its `cores` during the run phase, when its
    /// CPU was measured: the phase's operations per second times the server's
    /// CPU per operation over the whole iteration. Its CPU is read only at the
    /// iteration's ends, and the lighter warm-up and ramp-down would make a
    /// share over the whole wall time read low.
    pub(crate) fn server_load(&self, cores: usize) -> Option<crate::cpus::ServerLoad> {
        let cpu = self.server_cpu?;
        let ops: u64 = self.tally.timeline.iter().sum();
        (ops > 0).then(|| {
            let per_op = cpu.as_secs_f64() / ops as f64;
            crate::cpus::ServerLoad::at_rate(per_op, self.iteration.ops_per_sec, cores)
        })
    }

    /// The manager's per-client error check (§7.3), one line for each client and
    /// class over 1.05 % errors: errors that invalidate the iteration. A client
    /// is this process, or each of the `agents` of an `--agents` run.
    pub(crate) fn client_errors(&self, agents: &[String]) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.tally.clients {
            let who = agents
                .get(c.client as usize)
                .map_or_else(|| "this harness".to_owned(), |a| format!("agent {a}"));
            out.extend(client_error_rates(&c.classes).iter().map(|e| {
                format!(
                    "client {} ({who}): class {} error rate {:.3} %, must be under {:.2} %",
                    c.client + 1,
                    e.class,
                    e.rate * 100.0,
                    MAX_CLIENT_ERROR_RATE * 100.0
                )
            }));
        }
        out
    }
}

/// What the report describes.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) args: Options,
    pub(crate) profile: Profile,
    pub(crate) target: String,
    pub(crate) server_software: String,
    /// HTTPS: the generators' TLS settings and the negotiated protocol and suite.
    pub(crate) tls: Option<(stoa_loadgen::TlsPlan, stoa_loadgen::TlsParameters)>,
    pub(crate) directories: u32,
    pub(crate) iterations: Vec<IterationResult>,
    /// The trials of `--find-max`: connections, conforming, percent, passed.
    pub(crate) search: Vec<Trial>,
    /// The CPUs the harness and the server ran on.
    pub(crate) placement: crate::cpus::Placement,
}

impl Run {
    /// The cores the harness could keep busy: its load threads on this
    /// machine's CPUs it may use, or on every agent.
    pub(crate) fn harness_cores(&self) -> usize {
        harness_cores(&self.args, &self.placement)
    }
}

fn harness_cores(args: &Options, placement: &crate::cpus::Placement) -> usize {
    let threads = args.threads as usize;
    if args.agents.is_empty() {
        placement.harness_cores(threads)
    } else {
        threads.max(1) * args.agents.len()
    }
}

/// One trial of `--find-max`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trial {
    pub(crate) connections: u32,
    pub(crate) conforming: u32,
    pub(crate) percent_conform: f64,
    pub(crate) passed: bool,
    /// How busy the harness was on its cores over the trial.
    pub(crate) harness: crate::cpus::HarnessLoad,
    /// How busy the server was on its cores over the trial (`None`: its CPU
    /// was not measured, no `--server-pid`).
    pub(crate) server: Option<crate::cpus::ServerLoad>,
}

impl Run {
    /// What ended the `--find-max` search, and the trial that shows it (the
    /// lowest failing one, just above the score); `None` without a search.
    pub(crate) fn limit(&self) -> Option<(crate::cpus::Limit, Option<&Trial>)> {
        if self.search.is_empty() {
            return None;
        }
        let failed = self
            .search
            .iter()
            .filter(|t| !t.passed)
            .min_by_key(|t| t.connections);
        Some(match failed {
            Some(t) => (crate::cpus::Limit::of(t.harness, t.server), Some(t)),
            None => (crate::cpus::Limit::SearchCap, None),
        })
    }
}

/// Most trials of a search: enough to double from 100 to ~25,000 and bisect.
const MAX_TRIALS: usize = 16;

/// Searches the highest connection count whose iteration is valid and conforms
/// (≥ 95 %): doubling from `--connections` until a trial fails, then bisecting
/// down to a step of 5 % (at least 2 connections). Returns the best passing
/// iteration (if any) and every trial.
async fn find_max(
    args: &Options,
    profile: &Profile,
    ep: &control::Endpoint,
    targets: &Targets,
    server: Option<&server::BuiltIn>,
    server_pids: &[u32],
    placement: &crate::cpus::Placement,
) -> anyhow::Result<(Option<IterationResult>, Vec<Trial>)> {
    let (mut lo, mut hi): (u32, Option<u32>) = (0, None);
    let mut n = args.connections;
    let mut best = None;
    let mut trials = Vec::new();
    while trials.len() < MAX_TRIALS {
        if let Some(s) = server {
            s.ensure_fileset(n).await?;
        }
        let result = iteration(
            args,
            profile,
            ep,
            targets,
            n,
            trials.len() as u32,
            server_pids,
        )
        .await?;
        let passed = result.iteration.conforms()
            && result.iteration.valid == n
            && result.audit.is_empty()
            && result.client_errors(&args.agents).is_empty();
        let harness = crate::cpus::HarnessLoad::new(
            result.tally.cpu,
            result.wall,
            harness_cores(args, placement),
        );
        let server_load = result.server_load(placement.server_cores());
        trials.push(Trial {
            connections: n,
            conforming: result.iteration.conforming,
            percent_conform: result.iteration.percent_conform,
            passed,
            harness,
            server: server_load,
        });
        eprintln!(
            "stoa bench: find-max: {}: {:.1} % conforming, {}; harness {}; server {}",
            crate::report::count(u64::from(n), "connection"),
            result.iteration.percent_conform,
            if passed { "passed" } else { "failed" },
            harness.words(),
            server_load.map_or_else(|| "not measured".to_owned(), |s| s.words())
        );
        if passed {
            lo = n;
            best = Some(result);
        } else {
            hi = Some(n);
        }
        let next = match hi {
            None if n >= args.find_max_limit => break,
            None => n.saturating_mul(2).min(args.find_max_limit),
            Some(h) => lo + (h - lo) / 2,
        };
        let close_enough = hi.is_some_and(|h| h - lo <= (lo / 20).max(2));
        if close_enough || next == n || next == 0 {
            break;
        }
        n = next;
    }
    Ok((best, trials))
}

/// Runs `stoa bench web`: validation, the iterations (or the `--find-max`
/// search) and the reports. `write_fileset` makes the built-in target's file set.
pub fn run(args: &Options, write_fileset: &FilesetWriter) -> anyhow::Result<()> {
    args.archive.check()?;
    // Before any thread of the run starts: they inherit the pinning.
    crate::cpus::pin_harness(args.harness_cpus.as_ref(), args.server_cpus.as_ref())?;
    // Thousands of connections need thousands of descriptors.
    stoa_netkit::limits::raise_nofile();
    // One thread: paced generators are light (thousands fit on one core), and the
    // server under test keeps the other cores.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the harness runtime")?;
    runtime.block_on(run_async(args, write_fileset))
}

/// `--print-urls`: the static URLs of each generator's first deck. Stops quietly
/// when the reader goes away (`| head`).
fn print_urls(args: &Options, profile: &Profile) {
    use std::io::Write as _;
    let dirs = fileset::directories(args.connections);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for g in 0..args.connections {
        let mut rng = stoa_web99::workload::SpecRng::new(stoa_loadgen::generator_seed(0, g));
        for e in stoa_web99::workload::deck(profile.deck, dirs, &mut rng) {
            if writeln!(out, "/{}", e.file).is_err() {
                return;
            }
        }
    }
    let _ = out.flush();
}

/// The phases `args` ask for: the profile's, with `--run-time`.
fn profile_of(args: &Options) -> Profile {
    let mut profile = match args.profile {
        ProfileName::Standard => STANDARD,
        ProfileName::Quick => QUICK,
    };
    if let Some(run) = args.run_time {
        profile.run = run;
    }
    profile
}

async fn run_async(args: &Options, write_fileset: &FilesetWriter) -> anyhow::Result<()> {
    let profile = profile_of(args);
    if args.print_urls {
        print_urls(args, &profile);
        return Ok(());
    }
    let directories = fileset::directories(args.connections);
    let (ep, url_root, host, server) = connect(args, write_fileset).await?;
    let addr = ep.addr;
    let targets = Targets {
        host,
        url_root,
        dynamic: args.dynamic_path.clone(),
        cgi: args.cgi_path.clone(),
        post: args.dynamic_path.clone(),
        version: args.http.version(),
    };
    let server_pids: Vec<u32> = match &server {
        Some(s) => s.pid().into_iter().collect(),
        None => args.server_pid.clone(),
    };
    let placement = crate::cpus::Placement::measure(&server_pids);
    eprintln!(
        "stoa bench: harness on {}, server on {}",
        placement.harness_words(),
        placement.server_words()
    );
    eprintln!("stoa bench: validating every request type against {addr}");
    let validation = control::Validation::new(args.connections, directories, args.static_only);
    let server_software = control::validate(&ep, &targets, &validation)
        .await
        .context("validation failed; the run is aborted")?;
    let tls_parameters = ep.tls_parameters().await.context("TLS")?;
    let mut iterations = Vec::new();
    let mut search = Vec::new();
    if args.find_max {
        let (best, trials) = find_max(
            args,
            &profile,
            &ep,
            &targets,
            server.as_ref(),
            &server_pids,
            &placement,
        )
        .await?;
        search = trials;
        iterations.extend(best);
    } else {
        for i in 0..args.iterations.unwrap_or(profile.iterations) {
            iterations.push(
                iteration(
                    args,
                    &profile,
                    &ep,
                    &targets,
                    args.connections,
                    i,
                    &server_pids,
                )
                .await?,
            );
        }
    }
    let run = Run {
        args: args.clone(),
        profile,
        target: args
            .target
            .clone()
            .unwrap_or_else(|| format!("built-in stoa serve --web99 on {addr}")),
        server_software,
        tls: ep.tls.clone().zip(tls_parameters),
        directories: iterations
            .first()
            .map_or(directories, |i| fileset::directories(i.iteration.requested)),
        iterations,
        search,
        placement,
    };
    crate::report::web::emit(&run)?;
    crate::archive::keep_run(
        &args.archive,
        crate::archive::Kind::Web,
        crate::report::web::json(&run),
        (&run.server_software, run.target.clone()),
        crate::archive::command_lines(&server_pids),
    );
    Ok(())
}

async fn iteration(
    args: &Options,
    profile: &Profile,
    ep: &control::Endpoint,
    targets: &Targets,
    connections: u32,
    index: u32,
    server_pids: &[u32],
) -> anyhow::Result<IterationResult> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let e1 = (now % 360) as u32;
    let expired = [e1, (e1 + 100) % 360];
    let warmup = if index == 0 {
        profile.warmup
    } else {
        profile.rampup
    };
    if !args.static_only {
        let clients = args.agents.len().max(1) as u32;
        let params = reset_params(profile, connections, clients, warmup, expired);
        control::reset(ep, targets, &params).await?;
    }
    eprintln!(
        "stoa bench: iteration {}: {}, warm-up {}s, run {}s, ramp-down {}s",
        index + 1,
        crate::report::count(u64::from(connections), "connection"),
        warmup.as_secs(),
        profile.run.as_secs(),
        profile.rampdown.as_secs()
    );
    let plan = plan_of(args, profile, ep, targets, connections, warmup, expired);
    let phases = [
        (if index == 0 { "warm-up" } else { "ramp-up" }, warmup),
        ("run", profile.run),
        ("ramp-down", profile.rampdown),
    ];
    let server_before = cpu_of(server_pids);
    let started = std::time::Instant::now();
    let tally = run_load(&args.agents, &plan, index, phases).await?;
    let wall = started.elapsed();
    let server_cpu = server_before
        .zip(cpu_of(server_pids))
        .map(|(before, after)| after.saturating_sub(before));
    let audit = if args.static_only {
        Vec::new()
    } else {
        let records = control::fetch_log(ep, targets).await?;
        control::audit(&records, tally.posts)
    };
    let generators: Vec<GeneratorStats> = tally.generators.clone();
    let iteration = Iteration::score_by(
        &generators,
        connections,
        profile.run.as_secs_f64(),
        profile.validity,
    );
    Ok(IterationResult {
        iteration,
        tally,
        audit,
        wall,
        server_cpu,
    })
}

/// The Reset before an iteration (§6.6): `maxthread` as the manager computes it
/// from its `clients` (this process, or each agent), `pttime` the iteration's
/// phases.
fn reset_params(
    profile: &Profile,
    connections: u32,
    clients: u32,
    warmup: Duration,
    expired: [u32; 2],
) -> ResetParams {
    ResetParams {
        maxload: connections,
        pttime: (warmup + profile.run + profile.rampdown).as_secs() as u32,
        maxthread: stoa_web99::manager::maxthread(connections, clients),
        expired,
    }
}

/// Where the load goes: the `--target` server, or the built-in one started
/// here. Returns the endpoint, the file set's URL root, the `Host` header and
/// the built-in server (kept running while it is held).
async fn connect(
    args: &Options,
    write_fileset: &FilesetWriter,
) -> anyhow::Result<(control::Endpoint, String, String, Option<server::BuiltIn>)> {
    let https = args.tls
        || args
            .target
            .as_deref()
            .is_some_and(|t| t.starts_with("https://"));
    if args.http.is_http2() && !https {
        anyhow::bail!(
            "--http 2 needs HTTPS (--tls, or an https:// target): HTTP/2 is offered over TLS only"
        );
    }
    match &args.target {
        Some(_) if args.tls => {
            anyhow::bail!("--tls is for the built-in target; give the server as an https:// URL")
        }
        Some(_) if args.server_cpus.is_some() => anyhow::bail!(
            "--server-cpus pins the built-in server; start an external one with taskset -c LIST"
        ),
        Some(url) => {
            let t = parse_target(url)?;
            let tls = t.tls.then(|| tls_plan(args, &t.host)).transpose()?;
            Ok((
                control::Endpoint::new(t.addr, tls)?,
                t.root,
                t.authority,
                None,
            ))
        }
        None => {
            let wiring = Wiring {
                exe: args.server_exe.clone(),
                write_fileset: Arc::clone(write_fileset),
            };
            let s = server::BuiltIn::start(
                wiring,
                args.connections,
                args.tls,
                args.server_cpus.as_ref(),
            )
            .await?;
            let tls = s.cert_pem.clone().map(|pem| stoa_loadgen::TlsPlan {
                server_name: "localhost".into(),
                resume_ratio: args.tls_resume,
                ca_pem: Some(pem),
                insecure: false,
                http2: args.http.is_http2(),
            });
            let ep = control::Endpoint::new(s.addr, tls)?;
            Ok((ep, String::new(), s.addr.to_string(), Some(s)))
        }
    }
}

/// The generators' plan for an iteration of `profile` at `connections`, with
/// its warm-up (or ramp-up) and the ads expired by the reset.
fn plan_of(
    args: &Options,
    profile: &Profile,
    ep: &control::Endpoint,
    targets: &Targets,
    connections: u32,
    warmup: Duration,
    expired: [u32; 2],
) -> Plan {
    Plan {
        addr: ep.addr,
        targets: targets.clone(),
        connections,
        directories: fileset::directories(connections),
        warmup,
        run: profile.run,
        rampdown: profile.rampdown,
        static_only: args.static_only,
        expired,
        client: 0,
        first_user: 0,
        deck_size: profile.deck,
        closed_loop: args.closed_loop,
        threads: args.threads,
        tls: ep.tls.clone(),
    }
}

/// Runs `plan` in this process, or split over the `agents`, with the
/// iteration's progress line.
async fn run_load(
    agents: &[String],
    plan: &Plan,
    index: u32,
    phases: [(&'static str, Duration); 3],
) -> anyhow::Result<Tally> {
    if agents.is_empty() {
        let live = Arc::new(Live::default());
        let source = Arc::clone(&live);
        let progress =
            progress::Progress::start(index + 1, phases, Arc::new(move || source.snapshot()));
        let tally = stoa_loadgen::run(plan, live).await;
        progress.finish();
        Ok(tally)
    } else {
        let live = Arc::new(Mutex::new(Vec::new()));
        let source = Arc::clone(&live);
        let progress = progress::Progress::start(
            index + 1,
            phases,
            Arc::new(move || {
                let mut sum = LiveSnapshot::default();
                if let Ok(l) = source.lock() {
                    l.iter().for_each(|s| sum += *s);
                }
                sum
            }),
        );
        let tally = agent::run_remote(agents, plan, live).await;
        progress.finish();
        tally
    }
}

/// The generators' TLS settings for an https target named `host`.
fn tls_plan(args: &Options, host: &str) -> anyhow::Result<stoa_loadgen::TlsPlan> {
    let ca_pem = match &args.tls_ca {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("--tls-ca {}", path.display()))?,
        ),
        None => None,
    };
    Ok(stoa_loadgen::TlsPlan {
        server_name: host.to_owned(),
        resume_ratio: args.tls_resume,
        ca_pem,
        insecure: args.tls_insecure,
        http2: args.http.is_http2(),
    })
}

/// A parsed `--target`.
#[derive(Debug, PartialEq)]
struct TargetUrl {
    addr: SocketAddr,
    /// Path of the file set's parent (`""` for the document root).
    root: String,
    /// `host[:port]` as written, for the `Host` header.
    authority: String,
    /// The host alone, for SNI and the certificate check.
    host: String,
    tls: bool,
}

/// `http[s]://host[:port][/root]` → where to connect and what to send.
fn parse_target(url: &str) -> anyhow::Result<TargetUrl> {
    let (rest, tls, port) = if let Some(rest) = url.strip_prefix("http://") {
        (rest, false, 80)
    } else if let Some(rest) = url.strip_prefix("https://") {
        (rest, true, 443)
    } else {
        anyhow::bail!("--target must be an http:// or https:// URL, not {url:?}");
    };
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    // `[v6]:port`, `[v6]`, `host:port` or `host`.
    let (host, explicit_port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (h, after) = v6
                .split_once(']')
                .with_context(|| format!("unclosed '[' in {authority}"))?;
            (h, after.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let port = match explicit_port {
        Some(p) => p
            .parse::<u16>()
            .with_context(|| format!("bad port in {authority}"))?,
        None => port,
    };
    let addr = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host}"))?
        .next()
        .with_context(|| format!("{host} has no address"))?;
    Ok(TargetUrl {
        addr,
        root: path.to_owned(),
        authority: authority.to_owned(),
        host: host.to_owned(),
        tls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 18, item 9: the Reset sent `maxthread = connections`; the manager
    /// sends clients × the share each had before the remainder was handed out.
    #[test]
    fn reset_maxthread_as_the_manager_computes_it() {
        let warmup = Duration::from_secs(5);
        let alone = reset_params(&QUICK, 10, 1, warmup, [1, 101]);
        assert_eq!((alone.maxload, alone.maxthread), (10, 10));
        assert_eq!(alone.pttime, 5 + 60 + 3);
        // Three agents running 3, 4 and 3 connections.
        let agents = reset_params(&QUICK, 10, 3, warmup, [1, 101]);
        assert_eq!((agents.maxload, agents.maxthread), (10, 9));
        assert_eq!(agents.expired, [1, 101]);
    }

    #[test]
    fn targets() {
        let t = parse_target("http://127.0.0.1:8080/web").expect("http");
        assert_eq!(t.addr, "127.0.0.1:8080".parse().expect("addr"));
        assert_eq!(
            (t.root.as_str(), t.authority.as_str()),
            ("/web", "127.0.0.1:8080")
        );
        assert!(!t.tls);
        let t = parse_target("https://127.0.0.1/").expect("https");
        assert_eq!(t.addr.port(), 443);
        assert_eq!((t.host.as_str(), t.root.as_str()), ("127.0.0.1", ""));
        assert!(t.tls);
        let t = parse_target("https://[::1]:8443").expect("v6");
        assert_eq!(t.addr, "[::1]:8443".parse().expect("addr"));
        assert_eq!(t.host, "::1");
        assert_eq!(parse_target("http://[::1]").expect("v6").addr.port(), 80);
        assert!(parse_target("ftp://x").is_err());
        assert!(parse_target("http://127.0.0.1:notaport").is_err());
        assert!(parse_target("http://[::1").is_err());
    }
}
