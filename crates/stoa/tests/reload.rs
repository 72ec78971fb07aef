//! Configuration reload (`stoa reload --pid-file`, SIGHUP) under load: keep-alive
//! HTTP clients keep requesting throughout, an SMTP session is in the middle of a
//! transaction and a keep-alive connection sits idle while the new configuration
//! adds a listener and swaps the HTTPS certificate. Nothing in flight is lost:
//! every request gets its whole answer (the old servers close a connection only
//! after an answer that says so), the SMTP session finishes its message on the
//! old server and the message is delivered, the new listener and certificate
//! serve, and the old servers finish once their connections are done. A broken
//! configuration is then refused whole and the running one stays.

mod common;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use stoa_testkit::http::Client;
use stoa_testkit::line::LineConn;
use stoa_testkit::tls::{TestCert, client_config};

use common::{HELLO, READY_TIMEOUT, ServerBuilder, Site, add_user};

const JOE: &str = "joe@example.test";
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// Keep-alive clients requesting while the configuration changes.
const CLIENTS: usize = 4;

/// A loopback address nobody listens on now, for a configuration that names its
/// ports (the test connects before the server has printed them all).
fn free_addr() -> SocketAddr {
    let probe = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    probe.local_addr().expect("local address")
}

fn stoa_reload(pid_file: &Path) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command.arg("reload").arg("--pid-file").arg(pid_file);
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    assert!(done.status.success(), "stoa reload: {}", done.stderr);
}

/// The listeners of one configuration: HTTP on each of `http`, HTTPS on `https`
/// with `cert`, SMTP and POP3.
struct Layout<'a> {
    root: &'a Path,
    mail: &'a Path,
    http: &'a [SocketAddr],
    https: SocketAddr,
    cert: &'a TestCert,
    smtp: SocketAddr,
    pop3: SocketAddr,
}

fn write_config(path: &Path, l: &Layout<'_>) {
    let mut toml = String::new();
    for addr in l.http {
        toml.push_str(&format!("[[listener]]\naddress = \"{addr}\"\n\n"));
    }
    toml.push_str(&format!(
        "[[listener]]\naddress = \"{}\"\ntls = {{ cert = {:?}, key = {:?} }}\n\n\
         [web]\ndocroot = {:?}\nworkers = 2\n\n\
         [smtp]\nmail_dir = {:?}\nlisten = [\"{}\"]\nworkers = 2\n\n\
         [pop3]\nmail_dir = {:?}\nlisten = [\"{}\"]\nworkers = 2\n",
        l.https, l.cert.cert, l.cert.key, l.root, l.mail, l.smtp, l.mail, l.pop3,
    ));
    std::fs::write(path, toml).expect("write the configuration");
}

/// Keep-alive GETs of /hello.txt until `stop`, reconnecting after an answer that
/// closes; returns (answers, failures). A failure is a request without its
/// whole, correct answer.
fn load(addr: SocketAddr, stop: &AtomicBool, answered: &AtomicUsize) -> usize {
    let mut failures = 0;
    let mut conn: Option<Client> = None;
    while !stop.load(Ordering::Relaxed) {
        let client = conn.get_or_insert_with(|| Client::connect(addr));
        client.send(b"GET /hello.txt HTTP/1.1\r\nHost: t\r\n\r\n");
        match client.try_read_response(false) {
            Ok(Some(r)) if r.status == 200 && r.body == HELLO => {
                answered.fetch_add(1, Ordering::Relaxed);
                if r.closes() {
                    conn = None;
                }
            }
            other => {
                eprintln!("load: a request failed: {other:?}");
                failures += 1;
                conn = None;
            }
        }
    }
    failures
}

/// Whether an HTTPS handshake for `name`, trusting only `cert`, succeeds.
fn handshake_trusting(addr: SocketAddr, cert: &TestCert, name: &str) -> bool {
    let config = client_config(&[&cert.der], &[b"http/1.1"]);
    match Client::connect_tls(addr, &config, name) {
        Ok(mut client) => client.get("/hello.txt").status == 200,
        Err(_) => false,
    }
}

/// How many messages Joe's mailbox holds (a POP3 login and STAT).
fn messages(pop3: SocketAddr) -> usize {
    let mut pop = LineConn::connect(pop3);
    assert!(pop.line().is_some_and(|l| l.starts_with("+OK")));
    assert!(pop.cmd(&format!("USER {JOE}")).starts_with("+OK"));
    assert!(pop.cmd("PASS joe-secret").starts_with("+OK"));
    let stat = pop.cmd("STAT");
    pop.cmd("QUIT");
    stat.split(' ')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("STAT count")
}

fn count_lines(server: &common::Server, needle: &str) -> usize {
    server
        .stderr_lines()
        .iter()
        .filter(|l| l.contains(needle))
        .count()
}

#[test]
fn a_reload_under_load_adds_a_listener_and_swaps_the_certificate_losing_nothing() {
    let site = Site::new();
    let mail: PathBuf = site.outside("mail");
    add_user(&mail, JOE, "joe-secret");
    let certs = site.outside("certs");
    std::fs::create_dir_all(&certs).expect("certs dir");
    let (old_cert, new_cert) = (
        TestCert::new(&certs, "old.test"),
        TestCert::new(&certs, "new.test"),
    );
    let (http, added, https, smtp, pop3) = (
        free_addr(),
        free_addr(),
        free_addr(),
        free_addr(),
        free_addr(),
    );
    let config = site.outside("stoa.toml");
    let pid_file = site.outside("stoa.pid");
    let first = Layout {
        root: site.root(),
        mail: &mail,
        http: &[http],
        https,
        cert: &old_cert,
        smtp,
        pop3,
    };
    write_config(&config, &first);
    let mut server = ServerBuilder::mail(&mail)
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--pid-file".as_ref(), pid_file.as_os_str()])
        .start();
    assert!(
        server.wait_for_stderr(READY_TIMEOUT, |lines| {
            lines.iter().filter(|l| l.contains("listening on")).count() >= 4
        }),
        "not every listener came up:\n{}",
        server.stderr_text()
    );
    assert!(handshake_trusting(https, &old_cert, "old.test"));

    // The load, an idle keep-alive connection and an SMTP transaction under way.
    let stop = Arc::new(AtomicBool::new(false));
    let answered = Arc::new(AtomicUsize::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (stop, answered) = (Arc::clone(&stop), Arc::clone(&answered));
            std::thread::spawn(move || load(http, &stop, &answered))
        })
        .collect();
    let mut idle = Client::connect(http);
    let first_answer = idle.get("/hello.txt");
    assert!(first_answer.status == 200 && !first_answer.closes());
    let mut session = LineConn::connect(smtp);
    assert!(session.line().is_some_and(|l| l.starts_with("220")));
    session.send_line("EHLO client.test");
    loop {
        let reply = session.line().expect("EHLO's reply");
        assert!(reply.starts_with("250"), "EHLO: {reply}");
        if reply.starts_with("250 ") {
            break;
        }
    }
    assert!(session.cmd("MAIL FROM:<alice@ext.test>").starts_with("250"));
    assert!(session.cmd(&format!("RCPT TO:<{JOE}>")).starts_with("250"));
    assert!(stoa_testkit::wait_until(Duration::from_secs(20), || {
        answered.load(Ordering::Relaxed) >= 200
    }));
    let before = answered.load(Ordering::Relaxed);

    // The new configuration: one more HTTP listener, the other certificate.
    let second = Layout {
        http: &[http, added],
        cert: &new_cert,
        ..first
    };
    write_config(&config, &second);
    stoa_reload(&pid_file);
    assert!(
        server.wait_for_stderr(READY_TIMEOUT, |lines| lines
            .iter()
            .any(|l| l.contains("reload: the new configuration is in service"))),
        "the reload did not complete:\n{}",
        server.stderr_text()
    );

    // The SMTP session goes on where it was, on the server it started with.
    assert!(session.cmd("DATA").starts_with("354"));
    session.send(b"Subject: across a reload\r\n\r\nStill here.\r\n.\r\n");
    let accepted = session.line().expect("the answer to the message");
    assert!(accepted.starts_with("250"), "the message: {accepted}");
    assert!(session.cmd("QUIT").starts_with("221"));
    // The idle keep-alive connection gets its answer, and is told to close.
    let after_reload = idle.get("/hello.txt");
    assert_eq!(after_reload.status, 200);
    assert!(
        after_reload.closes(),
        "the old server keeps the connection open"
    );
    idle.expect_eof();
    // The new listener and the new certificate serve.
    let mut fresh = Client::connect(added);
    assert_eq!(fresh.get("/hello.txt").body, HELLO);
    assert!(handshake_trusting(https, &new_cert, "new.test"));
    assert!(!handshake_trusting(https, &old_cert, "old.test"));
    // The load carried on, without a failure.
    assert!(stoa_testkit::wait_until(Duration::from_secs(20), || {
        answered.load(Ordering::Relaxed) >= before + 200
    }));
    stop.store(true, Ordering::Relaxed);
    let failures: usize = clients
        .into_iter()
        .map(|c| c.join().expect("load thread"))
        .sum();
    assert_eq!(
        failures,
        0,
        "{failures} requests failed across the reload ({} answered):\n{}",
        answered.load(Ordering::Relaxed),
        server.stderr_text()
    );
    // The old servers finish once their connections are done.
    assert!(
        server.wait_for_stderr(READY_TIMEOUT, |lines| lines
            .iter()
            .any(|l| l.contains("reload: the replaced servers have finished"))),
        "the replaced servers did not finish:\n{}",
        server.stderr_text()
    );
    // The message accepted by the old server is delivered (one queue runner).
    assert!(
        stoa_testkit::wait_until(Duration::from_secs(20), || messages(pop3) == 1),
        "the message accepted across the reload was not delivered once (STAT {})",
        messages(pop3)
    );

    // A broken configuration is refused whole; the running one stays, and
    // `stoa reload` says so: the errors, and a failing exit status (issue 56: it
    // exited 0 and printed nothing).
    std::fs::write(&config, "[[listener]]\naddress = \"not an address\"\n").expect("write");
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command.arg("reload").arg("--pid-file").arg(&pid_file);
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    assert!(
        !done.status.success(),
        "a refused reload exited 0: {}",
        done.stderr
    );
    assert!(
        done.stderr.contains("stoa: error: ") && done.stderr.contains("not an address"),
        "the errors are not printed: {}",
        done.stderr
    );
    assert!(
        server.wait_for_stderr(READY_TIMEOUT, |lines| lines
            .iter()
            .any(|l| l.contains("reload refused"))),
        "no refusal logged:\n{}",
        server.stderr_text()
    );
    assert_eq!(Client::connect(added).get("/hello.txt").status, 200);
    assert_eq!(
        count_lines(&server, "reload: the new configuration is in service"),
        1
    );
    let status = server.stop_with(rustix::process::Signal::TERM);
    assert!(
        status.success(),
        "exit: {status:?}\n{}",
        server.stderr_text()
    );
    assert!(!pid_file.exists(), "the pid file is left behind");
}
