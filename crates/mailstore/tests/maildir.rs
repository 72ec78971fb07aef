//! Export and import of Maildir++ trees (issue 52, item 4) at the store's level:
//! idempotence, refusal of bad input before anything is written, keyword letters
//! running out. The round trip through the binary is `crates/stoa/tests/maildir.rs`.

use std::fs;
use std::path::Path;

use stoa_mailstore::{MailStore, MailboxId, Options, StoreError};

const A: MailboxId = MailboxId(1);
const B: MailboxId = MailboxId(2);

fn open(dir: &Path) -> MailStore {
    MailStore::open(dir, Options::default()).expect("open store")
}

/// Every message of every folder of `id`: (folder, flags, date, bytes), sorted.
fn contents(store: &MailStore, id: MailboxId) -> Vec<(String, Vec<String>, i64, Vec<u8>)> {
    let mut all = Vec::new();
    for info in store.folder_list(id).expect("list").folders() {
        let folder = store.open_folder(id, info).expect("open folder");
        for m in folder.state().messages() {
            let bytes = folder.read_message(m.uid).expect("read");
            all.push((info.name.clone(), m.flags.clone(), m.internal_date, bytes));
        }
    }
    all.sort();
    all
}

#[test]
fn import_is_idempotent_and_keeps_flags_dates_and_bytes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    let list = store.folder_list(A).expect("list");
    let sent = list.get("Sent").expect("Sent").clone();
    let mut folder = store.open_folder(A, &sent).expect("open");
    let flags = vec!["\\Seen".to_owned(), "$Forwarded".to_owned()];
    folder
        .append(
            &store,
            b"Subject: s\r\n\r\nx\r\n",
            &flags,
            Some(1_600_000_000),
        )
        .expect("append");
    store
        .deliver(b"Subject: i\r\n\r\ny\r\n", &[A])
        .expect("deliver");

    let out = tmp.path().join("out");
    store.export_maildir(A, &out).expect("export");
    let first = store.import_maildir(B, &out).expect("import");
    assert_eq!((first.messages, first.skipped), (2, 0));
    assert_eq!(contents(&store, B), contents(&store, A));
    let again = store.import_maildir(B, &out).expect("import again");
    assert_eq!(
        (again.messages, again.skipped, again.folders_created),
        (0, 2, 0)
    );
    assert_eq!(
        contents(&store, B),
        contents(&store, A),
        "nothing duplicated"
    );
}

#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    let tree = tmp.path().join("tree");
    for dir in ["cur", "new", "tmp", ".Lists/cur"] {
        fs::create_dir_all(tree.join(dir)).expect("mkdir");
    }
    fs::write(tree.join("cur/1.M1.h:2,S"), "Subject: a\n\n").expect("write");
    fs::write(tree.join(".Lists/cur/2.M2.h:2,a"), "Subject: b\n\n").expect("write");
    fs::write(tree.join(".Lists/dovecot-keywords"), "0 bad(keyword\n").expect("write");
    let err = store.import_maildir(A, &tree).expect_err("bad keywords");
    assert!(
        matches!(&err, StoreError::BadMaildir { path, .. } if path.ends_with("dovecot-keywords")),
        "{err}"
    );
    assert!(
        contents(&store, A).is_empty(),
        "INBOX was not imported either"
    );
    // A folder name the store does not take.
    fs::write(tree.join(".Lists/dovecot-keywords"), "0 ok\n").expect("write");
    fs::create_dir_all(tree.join(".100%/cur")).expect("mkdir");
    let err = store.import_maildir(A, &tree).expect_err("bad name");
    assert!(err.to_string().contains("LIST wildcards"), "{err}");
    assert!(contents(&store, A).is_empty());
    // Not a Maildir at all.
    let err = store
        .import_maildir(A, &tmp.path().join("store"))
        .expect_err("not a Maildir");
    assert!(err.to_string().contains("not a Maildir++ tree"), "{err}");
    fs::remove_dir(tree.join(".100%/cur")).expect("rmdir");
    fs::remove_dir(tree.join(".100%")).expect("rmdir");
    let report = store.import_maildir(A, &tree).expect("good now");
    assert_eq!(report.messages, 2);
    let got = contents(&store, A);
    assert_eq!(got[1].0, "Lists");
    assert_eq!(got[1].1, ["ok"]);
}

#[test]
fn a_folder_has_26_keyword_letters_and_the_export_says_what_it_left_out() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let store = open(&tmp.path().join("store"));
    let list = store.folder_list(A).expect("list");
    let inbox = list.get("INBOX").expect("INBOX").clone();
    let mut folder = store.open_folder(A, &inbox).expect("open");
    let keywords: Vec<String> = (0..28).map(|n| format!("k{n:02}")).collect();
    folder
        .append(
            &store,
            b"Subject: k\r\n\r\n",
            &keywords,
            Some(1_600_000_000),
        )
        .expect("append");
    let out = tmp.path().join("out");
    let report = store.export_maildir(A, &out).expect("export");
    assert_eq!(report.keywords_dropped, 2);
    let names = fs::read_to_string(out.join("dovecot-keywords")).expect("keywords");
    assert_eq!(names.lines().count(), 26);
    assert!(
        names.starts_with("0 k00\n") && names.ends_with("25 k25\n"),
        "{names}"
    );
}
