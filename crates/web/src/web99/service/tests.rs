use std::sync::Arc;

use super::*;

fn entry(n: u32) -> PostEntry {
    PostEntry {
        dir: n % 100,
        class: 1,
        num: 3,
        client: n,
        file: format!("/file_set/dir{:05}/class1_3", n % 100),
        cookie: 10_000 + n,
    }
}

fn post(service: &Service, n: u32) -> Result<u64, String> {
    let (tx, rx) = oneshot::channel();
    assert!(service.submit(Job::Post(entry(n), tx)));
    rx.blocking_recv().expect("answer")
}

fn fetch(service: &Service) -> String {
    let (tx, rx) = oneshot::channel();
    assert!(service.submit(Job::Fetch(tx)));
    String::from_utf8(rx.blocking_recv().expect("answer").expect("log")).expect("ascii")
}

#[test]
fn a_new_state_directory_gets_tables_and_an_empty_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("state");
    let service = Service::start(&state).expect("start");
    assert_eq!(fetch(&service), "         0\n");
    let tables = service.tables();
    assert_eq!(tables.users.len(), 10_000);
    assert_eq!(tables.ads.len(), 360);
    assert!(state.join(USERS).is_file() && state.join(ADS).is_file());
}

#[test]
fn posts_are_numbered_across_threads_and_parse() {
    let dir = tempfile::tempdir().expect("tempdir");
    let service = Arc::new(Service::start(dir.path()).expect("start"));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let s = Arc::clone(&service);
            std::thread::spawn(move || {
                (0..250)
                    .map(|i| post(&s, t * 1000 + i).expect("logged"))
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut numbers: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("thread"))
        .collect();
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=1000).collect::<Vec<_>>());
    let records = postlog::parse(&fetch(&service)).expect("a valid log");
    assert_eq!(records.len(), 1000);
}

#[test]
fn reset_regenerates_tables_and_empties_the_log() {
    let dir = tempfile::tempdir().expect("tempdir");
    let service = Service::start(dir.path()).expect("start");
    post(&service, 1).expect("logged");
    let params = ResetParams {
        maxload: 50,
        pttime: 100,
        maxthread: 60,
        expired: [1, 100],
    };
    let (tx, rx) = oneshot::channel();
    assert!(service.submit(Job::Reset(params, tx)));
    rx.blocking_recv().expect("answer").expect("reset");
    assert_eq!(fetch(&service), "         0\n");
    assert_eq!(service.tables().users.len(), 60);
    let users = std::fs::read_to_string(dir.path().join(USERS)).expect("users");
    assert_eq!(users, ads::user_personality(&params));
    assert_eq!(post(&service, 2), Ok(1), "numbering restarts");
}

#[test]
fn a_torn_tail_and_a_stale_count_are_repaired_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let service = Service::start(dir.path()).expect("start");
        for n in 0..3 {
            post(&service, n).expect("logged");
        }
    }
    let path = dir.path().join(POST_LOG);
    let mut bytes = std::fs::read(&path).expect("read");
    // A crash after the records but before the count, and half of a fourth record.
    bytes[..HEADER].copy_from_slice(postlog::count_line(2).as_bytes());
    bytes.extend_from_within(HEADER..HEADER + 70);
    std::fs::write(&path, &bytes).expect("write");

    let service = Service::start(dir.path()).expect("restart");
    let log = fetch(&service);
    assert_eq!(postlog::parse(&log).map(|r| r.len()), Ok(3));
    assert_eq!(post(&service, 9), Ok(4));
    drop(service);
    assert_eq!(
        std::fs::metadata(&path).expect("meta").len(),
        (HEADER + 4 * RECORD) as u64
    );
}

#[test]
fn appends_land_in_preallocated_zeros_and_a_clean_stop_leaves_the_kits_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(POST_LOG);
    let on_disk = || std::fs::read(&path).expect("read");
    let service = Service::start(dir.path()).expect("start");
    for n in 0..3 {
        post(&service, n).expect("logged");
    }
    // Commits leave the count line alone and write into zeros already there.
    let bytes = on_disk();
    assert_eq!(&bytes[..HEADER], postlog::count_line(0).as_bytes());
    assert!(bytes.len() as u64 >= PREALLOCATE);
    assert!(bytes[HEADER..HEADER + 3 * RECORD].iter().all(|&b| b != 0));
    assert!(bytes[HEADER + 3 * RECORD..].iter().all(|&b| b == 0));
    // A Fetch gives only the records and brings the line up to date.
    let log = fetch(&service);
    assert_eq!(postlog::parse(&log).map(|r| r.len()), Ok(3));
    assert_eq!(&on_disk()[..HEADER], postlog::count_line(3).as_bytes());
    post(&service, 3).expect("logged");
    drop(service);
    let bytes = on_disk();
    assert_eq!(bytes.len(), HEADER + 4 * RECORD);
    assert_eq!(&bytes[..HEADER], postlog::count_line(4).as_bytes());
}

#[test]
fn a_crash_with_a_zero_tail_or_a_torn_batch_is_repaired_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(POST_LOG);
    let service = Service::start(dir.path()).expect("start");
    for n in 0..4 {
        post(&service, n).expect("logged");
    }
    // The file as a crash leaves it: a stale count line, the zero tail, and the
    // last batch torn (record 3's middle sector lost, record 4 whole).
    let mut bytes = std::fs::read(&path).expect("read");
    drop(service);
    assert_eq!(&bytes[..HEADER], postlog::count_line(0).as_bytes());
    let hole = HEADER + 2 * RECORD + 50;
    bytes[hole..hole + 20].fill(0);
    std::fs::write(&path, &bytes).expect("write");

    let service = Service::start(dir.path()).expect("restart");
    let log = fetch(&service);
    assert_eq!(postlog::parse(&log).map(|r| r.len()), Ok(2));
    assert_eq!(post(&service, 9), Ok(3));
    drop(service);
    let bytes = std::fs::read(&path).expect("read");
    assert_eq!(bytes.len(), HEADER + 3 * RECORD);
    assert!(postlog::parse(std::str::from_utf8(&bytes).expect("text")).is_ok());
}

#[test]
fn corrupt_tables_are_regenerated() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join(USERS), "garbage").expect("write");
    let service = Service::start(dir.path()).expect("start");
    assert_eq!(service.tables().users.len(), 10_000);
}

#[test]
fn a_commit_waits_only_when_posts_come_back_to_back_and_waiting_pays() {
    let soon = Some(COMMIT_WINDOW / 2);
    let mut linger = Linger::default();
    // The first POST, or one after a pause, is never held.
    assert!(!linger.wait(None));
    assert!(!linger.wait(Some(COMMIT_WINDOW)));
    // Back to back: wait; a wait that gathers more keeps waiting.
    assert!(linger.wait(soon));
    linger.waited(3);
    assert!(linger.wait(soon));
    // Waits that gather nothing skip 1, 2, 4 … commits before the next try.
    let mut skipped = Vec::new();
    for _ in 0..4 {
        linger.waited(1);
        let mut n = 0;
        while !linger.wait(soon) {
            n += 1;
        }
        skipped.push(n);
    }
    assert_eq!(skipped, [1, 2, 4, 8]);
    // Up to MAX_BACKOFF; one wait that pays resets it.
    for _ in 0..20 {
        linger.waited(1);
    }
    assert_eq!(linger.skip, MAX_BACKOFF);
    linger.skip = 0;
    assert!(linger.wait(soon));
    linger.waited(2);
    assert!(linger.wait(soon));
}
