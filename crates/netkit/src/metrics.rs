//! This process's counters of what netkit sees for every server: connections open
//! per server, and TLS handshakes by outcome. Prometheus reports per process, and
//! so do these: they are `static`s, not fields of a server, so a server rebuilt
//! from a re-read configuration counts on where its predecessor left off, and a
//! predecessor still draining is still counted.
//!
//! Nothing here knows Prometheus; the binary reads [`connections_open`] and
//! [`handshakes`] when it is scraped.
//!
//! - Open connections cost nothing per request: every connection already holds
//!   a permit of its worker's connection semaphore for as long as it lives
//!   (parked or not), so the number open is the permits taken, less those the
//!   accept loops hold while they wait for a connection (counted around each
//!   accept, in `Accepting`). Each worker registers its semaphore here
//!   (`register_limit`) by a weak reference; a server's semaphores die with its
//!   last connection and drop out of the sum.
//! - TLS handshakes are counted where they end ([`record_handshake`]): the mail
//!   servers' [`crate::line::LineIo::start_tls`] and the web server's own
//!   handshake. One relaxed atomic add each, next to a handshake's thousands of
//!   instructions of key exchange.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use tokio::sync::Semaphore;

/// The outcome of one TLS handshake.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// A full handshake (certificate and key exchange).
    Full,
    /// A resumed session (ticket or session id).
    Resumed,
    /// Failed or timed out.
    Failed,
}

impl Handshake {
    /// The outcome of a finished handshake on `conn`.
    pub fn of(conn: &rustls::CommonState) -> Handshake {
        match conn.handshake_kind() {
            Some(rustls::HandshakeKind::Resumed) => Handshake::Resumed,
            _ => Handshake::Full,
        }
    }
}

/// Handshakes so far, by outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Handshakes {
    /// Full handshakes.
    pub full: u64,
    /// Resumed sessions.
    pub resumed: u64,
    /// Failed or timed-out handshakes.
    pub failed: u64,
}

static HANDSHAKES: [AtomicU64; 3] = [const { AtomicU64::new(0) }; 3];

/// Counts one handshake.
pub fn record_handshake(outcome: Handshake) {
    HANDSHAKES[outcome as usize].fetch_add(1, Ordering::Relaxed);
}

/// This process's TLS handshakes so far.
pub fn handshakes() -> Handshakes {
    let read = |h: Handshake| HANDSHAKES[h as usize].load(Ordering::Relaxed);
    Handshakes {
        full: read(Handshake::Full),
        resumed: read(Handshake::Resumed),
        failed: read(Handshake::Failed),
    }
}

/// A histogram of durations at one moment, as a library hands it to the binary
/// (which encodes it): the web server's request times, the queue's delivery
/// times.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    /// `(upper bound in seconds, observations over the previous bound and at or
    /// under this one)`: per bucket, not cumulative; the last bound is `+Inf`.
    pub buckets: Vec<(f64, u64)>,
    /// Seconds, summed.
    pub sum: f64,
    /// Observations.
    pub count: u64,
}

impl Histogram {
    /// The histogram of per-bucket `counts` over `bounds` (seconds), then
    /// `+Inf` (so `counts` has one more entry than `bounds`), whose
    /// observations sum to `sum_micros` microseconds.
    pub fn from_counts(bounds: &[f64], counts: &[u64], sum_micros: u64) -> Histogram {
        let bounds = bounds.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds.zip(counts.iter().copied()).collect();
        Histogram {
            count: buckets.iter().map(|b| b.1).sum(),
            sum: std::time::Duration::from_micros(sum_micros).as_secs_f64(),
            buckets,
        }
    }
}

/// The bucket of an observation of `secs` among `bounds` (ascending upper
/// bounds, in seconds): the first bound it is at or under, `bounds.len()`
/// (`+Inf`) past the last.
pub fn bucket_of(bounds: &[f64], secs: f64) -> usize {
    bounds
        .iter()
        .position(|&bound| secs <= bound)
        .unwrap_or(bounds.len())
}

/// One worker's connection semaphore: its server's name and its size.
struct Limit {
    server: &'static str,
    slots: usize,
    semaphore: Weak<Semaphore>,
    accepting: Arc<Accepting>,
}

/// Permits an accept loop holds while it waits for a connection: taken, but not
/// by a connection.
#[derive(Debug, Default)]
pub(crate) struct Accepting(AtomicUsize);

impl Accepting {
    /// An accept loop took a permit and waits for a connection, until the
    /// guard drops (accepted, or the loop aborted).
    pub(crate) fn wait(&self) -> AcceptWait<'_> {
        self.0.fetch_add(1, Ordering::Relaxed);
        AcceptWait(self)
    }
}

/// One accept loop's wait, counted in `Accepting` while it lives.
pub(crate) struct AcceptWait<'a>(&'a Accepting);

impl Drop for AcceptWait<'_> {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Every live worker's semaphore. Bounded by the workers alive at once: dead
/// entries are dropped at each registration and each read.
static LIMITS: Mutex<Vec<Limit>> = Mutex::new(Vec::new());

/// Registers a worker's connection semaphore of `slots` permits, for
/// [`connections_open`]; `server` is the handler's name. The worker's accept
/// loops count their waits in what it returns.
pub(crate) fn register_limit(
    server: &'static str,
    slots: usize,
    semaphore: Weak<Semaphore>,
) -> Arc<Accepting> {
    let accepting = Arc::new(Accepting::default());
    let mut limits = LIMITS.lock().unwrap_or_else(PoisonError::into_inner);
    limits.retain(|l| l.semaphore.strong_count() > 0);
    limits.push(Limit {
        server,
        slots,
        semaphore,
        accepting: Arc::clone(&accepting),
    });
    accepting
}

/// Connections open now, per server name (`web`, `SMTP`, `POP3`, `LMTP`), in
/// the order servers first registered; servers with none open are listed too
/// while they run.
pub fn connections_open() -> Vec<(&'static str, u64)> {
    let mut limits = LIMITS.lock().unwrap_or_else(PoisonError::into_inner);
    limits.retain(|l| l.semaphore.strong_count() > 0);
    let mut open: Vec<(&'static str, u64)> = Vec::new();
    for limit in limits.iter() {
        let Some(semaphore) = limit.semaphore.upgrade() else {
            continue;
        };
        let taken = limit.slots.saturating_sub(semaphore.available_permits());
        let taken = taken.saturating_sub(limit.accepting.0.load(Ordering::Relaxed)) as u64;
        match open.iter_mut().find(|(name, _)| *name == limit.server) {
            Some((_, n)) => *n += taken,
            None => open.push((limit.server, taken)),
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_connections_are_the_permits_taken_of_live_semaphores() {
        let a = Arc::new(Semaphore::new(4));
        let accepting = register_limit("metrics-test", 4, Arc::downgrade(&a));
        // An accept loop waiting with a permit: no connection.
        let waiting = Arc::clone(&a).try_acquire_owned().expect("permit");
        let wait = accepting.wait();
        let b = Arc::new(Semaphore::new(2));
        register_limit("metrics-test", 2, Arc::downgrade(&b));
        let one = Arc::clone(&a).try_acquire_owned().expect("permit");
        let two = Arc::clone(&b).try_acquire_owned().expect("permit");
        let of = || {
            connections_open()
                .into_iter()
                .find(|(n, _)| *n == "metrics-test")
        };
        assert_eq!(of(), Some(("metrics-test", 2)));
        drop(one);
        assert_eq!(of(), Some(("metrics-test", 1)));
        // A server gone but a connection still draining: still counted.
        drop(b);
        assert_eq!(of(), Some(("metrics-test", 1)));
        drop(two);
        drop(wait);
        drop(waiting);
        drop(a);
        assert_eq!(of(), None);
    }

    #[test]
    fn handshakes_count_by_outcome() {
        let before = handshakes();
        record_handshake(Handshake::Resumed);
        record_handshake(Handshake::Failed);
        let after = handshakes();
        assert!(after.resumed > before.resumed);
        assert!(after.failed > before.failed);
    }
}
