//! What the mail report says about the load generators of a `--agents` run:
//! the agents and their shares in the run's configuration, and who offered
//! what in each level's harness section.

use std::time::Duration;

use super::{int, secs};
use crate::mail::run::{LevelResult, MailRun};
use crate::report::count;
use crate::report::doc::{Table, cells};

/// The "Load generators" line of the run's configuration.
pub(super) fn generators(run: &MailRun) -> String {
    if run.agents.is_empty() {
        return "this process".to_owned();
    }
    let n = run.agents.len();
    let each: Vec<String> = run
        .agents
        .iter()
        .map(|a| {
            format!(
                "{} ({}, {} random-pool and {} retry-pool mailboxes)",
                a.addr,
                count(u64::from(a.threads), "load thread"),
                int(a.random_mailboxes),
                int(a.retry_mailboxes)
            )
        })
        .collect();
    format!(
        "{} generated the load: {}. Each sent 1/{n} of the user and remote-MTA SMTP sessions \
         other than probes and made the initial and repeated POP checks of its own mailboxes \
         at their share of the rates; this host ran the sink, the store's fill and check, and \
         the delivery probes (their SMTP sessions and POP polls).",
        count(n as u64, "agent"),
        each.join(", ")
    )
}

/// A level's sessions started in the window by each generator, when agents
/// offered it.
pub(super) fn table(level: &LevelResult) -> Option<Table> {
    if level.generators.is_empty() {
        return None;
    }
    let mut t = Table::new(&[
        "Generator",
        "User SMTP",
        "Remote MTA SMTP",
        "Initial POP",
        "Repeated POP",
    ]);
    for g in &level.generators {
        let s = &g.started;
        let name = if g.name == "prime" {
            "this host (probes)".to_owned()
        } else {
            format!("agent {}", g.name)
        };
        t.row(cells([
            name,
            int(s.user_smtp),
            int(s.remote_smtp),
            int(s.initial_pop),
            int(s.repeated_pop),
        ]));
    }
    Some(t)
}

/// The agents' CPU time in a level, as the harness section lists it.
pub(super) fn cpu(level: &LevelResult) -> Option<String> {
    if level.generators.is_empty() {
        return None;
    }
    Some(format!(
        "Agents' CPU, all together: {}",
        level
            .agents_cpu
            .map_or_else(|| "not measured".to_owned(), |d: Duration| secs(d))
    ))
}
