use std::sync::{Condvar, Mutex};
use std::time::Duration;

use super::*;
use crate::{MailboxId, Resolution};

/// How long a test waits for a state it expects before failing.
const PATIENCE: Duration = Duration::from_secs(10);

/// A directory whose full checks block until the test opens its gate; `cached@x`
/// with password `right` is a remembered success.
#[derive(Default)]
struct Gated {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    open: bool,
    running: usize,
    most_running: usize,
    calls: usize,
    /// The logins checked, in order.
    order: Vec<String>,
}

fn user(address: &str) -> User {
    User {
        address: address.to_owned(),
        mailbox: MailboxId(1),
        mail_host: None,
    }
}

impl Gated {
    /// Waits until `done` holds for the state, or fails the test.
    fn wait_until(&self, what: &str, done: impl Fn(&State) -> bool) {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (state, timeout) = self
            .changed
            .wait_timeout_while(state, PATIENCE, |s| !done(s))
            .unwrap_or_else(|e| e.into_inner());
        assert!(!timeout.timed_out(), "{what}: never happened");
        drop(state);
    }

    fn open(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).open = true;
        self.changed.notify_all();
    }

    fn order(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .order
            .clone()
    }

    fn snapshot(&self) -> (usize, usize, usize) {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (s.running, s.most_running, s.calls)
    }
}

impl Directory for Gated {
    fn is_local_domain(&self, _domain: &str) -> Result<bool> {
        Ok(true)
    }

    fn lookup(&self, _address: &str) -> Result<Option<User>> {
        Ok(None)
    }

    fn resolve(&self, _address: &str) -> Result<Resolution> {
        Ok(Resolution::Unknown)
    }

    fn verify_password(&self, login: &str, password: &str) -> Result<Option<User>> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.calls += 1;
        s.order.push(login.to_owned());
        s.running += 1;
        s.most_running = s.most_running.max(s.running);
        self.changed.notify_all();
        let mut s = self
            .changed
            .wait_while(s, |s| !s.open)
            .unwrap_or_else(|e| e.into_inner());
        s.running -= 1;
        self.changed.notify_all();
        Ok((password == "right").then(|| user(login)))
    }

    fn verify_cached(&self, login: &str, password: &str) -> Option<User> {
        (login == "cached@x" && password == "right").then(|| user(login))
    }
}

/// Turns nobody holds.
fn free(verifier: &Verifier) -> usize {
    verifier.line.lock().free
}

/// Waits until `n` logins wait in line, or fails the test.
fn wait_in_line(verifier: &Verifier, n: usize) {
    let deadline = std::time::Instant::now() + PATIENCE;
    while verifier.line.lock().waiting.len() != n {
        assert!(std::time::Instant::now() < deadline, "{n} in line: never");
        std::thread::yield_now();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn checks_beyond_the_limit_wait_in_line_and_all_finish() {
    let gated = Arc::new(Gated::default());
    let verifier = Arc::new(Verifier::with_limit(gated.clone(), 2));
    let rt = runtime();
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let verifier = Arc::clone(&verifier);
            let password = if i % 2 == 0 { "right" } else { "wrong" };
            rt.spawn(async move { verifier.verify(&format!("u{i}@x"), password).await })
        })
        .collect();
    gated.wait_until("two checks running", |s| s.running == 2);
    assert_eq!(free(&verifier), 0);
    gated.open();
    let answers: Vec<_> = tasks
        .into_iter()
        .map(|t| rt.block_on(t).expect("task").expect("check"))
        .collect();
    let (running, most, calls) = gated.snapshot();
    assert_eq!((running, calls), (0, 20));
    assert_eq!(most, 2, "never more than the limit at once");
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(answer.is_some(), i % 2 == 0, "login {i}");
    }
    assert_eq!(free(&verifier), 2);
}

#[test]
fn a_remembered_success_does_not_wait_behind_a_storm() {
    let gated = Arc::new(Gated::default());
    let verifier = Arc::new(Verifier::with_limit(gated.clone(), 1));
    let rt = runtime();
    let storm: Vec<_> = (0..5)
        .map(|i| {
            let verifier = Arc::clone(&verifier);
            rt.spawn(async move { verifier.verify(&format!("u{i}@x"), "right").await })
        })
        .collect();
    gated.wait_until("the storm's first check running", |s| s.running == 1);
    wait_in_line(&verifier, 4);
    // Every permit is taken and four checks wait: the cached user is answered
    // anyway, and a wrong password for it is not (it waits for a full check).
    let found = rt
        .block_on(verifier.verify("cached@x", "right"))
        .expect("check");
    assert_eq!(found.map(|u| u.address), Some("cached@x".to_owned()));
    assert_eq!(gated.snapshot().2, 1, "answered without a full check");
    let wrong = {
        let verifier = Arc::clone(&verifier);
        rt.spawn(async move { verifier.verify("cached@x", "wrong").await })
    };
    gated.open();
    assert_eq!(rt.block_on(wrong).expect("task").expect("check"), None);
    for t in storm {
        assert!(rt.block_on(t).expect("task").expect("check").is_some());
    }
    assert_eq!(gated.snapshot().2, 6);
}

#[test]
fn a_caller_that_stops_waiting_keeps_its_turn_until_its_check_ends() {
    let gated = Arc::new(Gated::default());
    let verifier = Arc::new(Verifier::with_limit(gated.clone(), 1));
    let rt = runtime();
    let first = {
        let verifier = Arc::clone(&verifier);
        rt.spawn(async move { verifier.verify("a@x", "right").await })
    };
    gated.wait_until("the check running", |s| s.running == 1);
    first.abort();
    assert!(rt.block_on(first).is_err_and(|e| e.is_cancelled()));
    // The thread still runs the check: its turn is still taken.
    assert_eq!(free(&verifier), 0);
    gated.open();
    gated.wait_until("the check finished", |s| s.running == 0);
    let turns = rt.block_on(async {
        let turn = tokio::time::timeout(PATIENCE, verifier.line.turn()).await;
        drop(turn.expect("the turn came back").expect("a turn"));
        free(&verifier)
    });
    assert_eq!(turns, 1);
}

#[test]
fn the_default_limit_is_the_directory_s() {
    let gated: Arc<dyn Directory> = Arc::new(Gated::default());
    let verifier = Verifier::new(Arc::clone(&gated));
    assert_eq!(free(&verifier), 2 * cores());
    assert_eq!(free(&Verifier::with_limit(gated, 0)), 1);
}

/// The order in which a line with `lifo_after` serves `first`, then `a`, `b`, `c`
/// queued behind it one after the other.
fn order_of_the_line(lifo_after: Duration) -> Vec<String> {
    let gated = Arc::new(Gated::default());
    let verifier = Arc::new(Verifier::with_order(gated.clone(), 1, lifo_after));
    let rt = runtime();
    let mut tasks = Vec::new();
    for (i, login) in ["first@x", "a@x", "b@x", "c@x"].into_iter().enumerate() {
        let v = Arc::clone(&verifier);
        tasks.push(rt.spawn(async move { v.verify(login, "right").await }));
        match i {
            0 => gated.wait_until("the first check running", |s| s.running == 1),
            _ => wait_in_line(&verifier, i),
        }
    }
    gated.open();
    for t in tasks {
        assert!(rt.block_on(t).expect("task").expect("check").is_some());
    }
    gated.order()
}

#[test]
fn a_moving_line_goes_in_order_and_a_standing_one_newest_first() {
    assert_eq!(
        order_of_the_line(Duration::MAX),
        ["first@x", "a@x", "b@x", "c@x"],
        "first come, first served"
    );
    assert_eq!(
        order_of_the_line(Duration::ZERO),
        ["first@x", "c@x", "b@x", "a@x"],
        "newest first"
    );
}

#[test]
fn a_turn_skips_logins_whose_callers_have_gone() {
    let gated = Arc::new(Gated::default());
    let verifier = Arc::new(Verifier::with_order(gated.clone(), 1, Duration::ZERO));
    let rt = runtime();
    let first = {
        let v = Arc::clone(&verifier);
        rt.spawn(async move { v.verify("first@x", "right").await })
    };
    gated.wait_until("the first check running", |s| s.running == 1);
    let kept = {
        let v = Arc::clone(&verifier);
        rt.spawn(async move { v.verify("kept@x", "right").await })
    };
    wait_in_line(&verifier, 1);
    let gone = {
        let v = Arc::clone(&verifier);
        rt.spawn(async move { v.verify("gone@x", "right").await })
    };
    wait_in_line(&verifier, 2);
    gone.abort();
    assert!(rt.block_on(gone).is_err_and(|e| e.is_cancelled()));
    gated.open();
    assert!(rt.block_on(first).expect("task").expect("check").is_some());
    assert!(rt.block_on(kept).expect("task").expect("check").is_some());
    assert_eq!(gated.order(), ["first@x", "kept@x"]);
    assert_eq!(free(&verifier), 1);
}

#[test]
fn the_line_drops_logins_whose_callers_have_gone_as_it_grows() {
    let gated = Arc::new(Gated::default());
    let verifier = Arc::new(Verifier::with_limit(gated.clone(), 1));
    let rt = runtime();
    let first = {
        let v = Arc::clone(&verifier);
        rt.spawn(async move { v.verify("first@x", "right").await })
    };
    gated.wait_until("the first check running", |s| s.running == 1);
    for i in 0..3 * PRUNE_FIRST {
        let before = verifier.line.lock().waiting.len();
        let v = Arc::clone(&verifier);
        let gone = rt.spawn(async move { v.verify(&format!("u{i}@x"), "right").await });
        // In line: one more, or the push pruned the line down to itself.
        let deadline = std::time::Instant::now() + PATIENCE;
        while verifier.line.lock().waiting.len() == before {
            assert!(
                std::time::Instant::now() < deadline,
                "login {i} never in line"
            );
            std::thread::yield_now();
        }
        gone.abort();
        let _ = rt.block_on(gone);
    }
    let left = verifier.line.lock().waiting.len();
    assert!(left <= PRUNE_FIRST, "{left} gone logins kept");
    gated.open();
    assert!(rt.block_on(first).expect("task").expect("check").is_some());
    assert_eq!(gated.snapshot().2, 1, "nobody else was checked");
    assert_eq!(free(&verifier), 1);
}
