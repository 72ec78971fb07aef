//! The mailboxes the engine hands to POP sessions and probes (`mail2001.md`
//! §1.5): the random and retry pools, which mailboxes are busy, and when each
//! retry-pool mailbox was last checked.
//!
//! A load generator of an agents run keeps only its share of both pools
//! ([`Pools::keep_share`]): every generator draws the same pools from the run's
//! seed and keeps the mailboxes at its own positions, so the shares are disjoint
//! and cover every account, and no mailbox is checked by two generators.

use fastrand::Rng;
use tokio::time::Instant;

use crate::engine::RETRY_INTERVAL;

/// Attempts to draw a free mailbox at random before scanning.
const PICK_TRIES: usize = 64;

/// The mailboxes: pools, busy marks, retry-pool check times.
#[derive(Debug)]
pub(crate) struct Pools {
    random: Vec<u32>,
    retry: Vec<u32>,
    /// Last check of each retry-pool mailbox (same index as `retry`).
    last_check: Vec<Option<Instant>>,
    /// Mailboxes in a POP session or under a probe (index = account number).
    busy: Vec<bool>,
}

impl Pools {
    /// The pools of `users` accounts, `retry` of them (at most all) in the
    /// retry pool, drawn with `rng`.
    pub(crate) fn new(users: u32, retry: u32, rng: &mut Rng) -> Pools {
        let mut all: Vec<u32> = (1..=users).collect();
        rng.shuffle(&mut all);
        let retry_len = (retry as usize).min(all.len());
        let random = all.split_off(retry_len);
        Pools {
            last_check: vec![None; all.len()],
            retry: all,
            random,
            busy: vec![false; users as usize + 1],
        }
    }

    /// Keeps only share `index` of `agents` of both pools: the mailboxes at
    /// positions `index`, `index + agents`, … of each (the pools are already in
    /// random order).
    pub(crate) fn keep_share(&mut self, index: u32, agents: u32) {
        let (index, agents) = (index as usize, agents.max(1) as usize);
        let mine = |i: &usize| i % agents == index;
        let keep = |v: &[u32]| -> Vec<u32> {
            v.iter()
                .enumerate()
                .filter(|(i, _)| mine(i))
                .map(|(_, &u)| u)
                .collect()
        };
        self.random = keep(&self.random);
        self.retry = keep(&self.retry);
        self.last_check = vec![None; self.retry.len()];
    }

    /// Mailboxes in the random pool.
    pub(crate) fn random_len(&self) -> usize {
        self.random.len()
    }

    /// Mailboxes in the retry pool.
    pub(crate) fn retry_len(&self) -> usize {
        self.retry.len()
    }

    /// A random-pool mailbox not in use, marked busy.
    pub(crate) fn take_random(&mut self, rng: &mut Rng) -> Option<u32> {
        if self.random.is_empty() {
            return None;
        }
        for _ in 0..PICK_TRIES {
            let u = self.random[rng.usize(..self.random.len())];
            if !self.busy[u as usize] {
                self.busy[u as usize] = true;
                return Some(u);
            }
        }
        let start = rng.usize(..self.random.len());
        let n = self.random.len();
        let found = (0..n)
            .map(|i| self.random[(start + i) % n])
            .find(|&u| !self.busy[u as usize])?;
        self.busy[found as usize] = true;
        Some(found)
    }

    /// A retry-pool mailbox not in use and not checked for [`RETRY_INTERVAL`],
    /// marked busy and checked now.
    pub(crate) fn take_retry(&mut self, rng: &mut Rng, now: Instant) -> Option<u32> {
        let n = self.retry.len();
        if n == 0 {
            return None;
        }
        let eligible = |p: &Pools, i: usize| {
            !p.busy[p.retry[i] as usize]
                && p.last_check[i].is_none_or(|t| now.duration_since(t) >= RETRY_INTERVAL)
        };
        let pick = (0..PICK_TRIES)
            .map(|_| rng.usize(..n))
            .find(|&i| eligible(self, i))
            .or_else(|| {
                let start = rng.usize(..n);
                (0..n).map(|k| (start + k) % n).find(|&i| eligible(self, i))
            })?;
        self.last_check[pick] = Some(now);
        let u = self.retry[pick];
        self.busy[u as usize] = true;
        Some(u)
    }

    pub(crate) fn release(&mut self, user: u32) {
        if let Some(b) = self.busy.get_mut(user as usize) {
            *b = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn pools_split_and_exclude() {
        let mut rng = Rng::with_seed(1);
        let mut p = Pools::new(1000, 75, &mut rng);
        assert_eq!(p.retry.len(), 75);
        assert_eq!(p.random.len(), 925);
        let mut all: Vec<u32> = p.retry.iter().chain(&p.random).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (1..=1000).collect::<Vec<_>>());
        // Every retry mailbox once, then none until 300 s pass.
        let now = Instant::now();
        let mut seen = Vec::new();
        for _ in 0..75 {
            let u = p.take_retry(&mut rng, now).expect("eligible");
            p.release(u);
            seen.push(u);
        }
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 75);
        assert_eq!(p.take_retry(&mut rng, now + Duration::from_secs(299)), None);
        assert!(p.take_retry(&mut rng, now + RETRY_INTERVAL).is_some());
        // Busy mailboxes are never handed out twice.
        let mut taken = Vec::new();
        while let Some(u) = p.take_random(&mut rng) {
            taken.push(u);
        }
        assert_eq!(taken.len(), 925);
        p.release(taken[0]);
        assert_eq!(p.take_random(&mut rng), Some(taken[0]));
    }

    /// Three generators' shares of one run's pools: disjoint, complete, and
    /// each within one mailbox of a third.
    #[test]
    fn shares_are_disjoint_and_complete() {
        let whole = Pools::new(1000, 75, &mut Rng::with_seed(4));
        let mut random = Vec::new();
        let mut retry = Vec::new();
        for index in 0..3 {
            let mut p = Pools::new(1000, 75, &mut Rng::with_seed(4));
            p.keep_share(index, 3);
            assert!(p.random_len().abs_diff(925 / 3) <= 1, "{}", p.random_len());
            assert_eq!(p.retry_len(), 25);
            assert_eq!(p.last_check.len(), 25);
            random.extend_from_slice(&p.random);
            retry.extend_from_slice(&p.retry);
        }
        random.sort_unstable();
        retry.sort_unstable();
        let (mut want_random, mut want_retry) = (whole.random.clone(), whole.retry.clone());
        want_random.sort_unstable();
        want_retry.sort_unstable();
        assert_eq!((random, retry), (want_random, want_retry));
    }
}
