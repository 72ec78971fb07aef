//! This process's directory counters: hits and misses of the directory's caches,
//! and LDAP failures. Prometheus reports per process, and so do these: they are
//! `static`s rather than fields of a directory, so a directory reopened from a
//! re-read configuration counts into the same totals. Each count is one relaxed
//! atomic add, beside a hash-map lookup behind a mutex or an LDAP round trip.
//!
//! Nothing here knows Prometheus; the binary reads [`snapshot`] when scraped.

use std::sync::atomic::{AtomicU64, Ordering};

/// Which cache was asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cache {
    /// The LDAP backend's cache of entries and domains, found or not.
    Lookup,
    /// The cache of successful password checks (both backends).
    Password,
}

impl Cache {
    /// Every cache, in the order of [`Cache::label`].
    pub const ALL: [Cache; 2] = [Cache::Lookup, Cache::Password];

    /// The `cache` label.
    pub fn label(self) -> &'static str {
        match self {
            Cache::Lookup => "lookup",
            Cache::Password => "password",
        }
    }
}

/// `[cache][hit as usize]`.
static CACHE: [[AtomicU64; 2]; 2] = [const { [const { AtomicU64::new(0) }; 2] }; 2];
static LDAP_ERRORS: AtomicU64 = AtomicU64::new(0);

/// Counts one question to an enabled `cache`, answered (`hit`) or not.
pub(crate) fn count_cache(cache: Cache, hit: bool) {
    CACHE[cache as usize][usize::from(hit)].fetch_add(1, Ordering::Relaxed);
}

/// Counts one failed LDAP operation or connection attempt (a timeout, a server
/// that does not answer, every connection busy).
pub(crate) fn count_ldap_error() {
    LDAP_ERRORS.fetch_add(1, Ordering::Relaxed);
}

/// This process's directory counters at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// `(cache, hits, misses)` for every [`Cache`].
    pub caches: Vec<(Cache, u64, u64)>,
    /// Failed LDAP operations and connection attempts.
    pub ldap_errors: u64,
}

/// This process's directory counters.
pub fn snapshot() -> Snapshot {
    let read = |c: Cache, hit: bool| CACHE[c as usize][usize::from(hit)].load(Ordering::Relaxed);
    Snapshot {
        caches: Cache::ALL
            .iter()
            .map(|&c| (c, read(c, true), read(c, false)))
            .collect(),
        ldap_errors: LDAP_ERRORS.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_and_misses_count_apart() {
        let before = snapshot();
        count_cache(Cache::Password, true);
        count_cache(Cache::Lookup, false);
        count_ldap_error();
        let after = snapshot();
        assert!(after.caches[1].1 > before.caches[1].1);
        assert!(after.caches[0].2 > before.caches[0].2);
        assert!(after.ldap_errors > before.ldap_errors);
        assert_eq!(after.caches[1].0, Cache::Password);
    }
}
