//! Failed logins per client address, for every server that checks passwords (POP3
//! logins, SMTP AUTH): the delay before each refusal, and the refusal of an address
//! that keeps failing, without its password being checked (docs/robustness.md §4.3,
//! brute force).
//!
//! One bounded LRU table behind a `std::sync::Mutex` held only for a lookup (never
//! across an `.await`), shared by every worker and, through an `Arc`, by every
//! server of the process: failures counted by one protocol slow the same address on
//! the others. IPv6 addresses are counted per /64: a host usually has the whole
//! prefix and could otherwise pick a fresh address for every guess.
//!
//! The table only counts; waiting is the caller's job (a timer of its event loop,
//! never a blocked thread), as is the reply, which must be the same for a wrong
//! password and a refused address.
//!
//! Logins whose password is being checked count too ([`Throttle::begin`] and its
//! [`Attempt`]): otherwise a guesser sending thirty logins at once would have all
//! thirty checked before the first failure is counted. Past the limit, a login
//! waits for one in flight to end, then is judged with its outcome counted: fifty
//! right passwords at once (users behind one NAT, a benchmark) all get in, ten at
//! a time, and thirty wrong ones get ten checks.

use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use lru::LruCache;
use tokio::sync::Notify;

/// What failed logins cost a client address (docs/robustness.md §3.7 and §4.3).
/// Failures are counted per address (per /64 for IPv6, which a single host gets
/// whole) in a bounded table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthThrottle {
    /// Wait before answering the first failed login of an address. Default 2 s
    /// (Dovecot's `auth_failure_delay`). Each further failure doubles it …
    pub delay: Duration,
    /// … up to this. Default 15 s (docs/robustness.md §3.7).
    pub max_delay: Duration,
    /// Failures after which an address is refused outright: its logins get the same
    /// refusal, after [`AuthThrottle::max_delay`], without the password being
    /// checked, so a guesser cannot even tell when it found the password. 0 for no
    /// such refusal. Default 10.
    pub max_failures: u32,
    /// An address's count is forgotten after this long without a failure (refused
    /// attempts count as failures, so a persistent guesser stays refused). Default
    /// 10 minutes.
    pub window: Duration,
    /// Addresses remembered; beyond it the one that failed longest ago is
    /// forgotten. Default 65,536 (a few megabytes).
    pub max_clients: usize,
}

impl Default for AuthThrottle {
    fn default() -> Self {
        AuthThrottle {
            delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(15),
            max_failures: 10,
            window: Duration::from_secs(600),
            max_clients: 65_536,
        }
    }
}

/// One address's recent failures, and its logins being checked now.
#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    last: Instant,
    in_flight: u32,
}

/// A login whose password is being checked ([`Throttle::begin`]): it counts
/// against its address until [`Attempt::failed`], [`Attempt::succeeded`] or its
/// drop.
#[derive(Debug)]
pub struct Attempt {
    throttle: Arc<Throttle>,
    ip: IpAddr,
    open: bool,
}

impl Attempt {
    /// The password was wrong (or the login refused): counts the failure; returns
    /// how long to wait before answering.
    pub fn failed(mut self, now: Instant) -> Duration {
        self.open = false;
        // Counted before the place is freed, so a waiting login sees the failure.
        let delay = self.throttle.record_failure(self.ip, now);
        self.throttle.end(self.ip);
        delay
    }

    /// The login succeeded.
    pub fn succeeded(mut self) {
        self.open = false;
        self.throttle.end(self.ip);
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if self.open {
            self.throttle.end(self.ip);
        }
    }
}

/// The table of recent failures, shared by every connection that checks passwords.
#[derive(Debug)]
pub struct Throttle {
    config: AuthThrottle,
    table: Mutex<LruCache<IpAddr, Record>>,
    /// Woken when a login in flight ends (for those waiting in [`Throttle::begin`]).
    ended: Notify,
}

/// What [`Throttle::try_begin`] decided.
enum Admission {
    Admitted,
    Refused,
    Wait,
}

impl Throttle {
    /// Its settings.
    pub fn settings(&self) -> &AuthThrottle {
        &self.config
    }

    /// An empty table with these settings.
    pub fn new(config: AuthThrottle) -> Throttle {
        let capacity = NonZeroUsize::new(config.max_clients).unwrap_or(NonZeroUsize::MIN);
        Throttle {
            config,
            table: Mutex::new(LruCache::new(capacity)),
            ended: Notify::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &AuthThrottle {
        &self.config
    }

    /// Whether logins from `ip` are refused without a password check.
    pub fn is_blocked(&self, ip: IpAddr, now: Instant) -> bool {
        let max = self.config.max_failures;
        max > 0 && self.failures(ip, now) >= max
    }

    /// Recent failures of `ip`.
    pub fn failures(&self, ip: IpAddr, now: Instant) -> u32 {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table
            .peek(&key(ip))
            .filter(|r| now.duration_since(r.last) <= self.config.window)
            .map_or(0, |r| r.failures)
    }

    /// Counts a failed login of `ip`; returns how long to wait before answering it.
    pub fn record_failure(&self, ip: IpAddr, now: Instant) -> Duration {
        let failures = {
            let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
            let record = table.get_or_insert_mut(key(ip), || Record {
                failures: 0,
                last: now,
                in_flight: 0,
            });
            if now.duration_since(record.last) > self.config.window {
                record.failures = 0;
            }
            record.failures = record.failures.saturating_add(1);
            record.last = now;
            record.failures
        };
        self.delay(failures)
    }

    /// Starts a login of `ip` whose password is about to be checked. Refused
    /// (`Err`, with the wait before the refusal, counted as a failure) when the
    /// address's recent failures reach [`AuthThrottle::max_failures`]; when they
    /// and the logins it has in flight do, it waits for one of those to end and
    /// judges again; else the [`Attempt`], counted until it ends.
    pub async fn begin(self: &Arc<Self>, ip: IpAddr) -> Result<Attempt, Duration> {
        loop {
            let ended = self.ended.notified();
            tokio::pin!(ended);
            // Registered before the look, so an end between the look and the
            // wait is not missed.
            ended.as_mut().enable();
            match self.try_begin(ip, Instant::now()) {
                Admission::Admitted => {
                    return Ok(Attempt {
                        throttle: Arc::clone(self),
                        ip,
                        open: true,
                    });
                }
                Admission::Refused => return Err(self.record_refusal(ip, Instant::now())),
                Admission::Wait => ended.await,
            }
        }
    }

    fn try_begin(&self, ip: IpAddr, now: Instant) -> Admission {
        let max = self.config.max_failures;
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let record = table.get_or_insert_mut(key(ip), || Record {
            failures: 0,
            last: now,
            in_flight: 0,
        });
        if now.duration_since(record.last) > self.config.window {
            record.failures = 0;
        }
        if max == 0 || record.failures.saturating_add(record.in_flight) < max {
            record.in_flight += 1;
            Admission::Admitted
        } else if record.failures >= max {
            Admission::Refused
        } else {
            Admission::Wait
        }
    }

    fn end(&self, ip: IpAddr) {
        {
            let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(record) = table.peek_mut(&key(ip)) {
                record.in_flight = record.in_flight.saturating_sub(1);
            }
        }
        self.ended.notify_waiters();
    }

    /// Counts a login of `ip` refused unchecked ([`Throttle::is_blocked`]) as a
    /// failure, so a persistent guesser stays refused; returns the wait before the
    /// refusal: the longest, whatever the count.
    pub fn record_refusal(&self, ip: IpAddr, now: Instant) -> Duration {
        self.record_failure(ip, now);
        self.longest_delay()
    }

    /// The longest wait, that of a refused address.
    pub fn longest_delay(&self) -> Duration {
        self.config.max_delay.max(self.config.delay)
    }

    /// The wait after the `failures`-th failure: `delay` doubled each time, capped.
    fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.config
            .delay
            .saturating_mul(1 << doublings)
            .min(self.longest_delay())
    }
}

/// The table key: the address, or its /64 for IPv6 (IPv4-mapped addresses count as
/// IPv4).
fn key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = v6.to_bits() & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from_bits(prefix))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AuthThrottle {
        AuthThrottle {
            delay: Duration::from_secs(2),
            max_delay: Duration::from_secs(15),
            max_failures: 4,
            window: Duration::from_secs(60),
            max_clients: 2,
        }
    }

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("address")
    }

    #[test]
    fn delay_doubles_to_the_cap_and_the_address_is_blocked() {
        let throttle = Throttle::new(config());
        let (a, b, now) = (ip("192.0.2.1"), ip("192.0.2.2"), Instant::now());
        let delays: Vec<u64> = (0..5)
            .map(|_| throttle.record_failure(a, now).as_secs())
            .collect();
        assert_eq!(delays, [2, 4, 8, 15, 15]);
        assert!(throttle.is_blocked(a, now));
        assert!(!throttle.is_blocked(b, now), "per address");
        let later = now + Duration::from_secs(61);
        assert!(!throttle.is_blocked(a, later), "forgotten after the window");
        assert_eq!(throttle.record_failure(a, later), Duration::from_secs(2));
    }

    #[test]
    fn a_refusal_waits_the_longest_and_counts() {
        let throttle = Throttle::new(config());
        let (a, now) = (ip("192.0.2.1"), Instant::now());
        assert_eq!(throttle.record_refusal(a, now), Duration::from_secs(15));
        assert_eq!(throttle.failures(a, now), 1);
    }

    fn block_on<T>(future: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime")
            .block_on(future)
    }

    #[test]
    fn logins_in_flight_count_against_the_address() {
        // Issue 56: thirty logins at once all had their password checked.
        let throttle = Arc::new(Throttle::new(config()));
        let a = ip("192.0.2.1");
        block_on(async {
            let mut admitted = Vec::new();
            for _ in 0..4 {
                admitted.push(throttle.begin(a).await.expect("admitted"));
            }
            // A fifth waits for one of the four; their failures then refuse it.
            let fifth = tokio::spawn({
                let throttle = Arc::clone(&throttle);
                async move { throttle.begin(a).await.err() }
            });
            tokio::task::yield_now().await;
            assert!(!fifth.is_finished(), "the fifth waits");
            for attempt in admitted {
                attempt.failed(Instant::now());
            }
            assert_eq!(fifth.await.expect("task"), Some(Duration::from_secs(15)));
            assert_eq!(throttle.failures(a, Instant::now()), 5);
            // Right passwords at once all get in, four at a time.
            let b = ip("192.0.2.2");
            let mut tasks = Vec::new();
            for _ in 0..12 {
                let throttle = Arc::clone(&throttle);
                tasks.push(tokio::spawn(async move {
                    let attempt = throttle.begin(b).await;
                    tokio::task::yield_now().await;
                    attempt.map(Attempt::succeeded).is_ok()
                }));
            }
            for task in tasks {
                assert!(task.await.expect("task"), "a right password refused");
            }
            assert_eq!(throttle.failures(b, Instant::now()), 0);
        });
    }

    #[test]
    fn an_attempt_dropped_without_an_outcome_counts_nothing() {
        let throttle = Arc::new(Throttle::new(config()));
        let b = ip("192.0.2.9");
        block_on(async {
            drop(throttle.begin(b).await.expect("admitted"));
            assert_eq!(throttle.failures(b, Instant::now()), 0);
            assert!(throttle.begin(b).await.is_ok());
        });
    }

    #[test]
    fn the_table_is_bounded() {
        let throttle = Throttle::new(config());
        let now = Instant::now();
        for text in ["192.0.2.1", "192.0.2.2", "192.0.2.3"] {
            for _ in 0..4 {
                throttle.record_failure(ip(text), now);
            }
        }
        assert!(!throttle.is_blocked(ip("192.0.2.1"), now), "evicted");
        assert!(throttle.is_blocked(ip("192.0.2.3"), now));
    }

    #[test]
    fn ipv6_counts_per_64() {
        let throttle = Throttle::new(config());
        let now = Instant::now();
        for last in 1..=4 {
            throttle.record_failure(ip(&format!("2001:db8:1:2::{last}")), now);
        }
        assert!(throttle.is_blocked(ip("2001:db8:1:2:ffff::1"), now));
        assert!(!throttle.is_blocked(ip("2001:db8:1:3::1"), now));
        throttle.record_failure(ip("::ffff:192.0.2.9"), now);
        assert_eq!(throttle.failures(ip("192.0.2.9"), now), 1);
    }
}
