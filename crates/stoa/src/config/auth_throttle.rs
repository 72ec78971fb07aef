//! The failed-login throttle's four keys, which `[smtp]` and `[pop3]` both take
//! (and `[pop3_proxy]`, for its own throttle).
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
pub(crate) struct Given {
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

/// One table whose server counts failed logins in the process's one throttle.
#[derive(Debug, Clone)]
pub(super) struct Sharer {
    /// The table, `smtp`.
    pub(super) table: &'static str,
    /// Its logins in words, `SMTP AUTH`.
    pub(super) logins: &'static str,
    /// The keys it gave.
    pub(super) given: Given,
}

/// The one set of settings of the servers that share the throttle (SMTP and
/// POP3): each key from whichever table gives it; a key two give differently
/// is an error. The defaults when none runs.
pub(super) fn share(tables: &[Sharer], r: &mut Report) -> AuthThrottle {
    let merged = Given {
        delay: pick(DELAY, tables, |g| g.delay, r),
        max_delay: pick(MAX_DELAY, tables, |g| g.max_delay, r),
        max_failures: pick(KEYS[2], tables, |g| g.max_failures, r),
        window: pick(KEYS[3], tables, |g| g.window, r),
    };
    let a = merged.settings();
    // Each table's own values were checked; only a mix can break the rule anew.
    let each_valid = tables.iter().all(|t| {
        let own = t.given.settings();
        own.max_delay >= own.delay
    });
    if each_valid && tables.len() > 1 {
        let names: Vec<&str> = tables.iter().map(|t| t.table).collect();
        r.check(
            a.max_delay >= a.delay,
            &format!(
                "{MAX_DELAY}: must be at least {DELAY} ({} share them: the one from each \
                 table, together)",
                names.join(" and ")
            ),
        );
    }
    a
}

/// One key: from the first table that gives it, or an error naming two
/// values that differ.
fn pick<T: PartialEq + std::fmt::Debug + Copy>(
    key: &str,
    tables: &[Sharer],
    value: impl Fn(&Given) -> Option<T>,
    r: &mut Report,
) -> Option<T> {
    let mut given = tables
        .iter()
        .filter_map(|t| value(&t.given).map(|v| (t, v)));
    let (first, v) = given.next()?;
    if let Some((other, w)) = given.find(|(_, w)| *w != v) {
        r.errors.push(format!(
            "{}.{key} ({v:?}) and {}.{key} ({w:?}) differ: {} and {} share one failed-login \
             count per client address, so give the same value or set it in one table only",
            first.table, other.table, first.logins, other.logins
        ));
    }
    Some(v)
}

/// The four keys, as `stoa check-config` prints them.
pub(super) fn print(doc: &mut super::print::Doc, a: &AuthThrottle) {
    use super::print::{duration, int};
    doc.set(DELAY, duration(a.delay));
    doc.set(MAX_DELAY, duration(a.max_delay));
    doc.set(KEYS[2], int(a.max_failures));
    doc.set(KEYS[3], duration(a.window));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(text: &str, path: &str) -> (Given, Report) {
        let mut r = Report::default();
        let table: Table = text.parse().expect("toml");
        (read(&table, path, &mut r), r)
    }

    fn both(smtp: Given, pop3: Given) -> [Sharer; 2] {
        [
            Sharer {
                table: "smtp",
                logins: "SMTP AUTH",
                given: smtp,
            },
            Sharer {
                table: "pop3",
                logins: "POP3 logins",
                given: pop3,
            },
        ]
    }

    #[test]
    fn a_key_in_one_table_applies_to_both() {
        let (smtp, _) = given("auth_max_failures = 3\n", "smtp.");
        let (pop3, _) = given("auth_failure_delay = \"50ms\"\n", "pop3.");
        let mut r = Report::default();
        let a = share(&both(smtp, pop3), &mut r);
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
        share(&both(smtp, pop3), &mut r);
        assert_eq!(
            r.errors,
            [
                "smtp.auth_max_failures (4) and pop3.auth_max_failures (5) differ: SMTP AUTH and \
              POP3 logins share one failed-login count per client address, so give the same \
              value or set it in one table only"
            ]
        );
    }

    #[test]
    fn a_mix_that_breaks_the_order_is_refused() {
        let (smtp, _) = given("auth_failure_delay = \"5s\"\n", "smtp.");
        let (pop3, _) = given("auth_failure_max_delay = \"3s\"\n", "pop3.");
        let mut r = Report::default();
        share(&both(smtp, pop3), &mut r);
        assert!(
            r.errors.iter().any(|e| e.contains("must be at least")),
            "{:?}",
            r.errors
        );
    }
}
