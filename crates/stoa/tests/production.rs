//! Running in production (issue 21): `--user` (the switch to an unprivileged user
//! after binding, a port below 1024 included), the warning when root runs
//! without it, the umask and the modes of what the server creates, `READY=1` and
//! `STOPPING=1` on `NOTIFY_SOCKET`, plain log lines under journald, and
//! `contrib/stoa.service` checked by `systemd-analyze verify`.
//!
//! The tests that switch users need root (CI runs as root) and say so when they
//! skip; they use Debian's `nobody`/`nogroup` (65534).

mod common;

use std::fs;
use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use rustix::process::Signal;
use stoa_testkit::{LineConn, wait_until};

use common::{EXIT_TIMEOUT, HELLO, ServerBuilder, Site, add_user, raw_request, run_stoa};

/// Debian's `nobody` and `nogroup`.
const NOBODY: u32 = 65534;
const JOE: &str = "joe@example.test";
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const MAIL_TIMEOUT: Duration = Duration::from_secs(15);

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn path_arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The permission bits of `path`.
fn mode(path: &Path) -> u32 {
    fs::metadata(path).expect("stat").mode() & 0o7777
}

/// `chown -R uid:gid path`.
fn chown_tree(path: &Path, id: u32) {
    std::os::unix::fs::lchown(path, Some(id), Some(id)).expect("chown");
    if path.is_dir() {
        for entry in fs::read_dir(path).expect("read dir") {
            chown_tree(&entry.expect("entry").path(), id);
        }
    }
}

/// Every file beneath `dir`.
fn files_under(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files_under(&path, into);
        } else {
            into.push(path);
        }
    }
}

/// A port below 1024 that nothing listens on now (a bind probe from 600 up).
fn free_low_port() -> u16 {
    (600..1024)
        .find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok())
        .expect("a free port below 1024")
}

/// Sends one message to `JOE` over SMTP (HELO: one-line replies).
fn send_mail(addr: SocketAddr, body: &str) {
    let mut smtp = LineConn::connect(addr);
    let greeting = smtp.line().expect("greeting");
    assert!(greeting.starts_with("220"), "{greeting}");
    smtp.expect("HELO client.test", "250");
    smtp.expect("MAIL FROM:<alice@ext.test>", "250");
    smtp.expect(&format!("RCPT TO:<{JOE}>"), "250");
    smtp.expect("DATA", "354");
    smtp.send(format!("Subject: hi\r\n\r\n{body}\r\n").as_bytes());
    smtp.expect(".", "250");
    smtp.expect("QUIT", "221");
}

/// Logs in as `JOE` over POP3 and returns the reply to STAT.
fn pop3_stat(addr: SocketAddr) -> String {
    let mut pop = LineConn::connect(addr);
    assert!(pop.line().expect("greeting").starts_with("+OK"));
    pop.expect(&format!("USER {JOE}"), "+OK");
    pop.expect("PASS joe-secret", "+OK");
    let stat = pop.expect("STAT", "+OK");
    pop.expect("QUIT", "+OK");
    stat
}

/// Retrieves message 1 of `JOE` over POP3: its lines up to the final dot.
fn pop3_retr(addr: SocketAddr) -> Vec<String> {
    let mut pop = LineConn::connect(addr);
    assert!(pop.line().expect("greeting").starts_with("+OK"));
    pop.expect(&format!("USER {JOE}"), "+OK");
    pop.expect("PASS joe-secret", "+OK");
    pop.expect("RETR 1", "+OK");
    let mut lines = Vec::new();
    while let Some(line) = pop.line() {
        if line == "." {
            break;
        }
        lines.push(line);
    }
    pop.expect("QUIT", "+OK");
    lines
}

/// The `Uid:`, `Gid:` and `Groups:` lines of `/proc/PID/task/*/status`, every
/// thread's.
fn thread_ids(pid: u32) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for task in fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        let status = fs::read_to_string(task.expect("task").path().join("status"));
        let Ok(status) = status else { continue };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .unwrap_or_default()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        };
        out.push((field("Uid:"), field("Gid:"), field("Groups:")));
    }
    out
}

/// `stoa serve --user nobody`, started as root: listeners on port 0 and on a
/// port below 1024, the mail directory owned by nobody. Every thread runs as
/// nobody (real, effective, saved and file-system ids), with nogroup as its only
/// group; HTTP is served on both ports, mail goes in over SMTP and out over POP3;
/// what the server created at start (the access log, the web99 state directory)
/// belongs to nobody; the message file is nobody's and 0600 (the default umask
/// 077).
#[test]
fn serve_as_nobody_after_binding_a_low_port() {
    if !is_root() {
        eprintln!("skipped: switching users needs root (CI runs as root)");
        return;
    }
    let site = Site::new();
    // The temporary directory is root's 0700: nobody must be able to reach the
    // document root through it.
    fs::set_permissions(site.dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let mail = site.outside("mail");
    add_user(&mail, JOE, "joe-secret");
    chown_tree(&mail, NOBODY);
    // The log's directory is nobody's: the log is created there again after a
    // rotation (see `log_rotation_after_the_switch_of_user`).
    let logs = site.outside("logs");
    fs::create_dir(&logs).expect("mkdir logs");
    chown_tree(&logs, NOBODY);
    let log = logs.join("access.log");
    let state = site.outside("state/web99");
    let low = free_low_port();
    let low_addr = format!("127.0.0.1:{low}");
    let mut server = ServerBuilder::new(site.root())
        .args(["--user", "nobody"])
        .args(["--listen", "127.0.0.1:0", "--listen", &low_addr])
        .args(["--access-log", path_arg(&log)])
        .args(["--web99-state", path_arg(&state)])
        .args(["--mail-dir", path_arg(&mail)])
        .args([
            "--smtp-listen",
            "127.0.0.1:0",
            "--pop3-listen",
            "127.0.0.1:0",
        ])
        .start();
    let want = format!("{NOBODY} {NOBODY} {NOBODY} {NOBODY}");
    let threads = thread_ids(server.pid());
    assert!(threads.len() > 1, "worker threads: {threads:?}");
    for (uid, gid, groups) in &threads {
        assert_eq!((uid, gid), (&want, &want), "{threads:?}");
        assert_eq!(groups, &NOBODY.to_string(), "{threads:?}");
    }
    assert_eq!(server.addrs[1].port(), low);
    for addr in &server.addrs {
        let r = raw_request(
            *addr,
            b"GET /hello.txt HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
        );
        assert_eq!((r.status, r.body.as_slice()), (200, HELLO), "{addr}");
    }
    send_mail(server.smtp_addrs[0], "Hello from root's child");
    let pop3 = server.pop3_addrs[0];
    assert!(
        wait_until(MAIL_TIMEOUT, || pop3_stat(pop3).starts_with("+OK 1 ")),
        "the message reached the mailbox; stderr:\n{}",
        server.stderr_text()
    );
    let lines = pop3_retr(pop3);
    assert!(
        lines.iter().any(|l| l == "Hello from root's child"),
        "{lines:?}"
    );
    let mut stored = Vec::new();
    files_under(&mail.join("store/mailboxes"), &mut stored);
    assert_eq!(stored.len(), 1, "{stored:?}");
    let meta = fs::metadata(&stored[0]).expect("stat");
    assert_eq!((meta.uid(), meta.gid()), (NOBODY, NOBODY));
    assert_eq!(meta.mode() & 0o7777, 0o600);
    for created in [
        &log,
        &state,
        &state.join("post.log"),
        &site.outside("state"),
    ] {
        let meta = fs::metadata(created).expect("created at start");
        assert_eq!(
            meta.uid(),
            NOBODY,
            "{} belongs to nobody",
            created.display()
        );
    }
    assert_eq!(mode(&log), 0o600, "umask 077 by default");
    assert_eq!(mode(&state), 0o700);
    let stderr = server.stderr_text();
    assert!(
        stderr.contains("running as user nobody and group nogroup"),
        "{stderr}"
    );
    assert!(!stderr.contains("running as root"), "{stderr}");
    assert!(
        server.stop_with(Signal::TERM).success(),
        "{}",
        server.stderr_text()
    );
}

/// Log rotation under `user =` (issue 56, item 13). A log in a directory the
/// user cannot create files in could never be reopened after logrotate moved
/// it, so the start is refused, naming the directory and the fix. In the
/// user's own directory, a rotation then SIGHUP gets the next line into a new
/// file; and a reopen that fails all the same (the directory taken back by
/// root meanwhile) is an error-log line and counts in
/// `stoa_log_reopen_failures_total`, the lines going on to the rotated file.
#[test]
fn log_rotation_after_the_switch_of_user() {
    if !is_root() {
        eprintln!("skipped: switching users needs root (CI runs as root)");
        return;
    }
    let site = Site::new();
    fs::set_permissions(site.dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let beside = site.outside("access.log");
    let (status, stderr) = run_stoa(
        &[
            "serve",
            "--user",
            "nobody",
            "--docroot",
            path_arg(site.root()),
            "--listen",
            "127.0.0.1:0",
            "--access-log",
            path_arg(&beside),
        ],
        Duration::from_secs(20),
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    let want = format!(
        "user nobody cannot create the access log (reopened on SIGHUP) {} again in {} \
         (owner 0:0, mode 0755), as it must once log rotation has moved it away: give the \
         directory to the user, e.g. chown nobody:nogroup {}",
        beside.display(),
        site.dir.path().display(),
        site.dir.path().display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert!(!stderr.contains("listening on http"), "{stderr}");

    let logs = site.outside("logs");
    fs::create_dir(&logs).expect("mkdir logs");
    chown_tree(&logs, NOBODY);
    let log = logs.join("access.log");
    let config = site.outside("stoa.toml");
    fs::write(&config, "[metrics]\nlisten = \"127.0.0.1:0\"\n").expect("write the configuration");
    let server = ServerBuilder::new(site.root())
        .args(["--user", "nobody", "--config", path_arg(&config)])
        .args(["--access-log", path_arg(&log)])
        .start();
    let get = |tag: &str| {
        let request =
            format!("GET /hello.txt?{tag} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        assert_eq!(raw_request(server.addr, request.as_bytes()).status, 200);
    };
    let logged = |path: &Path, tag: &str| {
        fs::read_to_string(path).is_ok_and(|t| t.contains(&format!("/hello.txt?{tag} ")))
    };
    get("one");
    assert!(
        wait_until(RUN_TIMEOUT, || logged(&log, "one")),
        "the first line"
    );
    let rotated = logs.join("access.log.1");
    fs::rename(&log, &rotated).expect("rotate");
    server.signal(Signal::HUP);
    let reloaded = |n: usize| {
        move |lines: &[String]| {
            (lines.iter())
                .filter(|l| l.contains("reload: the new configuration is in service"))
                .count()
                >= n
        }
    };
    assert!(
        server.wait_for_stderr(RUN_TIMEOUT, reloaded(1)),
        "{}",
        server.stderr_text()
    );
    get("two");
    assert!(
        wait_until(RUN_TIMEOUT, || logged(&log, "two")),
        "the line after the rotation is in the new file; stderr:\n{}",
        server.stderr_text()
    );
    assert!(!logged(&rotated, "two"));
    assert_eq!(reopen_failures(&server), 0);

    // The directory taken back by root: the reopen fails, loudly.
    chown_tree(&logs, 0);
    let rotated = logs.join("access.log.2");
    fs::rename(&log, &rotated).expect("rotate");
    server.signal(Signal::HUP);
    assert!(
        server.wait_for_stderr(RUN_TIMEOUT, |lines| lines
            .iter()
            .any(|l| l.contains("ERROR cannot reopen the access log")
                && l.contains("Permission denied"))),
        "{}",
        server.stderr_text()
    );
    assert_eq!(reopen_failures(&server), 1);
    get("three");
    assert!(wait_until(RUN_TIMEOUT, || logged(&rotated, "three")));
    assert!(!log.exists());
}

/// `stoa_log_reopen_failures_total` of the server's metrics listener.
fn reopen_failures(server: &common::Server) -> u64 {
    let addr = (server.stderr_lines().iter())
        .find_map(|l| {
            let (scheme, addr) = stoa_testkit::listening_on(l.strip_prefix("stoa: ")?)?;
            (scheme == "metrics").then_some(addr)
        })
        .expect("the metrics listener");
    let r = raw_request(
        addr,
        b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    );
    let text = String::from_utf8_lossy(&r.body).into_owned();
    (text.lines())
        .find_map(|l| l.strip_prefix("stoa_log_reopen_failures_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no stoa_log_reopen_failures_total in\n{text}"))
}

/// A mail directory the user cannot write (root's, from a `stoa user add` run as
/// root) stops the start with the path and the fix, before anything is served.
#[test]
fn a_path_the_user_cannot_write_is_named() {
    if !is_root() {
        eprintln!("skipped: switching users needs root (CI runs as root)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, "joe-secret");
    let (status, stderr) = run_stoa(
        &[
            "serve",
            "--user",
            "nobody",
            "--mail-dir",
            path_arg(&mail),
            "--smtp-listen",
            "127.0.0.1:0",
        ],
        RUN_TIMEOUT,
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    let want = format!(
        "user nobody cannot read the mail directory {} (owner 0:0, mode 0700): give it to \
         the user, e.g. chown -R nobody:nogroup {}",
        mail.display(),
        mail.display()
    );
    assert!(stderr.contains(&want), "{stderr}");
    assert!(!stderr.contains("listening on"), "{stderr}");
    let (status, stderr) = run_stoa(
        &["serve", "--user", "no-such-user-here", "--docroot", "/"],
        RUN_TIMEOUT,
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("user no-such-user-here: no such user"),
        "{stderr}"
    );
}

/// `NOTIFY_SOCKET`: `READY=1` once the listeners serve, `RELOADING=1` (with
/// `MONOTONIC_USEC`) then `READY=1` around a SIGHUP's reload, `STOPPING=1` at
/// SIGTERM (systemd's `Type=notify`). Root without `--user` is warned.
#[test]
fn systemd_hears_ready_reloading_and_stopping() {
    let site = Site::new();
    let socket_path = site.outside("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).expect("bind the notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut server = ServerBuilder::new(site.root())
        .env("NOTIFY_SOCKET", &socket_path)
        .start();
    let mut buf = [0u8; 256];
    let n = socket.recv(&mut buf).expect("READY=1 within 10 s");
    assert_eq!(&buf[..n], b"READY=1\n");
    let r = raw_request(server.addr, b"GET /hello.txt HTTP/1.0\r\n\r\n");
    assert_eq!(r.status, 200, "serving once ready");
    server.signal(Signal::HUP);
    let n = socket.recv(&mut buf).expect("RELOADING=1 within 10 s");
    let reloading = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(
        reloading.starts_with("RELOADING=1\nMONOTONIC_USEC="),
        "{reloading:?}"
    );
    let n = socket
        .recv(&mut buf)
        .expect("READY=1 after the reload within 10 s");
    assert_eq!(&buf[..n], b"READY=1\n");
    server.signal(Signal::TERM);
    let n = socket.recv(&mut buf).expect("STOPPING=1 within 10 s");
    assert_eq!(&buf[..n], b"STOPPING=1\n");
    assert!(server.wait_exit(EXIT_TIMEOUT).is_some_and(|s| s.success()));
    let warned = server.stderr_text().contains("running as root");
    assert_eq!(warned, is_root(), "{}", server.stderr_text());
}

/// The configuration's `umask` (0o027) reaches what the server creates: the
/// access log 0640, mail 0640 in 0750 directories (0660/0770 less the umask),
/// while the queue and the password file stay 0600/0700 whatever it is.
#[test]
fn the_umask_and_the_modes_of_what_the_server_creates() {
    let site = Site::new();
    let mail = site.outside("mail");
    let log = site.outside("access.log");
    let config = site.outside("stoa.toml");
    fs::write(&config, "umask = 0o027\n").expect("write config");
    add_user(&mail, JOE, "joe-secret");
    let mut server = ServerBuilder::new(site.root())
        .args(["--config", path_arg(&config)])
        .args(["--listen", "127.0.0.1:0", "--access-log", path_arg(&log)])
        .args([
            "--mail-dir",
            path_arg(&mail),
            "--smtp-listen",
            "127.0.0.1:0",
        ])
        .start();
    send_mail(server.smtp_addrs[0], "private");
    let mut stored = Vec::new();
    assert!(wait_until(MAIL_TIMEOUT, || {
        stored.clear();
        files_under(&mail.join("store/mailboxes"), &mut stored);
        !stored.is_empty()
    }));
    assert_eq!(mode(&stored[0]), 0o640, "{}", stored[0].display());
    let mailbox = stored[0].parent().expect("mailbox");
    assert_eq!(mode(mailbox), 0o750);
    assert_eq!(mode(&mail.join("store")), 0o750);
    assert_eq!(mode(&mail.join("queue")), 0o700);
    assert_eq!(mode(&mail.join("directory")), 0o700);
    assert_eq!(mode(&mail.join("directory/entries.txt")), 0o600);
    assert_eq!(mode(&log), 0o640);
    assert!(server.stop_with(Signal::TERM).success());
}

/// Kills the child when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `stoa serve` with standard error in a file, until it is ready, then
/// SIGTERM; returns the error log. With `journal`, `JOURNAL_STREAM` names that
/// file (device:inode), as systemd does for its journal stream.
fn error_log(site: &Site, name: &str, journal: bool) -> String {
    let path = site.outside(name);
    let file = fs::File::create(&path).expect("create the log");
    let meta = file.metadata().expect("stat");
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command
        .args(["serve", "--docroot", path_arg(site.root())])
        .args(["--listen", "127.0.0.1:0", "--workers", "1"])
        .env_remove("RUST_LOG")
        .env_remove("JOURNAL_STREAM")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file);
    if journal {
        command.env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()));
    }
    let mut child = Child(command.spawn().expect("spawn stoa"));
    let read = || fs::read_to_string(&path).unwrap_or_default();
    assert!(
        wait_until(Duration::from_secs(10), || read().contains("listening on")),
        "{}",
        read()
    );
    let pid =
        rustix::process::Pid::from_raw(i32::try_from(child.0.id()).expect("pid")).expect("pid");
    rustix::process::kill_process(pid, Signal::TERM).expect("SIGTERM");
    assert!(wait_until(EXIT_TIMEOUT, || {
        child.0.try_wait().ok().flatten().is_some()
    }));
    read()
}

/// Under journald the log lines carry no timestamp of their own (the journal
/// adds one); elsewhere, and when `JOURNAL_STREAM` names another file (a child
/// whose standard error was redirected), they do.
#[test]
fn no_timestamps_of_our_own_under_journald() {
    let site = Site::new();
    let shutting = |log: &str| {
        log.lines()
            .find(|l| l.contains("shutting down"))
            .unwrap_or_else(|| panic!("no shutdown line in:\n{log}"))
            .to_owned()
    };
    let journal = shutting(&error_log(&site, "journal.log", true));
    assert!(journal.trim_start().starts_with("INFO "), "{journal:?}");
    let plain = shutting(&error_log(&site, "plain.log", false));
    assert!(
        plain.as_bytes().first().is_some_and(u8::is_ascii_digit),
        "a timestamp first: {plain:?}"
    );
}

/// `contrib/stoa.service` passes `systemd-analyze verify` without a complaint
/// (its ExecStart pointed at the built binary, which the check wants to exist).
#[test]
fn the_systemd_unit_verifies() {
    let Ok(found) = Command::new("systemd-analyze").arg("--version").output() else {
        eprintln!("skipped: systemd-analyze is not installed");
        return;
    };
    assert!(found.status.success());
    let unit = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/stoa.service");
    let text = fs::read_to_string(&unit).expect("contrib/stoa.service");
    assert!(text.contains("ExecStart=/usr/local/bin/stoa serve"));
    for key in [
        "Type=notify",
        "ExecReload=/usr/local/bin/stoa reload --pid-file /run/stoa/stoa.pid",
        "RuntimeDirectory=stoa",
        "User=stoa",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ReadWritePaths=",
        "PrivateTmp=yes",
        "AmbientCapabilities=CAP_NET_BIND_SERVICE",
    ] {
        assert!(text.lines().any(|l| l.starts_with(key)), "{key}");
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let copy = tmp.path().join("stoa.service");
    fs::write(
        &copy,
        text.replace("/usr/local/bin/stoa", env!("CARGO_BIN_EXE_stoa")),
    )
    .expect("write the unit");
    let mut command = Command::new("systemd-analyze");
    command.arg("verify").arg(&copy);
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    assert!(done.status.success(), "{}", done.stderr);
    let complaints: Vec<&str> = done
        .stderr
        .lines()
        .filter(|l| l.contains("stoa.service"))
        .collect();
    assert!(complaints.is_empty(), "{}", done.stderr);
}
