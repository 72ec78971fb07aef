//! The QoS rules (`mail2001.md` §2) and the rows of the published tables.
//!
//! Choices where the white paper is uncertain (each is printed in the report):
//! - **"SMTP Data" and "POP Retrieve" at 5 s** time the command's first reply
//!   (`DATA` → `354`; `RETR` → `+OK`), the whole transfer is judged separately
//!   against 5 s + size / 3,000 B/s as "SMTP Data Response Time" and "POP
//!   Retrieve Response Time" (D5: the summary table prints a 5 s limit for both,
//!   the detailed tables have the size-adjusted rows; this reading fits both).
//! - **Error rate** = (SMTP and POP connect errors, protocol errors and
//!   timeouts) / (SMTP and POP Sessions + Disconnects): sessions that ended in
//!   an error over all sessions (§2.4 does not state it; this is the formula
//!   that gives the published Sun page's 0.00 %, 0.00 % and 2.52 % from its own
//!   counters, see [`error_percent`]).
//! - **Remote delivery** counts recipients, as the published "Remote Message
//!   Delivery" row equals its "SMTP To Remote" counter, received by the sink
//!   within the level's measurement window plus [`DELIVERY_LIMIT_SECS`].
//! - **Deliberate disconnects** (`stoa_mail2001::disconnect`) are neither
//!   errors nor Sessions; as on the published page, their broken-off transfers
//!   count as Response Time attempts that did not pass.
//! - A row with no attempts passes and is marked "no sample", except Delivery
//!   Time: with fewer than [`MIN_DELIVERY_PROBES`] probes it is **not judged**
//!   ("too few probes to judge"), neither passed nor failed, and its level is
//!   not a plain pass ([`Outcome::NotJudged`]).

use serde::Serialize;

use crate::tally::{Function, LevelTally};

/// Response-time limit of every function, seconds (§2.1).
pub const RESPONSE_LIMIT_SECS: f64 = 5.0;
/// Delivery-time limit, seconds (§2.2).
pub const DELIVERY_LIMIT_SECS: f64 = 60.0;
/// The bandwidth the size-adjusted cutoff grants a message: half the modem's
/// 6,000 B/s (§2.1).
pub const SIZED_BYTES_PER_SEC: f64 = 3_000.0;
/// The share of attempts every QoS row must pass, percent: strictly more (the
/// pages print ">95%", the white paper says "more than 95 %"), so exactly 95 %
/// fails.
pub const REQUIRED_PERCENT: f64 = 95.0;
/// The largest error rate allowed, percent (strictly below).
pub const MAX_ERROR_PERCENT: f64 = 1.0;
/// The fewest delivery probes the Delivery Time row is judged on. A server
/// that delivers only 95 % in time (failing, as ">95%" is strict) still scores
/// a perfect n of n with probability 0.95^n; 59 is the smallest n for which
/// that is below 5 % (0.95^59 = 4.8 %, 0.95^58 = 5.1 %). With fewer probes even
/// 100 % cannot tell a passing server from a failing one, so the row is not
/// judged. At the white paper's 1 % share that is 5,900 SMTP sessions in the
/// window, about 52 msgs/min over the standard hour.
pub const MIN_DELIVERY_PROBES: u64 = 59;

/// The size-adjusted cutoff for a DATA body or RETR of `bytes`:
/// 5 s + bytes / 3,000 B/s.
pub fn sized_cutoff_secs(bytes: u64) -> f64 {
    RESPONSE_LIMIT_SECS + bytes as f64 / SIZED_BYTES_PER_SEC
}

/// One QoS row: attempts, passes, percentage, verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// Row name as printed.
    pub name: &'static str,
    /// The limit as printed ("5", "60", "5+size/3000", "level", "NA").
    pub limit: &'static str,
    /// Attempts.
    pub attempts: u64,
    /// Passes.
    pub pass: u64,
    /// passes / attempts × 100; `None` with no attempts.
    pub percent: Option<f64>,
    /// Whether the row meets its requirement (false when it is not judged).
    pub passed: bool,
    /// Whether the row has a sample large enough to judge; only Delivery Time
    /// can lack one ([`MIN_DELIVERY_PROBES`]).
    pub judged: bool,
}

impl Row {
    fn ratio(name: &'static str, limit: &'static str, attempts: u64, pass: u64) -> Row {
        let percent = (attempts > 0).then(|| pass as f64 * 100.0 / attempts as f64);
        Row {
            name,
            limit,
            attempts,
            pass,
            percent,
            passed: percent.is_none_or(|p| p > REQUIRED_PERCENT),
            judged: true,
        }
    }

    /// The Delivery Time row: judged only on [`MIN_DELIVERY_PROBES`] or more.
    fn delivery(attempts: u64, pass: u64) -> Row {
        let row = Row::ratio("Delivery Time", "60", attempts, pass);
        let judged = attempts >= MIN_DELIVERY_PROBES;
        Row {
            passed: row.passed && judged,
            judged,
            ..row
        }
    }
}

/// The error rate, percent (0 with no sessions): sessions that ended in an
/// error / all sessions ([`crate::tally::Counters::session_errors`] /
/// [`crate::tally::Counters::sessions`]).
///
/// The white paper does not give the denominator; this is the one the Sun
/// page's counters fit. At its 120 % level: 53,117 POP connect errors /
/// (1,017,198 + 10,499 SMTP Sessions and Disconnects + 1,077,284 + 2,816 POP
/// Sessions and Disconnects) = 2.520 %, printed 2.52 %; adding the 533
/// Delivery Time Connect Errors would give 2.55 %, leaving out the
/// Disconnects 2.54 %.
pub fn error_percent(t: &LevelTally) -> f64 {
    let sessions = t.counters.sessions();
    if sessions == 0 {
        0.0
    } else {
        t.counters.session_errors() as f64 * 100.0 / sessions as f64
    }
}

/// Every detailed-results row: the 13 functions of the tally's access
/// ([`crate::access::Access::functions`]), then Delivery Time, SMTP Data
/// Response Time, POP Retrieve (or IMAP Fetch) Response Time and Remote
/// Message Delivery.
pub fn detail_rows(t: &LevelTally) -> Vec<Row> {
    let mut rows: Vec<Row> = t
        .access
        .functions()
        .iter()
        .map(|&f| function_row(t, f))
        .collect();
    rows.push(Row::delivery(t.delivery.attempts, t.delivery.pass));
    rows.push(Row::ratio(
        "SMTP Data Response Time",
        "5+size/3000",
        t.data_response.attempts,
        t.data_response.pass,
    ));
    rows.push(Row::ratio(
        t.access.retrieve_response(),
        "5+size/3000",
        t.retrieve_response.attempts,
        t.retrieve_response.pass,
    ));
    rows.push(Row::ratio(
        "Remote Message Delivery",
        "level",
        t.remote.sent,
        t.remote.received,
    ));
    rows
}

/// The row of one function, named for the tally's access.
fn function_row(t: &LevelTally, f: Function) -> Row {
    let s = t.function(f);
    Row::ratio(f.label(t.access), "5", s.attempts, s.pass)
}

/// The functions of the summary table, in its order (for an IMAP run: IMAP
/// Connect, Select, Fetch and Store).
pub const SUMMARY_FUNCTIONS: [Function; 6] = [
    Function::SmtpConnect,
    Function::SmtpData,
    Function::PopConnect,
    Function::PopStatus,
    Function::PopRetrieve,
    Function::PopDelete,
];

/// The summary table's rows for one level: the six functions, Delivery Time, and
/// the Error Rate (its `percent` is the error rate; it passes below 1 %).
pub fn summary_rows(t: &LevelTally) -> Vec<Row> {
    let mut rows: Vec<Row> = SUMMARY_FUNCTIONS
        .iter()
        .map(|&f| function_row(t, f))
        .collect();
    rows.push(Row::delivery(t.delivery.attempts, t.delivery.pass));
    let err = error_percent(t);
    let (sessions, errors) = (t.counters.sessions(), t.counters.session_errors());
    rows.push(Row {
        name: "Error Rate",
        limit: "NA",
        attempts: sessions,
        pass: sessions - errors.min(sessions),
        percent: Some(err),
        passed: err < MAX_ERROR_PERCENT,
        judged: true,
    });
    rows
}

/// A level's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Every row judged, and every one passed.
    Passed,
    /// A row failed (whatever else was or was not judged).
    Failed,
    /// No row failed, but one could not be judged (too few probes): not a pass.
    NotJudged,
}

/// Whether a level passes: every detailed row and the error rate (§2.5: each
/// category on its own), with the failing and the unjudged rows named.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// A plain pass: every row judged and passed ([`Outcome::Passed`]).
    pub passed: bool,
    /// Passed, failed, or not judged.
    pub outcome: Outcome,
    /// "POP Connect 91.20 % < 95 %", "Error Rate 2.10 % ≥ 1 %", …
    pub failures: Vec<String>,
    /// "Delivery Time: too few probes to judge (12 of the 59 needed)".
    pub unjudged: Vec<String>,
}

/// Judges one level.
pub fn verdict(t: &LevelTally) -> Verdict {
    let rows = detail_rows(t);
    let mut failures: Vec<String> = rows
        .iter()
        .filter(|r| r.judged && !r.passed)
        .map(|r| {
            let percent = r.percent.unwrap_or(0.0);
            let name = r.name;
            if percent < REQUIRED_PERCENT {
                format!("{name} {percent:.2}% < {REQUIRED_PERCENT}%")
            } else {
                // Exactly the limit fails too: say so, not "95.00% < 95%".
                format!("{name} {percent:.2}% = {REQUIRED_PERCENT}% (must be above)")
            }
        })
        .collect();
    let err = error_percent(t);
    if err >= MAX_ERROR_PERCENT {
        failures.push(format!("Error Rate {err:.2}% >= {MAX_ERROR_PERCENT}%"));
    }
    let unjudged: Vec<String> = rows
        .iter()
        .filter(|r| !r.judged)
        .map(|r| {
            format!(
                "{}: too few probes to judge ({} of the {MIN_DELIVERY_PROBES} needed)",
                r.name, r.attempts
            )
        })
        .collect();
    let outcome = match (failures.is_empty(), unjudged.is_empty()) {
        (false, _) => Outcome::Failed,
        (true, false) => Outcome::NotJudged,
        (true, true) => Outcome::Passed,
    };
    Verdict {
        passed: outcome == Outcome::Passed,
        outcome,
        failures,
        unjudged,
    }
}

#[cfg(test)]
#[path = "qos_tests.rs"]
mod tests;
