//! This process's web counters: responses by request method and status, and by
//! site, with the time each took; bytes of responses sent, and CGI scripts run.
//! Prometheus reports per process, and so do these: they are not fields of a
//! [`crate::Server`], so a server rebuilt from a re-read configuration counts on
//! where its predecessor left off.
//!
//! # Sharded per thread
//!
//! A counter shared by every worker would bounce its cache line between cores on
//! every request. Each thread that counts takes a `Shard` of its own (aligned to
//! a cache-line pair, so no two shards share one) and is its only writer, so a
//! count is a plain load and store, not a locked read-modify-write; [`snapshot`]
//! sums the shards when the binary is scraped. A shard is never freed: when its
//! thread ends it goes back to a free list and the next new thread carries on
//! counting in it, so the sums never go back and the shards are as many as the
//! most threads that ever counted at once.
//!
//! Counting happens once per written batch of responses, where the access log is
//! written (`conn/log.rs`), off the parse and dispatch path. A response's time is
//! from the moment its request was dispatched (the worker's clock for the batch)
//! to the batch whose write finished it: a large file sent over many writes is
//! timed to its last byte handed to the kernel, as nginx's `$request_time` is.
//!
//! # Bounded labels
//!
//! Labels are bounded by construction, never text from the network: the method
//! is one of `Method`'s four, the status its own code from 100 to 599 (`other`
//! past them), the site one of at most [`MAX_SITES`] configured sites, named by
//! its first name (`site_slot`); sites past them are counted together as
//! `other`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

pub use stoa_netkit::metrics::Histogram;

/// The request method as counted: a bounded set, whatever the client sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Method {
    Get,
    Head,
    Post,
    /// Any other method, and a request whose head could not be parsed.
    #[default]
    Other,
}

impl Method {
    /// The counted method of a parsed request.
    pub(crate) fn of(method: stoa_http_proto::Method) -> Method {
        match method {
            stoa_http_proto::Method::Get => Method::Get,
            stoa_http_proto::Method::Head => Method::Head,
            stoa_http_proto::Method::Post => Method::Post,
            _ => Method::Other,
        }
    }
}

/// The `method` label of each `Method`, in its order.
pub const METHODS: [&str; 4] = ["GET", "HEAD", "POST", "other"];

/// Status slots: every code from 100 to 599 its own (a 421 is `421`, not
/// `4xx`), then one for anything else (a CGI script's `999`).
const SLOTS: usize = 501;

/// The `code` label of slot `i`.
pub fn code_label(i: usize) -> String {
    if i < SLOTS - 1 {
        (i + 100).to_string()
    } else {
        "other".to_owned()
    }
}

/// The slot of `status`.
fn slot(status: u16) -> usize {
    match status {
        100..=599 => usize::from(status - 100),
        _ => SLOTS - 1,
    }
}

/// The status classes counted per site, by their `code` label.
pub const CLASSES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "other"];

/// The class of `status`, an index into [`CLASSES`].
fn class(status: u16) -> usize {
    match status {
        100..=599 => usize::from(status / 100 - 1),
        _ => CLASSES.len() - 1,
    }
}

/// Sites counted on their own (`site_slot`); past them, they share the last
/// slot, labelled `other`. A bound on the labels Prometheus stores, and on each
/// shard's size (`MAX_SITES` × 160 bytes).
pub const MAX_SITES: usize = 256;

/// Upper bounds of the request-duration buckets, in microseconds: from a
/// cached file answered in the batch it was asked in, to a CGI script's or a
/// large download's seconds.
const DURATION_BOUNDS_US: [u64; 12] = [
    1_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000,
];

/// The bounds of the request-duration buckets in seconds, as the histogram is
/// labelled (`DURATION_BOUNDS_US`, in microseconds, is what is compared).
pub const DURATION_BUCKETS: [f64; DURATION_BOUNDS_US.len()] = {
    let mut secs = [0.0; DURATION_BOUNDS_US.len()];
    let mut i = 0;
    while i < secs.len() {
        secs[i] = DURATION_BOUNDS_US[i] as f64 / 1e6;
        i += 1;
    }
    secs
};

/// The labels of the sites counted on their own, by slot: a site keeps its
/// slot across reloads (the same label, the same slot), so its counts carry on.
static SITE_LABELS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The counting slot of the site labelled `label` (its first name, `_` for a
/// site without one), registered on first use; [`MAX_SITES`] − 1, shared and
/// labelled `other`, once every other slot is taken.
pub(crate) fn site_slot(label: &str) -> u16 {
    let mut labels = SITE_LABELS.lock().unwrap_or_else(PoisonError::into_inner);
    let slot = slot_among(&mut labels, label);
    u16::try_from(slot).expect("invariant: MAX_SITES fits in u16")
}

/// [`site_slot`] over the registered `labels`.
fn slot_among(labels: &mut Vec<String>, label: &str) -> usize {
    match labels.iter().position(|l| l == label) {
        Some(i) => i,
        None if labels.len() < MAX_SITES - 1 => {
            labels.push(label.to_owned());
            labels.len() - 1
        }
        None => MAX_SITES - 1,
    }
}

/// What a response is counted by, besides its status: its request's method and
/// site, and when its answer began.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tally {
    pub(crate) method: Method,
    /// The site's [`site_slot`].
    pub(crate) site: u16,
    pub(crate) started: Instant,
}

/// One site's counters in a shard: 160 bytes.
struct SiteShard {
    classes: [AtomicU64; CLASSES.len()],
    /// Responses per duration bucket (not cumulative), the last past every bound.
    durations: [AtomicU64; DURATION_BOUNDS_US.len() + 1],
    /// Their times, summed, in microseconds.
    micros: AtomicU64,
}

impl SiteShard {
    const fn new() -> SiteShard {
        SiteShard {
            classes: [const { AtomicU64::new(0) }; CLASSES.len()],
            durations: [const { AtomicU64::new(0) }; DURATION_BOUNDS_US.len() + 1],
            micros: AtomicU64::new(0),
        }
    }
}

/// One thread's counters. Two cache lines of alignment: adjacent-line prefetch
/// pairs them on x86.
#[repr(align(128))]
struct Shard {
    requests: [[AtomicU64; SLOTS]; METHODS.len()],
    /// [`MAX_SITES`] of them.
    sites: Box<[SiteShard]>,
    sent_bytes: AtomicU64,
    cgi_runs: AtomicU64,
}

impl Shard {
    fn new() -> Shard {
        Shard {
            requests: [const { [const { AtomicU64::new(0) }; SLOTS] }; METHODS.len()],
            sites: (0..MAX_SITES).map(|_| SiteShard::new()).collect(),
            sent_bytes: AtomicU64::new(0),
            cgi_runs: AtomicU64::new(0),
        }
    }
}

/// Adds `n` to a counter only this thread writes: a load and a store, no lock
/// prefix. Readers on other threads see some recent value, never a torn one.
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(
        counter.load(Ordering::Relaxed).wrapping_add(n),
        Ordering::Relaxed,
    );
}

/// Every shard ever made (for the sums), and those whose thread has ended.
struct Shards {
    all: Vec<&'static Shard>,
    free: Vec<&'static Shard>,
}

static SHARDS: Mutex<Shards> = Mutex::new(Shards {
    all: Vec::new(),
    free: Vec::new(),
});

/// A thread's hold on its shard; gives it back when the thread ends.
struct Held(&'static Shard);

impl Held {
    fn take() -> Held {
        let mut shards = SHARDS.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(shard) = shards.free.pop() {
            return Held(shard);
        }
        // Leaked on purpose: the totals must outlive the thread (see the module docs).
        let shard: &'static Shard = Box::leak(Box::new(Shard::new()));
        shards.all.push(shard);
        Held(shard)
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut shards = SHARDS.lock().unwrap_or_else(PoisonError::into_inner);
        shards.free.push(self.0);
    }
}

thread_local! {
    static SHARD: Held = Held::take();
}

/// Runs `f` on this thread's shard (not at all while the thread is ending).
fn with_shard(f: impl FnOnce(&Shard)) {
    let _ = SHARD.try_with(|held| f(held.0));
}

/// Counts a batch written by `now`: each response by method and status, and by
/// site with its time (the write queue's [`crate::output::Queued`] records),
/// and `sent` bytes.
pub(crate) fn count_batch(responses: impl Iterator<Item = (Tally, u16)>, sent: u64, now: Instant) {
    with_shard(|shard| {
        for (tally, status) in responses {
            bump(&shard.requests[tally.method as usize][slot(status)], 1);
            let site = &shard.sites[usize::from(tally.site).min(MAX_SITES - 1)];
            bump(&site.classes[class(status)], 1);
            let micros = micros_between(tally.started, now);
            let bucket = DURATION_BOUNDS_US
                .iter()
                .position(|&bound| micros <= bound)
                .unwrap_or(DURATION_BOUNDS_US.len());
            bump(&site.durations[bucket], 1);
            bump(&site.micros, micros);
        }
        bump(&shard.sent_bytes, sent);
    });
}

/// Whole microseconds from `start` to `end` (0 when `end` is earlier). A
/// response answered in the batch its request came in, the common case, has
/// the batch's one clock reading for both: no arithmetic (callgrind: the
/// histogram cost 109 instructions per keep-alive GET, 1.4 %, before this).
#[inline]
fn micros_between(start: Instant, end: Instant) -> u64 {
    if start == end {
        return 0;
    }
    let took = end.saturating_duration_since(start);
    (took.as_secs().saturating_mul(1_000_000)).saturating_add(u64::from(took.subsec_micros()))
}

/// Counts one CGI script started.
pub(crate) fn count_cgi_run() {
    with_shard(|shard| bump(&shard.cgi_runs, 1));
}

/// Access-log files that could not be reopened (SIGHUP after a rotation): rare,
/// so one counter for the process, not sharded.
static LOG_REOPEN_FAILURES: AtomicU64 = AtomicU64::new(0);

/// Counts one access-log file that could not be reopened.
pub(crate) fn count_log_reopen_failure() {
    LOG_REOPEN_FAILURES.fetch_add(1, Ordering::Relaxed);
}

/// One site's counters, summed over the threads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SiteSnapshot {
    /// Its first name (`_` for none), or `other` for the sites past [`MAX_SITES`].
    pub label: String,
    /// Responses by status class, index [`CLASSES`].
    pub classes: [u64; CLASSES.len()],
    /// Their times, from dispatch to the last byte written.
    pub duration: Histogram,
}

/// The web counters of this process, summed over the threads.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// Responses by `(method, slot)`: index [`METHODS`] and [`code_label`].
    pub requests: Vec<(usize, usize, u64)>,
    /// Bytes of responses written (heads and bodies, before TLS).
    pub sent_bytes: u64,
    /// CGI scripts started.
    pub cgi_runs: u64,
    /// Access-log files that could not be reopened: lines go on to the file
    /// open before (the rotated one).
    pub log_reopen_failures: u64,
    /// Every configured site (since the start, reloads included), and `other`
    /// when sites past [`MAX_SITES`] answered.
    pub sites: Vec<SiteSnapshot>,
}

/// This process's web counters: every shard summed. The non-zero request
/// counts only, so a scrape lists the combinations seen.
pub fn snapshot() -> Snapshot {
    let shards = SHARDS.lock().unwrap_or_else(PoisonError::into_inner);
    let mut requests = [[0u64; SLOTS]; METHODS.len()];
    let mut out = Snapshot::default();
    for shard in &shards.all {
        for (m, row) in shard.requests.iter().enumerate() {
            for (s, n) in row.iter().enumerate() {
                requests[m][s] += n.load(Ordering::Relaxed);
            }
        }
        out.sent_bytes += shard.sent_bytes.load(Ordering::Relaxed);
        out.cgi_runs += shard.cgi_runs.load(Ordering::Relaxed);
    }
    out.log_reopen_failures = LOG_REOPEN_FAILURES.load(Ordering::Relaxed);
    out.sites = sites(&shards.all);
    for (m, row) in requests.iter().enumerate() {
        for (s, &n) in row.iter().enumerate() {
            if n > 0 {
                out.requests.push((m, s, n));
            }
        }
    }
    out
}

/// Each site's counters, summed over `shards`.
fn sites(shards: &[&'static Shard]) -> Vec<SiteSnapshot> {
    let labels = SITE_LABELS.lock().unwrap_or_else(PoisonError::into_inner);
    let mut out = Vec::with_capacity(labels.len() + 1);
    for slot in 0..MAX_SITES {
        let label = match labels.get(slot) {
            Some(label) => label.clone(),
            None if slot == MAX_SITES - 1 => "other".to_owned(),
            None => continue,
        };
        let mut classes = [0u64; CLASSES.len()];
        let mut durations = [0u64; DURATION_BOUNDS_US.len() + 1];
        let mut micros = 0u64;
        for shard in shards {
            let site = &shard.sites[slot];
            for (sum, n) in classes.iter_mut().zip(&site.classes) {
                *sum += n.load(Ordering::Relaxed);
            }
            for (sum, n) in durations.iter_mut().zip(&site.durations) {
                *sum += n.load(Ordering::Relaxed);
            }
            micros = micros.wrapping_add(site.micros.load(Ordering::Relaxed));
        }
        if slot >= labels.len() && classes.iter().all(|&n| n == 0) {
            continue;
        }
        out.push(SiteSnapshot {
            label,
            classes,
            duration: Histogram::from_counts(&DURATION_BUCKETS, &durations, micros),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_have_bounded_slots_and_labels() {
        assert_eq!(code_label(slot(404)), "404");
        assert_eq!(code_label(slot(421)), "421");
        assert_eq!(code_label(slot(299)), "299");
        assert_eq!(code_label(slot(100)), "100");
        assert_eq!(code_label(slot(599)), "599");
        assert_eq!(code_label(slot(42)), "other");
        assert_eq!(code_label(slot(999)), "other");
        assert_eq!(slot(999), SLOTS - 1);
        assert_eq!(CLASSES[class(421)], "4xx");
        assert_eq!(CLASSES[class(999)], "other");
    }

    #[test]
    fn duration_bounds_match_their_labels() {
        for (us, secs) in DURATION_BOUNDS_US.iter().zip(DURATION_BUCKETS) {
            assert_eq!(*us as f64 / 1e6, secs);
        }
        assert!(DURATION_BOUNDS_US.is_sorted());
    }

    fn count(method: Method, status: u16) -> u64 {
        let label = code_label(slot(status));
        let m = method as usize;
        snapshot()
            .requests
            .iter()
            .find(|r| r.0 == m && code_label(r.1) == label)
            .map_or(0, |r| r.2)
    }

    #[test]
    fn counts_outlive_their_threads_and_sum_across_them() {
        let before = (count(Method::Post, 417), snapshot().sent_bytes);
        let tally = Tally {
            method: Method::Post,
            site: site_slot("metrics-test.example"),
            started: Instant::now(),
        };
        let batch = move |n| count_batch([(tally, 417)].into_iter(), n, Instant::now());
        std::thread::spawn(move || batch(10))
            .join()
            .expect("thread");
        std::thread::spawn(move || batch(5)).join().expect("thread");
        batch(1);
        let after = (count(Method::Post, 417), snapshot().sent_bytes);
        assert!(after.0 >= before.0 + 3, "{before:?} {after:?}");
        assert!(after.1 >= before.1 + 16, "{before:?} {after:?}");
        let sites = snapshot().sites;
        let site = sites.iter().find(|s| s.label == "metrics-test.example");
        let site = site.expect("the site is listed");
        assert_eq!(site.classes[3], 3, "{site:?}");
        assert_eq!(site.duration.count, 3, "{site:?}");
    }

    #[test]
    fn a_site_keeps_its_slot_and_sites_past_the_bound_share_one() {
        let mut labels = Vec::new();
        let a = slot_among(&mut labels, "a.example");
        assert_eq!(slot_among(&mut labels, "a.example"), a);
        assert_ne!(slot_among(&mut labels, "b.example"), a);
        for i in 0..MAX_SITES {
            assert!(slot_among(&mut labels, &format!("{i}.example")) < MAX_SITES);
        }
        assert_eq!(labels.len(), MAX_SITES - 1);
        assert_eq!(slot_among(&mut labels, "late.example"), MAX_SITES - 1);
        assert_eq!(slot_among(&mut labels, "a.example"), a);
    }
}
