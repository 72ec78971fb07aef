//! A bounded cache of directory answers, found and not found, each with its TTL.
//!
//! A found user is kept for `cache_ttl`, an unknown address for the (shorter)
//! `negative_cache_ttl`. Errors are never cached: when the directory is down,
//! every call asks again, so the first call after it comes back gets an answer.
//! While it is down, addresses seen within the TTL are still answered from here,
//! which is what keeps mail for known users flowing during a short outage. (A
//! login that fails against a remembered entry is looked up again, by the caller,
//! so a changed password is not refused for a whole TTL.)

use std::num::NonZeroUsize;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lru::LruCache;

use crate::metrics::{self, Cache};

/// The cache (see the module docs).
#[derive(Debug)]
pub(crate) struct TtlCache<V> {
    entries: Option<Mutex<LruCache<String, (Instant, V)>>>,
    ttl: Duration,
    negative_ttl: Duration,
}

impl<V: Clone> TtlCache<V> {
    /// Up to `capacity` keys (0: nothing is kept).
    pub(crate) fn new(capacity: usize, ttl: Duration, negative_ttl: Duration) -> TtlCache<V> {
        TtlCache {
            entries: NonZeroUsize::new(capacity).map(|c| Mutex::new(LruCache::new(c))),
            ttl,
            negative_ttl,
        }
    }

    /// The value remembered for `key`, if not expired at `now`.
    pub(crate) fn get(&self, key: &str, now: Instant) -> Option<V> {
        let mut entries = self
            .entries
            .as_ref()?
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let found = match entries.get(key) {
            Some((expires, value)) if *expires > now => Some(value.clone()),
            Some(_) => {
                entries.pop(key);
                None
            }
            None => None,
        };
        metrics::count_cache(Cache::Lookup, found.is_some());
        found
    }

    /// Remembers `value`: a positive answer for the TTL, a negative one for the
    /// negative TTL.
    pub(crate) fn put(&self, key: &str, value: V, positive: bool, now: Instant) {
        let Some(entries) = &self.entries else {
            return;
        };
        let ttl = if positive {
            self.ttl
        } else {
            self.negative_ttl
        };
        let mut entries = entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.put(key.to_owned(), (now + ttl, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_and_negative_ttls_and_bound() {
        let cache = TtlCache::new(2, Duration::from_secs(10), Duration::from_secs(1));
        let now = Instant::now();
        cache.put("a", Some(1), true, now);
        cache.put("b", None, false, now);
        assert_eq!(cache.get("a", now), Some(Some(1)));
        assert_eq!(cache.get("b", now), Some(None));
        let later = now + Duration::from_secs(1);
        assert_eq!(cache.get("b", later), None, "negative answer expired");
        assert_eq!(cache.get("a", later), Some(Some(1)));
        assert_eq!(cache.get("a", now + Duration::from_secs(10)), None);
        for key in ["x", "y", "z"] {
            cache.put(key, Some(0), true, now);
        }
        assert_eq!(cache.get("x", now), None, "least recently used went");
        let off: TtlCache<u8> = TtlCache::new(0, Duration::from_secs(1), Duration::ZERO);
        off.put("a", 1, true, now);
        assert_eq!(off.get("a", now), None);
    }
}
