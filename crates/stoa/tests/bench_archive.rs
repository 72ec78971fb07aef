//! The results archive and the A/B judge, end to end: `stoa bench web` runs
//! stored with `--archive` and `--label`, listed by `stoa bench results`,
//! compared by `stoa bench compare`; `stoa bench ab` of the built-in server
//! against itself (no difference) and of a server against the same server
//! behind a proxy that holds every request 10 ms (a difference, B worse).
//!
//! Every run is a child process with its own `XDG_CACHE_HOME` and
//! `XDG_DATA_HOME`, bounded in time; the proxy's threads end with their
//! connections.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use stoa_testkit::Finished;

use common::{Server, run_stoa};

/// Longest one short web run may take (file set, warm-up, run, ramp-down).
const RUN_TIMEOUT: Duration = Duration::from_secs(180);
/// Longest an A/B comparison of short runs may take.
const AB_TIMEOUT: Duration = Duration::from_secs(900);

/// `stoa ARGS` with the harness's cache and the default archive under `home`.
fn stoa(args: &[&str], home: &Path, timeout: Duration) -> Finished {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command
        .args(args)
        .env("XDG_CACHE_HOME", home.join("cache"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("RUST_LOG");
    stoa_testkit::run(&mut command, b"", timeout)
}

fn assert_ok(done: &Finished, what: &str) {
    assert!(
        done.status.success(),
        "{what}: exited with {}; stderr:\n{}\nstdout:\n{}",
        done.status,
        done.stderr,
        done.stdout
    );
}

/// The archive files in `dir`.
fn records(dir: &Path) -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    files
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            serde_json::from_str(&std::fs::read_to_string(p).expect("readable record"))
                .expect("a record is JSON")
        })
        .collect()
}

#[test]
fn runs_are_archived_listed_and_compared() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let archive = tmp.path().join("archive");
    let out = tmp.path().join("out");
    let archive_s = archive.to_str().expect("UTF-8 path");
    for label in ["autocorking on", "autocorking off"] {
        let done = stoa(
            &[
                "bench",
                "web",
                "--connections",
                "4",
                "--run-time",
                "3s",
                "--archive",
                archive_s,
                "--label",
                label,
                "--out",
                out.to_str().expect("UTF-8 path"),
            ],
            tmp.path(),
            RUN_TIMEOUT,
        );
        assert_ok(&done, label);
        assert!(done.stderr.contains("run stored as"), "{}", done.stderr);
    }
    let stored = records(&archive);
    assert_eq!(stored.len(), 2, "one record per run");
    let last = &stored
        .iter()
        .find(|r| r["label"] == "autocorking off")
        .expect("the second run's record");
    assert_eq!(last["kind"], "web");
    assert_eq!(last["format"], 1);
    // The record holds the report's JSON as written to --out, unchanged.
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("report.json")).expect("report.json"),
    )
    .expect("report.json parses");
    assert_eq!(last["result"], report);
    let system = &last["system"];
    assert!(system["cores"].as_u64().unwrap_or(0) >= 1, "{system}");
    assert!(
        system["sysctls"]["net.core.somaxconn"].is_string(),
        "the recorded kernel settings: {system}"
    );
    let processes = system["server"]["processes"]
        .as_array()
        .expect("server processes");
    assert!(
        processes
            .iter()
            .any(|p| p.as_str().is_some_and(|p| p.contains("serve"))),
        "the built-in server's command line: {processes:?}"
    );
    assert!(
        system["harness"]["command_line"]
            .as_str()
            .is_some_and(|c| c.contains("--label autocorking off")),
        "{system}"
    );

    // Nothing went to the default archive.
    assert!(records(&tmp.path().join("data/stoa/results")).is_empty());

    let list = stoa(
        &["bench", "results", "--archive", archive_s],
        tmp.path(),
        RUN_TIMEOUT,
    );
    assert_ok(&list, "results");
    assert!(list.stdout.contains("autocorking on"), "{}", list.stdout);
    assert!(
        list.stdout.contains("-web-autocorking-off"),
        "{}",
        list.stdout
    );

    let cmp = stoa(
        &[
            "bench",
            "compare",
            "autocorking on",
            "autocorking off",
            "--archive",
            archive_s,
        ],
        tmp.path(),
        RUN_TIMEOUT,
    );
    assert_ok(&cmp, "compare");
    assert!(
        cmp.stdout.contains("2 configurations compared (2 runs)"),
        "{}",
        cmp.stdout
    );
    assert!(
        cmp.stdout.contains("difference vs autocorking on"),
        "{}",
        cmp.stdout
    );
    assert!(cmp.stdout.contains("one run on a side"), "{}", cmp.stdout);
    assert!(
        cmp.stdout.contains("Harness command line"),
        "{}",
        cmp.stdout
    );

    let missing = stoa(
        &["bench", "compare", "nothing", "--archive", archive_s],
        tmp.path(),
        RUN_TIMEOUT,
    );
    assert!(!missing.status.success());
    assert!(
        missing.stderr.contains("no run with that ID or label"),
        "{}",
        missing.stderr
    );

    let bad = stoa(
        &["bench", "web", "--label", "two\nlines", "--no-archive"],
        tmp.path(),
        RUN_TIMEOUT,
    );
    assert!(
        !bad.status.success() && bad.stderr.contains("--label"),
        "{}",
        bad.stderr
    );
}

#[test]
fn ab_of_a_server_against_itself_finds_no_difference() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    // The score of 4 connections that all conform is 4 on both sides every
    // round: the interval is zero wide and includes zero.
    let done = stoa(
        &[
            "bench",
            "ab",
            "--metric",
            "score",
            "--max-rounds",
            "3",
            "--no-archive",
            "--",
            "--connections",
            "4",
            "--find-max-limit",
            "4",
            "--run-time",
            "3s",
        ],
        tmp.path(),
        AB_TIMEOUT,
    );
    assert_ok(&done, "ab against itself");
    assert!(
        done.stdout.contains("No difference detected"),
        "{}",
        done.stdout
    );
    assert_eq!(
        done.stdout
            .lines()
            .filter(|l| l.trim_start().starts_with(char::is_numeric))
            .count(),
        3,
        "three rounds: {}",
        done.stdout
    );
}

/// A proxy to `upstream` that holds every piece of a request `delay` before
/// passing it on: the same server, made slow.
#[allow(
    clippy::disallowed_methods,
    reason = "the delay is what is measured, not a synchronisation"
)]
fn slow_proxy(upstream: std::net::SocketAddr, delay: Duration) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
    let addr = listener.local_addr().expect("proxy address");
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { continue };
            let Ok(server) = TcpStream::connect(upstream) else {
                continue;
            };
            let (mut c_in, mut s_out) = (
                client.try_clone().expect("clone"),
                server.try_clone().expect("clone"),
            );
            std::thread::spawn(move || {
                let mut buf = [0u8; 16384];
                while let Ok(n) = c_in.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    std::thread::sleep(delay);
                    if s_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = s_out.shutdown(Shutdown::Write);
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut s_in, &mut c_out);
                let _ = c_out.shutdown(Shutdown::Write);
            });
        }
    });
    format!("http://{addr}")
}

#[test]
fn ab_sees_a_slowed_server_as_worse() {
    let tmp = tempfile::tempdir().expect("temporary directory");
    let docroot = tmp.path().join("docroot");
    let (status, stderr) = run_stoa(
        &[
            "fileset",
            "--connections",
            "4",
            "--dir",
            docroot.to_str().expect("UTF-8 path"),
        ],
        RUN_TIMEOUT,
    );
    assert!(status.success(), "stoa fileset: {stderr}");
    let server = Server::start(&docroot, &["--access-log", "off"]);
    let direct = server.base();
    let upstream = direct
        .trim_start_matches("http://")
        .parse()
        .expect("the server's address");
    let slow = slow_proxy(upstream, Duration::from_millis(10));
    // Closed loop over 4 kept-alive connections: thousands of operations/s
    // direct, at most 4 / 10 ms = 400 through the proxy.
    let done = stoa(
        &[
            "bench",
            "ab",
            "--metric",
            "throughput",
            "--max-rounds",
            "3",
            "--no-archive",
            "--a-target",
            &direct,
            // B's target as B's own harness flags: had they reached A too,
            // both sides would be slowed and no side worse.
            "--b-flags",
            &format!("--target '{slow}'"),
            "--a-label",
            "direct",
            "--b-label",
            "slowed",
            "--",
            "--static-only",
            "--closed-loop",
            "--connections",
            "4",
            "--run-time",
            "3s",
        ],
        tmp.path(),
        AB_TIMEOUT,
    );
    assert_ok(&done, "ab direct vs slowed");
    assert!(
        done.stdout.contains("slowed is") && done.stdout.contains("worse than direct"),
        "{}",
        done.stdout
    );
}
