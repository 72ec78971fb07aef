//! `[metrics]` in the binary: `stoa serve` with the web, SMTP and POP3 servers
//! and the metrics listener, some traffic on each (two GETs, a 200 and a 404; a
//! message through SMTP; a POP3 login and RETR, with Python's smtplib and
//! poplib), then `/metrics` scraped and parsed by Python's `prometheus_client`,
//! both its OpenMetrics parser (strict: what we serve) and its Prometheus text
//! parser, and the counts checked.
//!
//! `prometheus_client` comes from Debian's `python3-prometheus-client`
//! (scripts/test.sh installs it); without it the test fails under CI and is
//! skipped elsewhere.
//!
//! Also: idle clients cannot make a scrape wait (issue 56).

mod common;

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{READY_TIMEOUT, ServerBuilder, Site, add_user};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const JOE: &str = "joe@example.test";

/// A Python that has `prometheus_client`: the one on `PATH`, or Debian's (where
/// the package installs), which may differ.
fn python() -> Option<&'static str> {
    ["python3", "/usr/bin/python3"].into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import prometheus_client"])
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

fn run(program: &str, args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut command = Command::new(program);
    command.args(args).env_remove("RUST_LOG");
    let done = stoa_testkit::run(&mut command, stdin, RUN_TIMEOUT);
    (done.status.code().unwrap_or(-1), done.stdout, done.stderr)
}

/// What the script does, given the web, SMTP, POP3 and metrics ports: traffic,
/// then the scrape, parsed twice, the counts asserted.
const SCRIPT: &str = r##"
import http.client, poplib, smtplib, sys, time, urllib.request
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics
from prometheus_client.parser import text_string_to_metric_families as prometheus

web, smtp, pop3, metrics = (int(p) for p in sys.argv[1:5])
joe = sys.argv[5]

def get(path):
    c = http.client.HTTPConnection("127.0.0.1", web, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    r.read()
    c.close()
    return r.status

assert get("/hello.txt") == 200
assert get("/no-such-file") == 404

s = smtplib.SMTP("127.0.0.1", smtp, timeout=10)
s.sendmail("alice@ext.test", [joe], "Subject: hi\r\n\r\nHello Joe\r\n")
s.quit()

# What Prometheus sends: OpenMetrics first.
PROMETHEUS_ACCEPT = ("application/openmetrics-text;version=1.0.0,"
    "application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")

def scrape(accept=PROMETHEUS_ACCEPT, method="GET"):
    headers = {"Accept": accept} if accept else {}
    req = urllib.request.Request(f"http://127.0.0.1:{metrics}/metrics", headers=headers, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200
        kind = r.headers["Content-Type"]
        if accept == PROMETHEUS_ACCEPT:
            assert kind.startswith("application/openmetrics-text"), r.headers
        else:
            assert kind.startswith("text/plain; version=0.0.4"), r.headers
        body = r.read().decode()
        if method == "HEAD":
            assert body == "" and int(r.headers["Content-Length"]) > 0, r.headers
        return body

def samples(text):
    # The strict parser of the format served: it fails on anything malformed.
    found = {}
    for family in openmetrics(text):
        for s in family.samples:
            found[(s.name, tuple(sorted(s.labels.items())))] = (family.type, s.value)
    return found

def value(found, name, **labels):
    return found.get((name, tuple(sorted(labels.items()))), (None, 0))[1]

# The queue delivers in the background: wait for it (the counter says when).
deadline = time.time() + 15
while value(samples(scrape()), "stoa_queue_delivered_total") < 1:
    assert time.time() < deadline, "the message was not delivered"
    time.sleep(0.05)

p = poplib.POP3("127.0.0.1", pop3, timeout=10)
p.user(joe)
p.pass_("joe-secret")
resp, lines, octets = p.retr(1)
assert b"Hello Joe" in b"\n".join(lines), lines
p.quit()

# The server counts the POP3 connection closed a moment after QUIT's answer: wait
# for the gauge (bounded) before judging the scrape.
deadline = time.time() + 10
while True:
    text = scrape()
    found = samples(text)
    if value(found, "stoa_connections_open", service="pop3") == 0 or time.time() > deadline:
        break
    time.sleep(0.05)
expect = [
    ("stoa_http_requests_total", {"method": "GET", "code": "200"}, "counter", lambda v: v >= 1),
    ("stoa_http_requests_total", {"method": "GET", "code": "404"}, "counter", lambda v: v >= 1),
    ("stoa_http_sent_bytes_total", {}, "counter", lambda v: v > 0),
    ("stoa_smtp_sessions_total", {"protocol": "smtp"}, "counter", lambda v: v == 1),
    ("stoa_smtp_messages_accepted_total", {}, "counter", lambda v: v == 1),
    ("stoa_smtp_rejected_total", {"reason": "unknown_user"}, "counter", lambda v: v == 0),
    ("stoa_queue_queued_total", {}, "counter", lambda v: v == 1),
    ("stoa_queue_delivered_total", {}, "counter", lambda v: v == 1),
    ("stoa_queue_bounced_total", {}, "counter", lambda v: v == 0),
    ("stoa_queue_messages", {}, "gauge", lambda v: v == 0),
    ("stoa_delivery_seconds_count", {}, "histogram", lambda v: v == 1),
    ("stoa_delivery_seconds_bucket", {"le": "+Inf"}, "histogram", lambda v: v == 1),
    ("stoa_pop3_logins_total", {"result": "ok"}, "counter", lambda v: v == 1),
    ("stoa_pop3_logins_total", {"result": "failed"}, "counter", lambda v: v == 0),
    ("stoa_pop3_retrievals_total", {}, "counter", lambda v: v == 1),
    ("stoa_directory_cache_total", {"cache": "password", "result": "miss"}, "counter", lambda v: v >= 1),
    ("stoa_ldap_errors_total", {}, "counter", lambda v: v == 0),
    ("stoa_connections_open", {"service": "pop3"}, "gauge", lambda v: v == 0),
    ("stoa_tls_handshakes_total", {"result": "failed"}, "counter", lambda v: v == 0),
    ("stoa_http_site_responses_total", {"site": "_", "code": "2xx"}, "counter", lambda v: v >= 1),
    ("stoa_http_site_responses_total", {"site": "_", "code": "4xx"}, "counter", lambda v: v >= 1),
    ("stoa_http_request_duration_seconds_count", {"site": "_"}, "histogram", lambda v: v >= 2),
    ("stoa_http_request_duration_seconds_bucket", {"site": "_", "le": "+Inf"}, "histogram", lambda v: v >= 2),
    ("process_cpu_seconds_total", {}, "counter", lambda v: v > 0),
    ("process_resident_memory_bytes", {}, "gauge", lambda v: v > 1_000_000),
    ("process_open_fds", {}, "gauge", lambda v: v >= 5),
    ("process_max_fds", {}, "gauge", lambda v: v >= 64),
    ("process_start_time_seconds", {}, "gauge", lambda v: time.time() - 600 < v <= time.time()),
]
problems = []
for name, labels, kind, ok in expect:
    key = (name, tuple(sorted(labels.items())))
    if key not in found:
        problems.append(f"missing {name}{labels}")
        continue
    typ, v = found[key]
    if typ != kind or not ok(v):
        problems.append(f"{name}{labels} = {v} ({typ})")

build = [k for k in found if k[0] == "stoa_build_info"]
if len(build) != 1 or dict(build[0][1]).get("version") is None or found[build[0]][1] != 1:
    problems.append(f"stoa_build_info: {build}")

# Without OpenMetrics in Accept (curl, older scrapers): the classic text, typed
# as the OpenMetrics families are, with the same values (counters still moving
# between the two scrapes are only compared for not going back).
plain = {}
classic = scrape(accept=None)
assert "# EOF" not in classic
for family in prometheus(classic):
    for s in family.samples:
        plain[(s.name, tuple(sorted(s.labels.items())))] = (family.type, s.value)
moving = ("process_", "stoa_http_", "stoa_connections_open", "stoa_tls_")
for (name, labels), (typ, v) in found.items():
    got = plain.get((name, labels))
    if got is None:
        problems.append(f"the classic text lacks {name}{dict(labels)}")
    elif got[0] != typ:
        problems.append(f"the classic text types {name} {got[0]}, not {typ}")
    elif got[1] != v and not (name.startswith(moving) and got[1] >= v):
        problems.append(f"the classic text has {name}{dict(labels)} = {got[1]}, not {v}")
assert scrape(accept="text/plain", method="HEAD") == ""
assert scrape(method="HEAD") == ""

if problems:
    print(text)
    sys.exit("\n".join(problems))
print("ok", len(found), "samples")
"##;

#[test]
fn a_scrape_counts_http_smtp_and_pop3_traffic() {
    let Some(python) = python() else {
        let why = "Python's prometheus_client is not installed (scripts/test.sh installs \
                   the Debian package python3-prometheus-client)";
        assert!(std::env::var_os("CI").is_none(), "{why}");
        eprintln!("{why}; skipping");
        return;
    };
    let site = Site::new();
    let mail = site.outside("mail");
    add_user(&mail, JOE, "joe-secret");
    let config = site.outside("stoa.toml");
    std::fs::write(&config, "[metrics]\nlisten = \"127.0.0.1:0\"\n").expect("write config");
    let server = ServerBuilder::new(site.root())
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--mail-dir".as_ref(), mail.as_os_str()])
        .args(["--listen", "127.0.0.1:0"])
        .args([
            "--smtp-listen",
            "127.0.0.1:0",
            "--pop3-listen",
            "127.0.0.1:0",
        ])
        .start();
    let metrics = metrics_addr(&server);
    let ports = [
        server.addrs[0].port(),
        server.smtp_addrs[0].port(),
        server.pop3_addrs[0].port(),
        metrics.port(),
    ]
    .map(|p| p.to_string());
    let mut args = vec!["-c", SCRIPT];
    args.extend(ports.iter().map(String::as_str));
    args.push(JOE);
    let (code, out, err) = run(python, &args, b"");
    assert_eq!(
        code,
        0,
        "the scrape did not show the traffic:\n{out}{err}\nserver:\n{}",
        server.stderr_text()
    );
}

/// The metrics listener's address, from its readiness line.
fn metrics_addr(server: &common::Server) -> SocketAddr {
    let line = |lines: &[String]| {
        lines.iter().find_map(|l| {
            let (scheme, addr) = stoa_testkit::listening_on(l.strip_prefix("stoa: ")?)?;
            (scheme == "metrics").then_some(addr)
        })
    };
    assert!(
        server.wait_for_stderr(READY_TIMEOUT, |lines| line(lines).is_some()),
        "no metrics readiness line:\n{}",
        server.stderr_text()
    );
    line(&server.stderr_lines()).expect("seen above")
}

#[test]
fn a_bad_metrics_address_stops_the_start_naming_it() {
    let site = Site::new();
    // Taken: the test holds it.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let config = site.outside("stoa.toml");
    std::fs::write(&config, format!("[metrics]\nlisten = \"{addr}\"\n")).expect("write config");
    let docroot = site.root().to_str().expect("UTF-8 path").to_owned();
    let config = config.to_str().expect("UTF-8 path").to_owned();
    let (status, stderr) = common::run_stoa(
        &[
            "serve",
            "--config",
            &config,
            "--docroot",
            &docroot,
            "--listen",
            "127.0.0.1:0",
        ],
        RUN_TIMEOUT,
    );
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen for metrics on {addr}")),
        "{stderr}"
    );
}

#[test]
fn idle_connections_do_not_starve_a_scrape() {
    // Issue 56 (6): the metrics listener served 16 connections at once and gave
    // each 10 s for its head, so 20 clients that connect and say nothing made
    // a scrape wait 9.7 s (Prometheus gives up at 10 s). Here 20 connect in
    // silence and 20 more send half a head, then a scrape must be answered at
    // once.
    let site = Site::new();
    let config = site.outside("stoa.toml");
    std::fs::write(&config, "[metrics]\nlisten = \"127.0.0.1:0\"\n").expect("write config");
    let server = ServerBuilder::new(site.root())
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--listen", "127.0.0.1:0"])
        .start();
    let metrics = metrics_addr(&server);
    let idle: Vec<TcpStream> = (0..40)
        .map(|i| {
            let mut c = TcpStream::connect(metrics).expect("connect");
            if i % 2 == 1 {
                c.write_all(b"GET /metrics HTTP/1.1\r\n")
                    .expect("half a head");
            }
            c
        })
        .collect();
    let start = Instant::now();
    let mut scrape = TcpStream::connect(metrics).expect("connect");
    scrape
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    scrape
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
        .expect("request");
    let mut answer = Vec::new();
    let read = scrape.read_to_end(&mut answer);
    let took = start.elapsed();
    assert!(
        read.is_ok(),
        "no answer to a scrape behind idle connections after {took:?}: {read:?}"
    );
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    assert!(took < Duration::from_secs(3), "the scrape took {took:?}");
    drop(idle);
}
