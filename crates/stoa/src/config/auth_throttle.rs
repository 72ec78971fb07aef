//! The failed-login throttle's four keys, which `[smtp]` and `[pop3]` both take.
//!
//! `stoa serve` counts SMTP AUTH and POP3 login failures in one table per client
//! address (a guesser must not get twice the tries by switching service), so a
//! process has one set of settings. A key may be given in either table and then
//! applies to both; given in both, the values must be equal, else the
//! configuration is refused (no silent precedence of one table over the other).

use std::time::Duration;

use stoa_netkit::throttle::AuthThrottle;
use toml::Table;

use super::Report;

/// The keys, as both tables list them.
const KEYS: [&str; 4] = [DELAY, MAX_DELAY, "auth_max_failures", "auth_failure_window"];

const DELAY: &str = "auth_failure_delay";
const MAX_DELAY: &str = "auth_failure_max_delay";

/// The settings one table gave; `None` for a key it left out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Given {
    delay: Option<Duration>,
    max_delay: Option<Duration>,
    max_failures: Option<u32>,
    window: Option<Duration>,
}

/// The keys of table `t` (`path` is `smtp.` or `pop3.`, for messages).
pub(super) fn read(t: &Table, path: &str, r: &mut Report) -> Given {
    let mut a = AuthThrottle::default();
    r.duration(t, path, DELAY, &mut a.delay);
    r.duration(t, path, MAX_DELAY, &mut a.max_delay);
    r.integer_into(t, path, KEYS[2], &mut a.max_failures);
    r.duration(t, path, KEYS[3], &mut a.window);
    Given {
        delay: t.contains_key(DELAY).then_some(a.delay),
        max_delay: t.contains_key(MAX_DELAY).then_some(a.max_delay),
        max_failures: t.contains_key(KEYS[2]).then_some(a.max_failures),
        window: t.contains_key(KEYS[3]).then_some(a.window),
    }
}

impl Given {
    /// The settings: the given keys over the defaults.
    pub(super) fn settings(&self) -> AuthThrottle {
        let mut a = AuthThrottle::default();
        a.delay = self.delay.unwrap_or(a.delay);
        a.max_delay = self.max_delay.unwrap_or(a.max_delay);
        a.max_failures = self.max_failures.unwrap_or(a.max_failures);
        a.window = self.window.unwrap_or(a.window);
        a
    }
}

/// Checks one table's settings (`path` names the table).
pub(super) fn validate(a: &AuthThrottle, path: &str, r: &mut Report) {
    r.nonzero(path, &[(KEYS[3], a.window)]);
    r.check(
        a.max_delay >= a.delay,
        &format!("{path}{MAX_DELAY}: must be at least {DELAY}"),
    );
}

/// The one set of settings when SMTP and POP3 run together: each key from
/// whichever table gives it; a key both give differently is an error.
pub(super) fn share(smtp: &Given, pop3: &Given, r: &mut Report) -> AuthThrottle {
    let merged = Given {
        delay: pick(DELAY, smtp.delay, pop3.delay, r),
        max_delay: pick(MAX_DELAY, smtp.max_delay, pop3.max_delay, r),
        max_failures: pick(KEYS[2], smtp.max_failures, pop3.max_failures, r),
        window: pick(KEYS[3], smtp.window, pop3.window, r),
    };
    let a = merged.settings();
    // Each table's own values were checked; only a mix can break the rule anew.
    let (own_smtp, own_pop3) = (smtp.settings(), pop3.settings());
    if own_smtp.max_delay >= own_smtp.delay && own_pop3.max_delay >= own_pop3.delay {
        r.check(
            a.max_delay >= a.delay,
            &format!(
                "{MAX_DELAY}: must be at least {DELAY} (smtp and pop3 share them: the one \
                 from each table, together)"
            ),
        );
    }
    a
}

/// One key: from either table, or an error naming both values.
fn pick<T: PartialEq + std::fmt::Debug + Copy>(
    key: &str,
    smtp: Option<T>,
    pop3: Option<T>,
    r: &mut Report,
) -> Option<T> {
    match (smtp, pop3) {
        (Some(s), Some(p)) if s != p => {
            r.errors.push(format!(
                "smtp.{key} ({s:?}) and pop3.{key} ({p:?}) differ: SMTP AUTH and POP3 logins \
                 share one failed-login count per client address, so give the same value or \
                 set it in one table only"
            ));
            Some(s)
        }
        (s, p) => s.or(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(text: &str, path: &str) -> (Given, Report) {
        let mut r = Report::default();
        let table: Table = text.parse().expect("toml");
        (read(&table, path, &mut r), r)
    }

    #[test]
    fn a_key_in_one_table_applies_to_both() {
        let (smtp, _) = given("auth_max_failures = 3\n", "smtp.");
        let (pop3, _) = given("auth_failure_delay = \"50ms\"\n", "pop3.");
        let mut r = Report::default();
        let a = share(&smtp, &pop3, &mut r);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(a.max_failures, 3);
        assert_eq!(a.delay, Duration::from_millis(50));
        assert_eq!(a.max_delay, AuthThrottle::default().max_delay);
    }

    #[test]
    fn equal_values_agree_and_different_ones_are_refused() {
        let (smtp, _) = given(
            "auth_failure_delay = \"1s\"\nauth_max_failures = 4\n",
            "smtp.",
        );
        let (pop3, _) = given("auth_failure_delay = 1\nauth_max_failures = 5\n", "pop3.");
        let mut r = Report::default();
        share(&smtp, &pop3, &mut r);
        assert_eq!(r.errors.len(), 1, "{:?}", r.errors);
        assert!(
            r.errors[0].starts_with("smtp.auth_max_failures (4) and pop3.auth_max_failures (5)"),
            "{:?}",
            r.errors
        );
    }

    #[test]
    fn a_mix_that_breaks_the_order_is_refused() {
        let (smtp, _) = given("auth_failure_delay = \"5s\"\n", "smtp.");
        let (pop3, _) = given("auth_failure_max_delay = \"3s\"\n", "pop3.");
        let mut r = Report::default();
        share(&smtp, &pop3, &mut r);
        assert!(
            r.errors.iter().any(|e| e.contains("must be at least")),
            "{:?}",
            r.errors
        );
    }
}
