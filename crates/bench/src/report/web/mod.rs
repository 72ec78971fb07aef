//! The report of `stoa bench web`: a document shaped like the published
//! SPECweb99 result pages (`published-results.md`: Performance, Configuration,
//! Benchmark Configuration, Notes, Test Run Details), rendered as text with
//! aligned tables and as an HTML page with the same tables and charts of the
//! median iteration, and JSON with every figure (`json.rs`).

mod json;
#[cfg(test)]
mod tests;

use std::time::Duration;

use stoa_web99::fileset;
use stoa_web99::metrics::{
    CONFORM_BYTES_PER_SEC, Iteration, LINE_BYTES_PER_SEC, SPEED_STEPS, Validity, median_iteration,
};
use stoa_web99::workload::CLASS_MIX;

use super::doc::{Block, Cell, Document, Table, cells};
use super::svg::Marks;
use super::text::Layout;
use super::{count, html, svg, text};
use crate::compliance::{BOX_TITLE, Deviation, NON_COMPLIANT};
use crate::cpus::HarnessLoad;
use crate::web::{IterationResult, Run, compliance, http_label};

/// The notice every report carries.
pub(super) const NOTICE: &str = "SPECweb99-style result; not a SPEC result. SPEC and SPECweb are trademarks of the \
     Standard Performance Evaluation Corporation.";
/// The notice of an HTTPS run.
const NOTICE_SSL: &str = "SPECweb99_SSL-style result; not a SPEC result. SPEC and SPECweb are trademarks \
     of the Standard Performance Evaluation Corporation.";

/// Prints the text report and writes the files asked for.
#[allow(clippy::print_stdout, reason = "the report is the command's output")]
pub(crate) fn emit(run: &Run) -> anyhow::Result<()> {
    let text = text::render(&document(run, false), Layout::Plain);
    print!("{text}");
    if let Some(dir) = &run.args.out {
        let json = serde_json::to_string_pretty(&json::to_json(run))?;
        super::write_files(
            dir,
            &[
                ("report.txt", &text),
                ("report.json", &json),
                ("report.html", &html::render(&document(run, true))),
            ],
        )?;
        println!("\nreports written to {}", dir.display());
    }
    Ok(())
}

/// The run's JSON, as `report.json` holds it.
pub(crate) fn json(run: &Run) -> serde_json::Value {
    json::to_json(run)
}

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

/// The median iteration's index (§5.5).
fn median(run: &Run) -> Option<usize> {
    let its: Vec<Iteration> = run.iterations.iter().map(|i| i.iteration.clone()).collect();
    median_iteration(&its)
}

/// The connections asked for (of the reported trial, for `--find-max`).
fn requested(run: &Run) -> u32 {
    run.iterations
        .first()
        .map_or(run.args.connections, |i| i.iteration.requested)
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
                "iteration {}: {} invalid",
                i + 1,
                count(u64::from(invalid), "connection")
            ));
        }
        if run.profile.checks_class_mix() {
            out.extend(mix_problems(it).map(|p| format!("iteration {}: {p}", i + 1)));
        }
        out.extend(
            r.audit
                .iter()
                .map(|p| format!("iteration {}: post.log: {p}", i + 1)),
        );
        out.extend(
            r.client_errors(&run.args.agents)
                .iter()
                .map(|p| format!("iteration {}: {p}", i + 1)),
        );
    }
    out
}

/// Classes whose share of the good operations is off the kit's mix by more
/// than 10.5 %.
fn mix_problems(it: &Iteration) -> impl Iterator<Item = String> + '_ {
    let good: u64 = it.classes.iter().map(|c| c.good).sum();
    it.classes.iter().enumerate().filter_map(move |(class, c)| {
        let share = if good > 0 {
            c.good as f64 / good as f64
        } else {
            0.0
        };
        let target = CLASS_MIX[class];
        ((share - target).abs() > target * 0.105).then(|| {
            format!(
                "class {class} mix {:.2} % outside {:.2} % ± 10.5 %",
                share * 100.0,
                target * 100.0
            )
        })
    })
}

/// The report as a document; `charts` adds the HTML page's charts. The
/// sections follow the published pages'.
fn document(run: &Run, charts: bool) -> Document {
    let mut doc = Document::new(title(run), notice(run));
    let med = median(run);
    let problems = problems(run);
    let score = med.map_or(0, |m| run.iterations[m].iteration.conforming);
    doc.table(labelled([
        ("Target:", run.target.clone()),
        ("Server software:", run.server_software.clone()),
    ]));
    let deviations = compliance::deviations(&run.args, &run.profile);
    doc.para(headline(
        run,
        score,
        deviations.is_empty(),
        problems.is_empty(),
    ));
    deviations_box(&mut doc, &deviations);
    performance(&mut doc, run, score);
    system(&mut doc, run);
    configuration(&mut doc, run);
    doc.heading(1, "Notes");
    doc.push(Block::List(notes(run)));
    details(&mut doc, run, med, charts);
    search(&mut doc, run);
    if let Some(m) = med {
        classes(&mut doc, &run.iterations[m], charts);
        efficiency(&mut doc, run, &run.iterations[m]);
    }
    doc.heading(2, "Errors");
    if problems.is_empty() {
        doc.para("none: every generator was checked on every response (web99.md §7)");
    } else {
        doc.para(problems.join("\n"));
    }
    doc
}

/// The value line: the score, marked non-compliant when the run breaks the
/// kit's run rules and invalid on errors; at a fixed load, the bound that load
/// puts on the score.
fn headline(run: &Run, score: u32, compliant: bool, valid: bool) -> String {
    let mut line = format!("{} = {score}", benchmark(run));
    if !compliant {
        line.push_str(&format!(" ({NON_COMPLIANT})"));
    }
    if !valid {
        line.push_str("  (INVALID TEST: see Errors)");
    }
    let bound = harness_bound(run);
    let limit = run.limit();
    if let Some((limit, trial)) = limit {
        line.push_str(&format!(
            "\nLimit: {}.",
            limit.words(trial.map(|t| t.harness), trial.and_then(|t| t.server))
        ));
    }
    if !bound.is_empty() {
        let share = crate::cpus::HARNESS_BOUND_SHARE * 100.0;
        let bound = bound.join("; ");
        line.push_str(&match limit {
            Some((l, _)) if l.is_servers_score() => format!(
                "\nThe harness used more than {share:.0} % of its cores in {bound}; at the \
                 first failing trial it was not the limit, so the score stands as the server's."
            ),
            _ => format!(
                "\nHARNESS-BOUND: the harness used more than {share:.0} % of its cores ({bound}), \
                 so this figure may be the harness's limit, not the server's; it is not the \
                 server's score."
            ),
        });
    }
    if !run.args.find_max {
        let n = requested(run);
        line.push_str(&format!(
            "\nAt a fixed load of {n} requested connections the score cannot exceed {n}; \
             --find-max searches for the most connections that still conform."
        ));
    }
    line
}

/// The box listing the run's deviations from the kit's run, if any.
fn deviations_box(doc: &mut Document, deviations: &[Deviation]) {
    if deviations.is_empty() {
        return;
    }
    doc.push(Block::Deviations {
        title: BOX_TITLE.to_owned(),
        items: crate::compliance::items(deviations),
        note: compliance::kit_run(),
    });
}

/// The report's notes: how this run departs from the kit's, and what the
/// harness does where the rules are silent.
fn notes(run: &Run) -> Vec<String> {
    let mut notes = Vec::new();
    if run.profile.validity == Validity::Class3Optional {
        notes.push(
            "Quick profile: a connection without any class-3 operation in the short run is not counted \
             invalid (the kit's rule needs every class); class-3 errors still invalidate, and the class mix is \
             not checked. Use --profile standard for the kit's rules."
                .to_owned(),
        );
    }
    if run.tls.is_some() {
        notes.push(
            "The kit's cipher (SSL_RSA_WITH_RC4_128_SHA, RSA-1024) is broken and no longer offered by modern \
             TLS; this run used the protocol, suite and key under SSL Configuration."
                .to_owned(),
        );
    }
    // Where the kit's documents are silent (docs/web99.md), what this harness
    // does.
    notes.extend(crate::web::INTERPRETATIONS.iter().map(|n| (*n).to_owned()));
    notes.extend(compliance::INTERPRETATIONS.iter().map(|n| (*n).to_owned()));
    notes.push(format!(
        "All figures are {} figures measured by stoa bench web {}, not SPEC results.",
        benchmark(run),
        env!("CARGO_PKG_VERSION")
    ));
    notes
}

/// A table of label–value rows, without a header.
fn labelled<const N: usize>(rows: [(&str, String); N]) -> Table {
    let mut t = Table::new(&[]);
    t.left = true;
    for (label, value) in rows {
        t.row(cells([label.to_owned(), value]));
    }
    t
}

fn performance(doc: &mut Document, run: &Run, score: u32) {
    doc.heading(1, "Performance");
    let mut t = Table::new(&["Iteration", "Conforming Simultaneous Connections"]);
    for (i, r) in run.iterations.iter().enumerate() {
        t.row(cells([
            (i + 1).to_string(),
            r.iteration.conforming.to_string(),
        ]));
    }
    t.row(cells(["Median".into(), score.to_string()]));
    doc.table(t);
}

/// The Configuration section: the machine's processor, cores, memory and
/// kernel (server and harness share it), the software, and TLS's settings.
fn system(doc: &mut Document, run: &Run) {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into());
    let cores = crate::cpus::machine_cores();
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
    doc.heading(1, "Configuration");
    doc.heading(2, "Hardware (server and harness on this machine)");
    doc.table(labelled([
        ("Processor", cpu),
        ("# Processors", count(cores as u64, "core")),
        ("Memory", memory),
    ]));
    doc.heading(2, "Software");
    doc.table(labelled([
        ("HTTP Software", run.server_software.clone()),
        ("Kernel", kernel.trim().to_owned()),
        (
            "Harness",
            format!("stoa bench web {}", env!("CARGO_PKG_VERSION")),
        ),
    ]));
    ssl(doc, run);
}

fn configuration(doc: &mut Document, run: &Run) {
    let p = &run.profile;
    doc.heading(1, "Benchmark Configuration");
    doc.table(labelled([
        ("Requested Connections", requested(run).to_string()),
        (
            "Fileset Size (MB)",
            format!("{:.2}", fileset::fileset_mb(run.directories)),
        ),
        ("Directories", run.directories.to_string()),
        ("HTTP version", http_label(run.args.http).to_owned()),
        (
            "Request mix",
            if run.args.static_only {
                "100 % static GET"
            } else {
                "SPECweb99 (70 % static, 30 % dynamic)"
            }
            .to_owned(),
        ),
        (
            "Profile",
            format!(
                "{} (warm-up {} s, ramp-up {} s, run {} s, ramp-down {} s; {})",
                p.name,
                p.warmup.as_secs(),
                p.rampup.as_secs(),
                p.run.as_secs(),
                p.rampdown.as_secs(),
                count(run.iterations.len() as u64, "iteration"),
            ),
        ),
    ]));
}

/// HTTPS runs: the negotiated protocol, suite and key, and the handshakes.
fn ssl(doc: &mut Document, run: &Run) {
    let Some((plan, p)) = &run.tls else {
        return;
    };
    let handshakes = run.iterations.iter().fold([0u64; 2], |[f, r], i| {
        [f + i.tally.handshakes[0], r + i.tally.handshakes[1]]
    });
    doc.heading(2, "SSL Configuration");
    doc.table(labelled([
        ("Protocol", p.protocol.to_string()),
        ("Cipher suite", p.suite.to_string()),
        ("Server key", p.key.to_string()),
        (
            "Session resumption",
            format!(
                "{:.0} % of new connections may resume (--tls-resume)",
                plan.resume_ratio * 100.0
            ),
        ),
        (
            "Handshakes (all phases)",
            format!("{} full, {} resumed", handshakes[0], handshakes[1]),
        ),
    ]));
}

/// The trials of `--find-max`.
fn search(doc: &mut Document, run: &Run) {
    if run.search.is_empty() {
        return;
    }
    doc.heading(2, "Search for the most conforming connections (--find-max)");
    let mut t = Table::new(&[
        "Trial",
        "Connections",
        "Conforming",
        "Percent Conform",
        "Result",
        "Harness of its cores",
        "Server of its cores",
    ]);
    for (i, s) in run.search.iter().enumerate() {
        t.row(cells([
            (i + 1).to_string(),
            s.connections.to_string(),
            s.conforming.to_string(),
            format!("{:.1}%", s.percent_conform),
            if s.passed { "passed" } else { "failed" }.to_owned(),
            format!(
                "{:.1}%{}",
                s.harness.share * 100.0,
                if s.harness.bound() {
                    " (harness-bound)"
                } else {
                    ""
                }
            ),
            s.server.map_or_else(
                || "not measured".to_owned(),
                |l| {
                    format!(
                        "{:.1}%{}",
                        l.share * 100.0,
                        if l.saturated() { " (saturated)" } else { "" }
                    )
                },
            ),
        ]));
    }
    doc.table(t);
    doc.para("The iterations above are the best passing trial's.");
}

/// Every iteration's figures, the median marked, and its cumulative
/// conformance at each speed step.
fn details(doc: &mut Document, run: &Run, med: Option<usize>, charts: bool) {
    doc.heading(1, "Test Run Details");
    let mut t = Table::new(&[
        "Iteration",
        "Conforming Connections",
        "Percent Conform",
        "Throughput ops/sec",
        "Response msec",
        "ops/sec/loadgen",
        "kbit/sec",
    ]);
    for (i, r) in run.iterations.iter().enumerate() {
        let it = &r.iteration;
        let mark = if Some(i) == med { "=>" } else { "  " };
        t.row(cells([
            format!("{mark}{}", i + 1),
            it.conforming.to_string(),
            format!("{:.1}%", it.percent_conform),
            format!("{:.1}", it.ops_per_sec),
            format!("{:.1}", it.response_ms),
            format!("{:.2}", it.ops_per_sec_per_loadgen),
            format!("{:.1}", it.kbit_per_sec),
        ]));
    }
    t.shaded = med;
    doc.table(t);
    if charts {
        doc.push(throughput_chart(run));
    }
    conformance(doc, run);
    if charts {
        doc.push(rate_chart(med.and_then(|m| run.iterations.get(m))));
    }
}

/// Each iteration's cumulative conformance at each speed step.
fn conformance(doc: &mut Document, run: &Run) {
    doc.heading(
        2,
        "Cumulative Conformance (valid connections at or above each rate)",
    );
    let mut head: Vec<String> = vec!["Iteration".into()];
    head.extend(SPEED_STEPS.iter().map(|s| format!("{:.0}", 400.0 * s)));
    if let Some(last) = head.last_mut() {
        last.push_str(" kbit/s");
    }
    let mut t = Table {
        head,
        ..Table::default()
    };
    for (i, r) in run.iterations.iter().enumerate() {
        let it = &r.iteration;
        let mut row = vec![Cell::from((i + 1).to_string())];
        row.extend(it.at_speed.iter().map(|&n| {
            Cell::from(format!(
                "{:.1}%",
                100.0 * f64::from(n) / f64::from(it.requested.max(1))
            ))
        }));
        t.row(row);
    }
    doc.table(t);
}

/// The median iteration's per-class figures, operation times and failures.
fn classes(doc: &mut Document, r: &IterationResult, charts: bool) {
    let it = &r.iteration;
    let good: u64 = it.classes.iter().map(|c| c.good).sum();
    doc.heading(2, "Class details (median iteration)");
    let mut t = Table::new(&[
        "Class",
        "Target mix",
        "Actual mix",
        "Success",
        "Errors",
        "POSTs (all phases)",
        "Response msec (mean)",
        "Std dev",
        "kbit/sec",
    ]);
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
        let actual = if good > 0 {
            100.0 * n / good as f64
        } else {
            0.0
        };
        t.row(cells([
            class.to_string(),
            format!("{:.2}%", CLASS_MIX[class] * 100.0),
            format!("{actual:.2}%"),
            c.good.to_string(),
            c.bad.to_string(),
            c.post.to_string(),
            format!("{mean:.1}"),
            format!("{:.1}", var.max(0.0).sqrt()),
            format!("{kbit:.1}"),
        ]));
    }
    doc.table(t);
    let lat = &r.tally.latency;
    doc.para(format!(
        "Operation time, pacing included (ms): p50 {:.0}  p90 {:.0}  p99 {:.0}  max {:.0}",
        lat.quantile_ms(0.5),
        lat.quantile_ms(0.9),
        lat.quantile_ms(0.99),
        lat.max_ms()
    ));
    if charts {
        doc.push(times_chart(lat));
    }
    if !r.tally.errors.is_empty() {
        let mut lines = vec!["Failed operations by reason".to_owned()];
        lines.extend(r.tally.errors.iter().map(|(k, v)| format!("  {k}: {v}")));
        doc.para(lines.join("\n"));
    }
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
    /// Its share of the cores it could use, and the harness-bound verdict.
    load: HarnessLoad,
    /// The server's share of its cores, when its CPU was measured.
    server_load: Option<crate::cpus::ServerLoad>,
}

fn efficiency_of(run: &Run, r: &IterationResult) -> Efficiency {
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
        load: HarnessLoad::new(r.tally.cpu, r.wall, run.harness_cores()),
        server_load: r.server_load(run.placement.server_cores()),
    }
}

fn efficiency(doc: &mut Document, run: &Run, r: &IterationResult) {
    let e = efficiency_of(run, r);
    let where_ = if run.args.agents.is_empty() {
        format!(
            "{} in this process",
            count(u64::from(run.args.threads), "load thread")
        )
    } else {
        format!(
            "{}: {}",
            count(run.args.agents.len() as u64, "agent"),
            run.args.agents.join(", ")
        )
    };
    doc.heading(2, "Harness efficiency (median iteration)");
    let mut t = labelled([
        ("Load generators", where_),
        (
            "Harness CPU",
            format!(
                "{:.1} s over {:.1} s, {:.1} % of one core",
                e.harness_cpu_s,
                r.wall.as_secs_f64(),
                e.harness_core_share * 100.0
            ),
        ),
        ("Operations (all phases)", e.ops.to_string()),
        (
            "Harness CPU per operation",
            format!("{:.1} µs", e.harness_us_per_op),
        ),
    ]);
    let mut row = |label: &str, value: String| t.row(cells([label.to_owned(), value]));
    match e.server_us_per_op {
        Some(server) => {
            row("Server CPU per operation", format!("{server:.1} µs"));
            row(
                "Harness/server CPU",
                format!("{:.2}", e.harness_us_per_op / server.max(1e-9)),
            );
        }
        None => row(
            "Server CPU per operation",
            "not measured (--server-pid PID for a server on this machine)".into(),
        ),
    }
    if let Some(n) = e.connections_per_core {
        row(
            "Connections per harness core",
            format!("≈ {n:.0} (linear estimate from this load)"),
        );
    }
    if run.args.agents.is_empty() {
        row("Harness CPUs", run.placement.harness_words());
        row("Server CPUs", run.placement.server_words());
    }
    row("Harness load", e.load.words());
    if let Some(l) = e.server_load {
        let saturated = if l.saturated() {
            format!(
                ": saturated (at least {:.0} %)",
                crate::cpus::SERVER_SATURATED_SHARE * 100.0
            )
        } else {
            String::new()
        };
        row("Server load", format!("{}{saturated}", l.words()));
    }
    doc.table(t);
}

/// The harness-bound trials and iterations, in words: a result the harness
/// may have set is never the server's score (issue 16). Empty when none was.
fn harness_bound(run: &Run) -> Vec<String> {
    let mut out: Vec<String> = run
        .search
        .iter()
        .enumerate()
        .filter(|(_, t)| t.harness.bound())
        .map(|(i, t)| {
            format!(
                "find-max trial {} ({} connections, {}): the harness used {:.1} % of its {}",
                i + 1,
                t.connections,
                if t.passed { "passed" } else { "failed" },
                t.harness.share * 100.0,
                count(t.harness.cores as u64, "core")
            )
        })
        .collect();
    if run.search.is_empty() {
        out.extend(run.iterations.iter().enumerate().filter_map(|(i, r)| {
            let e = efficiency_of(run, r);
            e.load.bound().then(|| {
                format!(
                    "iteration {}: the harness used {:.1} % of its {}",
                    i + 1,
                    e.load.share * 100.0,
                    count(e.load.cores as u64, "core")
                )
            })
        }));
    }
    out
}

/// The median iteration's operation-time percentiles, on a log scale: they
/// span milliseconds (static files) to seconds (class 3).
fn times_chart(latency: &stoa_loadgen::Latency) -> Block {
    Block::Chart(
        svg::bars(
            "Operation time",
            "percentile",
            "ms (log scale)",
            &percentiles(latency),
            true,
        ),
        "Operation time percentiles of the median iteration (pacing sleep included), on a log scale.".into(),
    )
}

/// Operations per second over time, every iteration aligned on its run
/// phase, the phases outside the measurement shaded.
fn throughput_chart(run: &Run) -> Block {
    let p = &run.profile;
    // The first iteration warms up, the later ones only ramp up (§8.1); their
    // curves start later, so every run phase begins at `lead`.
    let lead = if run.iterations.len() > 1 {
        p.warmup.max(p.rampup)
    } else {
        p.warmup
    }
    .as_secs_f64();
    let (run_end, end) = (
        lead + p.run.as_secs_f64(),
        lead + (p.run + p.rampdown).as_secs_f64(),
    );
    let marks = Marks {
        bands: vec![(0.0, lead, "warm-up"), (run_end, end, "ramp-down")],
        ..Marks::default()
    };
    Block::Chart(
        svg::lines(
            "Throughput over time",
            "seconds since the iteration started",
            "ops/s",
            &timelines(run, lead),
            &marks,
        ),
        format!(
            "Operations completed per second in every phase; shaded: the warm-up (the first iteration's {} s; \
             later iterations ramp up for {} s before the run) and the {} s ramp-down, which are not measured.",
            p.warmup.as_secs(),
            p.rampup.as_secs(),
            p.rampdown.as_secs()
        ),
    )
}

/// The median iteration's per-connection bit rates, the conformance
/// threshold and the pacing cap marked.
fn rate_chart(r: Option<&IterationResult>) -> Block {
    let marks = Marks {
        x_lines: vec![
            (CONFORMING_KBIT, "320 kbit/s: conforming"),
            (PACED_KBIT, "400"),
        ],
        ..Marks::default()
    };
    Block::Chart(
        svg::histogram(
            "Per-connection bit rate",
            ("kbit/s", "connections"),
            &rate_histogram(r),
            RATE_BIN_KBIT,
            &marks,
        ),
        "Per-connection bit rate of the median iteration, in 20 kbit/s bins (the last: 420 and up); a \
         connection conforms at 320 kbit/s or more and pacing caps it at 400."
            .into(),
    )
}

/// Operations per second of each iteration, all phases, shifted so the run
/// phase starts at `lead` seconds.
fn timelines(run: &Run, lead: f64) -> Vec<(String, Vec<(f64, f64)>)> {
    let p = &run.profile;
    run.iterations
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let own = if i == 0 { p.warmup } else { p.rampup };
            let shift = lead - own.as_secs_f64();
            let points = r
                .tally
                .timeline
                .iter()
                .enumerate()
                .map(|(s, &n)| (s as f64 + shift, n as f64))
                .collect();
            (format!("iteration {}", i + 1), points)
        })
        .collect()
}

/// The bit rate at which a connection conforms, kbit/s (web99.md §5.1).
const CONFORMING_KBIT: f64 = CONFORM_BYTES_PER_SEC * 8.0 / 1000.0;
/// The bit rate pacing holds a connection to, kbit/s (web99.md §5.1).
const PACED_KBIT: f64 = LINE_BYTES_PER_SEC * 8.0 / 1000.0;
/// The bit-rate chart's bin width, kbit/s.
const RATE_BIN_KBIT: f64 = 20.0;

/// Connections per 20 kbit/s bin of their bit rate, `(lower edge, count)`
/// (the last bin: 420 and up).
fn rate_histogram(r: Option<&IterationResult>) -> Vec<(f64, f64)> {
    let mut bins = [0u32; 22];
    for g in r.iter().flat_map(|r| &r.tally.generators) {
        let kbit = g.byte_rate() * 8.0 / 1000.0;
        bins[((kbit / RATE_BIN_KBIT) as usize).min(21)] += 1;
    }
    bins.iter()
        .enumerate()
        .map(|(i, &n)| (i as f64 * RATE_BIN_KBIT, f64::from(n)))
        .collect()
}

/// Operation-time percentiles of an iteration, ms: (label, value).
fn percentiles(latency: &stoa_loadgen::Latency) -> Vec<(String, f64)> {
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
    .map(|(l, p)| ((*l).to_owned(), latency.quantile_ms(*p)))
    .collect()
}
