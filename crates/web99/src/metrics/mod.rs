//! How the SPECweb99 client paces itself and how a run is scored (`web99.md` §5).
//!
//! [`RatedReceive`] is the emulated 400 kbit/s line: the response is read in blocks
//! of at most one MSS, each block's early arrival is credited, and the generator
//! sleeps the credit off at the end of the operation. [`ClassStats`] and
//! [`GeneratorStats`] are the client's per-class counters (protocol lines 602/604);
//! a generator is *valid* when every class has successes and classes 0–2 have at
//! most 1 % errors, and *conforming* when it is valid and its bit rate is at least
//! 320 kbit/s. [`client_error_rates`] is the manager's per-client check (the
//! only one that covers class 3), [`Iteration`] holds the manager's run-level
//! numbers, and [`median_iteration`] picks the reported one.
//!
//! Time is in milliseconds as `f64`, bytes as `u64`; nothing here reads a clock.

use std::ops::AddAssign;

/// Emulated line speed, bytes per second (400 kbit/s).
pub const LINE_BYTES_PER_SEC: f64 = 50_000.0;
/// A generator conforms at this bit rate or above, bytes per second (320 kbit/s).
pub const CONFORM_BYTES_PER_SEC: f64 = 40_000.0;
/// The client reads at most this many bytes per block (one Ethernet MSS).
pub const BLOCK: usize = 1460;
/// Most errors a class (0–2) of a valid generator may have.
pub const MAX_ERROR_RATE: f64 = 0.01;
/// Most errors a class may have in one client's totals (§7.3). The manager's
/// `MAX_ERROR_RATE` is .0104999999, just under 1.05 %, because it judges rates
/// it prints with three decimals: 1.04 % passes, 1.05 % fails.
pub const MAX_CLIENT_ERROR_RATE: f64 = 0.010_499_999_9;
/// Share of requested connections that must conform for a valid run.
pub const MIN_PERCENT_CONFORM: f64 = 95.0;
/// The successive speed limits of the "Cumulative Conformance" row, as fractions
/// of the line speed.
pub const SPEED_STEPS: [f64; 6] = [0.95, 0.90, 0.85, 0.80, 0.75, 0.70];

/// The rated-receive bookkeeping of one operation (§5.1).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatedReceive {
    start: f64,
    marker: f64,
    sleep: f64,
    bytes: u64,
}

impl RatedReceive {
    /// An operation starting at `now` (before connect, if any).
    pub fn start(now: f64) -> RatedReceive {
        RatedReceive {
            start: now,
            marker: now,
            sleep: 0.0,
            bytes: 0,
        }
    }

    /// A block of `len` bytes arrived at `now`: credit it if it came early.
    pub fn block(&mut self, len: usize, now: f64) {
        let rated = self.marker + len as f64 / (LINE_BYTES_PER_SEC / 1000.0);
        if rated > now {
            self.sleep += rated - now;
        }
        self.marker = now;
        self.bytes += len as u64;
    }

    /// One read of `len` bytes at `now`, accounted as the kit's client would
    /// have read the same bytes: consecutive blocks of [`BLOCK`] bytes (the
    /// last one shorter), all at `now`. A reader that takes everything the
    /// socket holds in one call and a reader of one block per call whose reads
    /// of bytes already there cost no time credit exactly the same sleep: each
    /// block's contribution to the operation time is the longer of its line
    /// time and the gap since the block before it, and within one read the
    /// gaps are zero (the one-block reader's few microseconds between calls
    /// are shorter than any block's line time, 20 µs for one byte).
    pub fn read(&mut self, len: usize, now: f64) {
        let mut left = len;
        while left > 0 {
            let block = left.min(BLOCK);
            self.block(block, now);
            left -= block;
        }
    }

    /// The operation's last byte arrived at `now`: how long to sleep, and the
    /// operation time (receive time plus the sleep).
    pub fn finish(&self, now: f64) -> (f64, f64) {
        let receive = now - self.start;
        (self.sleep, receive + self.sleep)
    }

    /// Bytes received so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

/// One class's counters in one generator (§5.2).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClassStats {
    /// Sum of operation times, ms.
    pub time: f64,
    /// Sum of squared operation times.
    pub time2: f64,
    /// Successful operations.
    pub good: u64,
    /// Failed operations.
    pub bad: u64,
    /// POSTs issued.
    pub post: u64,
    /// Sum of per-operation byte rates (bytes/s).
    pub rate: f64,
    /// Sum of squared rates.
    pub rate2: f64,
    /// Operations slower than the conformance rate.
    pub slow_rate: u64,
    /// Bytes received in successful operations.
    pub aggregate_bytes: u64,
}

impl ClassStats {
    /// Records a successful operation of `time_ms` that received `bytes`.
    pub fn record_good(&mut self, time_ms: f64, bytes: u64) {
        self.good += 1;
        self.time += time_ms;
        self.time2 += time_ms * time_ms;
        self.aggregate_bytes += bytes;
        let rate = if time_ms > 0.0 {
            bytes as f64 / (time_ms / 1000.0)
        } else {
            f64::INFINITY
        };
        if rate.is_finite() {
            self.rate += rate;
            self.rate2 += rate * rate;
        }
        if rate < CONFORM_BYTES_PER_SEC {
            self.slow_rate += 1;
        }
    }

    /// Records a failed operation.
    pub fn record_bad(&mut self) {
        self.bad += 1;
    }

    /// Share of failed operations.
    pub fn error_rate(&self) -> f64 {
        let total = self.good + self.bad;
        if total == 0 {
            0.0
        } else {
            self.bad as f64 / total as f64
        }
    }
}

impl AddAssign for ClassStats {
    fn add_assign(&mut self, o: ClassStats) {
        self.time += o.time;
        self.time2 += o.time2;
        self.good += o.good;
        self.bad += o.bad;
        self.post += o.post;
        self.rate += o.rate;
        self.rate2 += o.rate2;
        self.slow_rate += o.slow_rate;
        self.aggregate_bytes += o.aggregate_bytes;
    }
}

/// What makes a generator valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Validity {
    /// The kit's rule: successes in every class.
    EveryClass,
    /// Class 3 may have no operation at all (short runs: at 1 % of requests and
    /// several seconds each, a class-3 operation often falls outside a
    /// one-minute window). Errors still count.
    Class3Optional,
}

/// One load generator (one simultaneous connection): four classes.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GeneratorStats {
    /// Counters by class.
    pub classes: [ClassStats; 4],
}

impl GeneratorStats {
    /// Valid: every class has successes; classes 0–2 at most 1 % errors (§5.3).
    pub fn is_valid(&self) -> bool {
        self.is_valid_by(Validity::EveryClass)
    }

    /// Valid by `rule`.
    pub fn is_valid_by(&self, rule: Validity) -> bool {
        let needed = match rule {
            Validity::EveryClass => &self.classes[..],
            Validity::Class3Optional => {
                let c3 = &self.classes[3];
                if c3.good == 0 && c3.bad > 0 {
                    return false;
                }
                &self.classes[..3]
            }
        };
        needed.iter().all(|c| c.good > 0)
            && self.classes[..3]
                .iter()
                .all(|c| c.error_rate() <= MAX_ERROR_RATE)
    }

    /// Bytes per second over the generator's operations.
    pub fn byte_rate(&self) -> f64 {
        let bytes: u64 = self.classes.iter().map(|c| c.aggregate_bytes).sum();
        let time: f64 = self.classes.iter().map(|c| c.time).sum();
        if time > 0.0 {
            bytes as f64 / (time / 1000.0)
        } else {
            0.0
        }
    }

    /// Valid and at least 320 kbit/s.
    pub fn is_conforming(&self) -> bool {
        self.is_conforming_by(Validity::EveryClass)
    }

    /// Valid by `rule` and at least 320 kbit/s.
    pub fn is_conforming_by(&self, rule: Validity) -> bool {
        self.is_valid_by(rule) && self.byte_rate() >= CONFORM_BYTES_PER_SEC
    }
}

/// Counters summed over `generators`, by class: one client's totals (the kit's
/// `604` lines), or a whole iteration's.
pub fn class_totals(generators: &[GeneratorStats]) -> [ClassStats; 4] {
    let mut classes = [ClassStats::default(); 4];
    for g in generators {
        for (total, c) in classes.iter_mut().zip(g.classes) {
            *total += c;
        }
    }
    classes
}

/// A class whose error rate in one client's totals is over
/// [`MAX_CLIENT_ERROR_RATE`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClientErrorRate {
    /// The class, 0–3.
    pub class: usize,
    /// Its share of failed operations.
    pub rate: f64,
}

/// The manager's per-client check (§7.3): the classes of one client's totals
/// whose error rate is over [`MAX_CLIENT_ERROR_RATE`]. All four classes are
/// checked; it is the only check class 3 gets, the per-generator one being too
/// strict for a class that rare. As in the manager, a class without a success is
/// skipped: its generators are invalid already.
pub fn client_error_rates(totals: &[ClassStats; 4]) -> Vec<ClientErrorRate> {
    totals
        .iter()
        .enumerate()
        .filter(|(_, c)| c.good > 0 && c.error_rate() > MAX_CLIENT_ERROR_RATE)
        .map(|(class, c)| ClientErrorRate {
            class,
            rate: c.error_rate(),
        })
        .collect()
}

/// The manager's numbers for one iteration (§5.4).
#[derive(Debug, Clone, PartialEq)]
pub struct Iteration {
    /// Simultaneous connections asked for.
    pub requested: u32,
    /// Generators that were valid.
    pub valid: u32,
    /// Generators that conformed: the iteration's score.
    pub conforming: u32,
    /// 100 × conforming / requested.
    pub percent_conform: f64,
    /// Successful operations per second of run time.
    pub ops_per_sec: f64,
    /// Mean operation time, pacing sleep included, ms.
    pub response_ms: f64,
    /// Throughput per requested connection.
    pub ops_per_sec_per_loadgen: f64,
    /// Aggregate per-connection bit rate, kbit/s.
    pub kbit_per_sec: f64,
    /// Valid generators at or above each of [`SPEED_STEPS`] × the line speed.
    pub at_speed: [u32; 6],
    /// Counters summed over generators, by class.
    pub classes: [ClassStats; 4],
}

impl Iteration {
    /// Scores `generators` over `run_secs` of measurement, by the kit's rules.
    pub fn score(generators: &[GeneratorStats], requested: u32, run_secs: f64) -> Iteration {
        Iteration::score_by(generators, requested, run_secs, Validity::EveryClass)
    }

    /// Scores with a given validity rule.
    pub fn score_by(
        generators: &[GeneratorStats],
        requested: u32,
        run_secs: f64,
        rule: Validity,
    ) -> Iteration {
        let classes = class_totals(generators);
        let valid = generators.iter().filter(|g| g.is_valid_by(rule)).count() as u32;
        let conforming = generators
            .iter()
            .filter(|g| g.is_conforming_by(rule))
            .count() as u32;
        let mut at_speed = [0u32; 6];
        for (n, step) in at_speed.iter_mut().zip(SPEED_STEPS) {
            *n = generators
                .iter()
                .filter(|g| g.is_valid_by(rule) && g.byte_rate() >= LINE_BYTES_PER_SEC * step)
                .count() as u32;
        }
        let good: u64 = classes.iter().map(|c| c.good).sum();
        let time: f64 = classes.iter().map(|c| c.time).sum();
        let bytes: u64 = classes.iter().map(|c| c.aggregate_bytes).sum();
        let ops_per_sec = if run_secs > 0.0 {
            good as f64 / run_secs
        } else {
            0.0
        };
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        Iteration {
            requested,
            valid,
            conforming,
            percent_conform: ratio(100.0 * f64::from(conforming), f64::from(requested)),
            ops_per_sec,
            response_ms: ratio(time, good as f64),
            ops_per_sec_per_loadgen: ratio(ops_per_sec, f64::from(requested)),
            kbit_per_sec: ratio(bytes as f64, time / 1000.0) * 8.0 / 1000.0,
            at_speed,
            classes,
        }
    }

    /// Whether at least 95 % of the requested connections conformed.
    pub fn conforms(&self) -> bool {
        self.percent_conform >= MIN_PERCENT_CONFORM
    }
}

/// Index of the reported iteration: sorted by conforming connections, ties by
/// throughput, the one at `floor((n − 1) / 2)` (the 2nd of 3) (§5.5).
pub fn median_iteration(iterations: &[Iteration]) -> Option<usize> {
    let mut order: Vec<usize> = (0..iterations.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&iterations[a], &iterations[b]);
        x.conforming
            .cmp(&y.conforming)
            .then(x.ops_per_sec.total_cmp(&y.ops_per_sec))
    });
    order.get(iterations.len().checked_sub(1)? / 2).copied()
}

#[cfg(test)]
mod tests;
