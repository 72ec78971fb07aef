//! `stoa bench web` end to end (`web99.md` §3–§8): a quick paced run against the
//! built-in target, a static-only run against a plain `stoa serve`, a deliberately
//! broken server in this file that the harness must catch (short files, a CAD answer
//! without `found_cookie`, a post.log that forgets POSTs), and an HTTP/1.0 run that
//! relies on `Connection: Keep-Alive`.
//!
//! Every run is a child process with its own `XDG_CACHE_HOME` and its own process
//! group (killed as a whole if the run overstays its time); every wait is bounded.
//! Expectations come from the spec (pacing bound, ops per connection, the audit
//! rule of §7.3) and from what the broken server itself counted, never from the
//! harness's code.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use stoa_testkit::{Process, wait_until};
use stoa_web99::ads::{self, Ad, ResetParams};
use stoa_web99::fileset::{self, FileId};
use stoa_web99::postlog::{self, Record};
use stoa_web99::request::{self, Query, TRAILER};
use stoa_web99::workload::{Entry, HttpVersion, RequestType, Targets};

use common::{Server, raw_conn, run_stoa};

/// Longest a paced run may take: warm-up, run, ramp-down, plus the tail of a
/// class-3 operation (up to 18 s at 400 kbit/s) and the file set.
const BENCH_TIMEOUT: Duration = Duration::from_secs(180);
/// Longest a run that must abort in validation may take.
const ABORT_TIMEOUT: Duration = Duration::from_secs(60);
/// The pacing never lets a connection exceed 400 kbit/s (§5.1); float slack.
const LINE_KBIT_CAP: f64 = 400.5;
/// `stoa fileset`'s default seed, which the fake server's files use too.
const SEED: u64 = 1999;

// ---------------------------------------------------------------------------
// Running `stoa bench web`
// ---------------------------------------------------------------------------

/// What a finished run left behind.
struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Outcome {
    fn assert_success(&self, what: &str) {
        assert!(
            self.status.success(),
            "{what}: stoa bench web exited with {}; stderr:\n{}\nstdout:\n{}",
            self.status,
            self.stderr,
            self.stdout
        );
    }

    fn assert_validation_abort(&self, what: &str) {
        assert!(
            !self.status.success(),
            "{what}: expected a validation abort, but the run succeeded; stdout:\n{}",
            self.stdout
        );
        assert!(
            self.stderr.contains("validation failed"),
            "{what}: expected \"validation failed\" on stderr, got:\n{}",
            self.stderr
        );
        assert!(
            !self.stdout.contains("Test Run Details"),
            "{what}: an aborted run printed a report:\n{}",
            self.stdout
        );
    }
}

/// A running `stoa bench web` in its own process group, which is killed whole
/// (the built-in server included) if the guard drops before the run ends.
struct Bench(Process);

impl Bench {
    /// `stoa bench web <args>` with `XDG_CACHE_HOME=cache` on the child only.
    fn start(args: &[&str], cache: &Path) -> Bench {
        Bench::spawn(&["bench", "web"], args, cache)
    }

    /// `stoa <command> <args>`, its outputs collected as for `bench web`.
    fn spawn(command: &[&str], args: &[&str], cache: &Path) -> Bench {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stoa"));
        child
            .args(command)
            .args(args)
            .env("XDG_CACHE_HOME", cache)
            // The results archive too: nothing of a test run in the user's home.
            .env("XDG_DATA_HOME", cache)
            .env_remove("RUST_LOG");
        Bench(Process::spawn_group(&mut child))
    }

    /// The first standard-error line satisfying `pick`, waiting at most `timeout`.
    fn wait_for_stderr<T>(&self, timeout: Duration, pick: impl FnMut(&str) -> Option<T>) -> T {
        self.0.wait_for_line(timeout, pick)
    }

    /// Waits (bounded) for the exit and collects both outputs.
    fn finish(self, timeout: Duration) -> Outcome {
        let done = self.0.finish(timeout);
        Outcome {
            status: done.status,
            stdout: done.stdout,
            stderr: done.stderr,
        }
    }
}

/// Runs `stoa bench web <args>` to the end.
fn bench(args: &[&str], cache: &Path, timeout: Duration) -> Outcome {
    Bench::start(args, cache).finish(timeout)
}

// ---------------------------------------------------------------------------
// The JSON report
// ---------------------------------------------------------------------------

fn read_report(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("report.json")).expect("report.json written");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("report.json does not parse: {e}"))
}

fn f64_of(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

fn u64_of(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} is not an unsigned integer in {v}"))
}

/// The only iteration of a one-iteration report.
fn only_iteration(report: &Value) -> &Value {
    let its = report["iterations"]
        .as_array()
        .expect("iterations is an array");
    assert_eq!(its.len(), 1, "expected one iteration: {report}");
    &its[0]
}

/// Failed operations by reason.
fn errors_of(it: &Value) -> BTreeMap<String, u64> {
    it["errors"]
        .as_object()
        .expect("errors is an object")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().expect("error count")))
        .collect()
}

fn strings_of(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().expect("a string").to_owned())
        .collect()
}

fn posts_sent(it: &Value) -> [u64; 4] {
    let v: Vec<u64> = it["posts_sent"]
        .as_array()
        .expect("posts_sent is an array")
        .iter()
        .map(|n| n.as_u64().expect("a count"))
        .collect();
    v.try_into().expect("posts_sent has one count per class")
}

/// Consistency every iteration must have, whatever the server: counts nest, the
/// percentage is the ratio, the pacing bound holds for every generator, and
/// throughput is the successes over the run time.
fn assert_iteration_consistent(report: &Value, it: &Value, connections: u64) {
    let (requested, valid, conforming) = (
        u64_of(it, "requested"),
        u64_of(it, "valid"),
        u64_of(it, "conforming"),
    );
    assert_eq!(requested, connections, "requested connections: {it}");
    assert!(
        conforming <= valid && valid <= requested,
        "conforming {conforming} ≤ valid {valid} ≤ requested {requested} does not hold"
    );
    let pct = f64_of(it, "percent_conform");
    assert!(
        (pct - 100.0 * conforming as f64 / requested as f64).abs() < 1e-6,
        "percent_conform {pct} is not 100 × {conforming} / {requested}"
    );
    let rates: Vec<f64> = it["generator_kbit_per_sec"]
        .as_array()
        .expect("generator_kbit_per_sec is an array")
        .iter()
        .map(|r| r.as_f64().expect("a rate"))
        .collect();
    assert_eq!(
        rates.len() as u64,
        connections,
        "one rate per generator: {rates:?}"
    );
    for (i, r) in rates.iter().enumerate() {
        assert!(
            *r <= LINE_KBIT_CAP,
            "generator {i} ran at {r} kbit/s, above the 400 kbit/s line: {rates:?}"
        );
    }
    let classes = it["classes"].as_array().expect("classes is an array");
    assert_eq!(classes.len(), 4, "four classes: {it}");
    let good: u64 = classes.iter().map(|c| u64_of(c, "good")).sum();
    let run_s = f64_of(&report["profile"], "run_s");
    let ops = f64_of(it, "ops_per_sec");
    assert!(
        (ops - good as f64 / run_s).abs() < 1e-6,
        "ops_per_sec {ops} is not {good} successes / {run_s} s"
    );
    let per_loadgen = f64_of(it, "ops_per_sec_per_loadgen");
    assert!(
        (per_loadgen - ops / requested as f64).abs() < 1e-6,
        "ops_per_sec_per_loadgen {per_loadgen} is not {ops} / {requested}"
    );
    let problems = strings_of(&report["problems"]);
    assert_eq!(
        report["valid"].as_bool(),
        Some(problems.is_empty()),
        "valid must be true exactly when there are no problems: {problems:?}"
    );
    let score = report["score"].as_u64();
    assert_eq!(score, Some(conforming), "score of the only iteration");
}

// ---------------------------------------------------------------------------
// 1. The built-in target
// ---------------------------------------------------------------------------

#[test]
fn quick_run_against_the_built_in_server() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    let run = bench(
        &[
            "--connections",
            "8",
            "--run-time",
            "20s",
            "--out",
            out.to_str().expect("UTF-8 path"),
        ],
        &cache,
        BENCH_TIMEOUT,
    );
    run.assert_success("quick run");

    // The file set went to the cache directory given to the child, nowhere else.
    assert!(
        cache
            .join("stoa/bench-web/www/file_set/dir00029/class3_8")
            .is_file(),
        "the built-in target's file set (30 directories for 8 connections) is not under \
         XDG_CACHE_HOME"
    );

    let report = read_report(&out);
    let it = only_iteration(&report);
    assert_iteration_consistent(&report, it, 8);
    assert_eq!(report["benchmark"], "SPECweb99-style");
    assert_eq!(report["requested_connections"], 8);
    assert_eq!(report["directories"], 30, "int(25 + 3.28 × 8 / 5)");
    assert!((f64_of(&report, "fileset_mb") - 4.88 * 30.0).abs() < 1e-6);
    assert_eq!(report["profile"]["run_s"], 20);

    let errors = errors_of(it);
    assert!(
        errors.is_empty(),
        "every response of the built-in server must pass the client checks: {errors:?}"
    );
    let audit = strings_of(&it["post_log_audit"]);
    assert!(audit.is_empty(), "post.log audit: {audit:?}");
    let posts = posts_sent(it);
    assert!(
        posts.iter().sum::<u64>() > 0,
        "a 30 s mix with 4.8 % POSTs sent none: {posts:?}"
    );

    let rates: Vec<f64> = it["generator_kbit_per_sec"]
        .as_array()
        .expect("rates")
        .iter()
        .map(|r| r.as_f64().expect("rate"))
        .collect();
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    assert!(
        mean >= 300.0,
        "loopback generators should run near the 400 kbit/s line, mean {mean}: {rates:?}"
    );
    let per_loadgen = f64_of(it, "ops_per_sec") / u64_of(it, "requested") as f64;
    assert!(
        (2.0..=4.5).contains(&per_loadgen),
        "ops/s per loadgen {per_loadgen} outside 2.0–4.5 (about 3.3 at 400 kbit/s)"
    );

    let text = &run.stdout;
    for needle in [
        "SPECweb99-style result; not a SPEC result",
        "Fileset Size (MB)",
        "Test Run Details",
        "Errors",
    ] {
        assert!(text.contains(needle), "report lacks {needle:?}:\n{text}");
    }
    let score = report["score"].as_u64().expect("score");
    assert!(
        text.contains(&format!("SPECweb99-style = {score} (non-compliant)")),
        "text score differs from the JSON's {score}, or is not labelled non-compliant:\n{text}"
    );
    // A quick run with --run-time breaks the kit's run rules, and says how.
    assert_eq!(report["compliant"], false, "{report}");
    assert_eq!(report["deviations"][0]["setting"], "run_time");
    assert!(
        text.contains("| - measured 20 s; the kit measures 1,200 s"),
        "{text}"
    );
    assert!(
        text.contains("the score cannot exceed 8; --find-max searches"),
        "{text}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html written");
    assert!(html.contains("<li>measured 20 s; the kit measures 1,200 s</li>"));
    let saved = std::fs::read_to_string(out.join("report.txt")).expect("report.txt written");
    assert!(
        text.contains(&saved),
        "report.txt is not the report printed on stdout"
    );
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html written");
    assert!(
        html.contains("not a SPEC result") && html.contains("<svg"),
        "report.html lacks the notice or its charts"
    );
}

// ---------------------------------------------------------------------------
// 2. A plain server: static-only works, the full mix aborts in validation
// ---------------------------------------------------------------------------

fn write_fileset(connections: u32, docroot: &Path) {
    let n = connections.to_string();
    let dir = docroot.to_str().expect("UTF-8 path");
    let (status, stderr) = run_stoa(
        &["fileset", "--connections", &n, "--dir", dir],
        Duration::from_secs(120),
    );
    assert!(status.success(), "stoa fileset failed: {stderr}");
}

#[test]
fn http2_run_against_a_tls_server() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let docroot = tmp.path().join("docroot");
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    let log = tmp.path().join("access.log");
    write_fileset(4, &docroot);
    let (cert, key) = common::tls_pair(tmp.path(), "localhost");
    let path = |p: &Path| p.to_str().expect("UTF-8 path").to_owned();
    let mut server = Server::start(
        &docroot,
        &[
            "--tls-listen",
            "127.0.0.1:0",
            "--tls-cert",
            &path(&cert),
            "--tls-key",
            &path(&key),
            "--access-log",
            &path(&log),
        ],
    );
    let target = format!("https://localhost:{}", server.tls_addrs[0].port());

    // HTTP/2 is over TLS only.
    let refused = bench(
        &["--http", "2", "--static-only", "--connections", "2"],
        &cache,
        ABORT_TIMEOUT,
    );
    assert!(!refused.status.success());
    assert!(
        refused.stderr.contains("--http 2 needs HTTPS"),
        "{}",
        refused.stderr
    );

    let run = bench(
        &[
            "--target",
            &target,
            "--tls-ca",
            &path(&cert),
            "--http",
            "2",
            "--static-only",
            "--connections",
            "4",
            "--run-time",
            "10s",
            "--out",
            &path(&out),
        ],
        &cache,
        BENCH_TIMEOUT,
    );
    run.assert_success("HTTP/2 run");
    let report = read_report(&out);
    let it = only_iteration(&report);
    assert_iteration_consistent(&report, it, 4);
    let errors = errors_of(it);
    assert!(
        errors.is_empty(),
        "failed operations over HTTP/2: {errors:?}"
    );
    assert!(
        run.stdout.contains("HTTP/2 (--http 2)"),
        "the non-compliance box must name HTTP/2:\n{}",
        run.stdout
    );
    // The generators spoke HTTP/2; the manager's validation, HTTP/1.1.
    server.stop_with(rustix::process::Signal::TERM);
    let lines = std::fs::read_to_string(&log).expect("the access log");
    let h2 = lines
        .lines()
        .filter(|l| l.contains(" HTTP/2.0\" 200 "))
        .count();
    assert!(h2 > 10, "{h2} HTTP/2 requests in the log:\n{lines}");
    assert!(
        lines.contains(" HTTP/1.1\" 200 "),
        "no validation request:\n{lines}"
    );
}

#[test]
fn static_only_against_a_plain_server() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let docroot = tmp.path().join("docroot");
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    // `--connections 1` (25 directories) would be too few for 5 connections,
    // which need int(25 + 3.28 × 5 / 5) = 28: write the set for 5.
    write_fileset(5, &docroot);
    let server = Server::start(&docroot, &["--access-log", "off"]);
    let target = server.base();

    // A set too small for the load (20 connections need 38 directories) aborts:
    // the manager's first check fetches class3_* of the last directory.
    let small = bench(
        &[
            "--target",
            &target,
            "--static-only",
            "--connections",
            "20",
            "--run-time",
            "10s",
        ],
        &cache,
        ABORT_TIMEOUT,
    );
    small.assert_validation_abort("file set too small for the load");
    assert!(
        small.stderr.contains("dir00037") && small.stderr.contains("404"),
        "the abort should name the missing last directory and the 404:\n{}",
        small.stderr
    );

    let run = bench(
        &[
            "--target",
            &target,
            "--static-only",
            "--connections",
            "5",
            "--run-time",
            "10s",
            "--out",
            out.to_str().expect("UTF-8 path"),
        ],
        &cache,
        BENCH_TIMEOUT,
    );
    run.assert_success("static-only run");
    let report = read_report(&out);
    let it = only_iteration(&report);
    assert_iteration_consistent(&report, it, 5);
    assert_eq!(report["benchmark"], "SPECweb99-style (static-only)");
    assert_eq!(report["target"], target.as_str());
    let errors = errors_of(it);
    assert!(errors.is_empty(), "static GETs failed: {errors:?}");
    assert_eq!(posts_sent(it), [0; 4], "a static-only run sends no POST");
    assert!(strings_of(&it["post_log_audit"]).is_empty());
    let good: u64 = it["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .map(|c| u64_of(c, "good"))
        .sum();
    assert!(good > 0, "no successful operation in 10 s");
    assert!(
        run.stdout
            .lines()
            .next()
            .is_some_and(|l| l.contains("static-only")),
        "the text title should say static-only:\n{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("SPECweb99-style result; not a SPEC result")
    );

    // Without --static-only the dynamic API is required: Reset is the first
    // dynamic step, and this server has no /web99.
    let full = bench(
        &[
            "--target",
            &target,
            "--connections",
            "5",
            "--run-time",
            "10s",
        ],
        &cache,
        ABORT_TIMEOUT,
    );
    full.assert_validation_abort("full mix against a server without --web99");
    assert!(
        full.stderr.contains("Reset"),
        "the abort should name the failing step (command/Reset):\n{}",
        full.stderr
    );
    drop(server);
}

// ---------------------------------------------------------------------------
// 3. A broken server
// ---------------------------------------------------------------------------

/// What the fake server gets wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Every file, static or inside a dynamic page, is one byte short (with a
    /// Content-Length that matches what is sent).
    ShortFiles,
    /// CAD GETs are answered without `Set-Cookie: found_cookie=…`.
    NoFoundCookie,
    /// Every second POST after a Reset is answered correctly but not logged.
    ForgetfulPostLog,
}

/// What the fake server knows and counted since the last Reset.
struct FakeState {
    fault: Fault,
    users: Vec<u32>,
    ads: Vec<Ad>,
    log: Vec<Record>,
    /// POSTs received, by class.
    received: [u64; 4],
    /// POSTs logged, by class.
    logged: [u64; 4],
}

/// A small HTTP/1.1 server implementing static files and the dynamic API of §6
/// (wrapper, trailer, CAD, POST with `my_cookie`, Reset, Fetch), honest except
/// for its [`Fault`].
struct FakeServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
    state: Arc<Mutex<FakeState>>,
}

/// Most connections the fake serves at once; more are closed unanswered.
const FAKE_MAX_CONNECTIONS: usize = 64;
/// Idle time after which the fake drops a connection.
const FAKE_IDLE: Duration = Duration::from_secs(30);
/// Largest request head or body the fake reads.
const FAKE_MAX_REQUEST: usize = 64 * 1024;
const FAKE_SOFTWARE: &str = "fake-web99/0";

impl FakeServer {
    fn start(fault: Fault) -> FakeServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake server");
        let addr = listener.local_addr().expect("fake server address");
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(FakeState {
            fault,
            users: Vec::new(),
            ads: Vec::new(),
            log: Vec::new(),
            received: [0; 4],
            logged: [0; 4],
        }));
        let active = Arc::new(AtomicUsize::new(0));
        let accept = {
            let (stop, state) = (Arc::clone(&stop), Arc::clone(&state));
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(stream) = conn else { continue };
                    if active.load(Ordering::SeqCst) >= FAKE_MAX_CONNECTIONS {
                        continue;
                    }
                    active.fetch_add(1, Ordering::SeqCst);
                    let (state, active) = (Arc::clone(&state), Arc::clone(&active));
                    std::thread::spawn(move || {
                        serve_connection(stream, &state);
                        active.fetch_sub(1, Ordering::SeqCst);
                    });
                }
            })
        };
        FakeServer {
            addr,
            stop,
            accept: Some(accept),
            state,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

/// One request, as read off the wire.
struct FakeRequest {
    method: String,
    target: String,
    version: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl FakeRequest {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Whether the client wants the connection kept open.
    fn keep_alive(&self) -> bool {
        let connection = self.header("Connection").map(str::to_ascii_lowercase);
        if self.version == "HTTP/1.1" {
            connection.as_deref() != Some("close")
        } else {
            connection.as_deref() == Some("keep-alive")
        }
    }
}

fn serve_connection(mut stream: TcpStream, state: &Mutex<FakeState>) {
    let _ = stream.set_read_timeout(Some(FAKE_IDLE));
    let _ = stream.set_write_timeout(Some(FAKE_IDLE));
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "unknown".to_owned(), |a| a.ip().to_string());
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut stream, &mut buf) {
        let keep = req.keep_alive();
        let mut response = answer(&req, state, &peer);
        if !keep {
            // Insert before the blank line that ends the head.
            let at = common::find(&response, b"\r\n\r\n").expect("head end") + 2;
            response.splice(at..at, b"Connection: close\r\n".iter().copied());
        }
        if stream.write_all(&response).is_err() || !keep {
            return;
        }
    }
}

/// Reads one request (head by hand, body by Content-Length); `None` at EOF, on
/// timeout or on anything malformed.
fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<FakeRequest> {
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = common::find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > FAKE_MAX_REQUEST {
            return None;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).ok()?;
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let (method, target, version) = (
        request_line.next()?.to_owned(),
        request_line.next()?.to_owned(),
        request_line.next()?.to_owned(),
    );
    let headers: Vec<(String, String)> = lines
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (n, v) = l.split_once(':')?;
            Some((n.trim().to_owned(), v.trim().to_owned()))
        })
        .collect::<Option<_>>()?;
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("Content-Length"))
        .map_or(Some(0), |(_, v)| v.parse().ok())?;
    if length > FAKE_MAX_REQUEST {
        return None;
    }
    while buf.len() < head_end + length {
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let body = buf[head_end..head_end + length].to_vec();
    buf.drain(..head_end + length);
    Some(FakeRequest {
        method,
        target,
        version,
        headers,
        body,
    })
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(0))
}

/// A response with a correct Content-Length.
fn http(status: u16, extra_headers: &str, body: &[u8]) -> Vec<u8> {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Error",
    };
    let mut out = format!(
        "HTTP/1.1 {status} {reason}\r\nServer: {FAKE_SOFTWARE}\r\nContent-Type: text/html\r\n\
         Content-Length: {}\r\n{extra_headers}\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

/// The file's bytes as `stoa fileset` writes them, minus the fault.
fn file_bytes(id: FileId, fault: Fault, ad: Option<u32>) -> Vec<u8> {
    let mut data = Vec::new();
    fileset::generate(id, SEED, &mut data);
    if let Some(ad) = ad {
        ads::rewrite_tags(&mut data, ad);
    }
    if fault == Fault::ShortFiles {
        data.pop();
    }
    data
}

/// The HTML wrapper of §6.2 around a file.
fn page(peer: &str, script: &str, query: &str, file: &[u8]) -> Vec<u8> {
    let mut body = request::wrapper_head(FAKE_SOFTWARE, peer, script, query).into_bytes();
    body.extend_from_slice(file);
    body.extend_from_slice(TRAILER);
    body
}

fn answer(req: &FakeRequest, state: &Mutex<FakeState>, peer: &str) -> Vec<u8> {
    let (path, query) = req
        .target
        .split_once('?')
        .unwrap_or((req.target.as_str(), ""));
    let mut st = state.lock().expect("fake server state");
    let fault = st.fault;
    match (req.method.as_str(), path) {
        ("GET", p) if p.starts_with("/file_set/") => match request::parse_file(p) {
            Ok((id, _)) => http(200, "", &file_bytes(id, fault, None)),
            Err(why) => http(404, "", why.as_bytes()),
        },
        ("POST", "/web99") => {
            let cookie = req
                .header("Cookie")
                .map(|c| request::parse_cookie(c.as_bytes()));
            let (Some(Ok(Some(cookie))), Ok(form)) = (cookie, request::parse_form(&req.body))
            else {
                return http(400, "", b"bad POST");
            };
            let class = usize::from(form.id.class);
            st.received[class] += 1;
            let nth = st.received.iter().sum::<u64>();
            if fault != Fault::ForgetfulPostLog || nth % 2 == 1 {
                st.logged[class] += 1;
                let record = Record {
                    number: st.log.len() as u64 + 1,
                    time: unix_now(),
                    pid: std::process::id(),
                    dir: form.id.dir,
                    class: form.id.class,
                    num: form.id.num,
                    client: form.client,
                    file: format!(
                        "{}dir{:05}/class{}_{}",
                        form.urlroot, form.id.dir, form.id.class, form.id.num
                    ),
                    cookie: cookie.user_id,
                };
                st.log.push(record);
            }
            let set_cookie = format!("Set-Cookie: my_cookie={}\r\n", cookie.user_id);
            let body = page(peer, path, "", &file_bytes(form.id, fault, None));
            http(200, &set_cookie, &body)
        }
        ("GET", "/web99" | "/cgi-bin/web99") => match request::parse_query(query.as_bytes()) {
            Ok(Query::Reset(params)) if path == "/web99" => {
                reset(&mut st, &params);
                http(200, "", b"<html><body>reset</body></html>\n")
            }
            Ok(Query::Fetch) if path == "/web99" => {
                let mut log = postlog::count_line(st.log.len() as u64);
                for r in &st.log {
                    postlog::write_record(&mut log, r);
                }
                let body = page(peer, path, query, log.as_bytes());
                http(200, "", &body)
            }
            Ok(Query::Finish) => http(200, "", b""),
            Ok(Query::File { id, .. }) => {
                let cookie = req
                    .header("Cookie")
                    .map(|c| request::parse_cookie(c.as_bytes()));
                match cookie {
                    None | Some(Ok(None)) => http(
                        200,
                        "",
                        &page(peer, path, query, &file_bytes(id, fault, None)),
                    ),
                    Some(Ok(Some(cookie))) if path == "/web99" => {
                        let user = st.users.get(cookie.user_index() as usize).copied();
                        let found =
                            user.and_then(|u| ads::find_ad(u, cookie.last_ad, &st.ads, unix_now()));
                        let Some(found) = found else {
                            return http(400, "", b"unknown user or no ad");
                        };
                        let set_cookie = if fault == Fault::NoFoundCookie {
                            String::new()
                        } else {
                            format!(
                                "Set-Cookie: found_cookie=Ad_id={}&Ad_weight={}&Expired={}\r\n",
                                found.ad,
                                found.weight,
                                u8::from(found.expired)
                            )
                        };
                        let file = file_bytes(id, fault, Some(found.ad));
                        http(200, &set_cookie, &page(peer, path, query, &file))
                    }
                    _ => http(400, "", b"bad cookie"),
                }
            }
            Ok(_) => http(404, "", b"command not here"),
            Err(why) => http(400, "", why.as_bytes()),
        },
        _ => http(404, "", b"not found"),
    }
}

/// `command/Reset`: upfgen99 and cadgen99 tables, an empty post.log.
fn reset(st: &mut FakeState, params: &ResetParams) {
    st.users = ads::parse_users(&ads::user_personality(params)).expect("upfgen99 output parses");
    st.ads = ads::generate_ads(params, unix_now());
    st.log.clear();
    st.received = [0; 4];
    st.logged = [0; 4];
}

/// Case (a): a server that sends every file one byte short.
fn short_files_are_caught(cache: &Path, out: &Path) {
    let fake = FakeServer::start(Fault::ShortFiles);
    let run = bench(
        &[
            "--target",
            &fake.url(),
            "--connections",
            "2",
            "--run-time",
            "5s",
            "--out",
            out.to_str().expect("UTF-8 path"),
        ],
        cache,
        BENCH_TIMEOUT,
    );
    if !run.status.success() {
        // Acceptable too: validation noticed the short file.
        run.assert_validation_abort("short files");
        let e = run.stderr.to_ascii_lowercase();
        assert!(
            e.contains("size") || e.contains("header") || e.contains("length"),
            "the abort should be about the file's size or header line:\n{}",
            run.stderr
        );
        return;
    }
    let report = read_report(out);
    let it = only_iteration(&report);
    assert_iteration_consistent(&report, it, 2);
    let errors = errors_of(it);
    let total: u64 = errors.values().sum();
    assert!(
        total > 0,
        "a server sending short files must fail the length check: {errors:?}"
    );
    for kind in errors.keys() {
        assert!(
            kind == "bad length" || kind == "bad file size",
            "short files should fail as bad length/bad file size, not {kind:?}: {errors:?}"
        );
    }
    let bad: u64 = it["classes"]
        .as_array()
        .expect("classes")
        .iter()
        .map(|c| u64_of(c, "bad"))
        .sum();
    assert_eq!(bad, total, "class error counts and errors by reason differ");
    assert_eq!(
        u64_of(it, "valid"),
        0,
        "every generator failed every operation"
    );
    assert_eq!(report["valid"], false, "{report}");
    assert!(
        run.stdout.contains("bad length") || run.stdout.contains("bad file size"),
        "the text report should list the failed operations:\n{}",
        run.stdout
    );
}

/// Case (b): CAD answers without `found_cookie`.
fn missing_found_cookie_is_caught(cache: &Path) {
    let fake = FakeServer::start(Fault::NoFoundCookie);
    let run = bench(
        &[
            "--target",
            &fake.url(),
            "--connections",
            "2",
            "--run-time",
            "5s",
        ],
        cache,
        ABORT_TIMEOUT,
    );
    run.assert_validation_abort("CAD without found_cookie");
    assert!(
        run.stderr.contains("found_cookie"),
        "the abort should mention found_cookie:\n{}",
        run.stderr
    );
}

/// Case (c): a post.log that forgets every second POST.
fn forgetful_post_log_is_caught(cache: &Path, out: &Path) {
    let fake = FakeServer::start(Fault::ForgetfulPostLog);
    let run = bench(
        &[
            "--target",
            &fake.url(),
            "--connections",
            "4",
            "--run-time",
            "5s",
            "--out",
            out.to_str().expect("UTF-8 path"),
        ],
        cache,
        BENCH_TIMEOUT,
    );
    run.assert_success("forgetful post.log");
    let report = read_report(out);
    let it = only_iteration(&report);
    assert_iteration_consistent(&report, it, 4);
    let errors = errors_of(it);
    assert!(
        errors.is_empty(),
        "the fake answers every request correctly; the client checks failed: {errors:?}"
    );
    let (received, logged) = {
        let st = fake.state.lock().expect("fake server state");
        (st.received, st.logged)
    };
    let sent = posts_sent(it);
    assert_eq!(
        sent, received,
        "posts_sent (by class) must equal the POSTs the server received since the Reset"
    );
    assert!(
        received.iter().sum::<u64>() >= 2,
        "too few POSTs to lose one: {received:?}"
    );
    let audit = strings_of(&it["post_log_audit"]);
    // §7.3: more than 1.05 % of a class's POSTs missing invalidates the run.
    for class in 0..4 {
        let missing = received[class] - logged[class];
        let flagged = audit.iter().any(|p| p.contains(&format!("class {class}")));
        let expected = received[class] > 0 && missing as f64 / received[class] as f64 > 0.0105;
        assert_eq!(
            flagged, expected,
            "class {class}: {missing} of {} POSTs missing; audit: {audit:?}",
            received[class]
        );
        if expected {
            let line = audit
                .iter()
                .find(|p| p.contains(&format!("class {class}")))
                .expect("flagged");
            assert!(
                line.contains("missing")
                    && line.contains(&format!("{missing} of {}", received[class])),
                "the audit line should count the missing POSTs: {line:?}"
            );
        }
    }
    assert!(
        !audit.is_empty(),
        "post.log audit found nothing: {received:?} {logged:?}"
    );
    assert_eq!(
        report["valid"], false,
        "a run with missing POSTs is invalid"
    );
    let problems = strings_of(&report["problems"]);
    assert!(
        problems
            .iter()
            .any(|p| p.contains("post.log") && p.contains("missing")),
        "problems should carry the audit: {problems:?}"
    );
    assert!(
        run.stdout.contains("missing from post.log") || run.stdout.contains("post.log:"),
        "the text report's Errors should carry the audit:\n{}",
        run.stdout
    );
}

#[test]
fn a_broken_server_is_caught() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let cache = tmp.path().join("cache");
    let (out_a, out_c) = (tmp.path().join("out-a"), tmp.path().join("out-c"));
    // Independent servers and runs: in parallel, to keep the paced time down.
    std::thread::scope(|s| {
        let a = s.spawn(|| short_files_are_caught(&cache, &out_a));
        let b = s.spawn(|| missing_found_cookie_is_caught(&cache));
        let c = s.spawn(|| forgetful_post_log_is_caught(&cache, &out_c));
        let results = [
            ("(a) short files", a.join()),
            ("(b) no found_cookie", b.join()),
            ("(c) forgetful post.log", c.join()),
        ];
        let failed: Vec<&str> = results
            .iter()
            .filter(|(_, r)| r.is_err())
            .map(|(name, _)| *name)
            .collect();
        assert!(
            failed.is_empty(),
            "failed cases: {failed:?} (panic messages above)"
        );
    });
}

// ---------------------------------------------------------------------------
// 4. HTTP/1.0
// ---------------------------------------------------------------------------

/// Sends the kit's HTTP/1.0 requests of every GET type on one connection marked
/// `Connection: Keep-Alive`, then one without it: the server must keep the
/// connection for the first ones and close after the last.
fn probe_http10_keep_alive(addr: SocketAddr) {
    let targets = Targets {
        host: addr.to_string(),
        url_root: String::new(),
        dynamic: "/web99".into(),
        cgi: "/cgi-bin/web99".into(),
        post: "/web99".into(),
        version: HttpVersion::Http10,
    };
    let file = FileId {
        dir: 0,
        class: 1,
        num: 4,
    };
    let mut conn = raw_conn(addr);
    let kinds = [
        RequestType::Static,
        RequestType::Dynamic,
        RequestType::Cad,
        RequestType::Cgi,
    ];
    for (i, kind) in kinds.iter().enumerate() {
        let last = i + 1 == kinds.len();
        let mut req = Vec::new();
        stoa_web99::workload::format_request(
            &Entry { file, kind: *kind },
            &targets,
            !last,
            10_001,
            20,
            &mut req,
        );
        conn.send(&req);
        let resp = conn.read_response(false);
        assert_eq!(resp.status, 200, "{kind:?} over HTTP/1.0: {resp:?}");
        assert!(
            common::find(&resp.body, fileset::header_line(file).as_bytes()).is_some(),
            "{kind:?}: the file is not in the answer"
        );
        if !last {
            let connection = resp.header("Connection").map(str::to_ascii_lowercase);
            assert!(
                (resp.version == "HTTP/1.1" && connection.as_deref() != Some("close"))
                    || connection.as_deref() == Some("keep-alive"),
                "{kind:?} with Connection: Keep-Alive over HTTP/1.0 must be kept alive; \
                 got {} with Connection: {connection:?}",
                resp.version
            );
        }
    }
    conn.expect_eof();
}

#[test]
fn http_1_0_run_keeps_alive_with_the_header() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    let running = Bench::start(
        &[
            "--http",
            "1.0",
            "--connections",
            "3",
            "--run-time",
            "10s",
            "--out",
            out.to_str().expect("UTF-8 path"),
        ],
        &cache,
    );
    let addr: SocketAddr = running.wait_for_stderr(Duration::from_secs(60), |line| {
        line.strip_prefix("stoa bench: built-in server on ")
            .and_then(|a| a.trim().parse().ok())
    });
    // Probe the built-in server while the run uses it (GETs only: a POST would
    // add a post.log record the generators did not send).
    probe_http10_keep_alive(addr);
    let run = running.finish(BENCH_TIMEOUT);
    run.assert_success("HTTP/1.0 run");
    let report = read_report(&out);
    let it = only_iteration(&report);
    assert_iteration_consistent(&report, it, 3);
    assert_eq!(report["http_version"], "1.0");
    let errors = errors_of(it);
    assert!(
        errors.is_empty(),
        "HTTP/1.0 keep-alive operations failed: {errors:?}"
    );
    assert!(strings_of(&it["post_log_audit"]).is_empty());
    // The built-in server does not outlive the harness.
    assert!(
        wait_until(Duration::from_secs(10), || TcpStream::connect_timeout(
            &addr,
            Duration::from_secs(1)
        )
        .is_err()),
        "the built-in server at {addr} still accepts connections after stoa bench web exited"
    );
}

// ---------------------------------------------------------------------------
// 5. Many client machines: two agents on loopback
// ---------------------------------------------------------------------------

/// Starts `stoa bench agent` for one run on a free loopback port; returns it and
/// its address.
fn start_agent(cache: &Path) -> (Bench, String) {
    let agent = Bench::spawn(
        &["bench", "agent"],
        &["--listen", "127.0.0.1:0", "--threads", "1", "--runs", "1"],
        cache,
    );
    let addr = agent.wait_for_stderr(Duration::from_secs(30), |line| {
        line.split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .map(str::to_owned)
    });
    (agent, addr)
}

#[test]
fn two_agents_split_the_connections_and_the_prime_merges_them() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    let (agent_a, a) = start_agent(&cache);
    let (agent_b, b) = start_agent(&cache);
    let agents = format!("{a},{b}");
    let run = bench(
        &[
            "--connections",
            "9",
            "--run-time",
            "20s",
            "--agents",
            &agents,
            "--out",
            out.to_str().expect("UTF-8 path"),
        ],
        &cache,
        BENCH_TIMEOUT,
    );
    run.assert_success("run on two agents");
    let a_done = agent_a.finish(Duration::from_secs(30));
    let b_done = agent_b.finish(Duration::from_secs(30));
    assert!(a_done.status.success(), "agent A: {}", a_done.stderr);
    assert!(b_done.status.success(), "agent B: {}", b_done.stderr);
    // 9 connections over two agents: 5 as client 0, 4 as client 1.
    assert!(
        a_done.stderr.contains("running 5 connections") && a_done.stderr.contains("as client 0"),
        "agent A's share: {}",
        a_done.stderr
    );
    assert!(
        b_done.stderr.contains("running 4 connections") && b_done.stderr.contains("as client 1"),
        "agent B's share: {}",
        b_done.stderr
    );

    let report = read_report(&out);
    let it = only_iteration(&report);
    // One rate per generator of both agents, every count consistent.
    assert_iteration_consistent(&report, it, 9);
    let errors = errors_of(it);
    assert!(errors.is_empty(), "failed operations: {errors:?}");
    // The POSTs of both agents are counted: the prime's post.log audit, which
    // compares them with the server's log, finds nothing missing.
    let audit = strings_of(&it["post_log_audit"]);
    assert!(
        audit.is_empty(),
        "post.log audit of the merged run: {audit:?}"
    );
    assert!(posts_sent(it).iter().sum::<u64>() > 0, "no POST in 20 s");
    let listed: Vec<String> = strings_of(&it["harness"]["agents"]);
    assert_eq!(listed, vec![a.clone(), b.clone()]);
    assert!(
        f64_of(&it["harness"], "cpu_s") > 0.0,
        "the agents' CPU time reaches the report: {}",
        it["harness"]
    );
    assert!(
        run.stdout.contains("2 agents: "),
        "the report names the agents:\n{}",
        run.stdout
    );
}

#[test]
fn an_agent_refuses_primes_outside_its_allow_list() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let cache = tmp.path().join("cache");
    // Only 10.0.0.0/8 may drive this agent: a loopback prime is refused.
    let agent = Bench::spawn(
        &["bench", "agent"],
        &["--listen", "127.0.0.1:0", "--allow", "10.0.0.0/8"],
        &cache,
    );
    let addr = agent.wait_for_stderr(Duration::from_secs(30), |line| {
        line.split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .map(str::to_owned)
    });
    let mut conn = TcpStream::connect(&addr).expect("connect to the agent");
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut got = Vec::new();
    let _ = conn.read_to_end(&mut got);
    assert!(got.is_empty(), "a refused prime gets nothing but the close");
    agent.wait_for_stderr(Duration::from_secs(30), |line| {
        line.contains("not in --allow").then_some(())
    });
}

// ---------------------------------------------------------------------------
// 6. HTTPS: the SPECweb99_SSL-style run against the built-in target
// ---------------------------------------------------------------------------

fn handshakes(it: &Value) -> (u64, u64) {
    let h = &it["tls_handshakes"];
    (u64_of(h, "full"), u64_of(h, "resumed"))
}

#[test]
fn tls_run_against_the_built_in_server() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    let run = bench(
        &[
            "--tls",
            "--connections",
            "6",
            "--run-time",
            "15s",
            "--out",
            out.to_str().expect("UTF-8 path"),
        ],
        &cache,
        BENCH_TIMEOUT,
    );
    run.assert_success("HTTPS run");
    let report = read_report(&out);
    let it = only_iteration(&report);
    assert_iteration_consistent(&report, it, 6);
    assert_eq!(report["benchmark"], "SPECweb99_SSL-style");
    assert!(
        report["notice"]
            .as_str()
            .is_some_and(|n| n.contains("SPECweb99_SSL-style result; not a SPEC result")),
        "notice: {}",
        report["notice"]
    );
    let tls = &report["tls"];
    assert_eq!(tls["protocol"], "TLSv1_3", "rustls on both ends: {tls}");
    assert_eq!(
        tls["key"], "ECDSA P-256",
        "the run's self-signed key: {tls}"
    );
    let errors = errors_of(it);
    assert!(errors.is_empty(), "failed operations over TLS: {errors:?}");
    assert!(strings_of(&it["post_log_audit"]).is_empty());
    // Half the new connections may resume: both kinds happen in a 15 s run
    // where most operations open a connection.
    let (full, resumed) = handshakes(it);
    assert!(full > 0 && resumed > 0, "full {full}, resumed {resumed}");
    for needle in ["SSL Configuration", "TLSv1_3", "RC4"] {
        assert!(run.stdout.contains(needle), "report lacks {needle:?}");
    }

    // No resumption asked: every handshake is full.
    let out0 = tmp.path().join("out0");
    let run = bench(
        &[
            "--tls",
            "--tls-resume",
            "0",
            "--connections",
            "3",
            "--run-time",
            "5s",
            "--out",
            out0.to_str().expect("UTF-8 path"),
        ],
        &cache,
        BENCH_TIMEOUT,
    );
    run.assert_success("HTTPS run without resumption");
    let report = read_report(&out0);
    let (full, resumed) = handshakes(only_iteration(&report));
    assert!(full > 0, "no handshake at all");
    assert_eq!(resumed, 0, "--tls-resume 0 resumed {resumed} sessions");
}

// ---------------------------------------------------------------------------
// Pinning: --harness-cpus, --server-cpus
// ---------------------------------------------------------------------------

/// The CPUs this test process may run on, from `/proc/self/status`.
fn allowed_cpus() -> Vec<usize> {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .trim()
        .to_owned();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().expect("CPU"), b.parse().expect("CPU"));
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().expect("CPU")),
        }
    }
    cpus
}

#[test]
fn pinned_harness_and_built_in_server_run_where_they_were_put() {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("skipped: this test needs two CPUs to pin to, it may use {cpus:?}");
        return;
    }
    let (server_cpu, harness_cpu) = (cpus[0].to_string(), cpus[1].to_string());
    let tmp = tempfile::tempdir().expect("temporary directory");
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("out");
    let run = bench(
        &[
            "--static-only",
            "--connections",
            "4",
            "--run-time",
            "5s",
            "--server-cpus",
            &server_cpu,
            "--harness-cpus",
            &harness_cpu,
            "--out",
            out.to_str().expect("UTF-8 path"),
        ],
        &cache,
        BENCH_TIMEOUT,
    );
    run.assert_success("pinned run");
    let report = read_report(&out);
    // Read back from the kernel: the server's process and this harness.
    assert_eq!(report["placement"]["server_cpus"], server_cpu, "{report}");
    assert_eq!(report["placement"]["harness_cpus"], harness_cpu, "{report}");
    let harness = &only_iteration(&report)["harness"];
    assert_eq!(harness["cores"], 1, "one load thread on one CPU: {harness}");
    let share = f64_of(harness, "share_of_its_cores");
    assert!(share > 0.0 && share < 0.7, "4 paced connections: {harness}");
    assert_eq!(report["harness_bound"], false);
    let text = std::fs::read_to_string(out.join("report.txt")).expect("report.txt");
    assert!(
        text.contains(&format!("CPU {harness_cpu} (pinned)"))
            && text.contains(&format!("CPU {server_cpu} (pinned)"))
            && text.contains("not harness-bound"),
        "{text}"
    );
}

#[test]
fn cpu_lists_that_cannot_be_used_are_refused_before_the_run() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let cache = tmp.path().join("cache");
    for (args, want) in [
        (&["--server-cpus", "0-"][..], "bad CPU list"),
        (&["--harness-cpus", "5000"][..], "out of range"),
        (
            &["--server-cpus", "0", "--target", "http://127.0.0.1:9/"][..],
            "cannot be used with",
        ),
    ] {
        let run = bench(args, &cache, ABORT_TIMEOUT);
        assert!(!run.status.success(), "{args:?} ran");
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
    }
}
