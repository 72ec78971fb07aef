//! The SPECmail2001 per-user profile and the constants derived from it (§1.1, §1.2,
//! §1.5, §1.8, §1.9).
//!
//! Uncertain points and the choices made here:
//! - The repeated-check count is not printed as a number in the white paper;
//!   [`REPEATED_POP_CHECKS_PER_DAY`] = 3 is inferred from the rate formulas and the
//!   "75 % of checks download nothing" statement.
//! - The modem is "56.6 kbaud, about 6,000 B/s"; we use [`MODEM_BYTES_PER_SEC`] =
//!   6,000 exactly.
//! - The local share (`MSG_DESTINATION_LOCAL_PERCENT`, discrepancy D2) is taken as
//!   10 %, the profile's "90 % to/from remote addresses".

/// Users per SPECmail2001 message per minute: UserCount × 2 msgs/day × 15 % / 60 min
/// = UserCount / 200 (§1.2).
pub const USERS_PER_MPM: f64 = 200.0;

/// Messages each user sends per day (`MSG_SENT_PER_DAY`).
pub const MSG_SENT_PER_DAY: f64 = 2.0;

/// Messages each user receives per day ("MsgRcvd"; sent and received volumes are equal).
pub const MSG_RCVD_PER_DAY: f64 = 4.0;

/// Mailbox checks per user per day (`POP_CHECKS_PER_DAY`).
pub const POP_CHECKS_PER_DAY: f64 = 4.0;

/// Of [`POP_CHECKS_PER_DAY`], the "repeated" checks on the retry pool that mostly
/// find nothing (`REPEATED_POP_CHECKS_PER_DAY`; 3, inferred from the rates).
pub const REPEATED_POP_CHECKS_PER_DAY: f64 = 3.0;

/// Initial checks per user per day, on the random pool: 4 − 3.
pub const INITIAL_POP_CHECKS_PER_DAY: f64 = POP_CHECKS_PER_DAY - REPEATED_POP_CHECKS_PER_DAY;

/// Share of daily activity in the simulated busiest hour (`PEAK_LOAD_PERCENT`).
pub const PEAK_LOAD_SHARE: f64 = 0.15;

/// Seconds in the simulated peak hour.
pub const PEAK_HOUR_SECS: f64 = 3600.0;

/// Share of a user's recipients that are local (`MSG_DESTINATION_LOCAL_PERCENT`);
/// the rest (90 %) go to the remote domain and the sink.
pub const LOCAL_RECIPIENT_SHARE: f64 = 0.10;

/// Remote share of user mail, and the inbound "remote MTA" volume relative to user
/// mail (§1.8).
pub const REMOTE_SHARE: f64 = 1.0 - LOCAL_RECIPIENT_SHARE;

/// Share of user sessions (SMTP sends and POP checks) paced at modem speed
/// (`DATA_RATE_DISTRIBUTION`); remote-MTA sessions always run at full speed.
pub const MODEM_SHARE: f64 = 0.90;

/// Modem speed in bytes per second: 56.6 kbaud taken as about 6,000 B/s ((WP) §6.1).
pub const MODEM_BYTES_PER_SEC: f64 = 6_000.0;

/// Share of accounts in the retry pool, which receives only repeated checks (§1.5).
pub const RETRY_POOL_SHARE: f64 = 0.075;

/// Minimum seconds between two checks of one retry-pool mailbox
/// (`REPEATED_POP_CHECK_INTERVAL_SECONDS`, conforming value).
pub const REPEATED_POP_CHECK_INTERVAL_SECS: f64 = 300.0;

/// The three load levels of a run, as factors of the claimed rate (§0, (WP) §7).
pub const LOAD_LEVELS: [f64; 3] = [0.8, 1.0, 1.2];

/// Bytes per "KB" of the size table. The white paper does not say; we take 1,024.
pub const BYTES_PER_KB: u64 = 1024;

/// The user count for a rate: 200 × msgs/min (§1.2).
pub fn users(mpm: f64) -> f64 {
    USERS_PER_MPM * mpm
}

/// The msgs/min a result page prints for a user count: count / 200, without decimals
/// (truncated: 71,428 users print as 357).
pub fn mpm_for_users(users: u64) -> u64 {
    users / USERS_PER_MPM as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_counts() {
        assert_eq!(users(1.0), 200.0);
        assert_eq!(users(5_000.0), 1_000_000.0);
        assert_eq!(users(7_500.0), 1_500_000.0);
        assert_eq!(mpm_for_users(71_428), 357);
        // One MPM is the peak-hour send rate of 200 users.
        let per_min = USERS_PER_MPM * MSG_SENT_PER_DAY * PEAK_LOAD_SHARE / 60.0;
        assert!((per_min - 1.0).abs() < 1e-12);
        assert_eq!(INITIAL_POP_CHECKS_PER_DAY, 1.0);
        // Received = sent × recipients (2 × 2 = 4).
        assert_eq!(MSG_SENT_PER_DAY * 2.0, MSG_RCVD_PER_DAY);
    }
}
