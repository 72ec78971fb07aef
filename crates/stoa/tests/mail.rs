//! The mail server in the binary: `stoa user`, `stoa serve` with mail flags only,
//! real clients (Python's smtplib, and swaks when installed) delivering to users
//! created with `stoa user add`, configuration errors, SIGTERM.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rustix::process::Signal;
use stoa_testkit::wait_until;

use common::{ServerBuilder, add_user, run_stoa, tls_pair};

const RUN_TIMEOUT: Duration = Duration::from_secs(30);
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(15);

/// Runs `program args` with `stdin`, bounded; returns (exit code, stdout, stderr).
fn run(program: &str, args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    let mut command = Command::new(program);
    command.args(args).env_remove("RUST_LOG");
    let done = stoa_testkit::run(&mut command, stdin, RUN_TIMEOUT);
    (done.status.code().unwrap_or(-1), done.stdout, done.stderr)
}

fn stoa(args: &[&str], stdin: &[u8]) -> (i32, String, String) {
    run(env!("CARGO_BIN_EXE_stoa"), args, stdin)
}

fn mail_dir_arg(dir: &Path) -> String {
    dir.to_str().expect("UTF-8 path").to_owned()
}

/// The messages in mailbox `n` of the mail store (`MAIL_DIR/store`), oldest first.
fn delivered(dir: &Path, mailbox: u64) -> Vec<String> {
    let store_dir = dir.join("store");
    if !store_dir.is_dir() {
        return Vec::new();
    }
    let store = stoa_mailstore::MailStore::open(&store_dir, stoa_mailstore::Options::default())
        .expect("open the mail store");
    let Ok(session) = store.open_mailbox(stoa_directory::MailboxId(mailbox)) else {
        return Vec::new();
    };
    (0..session.messages().len())
        .map(|i| String::from_utf8_lossy(&session.read(i).expect("read")).into_owned())
        .collect()
}

fn wait_delivered(dir: &Path, mailbox: u64, n: usize) -> Vec<String> {
    let ok = wait_until(DELIVERY_TIMEOUT, || delivered(dir, mailbox).len() >= n);
    assert!(ok, "mailbox {mailbox} did not get {n} messages");
    delivered(dir, mailbox)
}

fn python(script: &str) -> (i32, String, String) {
    run("python3", &["-c", script], b"")
}

/// Issue 21: a mistyped `--mail-dir` given to a command that reads or removes
/// made a new, empty mail directory and answered as if it were empty. It is an
/// error now; `stoa user init` and the first `add` create one.
#[test]
fn a_mistyped_mail_dir_is_an_error_not_a_new_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let typo = tmp.path().join("mial");
    let d = mail_dir_arg(&typo);
    for args in [
        &["user", "list", "--mail-dir", &d][..],
        &["user", "del", "joe@example.test", "--mail-dir", &d],
        &["user", "domain", "list", "--mail-dir", &d],
        &[
            "user",
            "export-ldif",
            "--base",
            "dc=stoa,dc=test",
            "--mail-dir",
            &d,
        ],
    ] {
        let (code, out, err) = stoa(args, b"");
        assert_eq!(code, 1, "{args:?}: {out}{err}");
        assert!(
            err.contains("no user directory in") && err.contains("stoa user init"),
            "{err}"
        );
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
    }
    let (code, _, err) = stoa(&["user", "init", "--mail-dir", &d], b"");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("now has a user directory"), "{err}");
    let (code, out, err) = stoa(&["user", "list", "--mail-dir", &d], b"");
    assert_eq!((code, out.as_str()), (0, ""), "{err}");
    let (code, _, err) = stoa(&["user", "init", "--mail-dir", &d], b"");
    assert!(
        code == 0 && err.contains("already has a user directory"),
        "{err}"
    );
}

/// Issue 21: `stoa user del` said nothing of the user's mail. It says how much
/// stays in the store, and `--purge` deletes it with the user.
#[test]
fn user_del_says_what_happens_to_the_mail_and_purge_deletes_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    add_user(tmp.path(), "joe@example.test", "pw");
    add_user(tmp.path(), "ann@example.test", "pw");
    let mut server = ServerBuilder::mail(tmp.path())
        .args(["--smtp-listen", "127.0.0.1:0", "--domain", "example.test"])
        .start();
    let port = server.smtp_addrs[0].port();
    let script = format!(
        r#"
import smtplib
s = smtplib.SMTP("127.0.0.1", {port}, timeout=10)
for rcpt in ["joe@example.test", "ann@example.test"]:
    assert s.sendmail("a@ext.test", [rcpt], "Subject: x\r\n\r\nx\r\n") == {{}}
s.quit()
"#
    );
    let (code, out, err) = python(&script);
    assert_eq!(code, 0, "smtplib failed: {out}{err}");
    wait_delivered(tmp.path(), 1, 1);
    wait_delivered(tmp.path(), 2, 1);
    let status = server.stop_with(Signal::TERM);
    assert_eq!(status.code(), Some(0), "{}", server.stderr_text());

    let d = mail_dir_arg(tmp.path());
    let (code, _, err) = stoa(&["user", "del", "joe@example.test", "--mail-dir", &d], b"");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("its 1 message ("), "{err}");
    assert!(err.contains("stay in the store as mailbox 1"), "{err}");
    assert_eq!(delivered(tmp.path(), 1).len(), 1, "kept without --purge");
    let (code, _, err) = stoa(
        &[
            "user",
            "del",
            "ann@example.test",
            "--purge",
            "--mail-dir",
            &d,
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("purged 1 message ("), "{err}");
    assert!(delivered(tmp.path(), 2).is_empty(), "purged");
}

/// Issue 21: aliases could only be made through the library. `stoa user alias
/// add|del|list` manage them, and mail to an alias reaches its target.
#[test]
fn user_alias_commands_and_delivery_to_an_alias() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = mail_dir_arg(tmp.path());
    add_user(tmp.path(), "joe@example.test", "pw");
    let alias = |args: &[&str]| {
        let mut all = vec!["user", "alias"];
        all.extend_from_slice(args);
        all.extend(["--mail-dir", d.as_str()]);
        stoa(&all, b"")
    };
    let (code, _, err) = alias(&["add", "sales@example.test", "joe@example.test"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = alias(&["add", "x@elsewhere.test", "joe@example.test"]);
    assert_eq!(
        code, 1,
        "an alias outside the local domains is refused: {err}"
    );
    let (code, out, _) = alias(&["list"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "sales@example.test joe@example.test\n")
    );

    let mut server = ServerBuilder::mail(tmp.path())
        .args(["--smtp-listen", "127.0.0.1:0", "--domain", "example.test"])
        .start();
    let port = server.smtp_addrs[0].port();
    let script = format!(
        r#"
import smtplib
s = smtplib.SMTP("127.0.0.1", {port}, timeout=10)
assert s.sendmail("a@ext.test", ["sales@example.test"], "Subject: to sales\r\n\r\nx\r\n") == {{}}
s.quit()
"#
    );
    let (code, out, err) = python(&script);
    assert_eq!(code, 0, "smtplib failed: {out}{err}");
    let got = wait_delivered(tmp.path(), 1, 1);
    assert!(got[0].contains("Subject: to sales"), "{}", got[0]);
    let status = server.stop_with(Signal::TERM);
    assert_eq!(status.code(), Some(0), "{}", server.stderr_text());

    let (code, _, err) = alias(&["del", "sales@example.test"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = alias(&["list"]);
    assert_eq!((code, out.as_str()), (0, ""));
}

#[test]
fn user_commands() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = mail_dir_arg(tmp.path());
    add_user(tmp.path(), "Joe@Example.Test", "pw");
    let (code, _, err) = stoa(&["user", "add", "ann@example.test", "--mail-dir", &d], b"");
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("cannot log in"), "{err}");
    let (code, out, _) = stoa(&["user", "list", "--mail-dir", &d], b"");
    assert_eq!(
        (code, out.as_str()),
        (0, "ann@example.test\njoe@example.test\n")
    );
    let (code, out, _) = stoa(&["user", "domain", "list", "--mail-dir", &d], b"");
    assert_eq!((code, out.as_str()), (0, "example.test\n"));
    let (code, _, err) = stoa(&["user", "add", "joe@example.test", "--mail-dir", &d], b"");
    assert_eq!(code, 1, "a duplicate is refused: {err}");
    assert!(err.contains("already exists"), "{err}");
    let (code, _, err) = stoa(
        &[
            "user",
            "passwd",
            "joe@example.test",
            "--password-stdin",
            "--mail-dir",
            &d,
        ],
        b"\n",
    );
    assert_eq!(code, 1, "an empty password is refused: {err}");
    let (code, _, err) = stoa(
        &[
            "user",
            "passwd",
            "joe@example.test",
            "--password-stdin",
            "--mail-dir",
            &d,
        ],
        b"new\n",
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = stoa(
        &["user", "domain", "del", "example.test", "--mail-dir", &d],
        b"",
    );
    assert_eq!(code, 1, "a domain with users stays: {err}");
    let (code, _, err) = stoa(&["user", "del", "ann@example.test", "--mail-dir", &d], b"");
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = stoa(&["user", "del", "joe@example.test", "--mail-dir", &d], b"");
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = stoa(
        &["user", "domain", "del", "example.test", "--mail-dir", &d],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = stoa(
        &["user", "domain", "add", "other.test", "--mail-dir", &d],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let (_, out, _) = stoa(&["user", "list", "--mail-dir", &d], b"");
    assert_eq!(out, "");
}

#[test]
fn smtplib_delivers_to_a_user_added_with_stoa_user() {
    let tmp = tempfile::tempdir().expect("tempdir");
    add_user(tmp.path(), "joe@example.test", "secret");
    let mut server = ServerBuilder::mail(tmp.path())
        .args(["--smtp-listen", "127.0.0.1:0", "--domain", "example.test"])
        .start();
    assert!(server.addrs.is_empty(), "no web server without web flags");
    let port = server.smtp_addrs[0].port();
    let script = format!(
        r#"
import smtplib
s = smtplib.SMTP("127.0.0.1", {port}, timeout=10)
s.ehlo("client.test")
assert s.has_extn("pipelining") and s.has_extn("8bitmime") and s.has_extn("enhancedstatuscodes")
refused = s.sendmail("alice@ext.test", ["joe@example.test"], "Subject: via smtplib\r\n\r\nHello Joe\r\n.dot\r\n")
assert refused == {{}}, refused
for rcpt in ["nobody@example.test", "victim@ext.test"]:
    try:
        s.sendmail("alice@ext.test", [rcpt], "Subject: x\r\n\r\nx\r\n")
        raise SystemExit("accepted " + rcpt)
    except smtplib.SMTPRecipientsRefused as e:
        print(rcpt, e.recipients[rcpt][0])
s.quit()
"#
    );
    let (code, out, err) = python(&script);
    assert_eq!(code, 0, "smtplib failed: {out}{err}");
    assert!(out.contains("nobody@example.test 550"), "{out}");
    assert!(out.contains("victim@ext.test 554"), "{out}");
    let got = wait_delivered(tmp.path(), 1, 1);
    assert!(
        got[0].starts_with(
            "Return-Path: <alice@ext.test>\r\nReceived: from client.test ([127.0.0.1])"
        ),
        "{}",
        got[0]
    );
    assert!(
        got[0].ends_with("Subject: via smtplib\r\n\r\nHello Joe\r\n.dot\r\n"),
        "{}",
        got[0]
    );
    let status = server.stop_with(Signal::TERM);
    assert_eq!(status.code(), Some(0), "{}", server.stderr_text());
    // Every message left; the delivery thread's lock file (`.runner`) may stay.
    let queue: Vec<_> = std::fs::read_dir(tmp.path().join("queue"))
        .expect("queue")
        .map(|e| e.expect("entry").file_name())
        .filter(|name| !name.to_string_lossy().starts_with('.'))
        .collect();
    assert!(queue.is_empty(), "queue left: {queue:?}");

    // The user can leave with their mail: `stoa mailbox export` writes a
    // Maildir++ tree holding the same bytes (in cur/); `stat` counts them.
    let d = mail_dir_arg(tmp.path());
    let (code, out, err) = stoa(
        &["mailbox", "stat", "joe@example.test", "--mail-dir", &d],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out.trim(),
        format!("1 messages, {} bytes", got[0].len()),
        "stat"
    );
    let maildir = tmp.path().join("exported");
    let to = maildir.to_str().expect("UTF-8 path");
    let export = || {
        stoa(
            &[
                "mailbox",
                "export",
                "joe@example.test",
                "--mail-dir",
                &d,
                "--to",
                to,
            ],
            b"",
        )
    };
    let (code, _, err) = export();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("exported 1 message ("), "{err}");
    let files: Vec<_> = std::fs::read_dir(maildir.join("cur"))
        .expect("Maildir cur/")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert_eq!(
        std::fs::read(&files[0]).expect("read"),
        got[0].replace("\r\n", "\n").as_bytes(),
        "exported with LF line endings"
    );
    // Again: nothing new, nothing duplicated.
    let (code, _, err) = export();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("exported 0 messages (0 bytes)") && err.contains("; 1 already there"),
        "{err}"
    );
    for sub in ["tmp", "new"] {
        assert!(maildir.join(sub).is_dir(), "Maildir lacks {sub}/");
    }
    let (code, _, err) = stoa(
        &["mailbox", "stat", "nobody@example.test", "--mail-dir", &d],
        b"",
    );
    assert_ne!(code, 0);
    assert!(err.contains("no user nobody@example.test"), "{err}");
}

/// Issue 21: a message with a 5,000-character line got `554 5.3.4`. Postfix
/// takes it, and so does Stoa: the line is stored as received.
#[test]
fn smtplib_delivers_a_5000_character_line() {
    let tmp = tempfile::tempdir().expect("tempdir");
    add_user(tmp.path(), "joe@example.test", "secret");
    let mut server = ServerBuilder::mail(tmp.path())
        .args(["--smtp-listen", "127.0.0.1:0", "--domain", "example.test"])
        .start();
    let port = server.smtp_addrs[0].port();
    let script = format!(
        r#"
import smtplib
s = smtplib.SMTP("127.0.0.1", {port}, timeout=10)
long = "Subject: long line\r\n\r\n" + "x" * 5000 + "\r\n"
assert s.sendmail("alice@ext.test", ["joe@example.test"], long) == {{}}
s.quit()
"#
    );
    let (code, out, err) = python(&script);
    assert_eq!(code, 0, "smtplib failed: {out}{err}");
    let got = wait_delivered(tmp.path(), 1, 1);
    let long = format!("Subject: long line\r\n\r\n{}\r\n", "x".repeat(5_000));
    assert!(got[0].ends_with(&long), "{}", got[0]);
    let status = server.stop_with(Signal::TERM);
    assert_eq!(status.code(), Some(0), "{}", server.stderr_text());
}

#[test]
fn smtplib_submission_with_starttls_and_auth() {
    let tmp = tempfile::tempdir().expect("tempdir");
    add_user(tmp.path(), "joe@example.test", "joe-secret");
    add_user(tmp.path(), "ann@example.test", "ann-secret");
    let (cert, key) = tls_pair(tmp.path(), "localhost");
    let server = ServerBuilder::mail(tmp.path())
        .args([
            "--submission-listen",
            "127.0.0.1:0",
            "--smtp-listen",
            "127.0.0.1:0",
        ])
        .args([
            "--tls-cert".as_ref(),
            cert.as_os_str(),
            "--tls-key".as_ref(),
            key.as_os_str(),
        ])
        .start();
    let port = server.submission_addrs[0].port();
    let script = format!(
        r#"
import smtplib, ssl
s = smtplib.SMTP("127.0.0.1", {port}, timeout=10)
s.ehlo("client.test")
assert not s.has_extn("auth"), "AUTH before TLS"
code, _ = s.mail("joe@example.test")
assert code == 530, code
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
s.starttls(context=ctx)
s.ehlo("client.test")
assert "PLAIN" in s.esmtp_features["auth"], s.esmtp_features
try:
    s.login("joe@example.test", "wrong")
    raise SystemExit("wrong password accepted")
except smtplib.SMTPAuthenticationError as e:
    print("bad login", e.smtp_code)
s.login("joe@example.test", "joe-secret")
s.sendmail("joe@example.test", ["ann@example.test"], "Subject: submitted\r\n\r\nhi Ann\r\n")
s.sendmail("joe@example.test", ["ann@example.test"],
    "Date: Mon, 7 Dec 2026 10:00:00 +0000\r\nmessage-id: <own@client.test>\r\n"
    "Subject: dated\r\n\r\nDate: in the body\r\n")
s.quit()
"#
    );
    let (code, out, err) = python(&script);
    assert_eq!(code, 0, "smtplib failed: {out}{err}");
    assert!(out.contains("bad login 535"), "{out}");
    let got = wait_delivered(tmp.path(), 2, 2);
    let find = |subject: &str| {
        let found = got.iter().find(|m| m.contains(subject));
        found.unwrap_or_else(|| panic!("no {subject:?} in {got:?}"))
    };
    let submitted = find("Subject: submitted");
    assert!(submitted.contains("with ESMTPSA id"), "{submitted}");
    assert!(
        submitted.ends_with("Subject: submitted\r\n\r\nhi Ann\r\n"),
        "{submitted}"
    );
    // Issue 56 (RFC 6409 §8): the submission server adds the Date and the
    // Message-ID the client left out, and only those.
    let header = &submitted[..submitted.find("\r\n\r\n").expect("a header")];
    assert_eq!(header.matches("\r\nDate: ").count(), 1, "{header}");
    assert_eq!(header.matches("\r\nMessage-ID: <").count(), 1, "{header}");
    let id = header
        .split("\r\n")
        .find(|l| l.starts_with("Message-ID: <"));
    let id = id.expect("a Message-ID");
    assert!(id.ends_with('>') && id.contains('@'), "{id}");
    let dated = find("Subject: dated");
    let header = &dated[..dated.find("\r\n\r\n").expect("a header")];
    assert_eq!(
        header.to_ascii_lowercase().matches("\r\ndate: ").count(),
        1,
        "{header}"
    );
    assert_eq!(
        header.to_ascii_lowercase().matches("message-id: ").count(),
        1,
        "{header}"
    );
    drop(server);
}

#[test]
fn swaks_delivers_and_is_refused_as_relay() {
    if Command::new("swaks").arg("--version").output().is_err() {
        eprintln!("swaks is not installed (scripts/test.sh installs it); skipping");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    add_user(tmp.path(), "joe@example.test", "secret");
    let server = ServerBuilder::mail(tmp.path())
        .args(["--smtp-listen", "127.0.0.1:0"])
        .start();
    let target = server.smtp_addrs[0].to_string();
    let (code, out, err) = run(
        "swaks",
        &[
            "--server",
            &target,
            "--from",
            "a@ext.test",
            "--to",
            "joe@example.test",
            "--header",
            "Subject: swaks test",
        ],
        b"",
    );
    assert_eq!(code, 0, "swaks failed: {out}{err}");
    let got = wait_delivered(tmp.path(), 1, 1);
    assert!(got[0].contains("Subject: swaks test"), "{}", got[0]);
    // Exit 24: the recipient was refused (relay denied).
    let (code, out, _) = run(
        "swaks",
        &[
            "--server",
            &target,
            "--from",
            "a@ext.test",
            "--to",
            "victim@ext.test",
        ],
        b"",
    );
    assert_eq!(code, 24, "{out}");
    assert!(out.contains("554 5.7.1"), "{out}");
}

#[test]
fn web_and_mail_together_and_web_unchanged_without_mail() {
    let site = common::Site::new();
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = ServerBuilder::new(site.root())
        .args(["--listen", "127.0.0.1:0", "--mail-dir"])
        .args([tmp.path()])
        .args(["--smtp-listen", "127.0.0.1:0"])
        .start();
    assert_eq!((server.addrs.len(), server.smtp_addrs.len()), (1, 1));
    let response = common::fetch(&server.url("/hello.txt"), &[]);
    assert_eq!(response.code, 200);
    drop(server);
    let web_only = ServerBuilder::new(site.root()).start();
    assert!(web_only.smtp_addrs.is_empty());
    assert!(!web_only.stderr_text().contains("smtp://"));
}

#[test]
fn mail_configuration_errors_are_reported_together() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = mail_dir_arg(tmp.path());
    let (status, err) = run_stoa(
        &[
            "serve",
            "--mail-dir",
            &d,
            "--smtp-listen",
            "nonsense",
            "--trusted-net",
            "10.0.0.0/99",
            "--relay-host",
            "no-port",
            "--domain",
            "bad domain",
        ],
        RUN_TIMEOUT,
    );
    assert_eq!(status.code(), Some(2), "{err}");
    for needle in [
        "--smtp-listen nonsense",
        "--trusted-net 10.0.0.0/99",
        "relay host \"no-port\"",
        "domain \"bad domain\"",
    ] {
        assert!(err.contains(needle), "{needle:?} missing in:\n{err}");
    }
    let (status, err) = run_stoa(&["serve", "--mail-dir", &d], RUN_TIMEOUT);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("no SMTP listener"), "{err}");
    let (status, err) = run_stoa(&["serve", "--smtp-listen", "127.0.0.1:0"], RUN_TIMEOUT);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("no mail directory"), "{err}");
}

#[test]
fn mail_config_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    add_user(&tmp.path().join("mail"), "joe@example.test", "secret");
    let config = tmp.path().join("stoa.toml");
    std::fs::write(
        &config,
        "[smtp]\nmail_dir = \"mail\"\nhostname = \"mx.example.test\"\nlisten = [\"127.0.0.1:0\"]\n\
         max_message_size = \"1MiB\"\ncommand_timeout = \"1m\"\nmin_backoff = \"10s\"\n",
    )
    .expect("write config");
    let server = ServerBuilder::mail(&tmp.path().join("mail"))
        .args(["--config".as_ref(), config.as_os_str()])
        .start();
    let port = server.smtp_addrs[0].port();
    let script = format!(
        r#"
import smtplib
s = smtplib.SMTP("127.0.0.1", {port}, timeout=10)
code, msg = s.ehlo("c.test")
assert b"mx.example.test" in msg and s.esmtp_features["size"] == "1048576", s.esmtp_features
s.sendmail("a@ext.test", ["joe@example.test"], "Subject: file\r\n\r\nx\r\n")
s.quit()
"#
    );
    let (code, out, err) = python(&script);
    assert_eq!(code, 0, "smtplib failed: {out}{err}");
    let got = wait_delivered(&tmp.path().join("mail"), 1, 1);
    assert!(got[0].contains("by mx.example.test (Stoa)"), "{}", got[0]);
}
