//! Delivery of queued messages: the scheduler, local delivery, the relay client and
//! bounces.
//!
//! The scheduler runs on its own thread (one current-thread runtime). It keeps the
//! queued message ids in a timer heap, starts at most
//! [`crate::config::QueueConfig::max_deliveries`] attempts at once, and never two
//! for the same message. An attempt:
//!
//! 1. reads the envelope and the message (on a blocking thread);
//! 2. delivers to every pending local recipient through [`LocalDelivery`] (blocking
//!    thread), looking each user up again in the directory (a user deleted since
//!    RCPT gets a bounce, `5.1.1`); if remote recipients are pending too, the
//!    envelope is saved now, so a crash during the relay does not deliver locally
//!    twice;
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
//! Delivery is at least once: a crash between a delivery and the envelope's update
//! delivers again (RFC 5321 §6.1 prefers a duplicate to a loss).

pub mod bounce;
pub mod local;
pub mod relay;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stoa_directory::{Directory, Resolution, Target};
use stoa_netkit::shutdown::Shutdown;
use tokio::sync::mpsc;

use crate::config::QueueConfig;
use crate::queue::{Envelope, Queue, Recipient, RecipientState, Route, envelope, unix_now};
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
    pub(crate) config: QueueConfig,
    pub(crate) hostname: String,
}

/// The timer heap: (due, sequence, id), earliest first.
type Timers = BinaryHeap<Reverse<(Instant, u64, String)>>;

/// Runs the scheduler until `shutdown`, then waits up to `grace` for the attempts
/// in flight. Messages not finished stay queued for the next start.
pub(crate) async fn run(
    deliverer: Arc<Deliverer>,
    notify: Notifier,
    mut incoming: mpsc::UnboundedReceiver<String>,
    recovered: Vec<Envelope>,
    mut shutdown: Shutdown,
    grace: Duration,
) {
    let mut timers = Timers::new();
    let mut seq = 0u64;
    let mut push = |timers: &mut Timers, at: Instant, id: String| {
        seq += 1;
        timers.push(Reverse((at, seq, id)));
    };
    let start = Instant::now();
    let now_secs = unix_now();
    for envelope in recovered {
        let wait = Duration::from_secs(envelope.next_try.saturating_sub(now_secs));
        push(&mut timers, start + wait, envelope.id);
    }
    let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(String, Option<Duration>)>();
    let mut in_flight = HashSet::new();
    let max = deliverer.config.max_deliveries.max(1);
    loop {
        let now = Instant::now();
        while in_flight.len() < max {
            let Some(Reverse((due, _, _))) = timers.peek() else {
                break;
            };
            if *due > now {
                break;
            }
            let Some(Reverse((_, _, id))) = timers.pop() else {
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
        let next_due = timers
            .peek()
            .filter(|_| in_flight.len() < max)
            .map(|Reverse((due, _, _))| *due);
        tokio::select! {
            _ = shutdown.wait() => break,
            Some(id) = incoming.recv() => push(&mut timers, Instant::now(), id),
            Some((id, next)) = done_rx.recv() => {
                in_flight.remove(&id);
                if let Some(delay) = next {
                    push(&mut timers, Instant::now() + delay, id);
                }
            }
            _ = sleep_until(next_due) => {}
        }
    }
    let deadline = tokio::time::Instant::now() + grace;
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

/// One delivery attempt of message `id`; returns when to try again, if ever.
async fn attempt(d: &Arc<Deliverer>, id: &str, notify: &Notifier) -> Option<Duration> {
    let retry = Some(d.config.min_backoff);
    let (queue, key) = (Arc::clone(&d.queue), id.to_owned());
    let loaded = blocking(move || {
        Ok::<_, io::Error>((queue.read_envelope(&key)?, queue.read_message(&key)?))
    })
    .await
    .and_then(|r| r);
    let (mut envelope, message) = match loaded {
        Ok(loaded) => loaded,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::error!("queue {id}: cannot read: {e}");
            return retry;
        }
    };
    let message = Arc::new(message);
    let mut bounced = Vec::new();
    let local = pending(&envelope, Route::Local);
    if !local.is_empty() {
        let (dd, m) = (Arc::clone(d), Arc::clone(&message));
        let addresses = addresses(&envelope, &local);
        let outcomes = match blocking(move || dd.deliver_local(&m, &addresses)).await {
            Ok(outcomes) => outcomes,
            Err(e) => vec![Outcome::Temporary("4.3.0".into(), e.to_string()); local.len()],
        };
        apply(&mut envelope, &local, outcomes, &mut bounced);
        let remote_pending = !pending(&envelope, Route::Remote).is_empty();
        if remote_pending && bounced.is_empty() {
            let (queue, e) = (Arc::clone(&d.queue), envelope.clone());
            if let Err(e) = blocking(move || queue.save_envelope(&e))
                .await
                .and_then(|r| r)
            {
                tracing::error!("queue {id}: cannot save the envelope: {e}");
                return retry;
            }
        }
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
            }
        }
    }
}

impl Deliverer {
    /// Looks the users up and hands the message to the local store. Blocks.
    fn deliver_local(&self, message: &[u8], addresses: &[String]) -> Vec<Outcome> {
        let mut outcomes: Vec<Option<Outcome>> = vec![None; addresses.len()];
        let mut users = Vec::new();
        let mut slots = Vec::new();
        for (i, address) in addresses.iter().enumerate() {
            match self.directory.lookup(address) {
                Ok(Some(user)) => {
                    users.push(user);
                    slots.push(i);
                }
                Ok(None) => {
                    outcomes[i] = Some(Outcome::Permanent(
                        "5.1.1".into(),
                        format!("<{address}>: no such user here"),
                    ))
                }
                Err(e) => outcomes[i] = Some(Outcome::Temporary("4.3.0".into(), e.to_string())),
            }
        }
        if !users.is_empty() {
            let results = self.local.deliver(message, &users);
            for (k, &i) in slots.iter().enumerate() {
                outcomes[i] = Some(match results.get(k) {
                    Some(Ok(())) => Outcome::Delivered,
                    Some(Err(DeliveryError::Permanent(e))) => {
                        Outcome::Permanent("5.2.0".into(), e.clone())
                    }
                    Some(Err(DeliveryError::Temporary(e))) => {
                        Outcome::Temporary("4.2.0".into(), e.clone())
                    }
                    None => Outcome::Temporary("4.3.0".into(), "the store gave no result".into()),
                });
            }
        }
        outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or_else(|| Outcome::Temporary("4.3.0".into(), "not attempted".into()))
            })
            .collect()
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
    use super::*;

    #[test]
    fn postfix_backoff() {
        let c = QueueConfig::default();
        let secs: Vec<u64> = (1..=6).map(|a| backoff(&c, a).as_secs()).collect();
        assert_eq!(secs, [300, 600, 1200, 2400, 4000, 4000]);
        assert_eq!(backoff(&c, u32::MAX).as_secs(), 4000);
    }
}
