//! This process's mail counters: SMTP and LMTP sessions, messages accepted and
//! refused (by a bounded [`Reject`] reason), the queue's traffic (queued,
//! deferred, bounced, delivered, per recipient), what is in the queue now (how
//! many messages, since when) and how long delivery took. Prometheus reports per
//! process, and so do these: they are `static`s rather than fields of a
//! [`crate::Server`], so a server rebuilt from a re-read configuration counts on
//! where its predecessor left off (and recovering the same queue again counts no
//! message twice: the queue's contents are keyed by message id).
//!
//! Nothing here knows Prometheus; the binary reads [`snapshot`] when scraped.
//! Every count is a relaxed atomic add: mail is counted per session, command or
//! message, each already costing system calls and fsyncs, so nothing is sharded.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use stoa_smtp_proto::Error as ProtoError;

/// The protocol of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Smtp,
    Lmtp,
}

/// Why the SMTP server refused a message or a recipient: a bounded set, one per
/// place the server says no (never text from the client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reject {
    /// RCPT of a local address the directory does not know (`550 5.1.1`).
    UnknownUser,
    /// RCPT elsewhere from a client that may not relay (`554 5.7.1`).
    RelayDenied,
    /// An authenticated sender using an address it does not own (`553 5.7.1`).
    SenderMismatch,
    /// AUTH with wrong credentials (`535 5.7.8`).
    AuthFailed,
    /// An address past the login throttle or its connection limit (`535`, `421`).
    Throttled,
    /// MAIL while the queue's disk is short of space (`452 4.3.1`).
    NoStorage,
    /// A message over the size limit (`552 5.3.4`).
    TooLarge,
    /// A malformed message: bare CR or LF, an overlong line (`550 5.5.2`,
    /// `554 5.3.4`).
    Malformed,
    /// Too many `Received:` fields, a mail loop (`554 5.4.6`).
    Loop,
    /// Our own trouble: the directory, the queue's disk (`451`, `454`).
    Temporary,
}

impl Reject {
    /// Every reason, in the order of [`Reject::label`]'s values.
    pub const ALL: [Reject; 10] = [
        Reject::UnknownUser,
        Reject::RelayDenied,
        Reject::SenderMismatch,
        Reject::AuthFailed,
        Reject::Throttled,
        Reject::NoStorage,
        Reject::TooLarge,
        Reject::Malformed,
        Reject::Loop,
        Reject::Temporary,
    ];

    /// The `reason` label.
    pub fn label(self) -> &'static str {
        match self {
            Reject::UnknownUser => "unknown_user",
            Reject::RelayDenied => "relay_denied",
            Reject::SenderMismatch => "sender_mismatch",
            Reject::AuthFailed => "auth_failed",
            Reject::Throttled => "throttled",
            Reject::NoStorage => "no_storage",
            Reject::TooLarge => "too_large",
            Reject::Malformed => "malformed",
            Reject::Loop => "loop",
            Reject::Temporary => "temporary",
        }
    }

    /// The reason of a message the codec refused while it arrived.
    pub(crate) fn of_aborted(error: &ProtoError) -> Reject {
        match error {
            ProtoError::MessageTooLarge => Reject::TooLarge,
            _ => Reject::Malformed,
        }
    }
}

/// Upper bounds of the delivery-time buckets, in seconds: from a local delivery
/// (milliseconds) to a day of retries.
pub const DELIVERY_BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0, 300.0, 1800.0, 3600.0,
    86400.0,
];

struct Counters {
    sessions: [AtomicU64; 2],
    accepted: AtomicU64,
    rejected: [AtomicU64; Reject::ALL.len()],
    queued: AtomicU64,
    deferred: AtomicU64,
    bounced: AtomicU64,
    delivered: AtomicU64,
    /// Deliveries per bucket (not cumulative), the last one past every bound.
    delivery_buckets: [AtomicU64; DELIVERY_BUCKETS.len() + 1],
    delivery_micros: AtomicU64,
}

static COUNTERS: Counters = Counters {
    sessions: [const { AtomicU64::new(0) }; 2],
    accepted: AtomicU64::new(0),
    rejected: [const { AtomicU64::new(0) }; Reject::ALL.len()],
    queued: AtomicU64::new(0),
    deferred: AtomicU64::new(0),
    bounced: AtomicU64::new(0),
    delivered: AtomicU64::new(0),
    delivery_buckets: [const { AtomicU64::new(0) }; DELIVERY_BUCKETS.len() + 1],
    delivery_micros: AtomicU64::new(0),
};

/// The messages in the queue now, by id, with their arrival. As large as the
/// queue on disk, whose size the disk bounds; a scrape walks it once.
static IN_QUEUE: Mutex<Option<HashMap<String, SystemTime>>> = Mutex::new(None);

fn add(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

/// A session accepted (its greeting or refusal about to be sent).
pub(crate) fn count_session(dialect: Dialect) {
    add(&COUNTERS.sessions[dialect as usize]);
}

/// A message accepted with `250` after the final dot.
pub(crate) fn count_accepted() {
    add(&COUNTERS.accepted);
}

/// A refusal by the SMTP server.
pub(crate) fn count_rejected(reason: Reject) {
    add(&COUNTERS.rejected[reason as usize]);
}

/// A recipient's delivery failed for now and will be retried.
pub(crate) fn count_deferred() {
    add(&COUNTERS.deferred);
}

/// A recipient failed for good (permanently, or expired in the queue).
pub(crate) fn count_bounced() {
    add(&COUNTERS.bounced);
}

/// A recipient of message `id` delivered: counted, and the time since the
/// message arrived observed.
pub(crate) fn count_delivered(id: &str) {
    add(&COUNTERS.delivered);
    let arrival = lock().as_ref().and_then(|q| q.get(id).copied());
    let Some(arrival) = arrival else {
        return;
    };
    let took = SystemTime::now()
        .duration_since(arrival)
        .unwrap_or_default();
    let bucket = stoa_netkit::metrics::bucket_of(&DELIVERY_BUCKETS, took.as_secs_f64());
    add(&COUNTERS.delivery_buckets[bucket]);
    let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
    COUNTERS
        .delivery_micros
        .fetch_add(micros, Ordering::Relaxed);
}

fn lock() -> std::sync::MutexGuard<'static, Option<HashMap<String, SystemTime>>> {
    IN_QUEUE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Message `id` is in the queue: just committed (`fresh`, counted as queued,
/// arrived now) or found at recovery (arrived at `arrival`, Unix seconds).
pub(crate) fn enter_queue(id: &str, fresh: bool, arrival: u64) {
    let arrival = if fresh {
        add(&COUNTERS.queued);
        SystemTime::now()
    } else {
        UNIX_EPOCH + Duration::from_secs(arrival)
    };
    let mut queue = lock();
    queue
        .get_or_insert_with(HashMap::new)
        .entry(id.to_owned())
        .or_insert(arrival);
}

/// Message `id` left the queue.
pub(crate) fn leave_queue(id: &str) {
    if let Some(queue) = lock().as_mut() {
        queue.remove(id);
    }
}

/// The delivery-time histogram: counts per bucket of [`DELIVERY_BUCKETS`] (then
/// `+Inf`), their sum in seconds and their count.
pub use stoa_netkit::metrics::Histogram;

/// This process's mail counters at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    /// SMTP sessions accepted.
    pub smtp_sessions: u64,
    /// LMTP sessions accepted.
    pub lmtp_sessions: u64,
    /// Messages accepted (`250` after the final dot).
    pub accepted: u64,
    /// Refusals by reason, every [`Reject`] listed.
    pub rejected: Vec<(Reject, u64)>,
    /// Messages committed to the queue (accepted ones and bounces).
    pub queued: u64,
    /// Recipients deferred (an attempt failed for now).
    pub deferred: u64,
    /// Recipients bounced (failed for good or expired).
    pub bounced: u64,
    /// Recipients delivered.
    pub delivered: u64,
    /// Messages in the queue now.
    pub queue_length: u64,
    /// How long the oldest message in the queue has been there; zero when empty.
    pub queue_oldest: Duration,
    /// Time from arrival to delivery, per delivered recipient.
    pub delivery: Histogram,
}

/// This process's mail counters.
pub fn snapshot() -> Snapshot {
    let c = &COUNTERS;
    let read = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let (queue_length, oldest) = {
        let queue = lock();
        let queue = queue.as_ref();
        let oldest = queue.and_then(|q| q.values().min().copied());
        (queue.map_or(0, HashMap::len) as u64, oldest)
    };
    let queue_oldest = oldest
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default();
    let counts: Vec<u64> = c.delivery_buckets.iter().map(read).collect();
    let delivery = Histogram::from_counts(&DELIVERY_BUCKETS, &counts, read(&c.delivery_micros));
    Snapshot {
        smtp_sessions: read(&c.sessions[Dialect::Smtp as usize]),
        lmtp_sessions: read(&c.sessions[Dialect::Lmtp as usize]),
        accepted: read(&c.accepted),
        rejected: Reject::ALL
            .iter()
            .map(|&r| (r, read(&c.rejected[r as usize])))
            .collect(),
        queued: read(&c.queued),
        deferred: read(&c.deferred),
        bounced: read(&c.bounced),
        delivered: read(&c.delivered),
        queue_length,
        queue_oldest,
        delivery,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_counted_once_per_message_and_delivery_is_timed() {
        let before = snapshot();
        enter_queue("metrics-test-a", true, 0);
        enter_queue("metrics-test-old", false, 1);
        // Recovered again (a rebuilt server): still one message.
        enter_queue("metrics-test-old", false, 1);
        let during = snapshot();
        assert!(during.queued > before.queued);
        assert!(during.queue_length >= 2);
        assert!(during.queue_oldest > Duration::from_secs(1_000_000_000));
        count_delivered("metrics-test-a");
        leave_queue("metrics-test-a");
        leave_queue("metrics-test-old");
        let after = snapshot();
        assert!(after.delivered > before.delivered);
        assert!(after.delivery.count > before.delivery.count);
        let last = after.delivery.buckets.last().expect("+Inf bucket");
        assert_eq!(last.0, f64::INFINITY);
        let sum: u64 = after.delivery.buckets.iter().map(|b| b.1).sum();
        assert_eq!(sum, after.delivery.count);
    }

    #[test]
    fn every_reason_has_its_label() {
        for (i, r) in Reject::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i);
        }
        assert_eq!(
            Reject::of_aborted(&ProtoError::MessageTooLarge),
            Reject::TooLarge
        );
        assert_eq!(Reject::of_aborted(&ProtoError::BareLf), Reject::Malformed);
    }
}
