//! `stoa bench peers` end to end: a short static comparison of `stoa serve`
//! (and nginx when `/usr/sbin/nginx` exists) under wrk on loopback, bounded in
//! time; the result directory holds README.md, summary.txt and raw.csv with a
//! line per round, row and server (the disks' reads and the machine's other
//! work included), and no per-run JSON; the served bytes were checked. Also
//! h2 against stoa alone, and imap: imaptest against stoa and Dovecot's
//! imapd (each skipped with a message when its tool is not installed).

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::run_stoa;

/// Two rounds of two one-second rows per server, the warm-up, the background
/// samples and the starts (some 15 s in all), with room for a slow machine.
const TIMEOUT: Duration = Duration::from_secs(120);

fn installed(path: &str) -> bool {
    Path::new(path).is_file()
}

/// `stoa bench peers ARGS --no-archive --out DIR/result`, which must succeed;
/// the temporary directory (kept while it lives) and the result directory.
fn peers(args: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("result");
    let out_arg = out.to_str().expect("utf-8 path");
    let mut all = vec!["bench", "peers"];
    all.extend_from_slice(args);
    all.extend(["--no-archive", "--out", out_arg]);
    let (status, stderr) = run_stoa(&all, TIMEOUT);
    assert!(status.success(), "stoa bench peers failed: {stderr}");
    (dir, out)
}

#[test]
fn a_static_comparison_writes_its_result_directory() {
    if !installed("/usr/bin/wrk") {
        eprintln!("skipped: the static workload needs wrk (/usr/bin/wrk; apt-get install wrk)");
        return;
    }
    let nginx = installed("/usr/sbin/nginx");
    if !nginx {
        eprintln!("nginx not installed (/usr/sbin/nginx): comparing stoa alone");
    }
    let servers = if nginx { "nginx,stoa" } else { "stoa" };
    let (_dir, out) = peers(&[
        "--workload",
        "static",
        "--servers",
        servers,
        "--rounds",
        "2",
        "--run-time",
        "1",
        "--connections",
        "4",
        "--files",
        "1k",
    ]);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("the result directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want = vec!["README.md", "raw.csv", "stoa.args", "summary.txt"];
    if nginx {
        want.push("nginx.conf");
    }
    want.sort_unstable();
    assert_eq!(names, want, "only the result files, no per-run JSON");

    let raw = std::fs::read_to_string(out.join("raw.csv")).expect("raw.csv");
    let lines: Vec<&str> = raw.lines().collect();
    assert!(
        lines[0].starts_with("round,row,server,ops_per_sec,errors"),
        "{raw}"
    );
    let per_server = 2 * 2;
    let servers_n = if nginx { 2 } else { 1 };
    assert_eq!(lines.len(), 1 + per_server * servers_n, "{raw}");
    for line in &lines[1..] {
        let f: Vec<&str> = line.split(',').collect();
        let ops: f64 = f[3].parse().expect("ops/s");
        assert!(ops > 0.0, "no requests served: {line}");
        assert_eq!(f[4], "0", "errors: {line}");
        assert!(!f[5].is_empty(), "no server CPU per operation: {line}");
        assert!(f[10].parse::<u64>().is_ok(), "no disk reads: {line}");
        assert!(f[11].parse::<f64>().is_ok(), "no other work: {line}");
    }
    // Rounds alternate who goes first.
    let first = |round: &str| {
        lines[1..]
            .iter()
            .find(|l| l.starts_with(&format!("{round},")))
            .map(|l| l.split(',').nth(2).unwrap_or_default().to_owned())
    };
    if nginx {
        assert_eq!(first("1").as_deref(), Some("nginx"));
        assert_eq!(first("2").as_deref(), Some("stoa"));
    }

    let summary = std::fs::read_to_string(out.join("summary.txt")).expect("summary.txt");
    assert!(
        summary.contains("1k-close") && summary.contains("disk MB"),
        "{summary}"
    );
    if nginx {
        assert!(summary.contains("stoa / nginx, per round"), "{summary}");
    }
    let readme = std::fs::read_to_string(out.join("README.md")).expect("README.md");
    assert!(
        readme.contains("`stoa bench peers --workload static"),
        "{readme}"
    );
    assert!(
        readme.contains("## Machine") && readme.contains(&summary),
        "{readme}"
    );
    assert!(
        readme.contains("byte for byte") && readme.contains("after the rounds (servers idle)"),
        "{readme}"
    );
}

/// One round of the h2 workload against stoa alone (the two timed rows take
/// their second of warm-up each, the handshake row one second: some 6 s): stoa
/// started over TLS from a generated certificate, h2 negotiated (h2load's
/// output is checked for it), every row with requests and server CPU.
#[test]
fn an_h2_comparison_runs_over_tls_and_http2() {
    if !installed("/usr/bin/h2load") {
        eprintln!(
            "skipped: the h2 workload needs h2load (/usr/bin/h2load; apt-get install nghttp2-client)"
        );
        return;
    }
    let (_dir, out) = peers(&[
        "--workload",
        "h2",
        "--servers",
        "stoa",
        "--rounds",
        "1",
        "--run-time",
        "1",
        "--no-pin",
    ]);
    let raw = std::fs::read_to_string(out.join("raw.csv")).expect("raw.csv");
    let rows: Vec<Vec<&str>> = raw
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    let names: Vec<&str> = rows.iter().map(|f| f[1]).collect();
    assert_eq!(
        names,
        ["h2-1k-c100-m10", "h2-10k-c100-m10", "handshake-h2"],
        "{raw}"
    );
    for f in &rows {
        assert!(
            f[3].parse::<f64>().expect("ops/s") > 0.0,
            "no requests: {raw}"
        );
        assert_eq!(f[4], "0", "errors: {raw}");
        assert!(!f[5].is_empty(), "no server CPU per request: {raw}");
    }
    let args = std::fs::read_to_string(out.join("stoa.args")).expect("stoa.args");
    assert!(args.contains("--tls-cert $TMP/tls/cert.pem"), "{args}");
}

/// imaptest as the imap workload finds it by default (`STOA_IMAPTEST` is
/// read by the harness itself; the test only decides whether to skip).
fn imaptest_installed() -> bool {
    std::env::var_os("STOA_IMAPTEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/imaptest/bin/imaptest"))
        .is_file()
}

/// One round of the imap workload, one row of 4 imaptest clients for 3 s,
/// against stoa and (when installed) Dovecot's imapd: the result directory,
/// a row per server with commands, server CPU and no error, and a summary
/// that names both servers and their ratio.
#[test]
fn an_imap_comparison_runs_imaptest_against_stoa_and_dovecot() {
    if !imaptest_installed() {
        eprintln!(
            "skipped: the imap workload needs imaptest (scripts/test.sh builds it into \
             /opt/imaptest and sets STOA_IMAPTEST)"
        );
        return;
    }
    let dovecot = installed("/usr/sbin/dovecot") && installed("/usr/lib/dovecot/imap");
    if !dovecot {
        eprintln!("Dovecot's imapd not installed (apt-get install dovecot-imapd): stoa alone");
    }
    let servers = if dovecot { "stoa,dovecot" } else { "stoa" };
    let (_dir, out) = peers(&[
        "--workload",
        "imap",
        "--servers",
        servers,
        "--rounds",
        "1",
        "--run-time",
        "3",
        "--clients",
        "4",
    ]);
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("the result directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut want = vec!["README.md", "raw.csv", "stoa.args", "summary.txt"];
    if dovecot {
        want.push("dovecot.conf");
    }
    want.sort_unstable();
    assert_eq!(names, want);

    let raw = std::fs::read_to_string(out.join("raw.csv")).expect("raw.csv");
    let rows: Vec<Vec<&str>> = raw
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect())
        .collect();
    assert_eq!(rows.len(), if dovecot { 2 } else { 1 }, "{raw}");
    for f in &rows {
        assert_eq!(f[1], "imap-c4", "{raw}");
        assert!(
            f[3].parse::<f64>().expect("cmds/s") > 0.0,
            "no commands: {raw}"
        );
        assert_eq!(f[4], "0", "imaptest errors: {raw}");
        assert!(!f[5].is_empty(), "no server CPU per command: {raw}");
    }
    let summary = std::fs::read_to_string(out.join("summary.txt")).expect("summary.txt");
    assert!(summary.contains("CPU ms/cmd"), "{summary}");
    let line = |server: &str| {
        summary
            .lines()
            .any(|l| l.starts_with("imap-c4") && l.split_whitespace().nth(1) == Some(server))
    };
    assert!(line("stoa"), "{summary}");
    if dovecot {
        assert!(line("dovecot"), "{summary}");
        assert!(summary.contains("stoa / dovecot, per round"), "{summary}");
        let conf = std::fs::read_to_string(out.join("dovecot.conf")).expect("dovecot.conf");
        assert!(conf.contains("args = $TMP/dovecot/passwd"), "{conf}");
    }
    let args = std::fs::read_to_string(out.join("stoa.args")).expect("stoa.args");
    assert!(
        args.contains("--imap-listen") && args.contains("allow_plain_passwords = true"),
        "{args}"
    );
    let readme = std::fs::read_to_string(out.join("README.md")).expect("README.md");
    assert!(
        readme.contains("`stoa bench peers --workload imap")
            && readme.contains(
                "PLAIN passwords on both, Maildir with Dovecot's default fsync, one user"
            )
            && readme.contains(&summary),
        "{readme}"
    );
}
