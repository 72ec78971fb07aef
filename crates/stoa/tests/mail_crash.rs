//! The mail server's "no mail lost" tests (docs/robustness.md §5.2, issue 6), driving the
//! built binary:
//!
//! - `kill -9` under load: concurrent SMTP clients keep a ledger of every message
//!   that got `250`; the server is SIGKILLed after a random number of
//!   acknowledgements, restarted on the same mail directory, and once the queue has
//!   drained every acknowledged message is in the mailbox, byte for byte, and the
//!   queue holds nothing.
//! - The same at each named crash point (`FAILPOINTS=point=N*off->pause`: N messages
//!   pass, the next ones stop at the point; the test waits until the queue shows a
//!   message stopped there, then SIGKILLs). Only with the `failpoints` feature,
//!   which the test binary inherits: `cargo test -p stoa --features failpoints
//!   --test mail_crash` (scripts/test.sh runs it).
//! - Disk full on a 2 MiB tmpfs (`452 4.3.1` at MAIL, `451 4.3.0` when space runs
//!   out during DATA, nothing accepted lost). Needs `mount` (root); skipped with a
//!   message otherwise.
//! - Postfix's `smtp-source` as a load client (skipped with a message when it is not
//!   installed; scripts/test.sh installs `postfix` without configuring or starting
//!   it).
//!
//! Duplicates: RFC 5321 §6.1 prefers a duplicate to a loss. A message killed
//! between its append to the mailbox and its removal from the queue is delivered
//! again after the restart, so the plain `kill -9` rounds allow a few duplicates
//! (at most the number of deliveries in flight); at the commit crash points every
//! acknowledged message is delivered exactly once.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::process::Signal;
use stoa_testkit::{LineConn, Tmpfs, wait_until};

use common::{EXIT_TIMEOUT, Server, ServerBuilder, run_stoa};

const JOE: &str = "joe@example.test";
/// Joe is the first user added, so his mailbox is number 1.
const JOE_MAILBOX: u64 = 1;
/// Bound on every client read and write.
const IO_TIMEOUT: Duration = Duration::from_secs(20);
/// Bound on reaching the wanted number of acknowledgements or a crash point.
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// Bound on the queue draining after a restart.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(60);
/// Deliveries in flight at once (the server's default `max_deliveries`): the most
/// messages a kill can catch between the mailbox append and the queue removal.
const MAX_IN_FLIGHT_DELIVERIES: usize = 20;

// ---------------------------------------------------------------------------
// Mail directory, server, mailbox
// ---------------------------------------------------------------------------

fn path_arg(dir: &Path) -> &str {
    dir.to_str().expect("UTF-8 path")
}

/// A mail directory with the user joe@example.test (no password).
fn mail_dir_with_joe(dir: &Path) {
    let (status, err) = run_stoa(
        &["user", "add", JOE, "--mail-dir", path_arg(dir)],
        Duration::from_secs(30),
    );
    assert!(status.success(), "stoa user add: {err}");
}

/// `stoa serve --mail-dir DIR --smtp-listen 127.0.0.1:0` with `FAILPOINTS` when given.
fn serve(dir: &Path, failpoints: Option<&str>) -> Server {
    let mut builder = ServerBuilder::mail(dir).args(["--smtp-listen", "127.0.0.1:0"]);
    if let Some(f) = failpoints {
        builder = builder.env("FAILPOINTS", f);
    }
    builder.start()
}

/// SIGKILLs the server and waits (bounded) for it to be gone.
fn kill_9(server: &mut Server) {
    server.signal(Signal::KILL);
    let status = server
        .wait_exit(EXIT_TIMEOUT)
        .expect("a SIGKILLed server exits");
    assert!(!status.success(), "killed, not exited: {status:?}");
}

/// File names in `DIR/queue`, but its control files (`.runner`, `.flush`).
fn queue_files(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir.join("queue")) {
        Ok(entries) => entries
            .map(|e| {
                e.expect("queue entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|name| !name.starts_with('.'))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Waits (bounded) until the queue directory is empty.
fn wait_drained(dir: &Path, what: &str, server: &Server) {
    let drained = wait_until(DRAIN_TIMEOUT, || queue_files(dir).is_empty());
    assert!(
        drained,
        "{what}: queue not drained within {DRAIN_TIMEOUT:?}: {:?}\nstderr:\n{}",
        queue_files(dir),
        server.stderr_text()
    );
}

/// Every message in joe's mailbox, oldest first.
fn mailbox(dir: &Path) -> Vec<Vec<u8>> {
    let store_dir = dir.join("store");
    if !store_dir.is_dir() {
        return Vec::new();
    }
    let Ok(store) = stoa_mailstore::MailStore::open(&store_dir, stoa_mailstore::Options::default())
    else {
        return Vec::new();
    };
    let Ok(session) = store.open_mailbox(stoa_directory::MailboxId(JOE_MAILBOX)) else {
        return Vec::new();
    };
    (0..session.messages().len())
        .map(|i| session.read(i).expect("read a stored message"))
        .collect()
}

// ---------------------------------------------------------------------------
// Messages and the ledger
// ---------------------------------------------------------------------------

/// The message with ledger id `id`: a unique subject and Message-ID, a body whose
/// length varies with the id (every tenth message is over the 64 KiB spool buffer),
/// and a last line naming the id, so a torn copy cannot pass for a whole one.
fn message(id: u64) -> Vec<u8> {
    let mut m =
        format!("Subject: ledger {id}\r\nMessage-ID: <{id}@ledger.test>\r\n\r\n").into_bytes();
    let lines = if id.is_multiple_of(10) {
        1500
    } else {
        3 + id % 200
    };
    for i in 0..lines {
        m.extend_from_slice(
            format!("{id:010} line {i:05} abcdefghijklmnopqrstuvwxyz0123456789\r\n").as_bytes(),
        );
    }
    m.extend_from_slice(format!("END {id}\r\n").as_bytes());
    m
}

/// The ledger id of a delivered message, checking that it is the whole message
/// behind our `Return-Path:` and `Received:` fields (not torn, not altered).
fn ledger_id(delivered: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(delivered);
    let after_return_path = text
        .strip_prefix("Return-Path: <")
        .and_then(|t| t.split_once(">\r\n"))
        .map(|(_, rest)| rest);
    assert!(
        after_return_path.is_some_and(|rest| rest.starts_with("Received: ")),
        "no Return-Path: then Received: field first: {text:.200}"
    );
    let at = text
        .find("\r\nSubject: ledger ")
        .unwrap_or_else(|| panic!("not a ledger message: {text:.300}"));
    let rest = &text[at + "\r\nSubject: ledger ".len()..];
    let id: u64 = rest[..rest.find('\r').expect("subject line end")]
        .parse()
        .expect("numeric ledger id");
    assert!(
        delivered[at + 2..] == message(id)[..],
        "message {id} is torn or altered ({} bytes delivered after the Received field, {} sent)",
        delivered.len() - at - 2,
        message(id).len()
    );
    id
}

/// What the clients did.
#[derive(Debug, Default)]
struct Ledger {
    /// Messages whose data was (at least partly) sent: these may be delivered.
    sent: BTreeSet<u64>,
    /// Messages that got `250` at the end of data: these must be delivered.
    acked: BTreeSet<u64>,
    /// Any other reply at the end of data, or to MAIL/RCPT/DATA: none expected.
    refused: Vec<(u64, String)>,
}

type SharedLedger = Arc<Mutex<Ledger>>;

fn acked(ledger: &SharedLedger) -> usize {
    ledger.lock().expect("ledger lock").acked.len()
}

/// A minimal blocking SMTP client on the kit's line client.
struct Smtp {
    conn: LineConn,
}

impl Smtp {
    /// Connects, reads the greeting and says EHLO.
    fn connect(addr: SocketAddr) -> io::Result<Smtp> {
        let mut smtp = Smtp {
            conn: LineConn::try_connect(addr, IO_TIMEOUT)?,
        };
        let greeting = smtp.reply()?;
        if !greeting.starts_with("220") {
            return Err(io::Error::other(format!("greeting: {greeting}")));
        }
        let ehlo = smtp.command("EHLO ledger.test")?;
        if !ehlo.starts_with("250") {
            return Err(io::Error::other(format!("EHLO: {ehlo}")));
        }
        Ok(smtp)
    }

    /// One (possibly multi-line) reply; returns its last line.
    fn reply(&mut self) -> io::Result<String> {
        loop {
            let line = self
                .conn
                .try_raw_line()?
                .ok_or(io::ErrorKind::UnexpectedEof)?;
            if line.len() < 4 || line[3] != b'-' {
                return Ok(String::from_utf8_lossy(&line).trim_end().to_owned());
            }
        }
    }

    fn command(&mut self, line: &str) -> io::Result<String> {
        self.conn.try_send(format!("{line}\r\n").as_bytes())?;
        self.reply()
    }

    /// MAIL, RCPT, DATA; `Ok(None)` when all three were accepted (354), else the
    /// refusing reply.
    fn start(&mut self, from: &str, to: &str) -> io::Result<Option<String>> {
        for (line, want) in [
            (format!("MAIL FROM:<{from}>"), "250"),
            (format!("RCPT TO:<{to}>"), "250"),
            ("DATA".to_owned(), "354"),
        ] {
            let reply = self.command(&line)?;
            if !reply.starts_with(want) {
                return Ok(Some(reply));
            }
        }
        Ok(None)
    }

    /// Sends `body` (no line starts with a dot) and the end of data; the reply.
    fn finish(&mut self, body: &[u8]) -> io::Result<String> {
        self.conn.try_send(body)?;
        self.conn.try_send(b".\r\n")?;
        self.reply()
    }
}

/// Concurrent clients sending ledger messages to joe until told to stop, the server
/// goes away, or each has sent its quota.
struct Load {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(
        addr: SocketAddr,
        clients: u64,
        per_client: u64,
        base: u64,
        ledger: &SharedLedger,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..clients)
            .map(|c| {
                let (stop, ledger) = (Arc::clone(&stop), Arc::clone(ledger));
                std::thread::spawn(move || {
                    let ids = (0..per_client).map(|i| base + c * 10_000 + i);
                    client(addr, ids, &stop, &ledger);
                })
            })
            .collect();
        Load { stop, threads }
    }

    /// Stops the clients and waits for them (each I/O is bounded by [`IO_TIMEOUT`]).
    fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            t.join().expect("client thread");
        }
    }
}

fn client(
    addr: SocketAddr,
    ids: impl Iterator<Item = u64>,
    stop: &AtomicBool,
    ledger: &Mutex<Ledger>,
) {
    let Ok(mut smtp) = Smtp::connect(addr) else {
        return;
    };
    for id in ids {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match smtp.start("sender@ext.test", JOE) {
            Ok(None) => {}
            Ok(Some(reply)) => {
                ledger
                    .lock()
                    .expect("ledger lock")
                    .refused
                    .push((id, reply));
                return;
            }
            Err(_) => return,
        }
        ledger.lock().expect("ledger lock").sent.insert(id);
        match smtp.finish(&message(id)) {
            Ok(reply) if reply.starts_with("250") => {
                ledger.lock().expect("ledger lock").acked.insert(id);
            }
            Ok(reply) => {
                ledger
                    .lock()
                    .expect("ledger lock")
                    .refused
                    .push((id, reply));
                return;
            }
            // The server was killed: no reply, no acknowledgement.
            Err(_) => return,
        }
    }
}

/// How many copies of each ledger message the mailbox holds (checking every copy
/// is whole).
fn delivered_counts(dir: &Path) -> BTreeMap<u64, usize> {
    let mut counts = BTreeMap::new();
    for m in mailbox(dir) {
        *counts.entry(ledger_id(&m)).or_insert(0) += 1;
    }
    counts
}

/// The ledger rule after a drained restart: every acknowledged message delivered;
/// nothing delivered that was never sent; duplicates at most `max_duplicates`; an
/// empty queue. Returns the number of duplicated messages.
fn check_ledger(dir: &Path, ledger: &Ledger, max_duplicates: usize, what: &str) -> usize {
    assert!(
        ledger.refused.is_empty(),
        "{what}: refused: {:?}",
        ledger.refused
    );
    let counts = delivered_counts(dir);
    let lost: Vec<_> = ledger
        .acked
        .iter()
        .filter(|id| !counts.contains_key(id))
        .collect();
    assert!(lost.is_empty(), "{what}: acknowledged but lost: {lost:?}");
    let unknown: Vec<_> = counts
        .keys()
        .filter(|id| !ledger.sent.contains(id))
        .collect();
    assert!(
        unknown.is_empty(),
        "{what}: delivered but never sent: {unknown:?}"
    );
    let duplicated: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        duplicated.len() <= max_duplicates,
        "{what}: {} messages delivered more than once (at most {max_duplicates} allowed): \
         {duplicated:?}",
        duplicated.len()
    );
    assert!(
        queue_files(dir).is_empty(),
        "{what}: left in the queue: {:?}",
        queue_files(dir)
    );
    duplicated.len()
}

// ---------------------------------------------------------------------------
// kill -9 at a random moment
// ---------------------------------------------------------------------------

#[test]
fn kill_9_under_load_loses_no_acknowledged_mail() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    mail_dir_with_joe(dir);
    let ledger = SharedLedger::default();
    let mut duplicates = 0;
    for round in 1..=3u64 {
        let mut server = serve(dir, None);
        let before = acked(&ledger);
        let target = before + fastrand::usize(10..80);
        let load = Load::start(server.smtp_addrs[0], 16, 60, round * 1_000_000, &ledger);
        let reached = wait_until(LOAD_TIMEOUT, || acked(&ledger) >= target);
        kill_9(&mut server);
        load.finish();
        assert!(
            reached,
            "round {round}: {target} acknowledgements not reached; stderr:\n{}",
            server.stderr_text()
        );
        drop(server);
        let restarted = serve(dir, None);
        wait_drained(dir, &format!("round {round}"), &restarted);
        let ledger = ledger.lock().expect("ledger lock");
        duplicates += check_ledger(
            dir,
            &ledger,
            MAX_IN_FLIGHT_DELIVERIES * round as usize,
            &format!("round {round}"),
        );
        eprintln!(
            "round {round}: killed after {} acknowledged ({} sent so far), {duplicates} \
             duplicated so far",
            ledger.acked.len(),
            ledger.sent.len()
        );
    }
}

// ---------------------------------------------------------------------------
// kill -9 at each crash point (failpoints build)
// ---------------------------------------------------------------------------

/// The ids in the server's `queued ID` log lines (logged just before the `250`).
#[cfg(feature = "failpoints")]
fn logged_queue_ids(server: &Server) -> BTreeSet<String> {
    server
        .stderr_lines()
        .iter()
        .filter_map(|l| {
            let rest = &l[l.find(": queued ")? + ": queued ".len()..];
            Some(rest[..rest.find(':')?].to_owned())
        })
        .collect()
}

/// Whether a message has stopped at `point` and, for the commit points, every
/// acknowledged message has left the queue (so the kill catches no delivery and
/// the exactly-once rule applies).
#[cfg(feature = "failpoints")]
fn stopped_at(
    point: &str,
    dir: &Path,
    server: &Server,
    passed: usize,
    ledger: &SharedLedger,
) -> bool {
    if acked(ledger) < passed {
        return false;
    }
    let files = queue_files(dir);
    let with = |id: &str, ext: &str| files.iter().any(|f| *f == format!("{id}.{ext}"));
    let envs: Vec<&str> = files
        .iter()
        .filter_map(|f| f.strip_suffix(".env"))
        .collect();
    match point {
        "queue::after_write_before_fsync" => {
            envs.is_empty()
                && files
                    .iter()
                    .filter_map(|f| f.strip_suffix(".msg.tmp"))
                    .any(|id| {
                        let bytes = std::fs::read(dir.join("queue").join(format!("{id}.msg.tmp")))
                            .unwrap_or_default();
                        !with(id, "env.tmp")
                            && bytes.ends_with(b"\r\n")
                            && bytes.windows(6).any(|w| w == b"\r\nEND ")
                    })
        }
        "queue::after_fsync_before_rename" => {
            envs.is_empty()
                && files
                    .iter()
                    .filter_map(|f| f.strip_suffix(".env.tmp"))
                    .any(|id| with(id, "msg.tmp"))
        }
        "queue::after_rename_before_dir_fsync" | "smtp::before_250" => {
            let logged = logged_queue_ids(server);
            !envs.is_empty() && envs.iter().all(|id| !logged.contains(*id))
        }
        "deliver::before_queue_remove" => mailbox(dir).len() > passed,
        other => panic!("unknown crash point {other}"),
    }
}

#[cfg(feature = "failpoints")]
#[test]
fn kill_9_at_each_crash_point() {
    let points = [
        "queue::after_write_before_fsync",
        "queue::after_fsync_before_rename",
        "queue::after_rename_before_dir_fsync",
        "smtp::before_250",
        "deliver::before_queue_remove",
    ];
    for (i, point) in points.into_iter().enumerate() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path();
        mail_dir_with_joe(dir);
        let ledger = SharedLedger::default();
        let passed = fastrand::usize(5..30);
        let mut server = serve(dir, Some(&format!("{point}={passed}*off->pause")));
        let load = Load::start(
            server.smtp_addrs[0],
            8,
            60,
            (i as u64 + 1) * 1_000_000,
            &ledger,
        );
        let stopped = wait_until(LOAD_TIMEOUT, || {
            stopped_at(point, dir, &server, passed, &ledger)
        });
        kill_9(&mut server);
        load.finish();
        assert!(
            stopped,
            "{point}: never stopped there after {passed} messages (is the stoa binary built \
             with --features failpoints?); queue {:?}; stderr:\n{}",
            queue_files(dir),
            server.stderr_text()
        );
        drop(server);
        let restarted = serve(dir, None);
        wait_drained(dir, point, &restarted);
        let ledger = ledger.lock().expect("ledger lock");
        let max_duplicates = if point == "deliver::before_queue_remove" {
            MAX_IN_FLIGHT_DELIVERIES
        } else {
            0
        };
        let duplicates = check_ledger(dir, &ledger, max_duplicates, point);
        let counts = delivered_counts(dir);
        let unacked_delivered = counts
            .keys()
            .filter(|id| !ledger.acked.contains(id))
            .count();
        if point.starts_with("queue::after_write") || point.starts_with("queue::after_fsync") {
            // No envelope yet: the restart throws the message away.
            assert_eq!(
                unacked_delivered, 0,
                "{point}: an unfinished message was delivered"
            );
        }
        if point == "deliver::before_queue_remove" {
            assert!(
                duplicates >= 1,
                "{point}: the stopped delivery was not repeated"
            );
        }
        eprintln!(
            "{point}: {} acknowledged, {} sent, {unacked_delivered} unacknowledged delivered, \
             {duplicates} duplicated",
            ledger.acked.len(),
            ledger.sent.len()
        );
    }
}

// ---------------------------------------------------------------------------
// Disk full on a small tmpfs
// ---------------------------------------------------------------------------

/// Grows (or shrinks) the filler file so that about `free` bytes stay free.
fn leave_free(fs: &Tmpfs, filler: &Path, free: u64) {
    let current = std::fs::metadata(filler).map_or(0, |m| m.len());
    let target = (current + fs.free()).saturating_sub(free);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(filler)
        .expect("open the filler");
    if target < current {
        file.set_len(target).expect("shrink the filler");
        return;
    }
    // Written, not sparse: tmpfs counts only pages that exist.
    let chunk = vec![b'f'; 64 * 1024];
    let mut left = target - current;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        match file.write_all(&chunk[..n]) {
            Ok(()) => left -= n as u64,
            Err(e) if e.kind() == io::ErrorKind::StorageFull => break,
            Err(e) => panic!("write the filler: {e}"),
        }
    }
}

/// Sends one message on a new connection; the reply to MAIL/RCPT/DATA if refused,
/// else the reply to the end of data.
fn send_one(addr: SocketAddr, id: u64) -> String {
    let mut smtp = Smtp::connect(addr).expect("connect");
    match smtp.start("sender@ext.test", JOE).expect("MAIL/RCPT/DATA") {
        Some(refused) => refused,
        None => smtp.finish(&message(id)).expect("end of data"),
    }
}

#[test]
fn disk_full_refuses_mail_and_loses_nothing_accepted() {
    const MAX_SIZE: u64 = 256 * 1024;
    let tmp = tempfile::tempdir().expect("tempdir");
    let mount_point = tmp.path().join("fs");
    std::fs::create_dir(&mount_point).expect("mkdir");
    let fs = match Tmpfs::mount(&mount_point, "2m") {
        Ok(fs) => fs,
        Err(e) => {
            eprintln!("SKIPPED disk_full test: cannot mount a tmpfs here ({e}); it needs root");
            return;
        }
    };
    let dir = mount_point.join("mail");
    let filler = mount_point.join("filler");
    mail_dir_with_joe(&dir);
    let config = tmp.path().join("stoa.toml");
    std::fs::write(
        &config,
        format!(
            "[smtp]\nlisten = [\"127.0.0.1:0\"]\nmax_message_size = \"{}KiB\"\n",
            MAX_SIZE / 1024
        ),
    )
    .expect("write the configuration");
    let server = ServerBuilder::mail(&dir)
        .args(["--config".as_ref(), config.as_os_str()])
        .start();
    let addr = server.smtp_addrs[0];

    // Accepted before the disk fills: delivered.
    let mut accepted = BTreeSet::new();
    for id in 1..=3 {
        let reply = send_one(addr, id);
        assert!(reply.starts_with("250"), "{reply}");
        accepted.insert(id);
    }
    assert!(wait_until(DRAIN_TIMEOUT, || queue_files(&dir).is_empty()));

    // Less than 1.5 x the limit free: refused at MAIL.
    leave_free(&fs, &filler, MAX_SIZE);
    let reply = send_one(addr, 4);
    assert!(
        reply.starts_with("452 4.3.1"),
        "MAIL with {} free: {reply}",
        fs.free()
    );

    // Room at MAIL, none left during DATA: 451 4.3.0, no trace in the queue.
    leave_free(&fs, &filler, 2 * MAX_SIZE);
    let mut smtp = Smtp::connect(addr).expect("connect");
    assert_eq!(
        smtp.start("sender@ext.test", JOE).expect("MAIL/RCPT/DATA"),
        None
    );
    leave_free(&fs, &filler, 0);
    let id = 10; // over 64 KiB, so the spool writes during DATA
    let reply = smtp.finish(&message(id)).expect("end of data");
    assert!(
        reply.starts_with("451 4.3.0"),
        "out of space during DATA: {reply}"
    );
    drop(smtp);
    let junk: Vec<_> = queue_files(&dir);
    assert!(junk.is_empty(), "left in the queue after 451: {junk:?}");

    // Space returns: the server accepts again without a restart.
    std::fs::remove_file(&filler).expect("remove the filler");
    let reply = send_one(addr, 5);
    assert!(reply.starts_with("250"), "after space returned: {reply}");
    accepted.insert(5);
    wait_drained(&dir, "disk full", &server);
    let counts = delivered_counts(&dir);
    let got: BTreeSet<u64> = counts.keys().copied().collect();
    assert_eq!(got, accepted, "delivered vs accepted");
    assert!(counts.values().all(|n| *n == 1), "{counts:?}");
    drop(server);
    drop(fs);
}

// ---------------------------------------------------------------------------
// Postfix's smtp-source
// ---------------------------------------------------------------------------

#[test]
fn smtp_source_load_is_all_delivered() {
    if Command::new("smtp-source")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_err()
    {
        eprintln!(
            "SKIPPED smtp-source test: smtp-source is not installed \
             (Debian package postfix; scripts/test.sh installs it)"
        );
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path();
    mail_dir_with_joe(dir);
    let server = serve(dir, None);
    let target = server.smtp_addrs[0].to_string();
    let mut command = Command::new("smtp-source");
    command
        .args([
            "-c",
            "-l",
            "4096",
            "-m",
            "200",
            "-s",
            "10",
            "-f",
            "load@ext.test",
        ])
        .args(["-t", JOE, &target]);
    let done = stoa_testkit::run(&mut command, b"", LOAD_TIMEOUT);
    let (status, err) = (done.status, done.stderr);
    assert!(status.success(), "smtp-source failed: {err}");
    let delivered = wait_until(DRAIN_TIMEOUT, || mailbox(dir).len() >= 200);
    let got = mailbox(dir);
    assert!(delivered, "{} of 200 delivered", got.len());
    assert_eq!(got.len(), 200);
    for m in &got {
        assert!(m.len() > 4096, "a short message: {} bytes", m.len());
    }
    wait_drained(dir, "smtp-source", &server);
}
