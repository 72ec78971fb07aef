//! Many client machines: `stoa bench agent` (the kit's client daemon) and the
//! prime side of `stoa bench web --agents` (the kit's prime client).
//!
//! The prime validates the server, resets it, audits post.log and reports, as it
//! does alone; only the load generators move to the agents. Each agent gets an
//! even share of the connections as its own client number (so its generators
//! have the kit's per-client seeds and user ids), runs them on its own load
//! threads, streams its live counters once a second and answers with its
//! [`Tally`]; the prime merges the tallies (each agent's class totals kept
//! apart, for the manager's per-client error check) and scores the whole as one
//! run.
//!
//! # Protocol
//!
//! One JSON message per line over TCP, in this order:
//!
//! 1. prime → agent: `{"plan": {"version": "…", "plan": {…}}}`. The versions must
//!    be equal: the workload and the counters are the binary's.
//! 2. agent → prime: `{"ready": {"threads": N}}`, or `{"error": "…"}` and close.
//! 3. prime → agent, to every agent once all are ready: `"go"`. Each agent starts
//!    its clock there, so the phases of all agents line up to a few milliseconds.
//! 4. agent → prime: `{"progress": {…}}` each second, then `{"tally": {…}}`.
//!
//! An agent serves one prime at a time (others get `{"error": "busy"}`) and
//! stops its generators early when its prime goes away. It accepts primes only
//! from `--allow` networks (loopback by default): it runs whatever load it is
//! sent.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use stoa_loadgen::{Live, LiveSnapshot, Plan, Tally};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// A `stoa bench agent` daemon; each field is the flag of the same name.
#[derive(Debug, Clone)]
pub struct Options {
    /// Address to listen on for the prime client (`ADDR:PORT`).
    pub listen: String,
    /// Prime clients allowed to connect, as addresses or CIDR blocks; empty:
    /// loopback only.
    pub allow: Vec<String>,
    /// Load threads; `None`: one per core.
    pub threads: Option<u32>,
    /// Serve this many runs, then return; `None`: serve until killed.
    pub runs: Option<u32>,
}

/// Largest message an agent reads (a plan is a few hundred bytes).
const MAX_PLAN: u64 = 1024 * 1024;
/// Largest message the prime reads (a tally is ~1 KiB per generator).
const MAX_TALLY: u64 = 1024 * 1024 * 1024;
/// Most connections one agent takes.
const MAX_CONNECTIONS: u32 = 1_000_000;
/// Longest run an agent accepts.
const MAX_RUN: Duration = Duration::from_secs(24 * 3600);
/// How long either side waits for the other's next step outside the run.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// Prime → agent.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ToAgent {
    Plan { version: String, plan: Box<Plan> },
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

/// `stoa bench agent`: serves primes until killed (or `--runs` runs).
pub fn serve(args: &Options) -> anyhow::Result<()> {
    stoa_netkit::limits::raise_nofile();
    let allow = parse_allow(&args.allow)?;
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as u32));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the agent runtime")?;
    runtime.block_on(async {
        let listener = TcpListener::bind(&args.listen)
            .await
            .with_context(|| format!("cannot listen on {}", args.listen))?;
        eprintln!(
            "stoa bench agent: listening on {}, {threads} load threads",
            listener.local_addr()?
        );
        let busy = Arc::new(AtomicBool::new(false));
        let mut served = 0u32;
        let mut sessions = tokio::task::JoinSet::new();
        while args.runs.is_none_or(|n| served < n) {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        eprintln!("stoa bench agent: accept: {e}");
                        continue;
                    }
                },
                Some(_) = sessions.join_next(), if !sessions.is_empty() => continue,
            };
            if !allow.iter().any(|net| net.contains(&peer.ip())) {
                eprintln!("stoa bench agent: refused {peer}: not in --allow");
                continue;
            }
            if busy.swap(true, Ordering::AcqRel) {
                let mut stream = stream;
                let _ = send(&mut stream, &FromAgent::Error("busy".into())).await;
                continue;
            }
            served += 1;
            let busy = Arc::clone(&busy);
            sessions.spawn(async move {
                if let Err(e) = session(stream, threads).await {
                    eprintln!("stoa bench agent: {peer}: {e:#}");
                }
                busy.store(false, Ordering::Release);
            });
        }
        while sessions.join_next().await.is_some() {}
        Ok(())
    })
}

/// `--allow` values; loopback when none.
fn parse_allow(values: &[String]) -> anyhow::Result<Vec<IpNet>> {
    if values.is_empty() {
        return Ok(vec![
            "127.0.0.0/8".parse().expect("invariant: valid CIDR"),
            "::1/128".parse().expect("invariant: valid CIDR"),
        ]);
    }
    values
        .iter()
        .map(|v| {
            v.parse::<IpNet>()
                .or_else(|_| v.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| anyhow::anyhow!("--allow {v}: not an address or CIDR block"))
        })
        .collect()
}

/// One prime's run on this agent.
async fn session(stream: TcpStream, threads: u32) -> anyhow::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let mut plan = match timed(receive::<ToAgent>(&mut read, MAX_PLAN)).await? {
        ToAgent::Plan { version, plan } => {
            if version != env!("CARGO_PKG_VERSION") {
                let why = format!(
                    "version mismatch: prime {version}, agent {}",
                    env!("CARGO_PKG_VERSION")
                );
                send(&mut write, &FromAgent::Error(why.clone())).await?;
                bail!(why);
            }
            *plan
        }
        ToAgent::Go => bail!("go before a plan"),
    };
    if let Err(why) = check_plan(&plan) {
        send(&mut write, &FromAgent::Error(why.clone())).await?;
        bail!(why);
    }
    plan.threads = threads;
    send(&mut write, &FromAgent::Ready { threads }).await?;
    match timed(receive::<ToAgent>(&mut read, MAX_PLAN)).await? {
        ToAgent::Go => {}
        ToAgent::Plan { .. } => bail!("a second plan instead of go"),
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

async fn timed<T>(f: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<T> {
    tokio::time::timeout(STEP_TIMEOUT, f)
        .await
        .context("no answer within 60 s")?
}

async fn send<T: Serialize>(w: &mut (impl AsyncWrite + Unpin), msg: &T) -> anyhow::Result<()> {
    let mut line = serde_json::to_vec(msg)?;
    line.push(b'\n');
    w.write_all(&line).await?;
    Ok(())
}

/// Reads one message line of at most `limit` bytes.
async fn receive<T: for<'de> Deserialize<'de>>(
    r: &mut (impl AsyncBufReadExt + AsyncRead + Unpin),
    limit: u64,
) -> anyhow::Result<T> {
    let mut line = Vec::new();
    let n = r.take(limit).read_until(b'\n', &mut line).await?;
    if n == 0 {
        bail!("connection closed");
    }
    if line.last() != Some(&b'\n') {
        bail!("message longer than {limit} bytes or cut short");
    }
    serde_json::from_slice(&line).context("malformed message")
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
        let stream = timed(async {
            TcpStream::connect(agent.as_str())
                .await
                .with_context(|| format!("cannot reach agent {agent}"))
        })
        .await?;
        let (read, mut write) = stream.into_split();
        let mut read = BufReader::new(read);
        send(
            &mut write,
            &ToAgent::Plan {
                version: env!("CARGO_PKG_VERSION").into(),
                plan: Box::new(part),
            },
        )
        .await?;
        match timed(receive::<FromAgent>(&mut read, MAX_TALLY))
            .await
            .with_context(|| format!("agent {agent}"))?
        {
            FromAgent::Ready { .. } => {}
            FromAgent::Error(e) => bail!("agent {agent}: {e}"),
            other => bail!("agent {agent}: unexpected {other:?}"),
        }
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

    #[test]
    fn allow_list() {
        let nets = parse_allow(&[]).expect("default");
        assert!(
            nets.iter()
                .any(|n| n.contains(&"127.0.0.1".parse::<IpAddr>().expect("ip")))
        );
        assert!(
            !nets
                .iter()
                .any(|n| n.contains(&"10.0.0.1".parse::<IpAddr>().expect("ip")))
        );
        let nets = parse_allow(&["10.0.0.0/8".into(), "192.168.1.7".into()]).expect("parse");
        assert!(nets[0].contains(&"10.1.2.3".parse::<IpAddr>().expect("ip")));
        assert!(nets[1].contains(&"192.168.1.7".parse::<IpAddr>().expect("ip")));
        assert!(parse_allow(&["nonsense".into()]).is_err());
    }
}
