//! The report's System Configuration: the tiers of a system of several
//! processes (`--tier`), in the manner of the published pages' "System
//! configurations" (one section per server role), with what each tier cost and
//! handled at each level.

use serde_json::{Value, json};

use super::super::doc::{Block, Document, Table, cells};
use super::{int, load_label, num, pct};
use crate::mail::Front;
use crate::mail::run::{LevelResult, MailRun};
use crate::mail::tiers::{TierInfo, TierLevel};

/// "stoa (1234)", "nginx (10, 11)": each process name with its pids.
fn processes(t: &TierInfo) -> String {
    let mut groups: Vec<(&str, Vec<u32>)> = Vec::new();
    for (name, &pid) in t.processes.iter().zip(&t.pids) {
        match groups.iter_mut().find(|(n, _)| n == name) {
            Some((_, pids)) => pids.push(pid),
            None => groups.push((name, vec![pid])),
        }
    }
    groups
        .iter()
        .map(|(name, pids)| {
            let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
            format!("{name} ({})", pids.join(", "))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The first figure of a tier's Handled column (what "CPU ms per item" divides
/// by): the harness's sessions, else its first log count.
fn first_item(l: &TierLevel) -> Option<u64> {
    l.sessions.or_else(|| l.counts.first().copied().flatten())
}

/// CPU milliseconds per item, when both are known and there are items.
fn per_item(l: &TierLevel) -> String {
    match (l.cpu, first_item(l)) {
        (Some(cpu), Some(n)) if n > 0 => num(cpu.as_secs_f64() * 1000.0 / n as f64, 2),
        _ => "n/a".to_owned(),
    }
}

/// What a tier handled in a level's window, with where each figure comes from.
fn handled(t: &TierInfo, l: &TierLevel) -> String {
    let mut parts = Vec::new();
    match (t.front, l.sessions) {
        (Some(Front::Smtp), Some(n)) => parts.push(format!(
            "{} SMTP sessions, {} messages (harness)",
            int(n),
            int(l.messages.unwrap_or(0)),
        )),
        (Some(Front::Pop3), Some(n)) => parts.push(format!("{} POP sessions (harness)", int(n))),
        _ => {}
    }
    for (c, n) in t.counts.iter().zip(&l.counts) {
        parts.push(match n {
            Some(n) => format!("{} {} (log)", int(*n), c.label),
            None => format!("{}: log unreadable", c.label),
        });
    }
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join("; ")
    }
}

/// The System Configuration section; nothing without `--tier`.
pub(super) fn system(doc: &mut Document, run: &MailRun) {
    if run.tiers.is_empty() {
        return;
    }
    doc.push(Block::Heading(1, "System Configuration".into()));
    let mut t = Table::new(&["Tier", "Processes", "Peak memory (MiB)", "Notes"]);
    for tier in &run.tiers {
        t.row(cells([
            tier.role.clone(),
            processes(tier),
            tier.peak_kib
                .map_or_else(|| "n/a".to_owned(), |k| num(k as f64 / 1024.0, 1)),
            tier.note.clone().unwrap_or_default(),
        ]));
    }
    doc.push(Block::Table(t));
    let mut t = Table::new(&[
        "Tier",
        "Load",
        "CPU (s)",
        "Of one core",
        "CPU ms per item",
        "Handled in the window",
    ]);
    for (i, tier) in run.tiers.iter().enumerate() {
        for level in &run.levels {
            let Some(l) = level.tiers.get(i) else {
                continue;
            };
            t.row(cells([
                tier.role.clone(),
                load_label(level.load),
                l.cpu
                    .map_or_else(|| "n/a".to_owned(), |d| num(d.as_secs_f64(), 2)),
                share_of_core(l, level),
                per_item(l),
                handled(tier, l),
            ]));
        }
    }
    doc.push(Block::Table(t));
    doc.push(Block::List(sources(run)));
}

/// CPU over the window as a share of one core.
fn share_of_core(l: &TierLevel, level: &LevelResult) -> String {
    match l.cpu {
        Some(d) if level.tally.window_secs > 0.0 => {
            pct(d.as_secs_f64() * 100.0 / level.tally.window_secs)
        }
        _ => "n/a".to_owned(),
    }
}

/// Where the section's figures come from.
fn sources(run: &MailRun) -> Vec<String> {
    let mut out = vec![
        "CPU: user + system time of the tier's processes (all threads; reaped children not \
         included) from /proc/PID/stat, sampled at the start and the end of each measurement \
         window. Peak memory: the sum of the processes' VmHWM (each one's own peak resident \
         set, so an upper bound on the tier's) at the end of the run, the store's fill included."
            .to_owned(),
        "CPU ms per item: the tier's CPU over the window divided by the first figure it \
         handled (the harness's sessions for the tier at --smtp or --pop3, else its first log \
         count), whatever else it did in the window."
            .to_owned(),
        "harness: the sessions the harness started in the window at the tier's address (SMTP: \
         completed, failed or dropped sessions and the messages sent in them; POP: the same for \
         POP sessions, the delivery probes' polls not included)."
            .to_owned(),
    ];
    for t in &run.tiers {
        for c in &t.counts {
            out.push(format!(
                "log: {} of {}: lines of {} containing {:?} written during the window.",
                c.label, t.role, c.file, c.text
            ));
        }
    }
    out
}

/// The tiers for the JSON (`TierInfo` as it is).
pub(super) fn tiers_json(run: &MailRun) -> Value {
    json!(run.tiers)
}

/// One level's tier figures for the JSON, each with its role.
pub(super) fn level_tiers_json(run: &MailRun, l: &LevelResult) -> Value {
    let levels: Vec<Value> = run
        .tiers
        .iter()
        .zip(&l.tiers)
        .map(|(t, x)| {
            let counts: serde_json::Map<String, Value> = t
                .counts
                .iter()
                .zip(&x.counts)
                .map(|(c, n)| (c.label.clone(), json!(n)))
                .collect();
            json!({
                "role": t.role,
                "cpu_secs": x.cpu.map(|d| d.as_secs_f64()),
                "sessions": x.sessions,
                "messages": x.messages,
                "counts": counts,
            })
        })
        .collect();
    json!(levels)
}
