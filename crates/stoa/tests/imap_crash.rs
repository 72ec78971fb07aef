//! kill -9 in the middle of IMAP storms: several clients APPEND, MOVE and EXPUNGE at
//! once, each writing to a ledger what the server acknowledged; the server is
//! killed, restarted, and every acknowledged change must be there exactly once
//! (no message lost, none in two folders, none expunged coming back).

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rustix::process::Signal;
use stoa_testkit::{Process, wait_until};

use common::{ServerBuilder, add_user};

const JOE: &str = "joe@example.test";
const STORM_TIMEOUT: Duration = Duration::from_secs(60);

/// The storm: an appender, a mover and an expunger, one connection each, until
/// the connection breaks. Each logs `A id`, `M id` or `X id` only after the OK;
/// a move or an expunge is also logged as begun (`m id`, `x id`) before it is
/// sent, as one the kill interrupts may or may not have happened.
const STORM: &str = r#"
import imaplib, sys, threading, re
port, ledger_path, prefix = int(sys.argv[1]), sys.argv[2], sys.argv[3]
ledger = open(ledger_path, "a", buffering=1)
lock = threading.Lock()
def log(kind, ids):
    with lock:
        for i in ids:
            ledger.write(f"{kind} {i}\n")
        ledger.flush()

def connect():
    m = imaplib.IMAP4("127.0.0.1", port, timeout=10)
    m.login("joe@example.test", "joe-secret")
    return m

def ids_of(m, uids):
    typ, data = m.uid("FETCH", ",".join(uids), "(BODY.PEEK[HEADER.FIELDS (X-ID)])")
    out = {}
    for item in data:
        if isinstance(item, tuple):
            uid = re.search(rb"UID (\d+)", item[0]).group(1).decode()
            out[uid] = item[1].decode().split(":")[1].strip()
    return out

def appender():
    m = connect()
    n = 0
    while True:
        n += 1
        msg = f"X-Id: {prefix}-{n}\r\nSubject: storm {n}\r\n\r\nbody {n}\r\n".encode()
        typ, _ = m.append("INBOX", None, None, msg)
        if typ == "OK":
            log("A", [f"{prefix}-{n}"])

def mover():
    m = connect()
    while True:
        m.select("INBOX")
        typ, data = m.uid("SEARCH", "ALL")
        # Keep a stock in each folder, so the kill finds messages everywhere.
        if len(data[0].split()) <= 20:
            continue
        uids = data[0].split()[:2]
        uids = [u.decode() for u in uids]
        ids = ids_of(m, uids)
        log("m", ids.values())
        typ, _ = m.uid("MOVE", ",".join(uids), "Archive")
        if typ == "OK":
            log("M", [ids[u] for u in uids if u in ids])

def expunger():
    m = connect()
    while True:
        m.select("Archive")
        typ, data = m.uid("SEARCH", "ALL")
        if len(data[0].split()) <= 20:
            continue
        uids = [u.decode() for u in data[0].split()[:1]]
        ids = ids_of(m, uids)
        log("x", ids.values())
        m.uid("STORE", ",".join(uids), "+FLAGS.SILENT", "(\\Deleted)")
        typ, _ = m.uid("EXPUNGE", ",".join(uids))
        if typ == "OK":
            log("X", [ids[u] for u in uids if u in ids])

def guard(f):
    try:
        f()
    except Exception:
        pass

threads = [threading.Thread(target=guard, args=(f,)) for f in (appender, mover, expunger)]
for t in threads:
    t.start()
for t in threads:
    t.join()
"#;

/// Every message of every folder, as (X-Id, folder) pairs, read after the restart.
const INVENTORY: &str = r#"
import imaplib, sys
m = imaplib.IMAP4("127.0.0.1", int(sys.argv[1]), timeout=10)
m.login("joe@example.test", "joe-secret")
for folder in ("INBOX", "Archive"):
    m.select(folder, readonly=True)
    typ, data = m.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (X-ID)])")
    for item in data:
        if isinstance(item, tuple):
            print(item[1].decode().split(":")[1].strip(), folder)
"#;

fn read_ledger(path: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn count(ledger: &[(String, String)], kind: &str) -> usize {
    ledger.iter().filter(|(k, _)| k == kind).count()
}

#[test]
fn kill_9_during_append_move_expunge_storms_loses_nothing_acknowledged() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    add_user(&mail, JOE, "joe-secret");
    let ledger_path = tmp.path().join("ledger");
    for round in 1..=2 {
        let mut server = ServerBuilder::mail(&mail)
            .args(["--imap-listen", "127.0.0.1:0"])
            .start();
        let port = server.imap_addrs[0].port().to_string();
        let before = read_ledger(&ledger_path);
        let mut storm = Process::spawn(
            Command::new("python3")
                .args(["-c", STORM, &port])
                .arg(&ledger_path)
                .arg(round.to_string()),
        );
        // Kill once each kind of change has been acknowledged a number of times
        // more, at a point that differs from run to run.
        let wanted = [("A", 60 + fastrand::usize(0..40)), ("M", 20), ("X", 5)];
        let reached = wait_until(STORM_TIMEOUT, || {
            let now = read_ledger(&ledger_path);
            wanted
                .iter()
                .all(|&(k, n)| count(&now, k) >= count(&before, k) + n)
        });
        server.signal(Signal::KILL);
        let _ = server.wait_exit(Duration::from_secs(10));
        let _ = storm.wait_exit(Duration::from_secs(20));
        storm.kill();
        assert!(
            reached,
            "round {round}: the storm did not get going; server:\n{}\nstorm:\n{}",
            server.stderr_text(),
            storm.stderr_text()
        );
        drop(server);

        let server = ServerBuilder::mail(&mail)
            .args(["--imap-listen", "127.0.0.1:0"])
            .start();
        let port = server.imap_addrs[0].port().to_string();
        let mut inventory = Command::new("python3");
        inventory.args(["-c", INVENTORY, &port]);
        let done = stoa_testkit::run(&mut inventory, b"", STORM_TIMEOUT);
        assert!(done.status.success(), "inventory failed: {}", done.stderr);
        let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in done.stdout.lines() {
            if let Some((id, folder)) = line.split_once(' ') {
                found
                    .entry(id.to_owned())
                    .or_default()
                    .push(folder.to_owned());
            }
        }
        let ledger = read_ledger(&ledger_path);
        let has = |kind: &str, id: &str| ledger.iter().any(|(k, v)| k == kind && v == id);
        for (id, folders) in &found {
            assert_eq!(
                folders.len(),
                1,
                "round {round}: message {id} is in {folders:?}"
            );
            assert!(
                !has("X", id),
                "round {round}: expunged message {id} came back"
            );
        }
        for (kind, id) in &ledger {
            let place = found.get(id);
            // An expunge begun but not acknowledged may have happened.
            let maybe_gone = has("x", id);
            match kind.as_str() {
                "A" if !maybe_gone => {
                    assert!(place.is_some(), "round {round}: appended message {id} lost");
                }
                "M" if !maybe_gone => {
                    assert_eq!(
                        place.map(|f| f[0].as_str()),
                        Some("Archive"),
                        "round {round}: moved message {id} not in Archive"
                    );
                }
                _ => {}
            }
        }
        eprintln!(
            "round {round}: {} appended, {} moved, {} expunged acknowledged; {} messages \
             found after kill -9",
            count(&ledger, "A"),
            count(&ledger, "M"),
            count(&ledger, "X"),
            found.len()
        );
    }
}
