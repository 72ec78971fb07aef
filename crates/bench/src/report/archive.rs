//! The archive's two pages: `stoa bench results` (one row per stored run) and
//! `stoa bench compare` (one column per configuration, in the manner of the
//! LKML post that compared a kernel with and without a patch: the score, the
//! throughput and the server's CPU per operation, the differences with their
//! 95 % intervals when a configuration has several runs, and the rows of the
//! system description that differ).

use anyhow::bail;

use super::doc::{Cell, Document, Table, cells};
use super::text::{self, Layout};
use crate::archive::{Figures, Kind, Record};
use crate::compliance::grouped;
use crate::stats::{Difference, Sample, larger_cv, runs_to_detect};

/// The smallest difference the compare page says how many runs would detect.
const DETECT: f64 = 0.02;

/// `stoa bench results`: the stored runs of `records`, oldest first, and the
/// files that were skipped.
pub(crate) fn results(dir: &str, records: &[Record], skipped: &[String]) -> String {
    let mut doc = Document::new(
        format!("Stored benchmark runs in {dir}"),
        "SPECweb99-style and SPECmail2001-style results; not SPEC results. SPEC, SPECweb and \
         SPECmail are trademarks of the Standard Performance Evaluation Corporation.",
    );
    if records.is_empty() {
        doc.para("No runs stored yet: every `stoa bench web` and `stoa bench mail` run stores one (--archive DIR chooses where).");
    } else {
        let mut t = Table::new(&["ID", "Kind", "Label", "Score", "Server"]);
        for r in records {
            let f = r.figures();
            t.row(cells([
                r.id.clone(),
                r.kind.name().to_owned(),
                r.label.clone(),
                score_text(r.kind, &f),
                r.system.server.software.clone(),
            ]));
        }
        doc.table(t);
        doc.para("Score: conforming connections (web) or established messages/min (mail); `(nc)` marks a run that broke the kit's rules. `stoa bench compare ID|LABEL…` puts runs side by side.");
    }
    if !skipped.is_empty() {
        doc.heading(2, "Files skipped");
        doc.push(super::doc::Block::List(skipped.to_vec()));
    }
    text::render(&doc, Layout::Plain)
}

fn score_text(kind: Kind, f: &Figures) -> String {
    let nc = if f.compliant { "" } else { " (nc)" };
    match f.score {
        Some(s) => format!("{}{nc}", number(s, kind == Kind::Mail)),
        None => format!("none{nc}"),
    }
}

/// A figure as printed: whole numbers with thousands separators from 100 up,
/// else three significant digits.
fn number(v: f64, keep_tenths: bool) -> String {
    if v.abs() >= 100.0 && !(keep_tenths && v.fract().abs() > 1e-9) {
        let sign = if v < 0.0 { "-" } else { "" };
        format!("{sign}{}", grouped(v.abs().round() as u64))
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One configuration: a label and its runs.
struct Group<'a> {
    label: &'a str,
    runs: Vec<&'a Record>,
}

/// Which figure of a run a row shows.
type Pick = fn(&Figures) -> Option<f64>;

/// One figure of every run of a group.
fn values(g: &Group<'_>, pick: Pick) -> Vec<f64> {
    g.runs.iter().filter_map(|r| pick(&r.figures())).collect()
}

/// Refuses a label whose runs offered different loads (another
/// `--connections` or `--run-time`, web; another rate, levels or
/// `--run-time`, mail): a column's mean and interval treat its runs as
/// repeats of one experiment, and splitting them into made-up columns would
/// hide that the label was given to two. The error names the two runs, so
/// the caller can pick runs by ID or store them under separate labels.
fn same_load(g: &Group<'_>) -> anyhow::Result<()> {
    let Some((first, rest)) = g.runs.split_first() else {
        return Ok(());
    };
    let want = first.load();
    for r in rest {
        let got = r.load();
        if got != want {
            bail!(
                "label {:?} holds runs of different loads: {} ({want}) and {} ({got}); a \
                 configuration's runs must repeat one load: name the runs to compare by ID \
                 (`stoa bench results` lists them) or store each load under its own --label",
                g.label,
                first.id,
                r.id
            );
        }
    }
    Ok(())
}

/// `stoa bench compare`: `records` grouped by label, in the order given.
pub(crate) fn compare(records: &[Record]) -> anyhow::Result<String> {
    let Some(first) = records.first() else {
        bail!("no runs to compare");
    };
    let kind = first.kind;
    if let Some(other) = records.iter().find(|r| r.kind != kind) {
        bail!(
            "{} is a {} run and {} a {} run: compare runs of one benchmark",
            first.id,
            kind.name(),
            other.id,
            other.kind.name()
        );
    }
    let mut groups: Vec<Group<'_>> = Vec::new();
    for r in records {
        match groups.iter_mut().find(|g| g.label == r.label) {
            Some(g) => g.runs.push(r),
            None => groups.push(Group {
                label: &r.label,
                runs: vec![r],
            }),
        }
    }
    for g in &groups {
        same_load(g)?;
    }
    let notice = match kind {
        Kind::Web => super::web::NOTICE,
        Kind::Mail => super::mail::NOTICE,
    };
    let mut doc = Document::new(
        format!(
            "{} configurations compared ({} runs)",
            groups.len(),
            records.len()
        ),
        notice,
    );
    let units = kind.units();
    let figures: [(&str, Pick); 3] = [
        (units.score, |f| f.score),
        (units.throughput, |f| f.throughput),
        (units.server_cpu, |f| f.server_cpu),
    ];
    let mut head = vec![""];
    head.extend(groups.iter().map(|g| g.label));
    let mut t = Table::new(&head);
    let mut runs_row: Vec<Cell> = vec!["Runs".into()];
    runs_row.extend(groups.iter().map(|g| Cell::from(g.runs.len().to_string())));
    t.row(runs_row);
    let mut notes = Vec::new();
    for (name, pick) in figures {
        let samples: Vec<Option<Sample>> = groups
            .iter()
            .map(|g| Sample::of(&values(g, pick)))
            .collect();
        let mut row: Vec<Cell> = vec![name.into()];
        row.extend(
            samples
                .iter()
                .map(|s| Cell::from(sample_text(s.as_ref(), kind))),
        );
        t.row(row);
        let Some(Some(base)) = samples.first() else {
            continue;
        };
        let mut diff_row: Vec<Cell> = vec![format!("  difference vs {}", groups[0].label).into()];
        diff_row.push("".into());
        for (g, s) in groups.iter().zip(&samples).skip(1) {
            diff_row.push(Cell::from(match s {
                Some(s) => difference_text(base, s, name, g.label, &mut notes),
                None => "none".to_owned(),
            }));
        }
        if groups.len() > 1 {
            t.row(diff_row);
        }
    }
    doc.table(t);
    doc.para(
        "Each figure is the mean of the configuration's runs (± the sample standard deviation \
         when there are several). A difference is B − A over A's mean, with its 95 % confidence \
         interval (Welch's t) when both configurations have at least two runs; it is \
         significant when the interval leaves out zero, marked `*`.",
    );
    if !notes.is_empty() {
        doc.push(super::doc::Block::List(notes));
    }
    let differing = differing_rows(&groups);
    doc.heading(2, "System description: the rows that differ");
    if differing.rows.is_empty() {
        doc.para("None: every configuration ran on the same system as described.");
    } else {
        doc.table(differing);
    }
    Ok(text::render(&doc, Layout::Plain))
}

fn sample_text(s: Option<&Sample>, kind: Kind) -> String {
    let tenths = kind == Kind::Mail;
    match s {
        None => "none".to_owned(),
        Some(s) if s.n < 2 => number(s.mean, tenths),
        Some(s) => format!("{} ± {}", number(s.mean, tenths), number(s.sd, tenths)),
    }
}

/// `+2.2 % (± 1.1 %)*`, and a note of how many runs would settle it when the
/// interval is too wide.
fn difference_text(
    a: &Sample,
    b: &Sample,
    figure: &str,
    label: &str,
    notes: &mut Vec<String>,
) -> String {
    if a.mean == 0.0 {
        return "n/a".to_owned();
    }
    match Difference::welch(a, b) {
        Some(d) => {
            let (rel, half) = d.relative().unwrap_or((0.0, 0.0));
            let mark = if d.significant() { "*" } else { "" };
            if !d.significant() {
                let cv = larger_cv(&[Some(*a), Some(*b)]);
                // No spread at all (every run the same figure): nothing to add.
                if let Some(n) = runs_to_detect(cv, DETECT).filter(|_| cv > 0.0) {
                    notes.push(format!(
                        "{figure}, {label}: no difference detected at this precision; about {n} runs of each would detect {:.0} % (at the {:.1} % spread seen).",
                        DETECT * 100.0,
                        cv * 100.0
                    ));
                }
            }
            format!("{:+.1} % (± {:.1} %){mark}", rel * 100.0, half * 100.0)
        }
        None => {
            notes.push(format!(
                "{figure}, {label}: one run on a side, so no interval; a single pair of runs cannot tell a few per cent from noise."
            ));
            format!("{:+.1} %", (b.mean - a.mean) / a.mean * 100.0)
        }
    }
}

/// The rows of the system description whose value is not the same for every
/// configuration (`varies` where a configuration's own runs disagree).
fn differing_rows(groups: &[Group<'_>]) -> Table {
    let mut head = vec![""];
    head.extend(groups.iter().map(|g| g.label));
    let mut t = Table::new(&head);
    t.left = true;
    let described: Vec<Vec<Vec<(String, String)>>> = groups
        .iter()
        .map(|g| g.runs.iter().map(|r| r.system.rows()).collect())
        .collect();
    let mut names: Vec<String> = Vec::new();
    for rows in described.iter().flatten().flatten() {
        if !names.contains(&rows.0) {
            names.push(rows.0.clone());
        }
    }
    for name in names {
        let per_group: Vec<String> = described
            .iter()
            .map(|runs| {
                let vals: Vec<&str> = runs
                    .iter()
                    .map(|rows| {
                        rows.iter()
                            .find(|(k, _)| *k == name)
                            .map_or("(not recorded)", |(_, v)| v.as_str())
                    })
                    .collect();
                if vals.windows(2).all(|w| w[0] == w[1]) {
                    vals.first().copied().unwrap_or("").to_owned()
                } else {
                    "varies".to_owned()
                }
            })
            .collect();
        if per_group.windows(2).any(|w| w[0] != w[1]) || per_group.iter().any(|v| v == "varies") {
            let mut row: Vec<Cell> = vec![name.into()];
            row.extend(per_group.into_iter().map(Cell::from));
            t.row(row);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::archive::{FORMAT, Server, System};

    fn run(id: &str, label: &str, score: f64, autocorking: &str) -> Record {
        let mut system = System {
            server: Server {
                software: "Stoa".into(),
                ..Server::default()
            },
            ..System::default()
        };
        system
            .sysctls
            .insert("net.ipv4.tcp_autocorking".into(), autocorking.into());
        Record {
            format: FORMAT,
            id: id.into(),
            kind: Kind::Web,
            label: label.into(),
            stored: format!("2026-12-02T05:00:{id}Z"),
            system,
            result: json!({
                "score": score, "median_iteration": 1, "compliant": true,
                "iterations": [{"ops_per_sec": score * 2.8, "harness": {"server_cpu_us_per_op": 50.0}}],
            }),
        }
    }

    #[test]
    fn two_configurations_with_several_runs_get_an_interval() {
        let records = vec![
            run("01", "A", 2982.0, "1"),
            run("02", "B", 3049.0, "0"),
            run("03", "A", 2990.0, "1"),
            run("04", "B", 3041.0, "0"),
            run("05", "A", 2975.0, "1"),
            run("06", "B", 3052.0, "0"),
        ];
        let page = compare(&records).expect("the test's own data");
        assert!(
            page.contains("2 configurations compared (6 runs)"),
            "{page}"
        );
        assert!(page.contains("difference vs A"), "{page}");
        // (3047.3 − 2982.3) / 2982.3 = +2.2 %, well outside the noise.
        assert!(page.contains("+2.2 % (±"), "{page}");
        assert!(page.contains(")*"), "{page}");
        assert!(page.contains("net.ipv4.tcp_autocorking"), "{page}");
        assert!(
            !page.contains("CPU governor"),
            "equal rows are left out: {page}"
        );
    }

    #[test]
    fn single_runs_say_they_cannot_judge() {
        let page = compare(&[run("01", "A", 2982.0, "1"), run("02", "B", 3049.0, "1")])
            .expect("the test's own data");
        assert!(page.contains("+2.2 %"), "{page}");
        assert!(page.contains("one run on a side"), "{page}");
        assert!(
            page.contains("None: every configuration ran on the same system"),
            "{page}"
        );
    }

    #[test]
    fn kinds_do_not_mix_and_the_listing_names_runs() {
        let mut mail = run("02", "B", 1.0, "1");
        mail.kind = Kind::Mail;
        assert!(compare(&[run("01", "A", 1.0, "1"), mail]).is_err());
        assert!(compare(&[]).is_err());
        let page = results(
            "/tmp/r",
            &[run("01", "A", 2982.0, "1")],
            &["junk.json: bad".into()],
        );
        assert!(page.contains("2,982"), "{page}");
        assert!(page.contains("junk.json: bad"), "{page}");
        assert!(results("/tmp/r", &[], &[]).contains("No runs stored yet"));
    }

    /// Issue 56, item 18: runs of another --connections or --run-time under
    /// one label were averaged into one column.
    #[test]
    fn a_label_with_runs_of_different_loads_is_refused() {
        let with = |id: &str, label: &str, connections: u32, run_s: u32| {
            let mut r = run(id, label, 2982.0, "1");
            r.result["requested_connections"] = json!(connections);
            r.result["profile"] = json!({"run_s": run_s});
            r
        };
        let same = [
            with("01", "A", 100, 60),
            with("02", "A", 100, 60),
            with("03", "B", 200, 60),
        ];
        assert!(
            compare(&same).is_ok(),
            "one load per label; labels may differ"
        );
        for odd in [with("02", "A", 200, 60), with("02", "A", 100, 300)] {
            let err = compare(&[with("01", "A", 100, 60), odd])
                .expect_err("two loads under one label")
                .to_string();
            assert!(err.contains("label \"A\" holds runs of different loads: 01 (100 connections, measured 60 s) and 02 ("), "{err}");
            assert!(err.contains("--label"), "{err}");
        }
        let mail = |id: &str, mpm: f64| {
            let mut r = run(id, "M", 1.0, "1");
            r.kind = Kind::Mail;
            r.result = json!({"mpm": mpm, "phases": {"run_secs": 180.0},
                              "levels": [{"load_percent": 100}], "find_max": {"trials": []}});
            r
        };
        let err = compare(&[mail("01", 20.0), mail("02", 40.0)])
            .expect_err("two rates under one label")
            .to_string();
        assert!(
            err.contains("20 msgs/min at 100 %, measured 180 s"),
            "{err}"
        );
        assert!(compare(&[mail("01", 20.0), mail("02", 20.0)]).is_ok());
    }
}
