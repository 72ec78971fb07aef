//! What the sink received for each level of a run, and whether in time
//! (`mail2001.md` §2.3).
//!
//! A remote recipient counts for Remote Message Delivery only if the sink
//! receives it within its level's measurement window plus the delivery-time
//! limit ([`crate::engine::REMOTE_GRACE`]): mail that turns up during the
//! cool-down or the drain, later than that, was not delivered "within the test
//! phase". Receipts outside the window are kept apart, for the report.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::message::Tag;

/// One level's counting window and what arrived.
#[derive(Debug, Clone, Copy)]
struct Level {
    /// Receipts count from here (the start of the measurement window)…
    from: Instant,
    /// …to here (its end plus the grace).
    until: Instant,
    /// Recipients received inside the window.
    received: u64,
    /// Recipients received outside it.
    outside: u64,
}

/// The sink's receipts of one run, per level.
#[derive(Debug, Default)]
pub(crate) struct Receipts {
    levels: HashMap<u8, Level>,
    /// Messages that were not this run's, or not from a judged session of a
    /// level with a window (older runs' mail still queued, the initial fill).
    pub(crate) foreign: u64,
}

impl Receipts {
    /// Opens level `level`'s window, `from` to `until`; its counts start at 0.
    pub(crate) fn open(&mut self, level: u8, from: Instant, until: Instant) {
        self.levels.insert(
            level,
            Level {
                from,
                until,
                received: 0,
                outside: 0,
            },
        );
    }

    /// Records a message with `recipients` received `at`, if its tag is one of
    /// run `run`'s judged messages.
    pub(crate) fn record(&mut self, tag: Option<Tag>, recipients: u32, run: u32, at: Instant) {
        let level = tag
            .filter(|t| t.run == run && t.measured)
            .and_then(|t| self.levels.get_mut(&t.level));
        let Some(level) = level else {
            self.foreign += 1;
            return;
        };
        if at >= level.from && at <= level.until {
            level.received += u64::from(recipients);
        } else {
            level.outside += u64::from(recipients);
        }
    }

    /// Level `level`'s recipients received inside and outside its window.
    pub(crate) fn counts(&self, level: u8) -> (u64, u64) {
        self.levels
            .get(&level)
            .map_or((0, 0), |l| (l.received, l.outside))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn tag(level: u8, measured: bool) -> Option<Tag> {
        Some(Tag {
            run: 7,
            level,
            measured,
            seq: 1,
            probe: false,
        })
    }

    /// Issue 18, item 2: only receipts inside the measurement window plus the
    /// delivery limit count; before it, after it (cool-down, drain) they are
    /// kept apart.
    #[test]
    fn receipts_count_only_inside_the_window() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut r = Receipts::default();
        // Window 10 s to 70 s, plus 60 s: receipts count until 130 s.
        r.open(0, t0 + s(10), t0 + s(130));
        r.record(tag(0, true), 1, 7, t0 + s(5)); // before
        r.record(tag(0, true), 2, 7, t0 + s(10)); // at the start
        r.record(tag(0, true), 3, 7, t0 + s(69)); // inside
        r.record(tag(0, true), 4, 7, t0 + s(130)); // at the deadline
        r.record(tag(0, true), 5, 7, t0 + s(131)); // cool-down / drain: too late
        assert_eq!(r.counts(0), (9, 6));
        // Other runs' mail, warm-up mail, untagged mail, unknown levels.
        r.record(tag(0, false), 1, 7, t0 + s(20));
        let mut other = tag(0, true);
        if let Some(t) = other.as_mut() {
            t.run = 8;
        }
        r.record(other, 1, 7, t0 + s(20));
        r.record(None, 1, 7, t0 + s(20));
        r.record(tag(3, true), 1, 7, t0 + s(20));
        assert_eq!(r.counts(0), (9, 6));
        assert_eq!(r.foreign, 4);
        assert_eq!(r.counts(3), (0, 0));
    }
}
