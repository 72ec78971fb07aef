//! Issue 21, hole 2: SMTP AUTH guessing was not slowed (450 wrong passwords in
//! 10 s from one address on the submission port), and POP3's per-address throttle
//! was its own. In `stoa serve` both now count failures in one table per client
//! address: failed POP3 logins delay, then refuse, SMTP AUTH from the same
//! address, and the other way round. The throttle's keys are given in `[pop3]`
//! only, and apply to SMTP too.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{ServerBuilder, add_user, tls_pair};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const JOE: &str = "joe@example.test";
const PASSWORD: &str = "joe-secret";

fn path_arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The clients: one POP3 login or one SMTP AUTH PLAIN per connection, from a
/// chosen loopback address, timed with a monotonic clock (a lower bound on the
/// server's delay, never a sleep).
const CLIENTS: &str = r#"
import base64, smtplib, socket, ssl, sys, time
POP3, SUBMISSION, CERT, JOE, PASSWORD = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
ctx = ssl.create_default_context(cafile=CERT)
ctx.check_hostname = False   # the certificate names localhost; we dial 127.0.0.1
ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)

def pop3(src, password):
    s = socket.create_connection(("127.0.0.1", POP3), timeout=10, source_address=(src, 0))
    f = s.makefile("rb")
    assert f.readline().startswith(b"+OK")
    s.sendall(f"USER {JOE}\r\n".encode())
    assert f.readline().startswith(b"+OK")
    start = time.monotonic()
    s.sendall(f"PASS {password}\r\n".encode())
    line = f.readline().decode().strip()
    took = time.monotonic() - start
    s.close()
    return line, took

def smtp(src, password):
    s = smtplib.SMTP("127.0.0.1", SUBMISSION, timeout=10, source_address=(src, 0))
    s.starttls(context=ctx)
    s.ehlo("client.test")
    plain = base64.b64encode(f"\0{JOE}\0{password}".encode()).decode()
    start = time.monotonic()
    code, text = s.docmd("AUTH", "PLAIN " + plain)
    took = time.monotonic() - start
    s.close()
    return f"{code} {text.decode()}", took

def expect(what, got, prefix, at_least):
    line, took = got
    assert line.startswith(prefix), f"{what}: {line!r}, expected {prefix!r}"
    assert took >= at_least, f"{what}: answered after {took:.3f} s, before {at_least} s"
    print(f"{what}: {line} after {took:.3f} s")

# 127.0.0.1: SMTP AUTH works; three failed POP3 logins (100, 200, 300 ms);
# then SMTP AUTH with the right password is refused, after the longest delay.
expect("smtp before", smtp("127.0.0.1", PASSWORD), "235", 0)
for n, delay in enumerate([0.1, 0.2, 0.3]):
    expect(f"pop3 failure {n + 1}", pop3("127.0.0.1", "wrong"), "-ERR [AUTH]", delay)
expect("smtp after pop3 failures", smtp("127.0.0.1", PASSWORD), "535 5.7.8", 0.3)

# 127.0.0.2: the other way round.
for n, delay in enumerate([0.1, 0.2, 0.3]):
    expect(f"smtp failure {n + 1}", smtp("127.0.0.2", "wrong"), "535 5.7.8", delay)
expect("pop3 after smtp failures", pop3("127.0.0.2", PASSWORD), "-ERR [AUTH]", 0.3)

# Another address is not affected.
expect("pop3 elsewhere", pop3("127.0.0.3", PASSWORD), "+OK", 0)
print("done")
"#;

#[test]
fn pop3_and_smtp_auth_share_one_failure_count_per_address() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, PASSWORD);
    let (cert, key) = tls_pair(tmp.path(), "localhost");
    let config = tmp.path().join("stoa.toml");
    std::fs::write(
        &config,
        "[pop3]\nallow_plaintext_auth = true\nauth_failure_delay = \"100ms\"\n\
         auth_failure_max_delay = \"300ms\"\nauth_max_failures = 3\n",
    )
    .expect("write the configuration");
    let server = ServerBuilder::mail(&mail)
        .args(["--config", path_arg(&config)])
        .args(["--submission-listen", "127.0.0.1:0"])
        .args(["--pop3-listen", "127.0.0.1:0"])
        .args(["--tls-cert", path_arg(&cert), "--tls-key", path_arg(&key)])
        .start();
    let (pop3, submission) = (
        server.pop3_addrs[0].port().to_string(),
        server.submission_addrs[0].port().to_string(),
    );
    let mut command = Command::new("python3");
    command
        .args(["-c", CLIENTS, &pop3, &submission, path_arg(&cert)])
        .args([JOE, PASSWORD]);
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    assert!(
        done.status.success() && done.stdout.ends_with("done\n"),
        "stdout:\n{}\nstderr:\n{}\nserver:\n{}",
        done.stdout,
        done.stderr,
        server.stderr_text()
    );
}

/// Issue 56, defect 5: the refusal was checked when a login arrived, not counted
/// while its password was checked, so thirty logins sent at once were all checked
/// (and the right password among them accepted). Now logins in flight count: of a
/// wave of thirty wrong passwords, at most `auth_max_failures` are checked, over
/// POP3 and over IMAP alike; the rest are refused unchecked.
#[test]
fn a_wave_of_simultaneous_logins_is_checked_no_more_than_the_limit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, PASSWORD);
    let config = tmp.path().join("stoa.toml");
    std::fs::write(
        &config,
        "[pop3]\nauth_max_failures = 5\nauth_failure_delay = \"1ms\"\n\
         auth_failure_max_delay = \"1ms\"\nmax_connections_per_client = 0\n\
         [imap]\nmax_connections_per_client = 0\n",
    )
    .expect("write the configuration");
    let server = ServerBuilder::mail(&mail)
        .args(["--config", path_arg(&config)])
        .args([
            "--pop3-listen",
            "127.0.0.1:0",
            "--imap-listen",
            "127.0.0.1:0",
        ])
        .start();
    let (pop3, imap) = (server.pop3_addrs[0].port(), server.imap_addrs[0].port());
    let script = format!(
        r#"
import socket, sys, threading
def pop3(src):
    s = socket.create_connection(("127.0.0.1", {pop3}), timeout=30, source_address=(src, 0))
    f = s.makefile("rb"); f.readline()
    s.sendall(b"USER {JOE}\r\n"); f.readline()
    return s, f, b"PASS wrong\r\n"
def imap(src):
    s = socket.create_connection(("127.0.0.1", {imap}), timeout=30, source_address=(src, 0))
    f = s.makefile("rb"); f.readline()
    return s, f, b"a LOGIN {JOE} wrong\r\n"
for name, open_one, src in (("pop3", pop3, "127.0.0.21"), ("imap", imap, "127.0.0.22")):
    conns = [open_one(src) for _ in range(30)]
    answers = []
    def ask(c):
        s, f, line = c
        s.sendall(line)
        answers.append(f.readline())
    threads = [threading.Thread(target=ask, args=(c,)) for c in conns]
    for t in threads: t.start()
    for t in threads: t.join()
    assert len(answers) == 30 and not any(b"OK" in a[:4] for a in answers), answers
    print(name, "answered", len(answers))
"#
    );
    let mut command = Command::new("python3");
    command.args(["-c", &script]);
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    assert!(
        done.status.success(),
        "clients failed:\n{}{}",
        done.stdout,
        done.stderr
    );
    let log = server.stderr_text();
    for (src, name) in [("127.0.0.21", "POP3"), ("127.0.0.22", "IMAP")] {
        let checked = log
            .lines()
            .filter(|l| l.contains(src) && l.contains("failed") && !l.contains("unchecked"))
            .count();
        let refused = log
            .lines()
            .filter(|l| l.contains(src) && l.contains("refused unchecked"))
            .count();
        assert!(
            checked <= 5 && checked + refused == 30,
            "{name}: {checked} passwords checked, {refused} refused unchecked of 30:\n{log}"
        );
    }
}
