//! One load level of a run: the four streams at a rate, the CPU they cost, and
//! the live progress line.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use stoa_mail2001::Rates;
use stoa_mailgen::engine::{Engine, LevelPlan, Live, LiveCounts, Phase};
use stoa_mailgen::qos::{self, Outcome};

use super::Settings;
use super::run::LevelResult;
use super::tiers::Window;
use crate::agent::mail::Agents;
use crate::cpu_of;
use crate::proctree::{Sampler, TreeCpu};

/// Runs one level at `load` × `mpm`, with a progress line: in this process,
/// or over the `agents` (their shares and this engine's probes).
pub(super) async fn run_level(
    engine: &Engine,
    s: &Settings,
    mpm: f64,
    load: f64,
    index: u8,
    server_pids: &[u32],
    agents: Option<&mut Agents>,
) -> anyhow::Result<LevelResult> {
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
        "stoa bench: level {label}: {:.2} user SMTP/s, {:.2} remote SMTP/s, {:.2} initial {p}/s, {:.2} repeated {p}/s",
        rates.user_smtp,
        rates.remote_smtp,
        rates.initial_pop,
        rates.repeated_pop,
        p = engine.workload().access.prefix(),
    );
    let live = Arc::new(Live::default());
    let remote = agents.as_ref().map(|a| a.live());
    let progress = progress(&label, &plan, &live, remote);
    let self_pid = [std::process::id()];
    let (harness0, server0, machine0) = (cpu_of(&self_pid), cpu_of(server_pids), machine_busy());
    let started = Instant::now();
    let window = Window::start(&s.tiers, plan.warmup, plan.run);
    let processes = processes_in_window(server_pids, plan.warmup, plan.run);
    let harness_window = harness_in_window(plan.warmup, plan.run);
    let (tally, generators, agents_cpu) = match agents {
        None => (engine.run_level(&plan, &live).await, Vec::new(), None),
        Some(a) => {
            let run = a.run_level(engine, &plan, &live).await;
            if run.is_err() {
                progress.abort();
            }
            run?
        }
    };
    let wall = started.elapsed();
    progress.abort();
    let tiers = window.finish(&s.tiers, &tally).await;
    let server_processes = match processes {
        Some(task) => task.await.ok().flatten(),
        None => None,
    };
    let diff = |a: Option<Duration>, b: Option<Duration>| match (a, b) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    let harness_cpu = diff(harness0, cpu_of(&self_pid));
    let harness_window_cpu = harness_window.await.ok().flatten();
    let server_cpu = diff(server0, cpu_of(server_pids));
    let machine_cpu = diff(machine0, machine_busy());
    let verdict = qos::verdict(&tally);
    eprintln!(
        "stoa bench: level {label}: {} ({} and {} judged)",
        match verdict.outcome {
            Outcome::Passed => "passed".to_owned(),
            Outcome::Failed => format!("failed: {}", verdict.failures.join(", ")),
            Outcome::NotJudged =>
                format!("not judged, no row failed: {}", verdict.unjudged.join(", ")),
        },
        crate::report::count(
            tally.started.user_smtp + tally.started.remote_smtp,
            "SMTP session"
        ),
        crate::report::count(
            tally.started.initial_pop + tally.started.repeated_pop,
            &format!("{} session", tally.access.prefix())
        ),
    );
    Ok(LevelResult {
        load,
        rates,
        tally,
        verdict,
        wall,
        harness_cpu,
        harness_window_cpu,
        server_cpu,
        machine_cpu,
        generators,
        agents_cpu,
        tiers,
        server_processes,
    })
}

/// This process's CPU time over the measurement window, `warmup` to
/// `warmup + run` from now: the harness's share beside the server's.
fn harness_in_window(warmup: Duration, run: Duration) -> tokio::task::JoinHandle<Option<Duration>> {
    let me = [std::process::id()];
    let t0 = tokio::time::Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep_until(t0 + warmup).await;
        let before = cpu_of(&me)?;
        tokio::time::sleep_until(t0 + warmup + run).await;
        Some(cpu_of(&me)?.saturating_sub(before))
    })
}

/// Samples the server's process tree (`pids` and their descendants) every
/// second over the measurement window, `warmup` to `warmup + run` from now;
/// `None` without pids.
fn processes_in_window(
    pids: &[u32],
    warmup: Duration,
    run: Duration,
) -> Option<tokio::task::JoinHandle<Option<TreeCpu>>> {
    if pids.is_empty() {
        return None;
    }
    let pids = pids.to_vec();
    let t0 = tokio::time::Instant::now();
    Some(tokio::spawn(async move {
        tokio::time::sleep_until(t0 + warmup).await;
        let mut sampler = tokio::task::spawn_blocking(move || Sampler::begin(&pids))
            .await
            .ok()??;
        let end = t0 + warmup + run;
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        while tokio::time::Instant::now() + Duration::from_secs(1) < end {
            tick.tick().await;
            sampler = tokio::task::spawn_blocking(move || {
                sampler.sample();
                sampler
            })
            .await
            .ok()?;
        }
        tokio::time::sleep_until(end).await;
        tokio::task::spawn_blocking(move || sampler.end())
            .await
            .ok()
    }))
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
pub(super) fn draw_target() -> indicatif::ProgressDrawTarget {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    }
}

/// A live progress line on a terminal (hidden otherwise): phase, time left,
/// sessions running, started and failed (this process's and the agents',
/// `remote`).
fn progress(
    label: &str,
    plan: &LevelPlan,
    live: &Arc<Live>,
    remote: Option<Arc<Mutex<Vec<LiveCounts>>>>,
) -> tokio::task::JoinHandle<()> {
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
            let mut n = live.counts();
            if let Some(remote) = &remote
                && let Ok(agents) = remote.lock()
            {
                agents.iter().for_each(|a| n += *a);
            }
            let left = |end: Duration| end.saturating_sub(t0.elapsed()).as_secs();
            let state = match phase {
                Phase::Warmup => format!("warm-up {}s left", left(ends[0])),
                Phase::Measure => format!("measurement {}s left", left(ends[1])),
                Phase::Cooldown => format!("cool-down {}s left", left(ends[2])),
                Phase::Drain => format!(
                    "finishing {}",
                    crate::report::count(n.pending, "judged session")
                ),
                Phase::Done => break,
            };
            bar.set_message(format!(
                "{label}: {state} | running {} | started {} | failed {}",
                n.active, n.started, n.failed,
            ));
            bar.tick();
        }
        bar.finish_and_clear();
    })
}
