//! The initial store (`mail2001.md` §1.11): every mailbox filled by SMTP to the
//! steady state, then checked.
//!
//! Each account's message count and sizes are drawn from a generator seeded by
//! the store seed and the account number, so a fill is reproducible and can be
//! resumed: the caller journals the accounts whose messages were all accepted
//! and passes them back as `done`. Several connections fill in parallel, each
//! sending many messages (one recipient each) at full speed.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use fastrand::Rng;
use stoa_mail2001::dist;

use crate::engine::Workload;
use crate::message::{Message, Tag};
use crate::pace::Pace;
use crate::pop_client::PopPlan;
use crate::smtp_client::{FillMessage, smtp_fill};

/// Accounts one fill task takes at a time.
const CHUNK: u32 = 16;
/// Most messages sent over one connection.
const PER_CONNECTION: usize = 200;
/// Attempts at one connection's messages before the fill gives up.
const RETRIES: u32 = 3;

/// The messages account `user` holds in the initial store: their sizes in bytes
/// (the count is the length), drawn from the steady-state model.
pub fn initial_mailbox(seed: u64, user: u32) -> Vec<u64> {
    let mut rng = Rng::with_seed(seed ^ (u64::from(user).wrapping_mul(0x9e37_79b9_7f4a_7c15)));
    let n = dist::initial_mailbox_count(&mut rng);
    (0..n).map(|_| dist::message_size_bytes(&mut rng)).collect()
}

/// Progress of a fill.
#[derive(Debug, Default)]
pub struct FillProgress {
    /// Accounts finished (including those done before a resume).
    pub users_done: AtomicU32,
    /// Messages accepted by this fill.
    pub messages: AtomicU64,
    /// Bytes accepted by this fill.
    pub bytes: AtomicU64,
}

/// Why a fill stopped.
#[derive(Debug, thiserror::Error)]
#[error("the initial fill failed at account {user}: {detail}")]
pub struct FillError {
    /// The account whose messages could not be sent.
    pub user: u32,
    /// The server's reply or the I/O error.
    pub detail: String,
}

/// Fills every account not in `done` with its [`initial_mailbox`], over
/// `connections` parallel connections; `on_user_done` is called (from the fill's
/// tasks) for every account whose messages were all accepted.
pub async fn fill(
    w: &Workload,
    store_seed: u64,
    connections: u32,
    done: &HashSet<u32>,
    progress: &Arc<FillProgress>,
    on_user_done: Arc<dyn Fn(u32) + Send + Sync>,
) -> Result<(), FillError> {
    progress
        .users_done
        .store(done.len() as u32, Ordering::Relaxed);
    let next = Arc::new(AtomicU32::new(1));
    let done = Arc::new(done.clone());
    let w = Arc::new(w.clone());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections.max(1) {
        let (next, done, w, progress, on_user_done) = (
            Arc::clone(&next),
            Arc::clone(&done),
            Arc::clone(&w),
            Arc::clone(progress),
            Arc::clone(&on_user_done),
        );
        tasks.spawn(async move {
            loop {
                let first = next.fetch_add(CHUNK, Ordering::Relaxed);
                if first > w.users {
                    return Ok(());
                }
                let last = first.saturating_add(CHUNK - 1).min(w.users);
                let users: Vec<u32> = (first..=last).filter(|u| !done.contains(u)).collect();
                fill_users(&w, store_seed, &users, &progress).await?;
                for u in users {
                    progress.users_done.fetch_add(1, Ordering::Relaxed);
                    on_user_done(u);
                }
            }
        });
    }
    let mut result = Ok(());
    while let Some(joined) = tasks.join_next().await {
        if let Ok(Err(e)) = joined
            && result.is_ok()
        {
            result = Err(e);
            tasks.abort_all();
        }
    }
    result
}

/// Sends the initial messages of `users`.
async fn fill_users(
    w: &Workload,
    store_seed: u64,
    users: &[u32],
    progress: &FillProgress,
) -> Result<(), FillError> {
    let mut owners: Vec<u32> = Vec::new();
    let mut batch: Vec<FillMessage> = Vec::new();
    for &user in users {
        let to = w.account(user);
        for (i, size) in initial_mailbox(store_seed, user).into_iter().enumerate() {
            let from = format!("init@{}", w.remote_domain);
            let tag = Tag {
                run: 0,
                level: 0,
                measured: false,
                seq: u64::from(user) * 1000 + i as u64,
                probe: false,
            };
            owners.push(user);
            batch.push(FillMessage {
                message: Message::new(&from, &to, &tag, size as usize),
                mail_from: from,
                rcpt: to.clone(),
            });
        }
    }
    let helo = format!("init.{}", w.remote_domain);
    let mut sent = 0;
    let mut failures = 0;
    while sent < batch.len() {
        let end = (sent + PER_CONNECTION).min(batch.len());
        let messages = &batch[sent..end];
        let (accepted, failure) = smtp_fill(w.smtp, &helo, messages, w.reply_timeout).await;
        for m in &messages[..accepted.min(messages.len())] {
            progress.messages.fetch_add(1, Ordering::Relaxed);
            progress
                .bytes
                .fetch_add(m.message.len() as u64, Ordering::Relaxed);
        }
        sent += accepted.min(messages.len());
        let failure = failure.or_else(|| {
            (accepted == 0).then(|| {
                (
                    crate::tally::Function::SmtpData,
                    crate::tally::Failure::Protocol,
                    "no message accepted".to_owned(),
                )
            })
        });
        if let Some((function, kind, detail)) = failure {
            failures += 1;
            if failures >= RETRIES {
                return Err(FillError {
                    user: owners[sent.min(owners.len() - 1)],
                    detail: format!("{} failed ({kind:?}): {detail}", function.name()),
                });
            }
            tokio::time::sleep(Duration::from_millis(200 * u64::from(failures))).await;
        }
    }
    Ok(())
}

/// What a store check found in a sample of mailboxes.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StoreSample {
    /// Mailboxes checked.
    pub mailboxes: u64,
    /// Messages in them.
    pub messages: u64,
    /// Octets in them.
    pub octets: u64,
    /// Empty ones.
    pub empty: u64,
    /// Mailboxes whose check failed (login or connection).
    pub failed: u64,
}

/// STATs (over the workload's access) `sample` random accounts (all of them if there are fewer) over
/// `connections` parallel sessions.
pub async fn sample_store(w: &Workload, sample: u32, seed: u64, connections: u32) -> StoreSample {
    let mut rng = Rng::with_seed(seed);
    let mut users: Vec<u32> = (1..=w.users).collect();
    rng.shuffle(&mut users);
    users.truncate(sample as usize);
    check_accounts(w, users, connections).await.0
}

/// STATs (over the workload's access) `users` and returns the sample plus each account's message count
/// (`None` where the check failed).
pub async fn check_accounts(
    w: &Workload,
    users: Vec<u32>,
    connections: u32,
) -> (StoreSample, Vec<(u32, Option<u32>)>) {
    let queue = Arc::new(std::sync::Mutex::new(users));
    let w = Arc::new(w.clone());
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..connections.max(1) {
        let (queue, w) = (Arc::clone(&queue), Arc::clone(&w));
        tasks.spawn(async move {
            let mut out = Vec::new();
            loop {
                let user = queue
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .pop();
                let Some(user) = user else {
                    return out;
                };
                let plan = PopPlan {
                    addr: w.read_addr,
                    user: w.account(user),
                    password: w.password.clone(),
                    pace: Pace::full(),
                    reply_timeout: w.reply_timeout,
                    drop: None,
                };
                out.push((user, w.access.stat(&plan).await.ok()));
            }
        });
    }
    let mut sample = StoreSample::default();
    let mut counts = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        for (user, stat) in joined.unwrap_or_default() {
            sample.mailboxes += 1;
            match stat {
                Some((n, octets)) => {
                    sample.messages += u64::from(n);
                    sample.octets += octets;
                    sample.empty += u64::from(n == 0);
                    counts.push((user, Some(n)));
                }
                None => {
                    sample.failed += 1;
                    counts.push((user, None));
                }
            }
        }
    }
    (sample, counts)
}

/// Judges a sample against the steady state: the mean count within four
/// standard errors of 3.43 (the model's standard deviation is 4.12 messages per
/// mailbox), the mean size within four standard errors of 24.5 KB (standard
/// deviation 142 KB per message), no failed checks. Returns the problems.
pub fn judge_sample(s: &StoreSample) -> Vec<String> {
    let mut notes = Vec::new();
    if s.failed > 0 {
        notes.push(format!(
            "{} of {} mailbox checks failed",
            s.failed, s.mailboxes
        ));
    }
    let checked = s.mailboxes - s.failed;
    if checked == 0 {
        notes.push("no mailbox could be checked".to_owned());
        return notes;
    }
    let mean = s.messages as f64 / checked as f64;
    let expected = dist::mean_mailbox_messages();
    let tolerance = 4.0 * 4.12 / (checked as f64).sqrt();
    if (mean - expected).abs() > tolerance {
        notes.push(format!(
            "mean messages per mailbox {mean:.2}, the steady state has {expected:.2} (±{tolerance:.2} for {checked} mailboxes)"
        ));
    }
    if s.messages > 0 {
        let size_kb = s.octets as f64 / s.messages as f64 / 1024.0;
        let expected_kb = dist::mean_size_kb();
        let tolerance_kb = 4.0 * 142.0 / (s.messages as f64).sqrt();
        if (size_kb - expected_kb).abs() > tolerance_kb {
            notes.push(format!(
                "mean message size {size_kb:.1} KB, the distribution's is {expected_kb:.1} KB (±{tolerance_kb:.1} KB for {} messages)",
                s.messages
            ));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_mailboxes_are_reproducible_and_steady() {
        assert_eq!(initial_mailbox(7, 42), initial_mailbox(7, 42));
        let n = 20_000u32;
        let total: usize = (1..=n).map(|u| initial_mailbox(7, u).len()).sum();
        let mean = total as f64 / f64::from(n);
        assert!((mean - 3.43).abs() < 0.15, "{mean}");
        let empty = (1..=n)
            .filter(|&u| initial_mailbox(7, u).is_empty())
            .count();
        let share = empty as f64 / f64::from(n);
        assert!((share - 0.265).abs() < 0.015, "{share}");
    }

    #[test]
    fn judging_a_sample() {
        let good = StoreSample {
            mailboxes: 200,
            messages: 690,
            octets: 690 * 25 * 1024,
            empty: 53,
            failed: 0,
        };
        assert!(judge_sample(&good).is_empty());
        let empty_store = StoreSample {
            messages: 0,
            octets: 0,
            empty: 200,
            ..good
        };
        assert_eq!(judge_sample(&empty_store).len(), 1);
        let failed = StoreSample { failed: 3, ..good };
        assert_eq!(judge_sample(&failed).len(), 1);
    }
}
