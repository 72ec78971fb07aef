//! `stoa bench web --agents`: one iteration of the SPECweb99-style load on
//! each agent.
//!
//! Each agent gets an even share of the connections as its own client number
//! (so its generators have the kit's per-client seeds and user ids), runs them
//! on its own load threads, streams its live counters once a second and
//! answers with its [`Tally`]; the prime merges the tallies (each agent's class
//! totals kept apart, for the manager's per-client error check) and scores the
//! whole as one run. The prime validates the server, resets it and audits
//! post.log, as it does alone.
//!
//! # Protocol
//!
//! After the plan (`{"plan": {"version": "…", "web": {…}}}`, the module
//! [`super`]) and the agent's `{"ready": {"threads": N}}`:
//!
//! 1. prime → agent, to every agent once all are ready: `"go"`. Each agent starts
//!    its clock there, so the phases of all agents line up to a few milliseconds.
//! 2. agent → prime: `{"progress": {…}}` each second, then `{"tally": {…}}`, and
//!    the agent closes: one iteration per session.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use stoa_loadgen::{Live, LiveSnapshot, Plan, Tally};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use super::{MAX_PLAN, MAX_RUN, STEP_TIMEOUT, Workload, open, receive, send, timed};

/// Largest message the prime reads (a tally is ~1 KiB per generator).
const MAX_TALLY: u64 = 1024 * 1024 * 1024;
/// Most connections one agent takes.
const MAX_CONNECTIONS: u32 = 1_000_000;

/// Prime → agent, after the plan.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ToAgent {
    Go,
}

/// Agent → prime.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum FromAgent {
    Ready { threads: u32 },
    Progress(LiveSnapshot),
    Tally(Box<Tally>),
    Error(String),
}

/// One prime's iteration on this agent, after its plan.
pub(super) async fn session(
    mut read: BufReader<OwnedReadHalf>,
    mut write: OwnedWriteHalf,
    mut plan: Plan,
    threads: u32,
) -> anyhow::Result<()> {
    if let Err(why) = check_plan(&plan) {
        send(&mut write, &FromAgent::Error(why.clone())).await?;
        bail!(why);
    }
    plan.threads = threads;
    send(&mut write, &FromAgent::Ready { threads }).await?;
    match timed(receive::<ToAgent>(&mut read, MAX_PLAN)).await? {
        ToAgent::Go => {}
    }
    eprintln!(
        "stoa bench agent: running {} against {} as client {}",
        crate::report::count(u64::from(plan.connections), "connection"),
        plan.addr,
        plan.client
    );
    let live = Arc::new(Live::default());
    let run = stoa_loadgen::run(&plan, Arc::clone(&live));
    tokio::pin!(run);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut probe = [0u8; 1];
    let mut prime_gone = false;
    let tally = loop {
        tokio::select! {
            tally = &mut run => break tally,
            _ = tick.tick() => {
                if send(&mut write, &FromAgent::Progress(live.snapshot())).await.is_err() {
                    live.stop();
                }
            }
            // The prime sends nothing during the run: a read that ends means
            // it went away.
            _ = read.read(&mut probe), if !prime_gone => {
                prime_gone = true;
                live.stop();
            }
        }
    };
    send(&mut write, &FromAgent::Tally(Box::new(tally))).await?;
    write.shutdown().await?;
    Ok(())
}

/// Bounds an agent accepts.
fn check_plan(plan: &Plan) -> Result<(), String> {
    if plan.connections == 0 || plan.connections > MAX_CONNECTIONS {
        return Err(format!(
            "connections {} outside 1–{MAX_CONNECTIONS}",
            plan.connections
        ));
    }
    if plan.warmup + plan.run + plan.rampdown > MAX_RUN {
        return Err("a run longer than 24 hours".into());
    }
    if plan.deck_size == 0 || plan.directories == 0 {
        return Err("an empty deck or file set".into());
    }
    Ok(())
}

/// The prime's side: splits `plan` across `agents`, runs it there and merges
/// the tallies. `live` gets each agent's latest counters (index = agent).
pub(crate) async fn run_remote(
    agents: &[String],
    plan: &Plan,
    live: Arc<Mutex<Vec<LiveSnapshot>>>,
) -> anyhow::Result<Tally> {
    let shares = split(plan.connections, agents.len() as u32);
    let mut conns = Vec::new();
    let mut first_user = plan.first_user;
    for (client, (agent, share)) in agents.iter().zip(shares).enumerate() {
        if share == 0 {
            continue;
        }
        let mut part = plan.clone();
        part.connections = share;
        part.client = client as u32;
        part.first_user = first_user;
        first_user += share;
        let (read, write, _) = open(agent, Workload::Web(Box::new(part))).await?;
        conns.push((agent.clone(), read, write));
    }
    if let Ok(mut l) = live.lock() {
        *l = vec![LiveSnapshot::default(); conns.len()];
    }
    for (_, _, write) in &mut conns {
        send(write, &ToAgent::Go).await?;
    }
    let wait = plan.warmup + plan.run + plan.rampdown + STEP_TIMEOUT;
    let mut tasks = tokio::task::JoinSet::new();
    for (i, (agent, mut read, write)) in conns.into_iter().enumerate() {
        let live = Arc::clone(&live);
        tasks.spawn(async move {
            // Keep the write half open: closing it tells the agent to stop.
            let _write = write;
            let fut = async {
                loop {
                    match receive::<FromAgent>(&mut read, MAX_TALLY).await? {
                        FromAgent::Progress(p) => {
                            if let Ok(mut l) = live.lock()
                                && let Some(slot) = l.get_mut(i)
                            {
                                *slot = p;
                            }
                        }
                        FromAgent::Tally(t) => return Ok(*t),
                        FromAgent::Error(e) => bail!("{e}"),
                        FromAgent::Ready { .. } => bail!("unexpected ready"),
                    }
                }
            };
            tokio::time::timeout(wait, fut)
                .await
                .context("no tally in time")?
                .with_context(|| format!("agent {agent}"))
        });
    }
    let mut total = Tally::default();
    while let Some(done) = tasks.join_next().await {
        total.merge(done.context("agent task failed")??);
    }
    Ok(total)
}

/// `n` connections over `k` agents, as evenly as possible (the first get the
/// remainder; the manager gives it to clients 1, 2, …, which changes no score,
/// and its `maxthread` is computed before the remainder either way:
/// `stoa_web99::manager::maxthread`).
fn split(n: u32, k: u32) -> Vec<u32> {
    let k = k.max(1);
    (0..k).map(|i| n / k + u32::from(i < n % k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_even_and_complete() {
        assert_eq!(split(10, 3), vec![4, 3, 3]);
        assert_eq!(split(2, 3), vec![1, 1, 0]);
        assert_eq!(split(7, 1), vec![7]);
        for (n, k) in [(1000, 7), (1, 1), (99, 4)] {
            assert_eq!(split(n, k).iter().sum::<u32>(), n);
        }
    }
}
