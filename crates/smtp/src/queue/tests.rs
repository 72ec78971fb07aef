use super::*;

fn envelope(id: &str) -> Envelope {
    Envelope {
        version: envelope::VERSION,
        id: id.to_owned(),
        sender: "joe@example.com".into(),
        arrival: unix_now(),
        attempts: 0,
        next_try: unix_now(),
        client: "[127.0.0.1]".into(),
        recipients: vec![Recipient::new(
            "ann@example.com".into(),
            "ann@example.com".into(),
            Route::Local,
        )],
    }
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn commit_then_recover() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let queue = Queue::open(&tmp.path().join("q")).expect("open");
    let mut spool = queue.create_spool().expect("spool");
    let id = spool.id().to_owned();
    spool.write(b"Subject: x\r\n\r\n");
    spool.write(&vec![b'a'; 100_000]);
    assert_eq!(spool.len(), 100_014);
    queue.commit(spool, &envelope(&id)).expect("commit");
    assert_eq!(
        files(queue.dir()),
        [format!("{id}.env"), format!("{id}.msg")]
    );
    let message = queue.read_message(&id).expect("read");
    assert_eq!(message.len(), 100_014);
    let recovered = queue.recover().expect("recover");
    assert_eq!(recovered, vec![envelope(&id)]);
    queue.remove(&id).expect("remove");
    assert!(files(queue.dir()).is_empty());
}

#[test]
fn recovery_discards_unfinished_and_keeps_bad_envelopes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let queue = Queue::open(tmp.path()).expect("open");
    let dir = queue.dir().to_owned();
    std::fs::write(dir.join("A.msg.tmp"), b"half").expect("write");
    std::fs::write(dir.join("B.msg"), b"no envelope").expect("write");
    std::fs::write(dir.join("B.env.tmp"), b"{").expect("write");
    std::fs::write(dir.join("C.env"), b"not json").expect("write");
    std::fs::write(dir.join("C.msg"), b"kept").expect("write");
    std::fs::write(dir.join("D.env"), envelope("D").to_bytes()).expect("write");
    let recovered = queue.recover().expect("recover");
    assert!(recovered.is_empty());
    assert_eq!(files(&dir), ["C.env.bad", "C.msg", "D.env.bad"]);
}

#[test]
fn failed_commit_leaves_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let queue = Queue::open(&tmp.path().join("q")).expect("open");
    let mut spool = queue.create_spool().expect("spool");
    let id = spool.id().to_owned();
    spool.write(b"x\r\n");
    // The directory disappears under the spool: the envelope cannot be written.
    std::fs::remove_dir_all(queue.dir()).expect("remove");
    assert!(queue.commit(spool, &envelope(&id)).is_err());
    std::fs::create_dir(queue.dir()).expect("recreate");
    assert!(files(queue.dir()).is_empty());
}

#[test]
fn ids_are_unique_and_sortable() {
    let ids: Vec<String> = (0..1000).map(|_| new_id()).collect();
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
    assert!(ids.iter().all(|id| id.len() == 21));
}

/// Issue 21: queued mail is private: the directory 0700, the message and its
/// envelope 0600, also after the envelope is rewritten (the test's umask, 022,
/// would give 0755 and 0644).
#[test]
fn queued_mail_is_private() {
    use std::os::unix::fs::MetadataExt;
    let mode = |p: &Path| std::fs::metadata(p).expect("stat").mode() & 0o7777;
    let tmp = tempfile::tempdir().expect("tempdir");
    let queue = Queue::open(&tmp.path().join("q")).expect("open");
    let mut spool = queue.create_spool().expect("spool");
    let id = spool.id().to_owned();
    spool.write(b"Subject: x\r\n\r\n");
    let mut env = envelope(&id);
    queue.commit(spool, &env).expect("commit");
    env.attempts = 1;
    queue.save_envelope(&env).expect("rewrite");
    assert_eq!(mode(queue.dir()), 0o700);
    for name in files(queue.dir()) {
        assert_eq!(mode(&queue.dir().join(&name)), 0o600, "{name}");
    }
}

/// A queued message `id` (envelope and message file), as a commit leaves it.
fn queued(queue: &Queue) -> String {
    let mut spool = queue.create_spool().expect("spool");
    let id = spool.id().to_owned();
    spool.write(b"Subject: x\r\n\r\nbody\r\n");
    queue.commit(spool, &envelope(&id)).expect("commit");
    id
}

#[test]
fn operator_commands_list_hold_release_delete() {
    use std::time::Duration;
    let tmp = tempfile::tempdir().expect("tempdir");
    let queue = Queue::open(&tmp.path().join("q")).expect("open");
    assert!(
        Queue::at(&tmp.path().join("none"))
            .list()
            .expect("list")
            .is_empty()
    );
    let (a, b) = (queued(&queue), queued(&queue));
    let listed = queue.list().expect("list");
    assert_eq!(listed.len(), 2);
    assert_eq!((listed[0].size, listed[0].held), (20, false));
    assert_eq!(listed[0].recipients.len(), 1);

    // A message whose file went (being removed) is left out, not an error.
    std::fs::remove_file(queue.dir().join(format!("{b}.msg"))).expect("rm");
    assert_eq!(queue.list().expect("list").len(), 1);

    let wait = Duration::from_millis(50);
    queue.hold(&a, wait).expect("hold");
    assert!(queue.is_held(&a) && queue.list().expect("list")[0].held);
    queue.release(&a, wait).expect("release");
    assert!(matches!(
        queue.release(&a, wait),
        Err(admin::AdminError::NotHeld(_))
    ));

    // An attempt holds the lock: the commands wait, then give up.
    let lock = queue.try_lock(&a).expect("lock").expect("free");
    assert!(queue.try_lock(&a).expect("lock").is_none());
    assert!(matches!(
        queue.delete(&a, wait),
        Err(admin::AdminError::Busy { .. })
    ));
    drop(lock);
    queue.hold(&a, wait).expect("hold");
    queue.delete(&a, wait).expect("delete");
    assert!(
        files(queue.dir()).iter().all(|f| !f.starts_with(&a)),
        "{:?}",
        files(queue.dir())
    );
    assert!(matches!(
        queue.delete(&a, wait),
        Err(admin::AdminError::NotQueued(_))
    ));
}

#[test]
fn queue_ids_are_checked() {
    assert_eq!(
        admin::parse_id("662121095cf8609210000").expect("an id"),
        "662121095CF8609210000"
    );
    for bad in [
        "",
        "../x",
        "662121095CF860921000",
        "662121095CF8609210000.env",
        "G62121095CF8609210000",
    ] {
        assert!(admin::parse_id(bad).is_err(), "{bad}");
    }
    assert_eq!(admin::utc_time(1_767_225_600), "2026-01-01 00:00:00");
}

#[test]
fn runner_lock_says_whether_a_server_delivers() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let queue = Queue::open(&tmp.path().join("q")).expect("open");
    assert!(!control::runner_alive(queue.dir()).expect("check"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let requests = runtime.block_on(async { control::Requests::open(queue.dir()) });
    assert!(control::runner_alive(queue.dir()).expect("check"));
    drop(requests);
    assert!(!control::runner_alive(queue.dir()).expect("check"));
}
