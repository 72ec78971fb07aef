//! Operation times as a histogram: constant memory however long the run, cheap to
//! merge across threads and agents, and small on the wire.
//!
//! It owns [`Latency`], the one measurement type the web load engine
//! (`stoa-loadgen`), the mail load engine (`stoa-mailgen`) and the harness's
//! reports share: an `hdrhistogram` of microseconds from 1 µs to one hour at
//! three significant figures, serialised as its non-empty buckets. It does not
//! time anything itself or know what an operation is; callers record
//! milliseconds.

use hdrhistogram::Histogram;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Smallest and largest recorded time, µs: 1 µs to one hour (a longer operation
/// is recorded as one hour).
const LOWEST_US: u64 = 1;
const HIGHEST_US: u64 = 3_600_000_000;
/// Three significant figures: percentiles within 0.1 %.
const SIGFIG: u8 = 3;

/// Times of successful measured operations, pacing included.
#[derive(Debug, Clone)]
pub struct Latency(Histogram<u64>);

impl Default for Latency {
    fn default() -> Latency {
        Latency(
            Histogram::new_with_bounds(LOWEST_US, HIGHEST_US, SIGFIG)
                .expect("invariant: constant bounds are valid"),
        )
    }
}

impl Latency {
    /// Records one operation of `ms` milliseconds.
    pub fn record_ms(&mut self, ms: f64) {
        self.0
            .saturating_record(((ms * 1000.0) as u64).max(LOWEST_US));
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Latency) {
        // Same bounds on both sides, so adding cannot fail.
        let _ = self.0.add(&other.0);
    }

    /// Operations recorded.
    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// The time at quantile `q` (0–1), ms; 0 when empty.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.value_at_quantile(q) as f64 / 1000.0
    }

    /// The longest time, ms; 0 when empty.
    pub fn max_ms(&self) -> f64 {
        self.0.max() as f64 / 1000.0
    }

    /// The shortest time, ms; 0 when empty.
    pub fn min_ms(&self) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.min() as f64 / 1000.0
    }

    /// The mean time, ms; 0 when empty.
    pub fn mean_ms(&self) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.mean() / 1000.0
    }

    /// The share (0–1) of operations at or under `ms`; 1 when empty.
    pub fn share_within_ms(&self, ms: f64) -> f64 {
        if self.0.is_empty() {
            return 1.0;
        }
        let us = (ms * 1000.0).max(0.0) as u64;
        self.0.count_between(0, us) as f64 / self.0.len() as f64
    }
}

/// On the wire: `[[µs, count], …]` for the non-empty buckets.
impl Serialize for Latency {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let buckets: Vec<(u64, u64)> = self
            .0
            .iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect();
        buckets.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Latency {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Latency, D::Error> {
        let buckets = Vec::<(u64, u64)>::deserialize(d)?;
        let mut latency = Latency::default();
        for (us, count) in buckets {
            latency
                .0
                .record_n(us.clamp(LOWEST_US, HIGHEST_US), count)
                .map_err(serde::de::Error::custom)?;
        }
        Ok(latency)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_and_round_trip() {
        let mut l = Latency::default();
        for ms in 1..=1000 {
            l.record_ms(f64::from(ms));
        }
        assert_eq!(l.count(), 1000);
        assert!((l.quantile_ms(0.5) - 500.0).abs() < 1.0);
        assert!((l.quantile_ms(0.99) - 990.0).abs() < 1.0);
        assert!((l.max_ms() - 1000.0).abs() < 1.0);
        assert!((l.min_ms() - 1.0).abs() < 0.01);
        assert!((l.mean_ms() - 500.5).abs() < 1.0);
        assert!((l.share_within_ms(250.0) - 0.25).abs() < 0.002);
        let wire = serde_json::to_string(&l).expect("serialise");
        let back: Latency = serde_json::from_str(&wire).expect("deserialise");
        assert_eq!(back.count(), 1000);
        assert_eq!(back.quantile_ms(0.9), l.quantile_ms(0.9));
        let mut merged = Latency::default();
        merged.merge(&l);
        merged.merge(&back);
        assert_eq!(merged.count(), 2000);
    }

    #[test]
    fn empty_and_out_of_range() {
        let mut l = Latency::default();
        assert_eq!(l.quantile_ms(0.5), 0.0);
        l.record_ms(0.0);
        l.record_ms(1e12);
        assert_eq!(l.count(), 2);
        assert!(l.max_ms() >= 3_600_000.0);
    }
}
