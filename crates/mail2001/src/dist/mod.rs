//! The workload's tables and samplers (§1.6, §1.7, §1.8, §1.9, §1.10, §1.11).
//!
//! Every sampler draws from a caller-provided [`fastrand::Rng`], so a seed fixes the
//! sequence. Uncertain points and the choices made here:
//! - Message sizes are the table's **point sizes** (1 KB, 2 KB, … 2,675 KB), not
//!   sizes spread within buckets: the point sizes reproduce the stated 24.5 KB mean
//!   (24.53 KB), so the tool most likely sent exactly these sizes. A "KB" is
//!   [`BYTES_PER_KB`] = 1,024 bytes (the white paper does not say).
//! - The initial mailbox counts are drawn from the white paper's model (§1.11: a
//!   92.5 %/7.5 % mix of two geometric distributions), which reproduces Table 2 to
//!   its printed precision and has no cut-off at 29 messages.
//! - The initial store uses the same size distribution as live mail (inferred).

use fastrand::Rng;

use crate::profile::{BYTES_PER_KB, LOCAL_RECIPIENT_SHARE, MODEM_SHARE, RETRY_POOL_SHARE};

/// `MSG_SIZE_DISTRIBUTION`: (size in KB, share of messages) ((WP) §4.2.1.1).
pub const MSG_SIZE_DISTRIBUTION: [(u32, f64); 10] = [
    (1, 0.1020),
    (2, 0.3071),
    (3, 0.2059),
    (4, 0.1078),
    (5, 0.0588),
    (6, 0.0374),
    (10, 0.0744),
    (100, 0.0979),
    (1_000, 0.0069),
    (2_675, 0.0018),
];

/// `MSG_RECP_DISTRIBUTION`: (recipients, share of messages) ((WP) §4.2.1.2); the
/// mean is 2.00, the maximum 20. Used for user and remote-MTA sessions alike.
pub const MSG_RECP_DISTRIBUTION: [(u32, f64); 20] = [
    (1, 0.8573),
    (2, 0.0166),
    (3, 0.0149),
    (4, 0.0134),
    (5, 0.0120),
    (6, 0.0108),
    (7, 0.0097),
    (8, 0.0088),
    (9, 0.0079),
    (10, 0.0071),
    (11, 0.0064),
    (12, 0.0058),
    (13, 0.0052),
    (14, 0.0047),
    (15, 0.0042),
    (16, 0.0038),
    (17, 0.0034),
    (18, 0.0031),
    (19, 0.0028),
    (20, 0.0021),
];

/// Steady-state messages per mailbox, (count, share) as printed in (WP) Table 2
/// (§1.11); the printed table stops at 29 and is rounded to 0.01 %.
pub const MAILBOX_DISTRIBUTION: [(u32, f64); 30] = [
    (0, 0.2650),
    (1, 0.1611),
    (2, 0.1225),
    (3, 0.0961),
    (4, 0.0756),
    (5, 0.0595),
    (6, 0.0468),
    (7, 0.0369),
    (8, 0.0290),
    (9, 0.0229),
    (10, 0.0180),
    (11, 0.0142),
    (12, 0.0112),
    (13, 0.0088),
    (14, 0.0069),
    (15, 0.0054),
    (16, 0.0043),
    (17, 0.0034),
    (18, 0.0027),
    (19, 0.0021),
    (20, 0.0016),
    (21, 0.0013),
    (22, 0.0010),
    (23, 0.0008),
    (24, 0.0006),
    (25, 0.0005),
    (26, 0.0004),
    (27, 0.0003),
    (28, 0.0002),
    (29, 0.0002),
];

/// Mail arriving per day at a random-pool mailbox, relative to its one emptying
/// check (S = 0.925 × 4, P = 1; §1.11).
const RANDOM_POOL_ARRIVALS: f64 = (1.0 - RETRY_POOL_SHARE) * 4.0;
/// Emptying checks per day of a random-pool mailbox.
const RANDOM_POOL_CHECKS: f64 = 1.0;
/// Mail arriving per day at a retry-pool mailbox (S = 0.075 × 4).
const RETRY_POOL_ARRIVALS: f64 = RETRY_POOL_SHARE * 4.0;
/// Emptying checks per day of a retry-pool mailbox (P = 3).
const RETRY_POOL_CHECKS: f64 = 3.0;

/// The value of a (value, share) table at uniform `u` in [0, 1), by cumulative
/// share; rounding slack at the top falls on the last entry.
pub fn from_uniform(table: &[(u32, f64)], u: f64) -> u32 {
    let mut acc = 0.0;
    for &(value, share) in table {
        acc += share;
        if u < acc {
            return value;
        }
    }
    table.last().map_or(0, |&(value, _)| value)
}

/// The expectation of a (value, share) table.
pub fn table_mean(table: &[(u32, f64)]) -> f64 {
    table.iter().map(|&(v, p)| f64::from(v) * p).sum()
}

/// Mean message size in KB (24.53).
pub fn mean_size_kb() -> f64 {
    table_mean(&MSG_SIZE_DISTRIBUTION)
}

/// Mean recipients per message (2.00).
pub fn mean_recipients() -> f64 {
    table_mean(&MSG_RECP_DISTRIBUTION)
}

/// A message size in KB from `MSG_SIZE_DISTRIBUTION`.
pub fn message_size_kb(rng: &mut Rng) -> u32 {
    from_uniform(&MSG_SIZE_DISTRIBUTION, rng.f64())
}

/// A message size in bytes (the KB size × [`BYTES_PER_KB`]).
pub fn message_size_bytes(rng: &mut Rng) -> u64 {
    u64::from(message_size_kb(rng)) * BYTES_PER_KB
}

/// A recipient count from `MSG_RECP_DISTRIBUTION` (1 to 20).
pub fn recipient_count(rng: &mut Rng) -> u32 {
    from_uniform(&MSG_RECP_DISTRIBUTION, rng.f64())
}

/// Whether one recipient of a user's message is local (10 %) rather than remote;
/// drawn per recipient (§1.4). Remote-MTA mail is all local and needs no draw.
pub fn recipient_is_local(rng: &mut Rng) -> bool {
    rng.f64() < LOCAL_RECIPIENT_SHARE
}

/// Whether a user session (SMTP send or POP check) is paced at modem speed (90 %).
/// Remote-MTA sessions always run at full speed and need no draw.
pub fn session_is_modem(rng: &mut Rng) -> bool {
    rng.f64() < MODEM_SHARE
}

/// An exponential inter-arrival time in seconds for a Poisson stream of `rate`
/// events per second (mean 1 / rate). A rate of zero or less gives infinity.
pub fn exponential_secs(rng: &mut Rng, rate: f64) -> f64 {
    if rate <= 0.0 {
        return f64::INFINITY;
    }
    // 1 − u is in (0, 1], so the logarithm is finite.
    -(1.0 - rng.f64()).ln() / rate
}

/// The model share of mailboxes holding `count` messages at steady state: the
/// 92.5 %/7.5 % mix of p(i) = P/(S+P) × (S/(S+P))^i over the two pools (§1.11).
pub fn mailbox_share(count: u32) -> f64 {
    let pool = |s: f64, p: f64| p / (s + p) * (s / (s + p)).powi(count as i32);
    (1.0 - RETRY_POOL_SHARE) * pool(RANDOM_POOL_ARRIVALS, RANDOM_POOL_CHECKS)
        + RETRY_POOL_SHARE * pool(RETRY_POOL_ARRIVALS, RETRY_POOL_CHECKS)
}

/// Mean messages per mailbox at steady state (3.43).
pub fn mean_mailbox_messages() -> f64 {
    (1.0 - RETRY_POOL_SHARE) * RANDOM_POOL_ARRIVALS / RANDOM_POOL_CHECKS
        + RETRY_POOL_SHARE * RETRY_POOL_ARRIVALS / RETRY_POOL_CHECKS
}

/// A message count for one mailbox of the initial store, from the steady-state model.
pub fn initial_mailbox_count(rng: &mut Rng) -> u32 {
    let (s, p) = if rng.f64() < RETRY_POOL_SHARE {
        (RETRY_POOL_ARRIVALS, RETRY_POOL_CHECKS)
    } else {
        (RANDOM_POOL_ARRIVALS, RANDOM_POOL_CHECKS)
    };
    // Geometric on {0, 1, …} with continue-probability q = S/(S+P), by inversion.
    let q = s / (s + p);
    let u = 1.0 - rng.f64();
    (u.ln() / q.ln()).floor() as u32
}

#[cfg(test)]
mod tests;
