//! The IMAP server in the binary: Python's imaplib over every command Stoa
//! offers, mail delivered through Stoa's SMTP; the limits a client can hit, each
//! answered; and Dovecot's imaptest (its compliance scripts and its stress mode
//! with state checking) when scripts/test.sh has built it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{ServerBuilder, add_user};
use stoa_testkit::LineConn;

const RUN_TIMEOUT: Duration = Duration::from_secs(180);
const JOE: &str = "joe@example.test";

fn python(script: &str) -> (i32, String, String) {
    let mut command = Command::new("python3");
    command.args(["-c", script]).env_remove("RUST_LOG");
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    (done.status.code().unwrap_or(-1), done.stdout, done.stderr)
}

fn path_arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A configuration file for `[imap]` with `extra` lines.
fn config(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("stoa.toml");
    std::fs::write(&path, format!("[imap]\n{extra}\n")).expect("write the configuration");
    path
}

#[test]
fn imaplib_walks_every_command() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, "joe-secret");
    let server = ServerBuilder::mail(&mail)
        .args([
            "--smtp-listen",
            "127.0.0.1:0",
            "--imap-listen",
            "127.0.0.1:0",
        ])
        .start();
    let (smtp, imap) = (server.smtp_addrs[0].port(), server.imap_addrs[0].port());
    let script = format!(
        r#"
import imaplib, smtplib, time, re
imaplib.Commands["ID"] = ("NONAUTH", "AUTH", "SELECTED")
s = smtplib.SMTP("127.0.0.1", {smtp}, timeout=10)
s.sendmail("alice@ext.test", ["{JOE}"],
    "From: Alice <alice@ext.test>\r\nTo: {JOE}\r\nSubject: first\r\n"
    "Date: Mon, 7 Dec 2026 10:00:00 +0000\r\nMessage-ID: <1@ext.test>\r\n\r\nHello Joe\r\n")
s.sendmail("bob@ext.test", ["{JOE}"],
    "From: bob@ext.test\r\nTo: {JOE}\r\nSubject: second\r\nMIME-Version: 1.0\r\n"
    "Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\n"
    "part one needle\r\n--b\r\nContent-Type: application/octet-stream\r\n"
    "Content-Transfer-Encoding: base64\r\n\r\nAAEC\r\n--b--\r\n")
s.quit()

def ok(r):
    assert r[0] == "OK", r
    return r[1]

m = imaplib.IMAP4("127.0.0.1", {imap})
caps = m.capabilities
for c in ("IMAP4REV2", "IMAP4REV1", "IDLE", "UIDPLUS", "MOVE", "CONDSTORE", "QRESYNC",
          "LIST-EXTENDED", "LIST-STATUS", "SPECIAL-USE", "ESEARCH", "ENABLE", "ID",
          "NAMESPACE", "UNSELECT", "LITERAL+", "SASL-IR", "AUTH=PLAIN"):
    assert c in caps, (c, caps)
try:
    m.login("{JOE}", "wrong")
    raise SystemExit("a wrong password was accepted")
except imaplib.IMAP4.error as e:
    assert "AUTHENTICATIONFAILED" in str(e), e
m.login("{JOE}", "joe-secret")
assert m._simple_command("ID", '("name" "imaplib")')[0] == "OK"
print(ok(m._simple_command("NAMESPACE")))

# The queue delivers in the background.
deadline = time.time() + 15
while int(ok(m.select("INBOX"))[0]) < 2:
    assert time.time() < deadline, "mail not delivered"
    time.sleep(0.1)

# The special-use folders made at first login.
lines = [l.decode() for l in ok(m.list())]
for name, use in (("Sent", "\\Sent"), ("Trash", "\\Trash"), ("Drafts", "\\Drafts"),
                  ("Junk", "\\Junk"), ("Archive", "\\Archive")):
    assert any(l.endswith(" " + name) and use in l for l in lines), (name, lines)
ok(m.create("Work/2026"))
ok(m._simple_command("CREATE", "Receipts", "(USE (\\Archive))"))
lines = [l.decode() for l in ok(m.list('""', "Work/*"))]
assert lines == ['(\\HasNoChildren) "/" Work/2026'], lines
typ, data = m._simple_command("LIST", '""', '"%"', "RETURN", "(STATUS (MESSAGES UNSEEN) SUBSCRIBED)")
assert typ == "OK"
status = [l.decode() for l in m._untagged_response(typ, data, "STATUS")[1]]
assert any(l.startswith("INBOX (MESSAGES 2 UNSEEN 2)") for l in status), status

# FETCH: sizes, dates, envelope, structure, sections, partials; PEEK keeps \Seen off.
d = ok(m.fetch("1", "(UID FLAGS RFC822.SIZE INTERNALDATE ENVELOPE BODY.PEEK[HEADER.FIELDS (SUBJECT)])"))
head = d[0][0].decode()
assert "UID 1" in head and "FLAGS (\\Recent)" in head and 'ENVELOPE ("Mon, 7 Dec 2026' in head, head
assert d[0][1] == b"Subject: first\r\n\r\n", d
d = ok(m.fetch("2", "(BODYSTRUCTURE BODY.PEEK[1] BODY.PEEK[TEXT]<0.4>)"))
text = b"".join(x if isinstance(x, bytes) else b"".join(x) for x in d)
assert b'("text" "plain"' in text and b'"mixed"' in text and b"part one needle" in text, text
d = ok(m.fetch("1", "(BODY[TEXT])"))
assert d[0][1] == b"Hello Joe\r\n", d
assert "\\Seen" in ok(m.fetch("1", "(FLAGS)"))[0].decode()

# STORE, with and without .SILENT; CONDSTORE's UNCHANGEDSINCE and MODIFIED.
r = ok(m.store("2", "+FLAGS", "(\\Flagged $Work)"))
assert "$Work" in r[0].decode() and "\\Flagged" in r[0].decode(), r
ok(m.store("2", "-FLAGS.SILENT", "($Work)"))
assert "$Work" not in ok(m.fetch("2", "(FLAGS)"))[0].decode()
typ, data = m._simple_command("STORE", "2", "(UNCHANGEDSINCE 1)", "+FLAGS", "(\\Answered)")
assert typ == "OK" and b"MODIFIED 2" in data[-1], (typ, data)
modseq = int(re.search(rb"MODSEQ \((\d+)\)", ok(m.fetch("2", "(MODSEQ)"))[0]).group(1))
assert modseq > 1

# SEARCH: flags, headers, body, dates, sizes, sets, NOT/OR; UID SEARCH; ESEARCH.
assert ok(m.search(None, "SEEN")) == [b"1"]
assert ok(m.search(None, "FROM", "alice")) == [b"1"]
assert ok(m.search(None, "SUBJECT", "second")) == [b"2"]
assert ok(m.search(None, "BODY", "needle")) == [b"2"]
assert ok(m.search(None, "SENTON", "7-Dec-2026")) == [b"1"]
size1 = int(re.search(rb"RFC822.SIZE (\d+)", ok(m.fetch("1", "(RFC822.SIZE)"))[0]).group(1))
assert ok(m.search(None, "LARGER", str(size1))) == [b"2"]
assert ok(m.search(None, "SMALLER", str(size1 + 1))) == [b"1"]
assert ok(m.search(None, "OR", "FLAGGED", "SEEN")) == [b"1 2"]
assert ok(m.search(None, "NOT", "FLAGGED")) == [b"1"]
assert ok(m.search(None, "2:*")) == [b"2"]
assert ok(m.uid("SEARCH", "SINCE", "1-Jan-2020")) == [b"1 2"]
typ, data = m._simple_command("SEARCH", "RETURN", "(MIN MAX COUNT)", "ALL")
assert typ == "OK"
es = m._untagged_response(typ, data, "ESEARCH")[1][0]
assert b"MIN 1" in es and b"MAX 2" in es and b"COUNT 2" in es, es

# APPEND with flags and a date; COPY and MOVE with COPYUID; UID EXPUNGE; EXPUNGE.
r = ok(m.append("Work/2026", "(\\Seen $Done)", '"01-Feb-2025 10:11:12 +0000"',
                b"Subject: appended\r\n\r\nbody\r\n"))
assert b"APPENDUID" in r[0], r
typ, data = m.copy("1", "Work/2026")
assert typ == "OK" and b"COPYUID" in data[0], data
typ, data = m._simple_command("MOVE", "2", "Archive")
assert typ == "OK", (typ, data)
assert ok(m.select("INBOX"))[0] == b"1"
ok(m.store("1", "+FLAGS", "(\\Deleted)"))
ok(m._simple_command("UID", "EXPUNGE", "999"))
assert ok(m.select("INBOX"))[0] == b"1", "UID EXPUNGE of another UID removed nothing"
ok(m.expunge())
assert ok(m.select("INBOX"))[0] == b"0"
assert ok(m.status("Work/2026", "(MESSAGES UIDNEXT UNSEEN)"))[0].decode().endswith(
    "(MESSAGES 2 UIDNEXT 3 UNSEEN 0)")
assert ok(m.status("Archive", "(MESSAGES)"))[0].decode().endswith("(MESSAGES 1)")
ok(m.select("Work/2026", readonly=True))
d = ok(m.fetch("1:*", "(FLAGS INTERNALDATE)"))
assert "01-Feb-2025 10:11:12 +0000" in d[0].decode() and "$Done" in d[0].decode(), d
typ, data = m.store("1", "+FLAGS", "(\\Deleted)")
assert typ == "NO" and b"read-only" in data[0], (typ, data)
ok(m._simple_command("UNSELECT"))

# RENAME (with children), SUBSCRIBE/LSUB, DELETE, and the errors.
ok(m.rename("Work", "Jobs"))
names = [l.decode().split(" ")[-1] for l in ok(m.list())]
assert "Jobs/2026" in names and "Work/2026" not in names, names
ok(m.subscribe("Jobs/2026"))
assert any(b"Jobs/2026" in l for l in ok(m.lsub()))
typ, data = m.delete("Jobs")
assert typ == "NO" and b"children" in data[0], (typ, data)
ok(m.delete("Jobs/2026"))
typ, data = m.select("Nowhere")
assert typ == "NO" and b"NONEXISTENT" in data[0], data
typ, data = m.create("Sent")
assert typ == "NO" and b"ALREADYEXISTS" in data[0], data
typ, data = m.append("Nowhere", None, None, b"x\r\n\r\n")
assert typ == "NO" and b"TRYCREATE" in data[0], data
ok(m._simple_command("ENABLE", "QRESYNC"))
ok(m.select("Archive"))
ok(m.close())
print(m.logout())
"#
    );
    let (code, out, err) = python(&script);
    assert_eq!(
        code,
        0,
        "imaplib script failed:\n{out}\n{err}\nserver:\n{}",
        server.stderr_text()
    );
}

#[test]
fn every_limit_is_answered() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, "joe-secret");
    let config = config(
        tmp.path(),
        "max_line = 2048\nappend_limit = 4096\nmax_sessions_per_user = 1\n\
         auth_failure_delay = \"10ms\"\nauth_failure_max_delay = \"10ms\"",
    );
    let server = ServerBuilder::mail(&mail)
        .args(["--config", path_arg(&config)])
        .args(["--imap-listen", "127.0.0.1:0"])
        .start();
    let addr = server.imap_addrs[0];
    let mut c = LineConn::connect(addr);
    let line = |c: &mut LineConn| c.line().expect("a line, not the end");
    assert!(line(&mut c).starts_with("* OK [CAPABILITY"));
    // A line over the limit: BAD, and the session goes on.
    let long = c.cmd(&format!("a1 NOOP {}", "x".repeat(3000)));
    assert!(long.contains("BAD"), "{long}");
    c.expect("a2 LOGIN joe@example.test joe-secret", "a2 OK");
    // A literal over the APPEND limit: NO [TOOBIG] before the data is sent.
    c.expect("a3 APPEND INBOX {5000}", "a3 NO [TOOBIG]");
    c.expect("a4 NOOP", "a4 OK");
    // A second session of the same user: NO [LIMIT].
    let mut second = LineConn::connect(addr);
    line(&mut second);
    second.expect("b1 LOGIN joe@example.test joe-secret", "b1 NO [LIMIT]");
    // Three failed logins: each NO [AUTHENTICATIONFAILED], then BYE.
    for i in 2..5 {
        let answer = second.cmd(&format!("b{i} LOGIN joe@example.test wrong"));
        assert!(answer.contains("NO [AUTHENTICATIONFAILED]"), "{answer}");
    }
    assert!(
        line(&mut second).starts_with("* BYE"),
        "BYE after failed logins"
    );
    // Malformed commands, twenty with the long line: BAD each, then BYE.
    for _ in 0..19 {
        let answer = c.cmd("a5 FETCH");
        assert!(answer.contains("BAD"), "{answer}");
    }
    assert!(
        line(&mut c).starts_with("* BYE"),
        "BYE after twenty bad commands"
    );
}

/// Dovecot's imaptest, built by scripts/test.sh (`STOA_IMAPTEST` names it).
fn imaptest() -> Option<(PathBuf, PathBuf)> {
    let binary = std::env::var_os("STOA_IMAPTEST")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/imaptest/bin/imaptest"));
    let tests = binary.parent()?.parent()?.join("tests");
    if binary.is_file() && tests.is_dir() {
        Some((binary, tests))
    } else {
        eprintln!(
            "imaptest is not built (scripts/test.sh builds it and sets STOA_IMAPTEST); skipping"
        );
        None
    }
}

/// A server for imaptest: its one user may open as many sessions as it likes.
fn imaptest_server(tmp: &Path) -> (common::Server, String) {
    let mail = tmp.join("mail");
    add_user(&mail, JOE, "joe-secret");
    let config = config(
        tmp,
        "max_sessions_per_user = 0\nmax_connections_per_client = 0",
    );
    let server = ServerBuilder::mail(&mail)
        .args(["--config", path_arg(&config)])
        .args(["--imap-listen", "127.0.0.1:0"])
        .start();
    let port = server.imap_addrs[0].port().to_string();
    (server, port)
}

fn run_imaptest(binary: &Path, args: &[String], dir: &Path) -> (i32, String) {
    let mut command = Command::new(binary);
    command.args(args).current_dir(dir);
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    let out = format!("{}{}", done.stdout, done.stderr);
    (done.status.code().unwrap_or(-1), out)
}

#[test]
fn imaptest_compliance_scripts_all_pass() {
    let Some((binary, tests)) = imaptest() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (server, port) = imaptest_server(tmp.path());
    let args = [
        "host=127.0.0.1".to_owned(),
        format!("port={port}"),
        format!("user={JOE}"),
        "pass=joe-secret".to_owned(),
        format!("test={}", tests.display()),
    ];
    let (code, out) = run_imaptest(&binary, &args, tmp.path());
    let summary = out
        .lines()
        .find(|l| l.contains("test groups:"))
        .unwrap_or_default();
    assert!(
        code == 0 && summary.contains(" 0 failed"),
        "imaptest (exit {code}): {summary}\n{out}\nserver:\n{}",
        server.stderr_text()
    );
}

#[test]
fn imaptest_stress_with_state_checking_finds_no_error() {
    let Some((binary, _)) = imaptest() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let (server, port) = imaptest_server(tmp.path());
    let mbox = tmp.path().join("small.mbox");
    std::fs::write(&mbox, SMALL_MBOX).expect("write the mbox");
    let args = [
        "host=127.0.0.1".to_owned(),
        format!("port={port}"),
        format!("user={JOE}"),
        "pass=joe-secret".to_owned(),
        format!("mbox={}", mbox.display()),
        "clients=50".to_owned(),
        "secs=60".to_owned(),
    ];
    let (code, out) = run_imaptest(&binary, &args, tmp.path());
    let errors: Vec<&str> = out.lines().filter(|l| l.starts_with("Error")).collect();
    assert!(
        code == 0 && errors.is_empty(),
        "imaptest stress (exit {code}) reported {} errors:\n{}\nserver:\n{}",
        errors.len(),
        errors.join("\n"),
        server.stderr_text()
    );
    assert!(out.contains("Totals:"), "no totals:\n{out}");
}

/// Eight small messages for the stress run, as imaptest appends them.
const SMALL_MBOX: &str = "From a@test Mon Dec  7 10:00:00 2026\n\
From: a@test\nTo: b@test\nSubject: one\n\nbody one\n\n\
From a@test Mon Dec  7 10:00:01 2026\n\
From: a@test\nTo: b@test\nSubject: two\nMIME-Version: 1.0\n\
Content-Type: multipart/alternative; boundary=x\n\n--x\nContent-Type: text/plain\n\nplain\n\
--x\nContent-Type: text/html\n\n<p>html</p>\n--x--\n\n\
From a@test Mon Dec  7 10:00:02 2026\n\
From: \"C D\" <c@test>\nTo: b@test, e@test\nCc: f@test\nSubject: three\n\nbody three\n\n\
From a@test Mon Dec  7 10:00:03 2026\n\
From: a@test\nTo: b@test\nSubject: four\n\nfour\nlines\nof\nbody\n\n\
From a@test Mon Dec  7 10:00:04 2026\n\
From: a@test\nTo: b@test\nSubject: five\nContent-Type: text/plain; charset=utf-8\n\nfive\n\n\
From a@test Mon Dec  7 10:00:05 2026\n\
From: a@test\nTo: b@test\nSubject: six\n\nsix\n\n\
From a@test Mon Dec  7 10:00:06 2026\n\
From: a@test\nTo: b@test\nSubject: seven\n\nseven\n\n\
From a@test Mon Dec  7 10:00:07 2026\n\
From: a@test\nTo: b@test\nSubject: eight\n\neight\n";

/// A reload keeps the IMAP sessions it does not end: one in IDLE before `stoa
/// reload` is still told of a delivery at once afterwards (the session registry is
/// kept across reloads, as the store and the throttle are; before, the new
/// server took the store's wake-ups and the old sessions waited for their
/// 30-second check).
#[test]
fn an_idle_session_is_still_woken_after_a_reload() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, "joe-secret");
    let config = config(tmp.path(), "idle_check = \"1h\"");
    let pid_file = tmp.path().join("stoa.pid");
    let server = ServerBuilder::mail(&mail)
        .args([
            "--config",
            path_arg(&config),
            "--pid-file",
            path_arg(&pid_file),
        ])
        .args([
            "--smtp-listen",
            "127.0.0.1:0",
            "--imap-listen",
            "127.0.0.1:0",
        ])
        .start();
    let (smtp, imap) = (server.smtp_addrs[0], server.imap_addrs[0]);
    let mut c = LineConn::try_connect(imap, Duration::from_secs(10)).expect("connect");
    assert!(c.line().expect("greeting").starts_with("* OK"));
    c.expect("a LOGIN joe@example.test joe-secret", "a OK");
    c.send_line("b SELECT INBOX");
    while !c.line().expect("select").starts_with("b OK") {}
    c.expect("c IDLE", "+ ");
    let mut reload = Command::new(env!("CARGO_BIN_EXE_stoa"));
    reload.arg("reload").arg("--pid-file").arg(&pid_file);
    let done = stoa_testkit::run(&mut reload, b"", RUN_TIMEOUT);
    assert!(done.status.success(), "stoa reload: {}", done.stderr);
    let script = format!(
        "import smtplib\ns = smtplib.SMTP('127.0.0.1', {}, timeout=10)\n\
         s.sendmail('a@ext.test', ['{JOE}'], 'Subject: after\\r\\n\\r\\nhi\\r\\n')\ns.quit()\n",
        smtp.port()
    );
    let (code, out, err) = python(&script);
    assert_eq!(code, 0, "{out}{err}");
    // Within the connection's 10-second read timeout, far under the hour's check.
    let pushed = c.line().expect("an update");
    assert_eq!(pushed, "* 1 EXISTS", "server:\n{}", server.stderr_text());
    c.send_line("DONE");
    while !c.line().expect("done").starts_with("c OK") {}
}

/// Sessions in IDLE hold one descriptor each, their socket: the selected
/// folder's directory and log are closed while they wait and reopened at each
/// wake (issue 52: ten thousand sessions in IDLE within a process's open-file
/// limit). A delivery still wakes every one of them, and after DONE the folder is
/// open again for the next command.
#[test]
fn idle_sessions_hold_only_their_socket() {
    const SESSIONS: usize = 50;
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, "joe-secret");
    let config = config(
        tmp.path(),
        "idle_check = \"1h\"\nmax_sessions_per_user = 0\nmax_connections_per_client = 0",
    );
    let server = ServerBuilder::mail(&mail)
        .args(["--config", path_arg(&config)])
        .args([
            "--smtp-listen",
            "127.0.0.1:0",
            "--imap-listen",
            "127.0.0.1:0",
        ])
        .start();
    let (smtp, imap) = (server.smtp_addrs[0], server.imap_addrs[0]);
    let send = |subject: &str| {
        let script = format!(
            "import smtplib\ns = smtplib.SMTP('127.0.0.1', {}, timeout=10)\n\
             s.sendmail('a@ext.test', ['{JOE}'], 'Subject: {subject}\\r\\n\\r\\nhi\\r\\n')\n\
             s.quit()\n",
            smtp.port()
        );
        let (code, out, err) = python(&script);
        assert_eq!(code, 0, "{out}{err}");
    };
    send("first");
    let fd_dir = format!("/proc/{}/fd", server.pid());
    let fds = || {
        std::fs::read_dir(&fd_dir)
            .expect("the server's fds")
            .count()
    };
    let before = fds();

    let mut sessions = Vec::with_capacity(SESSIONS);
    for _ in 0..SESSIONS {
        let mut c = LineConn::try_connect(imap, Duration::from_secs(10)).expect("connect");
        assert!(c.line().expect("greeting").starts_with("* OK"));
        c.expect("a LOGIN joe@example.test joe-secret", "a OK");
        c.send_line("b SELECT INBOX");
        while !c.line().expect("select").starts_with("b OK") {}
        c.expect("c IDLE", "+ ");
        sessions.push(c);
    }
    // About one descriptor per session (some slack for the server's own), not
    // three. The folder is released just after the `+`: poll.
    let one_each = before + SESSIONS + SESSIONS / 2;
    let held = stoa_testkit::wait_until(Duration::from_secs(10), || fds() <= one_each);
    assert!(
        held,
        "{SESSIONS} sessions in IDLE: {} descriptors, {before} before",
        fds()
    );

    // A delivery wakes them all, each reopening its folder for the news.
    send("second");
    for c in &mut sessions {
        loop {
            let line = c.line().expect("an update");
            if line == "* 2 EXISTS" {
                break;
            }
            assert!(line.starts_with("* "), "{line}");
        }
    }
    let held = stoa_testkit::wait_until(Duration::from_secs(10), || fds() <= one_each);
    assert!(held, "after the wake: {} descriptors", fds());

    // DONE leaves the folder open: the message's file is read.
    for c in &mut sessions {
        c.send_line("DONE");
        while !c.line().expect("done").starts_with("c OK") {}
        c.send_line("d FETCH 2 (BODY.PEEK[HEADER.FIELDS (SUBJECT)])");
        let mut subject = false;
        loop {
            let line = c.line().expect("fetch");
            subject |= line == "Subject: second";
            if line.starts_with("d ") {
                assert!(line.starts_with("d OK"), "{line}");
                break;
            }
        }
        assert!(subject, "FETCH after DONE read the message");
    }
    assert!(
        fds() >= before + 2 * SESSIONS,
        "after DONE the folders are open again: {} descriptors",
        fds()
    );
    assert!(
        !server.stderr_text().contains("ERROR"),
        "{}",
        server.stderr_text()
    );
}

/// A folder deleted by another session while one waits in IDLE on it: the
/// reopen at the wake fails, which is logged; the session keeps what it knew
/// (FETCH of flags answers), a change is `NO [NONEXISTENT]`, and it can go on
/// to another folder.
#[test]
fn an_idle_session_on_a_deleted_folder_goes_on() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, "joe-secret");
    let config = config(tmp.path(), "idle_check = \"1h\"\nmax_sessions_per_user = 0");
    let server = ServerBuilder::mail(&mail)
        .args(["--config", path_arg(&config)])
        .args(["--imap-listen", "127.0.0.1:0"])
        .start();
    let imap = server.imap_addrs[0];
    let login = || {
        let mut c = LineConn::try_connect(imap, Duration::from_secs(10)).expect("connect");
        assert!(c.line().expect("greeting").starts_with("* OK"));
        c.expect("a LOGIN joe@example.test joe-secret", "a OK");
        c
    };
    let until = |c: &mut LineConn, tag: &str| -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let line = c.line().expect("an answer");
            let end = line.starts_with(&format!("{tag} "));
            lines.push(line);
            if end {
                return lines;
            }
        }
    };
    let mut other = login();
    other.expect("b CREATE Work", "b OK");
    other.send_line("c APPEND Work {20}");
    assert!(other.line().expect("continuation").starts_with("+"));
    // The message, then the CRLF that ends the APPEND command.
    other.send(b"Subject: w\r\n\r\nwork\r\n\r\n");
    assert!(
        until(&mut other, "c")
            .last()
            .expect("c")
            .starts_with("c OK")
    );

    let mut idle = login();
    idle.send_line("b SELECT Work");
    until(&mut idle, "b");
    idle.expect("c IDLE", "+ ");
    other.expect("d DELETE Work", "d OK");
    // A change in the mailbox wakes the idle session.
    other.send_line("e APPEND INBOX {20}");
    assert!(other.line().expect("continuation").starts_with("+"));
    // The message and the command's CRLF.
    other.send(b"Subject: i\r\n\r\ninbx\r\n\r\n");
    assert!(
        until(&mut other, "e")
            .last()
            .expect("e")
            .starts_with("e OK")
    );
    let logged = server.wait_for_stderr(Duration::from_secs(10), |lines| {
        lines
            .iter()
            .any(|l| l.contains("cannot refresh the folder"))
    });
    assert!(logged, "{}", server.stderr_text());

    idle.send_line("DONE");
    assert!(until(&mut idle, "c").last().expect("c").starts_with("c OK"));
    idle.send_line("d FETCH 1 (FLAGS)");
    let fetched = until(&mut idle, "d");
    assert!(fetched[0].starts_with("* 1 FETCH (FLAGS"), "{fetched:?}");
    assert!(
        fetched.last().expect("d").starts_with("d OK"),
        "{fetched:?}"
    );
    idle.send_line("e STORE 1 +FLAGS (\\Seen)");
    let stored = until(&mut idle, "e");
    assert!(
        stored.last().expect("e").starts_with("e NO [NONEXISTENT]"),
        "{stored:?}"
    );
    idle.send_line("f SELECT INBOX");
    let selected = until(&mut idle, "f");
    assert!(selected.contains(&"* 1 EXISTS".to_owned()), "{selected:?}");
    assert!(
        selected.last().expect("f").starts_with("f OK"),
        "{selected:?}"
    );
}
