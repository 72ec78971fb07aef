//! Crashes, write errors and a second process.
//!
//! Some tests re-run this test binary as a child process (an `#[ignore]`d test picked
//! with `--exact`), told what to do through the child's environment: to hold a
//! resource limit the parent cannot set without `unsafe`, or to be another process.
//! Run without that environment, the child tests do nothing.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use stoa_mailstore::{MailStore, MailboxId, Options, StoreError};

const A: MailboxId = MailboxId(1);
const B: MailboxId = MailboxId(2);

/// Where a child test finds the store, and what it is to do.
const CHILD_DIR: &str = "STOA_MAILSTORE_TEST_DIR";
const CHILD_EXPECT: &str = "STOA_MAILSTORE_TEST_EXPECT";

fn message(size: usize) -> Vec<u8> {
    let mut m = b"Subject: test\r\n\r\n".to_vec();
    while m.len() < size {
        m.extend_from_slice(b"0123456789 abcdefghijklmnopqrstuvwxyz\r\n");
    }
    m
}

fn tmp_files(store: &MailStore) -> usize {
    fs::read_dir(store.path().join("tmp")).expect("tmp").count()
}

/// Runs the `#[ignore]`d test `name` of this binary in a child, through `sh -c
/// SCRIPT` (the script ends by exec'ing the test), with `env`; returns whether it
/// passed.
fn run_child(name: &str, script: &str, env: &[(&str, &str)]) -> bool {
    let exe = std::env::current_exe().expect("test binary");
    let output = Command::new("sh")
        .arg("-c")
        .arg(format!(
            r#"{script} exec "$0" --ignored --exact {name} --nocapture"#
        ))
        .arg(exe)
        .envs(env.iter().copied())
        .output()
        .expect("spawn child test");
    if !output.status.success() {
        eprintln!(
            "child {name} failed: {}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output.status.success()
}

#[test]
fn recovery_removes_a_crashed_deliverys_temporary_file() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    let store = MailStore::open(&dir, Options::default()).expect("open");
    store.deliver(&message(500), &[A]).expect("deliver");
    // A crash between the write and the links: a (possibly partial) file in tmp/,
    // nothing in any mailbox.
    fs::write(
        dir.join("tmp/1700000000.M000001P1Q1.host"),
        &message(9000)[..4000],
    )
    .expect("write");
    // A crash after the links, before the temporary name was removed.
    let m = message(700);
    store.deliver(&m, &[B]).expect("deliver");
    let linked = fs::read_dir(store.mailbox_path(B))
        .expect("mailbox")
        .next()
        .expect("file")
        .expect("entry")
        .path();
    fs::hard_link(&linked, dir.join("tmp/1700000000.M000002P1Q2.host")).expect("link");
    drop(store);

    // Within the grace period (a delivery of another process in progress) they stay.
    let store = MailStore::open(&dir, Options::default()).expect("reopen");
    assert_eq!(store.recovery().stale_tmp_removed, 0);
    assert_eq!(tmp_files(&store), 2);
    drop(store);

    let store = MailStore::open(
        &dir,
        Options {
            tmp_grace: Duration::ZERO,
            ..Options::default()
        },
    )
    .expect("reopen");
    assert_eq!(store.recovery().stale_tmp_removed, 2);
    assert_eq!(tmp_files(&store), 0);
    assert_eq!(
        store.mailbox_stats(A).expect("stats").count,
        1,
        "no partial message"
    );
    let session = store.open_mailbox(B).expect("open");
    assert_eq!(
        session.read(0).expect("read"),
        m,
        "the delivered one intact"
    );
}

#[test]
fn a_failed_link_rolls_back_the_other_recipients() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = MailStore::open(tmp.path().join("store"), Options::default()).expect("open");
    // Mailbox B's directory cannot be made: a file has its name.
    let blocked = store.mailbox_path(B);
    fs::create_dir_all(blocked.parent().expect("fan-out dir")).expect("mkdir");
    fs::write(&blocked, b"").expect("write");

    let err = store
        .deliver(&message(3000), &[A, B])
        .expect_err("B is blocked");
    assert!(matches!(err, StoreError::Io { .. }), "{err}");
    assert_eq!(
        store.mailbox_stats(A).expect("stats").count,
        0,
        "rolled back"
    );
    assert_eq!(tmp_files(&store), 0, "temporary file removed");
    // A later delivery to A alone works.
    store.deliver(&message(100), &[A]).expect("deliver");
    assert_eq!(store.mailbox_stats(A).expect("stats").count, 1);
}

#[test]
fn a_write_error_leaves_nothing_visible() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    let dir = dir.to_str().expect("utf-8 path");
    // RLIMIT_FSIZE: writing past 8 blocks fails with EFBIG (SIGXFSZ ignored), as a
    // full disk fails with ENOSPC, part way through the message.
    let ok = run_child(
        "child_write_error",
        "trap '' XFSZ; ulimit -f 8 &&",
        &[(CHILD_DIR, dir)],
    );
    assert!(ok, "see the child's output above");
    let store = MailStore::open(dir, Options::default()).expect("open");
    assert_eq!(
        store.mailbox_stats(A).expect("stats").count,
        1,
        "the small one"
    );
}

#[test]
#[ignore = "run by a_write_error_leaves_nothing_visible in a child process"]
fn child_write_error() {
    let Ok(dir) = std::env::var(CHILD_DIR) else {
        return;
    };
    let store = MailStore::open(&dir, Options::default()).expect("open");
    let err = store
        .deliver(&message(256 * 1024), &[A, B])
        .expect_err("over the file size limit");
    let code = err.io_error().and_then(|e| e.raw_os_error());
    assert_eq!(code, Some(27), "EFBIG from the write: {err}");
    assert_eq!(tmp_files(&store), 0, "partial temporary file removed");
    assert_eq!(store.mailbox_stats(A).expect("stats").count, 0);
    assert_eq!(store.mailbox_stats(B).expect("stats").count, 0);
    // The store keeps working for what fits.
    store.deliver(&message(1000), &[A]).expect("small delivery");
}

#[test]
fn the_lock_holds_against_another_process() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    let store = MailStore::open(&dir, Options::default()).expect("open");
    let dir = dir.to_str().expect("utf-8 path");
    let session = store.open_mailbox(A).expect("open mailbox");
    let env = |expect| [(CHILD_DIR, dir), (CHILD_EXPECT, expect)];
    assert!(run_child("child_try_lock", "", &env("locked")));
    drop(session);
    assert!(run_child("child_try_lock", "", &env("free")));
    assert!(Path::new(dir).join("tmp").is_dir());
}

#[test]
#[ignore = "run by the_lock_holds_against_another_process in a child process"]
fn child_try_lock() {
    let (Ok(dir), Ok(expect)) = (std::env::var(CHILD_DIR), std::env::var(CHILD_EXPECT)) else {
        return;
    };
    let store = MailStore::open(&dir, Options::default()).expect("open");
    match (expect.as_str(), store.open_mailbox(A)) {
        ("locked", Err(StoreError::Locked(id))) => assert_eq!(id, A),
        ("free", Ok(_)) => {}
        (expect, other) => panic!("expected {expect}, got {other:?}"),
    }
}
