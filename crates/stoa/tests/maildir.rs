//! `stoa mailbox export` and `stoa mailbox import` (issue 52, item 4): a mailbox
//! with folders, flags, keywords and internal dates goes out as a Maildir++ tree
//! and back into another user without loss, and a tree as Dovecot writes it comes
//! in with its folders, flags and dates.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use stoa_directory::{Directory, EmbeddedDirectory, MailboxId};
use stoa_mailstore::{MailStore, Options, SpecialUse};

use common::add_user;

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// Runs `stoa args`; returns (exit code, stderr).
fn stoa(args: &[&str]) -> (i32, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command.args(args).env_remove("RUST_LOG");
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    (done.status.code().unwrap_or(-1), done.stderr)
}

fn text(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

fn mailbox_of(mail_dir: &Path, address: &str) -> MailboxId {
    let directory = EmbeddedDirectory::open(&mail_dir.join("directory"), Default::default())
        .expect("open the directory");
    directory
        .lookup(address)
        .expect("lookup")
        .expect("the user exists")
        .mailbox
}

fn store(mail_dir: &Path) -> MailStore {
    MailStore::open(mail_dir.join("store"), Options::default()).expect("open the store")
}

fn flags(list: &[&str]) -> Vec<String> {
    list.iter().map(|f| (*f).to_owned()).collect()
}

/// One message as IMAP sees it: its flags, internal date and bytes.
type Message = (Vec<String>, i64, Vec<u8>);

/// A mailbox as IMAP sees it: per folder its SPECIAL-USE and messages (in date
/// order), and the subscriptions.
#[derive(Debug, PartialEq)]
struct Snapshot {
    folders: BTreeMap<String, (Option<SpecialUse>, Vec<Message>)>,
    subscribed: Vec<String>,
}

fn snapshot(store: &MailStore, id: MailboxId) -> Snapshot {
    let list = store.folder_list(id).expect("folder list");
    let mut folders = BTreeMap::new();
    for info in list.folders() {
        let folder = store.open_folder(id, info).expect("open folder");
        let mut messages: Vec<Message> = folder
            .state()
            .messages()
            .map(|m| {
                let bytes = folder.read_message(m.uid).expect("read");
                (m.flags.clone(), m.internal_date, bytes)
            })
            .collect();
        messages.sort_by_key(|m| m.1);
        folders.insert(info.name.clone(), (info.special_use, messages));
    }
    Snapshot {
        folders,
        subscribed: list.subscribed().iter().cloned().collect(),
    }
}

/// Every file under `dir` with its bytes and, for messages, its modification time.
fn tree(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, Option<i64>)> {
    fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<PathBuf, (Vec<u8>, Option<i64>)>) {
        for entry in fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            let relative = path.strip_prefix(root).expect("below root").to_owned();
            if path.is_dir() {
                into.insert(relative, (Vec::new(), None));
                walk(root, &path, into);
            } else {
                let meta = fs::metadata(&path).expect("stat");
                let in_cur = path.parent().is_some_and(|p| p.ends_with("cur"));
                let mtime = in_cur.then(|| meta.mtime());
                into.insert(relative, (fs::read(&path).expect("read"), mtime));
            }
        }
    }
    let mut files = BTreeMap::new();
    walk(dir, dir, &mut files);
    files
}

/// Joe's mailbox: nested folders, a SPECIAL-USE one below another, names with a
/// non-ASCII letter and a `.`, flags and keywords, dates in the past, and
/// messages whose bytes test the line ends (a CR before a line end, a bare CR).
fn fill(store: &MailStore, id: MailboxId) {
    store.folder_list(id).expect("default folders");
    for (name, usage) in [
        ("Work/2026", None),
        ("Entwürfe", None),
        ("v1.2", None),
        ("Projects/Old", Some(SpecialUse::Archive)),
    ] {
        store.create_folder(id, name, usage).expect("create");
    }
    store.subscribe(id, "Work/2026", true).expect("subscribe");
    store.subscribe(id, "Junk", false).expect("unsubscribe");
    let put: [(&str, &[&str], i64, &[u8]); 7] = [
        (
            "INBOX",
            &["\\Seen"],
            1_600_000_000,
            b"Subject: one\r\n\r\nhello\r\n",
        ),
        (
            "INBOX",
            &["\\Answered", "\\Flagged", "$Forwarded", "Work"],
            1_700_000_000,
            b"Subject: two\r\n\r\nodd\r\r\nbare\rcr\r\n",
        ),
        (
            "INBOX",
            &[],
            1_700_000_100,
            b"Subject: three\r\n\r\nnew\r\n",
        ),
        (
            "Work/2026",
            &["\\Draft", "\\Deleted", "$Junk"],
            1_650_000_000,
            b"Subject: draft\r\n\r\nd\r\n",
        ),
        (
            "Entwürfe",
            &["\\Seen"],
            1_650_000_001,
            b"Subject: e\r\n\r\ne\r\n",
        ),
        (
            "v1.2",
            &["k.1", "\\Seen"],
            1_650_000_002,
            b"Subject: v\r\n\r\nv\r\n",
        ),
        (
            "Projects/Old",
            &[],
            1_500_000_000,
            b"Subject: old\r\n\r\nold\r\n",
        ),
    ];
    let list = store.folder_list(id).expect("list");
    for (name, flag_list, date, bytes) in put {
        let info = list.get(name).expect("folder exists");
        let mut folder = store.open_folder(id, info).expect("open");
        folder
            .append(store, bytes, &flags(flag_list), Some(date))
            .expect("append");
    }
}

#[test]
fn export_then_import_is_lossless_and_exports_again_identically() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail_dir = tmp.path().join("mail");
    let d = text(&mail_dir);
    add_user(&mail_dir, "joe@example.test", "pw");
    add_user(&mail_dir, "ann@example.test", "pw");
    let joe = mailbox_of(&mail_dir, "joe@example.test");
    let ann = mailbox_of(&mail_dir, "ann@example.test");
    fill(&store(&mail_dir), joe);

    let out1 = tmp.path().join("out1");
    let (code, err) = stoa(&[
        "mailbox",
        "export",
        "joe@example.test",
        "--mail-dir",
        d,
        "--to",
        text(&out1),
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("exported 7 messages ("), "{err}");
    assert!(err.contains("in 12 folders"), "{err}");

    // Dovecot's layout, names, letters and dates.
    for dir in [
        "cur",
        "new",
        "tmp",
        ".Work.2026/cur",
        ".Work/cur",
        ".Entw&APw-rfe/cur",
        ".v1&AC4-2/cur",
        ".Projects.Old/cur",
        ".Sent/new",
        ".Junk/tmp",
    ] {
        assert!(out1.join(dir).is_dir(), "{dir}/ missing");
    }
    assert!(out1.join(".Sent/maildirfolder").is_file());
    let inbox: Vec<String> = fs::read_dir(out1.join("cur"))
        .expect("cur/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    let mut suffixes: Vec<&str> = inbox
        .iter()
        .map(|n| n.split(":2,").nth(1).unwrap_or("?"))
        .collect();
    suffixes.sort();
    assert_eq!(suffixes, ["", "FRab", "S"], "{inbox:?}");
    assert_eq!(
        fs::read_to_string(out1.join("dovecot-keywords")).expect("keywords"),
        "0 $Forwarded\n1 Work\n"
    );
    let work: Vec<_> = fs::read_dir(out1.join(".Work.2026/cur"))
        .expect("cur")
        .collect();
    let work = work[0].as_ref().expect("entry").path();
    assert!(text(&work).ends_with(":2,DTa"), "{}", work.display());
    assert_eq!(fs::metadata(&work).expect("stat").mtime(), 1_650_000_000);
    assert_eq!(fs::read(&work).expect("read"), b"Subject: draft\n\nd\n");
    let subscriptions = fs::read_to_string(out1.join("subscriptions")).expect("subscriptions");
    assert!(
        subscriptions.lines().any(|l| l == "Work.2026"),
        "{subscriptions}"
    );
    assert!(
        !subscriptions.lines().any(|l| l == "Junk"),
        "{subscriptions}"
    );

    // Into another user: the same folders, flags, keywords, dates and bytes.
    let import = || {
        stoa(&[
            "mailbox",
            "import",
            "ann@example.test",
            "--mail-dir",
            d,
            "--from",
            text(&out1),
        ])
    };
    let (code, err) = import();
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("imported 7 messages ("), "{err}");
    let store = store(&mail_dir);
    let original = snapshot(&store, joe);
    assert_eq!(snapshot(&store, ann), original);
    assert_eq!(
        original.folders["Projects/Old"].0,
        Some(SpecialUse::Archive),
        "the snapshot sees SPECIAL-USE"
    );
    // Again: nothing duplicated.
    let (code, err) = import();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("imported 0 messages (0 bytes)") && err.contains("7 already there"),
        "{err}"
    );
    assert_eq!(snapshot(&store, ann), original);

    // Ann's mailbox exports to the very same tree.
    let out2 = tmp.path().join("out2");
    let (code, err) = stoa(&[
        "mailbox",
        "export",
        "ann@example.test",
        "--mail-dir",
        d,
        "--to",
        text(&out2),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(tree(&out2), tree(&out1));
}

/// Writes `bytes` at `path` (parents created) dated `date`.
fn put(path: &Path, bytes: &[u8], date: i64) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, bytes).expect("write");
    let when = SystemTime::UNIX_EPOCH + Duration::from_secs(date.unsigned_abs());
    fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(when))
        .expect("date it");
}

#[test]
fn a_tree_as_dovecot_writes_it_is_imported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail_dir = tmp.path().join("mail");
    let d = text(&mail_dir);
    add_user(&mail_dir, "joe@example.test", "pw");
    let joe = mailbox_of(&mail_dir, "joe@example.test");

    let dove = tmp.path().join("Maildir");
    put(
        &dove.join("cur/1700000001.M1P1.mx,S=18,W=20:2,Sa"),
        b"Subject: a\n\nseen\n",
        1_700_000_001,
    );
    put(
        &dove.join("new/1700000002.M2P2.mx"),
        b"Subject: b\n\nnew\n",
        1_700_000_002,
    );
    put(
        &dove.join("tmp/1700000009.M9P9.mx"),
        b"half written",
        1_700_000_009,
    );
    put(
        &dove.join("dovecot-keywords"),
        b"0 $Label1\n1 Important\n",
        0,
    );
    put(
        &dove.join("dovecot-uidlist"),
        b"3 V1 N3 G0\n1 1700000001.M1P1.mx\n",
        0,
    );
    put(&dove.join("subscriptions"), b"INBOX\nSent\nWork.2026\n", 0);
    put(&dove.join(".Sent/maildirfolder"), b"", 0);
    put(
        &dove.join(".Sent/cur/1700000003.M3P3.mx:2,S"),
        b"Subject: c\n\nsent\n",
        1_700_000_003,
    );
    put(
        &dove.join(".Work.2026/cur/1700000004.M4P4.mx,S=12:2,FRb"),
        b"Subject: d\n\n",
        1_700_000_004,
    );
    put(
        &dove.join(".Work.2026/dovecot-keywords"),
        b"0 x\n1 Later\n",
        0,
    );
    fs::create_dir_all(dove.join(".Work.2026/new")).expect("mkdir");
    fs::create_dir_all(dove.join(".notmuch/xapian")).expect("mkdir");

    let args = [
        "mailbox",
        "import",
        "joe@example.test",
        "--mail-dir",
        d,
        "--from",
        text(&dove),
    ];
    let (code, err) = stoa(&args);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("imported 4 messages ("), "{err}");
    assert!(err.contains(".notmuch is not a Maildir"), "{err}");
    let store = store(&mail_dir);
    let got = snapshot(&store, joe);
    let inbox = &got.folders["INBOX"].1;
    assert_eq!(
        inbox,
        &vec![
            (
                flags(&["$Label1", "\\Seen"]),
                1_700_000_001,
                b"Subject: a\r\n\r\nseen\r\n".to_vec()
            ),
            (
                Vec::new(),
                1_700_000_002,
                b"Subject: b\r\n\r\nnew\r\n".to_vec()
            ),
        ]
    );
    assert_eq!(got.folders["Sent"].0, Some(SpecialUse::Sent));
    assert_eq!(got.folders["Sent"].1[0].0, flags(&["\\Seen"]));
    assert_eq!(
        got.folders["Work/2026"].1,
        vec![(
            flags(&["\\Answered", "\\Flagged", "Later"]),
            1_700_000_004,
            b"Subject: d\r\n\r\n".to_vec()
        )]
    );
    assert!(got.folders.contains_key("Work"), "the parent is made");
    assert_eq!(
        got.subscribed,
        ["INBOX", "Sent", "Work/2026"],
        "the tree's, not the defaults"
    );
    // The POP3 view of INBOX names the messages as Dovecot did.
    let session = store.open_mailbox(joe).expect("POP3 session");
    let uids: Vec<&str> = session.messages().iter().map(|m| m.uid.as_str()).collect();
    assert_eq!(uids, ["1700000001.M1P1.mx", "1700000002.M2P2.mx"]);
    drop(session);

    // Bad input is refused whole: nothing of the tree goes in.
    put(
        &dove.join(".a..b/cur/1700000005.M5P5.mx"),
        b"Subject: e\n\n",
        1_700_000_005,
    );
    put(
        &dove.join("cur/1700000006.M6P6.mx"),
        b"Subject: f\n\n",
        1_700_000_006,
    );
    let (code, err) = stoa(&args);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains(".a..b: empty hierarchy level"), "{err}");
    assert_eq!(snapshot(&store, joe), got, "nothing imported");
    let (code, err) = stoa(&[
        "mailbox",
        "import",
        "joe@example.test",
        "--mail-dir",
        d,
        "--from",
        text(&tmp.path().join("mail")),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not a Maildir++ tree"), "{err}");
}
