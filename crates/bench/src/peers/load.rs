//! The load of one measurement: a `stoa bench web` run of this binary (the
//! `web99` workload), a `wrk` run against one file (`static`), or `h2load`
//! over TLS and HTTP/2 (`h2`: a timed run, or batches of new connections for
//! the handshake rate), or Dovecot's imaptest (`imap`), each bounded in time,
//! its figures read back.

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

/// Most `h2load` batches one handshake row runs, whatever its time.
const MAX_BATCHES: u32 = 100_000;

/// An `h2load` run over TLS with ALPN h2, one thread: timed (`-c C -m M -D
/// SECS --warm-up-time 1`), or with no duration a batch of `-c C -n C -m 1`
/// (C new connections, one request each, no resumption).
#[derive(Debug, Clone)]
pub(crate) struct H2loadRun<'a> {
    /// The `https://` URL of the one file requested.
    pub(crate) url: String,
    /// Its connections.
    pub(crate) connections: u32,
    /// Streams in flight on each connection (timed runs).
    pub(crate) streams: u32,
    /// The measurement's duration; `None`: one batch of handshakes.
    pub(crate) duration: Option<Duration>,
    /// The CPUs it runs on.
    pub(crate) cpus: Option<&'a CpuList>,
    /// Where its output goes.
    pub(crate) log: &'a Path,
}

impl H2loadRun<'_> {
    /// h2load's arguments.
    pub(crate) fn args(&self) -> Vec<String> {
        let c = self.connections.to_string();
        let mut args = vec!["-c".to_owned(), c.clone()];
        match self.duration {
            Some(d) => args.extend([
                "-m".to_owned(),
                self.streams.to_string(),
                "-t".to_owned(),
                "1".to_owned(),
                "-D".to_owned(),
                d.as_secs().to_string(),
                "--warm-up-time".to_owned(),
                "1".to_owned(),
            ]),
            None => args.extend(["-n", &c, "-m", "1", "-t", "1"].map(str::to_owned)),
        }
        args.push(self.url.clone());
        args
    }

    /// Runs it and parses its output; fails unless h2 was negotiated.
    pub(crate) fn run(&self) -> anyhow::Result<Load> {
        let mut cmd = Command::new("h2load");
        cmd.args(self.args());
        let limit = self.duration.unwrap_or_default() + Duration::from_secs(30);
        run_logged(cmd, self.cpus, self.log, limit)?;
        let text = std::fs::read_to_string(self.log)
            .with_context(|| format!("cannot read {}", self.log.display()))?;
        if !text.contains("Application protocol: h2") {
            bail!(
                "h2load did not negotiate h2: {}",
                super::server::tail(self.log)
            );
        }
        parse_h2load(&text).with_context(|| format!("no h2load figures in {}", self.log.display()))
    }

    /// Batches of handshakes (this run with no duration) for `time` (at most
    /// [`MAX_BATCHES`]): the requests done, and their rate over the wall time.
    pub(crate) fn handshakes(&self, time: Duration) -> anyhow::Result<Load> {
        let (t0, mut total) = (Instant::now(), Load::default());
        for _ in 0..MAX_BATCHES {
            if t0.elapsed() >= time {
                break;
            }
            let batch = self.run()?;
            total.ops += batch.ops;
            total.errors += batch.errors;
        }
        total.ops_per_sec = total.ops / t0.elapsed().as_secs_f64().max(1e-9);
        Ok(total)
    }
}

/// h2load's output: "finished in 3.01s, 4320.00 req/s, …" (over the main
/// duration), "requests: … N done, … F failed, …" and "status codes: … A 4xx,
/// B 5xx"; the operations are the requests done, the errors F + A + B.
pub(crate) fn parse_h2load(text: &str) -> Option<Load> {
    let mut load = Load::default();
    let mut seen = false;
    // "8640 done, 0 failed": the number before `word`.
    let count = |rest: &str, word: &str| -> Option<u64> {
        rest.split(',').find_map(|kv| {
            let (n, w) = kv.trim().split_once(' ')?;
            (w == word).then(|| n.parse().ok()).flatten()
        })
    };
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("finished in ") {
            let rate = rest.split(", ").nth(1)?.strip_suffix(" req/s")?;
            load.ops_per_sec = rate.parse().ok()?;
            seen = true;
        } else if let Some(rest) = line.strip_prefix("requests:") {
            load.ops = count(rest, "done")? as f64;
            load.errors += count(rest, "failed")?;
        } else if let Some(rest) = line.strip_prefix("status codes:") {
            load.errors += count(rest, "4xx")? + count(rest, "5xx")?;
        }
    }
    seen.then_some(load)
}

/// An imaptest run in its stress mode: `imaptest host=127.0.0.1 port=P
/// user=U pass=PW mbox=M clients=C secs=S`, its default command mix with
/// state checking on.
#[derive(Debug, Clone)]
pub(crate) struct ImaptestRun<'a> {
    /// The imaptest binary.
    pub(crate) binary: &'a Path,
    /// The server's loopback port.
    pub(crate) port: u16,
    /// The mbox its APPENDs take messages from.
    pub(crate) mbox: &'a Path,
    /// Its clients (every one the same user).
    pub(crate) clients: u32,
    /// Its duration.
    pub(crate) duration: Duration,
    /// The CPUs it runs on.
    pub(crate) cpus: Option<&'a CpuList>,
    /// Where its output goes.
    pub(crate) log: &'a Path,
}

impl ImaptestRun<'_> {
    /// imaptest's arguments.
    pub(crate) fn args(&self) -> Vec<String> {
        vec![
            "host=127.0.0.1".to_owned(),
            format!("port={}", self.port),
            format!("user={}", super::config::IMAP_USER),
            format!("pass={}", super::config::IMAP_PASSWORD),
            format!("mbox={}", self.mbox.display()),
            format!("clients={}", self.clients),
            format!("secs={}", self.duration.as_secs()),
        ]
    }

    /// Runs it and parses its output: the commands are its totals', the
    /// errors its `Error` lines (plus one when it exits with failure).
    pub(crate) fn run(&self) -> anyhow::Result<Load> {
        let mut cmd = Command::new(self.binary);
        cmd.args(self.args());
        if let Some(dir) = self.log.parent() {
            cmd.current_dir(dir);
        }
        let status = run_logged_status(cmd, self.cpus, self.log, self.duration + OVERRUN)?;
        let text = std::fs::read_to_string(self.log)
            .with_context(|| format!("cannot read {}", self.log.display()))?;
        let mut load = parse_imaptest(&text, self.duration).with_context(|| {
            format!(
                "no Totals in {} (exit {status}): {}",
                self.log.display(),
                super::server::tail(self.log)
            )
        })?;
        if !status.success() {
            load.errors += 1;
        }
        Ok(load)
    }
}

/// imaptest's output over `secs`: the line four below `Totals:` holds the
/// commands of each kind (their sum are the operations); every line that
/// starts with `Error` is an error. `None` without totals.
pub(crate) fn parse_imaptest(text: &str, secs: Duration) -> Option<Load> {
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().rposition(|l| l.trim() == "Totals:")?;
    let counts = lines.get(at + 4)?;
    let ops = counts
        .split_whitespace()
        .map(|w| w.parse::<u64>().ok())
        .sum::<Option<u64>>()?;
    Some(Load {
        ops: ops as f64,
        ops_per_sec: ops as f64 / secs.as_secs_f64().max(1e-9),
        errors: lines.iter().filter(|l| l.starts_with("Error")).count() as u64,
        conform_pct: None,
        harness_share: None,
    })
}

/// Runs `cmd` (on `cpus` when given) with its output to `log`, killed past
/// `limit`; fails unless it exits with success.
fn run_logged(
    cmd: Command,
    cpus: Option<&CpuList>,
    log: &Path,
    limit: Duration,
) -> anyhow::Result<()> {
    let status = run_logged_status(cmd, cpus, log, limit)?;
    if !status.success() {
        bail!("the load failed ({status}): {}", super::server::tail(log));
    }
    Ok(())
}

/// Runs `cmd` (on `cpus` when given) with its output to `log`, killed past
/// `limit`; its exit status.
fn run_logged_status(
    mut cmd: Command,
    cpus: Option<&CpuList>,
    log: &Path,
    limit: Duration,
) -> anyhow::Result<ExitStatus> {
    let file =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file);
    let child = start_pinned(cpus, || cmd.spawn())?
        .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
    wait_bounded(child, limit).with_context(|| format!("{:?}", cmd.get_program()))
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
    fn h2load_output_gives_the_rate_the_requests_done_and_errors() {
        // Captured on this machine (h2load against stoa over TLS).
        let timed = parse_h2load(include_str!("h2load-timed.txt")).expect("figures");
        assert_eq!(timed.ops_per_sec, 4320.0);
        assert_eq!((timed.ops, timed.errors), (8640.0, 0));
        let batch = parse_h2load(include_str!("h2load-handshakes.txt")).expect("figures");
        assert_eq!((batch.ops, batch.errors), (5.0, 0));
        let bad = "finished in 1.00s, 10.00 req/s, 1KB/s\nrequests: 10 total, 10 started, \
                   10 done, 7 succeeded, 3 failed, 1 errored, 0 timeout\n\
                   status codes: 5 2xx, 0 3xx, 2 4xx, 0 5xx\n";
        assert_eq!(parse_h2load(bad).expect("figures").errors, 5);
        assert!(parse_h2load("starting benchmark...\n").is_none());
    }

    /// The end of imaptest's reference stress run against Dovecot.
    const IMAPTEST: &str = "  99   44   50   99   99  131   46   55   99   53   99   1/  5
   8    2    2    2    2    2    2    3    3   10    0 ms/cmd avg

Totals:
Logi List Stat Sele Fetc Fet2 Stor Dele Expu Appe Logo
100%  50%  50% 100% 100% 100%  50% 100% 100% 100% 100%
                          30%                  5%
 985  485  519  985  982 1373  411  498  982  500  988
";

    #[test]
    fn imaptest_totals_give_the_commands_and_error_lines_the_errors() {
        let load = parse_imaptest(IMAPTEST, Duration::from_secs(10)).expect("totals");
        assert_eq!(load.ops, 8708.0);
        assert_eq!(load.ops_per_sec, 870.8);
        assert_eq!(load.errors, 0);
        let bad = format!("Error: user: FETCH BODY[] got too little data\n{IMAPTEST}Error: x\n");
        let load = parse_imaptest(&bad, Duration::from_secs(10)).expect("totals");
        assert_eq!(load.errors, 2);
        assert!(parse_imaptest("Error: connect() failed\n", Duration::from_secs(1)).is_none());
        let args = ImaptestRun {
            binary: Path::new("/imaptest"),
            port: 143,
            mbox: Path::new("/t/small.mbox"),
            clients: 10,
            duration: Duration::from_secs(30),
            cpus: None,
            log: Path::new("/dev/null"),
        }
        .args()
        .join(" ");
        assert_eq!(
            args,
            "host=127.0.0.1 port=143 user=testuser@example.com pass=pw mbox=/t/small.mbox \
             clients=10 secs=30"
        );
    }

    #[test]
    fn h2load_gets_the_old_scripts_parameters() {
        let log = Path::new("/t/h2load.txt");
        let mut run = H2loadRun {
            url: "https://127.0.0.1:1/1k.bin".to_owned(),
            connections: 100,
            streams: 10,
            duration: Some(Duration::from_secs(10)),
            cpus: None,
            log,
        };
        assert_eq!(
            run.args().join(" "),
            "-c 100 -m 10 -t 1 -D 10 --warm-up-time 1 https://127.0.0.1:1/1k.bin"
        );
        (run.connections, run.duration) = (50, None);
        assert_eq!(
            run.args().join(" "),
            "-c 50 -n 50 -m 1 -t 1 https://127.0.0.1:1/1k.bin"
        );
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
