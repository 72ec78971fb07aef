//! Delivery of queued messages: the scheduler, local delivery, the LMTP client to
//! other store hosts, the relay client and bounces.
//!
//! The scheduler runs on its own thread (one current-thread runtime). It keeps the
//! queued message ids in a timer heap, starts at most
//! [`crate::config::QueueConfig::max_deliveries`] attempts at once, and never two
//! for the same message. An attempt:
//!
//! 1. reads the envelope and the message (on a blocking thread);
//! 2. routes every pending local recipient: it looks the user up again in the
//!    directory (blocking thread) and delivers by its `mailHost` (`destination`):
//!    none, or this host's name, through [`LocalDelivery`]; another store host over
//!    LMTP (`lmtp.rs`), one transaction per host. A user deleted since RCPT gets a
//!    bounce (`5.1.1`); a directory that does not answer is a temporary failure
//!    (`4.4.3`), retried on the schedule below. Between these deliveries (and
//!    before the relay) the envelope is saved when more are to come, so a crash
//!    during one does not repeat the others;
//! 3. relays every pending remote recipient through the smart host
//!    ([`relay::send`]), one outcome per recipient;
//! 4. finishes (blocking thread): recipients that failed for good, and every one
//!    still pending once the message is older than the queue lifetime, are marked
//!    bounced and a DSN ([`bounce::build`]) is queued for the sender, unless the
//!    sender is null; the bounce is queued *before* the envelope records the
//!    failure, so a crash repeats a bounce rather than losing one. Then the message
//!    leaves the queue if every recipient is done, or the envelope is saved with
//!    the next retry time: [`crate::config::QueueConfig::min_backoff`] doubled on
//!    each failed attempt up to `max_backoff` (Postfix's schedule).
//!
//! The route is decided at delivery, not recorded at RCPT: the envelope only says
//! "a user of the directory", so a user moved to another store host while mail
//! waits (a retry, a stopped store host) gets it on the new host, and the
//! directory's own cache bounds how often it is asked.
//!
//! Delivery is at least once: a crash between a delivery and the envelope's update
//! delivers again (RFC 5321 §6.1 prefers a duplicate to a loss).

pub mod bounce;
pub(crate) mod lmtp;
pub mod local;
pub mod relay;
mod wire;

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::io;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use stoa_directory::{Directory, Resolution, Target, User};
use stoa_netkit::shutdown::Shutdown;
use tokio::sync::mpsc;

use crate::config::QueueConfig;
use crate::queue::control::Requests;
use crate::queue::{Envelope, Queue, Recipient, RecipientState, Route, envelope, unix_now};
pub use lmtp::DEFAULT_LMTP_PORT;
pub use local::{DeliveryError, LocalDelivery, StoreDelivery};
pub use relay::{Outcome, Relay};

/// Tells the scheduler a message is queued and due now.
pub(crate) type Notifier = mpsc::UnboundedSender<String>;

/// Everything an attempt needs.
pub(crate) struct Deliverer {
    pub(crate) queue: Arc<Queue>,
    pub(crate) directory: Arc<dyn Directory>,
    pub(crate) local: Arc<dyn LocalDelivery>,
    pub(crate) relay: Option<Relay>,
    pub(crate) lmtp: lmtp::Lmtp,
    pub(crate) config: QueueConfig,
    pub(crate) hostname: String,
    /// How long the scheduler's stop waits for the attempts in flight.
    pub(crate) grace: Duration,
}

/// The timer heap: (due, sequence, id), earliest first.
type Timers = BinaryHeap<Reverse<(Instant, u64, String)>>;

/// When each queued message is due: a timer heap in which a message has one live
/// entry, the one of its latest [`Schedule::push`] (older ones are skipped), so a
/// flush can move every message to now without attempting any twice.
#[derive(Default)]
struct Schedule {
    timers: Timers,
    seq: u64,
    latest: HashMap<String, u64>,
}

impl Schedule {
    /// Schedules `id` at `at`, replacing its earlier time.
    fn push(&mut self, at: Instant, id: String) {
        self.seq += 1;
        self.latest.insert(id.clone(), self.seq);
        self.timers.push(Reverse((at, self.seq, id)));
    }

    /// The earliest live due time.
    fn next_due(&mut self) -> Option<Instant> {
        while let Some(Reverse((due, seq, id))) = self.timers.peek() {
            if self.latest.get(id) == Some(seq) {
                return Some(*due);
            }
            self.timers.pop();
        }
        None
    }

    /// The earliest message due by `now`, taken off the schedule.
    fn pop_due(&mut self, now: Instant) -> Option<String> {
        if self.next_due()? > now {
            return None;
        }
        let Reverse((_, _, id)) = self.timers.pop()?;
        self.latest.remove(&id);
        Some(id)
    }
}

/// Runs the scheduler until `shutdown`, then waits up to the settings' grace for
/// the attempts in flight. Messages not finished stay queued for the next start.
/// Each attempt takes the settings of `current` as they are when it starts. A
/// flush request ([`crate::queue::control`]) makes every queued message due now.
pub(crate) async fn run(
    current: Arc<crate::runner::Current>,
    notify: Notifier,
    mut incoming: mpsc::UnboundedReceiver<String>,
    recovered: Vec<Envelope>,
    mut shutdown: Shutdown,
) {
    // The settings of the moment: a reload replaces them between attempts.
    let settings = || Arc::clone(&current.read().unwrap_or_else(PoisonError::into_inner));
    let mut requests = Requests::open(settings().queue.dir());
    let mut schedule = Schedule::default();
    let start = Instant::now();
    let now_secs = unix_now();
    for envelope in recovered {
        let wait = Duration::from_secs(envelope.next_try.saturating_sub(now_secs));
        schedule.push(start + wait, envelope.id);
    }
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(String, Option<Duration>)>();
    let mut in_flight = HashSet::new();
    loop {
        let deliverer = settings();
        let max = deliverer.config.max_deliveries.max(1);
        let now = Instant::now();
        while in_flight.len() < max {
            let Some(id) = schedule.pop_due(now) else {
                break;
            };
            if !in_flight.insert(id.clone()) {
                continue;
            }
            let (d, n, done) = (Arc::clone(&deliverer), notify.clone(), done_tx.clone());
            tokio::spawn(async move {
                let next = attempt(&d, &id, &n).await;
                let _ = done.send((id, next));
            });
        }
        let next_due = schedule.next_due().filter(|_| in_flight.len() < max);
        tokio::select! {
            _ = shutdown.wait() => break,
            Some(id) = incoming.recv() => schedule.push(Instant::now(), id),
            Some((id, next)) = done_rx.recv() => {
                in_flight.remove(&id);
                if let Some(delay) = next {
                    schedule.push(Instant::now() + delay, id);
                }
            }
            () = requests.flush() => {
                let queue = Arc::clone(&deliverer.queue);
                match blocking(move || queue.ids()).await.and_then(|r| r) {
                    Ok(ids) => {
                        tracing::info!("queue: flush requested: {} messages due now", ids.len());
                        let now = Instant::now();
                        // One in flight is rescheduled when it ends.
                        for id in ids.into_iter().filter(|id| !in_flight.contains(id)) {
                            schedule.push(now, id);
                        }
                    }
                    Err(e) => tracing::error!("queue: flush requested, cannot list the queue: {e}"),
                }
            }
            _ = sleep_until(next_due) => {}
        }
    }
    let deadline = tokio::time::Instant::now() + settings().grace;
    while !in_flight.is_empty() {
        tokio::select! {
            Some((id, _)) = done_rx.recv() => { in_flight.remove(&id); }
            _ = tokio::time::sleep_until(deadline) => {
                tracing::warn!("queue: {} deliveries still running at shutdown; they will be retried", in_flight.len());
                break;
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Runs `f` on a blocking thread.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| io::Error::other(format!("delivery task failed: {e}")))
}

/// What an attempt finds once it has tried to take the message's lock.
enum Locked {
    /// Someone else holds the lock: an operator's command.
    Busy,
    /// The message is on hold.
    Held,
    /// The lock, the envelope and the message.
    Loaded(crate::queue::MessageLock, Envelope, Vec<u8>),
}

/// How soon a message locked by an operator's command is tried again.
const OPERATOR_WAIT: Duration = Duration::from_secs(1);

/// One delivery attempt of message `id`; returns when to try again, if ever (a
/// held message is looked at again after the minimal backoff).
async fn attempt(d: &Arc<Deliverer>, id: &str, notify: &Notifier) -> Option<Duration> {
    let retry = Some(d.config.min_backoff);
    let (queue, key) = (Arc::clone(&d.queue), id.to_owned());
    // The message's lock, held to the end of the attempt (the queue's module docs).
    let loaded = blocking(move || {
        let Some(lock) = queue.try_lock(&key)? else {
            return Ok(Locked::Busy);
        };
        if queue.is_held(&key) {
            return Ok(Locked::Held);
        }
        let envelope = queue.read_envelope(&key)?;
        Ok::<_, io::Error>(Locked::Loaded(lock, envelope, queue.read_message(&key)?))
    })
    .await
    .and_then(|r| r);
    let (_lock, mut envelope, message) = match loaded {
        Ok(Locked::Loaded(lock, envelope, message)) => (lock, envelope, message),
        Ok(Locked::Busy) => {
            tracing::debug!("queue {id}: locked by an operator's command, retrying soon");
            return Some(OPERATOR_WAIT);
        }
        Ok(Locked::Held) => {
            tracing::info!("queue {id}: on hold, not attempted");
            return retry;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            crate::metrics::leave_queue(id);
            return None;
        }
        Err(e) => {
            tracing::error!("queue {id}: cannot read: {e}");
            return retry;
        }
    };
    let message = Arc::new(message);
    let mut bounced = Vec::new();
    if !d.deliver_users(&mut envelope, &message, &mut bounced).await {
        return retry;
    }
    let remote = pending(&envelope, Route::Remote);
    if !remote.is_empty() {
        let addresses = addresses(&envelope, &remote);
        let outcomes = match &d.relay {
            Some(relay) => relay::send(relay, &envelope.sender, &addresses, &message).await,
            None => vec![
                Outcome::Permanent(
                    "5.4.4".into(),
                    "no relay host is configured for mail to other domains".into()
                );
                remote.len()
            ],
        };
        apply(&mut envelope, &remote, outcomes, &mut bounced);
    }
    let (dd, n) = (Arc::clone(d), notify.clone());
    match blocking(move || dd.finish(envelope, bounced, &message, &n)).await {
        Ok(Ok(next)) => next,
        Ok(Err(e)) | Err(e) => {
            tracing::error!("queue {id}: cannot record the attempt: {e}");
            retry
        }
    }
}

/// Indices of the pending recipients on `route`.
fn pending(envelope: &Envelope, route: Route) -> Vec<usize> {
    envelope
        .recipients
        .iter()
        .enumerate()
        .filter(|(_, r)| r.route == route && r.state == RecipientState::Pending)
        .map(|(i, _)| i)
        .collect()
}

fn addresses(envelope: &Envelope, indices: &[usize]) -> Vec<String> {
    indices
        .iter()
        .map(|&i| envelope.recipients[i].address.clone())
        .collect()
}

/// Records outcomes; permanent failures go to `bounced`.
fn apply(
    envelope: &mut Envelope,
    indices: &[usize],
    outcomes: Vec<Outcome>,
    bounced: &mut Vec<usize>,
) {
    for (&i, outcome) in indices.iter().zip(outcomes) {
        let r = &mut envelope.recipients[i];
        match outcome {
            Outcome::Delivered => {
                tracing::info!("queue {}: delivered to <{}>", envelope.id, r.address);
                crate::metrics::count_delivered(&envelope.id);
                r.state = RecipientState::Delivered;
            }
            Outcome::Temporary(status, diagnostic) => {
                tracing::info!(
                    "queue {}: deferred <{}>: {diagnostic}",
                    envelope.id,
                    r.address
                );
                r.status = Some(status);
                r.diagnostic = Some(diagnostic);
                crate::metrics::count_deferred();
            }
            Outcome::Permanent(status, diagnostic) => {
                tracing::info!(
                    "queue {}: failed <{}>: {diagnostic}",
                    envelope.id,
                    r.address
                );
                r.state = RecipientState::Bounced;
                r.status = Some(status);
                r.diagnostic = Some(diagnostic);
                bounced.push(i);
                crate::metrics::count_bounced();
            }
        }
    }
}

/// Recipient indices by store host, in name order.
type HostGroups = BTreeMap<String, Vec<usize>>;

/// Where one user's mail goes, as the directory says at delivery time.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Destination {
    /// This host's store.
    Here(User),
    /// Another store host, by its normalised name, over LMTP.
    Host(String),
    /// Nowhere this attempt: the outcome says whether to retry or bounce.
    Failed(Outcome),
}

/// The routing decision for `address` from its directory lookup: no `mailHost`,
/// or `this_host` (the server's name), is here; another host gets LMTP; nobody
/// found bounces; a directory failure is retried.
fn destination(
    address: &str,
    lookup: stoa_directory::Result<Option<User>>,
    this_host: &str,
) -> Destination {
    match lookup {
        Ok(Some(user)) => match user
            .mail_host
            .as_deref()
            .map(stoa_directory::normalize_host)
        {
            Some(host) if host != stoa_directory::normalize_host(this_host) => {
                Destination::Host(host)
            }
            _ => Destination::Here(user),
        },
        Ok(None) => Destination::Failed(Outcome::Permanent(
            "5.1.1".into(),
            format!("<{address}>: no such user here"),
        )),
        // Any directory failure is retried (a corrupt file too: it may be fixed
        // before the queue lifetime runs out); an unreachable server is 4.4.3.
        Err(e) => {
            let status = if e.is_temporary() { "4.4.3" } else { "4.3.0" };
            Destination::Failed(Outcome::Temporary(
                status.into(),
                format!("directory lookup failed: {e}"),
            ))
        }
    }
}

/// The store's results as outcomes.
fn store_outcomes(results: &[Result<(), DeliveryError>], n: usize) -> Vec<Outcome> {
    (0..n)
        .map(|k| match results.get(k) {
            Some(Ok(())) => Outcome::Delivered,
            Some(Err(DeliveryError::Permanent(e))) => Outcome::Permanent("5.2.0".into(), e.clone()),
            Some(Err(DeliveryError::Temporary(e))) => Outcome::Temporary("4.2.0".into(), e.clone()),
            None => Outcome::Temporary("4.3.0".into(), "the store gave no result".into()),
        })
        .collect()
}

impl Deliverer {
    /// Routes and delivers every pending local recipient (step 2 of the module
    /// docs). `false` when the envelope could not be saved between deliveries.
    async fn deliver_users(
        &self,
        envelope: &mut Envelope,
        message: &Arc<Vec<u8>>,
        bounced: &mut Vec<usize>,
    ) -> bool {
        let local = pending(envelope, Route::Local);
        if local.is_empty() {
            return true;
        }
        let routed = self.route(addresses(envelope, &local)).await;
        let (here, hosts) = self.split(envelope, &local, routed, bounced);
        let mut later = !hosts.is_empty() || !pending(envelope, Route::Remote).is_empty();
        if !here.is_empty() {
            let (indices, users): (Vec<usize>, Vec<User>) = here.into_iter().unzip();
            let outcomes = self.store_here(&envelope.sender, users, message).await;
            apply(envelope, &indices, outcomes, bounced);
            if later && !self.checkpoint(envelope, bounced).await {
                return false;
            }
        }
        let mut hosts = hosts.into_iter().peekable();
        while let Some((host, indices)) = hosts.next() {
            let addresses = addresses(envelope, &indices);
            let outcomes = self
                .lmtp
                .send(&host, &envelope.sender, &addresses, message)
                .await;
            apply(envelope, &indices, outcomes, bounced);
            later = hosts.peek().is_some() || !pending(envelope, Route::Remote).is_empty();
            if later && !self.checkpoint(envelope, bounced).await {
                return false;
            }
        }
        true
    }

    /// Each address's destination, from the directory (on a blocking thread).
    async fn route(&self, wanted: Vec<String>) -> Vec<Destination> {
        let (directory, this_host) = (Arc::clone(&self.directory), self.hostname.clone());
        let n = wanted.len();
        let routed = blocking(move || {
            let route = |a: &String| destination(a, directory.lookup(a), &this_host);
            wanted.iter().map(route).collect::<Vec<_>>()
        })
        .await;
        routed.unwrap_or_else(|e| {
            let failed = Outcome::Temporary("4.3.0".into(), e.to_string());
            vec![Destination::Failed(failed); n]
        })
    }

    /// Stores `message` from `sender` for `users` of this host (on a blocking
    /// thread).
    async fn store_here(
        &self,
        sender: &str,
        users: Vec<User>,
        message: &Arc<Vec<u8>>,
    ) -> Vec<Outcome> {
        let (store, m, n) = (Arc::clone(&self.local), Arc::clone(message), users.len());
        let sender = sender.to_owned();
        match blocking(move || store.deliver(&sender, &m, &users)).await {
            Ok(results) => store_outcomes(&results, n),
            Err(e) => vec![Outcome::Temporary("4.3.0".into(), e.to_string()); n],
        }
    }

    /// Sorts routed recipients into this host's users and each store host's;
    /// failures are recorded at once.
    fn split(
        &self,
        envelope: &mut Envelope,
        local: &[usize],
        routed: Vec<Destination>,
        bounced: &mut Vec<usize>,
    ) -> (Vec<(usize, User)>, HostGroups) {
        let mut here = Vec::new();
        let mut hosts = HostGroups::new();
        for (&i, destination) in local.iter().zip(routed) {
            match destination {
                Destination::Here(user) => here.push((i, user)),
                Destination::Host(host) => hosts.entry(host).or_default().push(i),
                Destination::Failed(outcome) => apply(envelope, &[i], vec![outcome], bounced),
            }
        }
        (here, hosts)
    }

    /// Saves the envelope between deliveries so that a crash does not repeat the
    /// ones done. Not once a recipient has failed for good: its bounce must be
    /// queued before the envelope says so (in `finish`). `false` on an error.
    async fn checkpoint(&self, envelope: &Envelope, bounced: &[usize]) -> bool {
        if !bounced.is_empty() {
            return true;
        }
        let (queue, e) = (Arc::clone(&self.queue), envelope.clone());
        match blocking(move || queue.save_envelope(&e))
            .await
            .and_then(|r| r)
        {
            Ok(()) => true,
            Err(e) => {
                tracing::error!("queue {}: cannot save the envelope: {e}", envelope.id);
                false
            }
        }
    }

    /// Expiry, bounces, and the envelope's new state on disk. Blocks.
    fn finish(
        &self,
        mut envelope: Envelope,
        mut bounced: Vec<usize>,
        message: &[u8],
        notify: &Notifier,
    ) -> io::Result<Option<Duration>> {
        let now = unix_now();
        if now.saturating_sub(envelope.arrival) >= self.config.max_lifetime.as_secs() {
            for (i, r) in envelope.recipients.iter_mut().enumerate() {
                if r.state == RecipientState::Pending {
                    let last = r
                        .diagnostic
                        .take()
                        .unwrap_or_else(|| "no attempt succeeded".into());
                    r.state = RecipientState::Bounced;
                    r.status = Some("4.4.7".into());
                    r.diagnostic =
                        Some(format!("message expired in the queue; last error: {last}"));
                    bounced.push(i);
                    crate::metrics::count_bounced();
                }
            }
        }
        if !bounced.is_empty() && !envelope.sender.is_empty() {
            let failed: Vec<&Recipient> =
                bounced.iter().map(|&i| &envelope.recipients[i]).collect();
            let bounce = bounce::build(&self.hostname, &envelope, &failed, message);
            if let Some(id) = self.queue_bounce(&envelope.sender, &bounce)? {
                tracing::info!("queue {}: bounce queued as {id}", envelope.id);
                let _ = notify.send(id);
            }
        } else if !bounced.is_empty() {
            tracing::info!("queue {}: no bounce for the null sender", envelope.id);
        }
        if envelope.is_done() {
            self.queue.remove(&envelope.id)?;
            tracing::info!("queue {}: removed, every recipient done", envelope.id);
            return Ok(None);
        }
        envelope.attempts += 1;
        let delay = backoff(&self.config, envelope.attempts);
        envelope.next_try = now + delay.as_secs();
        self.queue.save_envelope(&envelope)?;
        Ok(Some(delay))
    }

    /// Queues a bounce to `sender`; `None` when the sender cannot receive mail.
    fn queue_bounce(&self, sender: &str, bounce: &[u8]) -> io::Result<Option<String>> {
        let recipients = match self.directory.resolve(sender).map_err(io::Error::other)? {
            Resolution::NotLocal => {
                vec![Recipient::new(sender.into(), sender.into(), Route::Remote)]
            }
            Resolution::Unknown => {
                tracing::warn!("bounce to <{sender}> dropped: no such local user");
                return Ok(None);
            }
            Resolution::Deliver(targets) => targets
                .into_iter()
                .map(|t| match t {
                    Target::Local(user) => {
                        Recipient::new(user.address, sender.into(), Route::Local)
                    }
                    Target::Remote(address) => {
                        Recipient::new(address, sender.into(), Route::Remote)
                    }
                })
                .collect(),
        };
        let now = unix_now();
        let envelope = Envelope {
            version: envelope::VERSION,
            id: String::new(),
            sender: String::new(),
            arrival: now,
            attempts: 0,
            next_try: now,
            client: "local".into(),
            recipients,
        };
        Ok(Some(self.queue.enqueue(bounce, envelope)?.id))
    }
}

/// The wait after `attempts` failed attempts: `min_backoff` doubled each time, at
/// most `max_backoff`.
pub(crate) fn backoff(config: &QueueConfig, attempts: u32) -> Duration {
    let factor = 2u32.saturating_pow(attempts.saturating_sub(1).min(30));
    config
        .min_backoff
        .saturating_mul(factor)
        .min(config.max_backoff)
}

#[cfg(test)]
mod tests {
    use stoa_directory::MailboxId;

    use super::*;

    fn user(host: Option<&str>) -> User {
        User {
            address: "ann@stoa.test".into(),
            mailbox: MailboxId(7),
            mail_host: host.map(Into::into),
        }
    }

    #[test]
    fn routing_decision() {
        let here = "mx.stoa.test";
        let route = |lookup| destination("ann@stoa.test", lookup, here);
        assert_eq!(route(Ok(Some(user(None)))), Destination::Here(user(None)));
        let named_here = user(Some("MX.stoa.test."));
        assert_eq!(
            route(Ok(Some(named_here.clone()))),
            Destination::Here(named_here)
        );
        assert_eq!(
            route(Ok(Some(user(Some("Store-B.stoa.test."))))),
            Destination::Host("store-b.stoa.test".into())
        );
        assert!(matches!(
            route(Ok(None)),
            Destination::Failed(Outcome::Permanent(s, _)) if s == "5.1.1"
        ));
        let down = stoa_directory::Error::Unavailable("no LDAP server answered".into());
        assert!(matches!(
            route(Err(down)),
            Destination::Failed(Outcome::Temporary(s, _)) if s == "4.4.3"
        ));
    }

    #[test]
    fn a_message_rescheduled_is_due_once() {
        let mut schedule = Schedule::default();
        let now = Instant::now();
        schedule.push(now + Duration::from_secs(300), "A".into());
        schedule.push(now + Duration::from_secs(60), "B".into());
        assert_eq!(schedule.pop_due(now), None);
        // A flush: both due now, their old times forgotten.
        schedule.push(now, "A".into());
        schedule.push(now, "B".into());
        let mut due = Vec::new();
        while let Some(id) = schedule.pop_due(now + Duration::from_secs(400)) {
            due.push(id);
        }
        assert_eq!(due, ["A", "B"]);
        assert_eq!(schedule.next_due(), None);
    }

    #[test]
    fn postfix_backoff() {
        let c = QueueConfig::default();
        let secs: Vec<u64> = (1..=6).map(|a| backoff(&c, a).as_secs()).collect();
        assert_eq!(secs, [300, 600, 1200, 2400, 4000, 4000]);
        assert_eq!(backoff(&c, u32::MAX).as_secs(), 4000);
    }
}
