//! The reports of `stoa bench mail`: text shaped like the published SPECmail2001
//! result pages (`published-results/specmail2001-sun-jsms61-7500.txt`,
//! `mail2001.md` §2.6), JSON with every figure, and a self-contained HTML page
//! (the same tables, plus inline SVG charts).
//!
//! The text and the HTML are rendered from one document model ([`Block`]s), so
//! both always carry the same figures; only the charts are HTML-only.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};
use stoa_loadgen::Latency;
use stoa_mail2001::Rates;
use stoa_mailgen::qos::{self, Row};
use stoa_mailgen::tally::{Function, LevelTally, SizeStats};

use super::run::{LevelResult, MailRun};
use crate::svg;

/// The notice every report carries.
pub(crate) const NOTICE: &str = "SPECmail2001-style result; not a SPEC result. SPEC and SPECmail are trademarks of the Standard Performance Evaluation Corporation.";

/// The benchmark's name as printed.
const BENCHMARK: &str = "SPECmail2001-style";

/// Users per msgs/min (§1.3: 200 users send one message per minute in all).
const USERS_PER_MPM: f64 = 200.0;

/// The percentiles of the times table and JSON.
const PERCENTILES: [(&str, f64); 4] = [("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99)];

// ---------------------------------------------------------------------------
// Figures derived from the run
// ---------------------------------------------------------------------------

/// The highest msgs/min of a passing `--find-max` trial.
fn best_mpm(run: &MailRun) -> Option<f64> {
    run.search
        .iter()
        .filter(|t| t.passed)
        .map(|t| t.mpm)
        .reduce(f64::max)
}

/// The msgs/min the run establishes: for `--find-max` the best passing trial,
/// otherwise the claimed msgs/min when its 100 % level passed.
fn established(run: &MailRun) -> Option<f64> {
    if run.search.is_empty() {
        run.passed().then_some(run.mpm)
    } else {
        best_mpm(run)
    }
}

/// The report's title line.
fn title(run: &MailRun) -> String {
    let claim = established(run).map_or_else(|| "not established".to_owned(), mpm);
    format!(
        "{BENCHMARK} result: {}   msgs/min = {claim}",
        run.server_software
    )
}

/// The "N messages per minute is equivalent to M users" line.
fn equivalence(run: &MailRun) -> String {
    match established(run) {
        Some(n) => format!(
            "{} {BENCHMARK} messages per minute is equivalent to {} users.",
            mpm(n),
            num(n * USERS_PER_MPM, 0)
        ),
        None => format!(
            "{} {BENCHMARK} messages per minute ({} users) were tried; no msgs/min is established.",
            mpm(run.mpm),
            num(run.mpm * USERS_PER_MPM, 0)
        ),
    }
}

/// A level's label: "80%".
fn load_label(load: f64) -> String {
    format!("{:.0}%", load * 100.0)
}

/// The required share of a summary row as printed (">95%", "<1%").
fn required(row: &Row) -> String {
    if row.name == "Error Rate" {
        format!("<{}%", qos::MAX_ERROR_PERCENT)
    } else {
        format!(">{}%", qos::REQUIRED_PERCENT)
    }
}

/// The counters table's rows: the published counters, then this harness's.
fn counters(t: &LevelTally) -> Vec<(&'static str, u64)> {
    let c = &t.counters;
    vec![
        ("SMTP Connect Error", c.smtp_connect_error),
        ("SMTP Protocol Error", c.smtp_protocol_error),
        ("SMTP Disconnect", c.smtp_disconnect),
        ("SMTP Session", c.smtp_session),
        ("SMTP To Local", c.smtp_to_local),
        ("SMTP To Remote", c.smtp_to_remote),
        ("SINK Connect Error", c.sink_connect_error),
        ("POP Connect Error", c.pop_connect_error),
        ("POP Protocol Error", c.pop_protocol_error),
        ("POP Disconnect", c.pop_disconnect),
        ("POP Session", c.pop_session),
        ("Delivery Time Connect Error", c.delivery_time_connect_error),
        ("SMTP Timeout", c.smtp_timeout),
        ("POP Timeout", c.pop_timeout),
        ("Delivery Late (>60 s)", t.delivery.late),
        ("Delivery Lost", t.delivery.lost),
        ("Late Starts (generator)", c.late_starts),
        ("Retry Pool Exhausted", c.retry_pool_exhausted),
        ("Unfinished Sessions", c.unfinished),
    ]
}

/// The four streams: name, offered rate per second, sessions started in the
/// window.
fn streams(l: &LevelResult) -> [(&'static str, f64, u64); 4] {
    let (r, s) = (&l.rates, &l.tally.started);
    [
        ("User SMTP", r.user_smtp, s.user_smtp),
        ("Remote MTA SMTP", r.remote_smtp, s.remote_smtp),
        ("Initial POP", r.initial_pop, s.initial_pop),
        ("Repeated POP", r.repeated_pop, s.repeated_pop),
    ]
}

/// The delivery-time CDF of a level: `(seconds, % of probes delivered)`, over
/// 0..=`x_max` seconds. Lost probes count in the denominator, so the curve
/// tops out below 100 % when some were never found.
fn delivery_cdf(t: &LevelTally, x_max: f64) -> Vec<(f64, f64)> {
    let times = &t.delivery.times;
    let found = times.count() as f64;
    let total = (t.delivery.attempts as f64).max(found).max(1.0);
    const POINTS: u32 = 240;
    (0..=POINTS)
        .map(|i| {
            let x = x_max * f64::from(i) / f64::from(POINTS);
            let share = if found > 0.0 {
                times.share_within_ms(x * 1000.0)
            } else {
                0.0
            };
            (x, share * found / total * 100.0)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Number formatting
// ---------------------------------------------------------------------------

/// `x` with `decimals` decimals and thousands separators ("11,414.31");
/// "n/a" when not finite.
fn num(x: f64, decimals: usize) -> String {
    if !x.is_finite() {
        return "n/a".to_owned();
    }
    let fixed = format!("{:.*}", decimals, x.abs());
    let (int, frac) = fixed.split_once('.').unwrap_or((&fixed, ""));
    let mut out = String::new();
    if x < 0.0 && fixed.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.push('-');
    }
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// A count with thousands separators ("684,919").
fn int(n: u64) -> String {
    num(n as f64, 0)
}

/// A percentage with two decimals ("96.00%").
fn pct(p: f64) -> String {
    format!("{}%", num(p, 2))
}

/// A message rate: whole when it is (or is large), else two decimals.
fn mpm(x: f64) -> String {
    if x >= 1000.0 || (x - x.round()).abs() < 0.005 {
        num(x, 0)
    } else {
        num(x, 2)
    }
}

/// Seconds with one decimal ("12.5 s").
fn secs(d: Duration) -> String {
    format!("{} s", num(d.as_secs_f64(), 1))
}

/// Bytes as KB (1,024 bytes) with two decimals.
fn kb(bytes: f64) -> String {
    num(bytes / 1024.0, 2)
}

// ---------------------------------------------------------------------------
// The document model
// ---------------------------------------------------------------------------

/// One table cell; a failing cell prints with a trailing `*`.
struct Cell {
    text: String,
    fail: bool,
}

impl Cell {
    fn shown(&self) -> String {
        if self.fail {
            format!("{}*", self.text)
        } else {
            self.text.clone()
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell { text, fail: false }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::from(text.to_owned())
    }
}

/// A table: a header row and body rows. The first column is left-aligned; the
/// others are right-aligned (figures) unless `left` is set.
struct Table {
    head: Vec<String>,
    rows: Vec<Vec<Cell>>,
    left: bool,
}

impl Table {
    fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
            left: false,
        }
    }

    fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }
}

/// A piece of the report.
enum Block {
    /// A section title (level 1) or a subsection title (level 2).
    Heading(u8, String),
    /// A paragraph, printed as is.
    Para(String),
    /// A table.
    Table(Table),
    /// A bulleted list.
    List(Vec<String>),
    /// An inline SVG chart with its caption (HTML only).
    Chart(String, String),
}

/// Shorthand for a row of plain cells.
fn cells<const N: usize>(texts: [String; N]) -> Vec<Cell> {
    texts.into_iter().map(Cell::from).collect()
}

/// The whole report as blocks (the title and notice are added by the
/// renderers). `charts` adds the HTML-only charts.
fn document(run: &MailRun, charts: bool) -> Vec<Block> {
    let mut doc = Vec::new();
    doc.push(Block::Para(equivalence(run)));
    run_block(&mut doc, run);
    summary(&mut doc, run, charts);
    if let Some(s) = &run.store {
        doc.push(Block::Heading(1, "Store Check".into()));
        let mut t = Table::new(&["Check", "Found", "Model"]);
        t.row(cells([
            "Mailboxes sampled".into(),
            int(s.mailboxes),
            String::new(),
        ]));
        t.row(cells(["Messages".into(), int(s.messages), String::new()]));
        t.row(cells([
            "Mean messages per mailbox".into(),
            num(s.mean_messages, 2),
            "3.43".into(),
        ]));
        t.row(cells([
            "Mean message size (KB)".into(),
            kb(s.mean_size),
            "24.5".into(),
        ]));
        t.row(cells([
            "Empty mailboxes".into(),
            pct(s.empty as f64 * 100.0 / (s.mailboxes.max(1)) as f64),
            String::new(),
        ]));
        doc.push(Block::Table(t));
        doc.push(Block::Para(format!(
            "Store check: {}",
            if s.passed { "passed" } else { "FAILED" }
        )));
        if !s.notes.is_empty() {
            doc.push(Block::List(s.notes.clone()));
        }
    }
    find_max(&mut doc, run, charts);
    for level in &run.levels {
        detail(&mut doc, level, charts);
    }
    doc.push(Block::Heading(1, "Notes".into()));
    let mut notes: Vec<String> = run.choices.iter().map(|c| (*c).to_owned()).collect();
    notes.push(format!(
        "All figures are {BENCHMARK} figures measured by stoa bench mail {}, not SPEC results.",
        env!("CARGO_PKG_VERSION")
    ));
    doc.push(Block::List(notes));
    doc
}

/// The run's configuration.
fn run_block(doc: &mut Vec<Block>, run: &MailRun) {
    doc.push(Block::Heading(1, "Run".into()));
    let p = &run.phases;
    let mut t = Table::new(&["Item", "Value"]);
    t.left = true;
    for (k, v) in [
        ("Started", run.started.clone()),
        ("Server software", run.server_software.clone()),
        (
            "Profile",
            format!(
                "{} (warm-up {}, measurement {}, cool-down {} per level)",
                p.profile,
                secs(p.warmup),
                secs(p.run),
                secs(p.cooldown)
            ),
        ),
        ("Claimed msgs/min", mpm(run.mpm)),
        ("Seed", run.seed.to_string()),
        ("Load threads", run.threads.to_string()),
        ("SMTP", run.smtp.clone()),
        ("POP3", run.pop3.clone()),
        ("Sink", run.sink.clone()),
        (
            "Domains",
            format!("{} (local), {} (remote)", run.domain, run.remote_domain),
        ),
        ("Store accounts", int(run.users)),
        (
            "Delivery probes",
            format!("{} of SMTP sessions", pct(run.probe_share * 100.0)),
        ),
    ] {
        t.row(cells([k.to_owned(), v]));
    }
    doc.push(Block::Table(t));
}

/// The summary table, the result and the delivery-time chart.
fn summary(doc: &mut Vec<Block>, run: &MailRun, charts: bool) {
    doc.push(Block::Heading(1, "Summary Results".into()));
    let mut head = vec!["Function", "Response time limit (s)", "Required"];
    let labels: Vec<String> = run.levels.iter().map(|l| load_label(l.load)).collect();
    head.extend(labels.iter().map(String::as_str));
    let mut t = Table::new(&head);
    let per_level: Vec<Vec<Row>> = run
        .levels
        .iter()
        .map(|l| qos::summary_rows(&l.tally))
        .collect();
    let mut any_fail = false;
    for (i, row) in qos::summary_rows(&LevelTally::default()).iter().enumerate() {
        let mut r = cells([row.name.to_owned(), row.limit.to_owned(), required(row)]);
        for rows in &per_level {
            let cell = &rows[i];
            any_fail |= !cell.passed;
            r.push(Cell {
                text: cell.percent.map_or_else(|| "n/a".to_owned(), pct),
                fail: !cell.passed,
            });
        }
        t.row(r);
    }
    doc.push(Block::Table(t));
    if any_fail {
        doc.push(Block::Para(
            "* fails its requirement; n/a: no attempts (passes).".into(),
        ));
    }
    let result = match run.full_level() {
        None => "Result: FAILED (the 100% level did not run)".to_owned(),
        Some(l) if l.verdict.passed => "Result: PASSED (100% level)".to_owned(),
        Some(_) => "Result: FAILED (100% level)".to_owned(),
    };
    doc.push(Block::Para(result));
    let failures: Vec<String> = run
        .levels
        .iter()
        .filter(|l| !l.verdict.passed)
        .map(|l| {
            format!(
                "{} level failed: {}",
                load_label(l.load),
                l.verdict.failures.join("; ")
            )
        })
        .collect();
    if !failures.is_empty() {
        doc.push(Block::List(failures));
    }
    if charts && !run.levels.is_empty() {
        let longest = run
            .levels
            .iter()
            .map(|l| l.tally.delivery.times.max_ms() / 1000.0)
            .fold(0.0, f64::max);
        let x_max = longest.max(2.0 * qos::DELIVERY_LIMIT_SECS);
        let series: Vec<(String, Vec<(f64, f64)>)> = run
            .levels
            .iter()
            .map(|l| (load_label(l.load), delivery_cdf(&l.tally, x_max)))
            .collect();
        doc.push(Block::Chart(
            svg::lines_fixed(
                "Delivery time (probes)",
                "seconds from the start of the SMTP session",
                "% delivered",
                &series,
                (x_max, 100.0),
                &[(qos::DELIVERY_LIMIT_SECS, "60 s limit")],
            ),
            "Share of delivery probes found by POP within each time, per level (lost probes \
             count in the denominator); the QoS requires 95 % within 60 s."
                .into(),
        ));
    }
}

/// The `--find-max` trials.
fn find_max(doc: &mut Vec<Block>, run: &MailRun, charts: bool) {
    if run.search.is_empty() {
        return;
    }
    doc.push(Block::Heading(1, "Find-max Trials".into()));
    let mut t = Table::new(&["Trial", "msgs/min", "Result", "Failures"]);
    for (i, trial) in run.search.iter().enumerate() {
        t.row(vec![
            Cell::from((i + 1).to_string()),
            Cell::from(mpm(trial.mpm)),
            Cell {
                text: if trial.passed { "passed" } else { "failed" }.into(),
                fail: !trial.passed,
            },
            Cell::from(trial.failures.join("; ")),
        ]);
    }
    doc.push(Block::Table(t));
    doc.push(Block::Para(match best_mpm(run) {
        Some(best) if best * 200.0 >= run.users as f64 - 1e-6 => format!(
            "Best passing: {} msgs/min, the store's capacity ({} accounts / 200): the \
             server may carry more; a larger --users would tell.",
            mpm(best),
            int(run.users)
        ),
        Some(best) => format!("Best passing: {} msgs/min.", mpm(best)),
        None => "No trial passed.".into(),
    }));
    if charts {
        let values: Vec<(String, f64, bool)> = run
            .search
            .iter()
            .enumerate()
            .map(|(i, t)| ((i + 1).to_string(), t.mpm, t.passed))
            .collect();
        doc.push(Block::Chart(
            svg::pass_fail_bars("Find-max trials", "trial", "msgs/min", &values),
            "msgs/min of each trial's 100 % level, in the order tried.".into(),
        ));
    }
}

/// One level's detailed results.
fn detail(doc: &mut Vec<Block>, level: &LevelResult, charts: bool) {
    let tally = &level.tally;
    let label = load_label(level.load);
    doc.push(Block::Heading(
        1,
        format!("Detailed Results -- {label} Load"),
    ));

    let mut t = Table::new(&["Load", "User Count", "Message Rate (msg/min)"]);
    let attempted = level.rates.mpm * level.load;
    t.row(cells([
        "Attempted".into(),
        num(level.rates.users * level.load, 0),
        mpm(attempted),
    ]));
    let actual = tally.actual_mpm();
    t.row(cells([
        "Actual".into(),
        num(actual * USERS_PER_MPM, 0),
        mpm(actual),
    ]));
    doc.push(Block::Table(t));

    let mut t = Table::new(&["Function", "Attempts", "# Pass QoS", "% Pass QoS"]);
    for row in qos::detail_rows(tally) {
        t.row(vec![
            Cell::from(row.name),
            Cell::from(int(row.attempts)),
            Cell::from(int(row.pass)),
            Cell {
                text: row.percent.map_or_else(|| "n/a".to_owned(), pct),
                fail: !row.passed,
            },
        ]);
    }
    doc.push(Block::Table(t));
    doc.push(Block::Para(format!(
        "Error Rate: {} (required <{}%)",
        pct(qos::error_percent(tally)),
        qos::MAX_ERROR_PERCENT
    )));

    let mut t = Table::new(&["Counter", "Value"]);
    for (name, value) in counters(tally) {
        t.row(cells([name.to_owned(), int(value)]));
    }
    doc.push(Block::Table(t));

    let mut t = Table::new(&[
        "Function",
        "Minimum Time (ms)",
        "Maximum Time (ms)",
        "Average Time (ms)",
        "p95 Time (ms)",
    ]);
    for f in Function::ALL {
        let l = &tally.function(f).latency;
        if l.count() == 0 {
            t.row(cells([
                f.name().into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]));
        } else {
            t.row(cells([
                f.name().into(),
                num(l.min_ms(), 2),
                num(l.max_ms(), 2),
                num(l.mean_ms(), 2),
                num(l.quantile_ms(0.95), 2),
            ]));
        }
    }
    doc.push(Block::Table(t));
    if charts {
        let groups: Vec<String> = Function::ALL.iter().map(|f| f.name().to_owned()).collect();
        let series: Vec<(String, Vec<f64>)> = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)]
            .iter()
            .map(|(name, q)| {
                let values = Function::ALL
                    .iter()
                    .map(|&f| tally.function(f).latency.quantile_ms(*q))
                    .collect();
                ((*name).to_owned(), values)
            })
            .collect();
        doc.push(Block::Chart(
            svg::grouped_bars(
                &format!("Response times at {label} load"),
                "ms",
                &groups,
                &series,
            ),
            format!(
                "p50, p90 and p99 of each function's response time at {label} load (expected \
                 replies only); the QoS limit is 5,000 ms."
            ),
        ));
    }

    let mut t = Table::new(&[
        "Function",
        "Minimum Size (KB)",
        "Maximum Size (KB)",
        "Average Size (KB)",
        "Messages",
    ]);
    for (name, s) in [
        ("SMTP Data (KB up)", &tally.data_up),
        ("POP Retrieve (KB down)", &tally.retrieve_down),
    ] {
        t.row(size_row(name, s));
    }
    doc.push(Block::Table(t));

    let d = &tally.delivery;
    let times = if d.times.count() == 0 {
        "no probe found".to_owned()
    } else {
        format!(
            "p50 {} s, p90 {} s, max {} s",
            num(d.times.quantile_ms(0.5) / 1000.0, 2),
            num(d.times.quantile_ms(0.9) / 1000.0, 2),
            num(d.times.max_ms() / 1000.0, 2)
        )
    };
    let remote = &tally.remote;
    doc.push(Block::List(vec![
        format!(
            "Delivery probes: {} accepted, {} found within 60 s, {} late, {} lost, {} poll connect errors; {times}",
            int(d.attempts),
            int(d.pass),
            int(d.late),
            int(d.lost),
            int(d.connect_errors)
        ),
        format!(
            "Remote delivery: {} remote recipients accepted, {} received by the sink before the level ended",
            int(remote.sent),
            int(remote.received)
        ),
    ]));

    doc.push(Block::Heading(2, format!("Harness -- {label} Load")));
    let window = tally.window_secs;
    let mut t = Table::new(&[
        "Stream",
        "Rate (/s)",
        "Expected in window",
        "Started",
        "Started / Expected",
    ]);
    for (name, rate, started) in streams(level) {
        let expected = rate * window;
        t.row(cells([
            name.into(),
            num(rate, 3),
            num(expected, 0),
            int(started),
            if expected > 0.0 {
                pct(started as f64 * 100.0 / expected)
            } else {
                "n/a".into()
            },
        ]));
    }
    doc.push(Block::Table(t));
    let wall = level.wall.as_secs_f64();
    let cpu = |d: Option<Duration>| {
        d.map_or_else(
            || "not measured".to_owned(),
            |d| {
                format!(
                    "{} ({} of one core)",
                    secs(d),
                    pct(d.as_secs_f64() * 100.0 / wall.max(1e-9))
                )
            },
        )
    };
    doc.push(Block::List(vec![
        format!(
            "Measurement window: {}; level wall time: {}",
            secs(Duration::from_secs_f64(window.max(0.0))),
            secs(level.wall)
        ),
        format!("Harness CPU: {}", cpu(level.harness_cpu)),
        format!("Server CPU: {}", cpu(level.server_cpu)),
        format!(
            "Machine CPU, every process (the harness's included): {}",
            cpu(level.machine_cpu)
        ),
        format!(
            "Level result: {}",
            if level.verdict.passed {
                "passed".to_owned()
            } else {
                format!("FAILED ({})", level.verdict.failures.join("; "))
            }
        ),
    ]));
}

/// A sizes-table row; "-" when no message was seen.
fn size_row(name: &str, s: &SizeStats) -> Vec<Cell> {
    if s.count == 0 {
        return cells([name.into(), "-".into(), "-".into(), "-".into(), "0".into()]);
    }
    cells([
        name.into(),
        kb(s.min as f64),
        kb(s.max as f64),
        kb(s.mean()),
        int(s.count),
    ])
}

// ---------------------------------------------------------------------------
// Rendering
// ---------------------------------------------------------------------------

/// Text report shaped like the published page.
pub(crate) fn text(run: &MailRun) -> String {
    let mut out = format!("{}\n{NOTICE}\n\n", title(run));
    for block in document(run, false) {
        match block {
            Block::Heading(1, h) => {
                let _ = writeln!(out, "\n{h}\n{}\n", "=".repeat(h.chars().count()));
            }
            Block::Heading(_, h) => {
                let _ = writeln!(out, "{h}\n{}\n", "-".repeat(h.chars().count()));
            }
            Block::Para(p) => {
                let _ = writeln!(out, "{p}\n");
            }
            Block::List(items) => {
                for item in items {
                    let _ = writeln!(out, "- {item}");
                }
                out.push('\n');
            }
            Block::Table(t) => {
                text_table(&mut out, &t);
                out.push('\n');
            }
            Block::Chart(..) => {}
        }
    }
    out
}

/// Renders a table with aligned columns, two spaces apart.
fn text_table(out: &mut String, t: &Table) {
    let columns = t.head.len();
    // A column with a failing cell keeps one place for the mark in every row, so
    // its figures stay aligned.
    let marked: Vec<bool> = (0..columns)
        .map(|c| {
            t.rows
                .iter()
                .any(|r| r.get(c).is_some_and(|cell| cell.fail))
        })
        .collect();
    let shown: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(
                    |(c, cell)| match (cell.fail, marked.get(c) == Some(&true)) {
                        (true, _) => cell.shown(),
                        (false, true) => format!("{} ", cell.text),
                        (false, false) => cell.text.clone(),
                    },
                )
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            shown
                .iter()
                .filter_map(|r| r.get(c))
                .chain(std::iter::once(&t.head[c]))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut line = |cells: &[String]| {
        let mut l = String::new();
        for (c, text) in cells.iter().enumerate() {
            let w = widths.get(c).copied().unwrap_or(0);
            if c > 0 {
                l.push_str("  ");
            }
            if c == 0 || t.left {
                let _ = write!(l, "{text:<w$}");
            } else {
                let _ = write!(l, "{text:>w$}");
            }
        }
        let _ = writeln!(out, "{}", l.trim_end());
    };
    line(&t.head);
    for r in &shown {
        line(r);
    }
}

/// A self-contained HTML page: the text report's content as HTML tables, plus
/// inline SVG charts. No scripts, no external resources.
pub(crate) fn html(run: &MailRun) -> String {
    let e = svg::escape;
    let mut body = String::new();
    for block in document(run, true) {
        match block {
            Block::Heading(level, h) => {
                let tag = if level == 1 { "h2" } else { "h3" };
                let _ = writeln!(body, "<{tag}>{}</{tag}>", e(&h));
            }
            Block::Para(p) => {
                let _ = writeln!(body, "<p>{}</p>", e(&p));
            }
            Block::List(items) => {
                body.push_str("<ul>");
                for item in items {
                    let _ = write!(body, "<li>{}</li>", e(&item));
                }
                body.push_str("</ul>\n");
            }
            Block::Table(t) => {
                let class = if t.left { "kv" } else { "num" };
                let _ = write!(body, "<table class=\"{class}\"><thead><tr>");
                for h in &t.head {
                    let _ = write!(body, "<th>{}</th>", e(h));
                }
                body.push_str("</tr></thead><tbody>");
                for r in &t.rows {
                    body.push_str("<tr>");
                    for c in r {
                        if c.fail {
                            let _ = write!(body, "<td class=\"fail\">{}</td>", e(&c.shown()));
                        } else {
                            let _ = write!(body, "<td>{}</td>", e(&c.text));
                        }
                    }
                    body.push_str("</tr>");
                }
                body.push_str("</tbody></table>\n");
            }
            Block::Chart(chart, caption) => {
                let _ = writeln!(
                    body,
                    "<figure>{chart}<figcaption>{}</figcaption></figure>",
                    e(&caption)
                );
            }
        }
    }
    let verdict = if established(run).is_some() {
        "pass"
    } else {
        "fail"
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>body{{font-family:sans-serif;max-width:64em;margin:2em auto;padding:0 1em}}\
         h1.pass{{color:#1a6b1a}}h1.fail{{color:#a31515}}\
         .notice{{border:2px solid #333;background:#fffbe6;padding:.6em 1em;font-weight:bold}}\
         table{{border-collapse:collapse;margin:.8em 0}}th,td{{border:1px solid #bbb;padding:.2em .6em}}\
         th{{background:#eee;text-align:left}}table.num td{{text-align:right}}\
         table.num td:first-child{{text-align:left}}td.fail{{color:#a31515;font-weight:bold;background:#fde8e8}}\
         figure{{margin:1.5em 0}}figcaption{{font-size:.9em;color:#444}}</style></head><body>\n\
         <h1 class=\"{verdict}\">{title}</h1>\n<p class=\"notice\">{notice}</p>\n{body}</body></html>\n",
        title = e(&title(run)),
        notice = e(NOTICE),
    )
}

// ---------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------

/// A latency histogram's summary, ms; `null` figures when empty.
fn latency_json(l: &Latency) -> Value {
    if l.count() == 0 {
        return json!({"count": 0, "min": null, "max": null, "mean": null,
                      "p50": null, "p90": null, "p95": null, "p99": null});
    }
    let mut v = json!({
        "count": l.count(),
        "min": l.min_ms(),
        "max": l.max_ms(),
        "mean": l.mean_ms(),
    });
    for (name, q) in PERCENTILES {
        v[name] = json!(l.quantile_ms(q));
    }
    v
}

/// A size summary in KB (1,024 bytes).
fn sizes_json(s: &SizeStats) -> Value {
    let has = s.count > 0;
    json!({
        "count": s.count,
        "min": has.then(|| s.min as f64 / 1024.0),
        "max": has.then(|| s.max as f64 / 1024.0),
        "mean": has.then(|| s.mean() / 1024.0),
    })
}

/// The per-second rates of a level's four streams.
fn rates_json(r: &Rates) -> Value {
    json!({
        "user_smtp": r.user_smtp,
        "remote_smtp": r.remote_smtp,
        "initial_pop": r.initial_pop,
        "repeated_pop": r.repeated_pop,
        "smtp_total": r.smtp_total(),
        "pop_total": r.pop_total(),
    })
}

/// One level's figures.
fn level_json(l: &LevelResult) -> Value {
    let t = &l.tally;
    let times: serde_json::Map<String, Value> = Function::ALL
        .iter()
        .map(|&f| (f.name().to_owned(), latency_json(&t.function(f).latency)))
        .collect();
    let actual = t.actual_mpm();
    let started: serde_json::Map<String, Value> = streams(l)
        .iter()
        .map(|(name, rate, started)| {
            (
                (*name).to_owned(),
                json!({"started": started, "expected": rate * t.window_secs}),
            )
        })
        .collect();
    json!({
        "load_percent": (l.load * 100.0).round() as i64,
        "attempted": {"users": l.rates.users * l.load, "mpm": l.rates.mpm * l.load},
        "actual": {"users": actual * USERS_PER_MPM, "mpm": actual},
        "rates": rates_json(&l.rates),
        "summary": qos::summary_rows(t),
        "detail": qos::detail_rows(t),
        "counters": t.counters,
        "times_ms": times,
        "sizes_kb": {
            "smtp_data_up": sizes_json(&t.data_up),
            "pop_retrieve_down": sizes_json(&t.retrieve_down),
        },
        "delivery": {
            "attempts": t.delivery.attempts,
            "pass": t.delivery.pass,
            "late": t.delivery.late,
            "lost": t.delivery.lost,
            "connect_errors": t.delivery.connect_errors,
            "times_ms": latency_json(&t.delivery.times),
        },
        "remote": t.remote,
        "sessions_started": started,
        "window_secs": t.window_secs,
        "error_rate_percent": qos::error_percent(t),
        "verdict": l.verdict,
        "wall_secs": l.wall.as_secs_f64(),
        "harness_cpu_secs": l.harness_cpu.map(|d| d.as_secs_f64()),
        "server_cpu_secs": l.server_cpu.map(|d| d.as_secs_f64()),
        "machine_cpu_secs": l.machine_cpu.map(|d| d.as_secs_f64()),
    })
}

/// Every figure as JSON.
pub(crate) fn to_json(run: &MailRun) -> Value {
    json!({
        "benchmark": BENCHMARK,
        "notice": NOTICE,
        "title": title(run),
        "server_software": run.server_software,
        "mpm": run.mpm,
        "established_mpm": established(run),
        "users": run.users,
        "passed": run.passed(),
        "find_max": {
            "best_mpm": if run.search.is_empty() { None } else { best_mpm(run) },
            "capacity_mpm": run.users as f64 / 200.0,
            "at_capacity": !run.search.is_empty()
                && best_mpm(run).is_some_and(|b| b * 200.0 >= run.users as f64 - 1e-6),
            "trials": run.search,
        },
        "levels": run.levels.iter().map(level_json).collect::<Vec<_>>(),
        "store_check": run.store,
        "sink": run.sink_stats,
        "addresses": {
            "smtp": run.smtp,
            "pop3": run.pop3,
            "sink": run.sink,
            "domain": run.domain,
            "remote_domain": run.remote_domain,
        },
        "phases": {
            "profile": run.phases.profile,
            "warmup_secs": run.phases.warmup.as_secs_f64(),
            "run_secs": run.phases.run.as_secs_f64(),
            "cooldown_secs": run.phases.cooldown.as_secs_f64(),
        },
        "choices": run.choices,
        "seed": run.seed,
        "threads": run.threads,
        "probe_share": run.probe_share,
        "started": run.started,
    })
}

/// Writes `result.txt`, `result.json` and `result.html` into `dir` (created if
/// missing); returns their paths.
pub(crate) fn write_all(run: &MailRun, dir: &Path) -> anyhow::Result<[PathBuf; 3]> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let paths = [
        dir.join("result.txt"),
        dir.join("result.json"),
        dir.join("result.html"),
    ];
    let contents = [
        text(run),
        serde_json::to_string_pretty(&to_json(run))?,
        html(run),
    ];
    for (path, content) in paths.iter().zip(contents) {
        std::fs::write(path, content)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use stoa_mail2001::Rates;
    use stoa_mailgen::qos;
    use stoa_mailgen::sink::SinkStats;
    use stoa_mailgen::tally::{Failure, Function, LevelTally, SessionRecord, Sized};

    use super::*;
    use crate::mail::run::{Phases, StoreCheck, Trial};

    /// A completed SMTP session: every step in 10 ms, one local and one remote
    /// recipient, a 25,000-byte message; `fail_hello` ends it at HELO.
    fn smtp(fail_hello: bool) -> SessionRecord {
        let mut r = SessionRecord::default();
        r.step(Function::SmtpConnect, 2.0, Ok(()));
        if fail_hello {
            r.step(Function::SmtpHello, 1.0, Err(Failure::Disconnect));
            return r;
        }
        r.step(Function::SmtpHello, 1.0, Ok(()));
        r.step(Function::SmtpMailFrom, 1.5, Ok(()));
        r.step(Function::SmtpRcptTo, 1.0, Ok(()));
        r.step(Function::SmtpRcptTo, 1.2, Ok(()));
        r.step(Function::SmtpData, 0.8, Ok(()));
        r.transfer(Sized::DataResponse, 40.0, 25_000, true);
        r.step(Function::SmtpQuit, 0.5, Ok(()));
        r.to_local = 1;
        r.to_remote = 1;
        r.completed = true;
        r
    }

    /// A completed POP session whose connect took `connect_ms`.
    fn pop(connect_ms: f64) -> SessionRecord {
        let mut r = SessionRecord::default();
        r.step(Function::PopConnect, connect_ms, Ok(()));
        r.step(Function::PopUserId, 1.0, Ok(()));
        r.step(Function::PopPassword, 30.0, Ok(()));
        r.step(Function::PopStatus, 2.0, Ok(()));
        r.step(Function::PopRetrieve, 3.0, Ok(()));
        r.transfer(Sized::RetrieveResponse, 12.0, 30_000, true);
        r.step(Function::PopDelete, 1.0, Ok(()));
        r.step(Function::PopQuit, 1.0, Ok(()));
        r.completed = true;
        r
    }

    /// One level at `load` of 30 msgs/min: 20 SMTP and 25 POP sessions, of which
    /// `slow_pop` connect in 6 s (over the 5 s limit).
    fn level(load: f64, slow_pop: usize) -> LevelResult {
        let mut t = LevelTally::default();
        for i in 0..20 {
            t.add_session(&smtp(load > 1.1 && i == 0));
        }
        for i in 0..25 {
            t.add_session(&pop(if i < slow_pop { 6_000.0 } else { 4.0 }));
        }
        t.delivery.attempts = 20;
        t.delivery.pass = 19;
        t.delivery.late = 1;
        for _ in 0..19 {
            t.delivery.times.record_ms(5_000.0);
        }
        t.delivery.times.record_ms(70_000.0);
        t.remote.sent = 19;
        t.remote.received = 19;
        t.window_secs = 60.0;
        t.started.user_smtp = (30.0 * load) as u64;
        t.started.remote_smtp = (27.0 * load) as u64;
        t.started.initial_pop = (15.0 * load) as u64;
        t.started.repeated_pop = (45.0 * load) as u64;
        t.counters.late_starts = 2;
        let verdict = qos::verdict(&t);
        LevelResult {
            load,
            rates: Rates::at_load(30.0, load),
            tally: t,
            verdict,
            wall: Duration::from_secs(90),
            harness_cpu: Some(Duration::from_millis(1_500)),
            server_cpu: None,
            machine_cpu: None,
        }
    }

    /// A three-level run, the 120 % level failing on POP Connect.
    fn sample() -> MailRun {
        MailRun {
            server_software: "Stoa 0.1.0 (built-in)".into(),
            mpm: 30.0,
            users: 6_000,
            domain: "bench.example".into(),
            remote_domain: "remote.example".into(),
            smtp: "127.0.0.1:2525".into(),
            pop3: "127.0.0.1:1110".into(),
            sink: "127.0.0.1:2526".into(),
            phases: Phases {
                profile: "quick",
                warmup: Duration::from_secs(10),
                run: Duration::from_secs(60),
                cooldown: Duration::from_secs(20),
            },
            levels: vec![level(0.8, 0), level(1.0, 1), level(1.2, 5)],
            search: Vec::new(),
            store: Some(StoreCheck {
                mailboxes: 1_000,
                messages: 3_412,
                octets: 85_000_000,
                empty: 31,
                mean_messages: 3.412,
                mean_size: 24_912.0,
                passed: true,
                notes: Vec::new(),
            }),
            sink_stats: SinkStats {
                sessions: 50,
                messages: 57,
                recipients: 57,
                bytes: 1_400_000,
                errors: 0,
            },
            probe_share: 0.05,
            threads: 2,
            seed: 42,
            started: "2026-11-30T14:00:00Z".into(),
            choices: vec!["A session counts by its start time."],
        }
    }

    #[test]
    #[allow(clippy::print_stdout, reason = "shows the report with --nocapture")]
    fn text_follows_the_published_page() {
        let run = sample();
        let t = text(&run);
        println!("{t}");
        assert!(t.contains(NOTICE));
        assert!(
            t.starts_with("SPECmail2001-style result: Stoa 0.1.0 (built-in)   msgs/min = 30\n")
        );
        assert!(
            t.contains("30 SPECmail2001-style messages per minute is equivalent to 6,000 users.")
        );
        let summary = &t[t.find("Summary Results").expect("summary")..];
        let summary = &summary[..summary.find("Detailed Results").expect("details")];
        let mut at = 0;
        for name in [
            "SMTP Connect",
            "SMTP Data",
            "POP Connect",
            "POP Status",
            "POP Retrieve",
            "POP Delete",
            "Delivery Time",
            "Error Rate",
        ] {
            let found = summary[at..].find(name).expect(name);
            at += found + name.len();
        }
        assert!(summary.contains("80%") && summary.contains("120%"));
        assert!(summary.contains("80.00%*"), "failing cell marked");
        assert!(summary.contains("* fails its requirement"));
        assert!(summary.contains("Result: PASSED (100% level)"));
        assert!(summary.contains("120% level failed: POP Connect 80.00% < 95%"));
        for level in ["80%", "100%", "120%"] {
            assert!(t.contains(&format!("Detailed Results -- {level} Load")));
        }
        for (name, _) in counters(&LevelTally::default()) {
            assert!(t.contains(name), "{name}");
        }
        assert!(t.contains("96.00%"));
        assert!(t.contains("Attempted") && t.contains("4,800") && t.contains("7,200"));
        assert!(t.contains("SMTP Data (KB up)") && t.contains("POP Retrieve (KB down)"));
        assert!(t.contains("- A session counts by its start time."));
        assert!(!t.contains("Find-max"));
    }

    #[test]
    fn title_without_an_established_rate() {
        let mut run = sample();
        run.levels.truncate(1);
        let t = text(&run);
        assert!(t.starts_with(
            "SPECmail2001-style result: Stoa 0.1.0 (built-in)   msgs/min = not established\n"
        ));
        assert!(t.contains("Result: FAILED (the 100% level did not run)"));
        assert!(!to_json(&run)["passed"].as_bool().expect("bool"));
    }

    #[test]
    fn json_carries_every_figure() {
        let run = sample();
        let j = to_json(&run);
        assert_eq!(j["benchmark"], "SPECmail2001-style");
        assert_eq!(j["notice"], NOTICE);
        assert_eq!(j["passed"], true);
        assert!(j["find_max"]["best_mpm"].is_null());
        assert_eq!(j["levels"].as_array().expect("levels").len(), 3);
        let l = &j["levels"][1];
        assert_eq!(l["load_percent"], 100);
        assert_eq!(l["summary"].as_array().expect("summary").len(), 8);
        assert_eq!(l["detail"].as_array().expect("detail").len(), 17);
        assert_eq!(l["summary"][2]["name"], "POP Connect");
        assert!((l["summary"][2]["percent"].as_f64().expect("pct") - 96.0).abs() < 1e-9);
        assert!(l["times_ms"]["POP Password"]["p99"].as_f64().expect("p99") > 29.0);
        assert!(l["rates"]["user_smtp"].as_f64().expect("rate") > 0.0);
        assert_eq!(j["levels"][2]["verdict"]["passed"], false);
        assert_eq!(j["phases"]["run_secs"], 60.0);
        assert!(j["store_check"]["passed"].as_bool().expect("store"));

        let mut run = sample();
        run.search = vec![
            Trial {
                mpm: 30.0,
                passed: true,
                failures: Vec::new(),
            },
            Trial {
                mpm: 60.0,
                passed: false,
                failures: vec!["POP Connect 50.00% < 95%".into()],
            },
            Trial {
                mpm: 45.0,
                passed: true,
                failures: Vec::new(),
            },
        ];
        let j = to_json(&run);
        assert_eq!(j["find_max"]["best_mpm"], 45.0);
        assert_eq!(j["find_max"]["trials"].as_array().expect("trials").len(), 3);
        let t = text(&run);
        assert!(t.contains("msgs/min = 45\n") && t.contains("Find-max Trials"));
        // The fixture's store holds 6,000 accounts (30 msgs/min): 45 is at (over)
        // its capacity, which the report points out.
        assert!(
            t.contains("Best passing: 45 msgs/min, the store's capacity (6,000 accounts / 200)")
        );
        assert_eq!(j["find_max"]["at_capacity"], true);
        assert!(html(&run).contains("Find-max trials"));
    }

    #[test]
    fn html_is_self_contained() {
        let h = html(&sample());
        assert!(h.starts_with("<!DOCTYPE html>"));
        assert!(h.contains("<svg") && h.contains(NOTICE));
        assert!(h.contains("<table") && h.contains("<td class=\"fail\">80.00%*</td>"));
        assert!(h.contains("Delivery time (probes)") && h.contains("60 s limit"));
        assert!(h.contains("Response times at 100% load"));
        assert!(!h.contains("<script") && !h.contains("src=") && !h.contains("href="));
        assert!(!h.contains("<pre"));
    }

    #[test]
    fn write_all_writes_three_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = dir.path().join("nested");
        let paths = write_all(&sample(), &out).expect("write");
        for (path, name) in paths
            .iter()
            .zip(["result.txt", "result.json", "result.html"])
        {
            assert_eq!(path.file_name().and_then(|n| n.to_str()), Some(name));
            assert!(std::fs::metadata(path).expect("file").len() > 0);
        }
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(&paths[1]).expect("read")).expect("json");
        assert_eq!(json["notice"], NOTICE);
    }

    #[test]
    fn numbers_have_separators() {
        assert_eq!(int(684_919), "684,919");
        assert_eq!(int(1_500_000), "1,500,000");
        assert_eq!(int(7), "7");
        assert_eq!(num(11_414.314, 2), "11,414.31");
        assert_eq!(num(-1234.5, 1), "-1,234.5");
        assert_eq!(num(f64::NAN, 2), "n/a");
        assert_eq!(pct(96.0), "96.00%");
        assert_eq!(mpm(7_500.0), "7,500");
        assert_eq!(mpm(23.456), "23.46");
        assert_eq!(mpm(24.0), "24");
    }
}
