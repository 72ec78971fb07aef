//! An ACME (RFC 8555) client for Stoa's automatic HTTPS (issue 55): the account,
//! the HTTP-01 answers, the order and the certificates' state directory.
//!
//! **The pieces.** [`Store`] owns the state directory (`DIR/account.json`,
//! `DIR/certs/<name>/{cert.pem,key.pem}`), every file written atomically.
//! [`Http01`] is the map the HTTP listener answers
//! `/.well-known/acme-challenge/TOKEN` from. [`obtain`] runs one order: load or
//! create the account, publish each authorization's HTTP-01 answer, wait for the
//! CA to validate, finalize with a fresh ECDSA P-256 key, download the chain and
//! store it. [`renew_at`] says when a certificate is due for renewal.
//!
//! **What it is not (yet).** Not wired into the `stoa` binary: no renewal loop,
//! no configuration keys, no hot reload of the TLS listeners. Those come with the
//! next slices of issue 55.
//!
//! The protocol itself (JWS, nonces, the directory, polling) is
//! [`instant_acme`]'s, with rustls on ring like the rest of the workspace.

mod http01;
mod issuer;
mod store;

use std::time::{Duration, SystemTime};

pub use http01::Http01;
pub use issuer::{Config, Eab, Error, obtain};
pub use store::{Certificate, Store, StoreError};

/// When a certificate valid from `not_before` to `not_after` is due for
/// renewal: two thirds of the way through its lifetime (Let's Encrypt's advice
/// for 90-day certificates: renew 30 days before the end).
///
/// A period that ends before it starts gives `not_after`, which has passed or
/// is meaningless either way: renew now.
pub fn renew_at(not_before: SystemTime, not_after: SystemTime) -> SystemTime {
    match not_after.duration_since(not_before) {
        Ok(lifetime) => not_before + lifetime_two_thirds(lifetime),
        Err(_) => not_after,
    }
}

fn lifetime_two_thirds(lifetime: Duration) -> Duration {
    // In whole nanoseconds through u128: no float rounding, no overflow.
    let nanos = lifetime.as_nanos() / 3 * 2;
    Duration::new(
        u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX),
        u32::try_from(nanos % 1_000_000_000).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renew_at_two_thirds() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let day = Duration::from_secs(86_400);
        assert_eq!(renew_at(start, start + 90 * day), start + 60 * day);
        assert_eq!(renew_at(start, start + 3 * day), start + 2 * day);
        // Sub-second lifetimes keep their precision.
        assert_eq!(
            renew_at(start, start + Duration::from_nanos(3)),
            start + Duration::from_nanos(2)
        );
    }

    #[test]
    fn renew_at_inverted_period_is_now() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let before = start - Duration::from_secs(10);
        assert_eq!(renew_at(start, before), before);
        assert_eq!(renew_at(start, start), start);
    }
}
