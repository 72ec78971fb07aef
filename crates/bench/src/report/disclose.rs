//! `stoa bench disclose`: a stored run as a full-disclosure page, laid out as
//! the published result pages are. First the result and its iterations (or
//! levels), then the configuration sections (Hardware, Software, the server,
//! Test Sponsor, Network, Clients, Benchmark Configuration), then the Notes,
//! and the non-compliance box when the run has deviations.
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

use super::doc::{Block, Document, Table, cells};
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
                r["score"]
                    .as_u64()
                    .map_or("none".to_owned(), |n| n.to_string())
            ),
            Kind::Mail => format!(
                "{benchmark} = {} messages per minute{nc}",
                r["established_mpm"]
                    .as_f64()
                    .map_or("none".to_owned(), |m| format!("{m:.0}"))
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
            ("Test Date".into(), record.stored.clone()),
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
    doc
}

fn value_text(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
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
                    value_text(&l["verdict"]["outcome"]),
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
