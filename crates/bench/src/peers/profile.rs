//! `--profile-load N`: after the rounds, one more run per server at N paced
//! connections (static GETs) with `perf` attached to its worker for the whole
//! run: `perf stat` counts its system calls (per operation the run finished),
//! and, when inferno is installed, `perf record -g` samples its stacks, folded
//! (`inferno-collapse-perf`) and drawn (`inferno-flamegraph`). The flame
//! graph and the folded stacks go beside the run's record in the results
//! archive (the directory named after the record), never into the result
//! directory. Without `perf` the summary says so and the comparison goes on.

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::server::which;

/// Longest `perf` may take to write its output once interrupted, and each
/// step of drawing the flame graph.
const FINISH: Duration = Duration::from_secs(120);
/// `perf record`'s sampling rate, Hz.
const FREQUENCY: &str = "999";

/// The profilers attached to one server's worker during one run.
#[derive(Debug)]
pub(crate) struct Attached {
    stat: Child,
    stat_out: PathBuf,
    record: Option<(Child, PathBuf)>,
}

/// Whether `perf` is on the path; whether inferno's two programs are.
pub(crate) fn tools() -> (bool, bool) {
    (
        which("perf").is_some(),
        which("inferno-collapse-perf").is_some() && which("inferno-flamegraph").is_some(),
    )
}

impl Attached {
    /// `perf stat` (and with `flame`, `perf record -g`) on `pid`, their
    /// output in `dir`.
    pub(crate) fn start(pid: u32, dir: &Path, flame: bool) -> anyhow::Result<Attached> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let stat_out = dir.join("syscalls.perfstat");
        let stat = perf(dir, "stat.log")?
            .args(["stat", "-e", "raw_syscalls:sys_enter", "-x", ",", "-o"])
            .arg(&stat_out)
            .args(["-p", &pid.to_string()])
            .spawn()
            .context("cannot run perf stat")?;
        let record = if flame {
            let data = dir.join("perf.data");
            let child = perf(dir, "record.log")?
                .args([
                    "record",
                    "-q",
                    "-e",
                    "cpu-clock",
                    "-F",
                    FREQUENCY,
                    "-g",
                    "-o",
                ])
                .arg(&data)
                .args(["-p", &pid.to_string()])
                .spawn()
                .context("cannot run perf record")?;
            Some((child, data))
        } else {
            None
        };
        Ok(Attached {
            stat,
            stat_out,
            record,
        })
    }

    /// Interrupts the profilers and reads what they wrote: the system calls
    /// counted, and the folded stacks (with `perf record`).
    pub(crate) fn finish(self) -> anyhow::Result<(u64, Option<PathBuf>)> {
        let dir = self.stat_out.parent().unwrap_or(Path::new(".")).to_owned();
        let record = self.record.map(|(child, data)| {
            interrupt(child)?;
            fold(&data, &dir.join("stacks.folded"))
        });
        interrupt(self.stat)?;
        let text = std::fs::read_to_string(&self.stat_out)
            .with_context(|| format!("cannot read {}", self.stat_out.display()))?;
        let calls = syscalls(&text).with_context(|| {
            format!(
                "perf stat counted no system calls: {}",
                super::server::tail(&dir.join("stat.log"))
            )
        })?;
        Ok((calls, record.transpose()?))
    }
}

/// `perf` with its standard output and error to `dir/log`.
fn perf(dir: &Path, log: &str) -> anyhow::Result<Command> {
    let log = File::create(dir.join(log)).context("cannot create perf's log")?;
    let mut cmd = Command::new("perf");
    cmd.stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    Ok(cmd)
}

/// SIGINT to `child` (perf writes its output and exits), then waits for it
/// up to [`FINISH`].
fn interrupt(child: Child) -> anyhow::Result<()> {
    super::server::signal(child.id(), rustix::process::Signal::INT);
    super::load::wait_bounded(child, FINISH).map(drop)
}

/// The count of `perf stat -x ,` output's `raw_syscalls:sys_enter` line.
fn syscalls(text: &str) -> Option<u64> {
    text.lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| {
            f.get(2)
                .is_some_and(|e| e.starts_with("raw_syscalls:sys_enter"))
        })
        .and_then(|f| f.first()?.trim().parse().ok())
}

/// `perf script -i DATA | inferno-collapse-perf --all > FOLDED` (through a
/// file beside DATA).
fn fold(data: &Path, folded: &Path) -> anyhow::Result<PathBuf> {
    let script = data.with_extension("script");
    let mut perf = Command::new("perf");
    perf.arg("script").arg("-i").arg(data);
    filter(perf, None, &script)?;
    let mut collapse = Command::new("inferno-collapse-perf");
    collapse.arg("--all");
    filter(collapse, Some(&script), folded)?;
    Ok(folded.to_owned())
}

/// `inferno-flamegraph --title TITLE < FOLDED > SVG`.
pub(crate) fn draw(folded: &Path, svg: &Path, title: &str) -> anyhow::Result<()> {
    let mut draw = Command::new("inferno-flamegraph");
    draw.args(["--title", title]);
    filter(draw, Some(folded), svg)
}

/// Runs `cmd` from `input` (or nothing) to `output`, up to [`FINISH`]; fails
/// unless it exits with success.
fn filter(mut cmd: Command, input: Option<&Path>, output: &Path) -> anyhow::Result<()> {
    let stdin = match input {
        Some(path) => Stdio::from(File::open(path)?),
        None => Stdio::null(),
    };
    let program = cmd.get_program().to_owned();
    let status = cmd
        .stdin(stdin)
        .stdout(File::create(output)?)
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot run {program:?}"))
        .and_then(|c| super::load::wait_bounded(c, FINISH))?;
    if !status.success() {
        bail!("{program:?} failed ({status})");
    }
    Ok(())
}

/// The record a `stoa bench web` run was archived as, from its log's
/// "run stored as PATH" line.
pub(crate) fn archived_as(log: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("stoa bench: run stored as "))
        .map(|p| PathBuf::from(p.trim()))
}

/// One server's profile, for the summary.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outcome {
    /// The server's name.
    pub(crate) server: String,
    /// System calls per operation, or why there is no figure.
    pub(crate) syscalls_per_op: Result<f64, String>,
    /// Where its flame graph was kept, or why there is none.
    pub(crate) flame: Result<PathBuf, String>,
}

/// The summary's profile section: per server, system calls per operation and
/// where the flame graph is; `note` when there was no profile at all.
pub(crate) fn section(load: u32, outcomes: &[Outcome], note: Option<&str>) -> String {
    let mut out =
        format!("\nProfile: one more run per server at {load} connections, static-only\n");
    if let Some(note) = note {
        let _ = writeln!(out, "  {note}");
        return out;
    }
    for o in outcomes {
        let calls = match &o.syscalls_per_op {
            Ok(c) => format!("{c:.2} system calls per operation"),
            Err(e) => format!("no system call count ({e})"),
        };
        let flame = match &o.flame {
            Ok(p) => format!("flame graph {}", p.display()),
            Err(e) => format!("no flame graph ({e})"),
        };
        let _ = writeln!(out, "  {:<10} {calls}; {flame}", o.server);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_stats_csv_gives_the_system_call_count() {
        let text =
            "# started on Mon Dec  7 15:05:14 2026\n\n29,,raw_syscalls:sys_enter,777137,100.00,,\n";
        assert_eq!(syscalls(text), Some(29));
        assert_eq!(
            syscalls("<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n"),
            None
        );
        assert_eq!(syscalls(""), None);
    }

    #[test]
    fn the_archived_record_is_read_from_the_runs_log() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("run.log");
        std::fs::write(
            &log,
            "stoa bench web: ...\nstoa bench: run stored as /a/b/20261207T150000Z-web-x.json\n",
        )
        .expect("log");
        assert_eq!(
            archived_as(&log),
            Some(PathBuf::from("/a/b/20261207T150000Z-web-x.json"))
        );
        assert_eq!(archived_as(&dir.path().join("none")), None);
    }

    #[test]
    fn the_section_says_why_a_figure_is_missing() {
        let none = section(3200, &[], Some("perf is not installed: no profile"));
        assert!(none.contains("3200") && none.contains("perf is not installed"));
        let text = section(
            3200,
            &[Outcome {
                server: "stoa".into(),
                syscalls_per_op: Ok(2.5),
                flame: Err("inferno is not installed".into()),
            }],
            None,
        );
        assert!(text.contains("2.50 system calls per operation"), "{text}");
        assert!(
            text.contains("no flame graph (inferno is not installed)"),
            "{text}"
        );
    }
}
