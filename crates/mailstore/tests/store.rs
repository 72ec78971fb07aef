//! The store's contract as the SMTP and POP3 servers use it.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use stoa_mailstore::{MailStore, MailboxId, MailboxStats, Options, StoreError};

/// A CRLF message of about `size` bytes, with lines starting with a dot (which POP3
/// byte-stuffs: the store must keep them as they are).
fn message(n: usize, size: usize) -> Vec<u8> {
    let mut m =
        format!("From: <a@example.com>\r\nSubject: {n}\r\n\r\n.leading dot\r\n").into_bytes();
    while m.len() < size {
        m.extend_from_slice(format!("line {n} of the body\r\n").as_bytes());
    }
    m
}

fn open(dir: &Path) -> MailStore {
    MailStore::open(dir, Options::default()).expect("open store")
}

const A: MailboxId = MailboxId(1);
const B: MailboxId = MailboxId(2);

#[test]
fn deliver_list_read_delete_round_trip() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    let messages: Vec<Vec<u8>> = (0..3).map(|n| message(n, 100 + n * 5000)).collect();
    let uids: Vec<_> = messages
        .iter()
        .map(|m| store.deliver(m, &[A]).expect("deliver"))
        .collect();

    let session = store.open_mailbox(A).expect("open mailbox");
    assert_eq!(session.messages().len(), 3);
    for (i, m) in messages.iter().enumerate() {
        let info = &session.messages()[i];
        assert_eq!(info.uid, uids[i], "listed in delivery order");
        assert_eq!(info.size, m.len() as u64);
        let read = session.read(i).expect("read");
        assert_eq!(
            read.len() as u64,
            info.size,
            "size is exactly the bytes read"
        );
        assert_eq!(&read, m);
        let uid = info.uid.as_str();
        assert!(uid.len() <= 70 && uid.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    }
    let total: u64 = messages.iter().map(|m| m.len() as u64).sum();
    assert_eq!(session.total_size(), total);
    assert_eq!(session.commit_deletes(&[0, 2, 2]).expect("commit"), 2);

    let session = store.open_mailbox(A).expect("reopen mailbox");
    assert_eq!(session.messages().len(), 1);
    assert_eq!(session.messages()[0].uid, uids[1]);
    assert_eq!(session.read(0).expect("read"), messages[1]);
    drop(session);
    assert!(
        fs::read_dir(store.path().join("tmp"))
            .expect("tmp")
            .next()
            .is_none(),
        "nothing left in tmp"
    );
}

#[test]
fn uids_are_stable_across_reopen() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    let store = open(&dir);
    let uid = store.deliver(&message(1, 300), &[A]).expect("deliver");
    store.deliver(&message(2, 300), &[A]).expect("deliver");
    let before: Vec<_> = store.open_mailbox(A).expect("open").messages().to_vec();
    drop(store);
    let store = open(&dir);
    let after = store.open_mailbox(A).expect("open").messages().to_vec();
    assert_eq!(before, after);
    assert_eq!(after[0].uid, uid);
    assert_ne!(after[0].uid, after[1].uid);
}

#[test]
fn one_copy_for_many_recipients() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    let mut to: Vec<MailboxId> = (1..=10).map(MailboxId).collect();
    to.push(MailboxId(3)); // a duplicate gets one copy
    let m = message(7, 50_000);
    let uid = store.deliver(&m, &to).expect("deliver");

    let mut inodes = Vec::new();
    for id in 1..=10 {
        let session = store.open_mailbox(MailboxId(id)).expect("open");
        assert_eq!(session.messages().len(), 1, "mailbox {id}");
        assert_eq!(session.messages()[0].uid, uid, "same uid everywhere");
        assert_eq!(session.read(0).expect("read"), m);
        let meta = session
            .open(0)
            .expect("open message")
            .metadata()
            .expect("stat");
        assert_eq!(meta.nlink(), 10, "one file, ten names");
        inodes.push(meta.ino());
    }
    inodes.dedup();
    assert_eq!(inodes.len(), 1, "one inode");

    // Deleting it from one mailbox leaves the others' copy intact.
    let session = store.open_mailbox(MailboxId(4)).expect("open");
    session.commit_deletes(&[0]).expect("commit");
    let session = store.open_mailbox(MailboxId(5)).expect("open");
    assert_eq!(session.read(0).expect("read"), m);
    assert_eq!(
        session
            .open(0)
            .expect("open")
            .metadata()
            .expect("stat")
            .nlink(),
        9
    );
}

#[test]
fn a_second_session_is_refused_until_the_first_ends() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("store");
    let store = open(&dir);
    let first = store.open_mailbox(A).expect("first session");
    assert!(matches!(store.open_mailbox(A), Err(StoreError::Locked(id)) if id == A));
    // Another store object on the same directory (as another process would have)
    // sees the lock too.
    let other = open(&dir);
    assert!(matches!(other.open_mailbox(A), Err(StoreError::Locked(_))));
    // Other mailboxes are not affected.
    drop(other.open_mailbox(B).expect("other mailbox"));
    drop(first);
    drop(other.open_mailbox(A).expect("free after drop"));
}

#[test]
fn deletes_happen_only_at_commit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    for n in 0..3 {
        store.deliver(&message(n, 200), &[A]).expect("deliver");
    }
    // A session that ends without commit (a dropped connection) deletes nothing.
    let session = store.open_mailbox(A).expect("open");
    assert_eq!(session.messages().len(), 3);
    drop(session);
    assert_eq!(store.mailbox_stats(A).expect("stats").count, 3);

    // A bad index refuses the whole commit before anything is removed.
    let session = store.open_mailbox(A).expect("open");
    let err = session.commit_deletes(&[0, 3]).expect_err("index 3");
    assert!(matches!(
        err,
        StoreError::NoSuchMessage { index: 3, count: 3 }
    ));
    assert_eq!(store.mailbox_stats(A).expect("stats").count, 3);
    // … and released the lock.
    drop(store.open_mailbox(A).expect("unlocked"));
}

#[test]
fn mail_arriving_during_a_session_is_not_in_it_and_survives_its_commit() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    store.deliver(&message(1, 200), &[A]).expect("deliver");
    store.deliver(&message(2, 200), &[A]).expect("deliver");
    let session = store.open_mailbox(A).expect("open");
    let late = message(3, 900);
    let late_uid = store
        .deliver(&late, &[A])
        .expect("delivery during the session");
    assert_eq!(session.messages().len(), 2, "snapshot taken at open");
    assert_eq!(session.commit_deletes(&[0, 1]).expect("commit"), 2);

    let session = store.open_mailbox(A).expect("open");
    assert_eq!(session.messages().len(), 1);
    assert_eq!(session.messages()[0].uid, late_uid);
    assert_eq!(session.read(0).expect("read"), late);
}

#[test]
fn stats_count_and_size() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    assert_eq!(
        store.mailbox_stats(A).expect("stats"),
        MailboxStats::default()
    );
    assert!(!store.mailbox_path(A).exists(), "stats create nothing");
    let (m1, m2) = (message(1, 1000), message(2, 3000));
    store.deliver(&m1, &[A]).expect("deliver");
    store.deliver(&m2, &[A, B]).expect("deliver");
    let stats = store.mailbox_stats(A).expect("stats");
    assert_eq!(stats.count, 2);
    assert_eq!(stats.size, (m1.len() + m2.len()) as u64);
    assert_eq!(store.mailbox_stats(B).expect("stats").count, 1);
}

/// The LF form of a stored (CRLF) message.
fn lf(message: &[u8]) -> Vec<u8> {
    String::from_utf8_lossy(message)
        .replace("\r\n", "\n")
        .into_bytes()
}

/// The files of `dir`, sorted by name, read whole.
fn files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut names: Vec<_> = fs::read_dir(dir)
        .expect("dir")
        .map(|e| e.expect("entry").path())
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| {
            let name = p.file_name().expect("name").to_string_lossy().into_owned();
            (name, fs::read(p).expect("read"))
        })
        .collect()
}

/// Issue 21: the export wrote CRLF files (Maildir readers expect LF) and a
/// second export into the same Maildir failed instead of adding what is new.
/// Issue 52: it is Maildir++ now, messages in cur/ with their flags.
#[test]
fn export_writes_a_maildir_with_lf_files_and_adds_only_what_is_new() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    let messages: Vec<Vec<u8>> = (0..3).map(|n| message(n, 2000 * (n + 1))).collect();
    for m in &messages {
        store.deliver(m, &[A]).expect("deliver");
    }
    let out = tmp.path().join("export");
    let report = store.export_maildir(A, &out).expect("export");
    assert_eq!((report.messages, report.skipped), (3, 0));
    assert_eq!(report.folders, 6, "INBOX and the five SPECIAL-USE folders");
    let wanted: Vec<Vec<u8>> = messages.iter().map(|m| lf(m)).collect();
    assert_eq!(
        report.bytes,
        wanted.iter().map(|m| m.len() as u64).sum::<u64>()
    );
    for sub in ["tmp", "new", "cur", ".Sent/cur", ".Trash/new"] {
        assert!(out.join(sub).is_dir(), "{sub}/");
    }
    let exported = files(&out.join("cur"));
    let texts: Vec<Vec<u8>> = exported.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(texts, wanted, "LF line endings, in order");
    for ((name, text), wire) in exported.iter().zip(&messages) {
        assert!(
            name.ends_with(&format!(",S={},W={}:2,", text.len(), wire.len())),
            "{name}"
        );
        let unique = name.split(',').next().expect("unique");
        let mtime = fs::metadata(out.join("cur").join(name))
            .expect("stat")
            .mtime();
        assert_eq!(
            unique.split('.').next().and_then(|s| s.parse::<i64>().ok()),
            Some(mtime),
            "dated with the internal date, the delivery time"
        );
    }
    assert!(files(&out.join("tmp")).is_empty());
    assert!(files(&out.join("new")).is_empty());

    // A reader marks one message seen; a new message arrives. Exporting again
    // adds only the new one.
    let (first, _) = &exported[0];
    fs::rename(
        out.join("cur").join(first),
        out.join("cur").join(format!("{first}S")),
    )
    .expect("flag it");
    let fourth = message(3, 500);
    store.deliver(&fourth, &[A]).expect("deliver");
    let again = store.export_maildir(A, &out).expect("export again");
    assert_eq!((again.messages, again.skipped), (1, 3));
    assert_eq!(again.bytes, lf(&fourth).len() as u64);
    assert_eq!(files(&out.join("cur")).len(), 4);
    // An empty mailbox exports an empty Maildir.
    let empty = store
        .export_maildir(B, &tmp.path().join("empty"))
        .expect("export");
    assert_eq!(empty.messages, 0);
    assert!(tmp.path().join("empty/cur").is_dir());
}

#[test]
fn misuse_is_an_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    assert!(matches!(
        store.deliver(b"x\r\n", &[]),
        Err(StoreError::NoRecipients)
    ));
    store.deliver(&message(1, 100), &[A]).expect("deliver");
    let session = store.open_mailbox(A).expect("open");
    assert!(matches!(
        session.read(1),
        Err(StoreError::NoSuchMessage { index: 1, count: 1 })
    ));
}

#[test]
fn a_file_changed_behind_the_stores_back_is_reported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    store.deliver(&message(1, 100), &[A]).expect("deliver");
    let session = store.open_mailbox(A).expect("open");
    let name = fs::read_dir(store.mailbox_path(A))
        .expect("mailbox")
        .next()
        .expect("one file")
        .expect("entry")
        .path();
    fs::OpenOptions::new()
        .append(true)
        .open(&name)
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"junk"))
        .expect("append");
    assert!(matches!(session.read(0), Err(StoreError::Corrupt { .. })));
}

#[test]
fn files_put_there_by_hand_are_listed() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    store.deliver(&message(1, 100), &[A]).expect("deliver");
    let dir = store.mailbox_path(A);
    fs::write(dir.join("imported-message"), b"Subject: x\r\n\r\nhi\r\n").expect("write");
    fs::write(dir.join(".hidden"), b"not mail").expect("write");
    fs::create_dir(dir.join("subdir")).expect("mkdir");
    let session = store.open_mailbox(A).expect("open");
    assert_eq!(session.messages().len(), 2);
    let imported = &session.messages()[1];
    assert_eq!(imported.uid.as_str(), "imported-message");
    assert_eq!(imported.size, 18);
    assert_eq!(session.read(1).expect("read"), b"Subject: x\r\n\r\nhi\r\n");
}

#[test]
fn concurrent_deliveries_to_a_new_mailbox() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    std::thread::scope(|s| {
        for t in 0..4 {
            let store = &store;
            s.spawn(move || {
                for n in 0..25 {
                    store
                        .deliver(&message(t * 100 + n, 300), &[A, MailboxId(10 + t as u64)])
                        .expect("deliver");
                }
            });
        }
    });
    let session = store.open_mailbox(A).expect("open");
    assert_eq!(session.messages().len(), 100);
    let mut uids: Vec<_> = session.messages().iter().map(|m| m.uid.clone()).collect();
    uids.sort();
    uids.dedup();
    assert_eq!(uids.len(), 100, "unique uids");
}

/// The permission bits of `path`.
fn mode(path: &Path) -> u32 {
    fs::metadata(path).expect("stat").mode() & 0o7777
}

/// Everything under `dir` (itself included), depth first.
fn walk(dir: &Path, into: &mut Vec<std::path::PathBuf>) {
    into.push(dir.to_owned());
    for entry in fs::read_dir(dir).expect("read dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            walk(&path, into);
        } else {
            into.push(path);
        }
    }
}

/// Issue 21: mail is private by default. Every directory the store makes (its
/// parent, the store, tmp/, the fan-out and mailbox directories, an export's
/// Maildir) is 0700 and every message file 0600, whatever the umask (the test
/// runs under the usual 022, which alone would give 0755 and 0644).
#[test]
fn store_and_export_are_private_by_default() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("mail/store"));
    store.deliver(&message(1, 100), &[A, B]).expect("deliver");
    store
        .export_maildir(A, &tmp.path().join("export/a"))
        .expect("export");
    let mut paths = Vec::new();
    walk(&tmp.path().join("mail"), &mut paths);
    walk(&tmp.path().join("export"), &mut paths);
    let messages = paths
        .iter()
        .filter(|p| p.is_file() && p.to_string_lossy().contains(",S="))
        .count();
    assert_eq!(messages, 3, "two links and one exported message: {paths:?}");
    for path in &paths {
        let want = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(path), want, "{}", path.display());
    }
}

/// The modes can be widened for a group the administrator names (0640/0750).
#[test]
fn modes_follow_the_options() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let options = Options {
        file_mode: 0o640,
        dir_mode: 0o750,
        ..Options::default()
    };
    let store = MailStore::open(tmp.path().join("store"), options).expect("open");
    store.deliver(&message(1, 100), &[A]).expect("deliver");
    store
        .export_maildir(A, &tmp.path().join("export"))
        .expect("export");
    let mut paths = Vec::new();
    walk(&tmp.path().join("store"), &mut paths);
    walk(&tmp.path().join("export"), &mut paths);
    for path in &paths {
        let want = if path.is_dir() { 0o750 } else { 0o640 };
        assert_eq!(mode(path), want, "{}", path.display());
    }
}
