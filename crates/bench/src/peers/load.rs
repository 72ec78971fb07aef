//! The load of one measurement: a `stoa bench web` run of this binary (the
//! `web99` workload) or a `wrk` run against one file (`static`), each bounded
//! in time, its figures read back.

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde_json::Value;

use crate::cpus::{CpuList, start_pinned};

/// Time a load run may take beyond its measurement: `stoa bench web`'s warm-up,
/// ramps and validation (about 15 s), or wrk's start and end, with room.
const OVERRUN: Duration = Duration::from_secs(120);

/// What one load run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Load {
    /// Operations finished: every phase's (web99), every request (wrk).
    pub(crate) ops: f64,
    /// Operations per second of the measurement.
    pub(crate) ops_per_sec: f64,
    /// Errors: the harness's error count, or wrk's socket errors and
    /// non-2xx/3xx responses.
    pub(crate) errors: u64,
    /// web99: the share of connections that conformed, %.
    pub(crate) conform_pct: Option<f64>,
    /// web99: the harness's share of its cores (above 70 % it may have set
    /// the result).
    pub(crate) harness_share: Option<f64>,
}

/// A `stoa bench web` run against `url`.
#[derive(Debug, Clone)]
pub(crate) struct Web99Run<'a> {
    /// The `stoa` binary that runs the harness.
    pub(crate) exe: &'a Path,
    /// `http://127.0.0.1:PORT`.
    pub(crate) url: String,
    /// Paced connections.
    pub(crate) connections: u32,
    /// Measurement time.
    pub(crate) run_time: Duration,
    /// Only static GETs (`--static-only`), else the whole mix.
    pub(crate) static_only: bool,
    /// The server's processes, for the report's own CPU figure.
    pub(crate) server_pids: Vec<u32>,
    /// `--harness-cpus`.
    pub(crate) harness_cpus: Option<&'a CpuList>,
    /// Where report.json goes (a temporary directory).
    pub(crate) out: &'a Path,
    /// The archive's flags: `--archive DIR --label L`, or `--no-archive`.
    pub(crate) archive: Vec<String>,
}

impl Web99Run<'_> {
    /// Runs it and reads its report.
    pub(crate) fn run(&self) -> anyhow::Result<Load> {
        let mut cmd = Command::new(self.exe);
        cmd.args(["bench", "web", "--target", &self.url])
            .arg("--connections")
            .arg(self.connections.to_string())
            .arg("--run-time")
            .arg(format!("{}s", self.run_time.as_secs()));
        if self.static_only {
            cmd.arg("--static-only");
        }
        for pid in &self.server_pids {
            cmd.arg("--server-pid").arg(pid.to_string());
        }
        if let Some(cpus) = self.harness_cpus {
            cmd.arg("--harness-cpus").arg(cpus.to_string());
        }
        cmd.arg("--out").arg(self.out).args(&self.archive);
        let log = self.out.with_extension("log");
        run_logged(cmd, None, &log, self.run_time + OVERRUN)?;
        let path = self.out.join("report.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let json: Value = serde_json::from_str(&text)
            .with_context(|| format!("{} is not JSON", path.display()))?;
        web99_load(&json).with_context(|| format!("{} has no iteration", path.display()))
    }
}

/// The figures of a `stoa bench web` report (its median iteration).
pub(crate) fn web99_load(report: &Value) -> Option<Load> {
    let m = report["median_iteration"].as_u64().unwrap_or(1).max(1) - 1;
    let it = report["iterations"].get(usize::try_from(m).ok()?)?;
    let errors = match &it["errors"] {
        Value::Object(kinds) => kinds.values().filter_map(Value::as_u64).sum(),
        v => v.as_u64().unwrap_or(0),
    };
    Some(Load {
        ops: it["harness"]["ops_all_phases"].as_f64()?,
        ops_per_sec: it["ops_per_sec"].as_f64()?,
        errors,
        conform_pct: it["percent_conform"].as_f64(),
        harness_share: it["harness"]["share_of_its_cores"].as_f64(),
    })
}

/// A `wrk` run: `wrk -tTHREADS -cCONNECTIONS -dSECONDSs --latency URL`, with
/// `Connection: close` on every request when `close`.
#[derive(Debug, Clone)]
pub(crate) struct WrkRun<'a> {
    /// The URL of the one file requested.
    pub(crate) url: String,
    /// wrk's threads.
    pub(crate) threads: u32,
    /// Its connections.
    pub(crate) connections: u32,
    /// Its duration.
    pub(crate) duration: Duration,
    /// A new connection per request.
    pub(crate) close: bool,
    /// The CPUs it runs on.
    pub(crate) cpus: Option<&'a CpuList>,
    /// Where its output goes.
    pub(crate) log: &'a Path,
}

impl WrkRun<'_> {
    /// wrk's arguments.
    pub(crate) fn args(&self) -> Vec<String> {
        let mut args = vec![
            format!("-t{}", self.threads),
            format!("-c{}", self.connections),
            format!("-d{}s", self.duration.as_secs()),
            "--latency".to_owned(),
        ];
        if self.close {
            args.extend(["-H".to_owned(), "Connection: close".to_owned()]);
        }
        args.push(self.url.clone());
        args
    }

    /// Runs it and parses its output.
    pub(crate) fn run(&self) -> anyhow::Result<Load> {
        let mut cmd = Command::new("wrk");
        cmd.args(self.args());
        run_logged(cmd, self.cpus, self.log, self.duration + OVERRUN)?;
        let text = std::fs::read_to_string(self.log)
            .with_context(|| format!("cannot read {}", self.log.display()))?;
        parse_wrk(&text).with_context(|| format!("no Requests/sec line in {}", self.log.display()))
    }
}

/// wrk's output: "N requests in …", "Requests/sec:", "Socket errors: connect
/// A, read B, write C, timeout D", "Non-2xx or 3xx responses: E".
pub(crate) fn parse_wrk(text: &str) -> Option<Load> {
    let mut load = Load::default();
    let mut seen = false;
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("Requests/sec:") {
            load.ops_per_sec = rest.trim().parse().ok()?;
            seen = true;
        } else if let Some(n) = line.split_once(" requests in ").map(|(n, _)| n) {
            load.ops = n.trim().parse().ok()?;
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            load.errors += rest
                .split(',')
                .filter_map(|kv| kv.split_whitespace().last()?.parse::<u64>().ok())
                .sum::<u64>();
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            load.errors += rest.trim().parse::<u64>().ok()?;
        }
    }
    seen.then_some(load)
}

/// Runs `cmd` (on `cpus` when given) with its output to `log`, killed past
/// `limit`; fails unless it exits with success.
fn run_logged(
    mut cmd: Command,
    cpus: Option<&CpuList>,
    log: &Path,
    limit: Duration,
) -> anyhow::Result<()> {
    let file =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    let child = start_pinned(cpus, || cmd.spawn())?
        .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
    let status = wait_bounded(child, limit)?;
    if !status.success() {
        bail!(
            "{:?} failed ({status}): {}",
            cmd.get_program(),
            super::server::tail(log)
        );
    }
    Ok(())
}

/// Waits for `child` until `limit`, then kills it.
pub(super) fn wait_bounded(mut child: Child, limit: Duration) -> anyhow::Result<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("it ran past {limit:?} and was killed");
        }
        super::server::pause(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK: &str = "Running 5s test @ http://127.0.0.1:8080/1k.bin
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.03ms  310.00us   5.00ms   80.00%
  52341 requests in 5.00s, 60.12MB read
  Socket errors: connect 0, read 3, write 1, timeout 2
  Non-2xx or 3xx responses: 4
Requests/sec:  10468.20
Transfer/sec:     12.02MB
";

    #[test]
    fn wrk_output_gives_requests_rate_and_errors() {
        let load = parse_wrk(WRK).expect("parses");
        assert_eq!(load.ops, 52341.0);
        assert_eq!(load.ops_per_sec, 10468.20);
        assert_eq!(load.errors, 10);
        assert_eq!(parse_wrk("unable to connect to 127.0.0.1:1"), None);
    }

    #[test]
    fn wrk_gets_the_close_header_only_for_close_rows() {
        let run = WrkRun {
            url: "http://127.0.0.1:1/1k.bin".into(),
            threads: 1,
            connections: 64,
            duration: Duration::from_secs(5),
            close: true,
            cpus: None,
            log: Path::new("/dev/null"),
        };
        assert_eq!(
            run.args().join(" "),
            "-t1 -c64 -d5s --latency -H Connection: close http://127.0.0.1:1/1k.bin"
        );
        let keep = WrkRun {
            close: false,
            ..run
        };
        assert!(!keep.args().contains(&"-H".to_owned()));
    }

    #[test]
    fn a_web_report_gives_the_median_iterations_figures() {
        let report = serde_json::json!({
            "median_iteration": 1,
            "iterations": [{
                "ops_per_sec": 1234.5,
                "percent_conform": 100.0,
                "errors": {"connect": 1, "timeout": 2},
                "harness": {"ops_all_phases": 50000, "share_of_its_cores": 0.4},
            }],
        });
        let load = web99_load(&report).expect("an iteration");
        assert_eq!(load.ops, 50000.0);
        assert_eq!(load.errors, 3);
        assert_eq!(load.conform_pct, Some(100.0));
        assert_eq!(load.harness_share, Some(0.4));
        assert_eq!(web99_load(&serde_json::json!({})), None);
    }
}
