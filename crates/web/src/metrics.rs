//! This process's web counters: responses by request method and status, bytes of
//! responses sent, and CGI scripts run. Prometheus reports per process, and so do
//! these: they are not fields of a [`crate::Server`], so a server rebuilt from a
//! re-read configuration counts on where its predecessor left off.
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
//! written (`conn/log.rs`), off the parse and dispatch path.
//!
//! Labels are bounded by construction: the method is one of `Method`'s four,
//! the status one of [`CODES`] or its class (`2xx`), never text from the network.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

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

/// The status codes counted on their own: every code the server produces itself.
/// Any other (a CGI script's choice) is counted in its class.
pub const CODES: [u16; 22] = [
    200, 204, 206, 301, 302, 304, 400, 403, 404, 405, 408, 411, 413, 414, 416, 417, 431, 500, 501,
    502, 503, 505,
];

/// Status slots: [`CODES`], then the classes `1xx` to `5xx`, then anything else.
const SLOTS: usize = CODES.len() + 6;

/// The `code` label of slot `i`.
pub fn code_label(i: usize) -> String {
    match CODES.get(i) {
        Some(code) => code.to_string(),
        None if i < SLOTS - 1 => format!("{}xx", i - CODES.len() + 1),
        None => "other".to_owned(),
    }
}

/// The slot of `status`.
fn slot(status: u16) -> usize {
    match CODES.binary_search(&status) {
        Ok(i) => i,
        Err(_) => match status {
            100..=599 => CODES.len() + usize::from(status / 100 - 1),
            _ => SLOTS - 1,
        },
    }
}

/// One thread's counters. Two cache lines of alignment: adjacent-line prefetch
/// pairs them on x86.
#[repr(align(128))]
struct Shard {
    requests: [[AtomicU64; SLOTS]; METHODS.len()],
    sent_bytes: AtomicU64,
    cgi_runs: AtomicU64,
}

impl Shard {
    const fn new() -> Shard {
        Shard {
            requests: [const { [const { AtomicU64::new(0) }; SLOTS] }; METHODS.len()],
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

/// Counts a written batch: each response by method and status (the write
/// queue's [`crate::output::Queued`] records), and `sent` bytes.
pub(crate) fn count_batch(responses: impl Iterator<Item = (Method, u16)>, sent: u64) {
    with_shard(|shard| {
        for (method, status) in responses {
            bump(&shard.requests[method as usize][slot(status)], 1);
        }
        bump(&shard.sent_bytes, sent);
    });
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

/// The web counters of this process, summed over the threads.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
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
    for (m, row) in requests.iter().enumerate() {
        for (s, &n) in row.iter().enumerate() {
            if n > 0 {
                out.requests.push((m, s, n));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_have_bounded_slots_and_labels() {
        assert!(CODES.is_sorted(), "binary search needs sorted codes");
        assert_eq!(code_label(slot(404)), "404");
        assert_eq!(code_label(slot(299)), "2xx");
        assert_eq!(code_label(slot(599)), "5xx");
        assert_eq!(code_label(slot(101)), "1xx");
        assert_eq!(code_label(slot(42)), "other");
        assert_eq!(code_label(slot(999)), "other");
        assert_eq!(slot(999), SLOTS - 1);
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
        let batch = |n| count_batch([(Method::Post, 417)].into_iter(), n);
        std::thread::spawn(move || batch(10))
            .join()
            .expect("thread");
        std::thread::spawn(move || batch(5)).join().expect("thread");
        batch(1);
        let after = (count(Method::Post, 417), snapshot().sent_bytes);
        assert!(after.0 >= before.0 + 3, "{before:?} {after:?}");
        assert!(after.1 >= before.1 + 16, "{before:?} {after:?}");
    }
}
