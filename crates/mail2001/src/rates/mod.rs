//! The four Poisson stream rates and the figures derived from them (§1.3).
//!
//! Every rate is per second of the simulated peak hour, at a load factor `f` of the
//! claimed msgs/min (0.8, 1.0 or 1.2):
//!
//! - user SMTP sessions = users × 2 × 0.15 / 3600 × f (= MPM / 60 × f);
//! - remote-MTA SMTP sessions = user SMTP × 0.9;
//! - initial POP checks (random pool) = users × 1 × 0.15 / 3600 × f;
//! - repeated POP checks (retry pool) = users × 3 × 0.15 / 3600 × f.

use crate::dist::{MSG_RECP_DISTRIBUTION, mean_recipients};
use crate::profile::{
    INITIAL_POP_CHECKS_PER_DAY, LOCAL_RECIPIENT_SHARE, MSG_SENT_PER_DAY, PEAK_HOUR_SECS,
    PEAK_LOAD_SHARE, REMOTE_SHARE, REPEATED_POP_CHECK_INTERVAL_SECS, REPEATED_POP_CHECKS_PER_DAY,
    RETRY_POOL_SHARE, users,
};

/// The stream rates (per second) for one claimed msgs/min at one load factor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rates {
    /// The claimed msgs/min (the 100 % level).
    pub mpm: f64,
    /// The load factor these rates are for (1.0 = 100 %).
    pub load: f64,
    /// Accounts: 200 × msgs/min, always sized for the 100 % level.
    pub users: f64,
    /// SMTP sessions from local users sending one message each.
    pub user_smtp: f64,
    /// SMTP sessions from "remote MTAs" delivering inbound mail to local users.
    pub remote_smtp: f64,
    /// Initial POP checks, on the random pool.
    pub initial_pop: f64,
    /// Repeated POP checks, on the retry pool.
    pub repeated_pop: f64,
}

impl Rates {
    /// The rates at 100 % of `mpm` msgs/min.
    pub fn at(mpm: f64) -> Rates {
        Rates::at_load(mpm, 1.0)
    }

    /// The rates at load factor `load` (0.8, 1.0, 1.2) of `mpm` msgs/min; the user
    /// count stays that of the 100 % level (§1.11: one store serves all levels).
    pub fn at_load(mpm: f64, load: f64) -> Rates {
        let users = users(mpm);
        let per_day = users * PEAK_LOAD_SHARE / PEAK_HOUR_SECS * load;
        let user_smtp = per_day * MSG_SENT_PER_DAY;
        Rates {
            mpm,
            load,
            users,
            user_smtp,
            remote_smtp: user_smtp * REMOTE_SHARE,
            initial_pop: per_day * INITIAL_POP_CHECKS_PER_DAY,
            repeated_pop: per_day * REPEATED_POP_CHECKS_PER_DAY,
        }
    }

    /// All SMTP sessions per second (user + remote MTA).
    pub fn smtp_total(&self) -> f64 {
        self.user_smtp + self.remote_smtp
    }

    /// All POP sessions per second (initial + repeated).
    pub fn pop_total(&self) -> f64 {
        self.initial_pop + self.repeated_pop
    }

    /// Messages delivered into mailboxes per second, one per local recipient: user
    /// mail has 2 × 0.1 local recipients on average, inbound mail 2 (all local). At
    /// steady state this is also the retrieve-and-delete rate.
    pub fn mailbox_deliveries(&self) -> f64 {
        let recp = mean_recipients();
        self.user_smtp * recp * LOCAL_RECIPIENT_SHARE + self.remote_smtp * recp
    }

    /// Remote recipients per second in user mail (relayed to the sink).
    pub fn remote_recipients(&self) -> f64 {
        self.user_smtp * mean_recipients() * REMOTE_SHARE
    }

    /// Messages per second reaching the sink if the server sends one copy per
    /// message with at least one remote recipient (the local/remote draw is per
    /// recipient, so that is P(≥1 remote) ≈ 0.914 of user mail).
    pub fn sink_messages(&self) -> f64 {
        let p_any_remote: f64 = MSG_RECP_DISTRIBUTION
            .iter()
            .map(|&(n, p)| p * (1.0 - LOCAL_RECIPIENT_SHARE.powi(n as i32)))
            .sum();
        self.user_smtp * p_any_remote
    }

    /// Retry-pool mailboxes: 7.5 % of the accounts.
    pub fn retry_pool(&self) -> f64 {
        self.users * RETRY_POOL_SHARE
    }

    /// Mean seconds between two checks of one retry-pool mailbox (600 s at 100 %).
    pub fn retry_revisit_secs(&self) -> f64 {
        self.retry_pool() / self.repeated_pop
    }

    /// Whether the retry pool can honour the 300 s minimum re-check interval at
    /// this load (the mean revisit is at least the minimum).
    pub fn retry_interval_holds(&self) -> bool {
        self.retry_revisit_secs() >= REPEATED_POP_CHECK_INTERVAL_SECS
    }
}

#[cfg(test)]
mod tests;
