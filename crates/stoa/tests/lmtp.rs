//! LMTP in the binary: a store host without SMTP (`stoa serve --mail-dir D
//! --lmtp-listen ... --pop3-listen ...`), Python's `smtplib.LMTP` delivering to two
//! users and a non-user with a reply per recipient after the final dot, the
//! message read back over POP3 with `poplib`, and relaying refused.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{Server, ServerBuilder, add_user};

const RUN_TIMEOUT: Duration = Duration::from_secs(30);
const JOE: &str = "joe@example.test";
const ANN: &str = "ann@example.test";

/// Runs `program args` with `stdin`, bounded; returns (exit code, stdout, stderr).
fn run(program: &str, args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut command = Command::new(program);
    command.args(args).env_remove("RUST_LOG");
    let done = stoa_testkit::run(&mut command, stdin, RUN_TIMEOUT);
    (done.status.code().unwrap_or(-1), done.stdout, done.stderr)
}

fn python(script: &str) -> (i32, String, String) {
    run("python3", &["-c", script], b"")
}

/// A store host: LMTP and POP3 (plain-text logins allowed, for poplib without
/// certificates) over `mail`, and no SMTP.
fn store_host(tmp: &Path, mail: &Path) -> Server {
    let config: PathBuf = tmp.join("store.toml");
    std::fs::write(&config, "[pop3]\nallow_plaintext_auth = true\n").expect("write config");
    let server = ServerBuilder::mail(mail)
        .args(["--config".as_ref(), config.as_os_str()])
        .args([
            "--lmtp-listen",
            "127.0.0.1:0",
            "--pop3-listen",
            "127.0.0.1:0",
        ])
        .start();
    assert!(server.smtp_addrs.is_empty() && server.addrs.is_empty());
    assert_eq!((server.lmtp_addrs.len(), server.pop3_addrs.len()), (1, 1));
    server
}

#[test]
fn smtplib_lmtp_delivers_per_recipient_and_poplib_reads_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, "joe-pw");
    add_user(&mail, ANN, "ann-pw");
    let server = store_host(tmp.path(), &mail);
    let (lmtp, pop3) = (server.lmtp_addrs[0].port(), server.pop3_addrs[0].port());
    let script = format!(
        r#"
import poplib, smtplib
l = smtplib.LMTP("127.0.0.1", {lmtp}, timeout=10)
code, msg = l.ehlo("mta.test")
assert code == 250 and l.has_extn("pipelining") and l.has_extn("enhancedstatuscodes"), (code, msg)
print("helo", l.helo("mta.test")[0])
print("mail", l.mail("sender@far.test")[0])
for rcpt in ["{JOE}", "nobody@example.test", "{ANN}"]:
    code, msg = l.rcpt(rcpt)
    print("rcpt", rcpt, code, msg.decode())
# smtplib reads one reply after the dot; LMTP sends one per accepted recipient.
code, msg = l.data(b"Subject: over LMTP\r\n\r\nHello from the MTA\r\n.dot\r\n")
print("done", code, msg.decode())
code, msg = l.getreply()
print("done", code, msg.decode())
l.quit()
for user, password in [("{JOE}", "joe-pw"), ("{ANN}", "ann-pw")]:
    p = poplib.POP3("127.0.0.1", {pop3}, timeout=10)
    p.user(user)
    p.pass_(password)
    count, _ = p.stat()
    _, lines, _ = p.retr(1)
    text = b"\n".join(lines).decode()
    print("pop3", user, count, "with LMTP" in text, text.endswith("Hello from the MTA\n.dot"))
    p.quit()
"#
    );
    let (code, out, err) = python(&script);
    assert_eq!(code, 0, "smtplib/poplib failed: {out}{err}");
    for expected in [
        "helo 500\n",
        "mail 250\n",
        &format!("rcpt {JOE} 250 2.1.5 Ok\n"),
        "rcpt nobody@example.test 550 5.1.1 <nobody@example.test>: Recipient address rejected",
        &format!("rcpt {ANN} 250 2.1.5 Ok\n"),
        &format!("done 250 2.0.0 <{JOE}> Ok: delivered\n"),
        &format!("done 250 2.0.0 <{ANN}> Ok: delivered\n"),
        &format!("pop3 {JOE} 1 True True\n"),
        &format!("pop3 {ANN} 1 True True\n"),
    ] {
        assert!(out.contains(expected), "missing {expected:?} in:\n{out}");
    }
    // No queue on a store host: LMTP stores directly.
    assert!(!mail.join("queue").exists());
}

#[test]
fn lmtp_refuses_to_relay() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, "joe-pw");
    let server = store_host(tmp.path(), &mail);
    let lmtp = server.lmtp_addrs[0].port();
    let script = format!(
        r#"
import smtplib
l = smtplib.LMTP("127.0.0.1", {lmtp}, timeout=10)
l.ehlo("mta.test")
l.mail("sender@far.test")
for rcpt in ["victim@elsewhere.test", "joe@[127.0.0.1]", "victim%elsewhere.test@example.test"]:
    code, msg = l.rcpt(rcpt)
    print("rcpt", rcpt, code, msg.decode())
l.putcmd("data")
print("data", *l.getreply())
l.quit()
"#
    );
    let (code, out, err) = python(&script);
    assert_eq!(code, 0, "smtplib failed: {out}{err}");
    for rcpt in [
        "victim@elsewhere.test",
        "joe@[127.0.0.1]",
        "victim%elsewhere.test@example.test",
    ] {
        assert!(
            out.contains(&format!("rcpt {rcpt} 550 5.1.2 ")),
            "{rcpt} not refused:\n{out}"
        );
    }
    assert!(out.contains("data 554"), "{out}");
    assert!(!mail.join("queue").exists());
}
