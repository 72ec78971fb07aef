//! Whether a `stoa bench mail` run is the kit's run: the standard profile's
//! phases at 80, 100 and 120 % of the claimed rate (mail2001.md §3.1, §3.2), a
//! store of 200 × rate accounts (§1.2), the 60 s reply timeout (§2.4) and 1 %
//! delivery probes (§2.2), reading the mail over POP3 (§1.5). Anything else is listed as a [`Deviation`], and the
//! report prints the rate as non-compliant.

use std::time::Duration;

use crate::compliance::{Deviation, grouped, rule, seconds};

use stoa_mailgen::engine::Workload;

use crate::report::mail::mpm as rate;

use super::{AccessName, Options, PROBE_SHARE, STANDARD, Settings};

/// The kit's load levels, percent of the claimed rate (mail2001.md §3.1).
const KIT_LEVELS: [u32; 3] = [80, 100, 120];
/// The kit's reply timeout: no reply within 60 s is an error (mail2001.md §2.4).
const KIT_REPLY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the standard profile waits after a level's cool-down for its
/// judged sessions (the default `settings` gives it).
const STANDARD_DRAIN: Duration = Duration::from_secs(1200);
/// Accounts per msgs/min (mail2001.md §1.2).
const USERS_PER_MPM: f64 = 200.0;

/// The interpretation behind the rules, for the report's notes: the kit's
/// fixed parameters could not be read (mail2001.md §3.2).
pub(crate) const NOTE: &str = "The kit's run is taken to be the white paper's phases (300 s \
     warm-up, 3,600 s measurement, 900 s cool-down per level; the kit's fixed parameters could not \
     be read), at 80, 100 and 120 % of the rate, with 200 × rate accounts, a 60 s reply timeout \
     and 1 % delivery probes; any other run is labelled non-compliant.";

/// Every way a run of `args` with the settings `s`, reporting `mpm` msgs/min
/// (the claimed rate, or what --find-max found), with the delivery-probe share
/// it used differs from the kit's run, in the order the report lists them. A
/// new rule is one more entry in the list.
pub(crate) fn deviations(
    args: &Options,
    s: &Settings,
    mpm: f64,
    probe_share: f64,
) -> Vec<Deviation> {
    let (p, kit) = (&s.phases, &STANDARD);
    let needed = (s.rate * USERS_PER_MPM).ceil() as u64;
    // The rate the store is judged against: the reported one, or for a search
    // that found none the first trial's.
    let judged = if mpm > 0.0 { mpm } else { s.rate };
    let needed_at = (judged * USERS_PER_MPM).ceil() as u64;
    let kit_pool = Workload::kit_retry_pool(s.users);
    [
        rule(
            "warmup",
            p.warmup != kit.warmup,
            format!("warm-up {} per level", seconds(p.warmup)),
            format!("the kit's is {} (mail2001.md §3.2)", seconds(kit.warmup)),
        ),
        rule(
            "run_time",
            p.run != kit.run,
            format!("measured {} per level", seconds(p.run)),
            format!("the kit measures {}", seconds(kit.run)),
        ),
        rule(
            "cooldown",
            p.cooldown != kit.cooldown,
            format!("cool-down {} per level", seconds(p.cooldown)),
            format!("the kit's is {}", seconds(kit.cooldown)),
        ),
        rule(
            "drain_limit",
            s.drain_limit != STANDARD_DRAIN,
            format!(
                "judged sessions may finish {} after the cool-down",
                seconds(s.drain_limit)
            ),
            format!("the standard run waits up to {}", seconds(STANDARD_DRAIN)),
        ),
        rule(
            "levels",
            !args.find_max && args.levels != KIT_LEVELS,
            format!("levels {}", percents(&args.levels)),
            format!(
                "the kit runs {} of the rate (mail2001.md §3.1)",
                percents(&KIT_LEVELS)
            ),
        ),
        rule(
            "find_max",
            args.find_max,
            "--find-max: the rate is the best passing trial of a search, each a 100 % level alone",
            format!("the kit runs {} at the claimed rate", percents(&KIT_LEVELS)),
        ),
        rule(
            "store_users",
            s.declared_store && u64::from(s.users) < needed_at,
            format!(
                "a declared store of {} accounts (--store-users) for {}{} msgs/min",
                grouped(s.users.into()),
                if args.find_max {
                    "every trial, reporting "
                } else {
                    ""
                },
                rate(judged)
            ),
            format!(
                "the kit requires 200 × rate = 200 × {} = {} accounts (mail2001.md §1.2)",
                rate(judged),
                grouped(needed_at)
            ),
        ),
        rule(
            "retry_pool",
            s.retry_pool != kit_pool,
            format!(
                "a retry pool of {} accounts, {:.1} % of the store{}",
                grouped(s.retry_pool.into()),
                100.0 * f64::from(s.retry_pool) / f64::from(s.users.max(1)),
                if args.find_max {
                    format!(
                        " (the largest it allows; the search stops at {} msgs/min, where \
                         repeated checks would find no mailbox left unchecked for 300 s)",
                        rate(s.rate_cap)
                    )
                } else {
                    " (the kit's 7.5 % of 200 × rate accounts, so re-checks keep their interval)"
                        .to_owned()
                }
            ),
            format!(
                "the kit's is 7.5 % of the store, {} accounts (mail2001.md §1.5)",
                grouped(kit_pool.into())
            ),
        ),
        rule(
            "users",
            !args.find_max && u64::from(s.users) > needed,
            format!(
                "a store of {} accounts for {} msgs/min",
                grouped(s.users.into()),
                s.rate
            ),
            format!(
                "the kit's holds 200 × rate = {} (mail2001.md §1.2)",
                grouped(needed)
            ),
        ),
        rule(
            "reply_timeout",
            s.reply_timeout != KIT_REPLY_TIMEOUT,
            format!("reply timeout {}", seconds(s.reply_timeout)),
            format!(
                "the kit's is {} (mail2001.md §2.4)",
                seconds(KIT_REPLY_TIMEOUT)
            ),
        ),
        rule(
            "probe_share",
            (probe_share - PROBE_SHARE).abs() > 1e-9,
            format!(
                "delivery probes on {:.2} % of SMTP sessions{}",
                probe_share * 100.0,
                if args.probe_share.is_none() && p.profile == "quick" && !args.find_max {
                    " (the quick profile's share, for 80 expected probes in its lowest level: \
                     its Delivery Time row is judged on 59 or more)"
                } else {
                    ""
                }
            ),
            format!(
                "the kit probes {} % of the mail (mail2001.md §2.2)",
                PROBE_SHARE * 100.0
            ),
        ),
        rule(
            "access",
            args.access != AccessName::Pop3,
            "mailboxes read over IMAP (--access imap: LOGIN, SELECT, FETCH and STORE \\Deleted \
             of each message, EXPUNGE, LOGOUT in place of each POP3 check)",
            "the kit reads mail over POP3 (mail2001.md §1.5)",
        ),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The box's closing note: how to make the kit's run, and how long it takes.
pub(crate) fn kit_run() -> String {
    let k = &STANDARD;
    let level = k.warmup + k.run + k.cooldown;
    let minutes = (level * KIT_LEVELS.len() as u32).as_secs().div_ceil(60);
    format!(
        "The kit's run: stoa bench mail --profile standard ({} warm-up, {} measured and {} \
         cool-down at each of {}: about {} h {:02} min, plus the store's fill and up to {} per \
         level for judged sessions to finish), without --warmup, --run-time, --cooldown, \
         --levels, --find-max, --reply-timeout, --probe-share, --store-users or --access imap, and \
         with --users at most 200 × --rate.",
        seconds(k.warmup),
        seconds(k.run),
        seconds(k.cooldown),
        percents(&KIT_LEVELS),
        minutes / 60,
        minutes % 60,
        seconds(STANDARD_DRAIN),
    )
}

/// "80 %, 100 % and 120 %".
fn percents(levels: &[u32]) -> String {
    let each: Vec<String> = levels.iter().map(|l| format!("{l} %")).collect();
    match each.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => each.concat(),
    }
}

#[cfg(test)]
mod tests;
