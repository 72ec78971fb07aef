//! The reports of `stoa bench mail`: text shaped like the published SPECmail2001
//! result pages (`published-results/specmail2001-sun-jsms61-7500.txt`,
//! `mail2001.md` §2.6), JSON with every figure, and a self-contained HTML page
//! (the same tables, plus inline SVG charts).
//!
//! The text and the HTML are rendered from one [`Document`], so both always
//! carry the same figures; only the charts are HTML-only. The JSON is in
//! `json.rs`.

mod agents;
mod json;
mod system;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::time::Duration;

use stoa_mailgen::access::Access;
use stoa_mailgen::qos::{self, Outcome, Row};
use stoa_mailgen::tally::{LevelTally, SizeStats};

use super::doc::{Block, Cell, Document, Table, cells};
use super::svg::Marks;
use super::text::Layout;
use super::{html as page, plural, svg, text as plain};
use crate::compliance::{BOX_TITLE, NON_COMPLIANT};
use crate::mail::run::{LevelResult, MailRun};

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

/// The outcome of the run's claim: its 100 % level's (for `--find-max`, the
/// best trial's: passed if one passed plainly, else not judged if one had no
/// failing row); `None` when the 100 % level did not run.
fn run_outcome(run: &MailRun) -> Option<Outcome> {
    if run.search.is_empty() {
        return run.full_level().map(|l| l.verdict.outcome);
    }
    if best_mpm(run).is_some() {
        Some(Outcome::Passed)
    } else if run.search.iter().any(|t| t.failures.is_empty()) {
        Some(Outcome::NotJudged)
    } else {
        Some(Outcome::Failed)
    }
}

/// The mark of a cell whose row is not judged, and its footnote.
pub(crate) const NOT_JUDGED_MARK: &str = "†";

/// "1 probe", "3 probes".
fn probes(n: u64) -> String {
    format!("{} probe{}", int(n), if n == 1 { "" } else { "s" })
}

/// A QoS row's percentage as a cell: marked `*` when it fails, `†` when it is
/// not judged; Delivery Time carries its sample size.
fn row_cell(row: &Row) -> Cell {
    let mut text = row.percent.map_or_else(|| "n/a".to_owned(), pct);
    if row.name == "Delivery Time" {
        text = format!("{text} ({})", probes(row.attempts));
    }
    if !row.judged {
        text.push_str(NOT_JUDGED_MARK);
    }
    Cell::marked(text, row.judged && !row.passed)
}

/// The report's title line.
fn title(run: &MailRun) -> String {
    let claim = established(run).map_or_else(|| "not established".to_owned(), mpm);
    let label = if run.deviations.is_empty() {
        String::new()
    } else {
        format!(" ({NON_COMPLIANT})")
    };
    format!(
        "{BENCHMARK} result: {}   msgs/min = {claim}{label}",
        run.server_software
    )
}

/// The "N messages per minute is equivalent to M users" line, and what a
/// declared store held instead.
fn equivalence(run: &MailRun) -> String {
    let line = equivalence_line(run);
    let rate = established(run).unwrap_or(run.mpm);
    if run.declared_store && (run.users as f64) < rate * USERS_PER_MPM - 1e-6 {
        format!(
            "{line} The store held {} accounts (declared with --store-users).",
            int(run.users)
        )
    } else {
        line
    }
}

fn equivalence_line(run: &MailRun) -> String {
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

/// The counters table's rows: the published counters, then this harness's;
/// an IMAP run's reading side is named IMAP.
fn counters(t: &LevelTally) -> Vec<(&'static str, u64)> {
    let c = &t.counters;
    let imap = t.access == Access::Imap;
    let pick = |pop: &'static str, other: &'static str| if imap { other } else { pop };
    vec![
        ("SMTP Connect Error", c.smtp_connect_error),
        ("SMTP Protocol Error", c.smtp_protocol_error),
        ("SMTP Disconnect", c.smtp_disconnect),
        ("SMTP Session", c.smtp_session),
        ("SMTP To Local", c.smtp_to_local),
        ("SMTP To Remote", c.smtp_to_remote),
        ("SINK Connect Error", c.sink_connect_error),
        (
            pick("POP Connect Error", "IMAP Connect Error"),
            c.pop_connect_error,
        ),
        (
            pick("POP Protocol Error", "IMAP Protocol Error"),
            c.pop_protocol_error,
        ),
        (pick("POP Disconnect", "IMAP Disconnect"), c.pop_disconnect),
        (pick("POP Session", "IMAP Session"), c.pop_session),
        ("Delivery Time Connect Error", c.delivery_time_connect_error),
        ("SMTP Timeout", c.smtp_timeout),
        (pick("POP Timeout", "IMAP Timeout"), c.pop_timeout),
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
    let (initial, repeated) = match l.tally.access {
        Access::Pop3 => ("Initial POP", "Repeated POP"),
        Access::Imap => ("Initial IMAP", "Repeated IMAP"),
    };
    [
        ("User SMTP", r.user_smtp, s.user_smtp),
        ("Remote MTA SMTP", r.remote_smtp, s.remote_smtp),
        (initial, r.initial_pop, s.initial_pop),
        (repeated, r.repeated_pop, s.repeated_pop),
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
pub(crate) fn pct(p: f64) -> String {
    format!("{}%", num(p, 2))
}

/// A message rate: whole when it is (or is large), else two decimals.
pub(crate) fn mpm(x: f64) -> String {
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

/// The whole report. `charts` adds the HTML-only charts.
fn document(run: &MailRun, charts: bool) -> Document {
    let mut doc = Document::new(title(run), NOTICE);
    // Not judged is neither a pass nor a failure: no verdict colour.
    doc.verdict = match run_outcome(run) {
        Some(Outcome::NotJudged) => None,
        _ => Some(established(run).is_some()),
    };
    doc.push(Block::Para(equivalence(run)));
    let bound = harness_bound(run);
    if !bound.is_empty() {
        let share = crate::cpus::HARNESS_BOUND_SHARE * 100.0;
        let bound = bound.join("; ");
        doc.push(Block::Para(match run.limit() {
            Some((l, _)) if l.is_servers_score() => format!(
                "The harness used more than {share:.0} % of its cores over a measurement window \
                 ({bound}); at the first failing trial it was not the limit, so the score stands \
                 as the server's."
            ),
            _ => format!(
                "HARNESS-BOUND: the harness used more than {share:.0} % of its cores over a \
                 measurement window ({bound}), so a result there may be the harness's limit, not \
                 the server's; it is not the server's score."
            ),
        }));
    }
    if !run.deviations.is_empty() {
        doc.push(Block::Deviations {
            title: BOX_TITLE.to_owned(),
            items: crate::compliance::items(&run.deviations),
            note: crate::mail::kit_run(),
        });
    }
    run_block(&mut doc, run);
    system::system(&mut doc, run);
    summary(&mut doc, run, charts);
    if let Some(s) = &run.store {
        store_check(&mut doc, s);
    }
    find_max(&mut doc, run, charts);
    for level in &run.levels {
        detail(&mut doc, run, level, charts);
    }
    doc.push(Block::Heading(1, "Notes".into()));
    let mut notes: Vec<String> = run.choices.iter().map(|c| (*c).to_owned()).collect();
    notes.push(crate::mail::COMPLIANCE_NOTE.to_owned());
    notes.push(format!(
        "All figures are {BENCHMARK} figures measured by stoa bench mail {}, not SPEC results.",
        env!("CARGO_PKG_VERSION")
    ));
    doc.push(Block::List(notes));
    doc
}

/// The levels and find-max trials whose harness was busier than
/// [`crate::cpus::HARNESS_BOUND_SHARE`] of its cores over the measurement
/// window, in words; empty when none was.
pub(crate) fn harness_bound(run: &MailRun) -> Vec<String> {
    let words = |what: String, l: crate::cpus::HarnessLoad| {
        format!(
            "{what}: {:.1} % of its {}",
            l.share * 100.0,
            super::count(l.cores as u64, "core")
        )
    };
    let trials = run.search.iter().enumerate().filter_map(|(i, t)| {
        let l = t.harness.filter(crate::cpus::HarnessLoad::bound)?;
        Some(words(
            format!("find-max trial {} at {} msgs/min", i + 1, mpm(t.mpm)),
            l,
        ))
    });
    let levels = run.levels.iter().filter_map(|level| {
        let l = run
            .harness_load(level)
            .filter(crate::cpus::HarnessLoad::bound)?;
        Some(words(format!("{} level", load_label(level.load)), l))
    });
    if run.search.is_empty() {
        levels.collect()
    } else {
        trials.collect()
    }
}

/// The store check made before the run.
fn store_check(doc: &mut Document, s: &crate::mail::run::StoreCheck) {
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

/// The run's configuration.
fn run_block(doc: &mut Document, run: &MailRun) {
    doc.push(Block::Heading(1, "Run".into()));
    let p = &run.phases;
    let mut t = Table::new(&["Item", "Value"]);
    t.left = true;
    for (k, v) in [
        ("Started", run.started.clone()),
        ("Server software", run.server_software.clone()),
        (
            "User passwords",
            run.password_scheme.map_or_else(
                || "the server's own".to_owned(),
                |s| format!("{{{s}}}, one hash shared by every account"),
            ),
        ),
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
        ("Harness CPUs", run.placement.harness_words()),
        ("Server CPUs", run.placement.server_words()),
        ("Load generators", agents::generators(run)),
        ("SMTP", run.smtp.clone()),
        (run.access.name(), run.read_addr.clone()),
        (
            "Mail read over",
            match run.access {
                Access::Pop3 => "POP3 (the kit's)".to_owned(),
                Access::Imap => "IMAP (--access imap; non-compliant)".to_owned(),
            },
        ),
        ("Sink", run.sink.clone()),
        (
            "Domains",
            format!("{} (local), {} (remote)", run.domain, run.remote_domain),
        ),
        (
            "Store accounts",
            if run.declared_store {
                format!("{} (declared, --store-users)", int(run.users))
            } else {
                int(run.users)
            },
        ),
        (
            "Retry pool",
            format!(
                "{} accounts ({})",
                int(run.retry_pool),
                pct(100.0 * run.retry_pool as f64 / run.users.max(1) as f64)
            ),
        ),
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
fn summary(doc: &mut Document, run: &MailRun, charts: bool) {
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
    let (mut any_fail, mut any_unjudged) = (false, false);
    let names = LevelTally {
        access: run.access,
        ..LevelTally::default()
    };
    for (i, row) in qos::summary_rows(&names).iter().enumerate() {
        let mut r = cells([row.name.to_owned(), row.limit.to_owned(), required(row)]);
        for rows in &per_level {
            let cell = &rows[i];
            any_fail |= cell.judged && !cell.passed;
            any_unjudged |= !cell.judged;
            r.push(row_cell(cell));
        }
        t.row(r);
    }
    doc.push(Block::Table(t));
    if any_fail {
        doc.push(Block::Para(
            "* fails its requirement; n/a: no attempts (passes).".into(),
        ));
    }
    if any_unjudged {
        doc.push(Block::Para(not_judged_footnote()));
    }
    doc.push(Block::Para(result_line(run)));
    let failures: Vec<String> = run
        .levels
        .iter()
        .filter_map(|l| match l.verdict.outcome {
            Outcome::Passed => None,
            Outcome::Failed => Some(format!(
                "{} level failed: {}",
                load_label(l.load),
                l.verdict.failures.join("; ")
            )),
            Outcome::NotJudged => Some(format!(
                "{} level not judged (no row failed): {}",
                load_label(l.load),
                l.verdict.unjudged.join("; ")
            )),
        })
        .collect();
    if !failures.is_empty() {
        doc.push(Block::List(failures));
    }
    if charts && !run.levels.is_empty() {
        doc.push(delivery_chart(run));
    }
}

/// The footnote of a row marked not judged.
pub(crate) fn not_judged_footnote() -> String {
    format!(
        "{NOT_JUDGED_MARK} too few probes to judge: Delivery Time needs at least {} probes (with fewer, \
         even 100 % cannot tell a server that delivers only 95 % in time from a perfect one); \
         the row is neither passed nor failed, and its level is not a pass.",
        qos::MIN_DELIVERY_PROBES
    )
}

/// "Result: PASSED (100% level)", "Result: FAILED …", "Result: NOT JUDGED …".
fn result_line(run: &MailRun) -> String {
    match run.full_level().map(|l| &l.verdict) {
        None => "Result: FAILED (the 100% level did not run)".to_owned(),
        Some(v) => match v.outcome {
            Outcome::Passed => "Result: PASSED (100% level)".to_owned(),
            Outcome::Failed => "Result: FAILED (100% level)".to_owned(),
            Outcome::NotJudged => format!(
                "Result: NOT JUDGED (100% level): no row failed, but {}; no msgs/min is established.",
                v.unjudged.join("; ")
            ),
        },
    }
}

/// The share of delivery probes found within each time, per level.
fn delivery_chart(run: &MailRun) -> Block {
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
    Block::Chart(
        svg::lines_fixed(
            "Delivery time (probes)",
            ("seconds from the start of the SMTP session", "% delivered"),
            &series,
            (x_max, 100.0),
            &Marks {
                x_lines: vec![(qos::DELIVERY_LIMIT_SECS, "60 s limit")],
                y_lines: vec![(qos::REQUIRED_PERCENT, "95 % required")],
                ..Marks::default()
            },
        ),
        "Share of delivery probes found by POP within each time, per level (lost probes \
         count in the denominator); the QoS requires 95 % within 60 s."
            .into(),
    )
}

/// The `--find-max` trials.
fn find_max(doc: &mut Document, run: &MailRun, charts: bool) {
    if run.search.is_empty() {
        return;
    }
    doc.push(Block::Heading(1, "Find-max Trials".into()));
    let mut t = Table::new(&[
        "Trial", "msgs/min", "Harness", "Server", "Result", "Failures",
    ]);
    for (i, trial) in run.search.iter().enumerate() {
        t.row(vec![
            Cell::from((i + 1).to_string()),
            Cell::from(mpm(trial.mpm)),
            Cell {
                text: trial.harness.map_or_else(
                    || "-".to_owned(),
                    |l| {
                        format!(
                            "{}{}",
                            pct(l.share * 100.0),
                            if l.bound() { " (bound)" } else { "" }
                        )
                    },
                ),
                fail: trial.harness.is_some_and(|l| l.bound()),
            },
            Cell::from(trial.server.map_or_else(
                || "-".to_owned(),
                |l| {
                    format!(
                        "{}{}",
                        pct(l.share * 100.0),
                        if l.saturated() { " (saturated)" } else { "" }
                    )
                },
            )),
            Cell {
                text: match (trial.passed, trial.failures.is_empty()) {
                    (true, _) => "passed",
                    (false, true) => "not judged",
                    (false, false) => "failed",
                }
                .into(),
                fail: !trial.failures.is_empty(),
            },
            Cell::from(
                trial
                    .failures
                    .iter()
                    .chain(&trial.unjudged)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; "),
            ),
        ]);
    }
    doc.push(Block::Table(t));
    doc.push(Block::Para(search_result(run)));
    if let Some((limit, trial)) = run.limit() {
        doc.push(Block::Para(format!(
            "Limit: {}.",
            limit.words(trial.and_then(|t| t.harness), trial.and_then(|t| t.server))
        )));
    }
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

/// The `--find-max` search's result in words.
fn search_result(run: &MailRun) -> String {
    match best_mpm(run) {
        Some(best) if best >= run.capacity_mpm - 1e-6 && run.declared_store => format!(
            "Best passing: {} msgs/min, the most a declared store of {} accounts carries \
             (its retry pool's re-checks): the server may carry more; a larger --store-users \
             would tell.",
            mpm(best),
            int(run.users)
        ),
        Some(best) if best >= run.capacity_mpm - 1e-6 => format!(
            "Best passing: {} msgs/min, the store's capacity ({} accounts / 200): the \
             server may carry more; a larger --users would tell.",
            mpm(best),
            int(run.users)
        ),
        Some(best) => format!("Best passing: {} msgs/min.", mpm(best)),
        None => match run
            .search
            .iter()
            .filter(|t| t.failures.is_empty())
            .map(|t| t.mpm)
            .reduce(f64::max)
        {
            Some(top) => format!(
                "No trial passed with every row judged; the highest with no failing row: {} \
                 msgs/min (too few probes to judge its Delivery Time).",
                mpm(top)
            ),
            None => "No trial passed.".into(),
        },
    }
}

/// One level's detailed results.
fn detail(doc: &mut Document, run: &MailRun, level: &LevelResult, charts: bool) {
    let tally = &level.tally;
    let label = load_label(level.load);
    doc.push(Block::Heading(
        1,
        format!("Detailed Results -- {label} Load"),
    ));
    doc.push(Block::Table(load_table(level)));
    qos_detail(doc, tally);
    let mut t = Table::new(&["Counter", "Value"]);
    for (name, value) in counters(tally) {
        t.row(cells([name.to_owned(), int(value)]));
    }
    doc.push(Block::Table(t));
    doc.push(Block::Table(times_table(tally)));
    if charts {
        doc.push(times_chart(tally, &label));
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
        (
            match tally.access {
                Access::Pop3 => "POP Retrieve (KB down)",
                Access::Imap => "IMAP Fetch (KB down)",
            },
            &tally.retrieve_down,
        ),
    ] {
        t.row(size_row(name, s));
    }
    doc.push(Block::Table(t));
    doc.push(Block::List(deliveries(tally)));
    harness(doc, run, level, &label);
}

/// The users and message rate attempted and achieved.
fn load_table(level: &LevelResult) -> Table {
    let mut t = Table::new(&["Load", "User Count", "Message Rate (msg/min)"]);
    let attempted = level.rates.mpm * level.load;
    t.row(cells([
        "Attempted".into(),
        num(level.rates.users * level.load, 0),
        mpm(attempted),
    ]));
    let actual = level.tally.actual_mpm();
    t.row(cells([
        "Actual".into(),
        num(actual * USERS_PER_MPM, 0),
        mpm(actual),
    ]));
    t
}

/// The published detail rows (attempts and QoS passes per function) and the
/// error rate.
fn qos_detail(doc: &mut Document, tally: &LevelTally) {
    let mut t = Table::new(&["Function", "Attempts", "# Pass QoS", "% Pass QoS"]);
    let rows = qos::detail_rows(tally);
    for row in &rows {
        let mut text = row.percent.map_or_else(|| "n/a".to_owned(), pct);
        if !row.judged {
            text.push_str(NOT_JUDGED_MARK);
        }
        t.row(vec![
            Cell::from(row.name),
            Cell::from(int(row.attempts)),
            Cell::from(int(row.pass)),
            Cell::marked(text, row.judged && !row.passed),
        ]);
    }
    doc.push(Block::Table(t));
    if rows.iter().any(|r| !r.judged) {
        doc.push(Block::Para(not_judged_footnote()));
    }
    doc.push(Block::Para(format!(
        "Error Rate: {} (required <{}%)",
        pct(qos::error_percent(tally)),
        qos::MAX_ERROR_PERCENT
    )));
}

/// Minimum, maximum, mean and p95 response time of each function.
fn times_table(tally: &LevelTally) -> Table {
    let mut t = Table::new(&[
        "Function",
        "Minimum Time (ms)",
        "Maximum Time (ms)",
        "Average Time (ms)",
        "p95 Time (ms)",
    ]);
    for &f in tally.access.functions() {
        let l = &tally.function(f).latency;
        if l.count() == 0 {
            t.row(cells([
                f.label(tally.access).into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ]));
        } else {
            t.row(cells([
                f.label(tally.access).into(),
                num(l.min_ms(), 2),
                num(l.max_ms(), 2),
                num(l.mean_ms(), 2),
                num(l.quantile_ms(0.95), 2),
            ]));
        }
    }
    t
}

/// p50, p90 and p99 of each function's response time, as grouped bars.
fn times_chart(tally: &LevelTally, label: &str) -> Block {
    let functions = tally.access.functions();
    let groups: Vec<String> = functions
        .iter()
        .map(|f| f.label(tally.access).to_owned())
        .collect();
    let series: Vec<(String, Vec<f64>)> = [("p50", 0.5), ("p90", 0.9), ("p99", 0.99)]
        .iter()
        .map(|(name, q)| {
            let values = functions
                .iter()
                .map(|&f| tally.function(f).latency.quantile_ms(*q))
                .collect();
            ((*name).to_owned(), values)
        })
        .collect();
    Block::Chart(
        svg::grouped_bars(
            &format!("Response times at {label} load"),
            "ms (log scale)",
            &groups,
            &series,
            Some((qos::RESPONSE_LIMIT_SECS * 1000.0, "5 s QoS limit")),
        ),
        format!(
            "p50, p90 and p99 of each function's response time at {label} load (expected \
             replies only), on a log scale; the QoS limit is 5,000 ms."
        ),
    )
}

/// What became of the delivery probes and the remote mail.
fn deliveries(tally: &LevelTally) -> Vec<String> {
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
    vec![
        format!(
            "Delivery probes: {} accepted, {} found within 60 s, {} late, {} lost, {} poll connect {}; {times}",
            int(d.attempts),
            int(d.pass),
            int(d.late),
            int(d.lost),
            int(d.connect_errors),
            plural(d.connect_errors, "error", "errors")
        ),
        format!(
            "Remote delivery: {} remote {} accepted ({} in sessions the client dropped), {} received by the sink within the measurement window + 60 s, {} later",
            int(remote.sent),
            plural(remote.sent, "recipient", "recipients"),
            int(remote.dropped),
            int(remote.received),
            int(remote.outside)
        ),
    ]
}

/// The harness's side of a level: the streams it offered and the CPU used.
fn harness(doc: &mut Document, run: &MailRun, level: &LevelResult, label: &str) {
    let tally = &level.tally;
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
    if let Some(t) = agents::table(level) {
        doc.push(Block::Table(t));
    }
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
    let mut lines = vec![
        format!(
            "Measurement window: {}; level wall time: {}",
            secs(Duration::from_secs_f64(window.max(0.0))),
            secs(level.wall)
        ),
        format!("Harness CPU: {}", cpu(level.harness_cpu)),
    ];
    let sessions = tally.counters.smtp_ended() + tally.counters.pop_ended();
    if let (Some(c), Some(load)) = (level.harness_window_cpu, run.harness_load(level)) {
        lines.push(format!(
            "Harness CPU over the measurement window: {}, {} ms per SMTP or {} session; {}",
            secs(c),
            if sessions > 0 {
                num(c.as_secs_f64() * 1000.0 / sessions as f64, 2)
            } else {
                "-".into()
            },
            tally.access.prefix(),
            load.words()
        ));
    }
    lines.extend(agents::cpu(level));
    lines.extend([
        format!(
            "Server CPU, whole level, the server processes' own time (not their workers'; \
             the window's process tree is below): {}",
            cpu(level.server_cpu)
        ),
        format!(
            "Machine CPU, every process (the harness's included): {}",
            cpu(level.machine_cpu)
        ),
        format!("Level result: {}", level_result(&level.verdict)),
    ]);
    doc.push(Block::List(lines));
    if let Some(p) = &level.server_processes {
        server_processes(doc, p, tally, level.harness_window_cpu);
    }
}

/// The server's process tree over the measurement window, by program: where
/// a system of many processes spends its CPU.
fn server_processes(
    doc: &mut Document,
    p: &crate::proctree::TreeCpu,
    tally: &LevelTally,
    harness: Option<Duration>,
) {
    let window = tally.window_secs.max(1e-9);
    let c = &tally.counters;
    let sessions = c.smtp_ended() + c.pop_ended();
    let mut t = Table::new(&[
        "Server process",
        "Processes",
        "CPU (s)",
        "Of one core",
        "ms per session",
    ]);
    let row = |t: &mut Table, name: String, processes: String, cpu: Duration| {
        t.row(cells([
            name,
            processes,
            num(cpu.as_secs_f64(), 2),
            pct(cpu.as_secs_f64() * 100.0 / window),
            if sessions > 0 {
                num(cpu.as_secs_f64() * 1000.0 / sessions as f64, 2)
            } else {
                "-".into()
            },
        ]));
    };
    for g in &p.programs {
        row(&mut t, g.name.clone(), int(g.processes.into()), g.cpu);
    }
    if !p.not_attributed.is_zero() {
        row(
            &mut t,
            "not attributed (ended between samples)".into(),
            "-".into(),
            p.not_attributed,
        );
    }
    row(&mut t, "all server processes".into(), "-".into(), p.total);
    if let Some(h) = harness {
        row(&mut t, "the harness (not the server)".into(), "1".into(), h);
    }
    doc.push(Block::Table(t));
    doc.push(Block::Para(format!(
        "Server processes: the --server-pid processes and their descendants over the \
         measurement window, by program name (each process's own CPU time, sampled every \
         second); the total is exact (reaped children included). ms per session: CPU / the \
         window's {} SMTP and {} sessions.",
        int(sessions),
        tally.access.prefix()
    )));
}

/// A level's verdict in words.
fn level_result(v: &qos::Verdict) -> String {
    match v.outcome {
        Outcome::Passed => "passed".to_owned(),
        Outcome::Failed => format!("FAILED ({})", v.failures.join("; ")),
        Outcome::NotJudged => format!("NOT JUDGED, no row failed ({})", v.unjudged.join("; ")),
    }
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

/// Text report shaped like the published page.
pub(crate) fn text(run: &MailRun) -> String {
    plain::render(&document(run, false), Layout::Underlined)
}

/// A self-contained HTML page: the text report's content as HTML tables, plus
/// inline SVG charts. No scripts, no external resources.
pub(crate) fn html(run: &MailRun) -> String {
    page::render(&document(run, true))
}

/// The run's JSON, as `result.json` holds it.
pub(crate) fn json(run: &MailRun) -> serde_json::Value {
    json::to_json(run)
}

/// Writes `result.txt`, `result.json` and `result.html` into `dir` (created if
/// missing); returns their paths.
pub(crate) fn write_all(run: &MailRun, dir: &Path) -> anyhow::Result<[PathBuf; 3]> {
    let json = serde_json::to_string_pretty(&json::to_json(run))?;
    super::write_files(
        dir,
        &[
            ("result.txt", &text(run)),
            ("result.json", &json),
            ("result.html", &html(run)),
        ],
    )?;
    Ok([
        dir.join("result.txt"),
        dir.join("result.json"),
        dir.join("result.html"),
    ])
}
