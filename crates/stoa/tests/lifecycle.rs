//! The `stoa` process: signals (SIGTERM/SIGINT drain and exit 0, SIGHUP reloads,
//! which reopens the access log), access-log contents and escaping, and configuration errors.

mod common;

use std::path::Path;
use std::time::Duration;

use rustix::process::Signal;
use stoa_testkit::http::Response;
use stoa_testkit::wait_until;

use common::{HELLO, Server, ServerBuilder, Site, curl, fetch, raw_conn, raw_request, run_stoa};

/// How long a line may take to reach the log file (it is flushed once a second).
const LOG_WAIT: Duration = Duration::from_secs(5);

fn read_log(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    String::from_utf8(bytes).expect("the access log is ASCII (everything else is escaped)")
}

/// Finds the one log line whose request field is exactly `request`.
fn line_for<'a>(log: &'a str, request: &str) -> &'a str {
    let needle = format!(" \"{request}\" ");
    let mut lines = log.lines().filter(|l| l.contains(&needle));
    let line = lines
        .next()
        .unwrap_or_else(|| panic!("no log line for {request:?} in:\n{log}"));
    assert!(
        lines.next().is_none(),
        "several lines for {request:?}:\n{log}"
    );
    line
}

/// `status bytes` (CLF) after the request field of `line`.
fn status_and_bytes(line: &str) -> (u16, String) {
    let rest = line.rsplit_once("\" ").expect("request field").1;
    let mut fields = rest.split(' ');
    let status = fields.next().and_then(|s| s.parse().ok()).expect("status");
    let bytes = fields.next().expect("bytes").to_owned();
    (status, bytes)
}

/// `host - - [dd/Mon/yyyy:hh:mm:ss +0000] "` with the host 127.0.0.1.
fn assert_clf_prefix(line: &str) {
    let rest = line
        .strip_prefix("127.0.0.1 - - [")
        .unwrap_or_else(|| panic!("not a CLF line from 127.0.0.1: {line:?}"));
    let (date, rest) = rest.split_at(26);
    assert!(
        date.len() == 26
            && date.as_bytes()[2] == b'/'
            && date.as_bytes()[6] == b'/'
            && date.as_bytes()[11] == b':'
            && date.ends_with(" +0000"),
        "bad CLF date in {line:?}"
    );
    assert!(rest.starts_with("] \""), "bad CLF line {line:?}");
}

fn expect_body_bytes(line: &str, status: u16, body: usize) {
    let want = if body == 0 {
        "-".to_owned()
    } else {
        body.to_string()
    };
    assert_eq!(status_and_bytes(line), (status, want), "line {line:?}");
}

#[test]
fn sigterm_flushes_the_access_log_and_exits_zero() {
    let site = Site::new();
    let log_path = site.outside("access.log");
    let log_arg = log_path.to_str().expect("UTF-8 path");
    let mut server = Server::start(site.root(), &["--access-log", log_arg]);

    let ok = fetch(&server.url("/hello.txt"), &[]);
    assert_eq!(ok.code, 200);
    let missing = fetch(&server.url("/missing.txt"), &[]);
    assert_eq!(missing.code, 404);
    let head = fetch(&server.url("/hello.txt"), &["--head"]);
    assert_eq!(head.code, 200);
    let traversal = fetch(&server.url("/../secret.txt"), &["--path-as-is"]);
    assert_eq!(traversal.code, 400);
    // A percent-encoded LF is logged as sent; it is text, not a line break.
    let encoded = raw_request(
        server.addr,
        b"GET /nl%0aFORGED%0d%0a HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(encoded.status, 404);
    // Raw control bytes in the target are refused and escaped in the log.
    let control = raw_request(
        server.addr,
        b"GET /ctl\x01\x1b[31m HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(control.status, 400);
    // A raw LF ends the (broken) request line: what follows cannot forge a line.
    let split = raw_request(
        server.addr,
        b"GET /evil\nFORGED - - [01/Jan/2000:00:00:00 +0000] \"GET /x HTTP/1.1\" 200 1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(split.status, 400);

    // Raw connections are closed (dropped) by now, so nothing is in flight.
    let status = server.stop_with(Signal::TERM);
    assert!(
        status.success(),
        "SIGTERM should exit 0, got {status}; stderr:\n{}",
        server.stderr_text()
    );

    let log = read_log(&log_path);
    assert_eq!(log.lines().count(), 7, "one line per request:\n{log}");
    assert!(log.ends_with('\n'));
    for line in log.lines() {
        assert_clf_prefix(line);
    }
    expect_body_bytes(line_for(&log, "GET /hello.txt HTTP/1.1"), 200, HELLO.len());
    expect_body_bytes(
        line_for(&log, "GET /missing.txt HTTP/1.1"),
        404,
        missing.body.len(),
    );
    expect_body_bytes(line_for(&log, "HEAD /hello.txt HTTP/1.1"), 200, 0);
    expect_body_bytes(
        line_for(&log, "GET /../secret.txt HTTP/1.1"),
        400,
        traversal.body.len(),
    );
    expect_body_bytes(
        line_for(&log, "GET /nl%0aFORGED%0d%0a HTTP/1.1"),
        404,
        encoded.body.len(),
    );
    expect_body_bytes(
        line_for(&log, "GET /ctl\\x01\\x1B[31m HTTP/1.1"),
        400,
        control.body.len(),
    );
    expect_body_bytes(line_for(&log, "GET /evil"), 400, split.body.len());
    assert!(
        !log.lines().any(|l| l.starts_with("FORGED")),
        "a request forged a log line:\n{log}"
    );
}

#[test]
fn combined_format_logs_referer_and_user_agent_escaped() {
    let site = Site::new();
    let log_path = site.outside("combined.log");
    let log_arg = log_path.to_str().expect("UTF-8 path");
    let mut server = Server::start(
        site.root(),
        &["--access-log", log_arg, "--log-format", "combined"],
    );
    let got = fetch(
        &server.url("/hello.txt"),
        &[
            "--referer",
            "http://ref.example/page",
            "--user-agent",
            "agent \"quoted\" \\ back",
        ],
    );
    assert_eq!(got.code, 200);
    let bare = raw_request(server.addr, b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(bare.status, 200);
    let status = server.stop_with(Signal::TERM);
    assert!(status.success(), "exit {status}");

    let log = read_log(&log_path);
    let line = line_for(&log, "GET /hello.txt HTTP/1.1");
    assert_clf_prefix(line);
    let len = HELLO.len();
    assert!(
        line.ends_with(&format!(
            "\" 200 {len} \"http://ref.example/page\" \"agent \\x22quoted\\x22 \\x5C back\""
        )),
        "combined line {line:?}"
    );
    let bare_line = line_for(&log, "GET /a.txt HTTP/1.1");
    assert!(bare_line.ends_with(" \"-\" \"-\""), "line {bare_line:?}");
}

#[test]
fn sighup_reopens_the_access_log() {
    let site = Site::new();
    let log_path = site.outside("access.log");
    let rotated = site.outside("access.log.1");
    let log_arg = log_path.to_str().expect("UTF-8 path");
    let mut server = Server::start(site.root(), &["--access-log", log_arg]);

    assert_eq!(fetch(&server.url("/a.txt?before"), &[]).code, 200);
    assert!(
        wait_until(LOG_WAIT, || read_log(&log_path).contains("/a.txt?before")),
        "the first line did not reach the log within {LOG_WAIT:?}"
    );

    std::fs::rename(&log_path, &rotated).expect("rotate the log");
    server.signal(Signal::HUP);
    assert!(
        server.wait_for_stderr(LOG_WAIT, |lines| lines
            .iter()
            .any(|l| l.contains("reload: the new configuration is in service"))),
        "no SIGHUP acknowledgement on stderr:\n{}",
        server.stderr_text()
    );
    assert_eq!(fetch(&server.url("/b.txt?after"), &[]).code, 200);
    assert!(
        wait_until(LOG_WAIT, || read_log(&log_path).contains("/b.txt?after")),
        "after SIGHUP, {} did not appear with the new line within {LOG_WAIT:?}; \
         rotated file:\n{}",
        log_path.display(),
        read_log(&rotated)
    );
    let old = read_log(&rotated);
    assert!(old.contains("/a.txt?before") && !old.contains("/b.txt?after"));
    assert!(!read_log(&log_path).contains("/a.txt?before"));

    let status = server.stop_with(Signal::TERM);
    assert!(status.success(), "exit {status}");
}

#[test]
fn sigint_exits_zero() {
    let site = Site::new();
    let mut server = Server::start(site.root(), &[]);
    assert_eq!(fetch(&server.url("/hello.txt"), &[]).code, 200);
    let status = server.stop_with(Signal::INT);
    assert!(
        status.success(),
        "SIGINT should exit 0, got {status}; stderr:\n{}",
        server.stderr_text()
    );
}

#[test]
fn sigterm_drains_a_response_in_flight() {
    let site = Site::new();
    // Large enough that the response cannot sit in socket buffers whole.
    let big: Vec<u8> = (0..32u32 << 20).map(|i| (i % 251) as u8).collect();
    site.write("big.bin", &big);
    let mut server = Server::start(site.root(), &[]);

    let mut conn = raw_conn(server.addr);
    conn.send(b"GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n");
    // Read a little so the response has certainly started, then signal while
    // most of it is still to be sent.
    let mut first = [0u8; 1024];
    std::io::Read::read_exact(conn.socket(), &mut first).expect("first response bytes");
    assert!(first.starts_with(b"HTTP/1.1 200 "));
    server.signal(Signal::TERM);
    assert!(
        server.wait_for_stderr(Duration::from_secs(5), |lines| lines
            .iter()
            .any(|l| l.contains("shutting down"))),
        "no shutdown message on stderr:\n{}",
        server.stderr_text()
    );

    let mut rest = Vec::new();
    std::io::Read::read_to_end(conn.socket(), &mut rest).expect("the rest of the response");
    let mut all = first.to_vec();
    all.extend_from_slice(&rest);
    let head_end = common::find(&all, b"\r\n\r\n").expect("complete head") + 4;
    assert_eq!(
        all.len() - head_end,
        big.len(),
        "the response in flight was cut short"
    );
    assert!(all[head_end..] == big[..], "body corrupted");

    let status = server
        .wait_exit(common::EXIT_TIMEOUT)
        .expect("the server exits after draining");
    assert!(status.success(), "exit {status}");
}

#[test]
fn config_errors_are_all_reported_with_status_2() {
    let site = Site::new();
    let config = site.outside("stoa.toml");
    let docroot = site.root().to_str().expect("UTF-8 path");
    std::fs::write(
        &config,
        format!(
            "[web]\n\
             docroot = \"{docroot}\"\n\
             workers = \"many\"\n\
             log_format = \"fancy\"\n\
             colour = \"blue\"  # an unknown key is an error too\n\
             \n\
             [web.limits]\n\
             head_timeout = \"soon\"\n"
        ),
    )
    .expect("write config");
    let config_arg = config.to_str().expect("UTF-8 path");
    let (status, stderr) = run_stoa(
        &["serve", "--config", config_arg, "--listen", "127.0.0.1:0"],
        Duration::from_secs(10),
    );
    assert_eq!(status.code(), Some(2), "stderr:\n{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("stoa: error: "))
        .collect();
    assert_eq!(errors.len(), 4, "four mistakes, four errors:\n{stderr}");
    for key in [
        "web.workers",
        "web.log_format",
        "web.limits.head_timeout",
        "web.colour",
    ] {
        assert!(
            errors.iter().any(|l| l.contains(key)),
            "no error naming {key}:\n{stderr}"
        );
    }
    assert!(
        !stderr.contains("listening on"),
        "a bad configuration must not start the server:\n{stderr}"
    );
}

#[test]
fn flag_and_file_errors_are_reported_together() {
    let site = Site::new();
    let config = site.outside("stoa.toml");
    std::fs::write(&config, "[web]\nshutdown_grace = \"forever\"\n").expect("write config");
    let config_arg = config.to_str().expect("UTF-8 path");
    let missing = site.outside("no-such-dir");
    let missing_arg = missing.to_str().expect("UTF-8 path");
    let (status, stderr) = run_stoa(
        &[
            "serve",
            "--config",
            config_arg,
            "--docroot",
            missing_arg,
            "--listen",
            "nowhere",
            "--head-timeout",
            "fast",
        ],
        Duration::from_secs(10),
    );
    assert_eq!(status.code(), Some(2), "stderr:\n{stderr}");
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("stoa: error: "))
        .collect();
    assert_eq!(errors.len(), 4, "stderr:\n{stderr}");
    for needle in [
        "shutdown_grace",
        "--listen nowhere",
        "--head-timeout fast",
        "no-such-dir",
    ] {
        assert!(
            errors.iter().any(|l| l.contains(needle)),
            "no error mentioning {needle:?}:\n{stderr}"
        );
    }
}

#[test]
fn several_listen_addresses_are_all_served() {
    let site = Site::new();
    let server = ServerBuilder::new(site.root())
        .args(["--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0"])
        .start();
    assert_eq!(server.addrs.len(), 2);
    assert_ne!(server.addrs[0], server.addrs[1]);
    for addr in &server.addrs {
        let response: Response = raw_request(*addr, b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(response.status, 200, "{addr}");
        assert_eq!(response.body, HELLO);
        let out = curl(&[
            "--output",
            "/dev/null",
            "--write-out",
            "%{http_code}",
            &format!("http://{addr}/"),
        ]);
        assert_eq!(out.stdout, "200", "{addr}");
    }
}

/// Issue 56, defect 8: a second `stoa serve` on an address a running one holds
/// started silently and took a share of the traffic (`SO_REUSEPORT` between
/// processes of one user). It must refuse, as nginx, Postfix and Dovecot do, for
/// the web and the mail listeners alike.
#[test]
fn a_second_instance_on_a_taken_address_refuses_to_start() {
    let site = Site::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    common::add_user(&mail, "joe@example.test", "secret");
    let first = ServerBuilder::new(site.root())
        .args(["--mail-dir", mail.to_str().expect("UTF-8")])
        .args([
            "--smtp-listen",
            "127.0.0.1:0",
            "--imap-listen",
            "127.0.0.1:0",
        ])
        .args(["--listen", "127.0.0.1:0"])
        .start();
    let docroot = site.root().to_str().expect("UTF-8").to_owned();
    let cases = [
        ("--listen", first.addrs[0]),
        ("--smtp-listen", first.smtp_addrs[0]),
        ("--imap-listen", first.imap_addrs[0]),
    ];
    for (flag, addr) in cases {
        let addr = addr.to_string();
        let mail_dir = tmp.path().join(format!("other{}", flag.len()));
        let mut args = vec!["serve", "--docroot", &docroot, flag, &addr];
        let mail_arg = mail_dir.to_str().expect("UTF-8").to_owned();
        if flag != "--listen" {
            args.extend(["--mail-dir", &mail_arg]);
        }
        let (status, stderr) = run_stoa(&args, Duration::from_secs(30));
        assert!(
            !status.success(),
            "{flag} {addr}: a second instance started"
        );
        assert!(stderr.contains("already in use"), "{flag} {addr}: {stderr}");
    }
    // The first one still answers alone.
    assert_eq!(fetch(&first.url("/hello.txt"), &[]).code, 200);
}
