//! The results archive: every finished `stoa bench web` and `stoa bench mail`
//! run keeps its JSON result together with a description of the system it
//! measured ([`System`]: hardware, kernel and the settings that matter, the
//! server's processes, the harness), one file per run.
//!
//! - Where: `--archive DIR`, else `$XDG_DATA_HOME/stoa/results`, else
//!   `~/.local/share/stoa/results`; `--no-archive` keeps nothing.
//! - What: `ID.json`, a [`Record`]; the ID is the UTC time, the kind and the
//!   `--label` (`20261202T051500Z-web-baseline`), so a listing sorts by time.
//! - Reading: [`list`] for `stoa bench results`, [`select`] for `stoa bench
//!   compare RUN…` (a file, an ID, or a label naming every run that has it).
//!   Files that are not records are skipped and named, never fatal.
//! - [`disclose_pages`] for `stoa bench disclose`: one run as a full-disclosure
//!   page.

mod figures;
mod system;

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub(crate) use figures::Figures;
pub use system::{Harness, Server, System};

/// The version of the record's layout.
pub const FORMAT: u32 = 1;

/// Largest record read back (a find-max web run with its timelines is well
/// under 1 MiB).
const MAX_RECORD: u64 = 64 << 20;

/// Longest `--label`.
const MAX_LABEL: usize = 200;

/// Which benchmark a run was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// `stoa bench web`.
    Web,
    /// `stoa bench mail`.
    Mail,
}

impl Kind {
    /// `web` or `mail`.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Web => "web",
            Kind::Mail => "mail",
        }
    }
}

/// What a run does with its result at the end (`--archive DIR`,
/// `--no-archive`, `--label TEXT`, `--server-config FILE`): the flags of
/// `stoa bench web` and `stoa bench mail`, each field's documentation its help.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct Keep {
    /// The results archive. Default: $XDG_DATA_HOME/stoa/results, else
    /// ~/.local/share/stoa/results.
    #[arg(id = "archive", long = "archive", value_name = "DIR")]
    pub dir: Option<PathBuf>,

    /// Do not store this run in the archive.
    #[arg(long = "no-archive", conflicts_with = "archive")]
    pub off: bool,

    /// The configuration's name in the archive (`stoa bench compare` groups
    /// runs by it), e.g. "autocorking off".
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,

    /// A file describing the server's configuration (nginx.conf, stoa.toml …),
    /// stored with the run.
    #[arg(long, value_name = "FILE")]
    pub server_config: Option<PathBuf>,
}

impl Keep {
    /// Checks the label and the configuration file before a run starts, so a
    /// bad flag does not surface after an hour of load.
    pub fn check(&self) -> anyhow::Result<()> {
        if let Some(label) = &self.label {
            check_label(label)?;
        }
        if let Some(path) = &self.server_config {
            std::fs::metadata(path)
                .with_context(|| format!("--server-config {}", path.display()))?;
        }
        Ok(())
    }

    /// The archive directory this run uses.
    pub fn dir(&self) -> PathBuf {
        self.dir.clone().unwrap_or_else(default_dir)
    }

    /// The server's configuration as stored: `--server-config`'s text,
    /// bounded; empty without one.
    fn configuration(&self) -> String {
        self.server_config
            .as_ref()
            .map_or_else(String::new, |path| {
                system::bounded(
                    std::fs::read_to_string(path)
                        .unwrap_or_else(|e| format!("(cannot read {}: {e})", path.display())),
                )
            })
    }
}

/// One archived run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// [`FORMAT`].
    pub format: u32,
    /// The file's name without `.json`.
    pub id: String,
    /// Which benchmark.
    pub kind: Kind,
    /// `--label`, or `unlabelled`.
    pub label: String,
    /// When the run ended, RFC 3339 UTC.
    pub stored: String,
    /// The system measured.
    pub system: System,
    /// The run's JSON, as `report.json` / `result.json` hold it.
    pub result: Value,
}

impl Record {
    /// The headline figures of the stored result.
    pub(crate) fn figures(&self) -> Figures {
        Figures::of(self.kind, &self.result)
    }

    /// The load the run offered, in words ([`figures::load`]).
    pub(crate) fn load(&self) -> String {
        figures::load(self.kind, &self.result)
    }
}

/// `$XDG_DATA_HOME/stoa/results`, else `~/.local/share/stoa/results`, else
/// under the temporary directory.
pub fn default_dir() -> PathBuf {
    std::env::var_os("XDG_DATA_HOME")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(std::env::temp_dir)
        .join("stoa/results")
}

/// A label is printable text of at most [`MAX_LABEL`] bytes.
fn check_label(label: &str) -> anyhow::Result<()> {
    if label.trim().is_empty() {
        bail!("--label: empty");
    }
    if label.len() > MAX_LABEL {
        bail!("--label: at most {MAX_LABEL} bytes");
    }
    if label.chars().any(char::is_control) {
        bail!("--label: control characters are not allowed");
    }
    Ok(())
}

/// The label's part of an ID: letters, digits, `.`, `_` and `-`, others as
/// `-`, at most 40 characters.
fn slug(label: &str) -> String {
    let s: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let s = s.trim_matches(['-', '.']).to_owned();
    if s.is_empty() { "run".to_owned() } else { s }
}

/// Stores `result` (a run of `kind`) as `keep` says; returns the file written,
/// `None` with `--no-archive`. The file appears whole or not at all.
pub(crate) fn store(
    keep: &Keep,
    kind: Kind,
    result: Value,
    system: System,
) -> anyhow::Result<Option<PathBuf>> {
    if keep.off {
        return Ok(None);
    }
    let label = keep
        .label
        .clone()
        .unwrap_or_else(|| "unlabelled".to_owned());
    check_label(&label)?;
    let dir = keep.dir();
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let now = time::OffsetDateTime::now_utc();
    let stamp = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute(),
        now.second()
    );
    let stored = now
        .format(&time::format_description::well_known::Rfc3339)
        .context("cannot format the time")?;
    let base = format!("{stamp}-{}-{}", kind.name(), slug(&label));
    let mut record = Record {
        format: FORMAT,
        id: base.clone(),
        kind,
        label,
        stored,
        system,
        result,
    };
    for n in 1..100 {
        if n > 1 {
            record.id = format!("{base}-{n}");
        }
        let path = dir.join(format!("{}.json", record.id));
        let mut tmp = tempfile::NamedTempFile::new_in(&dir)
            .with_context(|| format!("cannot create a file in {}", dir.display()))?;
        serde_json::to_writer_pretty(tmp.as_file_mut(), &record)
            .context("cannot write the archived run")?;
        tmp.as_file()
            .sync_all()
            .context("cannot sync the archived run")?;
        match tmp.persist_noclobber(&path) {
            Ok(_) => return Ok(Some(path)),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e.error).with_context(|| format!("cannot write {}", path.display()));
            }
        }
    }
    bail!("{} already holds 99 runs named {base}", dir.display())
}

/// Stores a finished run as `keep` says and names the file on standard error:
/// its JSON `result`, the server as the report names it (`software`,
/// `target`) and its processes' `command_lines`. A run whose report is
/// printed is not failed for want of an archive: the error is printed instead.
pub(crate) fn keep_run(
    keep: &Keep,
    kind: Kind,
    result: Value,
    (software, target): (&str, String),
    processes: Vec<String>,
) {
    if keep.off {
        return;
    }
    let system = System::collect(Server {
        software: software.to_owned(),
        target,
        processes,
        configuration: keep.configuration(),
    });
    match store(keep, kind, result, system) {
        Ok(Some(path)) => eprintln!("stoa bench: run stored as {}", path.display()),
        Ok(None) => {}
        Err(e) => eprintln!("stoa bench: the run was not archived: {e:#}"),
    }
}

/// `stoa bench results`: the runs stored in `dir`.
pub fn results_page(dir: &Path) -> anyhow::Result<String> {
    let (records, skipped) = list(dir)?;
    Ok(crate::report::archive::results(
        &dir.display().to_string(),
        &records,
        &skipped,
    ))
}

/// `stoa bench compare RUN…`: the runs `refs` name (see [`select`]) side by
/// side, one column per label.
pub fn compare_page(dir: &Path, refs: &[String]) -> anyhow::Result<String> {
    crate::report::archive::compare(&select(dir, refs)?)
}

/// `stoa bench disclose RUN`: the full-disclosure page of the one run `run`
/// names, as (text, HTML), with the tester's `notes` file.
pub fn disclose_pages(
    dir: &Path,
    run: &str,
    notes: Option<&Path>,
) -> anyhow::Result<(String, String)> {
    let notes = match notes {
        Some(path) => crate::report::disclose::Notes::read(path)?,
        None => crate::report::disclose::Notes::default(),
    };
    let mut found = select(dir, &[run.to_owned()])?;
    if found.len() != 1 {
        bail!(
            "{run} names {} runs; give one ID (`stoa bench results` lists them)",
            found.len()
        );
    }
    let record = found.remove(0);
    Ok(crate::report::disclose::pages(&record, &notes))
}

/// The command lines of `pids` that can still be read.
pub(crate) fn command_lines(pids: &[u32]) -> Vec<String> {
    pids.iter()
        .filter_map(|&p| system::command_line(p))
        .collect()
}

/// Reads one record file.
pub fn load(path: &Path) -> anyhow::Result<Record> {
    let meta =
        std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if meta.len() > MAX_RECORD {
        bail!(
            "{}: {} bytes, more than a run's record holds ({MAX_RECORD})",
            path.display(),
            meta.len()
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let record: Record = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a stored run", path.display()))?;
    if record.format != FORMAT {
        bail!(
            "{}: record format {}, this harness reads {FORMAT}",
            path.display(),
            record.format
        );
    }
    Ok(record)
}

/// Every record in `dir`, oldest first, and the files skipped (with why).
pub fn list(dir: &Path) -> anyhow::Result<(Vec<Record>, Vec<String>)> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", dir.display())),
    };
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot read {}", dir.display()))?
            .path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        match load(&path) {
            Ok(r) => records.push(r),
            Err(e) => skipped.push(format!("{e:#}")),
        }
    }
    records.sort_by(|a, b| (&a.stored, &a.id).cmp(&(&b.stored, &b.id)));
    Ok((records, skipped))
}

/// The runs `refs` name, each a record file, an ID in `dir`, or a label (all
/// of its runs in `dir`), in the order given and without repeats.
pub fn select(dir: &Path, refs: &[String]) -> anyhow::Result<Vec<Record>> {
    let mut all: Option<Vec<Record>> = None;
    let mut out: Vec<Record> = Vec::new();
    for r in refs {
        let path = Path::new(r);
        let found = if path.is_file() {
            vec![load(path)?]
        } else {
            if all.is_none() {
                all = Some(list(dir)?.0);
            }
            let records = all.as_deref().unwrap_or_default();
            let by_id: Vec<Record> = records.iter().filter(|x| &x.id == r).cloned().collect();
            if by_id.is_empty() {
                records.iter().filter(|x| &x.label == r).cloned().collect()
            } else {
                by_id
            }
        };
        if found.is_empty() {
            bail!(
                "{r}: no such file, and no run with that ID or label in {} (`stoa bench results` lists them)",
                dir.display()
            );
        }
        for f in found {
            if !out.iter().any(|o| o.id == f.id) {
                out.push(f);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn keep(dir: &Path, label: &str) -> Keep {
        Keep {
            dir: Some(dir.to_owned()),
            off: false,
            label: Some(label.to_owned()),
            server_config: None,
        }
    }

    #[test]
    fn a_run_round_trips_and_is_found_by_id_label_and_path() {
        let dir = tempfile::tempdir().expect("the test's own data");
        let system = System::collect(Server {
            software: "nginx/1.22.1".into(),
            ..Server::default()
        });
        let result =
            json!({"score": 400, "median_iteration": 1, "iterations": [{"ops_per_sec": 1130.0}]});
        let a = store(
            &keep(dir.path(), "tcp autocorking on"),
            Kind::Web,
            result.clone(),
            system.clone(),
        )
        .expect("the test's own data")
        .expect("the test's own data");
        let b = store(
            &keep(dir.path(), "tcp autocorking on"),
            Kind::Web,
            result.clone(),
            system.clone(),
        )
        .expect("the test's own data")
        .expect("the test's own data");
        assert_ne!(a, b, "two runs in the same second get two files");
        let back = load(&a).expect("the test's own data");
        assert_eq!(back.kind, Kind::Web);
        assert_eq!(back.label, "tcp autocorking on");
        assert_eq!(back.system, system);
        assert_eq!(back.result, result);
        assert!(back.id.contains("-web-tcp-autocorking-on"), "{}", back.id);
        assert_eq!(back.figures().score, Some(400.0));

        std::fs::write(dir.path().join("junk.json"), "{").expect("the test's own data");
        std::fs::write(dir.path().join("notes.txt"), "x").expect("the test's own data");
        let (records, skipped) = list(dir.path()).expect("the test's own data");
        assert_eq!(records.len(), 2);
        assert_eq!(skipped.len(), 1, "{skipped:?}");

        let by_label =
            select(dir.path(), &["tcp autocorking on".to_owned()]).expect("the test's own data");
        assert_eq!(by_label.len(), 2);
        let by_id =
            select(dir.path(), &[back.id.clone(), back.id.clone()]).expect("the test's own data");
        assert_eq!(by_id.len(), 1, "repeats are dropped");
        let by_path = select(dir.path(), &[b.display().to_string()]).expect("the test's own data");
        assert_eq!(by_path.len(), 1);
        let err = select(dir.path(), &["nothing".to_owned()]).expect_err("this must fail");
        assert!(
            format!("{err:#}").contains("no run with that ID or label"),
            "{err:#}"
        );
    }

    #[test]
    fn no_archive_keeps_nothing_and_bad_labels_are_refused() {
        let dir = tempfile::tempdir().expect("the test's own data");
        let mut k = keep(dir.path(), "a");
        k.off = true;
        assert_eq!(
            store(&k, Kind::Mail, json!({}), System::default()).expect("the test's own data"),
            None
        );
        assert!(list(dir.path()).expect("the test's own data").0.is_empty());
        assert!(keep(dir.path(), "two\nlines").check().is_err());
        assert!(keep(dir.path(), " ").check().is_err());
        assert!(keep(dir.path(), &"x".repeat(201)).check().is_err());
        assert!(
            keep(dir.path(), "B: sysctl net.ipv4.tcp_autocorking=0")
                .check()
                .is_ok()
        );
        assert_eq!(slug("B: tcp_autocorking=0 / ÷"), "B--tcp_autocorking-0");
        assert_eq!(slug("///"), "run");
    }

    #[test]
    fn a_missing_archive_is_empty_and_other_formats_are_named() {
        let dir = tempfile::tempdir().expect("the test's own data");
        assert!(
            list(&dir.path().join("none"))
                .expect("the test's own data")
                .0
                .is_empty()
        );
        let path = dir.path().join("old.json");
        let mut r = serde_json::to_value(Record {
            format: FORMAT,
            id: "old".into(),
            kind: Kind::Web,
            label: "x".into(),
            stored: "2026-01-01T00:00:00Z".into(),
            system: System::default(),
            result: json!({}),
        })
        .expect("the test's own data");
        r["format"] = json!(99);
        std::fs::write(&path, r.to_string()).expect("the test's own data");
        let err = load(&path).expect_err("this must fail");
        assert!(format!("{err:#}").contains("record format 99"), "{err:#}");
    }
}
