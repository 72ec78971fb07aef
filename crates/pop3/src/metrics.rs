//! This process's POP3 counters: logins by outcome and messages retrieved.
//! Prometheus reports per process, and so do these: they are `static`s rather
//! than fields of a [`crate::Server`], so a server rebuilt from a re-read
//! configuration (or a proxy beside a store host) counts into the same totals.
//! Each count is one relaxed atomic add, per login or per RETR/TOP.
//!
//! Nothing here knows Prometheus; the binary reads [`snapshot`] when scraped.

use std::sync::atomic::{AtomicU64, Ordering};

use stoa_pop3_proto::LoginDecision;

/// How a login ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Login {
    /// Logged in (at a store host, or relayed by the proxy).
    Ok,
    /// Wrong credentials, or refused by the throttle (`-ERR [AUTH]`).
    Failed,
    /// The credentials could not be checked or the mailbox not opened (`[IN-USE]`,
    /// `[LOGIN-DELAY]`, `[SYS/TEMP]`, `[SYS/PERM]`).
    Error,
}

impl Login {
    /// Every outcome, in the order of [`Login::label`].
    pub const ALL: [Login; 3] = [Login::Ok, Login::Failed, Login::Error];

    /// The `result` label.
    pub fn label(self) -> &'static str {
        match self {
            Login::Ok => "ok",
            Login::Failed => "failed",
            Login::Error => "error",
        }
    }

    fn of(decision: &LoginDecision) -> Login {
        match decision {
            LoginDecision::Accept(_) => Login::Ok,
            LoginDecision::BadCredentials => Login::Failed,
            _ => Login::Error,
        }
    }
}

static LOGINS: [AtomicU64; 3] = [const { AtomicU64::new(0) }; 3];
static RETRIEVALS: AtomicU64 = AtomicU64::new(0);

/// Counts the login `decision` handed to the session.
pub(crate) fn count_login(decision: &LoginDecision) {
    count(Login::of(decision));
}

/// Counts a login the proxy relayed to its store host.
pub(crate) fn count_proxied_login() {
    count(Login::Ok);
}

fn count(login: Login) {
    LOGINS[login as usize].fetch_add(1, Ordering::Relaxed);
}

/// Counts a RETR or TOP whose message was opened (its status line follows).
pub(crate) fn count_retrieval() {
    RETRIEVALS.fetch_add(1, Ordering::Relaxed);
}

/// This process's POP3 counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Logins by outcome, every [`Login`] listed.
    pub logins: Vec<(Login, u64)>,
    /// RETR and TOP commands served.
    pub retrievals: u64,
}

/// This process's POP3 counters.
pub fn snapshot() -> Snapshot {
    Snapshot {
        logins: Login::ALL
            .iter()
            .map(|&l| (l, LOGINS[l as usize].load(Ordering::Relaxed)))
            .collect(),
        retrievals: RETRIEVALS.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logins_count_by_outcome() {
        let of = |l: Login| snapshot().logins[l as usize].1;
        let before = (of(Login::Failed), of(Login::Error));
        count_login(&LoginDecision::BadCredentials);
        count_login(&LoginDecision::InUse);
        assert!(of(Login::Failed) > before.0);
        assert!(of(Login::Error) > before.1);
        for (i, (l, _)) in snapshot().logins.iter().enumerate() {
            assert_eq!(*l as usize, i);
        }
    }
}
