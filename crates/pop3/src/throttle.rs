//! Failed logins per client address: the delay before each `-ERR [AUTH]`, and the
//! refusal of an address that keeps failing (docs/robustness.md §4.3, brute force).
//!
//! One bounded LRU table, shared by every worker behind a `std::sync::Mutex` held
//! only for a lookup (never across an `.await`). IPv6 addresses are counted per /64:
//! a host usually has the whole prefix and could otherwise pick a fresh address for
//! every guess.

use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroUsize;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use lru::LruCache;

use crate::config::AuthThrottle;

/// One address's recent failures.
#[derive(Debug, Clone, Copy)]
struct Record {
    failures: u32,
    last: Instant,
}

/// The table of recent failures.
#[derive(Debug)]
pub(crate) struct Throttle {
    config: AuthThrottle,
    table: Mutex<LruCache<IpAddr, Record>>,
}

impl Throttle {
    pub(crate) fn new(config: AuthThrottle) -> Throttle {
        let capacity = NonZeroUsize::new(config.max_clients).unwrap_or(NonZeroUsize::MIN);
        Throttle {
            config,
            table: Mutex::new(LruCache::new(capacity)),
        }
    }

    /// Whether logins from `ip` are refused without a password check.
    pub(crate) fn is_blocked(&self, ip: IpAddr, now: Instant) -> bool {
        let max = self.config.max_failures;
        max > 0 && self.failures(ip, now) >= max
    }

    /// Recent failures of `ip`.
    pub(crate) fn failures(&self, ip: IpAddr, now: Instant) -> u32 {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        table
            .peek(&key(ip))
            .filter(|r| now.duration_since(r.last) <= self.config.window)
            .map_or(0, |r| r.failures)
    }

    /// Counts a failed (or refused) login of `ip`; returns how long to wait before
    /// answering it.
    pub(crate) fn record_failure(&self, ip: IpAddr, now: Instant) -> Duration {
        let failures = {
            let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
            let record = table.get_or_insert_mut(key(ip), || Record {
                failures: 0,
                last: now,
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

    /// The wait after the `failures`-th failure: `delay` doubled each time, capped.
    fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.config
            .delay
            .saturating_mul(1 << doublings)
            .min(self.config.max_delay.max(self.config.delay))
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
