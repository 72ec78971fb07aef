//! `stoa bench disclose`: a stored run as a full-disclosure page, laid out as
//! the published result pages are (`docs/published-results.md`). First the
//! result and its iterations (or levels, then the Summary Results QoS table
//! for mail), then the configuration sections (Hardware, Software, the
//! server, Test Sponsor, Network, Clients, Benchmark Configuration), then the
//! Notes, the Test Run Details table (web), and the non-compliance box when
//! the run has deviations. Values are printed for people: "not judged", "no",
//! dates to the second in UTC, never the JSON's raw spelling.
//!
//! What the machine could say is filled in from the record's system
//! description. What only the tester knows (the disk, the switch, who ran it,
//! the tuning and why) comes from a notes file:
//!
//! ```toml
//! [hardware]
//! "Disk Subsystem" = "1 virtio disk, ext4"
//! [test]
//! "Tested By" = "Stoa developers"
//! [notes]
//! sut = ["fileset on tmpfs"]
//! os = ["net.ipv4.tcp_autocorking = 0, the B side of the A/B run"]
//! ```
//!
//! Each section table adds rows (`"Row" = "value"`). `[notes]` takes lists of
//! lines: `sut`, `os` and `other`.

use std::collections::BTreeMap;

use anyhow::{Context as _, bail};
use serde_json::Value;

use super::doc::{Block, Cell, Document, Table, cells};
use super::text::{self, Layout};
use crate::archive::{Kind, Record};

/// The sections a notes file may add rows to, as `[key]`, with their titles.
const SECTIONS: [(&str, &str); 7] = [
    ("hardware", "Hardware"),
    ("software", "Software"),
    ("server", "Server Software"),
    ("test", "Test Sponsor"),
    ("network", "Network"),
    ("clients", "Clients"),
    ("benchmark", "Benchmark Configuration"),
];

/// The lists `[notes]` may hold, with their titles.
const NOTE_LISTS: [(&str, &str); 3] = [
    ("sut", "SUT Notes"),
    ("os", "Operating System Notes"),
    ("other", "Other Notes"),
];

/// Largest notes file read.
const MAX_NOTES: u64 = 1 << 20;

/// What the tester adds: rows per section, lines per note list.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Notes {
    rows: BTreeMap<String, Vec<(String, String)>>,
    lists: BTreeMap<String, Vec<String>>,
}

impl Notes {
    /// Parses a notes file's text; every unknown section, key or value type is
    /// an error that names it.
    pub(crate) fn parse(text: &str) -> anyhow::Result<Notes> {
        let table: toml::Table = text.parse().context("the notes are not valid TOML")?;
        let mut notes = Notes::default();
        for (section, value) in table {
            let Some(entries) = value.as_table() else {
                bail!("[{section}] must be a table of rows");
            };
            if section == "notes" {
                for (key, lines) in entries {
                    if !NOTE_LISTS.iter().any(|(k, _)| *k == key.as_str()) {
                        bail!("[notes] {key}: the note lists are sut, os and other");
                    }
                    let lines = lines
                        .as_array()
                        .and_then(|a| a.iter().map(|l| l.as_str().map(str::to_owned)).collect())
                        .with_context(|| format!("[notes] {key} must be a list of strings"))?;
                    notes.lists.insert(key.clone(), lines);
                }
                continue;
            }
            if !SECTIONS.iter().any(|(k, _)| *k == section) {
                bail!(
                    "[{section}]: the sections are {}, and notes",
                    SECTIONS.map(|(k, _)| k).join(", ")
                );
            }
            let rows = entries
                .iter()
                .map(|(k, v)| {
                    v.as_str()
                        .map(|v| (k.clone(), v.to_owned()))
                        .with_context(|| format!("[{section}] {k} must be a string"))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            notes.rows.insert(section, rows);
        }
        Ok(notes)
    }

    /// Reads and parses a notes file.
    pub(crate) fn read(path: &std::path::Path) -> anyhow::Result<Notes> {
        let len = std::fs::metadata(path)
            .with_context(|| format!("cannot read {}", path.display()))?
            .len();
        if len > MAX_NOTES {
            bail!("{}: larger than {MAX_NOTES} bytes", path.display());
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Notes::parse(&text).with_context(|| path.display().to_string())
    }
}

/// The page as text and as HTML.
pub(crate) fn pages(record: &Record, notes: &Notes) -> (String, String) {
    let doc = document(record, notes);
    (text::render(&doc, Layout::Plain), super::html::render(&doc))
}

fn document(record: &Record, notes: &Notes) -> Document {
    let r = &record.result;
    let s = &record.system;
    let (benchmark, notice) = match record.kind {
        Kind::Web => (
            r["benchmark"].as_str().unwrap_or("SPECweb99-style"),
            r["notice"].as_str().unwrap_or(super::web::NOTICE),
        ),
        Kind::Mail => ("SPECmail2001-style", super::mail::NOTICE),
    };
    let mut doc = Document::new(format!("{benchmark} Result"), notice);
    let deviations: Vec<String> = r["deviations"]
        .as_array()
        .map(|ds| {
            ds.iter()
                .map(|d| {
                    format!(
                        "{}; {}",
                        d["run"].as_str().unwrap_or(""),
                        d["kit"].as_str().unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let nc = if deviations.is_empty() {
        String::new()
    } else {
        format!(" ({})", crate::compliance::NON_COMPLIANT)
    };
    doc.para(format!(
        "{}\n\n{}",
        s.server.software,
        match record.kind {
            Kind::Web => format!(
                "{benchmark} = {}{nc}",
                r["score"].as_u64().map_or_else(
                    || "not established (no median iteration)".to_owned(),
                    |n| n.to_string()
                )
            ),
            Kind::Mail => format!(
                "{benchmark} = {}{nc}",
                r["established_mpm"].as_f64().map_or_else(
                    || "not established (the 100 % level did not pass)".to_owned(),
                    |m| format!("{m:.0} messages per minute")
                )
            ),
        }
    ));
    if !deviations.is_empty() {
        doc.push(Block::Deviations {
            title: crate::compliance::BOX_TITLE.to_owned(),
            items: deviations,
            note: "The run's own report lists how to run the kit's run instead.".to_owned(),
        });
    }

    doc.heading(1, "Performance");
    doc.table(performance(record.kind, r));
    if record.kind == Kind::Mail {
        summary_results(&mut doc, r);
    }

    doc.heading(1, "Configuration");
    let mut sections: BTreeMap<&str, Vec<(String, String)>> = BTreeMap::new();
    sections.insert(
        "hardware",
        vec![
            ("Processor".into(), s.cpu_model.clone()),
            ("# Processors".into(), format!("{} cores", s.cores)),
            ("Memory".into(), format!("{} MiB", s.memory_mib)),
            ("CPU governor".into(), s.cpu_governor.clone()),
        ],
    );
    sections.insert(
        "software",
        vec![
            ("Operating System".into(), s.os.clone()),
            ("Kernel".into(), s.kernel.clone()),
            ("Kernel command line".into(), s.kernel_cmdline.clone()),
            (
                "Transparent huge pages".into(),
                s.transparent_hugepages.clone(),
            ),
        ],
    );
    let mut server = vec![
        ("Server Software".into(), s.server.software.clone()),
        ("Target".into(), s.server.target.clone()),
    ];
    for (i, p) in s.server.processes.iter().enumerate() {
        server.push((format!("Process {}", i + 1), p.clone()));
    }
    sections.insert("server", server);
    sections.insert(
        "test",
        vec![
            ("Test Date".into(), date_text(&record.stored)),
            ("Run ID".into(), record.id.clone()),
            ("Label".into(), record.label.clone()),
        ],
    );
    sections.insert("network", vec![("Host".into(), s.hostname.clone())]);
    sections.insert(
        "clients",
        vec![
            (
                "Harness".into(),
                format!("stoa-bench {}", s.harness.version),
            ),
            ("Command line".into(), s.harness.command_line.clone()),
            ("Load threads".into(), value_text(&r["threads"])),
            ("Agents".into(), agents_text(&r["agents"])),
        ],
    );
    sections.insert("benchmark", benchmark_rows(record.kind, r));
    for (key, title) in SECTIONS {
        let mut rows = sections.remove(key).unwrap_or_default();
        if let Some(extra) = notes.rows.get(key) {
            rows.extend(extra.iter().cloned());
        }
        doc.heading(2, title);
        let mut t = Table::new(&[]);
        t.left = true;
        for (k, v) in rows {
            t.row(cells([k, v]));
        }
        doc.table(t);
    }
    if !s.server.configuration.is_empty() {
        doc.heading(2, "Server configuration");
        doc.para(s.server.configuration.clone());
    }

    doc.heading(1, "Notes");
    for (key, title) in NOTE_LISTS {
        let mut lines = notes.lists.get(key).cloned().unwrap_or_default();
        if key == "os" {
            lines.extend(
                s.sysctls
                    .iter()
                    .map(|(k, v)| format!("{k} = {v} (as recorded)")),
            );
        }
        if !lines.is_empty() {
            doc.heading(2, title);
            doc.push(Block::List(lines));
        }
    }
    if record.kind == Kind::Web {
        doc.heading(1, "Test Run Details");
        doc.table(test_run_details(r));
    }
    doc
}

/// A JSON value as a person reads it: `-` for none, yes/no for a flag.
fn value_text(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::Bool(true) => "yes".to_owned(),
        Value::Bool(false) => "no".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A level's outcome (`passed`, `failed`, `not_judged` in the JSON) in words.
fn outcome_text(v: &Value) -> String {
    match v.as_str() {
        Some("not_judged") => "not judged (too few probes)".to_owned(),
        Some(other) => other.replace('_', " "),
        None => "-".to_owned(),
    }
}

/// An RFC 3339 UTC time as the archive stores it (`2026-12-02T05:00:00.123456789Z`)
/// to the second: `2026-12-02 05:00:00 UTC`. Anything else (another offset,
/// an older record's text) is shown as it is.
fn date_text(stored: &str) -> String {
    let shape_ok = stored.len() >= 20
        && stored.is_char_boundary(19)
        && stored[..19].bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            10 => b == b'T',
            13 | 16 => b == b':',
            _ => b.is_ascii_digit(),
        });
    let rest = stored.get(19..).unwrap_or_default();
    let fraction = rest.strip_suffix(['Z', 'z']).unwrap_or("-");
    let utc = fraction.is_empty()
        || fraction
            .strip_prefix('.')
            .is_some_and(|f| !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()));
    if shape_ok && utc {
        format!("{} {} UTC", &stored[..10], &stored[11..19])
    } else {
        stored.to_owned()
    }
}

/// A figure with `decimals`, or `-` when the record has none.
fn fixed(v: &Value, decimals: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.decimals$}"))
}

/// The web page's last table: one line per iteration (conforming
/// connections, percent conform, throughput, response time, throughput per
/// load generator, kbit/s), the median marked `=>` and shaded.
fn test_run_details(r: &Value) -> Table {
    let empty = Vec::new();
    let mut t = Table::new(&[
        "Iteration",
        "Conforming Connections",
        "Percent Conform",
        "Throughput ops/sec",
        "Response msec",
        "ops/sec/loadgen",
        "kbit/sec",
    ]);
    let median = r["median_iteration"]
        .as_u64()
        .map(|m| m.saturating_sub(1) as usize);
    for (i, it) in r["iterations"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .enumerate()
    {
        let mark = if Some(i) == median { "=>" } else { "  " };
        t.row(cells([
            format!("{mark}{}", i + 1),
            value_text(&it["conforming"]),
            it["percent_conform"]
                .as_f64()
                .map_or("-".into(), |p| format!("{p:.1}%")),
            fixed(&it["ops_per_sec"], 1),
            fixed(&it["response_ms"], 1),
            fixed(&it["ops_per_sec_per_loadgen"], 2),
            fixed(&it["kbit_per_sec"], 1),
        ]));
    }
    t.shaded = median;
    t
}

/// The mail page's Summary Results: the six protocol steps, Delivery Time
/// and the Error Rate with their limit, the share required and each level's
/// percentage (`*` fails, `†` not judged, Delivery Time with its probes).
fn summary_results(doc: &mut Document, r: &Value) {
    let empty = Vec::new();
    let levels = r["levels"].as_array().unwrap_or(&empty);
    let Some(first) = levels.first().and_then(|l| l["summary"].as_array()) else {
        return;
    };
    doc.heading(2, "Summary Results");
    let labels: Vec<String> = levels
        .iter()
        .map(|l| format!("{}%", value_text(&l["load_percent"])))
        .collect();
    let mut head = vec!["Function", "Response time limit (s)", "Required"];
    head.extend(labels.iter().map(String::as_str));
    let mut t = Table::new(&head);
    let (mut unjudged, mut failing) = (false, false);
    for (i, row) in first.iter().enumerate() {
        let name = row["name"].as_str().unwrap_or("-");
        let required = if name == "Error Rate" {
            format!("<{}%", stoa_mailgen::qos::MAX_ERROR_PERCENT)
        } else {
            format!(">{}%", stoa_mailgen::qos::REQUIRED_PERCENT)
        };
        let mut line = cells([name.to_owned(), value_text(&row["limit"]), required]);
        for level in levels {
            let cell = &level["summary"][i];
            let mut text = cell["percent"]
                .as_f64()
                .map_or_else(|| "n/a".to_owned(), super::mail::pct);
            if name == "Delivery Time" {
                let n = cell["attempts"].as_u64().unwrap_or(0);
                text = format!("{text} ({n} probe{})", if n == 1 { "" } else { "s" });
            }
            let judged = cell["judged"].as_bool().unwrap_or(true);
            if !judged {
                text.push_str(super::mail::NOT_JUDGED_MARK);
                unjudged = true;
            }
            let failed = judged && cell["passed"].as_bool() == Some(false);
            failing |= failed;
            line.push(Cell::marked(text, failed));
        }
        t.row(line);
    }
    doc.table(t);
    if failing {
        doc.para("* fails its requirement; n/a: no attempts (passes).");
    }
    if unjudged {
        doc.para(super::mail::not_judged_footnote());
    }
}

fn agents_text(v: &Value) -> String {
    match v.as_array() {
        Some(a) if !a.is_empty() => format!("{} agents", a.len()),
        _ => "none (the load ran in the harness's process)".to_owned(),
    }
}

/// The iterations (web) or the levels (mail) and their outcome.
fn performance(kind: Kind, r: &Value) -> Table {
    let empty = Vec::new();
    match kind {
        Kind::Web => {
            let mut t = Table::new(&[
                "Iteration",
                "Conforming Simultaneous Connections",
                "Operations/s",
            ]);
            let its = r["iterations"].as_array().unwrap_or(&empty);
            for (i, it) in its.iter().enumerate() {
                t.row(cells([
                    (i + 1).to_string(),
                    value_text(&it["conforming"]),
                    it["ops_per_sec"]
                        .as_f64()
                        .map_or("-".into(), |o| format!("{o:.1}")),
                ]));
            }
            if let Some(m) = r["median_iteration"].as_u64() {
                t.shaded = Some(m.saturating_sub(1) as usize);
                t.row(cells([
                    "Median".to_owned(),
                    value_text(&r["score"]),
                    String::new(),
                ]));
            }
            t
        }
        Kind::Mail => {
            let mut t = Table::new(&["Load", "Messages/min", "Result"]);
            for l in r["levels"].as_array().unwrap_or(&empty) {
                t.row(cells([
                    format!("{} %", value_text(&l["load_percent"])),
                    l["attempted"]["mpm"]
                        .as_f64()
                        .map_or("-".into(), |m| format!("{m:.0}")),
                    outcome_text(&l["verdict"]["outcome"]),
                ]));
            }
            t
        }
    }
}

fn benchmark_rows(kind: Kind, r: &Value) -> Vec<(String, String)> {
    match kind {
        Kind::Web => vec![
            (
                "Requested Connections".into(),
                value_text(&r["requested_connections"]),
            ),
            ("Fileset Size (MB)".into(), value_text(&r["fileset_mb"])),
            ("HTTP version".into(), value_text(&r["http_version"])),
            ("Profile".into(), value_text(&r["profile"]["name"])),
        ],
        Kind::Mail => vec![
            ("Accounts".into(), value_text(&r["users"])),
            ("Declared store".into(), value_text(&r["declared_store"])),
            ("Retry pool".into(), value_text(&r["retry_pool"])),
            ("Password scheme".into(), value_text(&r["password_scheme"])),
            ("Profile".into(), value_text(&r["phases"]["profile"])),
        ],
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::archive::{FORMAT, System};

    fn record() -> Record {
        let mut system = System {
            cpu_model: "AMD EPYC".into(),
            ..System::default()
        };
        system
            .sysctls
            .insert("net.ipv4.tcp_autocorking".into(), "0".into());
        Record {
            format: FORMAT,
            id: "20261202T050000Z-web-b".into(),
            kind: Kind::Web,
            label: "b".into(),
            stored: "2026-12-02T05:00:00Z".into(),
            system,
            result: json!({
                "benchmark": "SPECweb99-style", "score": 410, "median_iteration": 1,
                "deviations": [{"setting": "run_time", "run": "measured 60 s", "kit": "the kit measures 1,200 s"}],
                "iterations": [{"conforming": 410, "ops_per_sec": 1150.0}],
                "requested_connections": 420, "fileset_mb": 200.5,
            }),
        }
    }

    #[test]
    fn the_page_has_the_published_sections() {
        let notes = Notes::parse(
            "[hardware]\n\"Disk Subsystem\" = \"virtio\"\n[notes]\nsut = [\"fileset on ext4\"]\n",
        )
        .expect("valid notes");
        let (text, html) = pages(&record(), &notes);
        for want in [
            "SPECweb99-style = 410 (non-compliant)",
            "NON-COMPLIANT RUN",
            "measured 60 s; the kit measures 1,200 s",
            "Hardware",
            "AMD EPYC",
            "Disk Subsystem",
            "virtio",
            "Benchmark Configuration",
            "Requested Connections",
            "SUT Notes",
            "fileset on ext4",
            "net.ipv4.tcp_autocorking = 0 (as recorded)",
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
        assert!(html.contains("<table") && html.contains("AMD EPYC"));
    }

    /// Issue 56, item 18: the web page lacked the published Test Run Details
    /// table, and printed the stored nanosecond time as the test date.
    #[test]
    fn the_web_page_ends_with_test_run_details() {
        let mut web = record();
        web.stored = "2026-12-02T05:00:07.123456789Z".into();
        web.result["median_iteration"] = json!(2);
        web.result["iterations"] = json!([
            {"conforming": 405, "percent_conform": 98.8, "ops_per_sec": 1140.25,
             "response_ms": 351.4, "ops_per_sec_per_loadgen": 2.79, "kbit_per_sec": 331.2},
            {"conforming": 410, "percent_conform": 99.5, "ops_per_sec": 1150.0,
             "response_ms": 350.1, "ops_per_sec_per_loadgen": 2.8, "kbit_per_sec": 333.0},
        ]);
        let (text, html) = pages(&web, &Notes::default());
        let details = text
            .find("Test Run Details")
            .expect("a Test Run Details section");
        assert!(details > text.find("Notes").expect("notes"), "{text}");
        let table = &text[details..];
        for want in [
            "Percent Conform",
            "Throughput ops/sec",
            "Response msec",
            "ops/sec/loadgen",
            "kbit/sec",
            "98.8%",
            "=>2",
            "1150.0",
            "350.1",
            "2.80",
            "333.0",
        ] {
            assert!(table.contains(want), "{want} missing from:\n{table}");
        }
        assert!(text.contains("2026-12-02 05:00:07 UTC"), "{text}");
        assert!(!text.contains(".123456789"), "{text}");
        assert!(html.contains("Test Run Details"));
        assert_eq!(date_text("2026-12-02T05:00:07Z"), "2026-12-02 05:00:07 UTC");
        assert_eq!(date_text("yesterday"), "yesterday");
        assert_eq!(
            date_text("2026-12-02T05:00:07+01:00"),
            "2026-12-02T05:00:07+01:00"
        );
    }

    /// A mail level's summary row as the JSON stores it.
    fn row(name: &str, limit: &str, attempts: u64, percent: f64, judged: bool) -> Value {
        let meets = if name == "Error Rate" {
            percent < 1.0
        } else {
            percent > 95.0
        };
        json!({"name": name, "limit": limit, "attempts": attempts, "pass": attempts,
               "percent": percent, "passed": judged && meets, "judged": judged})
    }

    /// Issue 56, item 18: the mail page lacked the Summary Results QoS table
    /// and printed `none messages per minute`, `not_judged` and `Declared
    /// store false`.
    #[test]
    fn the_mail_page_has_the_summary_results_in_words() {
        let level = |load: u32, delivery: u64, outcome: &str, pop: f64| {
            json!({
                "load_percent": load, "attempted": {"mpm": 0.2 * f64::from(load)},
                "verdict": {"outcome": outcome},
                "summary": [
                    row("SMTP Connect", "5", 30, 100.0, true),
                    row("POP Connect", "5", 40, pop, true),
                    row("Delivery Time", "60", delivery, 100.0, delivery >= 59),
                    row("Error Rate", "NA", 70, 0.0, true),
                ],
            })
        };
        let mail = Record {
            kind: Kind::Mail,
            id: "20261202T050000Z-mail-first".into(),
            stored: "2026-12-02T05:00:00.5Z".into(),
            result: json!({
                "established_mpm": null, "users": 4000, "declared_store": false,
                "retry_pool": 300, "password_scheme": "argon2id",
                "phases": {"profile": "quick"},
                "levels": [level(80, 70, "passed", 100.0), level(100, 1, "not_judged", 100.0),
                           level(120, 90, "failed", 90.0)],
            }),
            ..record()
        };
        let (text, html) = pages(&mail, &Notes::default());
        for raw in ["none messages", "not_judged", "false", ".5Z"] {
            assert!(!text.contains(raw), "{raw} in:\n{text}");
        }
        let summary = &text[text.find("Summary Results").expect("Summary Results")..];
        for want in [
            "Response time limit (s)",
            "Required",
            "80%",
            "120%",
            ">95%",
            "<1%",
            "POP Connect",
            "90.00%*",
            "100.00% (1 probe)†",
            "100.00% (70 probes)",
            "too few probes to judge",
            "* fails its requirement",
        ] {
            assert!(summary.contains(want), "{want} missing from:\n{summary}");
        }
        for want in [
            "SPECmail2001-style = not established (the 100 % level did not pass)",
            "not judged (too few probes)",
            "2026-12-02 05:00:00 UTC",
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
        let declared = text
            .lines()
            .find(|l| l.contains("Declared store"))
            .expect("a Declared store row");
        assert!(declared.trim_end().ends_with("no"), "{declared}");
        let errors = summary
            .lines()
            .find(|l| l.starts_with("Error Rate"))
            .expect("an Error Rate row");
        assert!(!errors.contains('*'), "{errors}");
        assert!(html.contains("Summary Results"));
    }

    #[test]
    fn bad_notes_are_named() {
        for (bad, says) in [
            ("[disk]\na = \"b\"\n", "[disk]"),
            ("[hardware]\na = 1\n", "must be a string"),
            ("[notes]\nsut = \"one\"\n", "list of strings"),
            ("[notes]\ntuning = []\n", "sut, os and other"),
            ("not toml", "not valid TOML"),
        ] {
            let err = Notes::parse(bad).expect_err("bad notes");
            assert!(format!("{err:#}").contains(says), "{bad}: {err:#}");
        }
    }
}
