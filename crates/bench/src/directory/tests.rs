use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use stoa_directory::{MailboxId, Resolution, User};

use super::*;

/// A directory of `user1..userN@stoa.test` with password "pw" that counts calls
/// and remembers the addresses looked up.
struct Fake {
    users: u64,
    calls: AtomicU64,
    seen: Mutex<Vec<String>>,
    fail: bool,
}

impl Fake {
    fn new(users: u64) -> Fake {
        Fake {
            users,
            calls: AtomicU64::new(0),
            seen: Mutex::new(Vec::new()),
            fail: false,
        }
    }

    fn user(&self, address: &str) -> Option<User> {
        let n: u64 = address
            .strip_prefix("user")?
            .strip_suffix("@stoa.test")?
            .parse()
            .ok()?;
        (1..=self.users).contains(&n).then(|| User {
            address: address.to_owned(),
            mailbox: MailboxId(n),
            mail_host: None,
        })
    }
}

impl Directory for Fake {
    fn is_local_domain(&self, domain: &str) -> stoa_directory::Result<bool> {
        Ok(domain == "stoa.test")
    }

    fn lookup(&self, address: &str) -> stoa_directory::Result<Option<User>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if self.fail {
            return Err(stoa_directory::Error::Hashing("down".into()));
        }
        self.seen.lock().expect("lock").push(address.to_owned());
        Ok(self.user(address))
    }

    fn resolve(&self, _address: &str) -> stoa_directory::Result<Resolution> {
        Ok(Resolution::Unknown)
    }

    fn verify_password(&self, login: &str, password: &str) -> stoa_directory::Result<Option<User>> {
        Ok(self.user(login).filter(|_| password == "pw"))
    }
}

fn options(users: u64) -> Options {
    Options {
        users,
        domain: "stoa.test".into(),
        concurrency: vec![1, 3],
        duration: Duration::from_millis(50),
        cache: vec![Cache::Off, Cache::On],
        hot_set: 4,
        verify: Vec::new(),
        password: "pw".into(),
        seed: 7,
    }
}

#[test]
fn addresses_are_the_ldifs() {
    assert_eq!(address(1, "stoa.test"), "user1@stoa.test");
    assert_eq!(address(1_500_000, "x.test"), "user1500000@x.test");
}

#[test]
fn verify_flag() {
    let case = parse_verify("argon2=argon1@stoa.test, argon2@stoa.test").expect("valid");
    assert_eq!(case.label, "argon2");
    assert_eq!(case.logins, ["argon1@stoa.test", "argon2@stoa.test"]);
    for bad in ["ssha", "=a@b", "ssha=", "ssha=,"] {
        assert!(parse_verify(bad).is_err(), "{bad}");
    }
}

#[test]
fn every_combination_is_measured_and_finds_users() {
    let fake = Arc::new(Fake::new(100));
    let open = |_: Cache| Ok(fake.clone() as Arc<dyn Directory>);
    let mut o = options(100);
    o.verify = vec![parse_verify("plain=user5@stoa.test").expect("valid")];
    let all = run(&o, &open).expect("runs");
    let cases: Vec<(&str, usize)> = all
        .iter()
        .map(|m| (m.case.as_str(), m.concurrency))
        .collect();
    assert_eq!(
        cases,
        [
            ("lookup, cold (cache off)", 1),
            ("lookup, cold (cache off)", 3),
            ("lookup, warm (hot set cached)", 1),
            ("lookup, warm (hot set cached)", 3),
            ("verify_password plain, cache off", 1),
            ("verify_password plain, cache off", 3),
        ]
    );
    for m in &all {
        assert!(m.ok > 0 && m.misses == 0 && m.errors == 0, "{m:?}");
        assert_eq!(m.latency.count(), m.ok);
        assert!(m.elapsed >= o.duration);
        assert!(row(m).starts_with(&m.case));
    }
    let seen = fake.seen.lock().expect("lock");
    assert!(
        seen.iter().all(|a| fake.user(a).is_some()),
        "only existing users"
    );
}

#[test]
fn warm_runs_ask_only_for_the_hot_set() {
    let fake = Arc::new(Fake::new(1_000_000));
    let mut o = options(1_000_000);
    o.cache = vec![Cache::On];
    o.concurrency = vec![2];
    let hot = warm(fake.as_ref(), &o).expect("warms");
    assert_eq!(hot.len(), 4);
    let dir: Arc<dyn Directory> = fake.clone();
    let m = lookups(&dir, &o, Cache::On, &hot, 2);
    assert!(m.ok > 4);
    let seen = fake.seen.lock().expect("lock");
    assert!(seen.iter().all(|a| hot.contains(a)), "outside the hot set");
}

#[test]
fn a_directory_that_finds_nobody_or_fails_is_an_error() {
    let wrong = Arc::new(Fake::new(100));
    let mut o = options(100);
    o.domain = "other.test".into();
    let open = |_: Cache| Ok(wrong.clone() as Arc<dyn Directory>);
    let e = run(&o, &open).expect_err("nobody found");
    assert!(e.to_string().contains("nobody was found"), "{e}");

    let mut down = Fake::new(100);
    down.fail = true;
    let down = Arc::new(down);
    let open = |_: Cache| Ok(down.clone() as Arc<dyn Directory>);
    let e = run(&options(100), &open).expect_err("all failed");
    assert!(format!("{e:#}").contains("down"), "{e:#}");
}

#[test]
fn bad_options_are_refused() {
    let open = |_: Cache| -> anyhow::Result<Arc<dyn Directory>> { unreachable!("not opened") };
    for change in [
        (|o: &mut Options| o.users = 0) as fn(&mut Options),
        |o| o.concurrency = vec![],
        |o| o.concurrency = vec![1, 0],
        |o| o.duration = Duration::ZERO,
    ] {
        let mut o = options(10);
        change(&mut o);
        assert!(run(&o, &open).is_err());
    }
}
