//! The run's report: text shaped like the published SPECweb99 result pages, and
//! JSON with every figure.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use stoa_loadgen::LiveSnapshot;
use stoa_web99::fileset;
use stoa_web99::metrics::{Iteration, SPEED_STEPS, median_iteration};
use stoa_web99::workload::CLASS_MIX;

use super::Run;
use crate::svg;

/// The notice every report carries.
pub(crate) const NOTICE: &str = "SPECweb99-style result; not a SPEC result. SPEC and SPECweb are trademarks of the \
     Standard Performance Evaluation Corporation.";
/// The notice of an HTTPS run.
pub(crate) const NOTICE_SSL: &str = "SPECweb99_SSL-style result; not a SPEC result. SPEC and SPECweb are trademarks \
     of the Standard Performance Evaluation Corporation.";

/// `SPECweb99-style` or `SPECweb99_SSL-style`.
fn benchmark(run: &Run) -> &'static str {
    if run.tls.is_some() {
        "SPECweb99_SSL-style"
    } else {
        "SPECweb99-style"
    }
}

fn notice(run: &Run) -> &'static str {
    if run.tls.is_some() {
        NOTICE_SSL
    } else {
        NOTICE
    }
}

/// The report's title.
fn title(run: &Run) -> String {
    let mix = if run.args.static_only {
        " (static-only mix)"
    } else {
        ""
    };
    format!("{} result{mix}", benchmark(run))
}

/// Where the progress line reads the generators' live counters.
pub(crate) type LiveSource = Arc<dyn Fn() -> LiveSnapshot + Send + Sync>;

/// A live progress line for one iteration, on a terminal only: phase, time
/// left, operations per second over the last second, and how many of the
/// measured connections conform so far.
pub(crate) struct Progress(ProgressBar);

impl Progress {
    pub(crate) fn start(
        iteration: u32,
        phases: [(&'static str, Duration); 3],
        live: LiveSource,
    ) -> Progress {
        let total: Duration = phases.iter().map(|p| p.1).sum();
        let bar = ProgressBar::new(total.as_secs());
        bar.set_style(
            ProgressStyle::with_template("iteration {prefix} [{bar:25}] {msg}")
                .expect("invariant: valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(iteration.to_string());
        let ticker = bar.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let (mut last_at, mut last_ops) = (started, 0);
            while !ticker.is_finished() {
                let now = Instant::now();
                let elapsed = now - started;
                let mut end = Duration::ZERO;
                let phase = phases
                    .iter()
                    .find(|(_, len)| {
                        end += *len;
                        elapsed < end
                    })
                    .map_or("finishing", |(name, _)| *name);
                let snap = live();
                let rate = (snap.ops - last_ops.min(snap.ops)) as f64
                    / (now - last_at).as_secs_f64().max(1e-3);
                (last_at, last_ops) = (now, snap.ops);
                let conforming = if snap.measured == 0 {
                    "conforming -".to_owned()
                } else {
                    format!("conforming {}/{}", snap.conforming, snap.measured)
                };
                ticker.set_position(elapsed.as_secs().min(total.as_secs()));
                ticker.set_message(format!(
                    "{phase}, {} s left, {rate:.0} ops/s, {conforming}",
                    total.saturating_sub(elapsed).as_secs()
                ));
                std::thread::park_timeout(Duration::from_secs(1));
            }
        });
        Progress(bar)
    }

    pub(crate) fn finish(self) {
        self.0.finish_and_clear();
    }
}

/// Prints the text report and writes the files asked for.
#[allow(clippy::print_stdout, reason = "the report is the command's output")]
pub(crate) fn emit(run: &Run) -> anyhow::Result<()> {
    let text = text(run);
    print!("{text}");
    if let Some(dir) = &run.args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        std::fs::write(dir.join("report.txt"), &text)?;
        let json = serde_json::to_string_pretty(&to_json(run))?;
        std::fs::write(dir.join("report.json"), json)?;
        std::fs::write(dir.join("report.html"), html(run, &text))?;
        println!("\nreports written to {}", dir.display());
    }
    Ok(())
}

fn iterations(run: &Run) -> Vec<&Iteration> {
    run.iterations.iter().map(|i| &i.iteration).collect()
}

fn median(run: &Run) -> Option<usize> {
    let its: Vec<Iteration> = iterations(run).into_iter().cloned().collect();
    median_iteration(&its)
}

/// Problems that make the run invalid (§7.3).
fn problems(run: &Run) -> Vec<String> {
    let mut out = Vec::new();
    for (i, r) in run.iterations.iter().enumerate() {
        let it = &r.iteration;
        if !it.conforms() {
            out.push(format!(
                "iteration {}: {:.1} % conforming, under 95 %",
                i + 1,
                it.percent_conform
            ));
        }
        let invalid = it.requested - it.valid;
        if invalid > 0 {
            out.push(format!(
                "iteration {}: {invalid} invalid connections",
                i + 1
            ));
        }
        let good: u64 = it.classes.iter().map(|c| c.good).sum();
        // With the quick profile's short phases, long class-3 operations often
        // straddle a phase boundary and go uncounted: the mix check would only
        // measure that edge effect, so it applies to standard runs.
        let check_mix = run.profile.name == "standard";
        for (class, c) in it.classes.iter().enumerate().filter(|_| check_mix) {
            let share = if good > 0 {
                c.good as f64 / good as f64
            } else {
                0.0
            };
            let target = CLASS_MIX[class];
            if (share - target).abs() > target * 0.105 {
                out.push(format!(
                    "iteration {}: class {class} mix {:.2} % outside {:.2} % ± 10.5 %",
                    i + 1,
                    share * 100.0,
                    target * 100.0
                ));
            }
        }
        out.extend(
            r.audit
                .iter()
                .map(|p| format!("iteration {}: post.log: {p}", i + 1)),
        );
    }
    out
}

fn text(run: &Run) -> String {
    let mut t = String::new();
    let med = median(run);
    let score = med.map_or(0, |m| run.iterations[m].iteration.conforming);
    let problems = problems(run);
    let _ = writeln!(t, "{}\n\n{}\n", title(run), notice(run));
    let _ = writeln!(
        t,
        "Target:\t{}\nServer software:\t{}\n",
        run.target, run.server_software
    );
    let verdict = if problems.is_empty() {
        ""
    } else {
        "  (INVALID TEST: see Errors)"
    };
    let _ = writeln!(t, "{} = {score}{verdict}\n", benchmark(run));
    let _ = writeln!(
        t,
        "Performance\n\nIteration\tConforming Simultaneous Connections"
    );
    for (i, r) in run.iterations.iter().enumerate() {
        let _ = writeln!(t, "{}\t{}", i + 1, r.iteration.conforming);
    }
    let _ = writeln!(t, "Median\t{score}\n");
    system(&mut t);
    let _ = writeln!(
        t,
        "Benchmark Configuration\n\nRequested Connections\t{}\nFileset Size (MB)\t{:.2}\nDirectories\t{}\n\
         HTTP version\t{}\nRequest mix\t{}\nProfile\t{} (warm-up {} s, ramp-up {} s, run {} s, ramp-down {} s; {} iterations)\n",
        run.iterations
            .first()
            .map_or(run.args.connections, |i| i.iteration.requested),
        fileset::fileset_mb(run.directories),
        run.directories,
        super::options::http_label(run.args.http),
        if run.args.static_only {
            "100 % static GET"
        } else {
            "SPECweb99 (70 % static, 30 % dynamic)"
        },
        run.profile.name,
        run.profile.warmup.as_secs(),
        run.profile.rampup.as_secs(),
        run.profile.run.as_secs(),
        run.profile.rampdown.as_secs(),
        run.iterations.len(),
    );
    if let Some((plan, p)) = &run.tls {
        let handshakes = run.iterations.iter().fold([0u64; 2], |[f, r], i| {
            [f + i.tally.handshakes[0], r + i.tally.handshakes[1]]
        });
        let _ = writeln!(
            t,
            "SSL Configuration\n\nProtocol\t{}\nCipher suite\t{}\nServer key\t{}\nSession resumption\t{:.0} % of new \
             connections may resume (--tls-resume)\nHandshakes (all phases)\t{} full, {} resumed\n\n\
             Note: the kit's cipher (SSL_RSA_WITH_RC4_128_SHA, RSA-1024) is broken and no longer offered by modern \
             TLS; this run used the protocol, suite and key above.\n",
            p.protocol,
            p.suite,
            p.key,
            plan.resume_ratio * 100.0,
            handshakes[0],
            handshakes[1],
        );
    }
    if run.profile.validity == stoa_web99::metrics::Validity::Class3Optional {
        let _ = writeln!(
            t,
            "Note: quick profile. A connection without any class-3 operation in the short run is not counted \
             invalid (the kit's rule needs every class); class-3 errors still invalidate, and the class mix is \
             not checked. Use --profile standard for the kit's rules.\n"
        );
    }
    if !run.search.is_empty() {
        let _ = writeln!(
            t,
            "Search for the most conforming connections (--find-max)\n"
        );
        let _ = writeln!(t, "Trial\tConnections\tConforming\tPercent Conform\tResult");
        for (i, s) in run.search.iter().enumerate() {
            let _ = writeln!(
                t,
                "{}\t{}\t{}\t{:.1}%\t{}",
                i + 1,
                s.connections,
                s.conforming,
                s.percent_conform,
                if s.passed { "passed" } else { "failed" }
            );
        }
        let _ = writeln!(t, "\nThe report below is the best passing trial's.\n");
    }
    details(&mut t, run, med);
    if let Some(m) = med {
        classes(&mut t, &run.iterations[m]);
        efficiency(&mut t, run, &run.iterations[m]);
    }
    let _ = writeln!(t, "Errors\n");
    if problems.is_empty() {
        let _ = writeln!(
            t,
            "none: every generator was checked on every response (web99.md §7)\n"
        );
    } else {
        for p in &problems {
            let _ = writeln!(t, "{p}");
        }
        let _ = writeln!(t);
    }
    t
}

fn system(t: &mut String) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|k| k.parse::<f64>().ok())
        })
        .map_or_else(
            || "unknown".into(),
            |kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0),
        );
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let _ = writeln!(
        t,
        "System (server and harness on this machine)\n\nProcessor\t{cpu}\n# Processors\t{cores} cores\nMemory\t{memory}\n\
         Kernel\t{}\nHarness\tstoa bench web {}\n",
        kernel.trim(),
        env!("CARGO_PKG_VERSION")
    );
}

fn details(t: &mut String, run: &Run, med: Option<usize>) {
    let _ = writeln!(t, "Test Run Details\n");
    let _ = writeln!(
        t,
        "Iteration\tConforming Connections\tPercent Conform\tThroughput ops/sec\tResponse msec\tops/sec/loadgen\tkbit/sec"
    );
    for (i, r) in run.iterations.iter().enumerate() {
        let it = &r.iteration;
        let mark = if Some(i) == med { "=>" } else { "  " };
        let _ = writeln!(
            t,
            "{mark}{}\t{}\t{:.1}%\t{:.1}\t{:.1}\t{:.2}\t{:.1}",
            i + 1,
            it.conforming,
            it.percent_conform,
            it.ops_per_sec,
            it.response_ms,
            it.ops_per_sec_per_loadgen,
            it.kbit_per_sec
        );
    }
    let _ = writeln!(
        t,
        "\nCumulative Conformance (valid connections at or above each rate)\n"
    );
    let steps: Vec<String> = SPEED_STEPS
        .iter()
        .map(|s| format!("{:.0}", 400.0 * s))
        .collect();
    let _ = writeln!(t, "Iteration\t{} kbit/s", steps.join("\t"));
    for (i, r) in run.iterations.iter().enumerate() {
        let it = &r.iteration;
        let pct: Vec<String> = it
            .at_speed
            .iter()
            .map(|&n| {
                format!(
                    "{:.1}%",
                    100.0 * f64::from(n) / f64::from(it.requested.max(1))
                )
            })
            .collect();
        let _ = writeln!(t, "{}\t{}", i + 1, pct.join("\t"));
    }
    let _ = writeln!(t);
}

fn classes(t: &mut String, r: &super::IterationResult) {
    let it = &r.iteration;
    let good: u64 = it.classes.iter().map(|c| c.good).sum();
    let _ = writeln!(t, "Class details (median iteration)\n");
    let _ = writeln!(
        t,
        "Class\tTarget mix\tActual mix\tSuccess\tErrors\tResponse msec (mean)\tStd dev\tkbit/sec"
    );
    for (class, c) in it.classes.iter().enumerate() {
        let n = c.good as f64;
        let mean = if n > 0.0 { c.time / n } else { 0.0 };
        let var = if n > 1.0 {
            (c.time2 - n * mean * mean) / (n - 1.0)
        } else {
            0.0
        };
        let kbit = if c.time > 0.0 {
            c.aggregate_bytes as f64 / (c.time / 1000.0) * 8.0 / 1000.0
        } else {
            0.0
        };
        let _ = writeln!(
            t,
            "{class}\t{:.2}%\t{:.2}%\t{}\t{}\t{mean:.1}\t{:.1}\t{kbit:.1}",
            CLASS_MIX[class] * 100.0,
            if good > 0 {
                100.0 * n / good as f64
            } else {
                0.0
            },
            c.good,
            c.bad,
            var.max(0.0).sqrt(),
        );
    }
    let lat = &r.tally.latency;
    let _ = writeln!(
        t,
        "\nOperation time, pacing included (ms): p50 {:.0}  p90 {:.0}  p99 {:.0}  max {:.0}",
        lat.quantile_ms(0.5),
        lat.quantile_ms(0.9),
        lat.quantile_ms(0.99),
        lat.max_ms()
    );
    if !r.tally.errors.is_empty() {
        let _ = writeln!(t, "\nFailed operations by reason");
        for (k, v) in &r.tally.errors {
            let _ = writeln!(t, "  {k}: {v}");
        }
    }
    let _ = writeln!(t);
}

/// The harness's own cost in one iteration (issue: the harness must never be
/// the bottleneck, and says how close it came).
struct Efficiency {
    /// Operations finished in all phases.
    ops: u64,
    /// Harness CPU, s, and as a share of one core over the iteration.
    harness_cpu_s: f64,
    harness_core_share: f64,
    harness_us_per_op: f64,
    server_us_per_op: Option<f64>,
    /// Connections one harness core would drive at this per-connection cost.
    connections_per_core: Option<f64>,
}

fn efficiency_of(r: &super::IterationResult) -> Efficiency {
    let ops: u64 = r.tally.timeline.iter().sum();
    let cpu = r.tally.cpu.as_secs_f64();
    let share = cpu / r.wall.as_secs_f64().max(1e-9);
    let per_op = |d: Duration| d.as_secs_f64() * 1e6 / ops.max(1) as f64;
    Efficiency {
        ops,
        harness_cpu_s: cpu,
        harness_core_share: share,
        harness_us_per_op: per_op(r.tally.cpu),
        server_us_per_op: r.server_cpu.map(per_op),
        connections_per_core: (share > 0.0).then(|| f64::from(r.iteration.requested) / share),
    }
}

fn efficiency(t: &mut String, run: &Run, r: &super::IterationResult) {
    let e = efficiency_of(r);
    let where_ = if run.args.agents.is_empty() {
        format!("{} load thread(s) in this process", run.args.threads)
    } else {
        format!(
            "{} agent(s): {}",
            run.args.agents.len(),
            run.args.agents.join(", ")
        )
    };
    let _ = writeln!(t, "Harness efficiency (median iteration)\n");
    let _ = writeln!(t, "Load generators\t{where_}");
    let _ = writeln!(
        t,
        "Harness CPU\t{:.1} s over {:.1} s, {:.1} % of one core",
        e.harness_cpu_s,
        r.wall.as_secs_f64(),
        e.harness_core_share * 100.0
    );
    let _ = writeln!(
        t,
        "Operations (all phases)\t{}\nHarness CPU per operation\t{:.1} µs",
        e.ops, e.harness_us_per_op
    );
    match e.server_us_per_op {
        Some(server) => {
            let _ = writeln!(
                t,
                "Server CPU per operation\t{server:.1} µs\nHarness/server CPU\t{:.2}",
                e.harness_us_per_op / server.max(1e-9)
            );
        }
        None => {
            let _ = writeln!(
                t,
                "Server CPU per operation\tnot measured (--server-pid PID for a server on this machine)"
            );
        }
    }
    if let Some(n) = e.connections_per_core {
        let _ = writeln!(
            t,
            "Connections per harness core\t≈ {n:.0} (linear estimate from this load)"
        );
    }
    let _ = writeln!(t);
}

fn to_json(run: &Run) -> serde_json::Value {
    let med = median(run);
    let iterations: Vec<serde_json::Value> = run
        .iterations
        .iter()
        .map(|r| {
            let it = &r.iteration;
            let e = efficiency_of(r);
            let harness = json!({
                "wall_s": r.wall.as_secs_f64(),
                "ops_all_phases": e.ops,
                "cpu_s": e.harness_cpu_s,
                "core_share": e.harness_core_share,
                "cpu_us_per_op": e.harness_us_per_op,
                "server_cpu_us_per_op": e.server_us_per_op,
                "connections_per_core_estimate": e.connections_per_core,
                "threads": run.args.threads,
                "agents": run.args.agents,
            });
            json!({
                "requested": it.requested,
                "valid": it.valid,
                "conforming": it.conforming,
                "percent_conform": it.percent_conform,
                "ops_per_sec": it.ops_per_sec,
                "response_ms": it.response_ms,
                "ops_per_sec_per_loadgen": it.ops_per_sec_per_loadgen,
                "kbit_per_sec": it.kbit_per_sec,
                "at_speed": it.at_speed,
                "classes": it.classes.iter().map(|c| json!({
                    "good": c.good, "bad": c.bad, "time_ms": c.time, "time2": c.time2,
                    "post": c.post, "rate": c.rate, "rate2": c.rate2, "slow_rate": c.slow_rate,
                    "aggregate_bytes": c.aggregate_bytes,
                })).collect::<Vec<_>>(),
                "generator_kbit_per_sec": r.tally.generators.iter().map(|g| g.byte_rate() * 8.0 / 1000.0).collect::<Vec<_>>(),
                "ops_per_second_timeline": r.tally.timeline,
                "errors": r.tally.errors,
                "posts_sent": r.tally.posts,
                "tls_handshakes": { "full": r.tally.handshakes[0], "resumed": r.tally.handshakes[1] },
                "post_log_audit": r.audit,
                "latency_ms": {
                    "p50": r.tally.latency.quantile_ms(0.5),
                    "p90": r.tally.latency.quantile_ms(0.9),
                    "p99": r.tally.latency.quantile_ms(0.99),
                    "p999": r.tally.latency.quantile_ms(0.999),
                    "max": r.tally.latency.max_ms(),
                },
                "harness": harness,
            })
        })
        .collect();
    json!({
        "notice": notice(run),
        "benchmark": if run.args.static_only { format!("{} (static-only)", benchmark(run)) } else { benchmark(run).to_owned() },
        "tls": run.tls.as_ref().map(|(plan, p)| json!({
            "protocol": p.protocol, "suite": p.suite, "key": p.key,
            "resume_ratio": plan.resume_ratio, "server_name": plan.server_name,
        })),
        "score": med.map(|m| run.iterations[m].iteration.conforming),
        "median_iteration": med.map(|m| m + 1),
        "valid": problems(run).is_empty(),
        "problems": problems(run),
        "target": run.target,
        "server_software": run.server_software,
        "requested_connections": run.iterations.first().map_or(run.args.connections, |i| i.iteration.requested),
        "find_max": run.search.iter().map(|s| json!({
            "connections": s.connections, "conforming": s.conforming,
            "percent_conform": s.percent_conform, "passed": s.passed,
        })).collect::<Vec<_>>(),
        "directories": run.directories,
        "fileset_mb": fileset::fileset_mb(run.directories),
        "http_version": super::options::http_label(run.args.http),
        "profile": {
            "name": run.profile.name,
            "warmup_s": run.profile.warmup.as_secs(),
            "rampup_s": run.profile.rampup.as_secs(),
            "run_s": run.profile.run.as_secs(),
            "rampdown_s": run.profile.rampdown.as_secs(),
        },
        "iterations": iterations,
    })
}

/// Operation-time percentiles of an iteration, ms: (label, value).
fn percentiles(latency: &stoa_loadgen::Latency) -> Vec<(String, f64)> {
    let at = |p: f64| latency.quantile_ms(p);
    [
        ("p50", 0.5),
        ("p75", 0.75),
        ("p90", 0.9),
        ("p95", 0.95),
        ("p99", 0.99),
        ("p99.9", 0.999),
        ("max", 1.0),
    ]
    .iter()
    .map(|(l, p)| ((*l).to_owned(), at(*p)))
    .collect()
}

/// The HTML page: the text report, then charts of the median iteration.
fn html(run: &Run, text: &str) -> String {
    let med = median(run).unwrap_or(0);
    let timelines: Vec<(String, Vec<(f64, f64)>)> = run
        .iterations
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let points = r
                .tally
                .timeline
                .iter()
                .enumerate()
                .map(|(s, &n)| (s as f64, n as f64))
                .collect();
            (format!("iteration {}", i + 1), points)
        })
        .collect();
    let mut bins = [0u32; 22];
    if let Some(r) = run.iterations.get(med) {
        for g in &r.tally.generators {
            let kbit = g.byte_rate() * 8.0 / 1000.0;
            bins[((kbit / 20.0) as usize).min(21)] += 1;
        }
    }
    let histogram: Vec<(String, f64)> = bins
        .iter()
        .enumerate()
        .map(|(i, &n)| (format!("{}", i * 20), f64::from(n)))
        .collect();
    let latency = run
        .iterations
        .get(med)
        .map(|r| percentiles(&r.tally.latency))
        .unwrap_or_default();
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}pre{{background:#f6f6f6;padding:1em;overflow:auto}}\
         figure{{margin:1.5em 0}}</style></head><body>\
         <h1>{title}</h1><p><strong>{notice}</strong></p>\
         <figure>{ops}<figcaption>Operations completed per second, all phases (warm-up, run, ramp-down).</figcaption></figure>\
         <figure>{rates}<figcaption>Per-connection bit rate of the median iteration, in 20 kbit/s bins; a connection conforms at 320 kbit/s and pacing caps it at 400.</figcaption></figure>\
         <figure>{lat}<figcaption>Operation time percentiles of the median iteration (pacing sleep included).</figcaption></figure>\
         <h2>Full report</h2><pre>{text}</pre></body></html>\n",
        title = svg::escape(&title(run)),
        notice = svg::escape(notice(run)),
        ops = svg::lines(
            "Throughput over time",
            "seconds since the iteration started",
            "ops/s",
            &timelines
        ),
        rates = svg::bars(
            "Per-connection bit rate",
            "kbit/s",
            "connections",
            &histogram
        ),
        lat = svg::bars("Operation time", "percentile", "ms", &latency),
        text = svg::escape(text),
    )
}
