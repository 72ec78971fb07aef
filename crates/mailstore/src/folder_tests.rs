//! Folders and their indexes, over a real store directory.

use std::fs;

use stoa_directory::MailboxId;
use tempfile::TempDir;

use crate::{FlagOp, Folder, MailStore, Options, SpecialUse, StoreError};

const ID: MailboxId = MailboxId(7);

fn store() -> (TempDir, MailStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = MailStore::open(dir.path().join("store"), Options::default()).expect("open");
    (dir, store)
}

fn message(n: usize) -> Vec<u8> {
    format!("Subject: m{n}\r\n\r\nbody {n}\r\n").into_bytes()
}

fn open(store: &MailStore, name: &str) -> Folder {
    let list = store.folder_list(ID).expect("list");
    let info = list.get(name).expect("folder").clone();
    store.open_folder(ID, &info).expect("open folder")
}

fn uids(folder: &Folder) -> Vec<u32> {
    folder.state().messages().map(|m| m.uid).collect()
}

fn flags(list: &[&str]) -> Vec<String> {
    list.iter().map(|f| f.to_string()).collect()
}

#[test]
fn existing_mail_opens_in_inbox_with_uids_in_delivery_order() {
    let (_dir, store) = store();
    for n in 0..3 {
        store.deliver(&message(n), &[ID]).expect("deliver");
    }
    let inbox = open(&store, "inbox");
    assert_eq!(uids(&inbox), [1, 2, 3]);
    assert_eq!(inbox.state().uid_next, 4);
    let first = inbox.state().get(1).expect("uid 1");
    assert_eq!(first.size, message(0).len() as u64);
    assert!(first.internal_date > 1_700_000_000);
    assert_eq!(inbox.read_message(3).expect("read"), message(2));
    // The same UIDs after a restart.
    let validity = inbox.state().uid_validity;
    drop(inbox);
    let again = MailStore::open(store.path(), Options::default()).expect("reopen");
    let inbox = open(&again, "INBOX");
    assert_eq!(uids(&inbox), [1, 2, 3]);
    assert_eq!(inbox.state().uid_validity, validity);
}

#[test]
fn default_folders_and_hierarchy() {
    let (_dir, store) = store();
    let list = store.folder_list(ID).expect("list");
    let names: Vec<&str> = list.folders().iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["INBOX", "Archive", "Drafts", "Junk", "Sent", "Trash"]
    );
    assert_eq!(
        list.get("Sent").expect("sent").special_use,
        Some(SpecialUse::Sent)
    );
    assert!(list.subscribed().contains("Trash"));

    store
        .create_folder(ID, "Work/2026/Q4", None)
        .expect("create");
    let list = store.folder_list(ID).expect("list");
    assert!(list.get("Work").is_some() && list.get("Work/2026").is_some());
    assert!(matches!(
        store.create_folder(ID, "Work", None),
        Err(StoreError::FolderExists(_))
    ));
    assert!(matches!(
        store.create_folder(ID, "a//b", None),
        Err(StoreError::BadFolderName { .. })
    ));
    assert!(matches!(
        store.delete_folder(ID, "Work"),
        Err(StoreError::HasChildren(_))
    ));
    assert!(matches!(
        store.delete_folder(ID, "INBOX"),
        Err(StoreError::BadFolderName { .. })
    ));

    // A message in a child survives its parent's rename.
    let mut q4 = open(&store, "Work/2026/Q4");
    q4.append(
        &store,
        &message(1),
        &flags(&["\\Seen"]),
        Some(1_700_000_000),
    )
    .expect("append");
    store.rename_folder(ID, "Work", "Jobs/Old").expect("rename");
    let list = store.folder_list(ID).expect("list");
    assert!(list.get("Work").is_none());
    assert!(list.get("Jobs").is_some());
    let moved = open(&store, "Jobs/Old/2026/Q4");
    assert_eq!(moved.read_message(1).expect("read"), message(1));
    assert_eq!(
        moved.state().get(1).expect("uid").internal_date,
        1_700_000_000
    );

    store.subscribe(ID, "Nowhere", true).expect("subscribe");
    assert!(
        store
            .folder_list(ID)
            .expect("list")
            .subscribed()
            .contains("Nowhere")
    );
    store
        .delete_folder(ID, "Jobs/Old/2026/Q4")
        .expect("delete leaf");
    assert!(
        store
            .folder_list(ID)
            .expect("list")
            .get("Jobs/Old/2026/Q4")
            .is_none()
    );
}

#[test]
fn flags_are_shared_between_sessions_with_modseqs() {
    let (_dir, store) = store();
    store.deliver(&message(0), &[ID]).expect("deliver");
    store.deliver(&message(1), &[ID]).expect("deliver");
    let mut a = open(&store, "INBOX");
    let mut b = open(&store, "INBOX");
    let before = a.state().highest_modseq;
    let outcome = a
        .store_flags(
            &store,
            &[1, 2],
            FlagOp::Add,
            &flags(&["\\Seen", "$Work"]),
            None,
        )
        .expect("store");
    assert_eq!(outcome.changed, [1, 2]);
    assert!(a.state().highest_modseq > before);
    b.refresh(&store).expect("refresh");
    assert_eq!(b.state().get(2).expect("uid 2").flags, ["$Work", "\\Seen"]);
    // CONDSTORE: b's UNCHANGEDSINCE from before a's change fails on both.
    let outcome = b
        .store_flags(
            &store,
            &[1, 2],
            FlagOp::Remove,
            &flags(&["\\Seen"]),
            Some(before),
        )
        .expect("store");
    assert_eq!(outcome.modified, [1, 2]);
    assert!(outcome.changed.is_empty());
    assert!(matches!(
        a.store_flags(&store, &[1], FlagOp::Add, &flags(&["bad flag"]), None),
        Err(StoreError::BadFlag(_))
    ));
}

#[test]
fn expunge_and_pop3_see_each_other() {
    let (_dir, store) = store();
    for n in 0..4 {
        store.deliver(&message(n), &[ID]).expect("deliver");
    }
    let mut imap = open(&store, "INBOX");
    imap.store_flags(&store, &[1, 2], FlagOp::Add, &flags(&["\\Deleted"]), None)
        .expect("flag");
    let modseq = imap.state().highest_modseq;
    assert_eq!(imap.expunge(&store, Some(&[2])).expect("uid expunge"), [2]);
    assert_eq!(imap.expunge(&store, None).expect("expunge"), [1]);
    assert_eq!(imap.state().expunged_since(modseq), [1, 2]);
    // POP3 sees two messages and deletes one; IMAP's next refresh expunges it.
    let pop = store.open_mailbox(ID).expect("pop3");
    assert_eq!(pop.messages().len(), 2);
    assert_eq!(pop.commit_deletes(&[0]).expect("commit"), 1);
    imap.refresh(&store).expect("refresh");
    assert_eq!(uids(&imap), [4]);
    assert_eq!(imap.state().expunged_since(modseq), [1, 2, 3]);
}

#[test]
fn copy_and_move_keep_flags_and_dates() {
    let (_dir, store) = store();
    store.deliver(&message(0), &[ID]).expect("deliver");
    store.deliver(&message(1), &[ID]).expect("deliver");
    let mut inbox = open(&store, "INBOX");
    inbox
        .store_flags(&store, &[1], FlagOp::Add, &flags(&["\\Flagged"]), None)
        .expect("flag");
    let mut trash = open(&store, "Trash");
    assert_eq!(
        inbox
            .copy_to(&store, &[1], &mut trash, false)
            .expect("copy"),
        [(1, 1)]
    );
    assert_eq!(
        inbox
            .copy_to(&store, &[1, 2], &mut trash, true)
            .expect("move"),
        [(1, 2), (2, 3)]
    );
    assert!(inbox.state().is_empty());
    assert_eq!(uids(&trash), [1, 2, 3]);
    for uid in [1, 2] {
        assert_eq!(trash.state().get(uid).expect("uid").flags, ["\\Flagged"]);
        assert_eq!(trash.read_message(uid).expect("read"), message(0));
    }
    assert_eq!(trash.read_message(3).expect("read"), message(1));
    assert_eq!(store.mailbox_stats(ID).expect("stats").count, 0);
    // A copy into the folder itself, through a second handle.
    let mut again = open(&store, "Trash");
    assert_eq!(
        trash
            .copy_to(&store, &[3], &mut again, false)
            .expect("copy"),
        [(3, 4)]
    );
}

#[test]
fn crashes_leave_every_message_in_one_state() {
    let (_dir, store) = store();
    store.deliver(&message(0), &[ID]).expect("deliver");
    let mut inbox = open(&store, "INBOX");
    let index = store.mailbox_path(ID).join(".index");
    // A torn record at the end is cut off by the next writer.
    let mut log = fs::read(&index).expect("read");
    let clean = log.len();
    log.extend_from_slice(b"= 1 99 \\Se");
    fs::write(&index, &log).expect("write");
    inbox
        .store_flags(&store, &[1], FlagOp::Add, &flags(&["\\Seen"]), None)
        .expect("store");
    let text = fs::read_to_string(&index).expect("read");
    assert!(!text.contains("= 1 99 "), "{text}");
    assert!(text.len() > clean);
    // A logged message whose file is gone (crash between an unlink and its
    // record, or a MOVE's log before its rename) is expunged at the next refresh.
    let name = inbox.state().get(1).expect("uid").name.clone();
    fs::remove_file(store.mailbox_path(ID).join(name)).expect("rm");
    let mut other = open(&store, "INBOX");
    assert!(other.state().is_empty());
    other.refresh(&store).expect("refresh");
    inbox.refresh(&store).expect("refresh");
    assert!(inbox.state().is_empty());
}

#[test]
fn a_long_log_is_compacted_and_readers_follow() {
    let (_dir, store) = store();
    for n in 0..3 {
        store.deliver(&message(n), &[ID]).expect("deliver");
    }
    let mut a = open(&store, "INBOX");
    let mut b = open(&store, "INBOX");
    for round in 0..2000 {
        let op = if round % 2 == 0 {
            FlagOp::Add
        } else {
            FlagOp::Remove
        };
        a.store_flags(&store, &[1, 2, 3], op, &flags(&["\\Seen"]), None)
            .expect("store");
    }
    let size = fs::metadata(store.mailbox_path(ID).join(".index"))
        .expect("stat")
        .len();
    assert!(size < 64 * 1024 + 4096, "log is {size} bytes");
    b.refresh(&store).expect("refresh");
    assert_eq!(b.state().messages().count(), 3);
    assert_eq!(b.state().highest_modseq, a.state().highest_modseq);
    b.store_flags(&store, &[2], FlagOp::Add, &flags(&["$X"]), None)
        .expect("store after compaction");
    a.refresh(&store).expect("refresh");
    assert_eq!(a.state().get(2).expect("uid").flags, ["$X"]);
}

#[test]
fn observer_hears_deliveries_and_changes() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let (_dir, store) = store();
    let heard = Arc::new(AtomicUsize::new(0));
    let count = heard.clone();
    store.set_observer(Arc::new(move |id| {
        assert_eq!(id, ID);
        count.fetch_add(1, Ordering::Relaxed);
    }));
    store.deliver(&message(0), &[ID]).expect("deliver");
    assert_eq!(heard.load(Ordering::Relaxed), 1);
    let mut inbox = open(&store, "INBOX");
    let after_open = heard.load(Ordering::Relaxed);
    inbox
        .store_flags(&store, &[1], FlagOp::Add, &flags(&["\\Seen"]), None)
        .expect("store");
    assert_eq!(heard.load(Ordering::Relaxed), after_open + 1);
}

#[test]
fn a_released_folder_reacquired_sees_appends_and_flag_changes() {
    let (_dir, store) = store();
    store.deliver(&message(0), &[ID]).expect("deliver");
    let mut other = open(&store, "INBOX");
    let waiting = open(&store, "INBOX").release();
    assert_eq!(waiting.state().uid_next, 2);
    store.deliver(&message(1), &[ID]).expect("deliver");
    other.refresh(&store).expect("refresh");
    other
        .store_flags(&store, &[1], FlagOp::Add, &flags(&["\\Seen"]), None)
        .expect("store");
    other
        .append(&store, &message(2), &flags(&["$Y"]), None)
        .expect("append");
    let mut back = waiting.reacquire().expect("reacquire");
    back.refresh(&store).expect("refresh");
    assert_eq!(uids(&back), [1, 2, 3]);
    assert_eq!(back.state().get(1).expect("uid 1").flags, ["\\Seen"]);
    assert_eq!(back.state().get(3).expect("uid 3").flags, ["$Y"]);
    assert_eq!(back.state().highest_modseq, other.state().highest_modseq);
    assert_eq!(back.read_message(2).expect("read"), message(1));
    back.store_flags(&store, &[2], FlagOp::Add, &flags(&["$Z"]), None)
        .expect("store after reacquire");
    other.refresh(&store).expect("refresh");
    assert_eq!(other.state().get(2).expect("uid 2").flags, ["$Z"]);
}

#[test]
fn a_released_folder_follows_a_compaction() {
    let (_dir, store) = store();
    for n in 0..3 {
        store.deliver(&message(n), &[ID]).expect("deliver");
    }
    let mut a = open(&store, "INBOX");
    let waiting = open(&store, "INBOX").release();
    for round in 0..2000 {
        let op = if round % 2 == 0 {
            FlagOp::Add
        } else {
            FlagOp::Remove
        };
        a.store_flags(&store, &[1, 2, 3], op, &flags(&["\\Seen"]), None)
            .expect("store");
    }
    a.store_flags(&store, &[3], FlagOp::Add, &flags(&["$Last"]), None)
        .expect("store");
    // Compacted, several times: the freed inode number may be the new log's.
    let size = fs::metadata(store.mailbox_path(ID).join(".index"))
        .expect("stat")
        .len();
    assert!(size < 64 * 1024 + 4096, "log is {size} bytes");
    let mut back = waiting.reacquire().expect("reacquire");
    assert_eq!(back.state().highest_modseq, a.state().highest_modseq);
    assert_eq!(back.state().get(3).expect("uid 3").flags, ["$Last"]);
    back.refresh(&store).expect("refresh");
    assert_eq!(uids(&back), [1, 2, 3]);
    back.store_flags(&store, &[2], FlagOp::Add, &flags(&["$X"]), None)
        .expect("store after compaction");
    a.refresh(&store).expect("refresh");
    assert_eq!(a.state().get(2).expect("uid").flags, ["$X"]);
}

#[test]
fn a_released_folder_deleted_meanwhile_is_no_such_folder() {
    let (_dir, store) = store();
    store.create_folder(ID, "Work", None).expect("create");
    let mut work = open(&store, "Work");
    work.append(&store, &message(0), &[], None).expect("append");
    let waiting = work.release();
    store.delete_folder(ID, "Work").expect("delete");
    let (waiting, error) = *waiting.reacquire().expect_err("reacquire a deleted folder");
    assert!(
        matches!(&error, StoreError::NoSuchFolder(name) if name == "Work"),
        "{error}"
    );
    // Nothing of the session's state is lost, and it can try again.
    assert_eq!(waiting.info().name, "Work");
    assert_eq!(waiting.state().messages().count(), 1);
    let (_, again) = *waiting.reacquire().expect_err("still deleted");
    assert!(matches!(again, StoreError::NoSuchFolder(_)), "{again}");
}
