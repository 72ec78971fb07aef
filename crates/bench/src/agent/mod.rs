//! Many client machines: `stoa bench agent` (the kit's client daemon, one for
//! both benchmarks) and the prime's side of `stoa bench web --agents` and
//! `stoa bench mail --agents` (the kit's prime client).
//!
//! The prime keeps what makes a run one run: validation, the reset and the
//! post.log audit for web; the sink, the store, the delivery probes and the QoS
//! tally for mail; the merge of the agents' tallies and the report for both.
//! Only the load generators move to the agents.
//!
//! - `web.rs`: each agent gets an even share of the connections as its own
//!   client number, for one iteration per session.
//! - `mail.rs`: each agent gets an even share of the four streams and a disjoint
//!   share of the mailboxes for a whole run, one round per load level; the
//!   prime sends the probes and reserves their mailboxes on the agents.
//!
//! # Protocol
//!
//! One JSON message per line over TCP. The prime's first message says which
//! workload and carries its plan: `{"plan": {"version": "…", "web": {…}}}` or
//! `{"plan": {"version": "…", "mail": {…}}}`. The versions must be equal (the
//! workload and the counters are the binary's); the agent checks the version
//! before it reads the rest, so a prime of another version gets "version
//! mismatch", not "malformed". The agent answers `{"ready": {"threads": N}}`,
//! or `{"error": "…"}` and closes; the rest of the conversation is the
//! workload's (its module's docs).
//!
//! An agent serves one prime at a time (others get `{"error": "busy"}`) and
//! stops its generators early when its prime goes away. It accepts primes only
//! from `--allow` networks (loopback by default): it runs whatever load it is
//! sent.

pub(crate) mod mail;
mod web;

pub(crate) use web::run_remote;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use ipnet::IpNet;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

/// A `stoa bench agent` daemon; each field is the flag of the same name, and
/// its documentation the flag's help.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Address to listen on for the prime client.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: String,

    /// Prime clients allowed to connect, as an address or CIDR block; repeat for
    /// several. Default: loopback only. An agent runs whatever load an allowed
    /// prime asks for, so allow only machines of the test network.
    #[arg(long, value_name = "CIDR")]
    pub allow: Vec<String>,

    /// Load threads (default: one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,

    /// Serve this many runs, then exit (default: serve until killed).
    #[arg(long, value_name = "N", hide = true)]
    pub runs: Option<u32>,
}

/// Largest message an agent reads (a plan is a few hundred bytes).
const MAX_PLAN: u64 = 1024 * 1024;
/// Longest run an agent accepts.
const MAX_RUN: Duration = Duration::from_secs(24 * 3600);
/// How long either side waits for the other's next step outside the run.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);
/// This binary's version: prime and agent must be the same.
const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The prime's first message.
#[derive(Debug, Serialize, Deserialize)]
struct Hello {
    plan: HelloPlan,
}

/// The version and the workload's plan.
#[derive(Debug, Serialize, Deserialize)]
struct HelloPlan {
    version: String,
    #[serde(flatten)]
    workload: Workload,
}

/// Which benchmark, and its plan.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Workload {
    /// One `stoa bench web` iteration's share of the connections.
    Web(Box<stoa_loadgen::Plan>),
    /// One `stoa bench mail` run's share of the streams and mailboxes.
    Mail(Box<mail::Plan>),
}

/// The agent's first answer (the same in every workload).
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Opening {
    Ready { threads: u32 },
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
                sessions.spawn(refuse_busy(stream));
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

/// Tells a second prime that this agent is busy, then reads (and drops) what
/// it sends until it closes, so the answer is not lost to a reset.
async fn refuse_busy(mut stream: TcpStream) {
    if send(&mut stream, &Opening::Error("busy".into()))
        .await
        .is_err()
    {
        return;
    }
    let _ = stream.shutdown().await;
    let drain = async {
        let mut sink = tokio::io::sink();
        let _ = tokio::io::copy(&mut (&mut stream).take(MAX_PLAN), &mut sink).await;
    };
    let _ = tokio::time::timeout(Duration::from_secs(10), drain).await;
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

/// One prime's session on this agent: the plan, then the workload's own
/// conversation.
async fn session(stream: TcpStream, threads: u32) -> anyhow::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let line = timed(receive_line(&mut read, MAX_PLAN)).await?;
    match parse_hello(&line) {
        Ok(Workload::Web(plan)) => web::session(read, write, *plan, threads).await,
        Ok(Workload::Mail(plan)) => mail::session(read, write, *plan, threads).await,
        Err(why) => {
            send(&mut write, &Opening::Error(why.clone())).await?;
            bail!(why)
        }
    }
}

/// The prime's first message: the version first (so another version's plan is
/// a version mismatch, whatever its shape), then the workload's plan.
fn parse_hello(line: &[u8]) -> Result<Workload, String> {
    let value: serde_json::Value =
        serde_json::from_slice(line).map_err(|_| "malformed message".to_owned())?;
    let Some(version) = value.pointer("/plan/version").and_then(|v| v.as_str()) else {
        return Err("the first message must be the prime's plan".into());
    };
    if version != VERSION {
        return Err(format!(
            "version mismatch: prime {version}, agent {VERSION}"
        ));
    }
    serde_json::from_value::<Hello>(value)
        .map(|h| h.plan.workload)
        .map_err(|e| format!("malformed plan: {e}"))
}

/// The prime's side of the start: connects to `agent`, sends `workload`'s plan
/// and waits for the agent to be ready; its load threads, and the connection.
async fn open(
    agent: &str,
    workload: Workload,
) -> anyhow::Result<(BufReader<OwnedReadHalf>, OwnedWriteHalf, u32)> {
    let stream = match tokio::time::timeout(STEP_TIMEOUT, TcpStream::connect(agent)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(e)) => return Err(e).with_context(|| format!("cannot reach agent {agent}")),
        Err(_) => bail!("cannot reach agent {agent}: no connection within 60 s"),
    };
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    let hello = Hello {
        plan: HelloPlan {
            version: VERSION.into(),
            workload,
        },
    };
    // A busy agent answers before it reads: its answer is what matters.
    let sent = send(&mut write, &hello).await;
    let answer = timed(receive::<Opening>(&mut read, MAX_PLAN)).await;
    match (answer, sent) {
        (Ok(Opening::Ready { threads }), Ok(())) => Ok((read, write, threads)),
        (Ok(Opening::Error(e)), _) => bail!("agent {agent}: {e}"),
        (Ok(Opening::Ready { .. }), Err(e)) | (Err(e), _) => {
            Err(e).with_context(|| format!("agent {agent}: no answer to the plan"))
        }
    }
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

/// Writes the messages of `rx` in order until it closes, or until one for
/// which `last` holds, then closes the writing side.
async fn write_loop<T: Serialize>(
    mut w: OwnedWriteHalf,
    mut rx: tokio::sync::mpsc::Receiver<T>,
    last: fn(&T) -> bool,
) {
    while let Some(msg) = rx.recv().await {
        if send(&mut w, &msg).await.is_err() {
            return;
        }
        if last(&msg) {
            break;
        }
    }
    let _ = w.shutdown().await;
}

/// Reads one message line of at most `limit` bytes, newline included.
async fn receive_line(
    r: &mut (impl AsyncBufReadExt + AsyncRead + Unpin),
    limit: u64,
) -> anyhow::Result<Vec<u8>> {
    let mut line = Vec::new();
    let n = r.take(limit).read_until(b'\n', &mut line).await?;
    if n == 0 {
        bail!("connection closed");
    }
    if line.last() != Some(&b'\n') {
        bail!("message longer than {limit} bytes or cut short");
    }
    Ok(line)
}

/// Reads one message of at most `limit` bytes.
async fn receive<T: for<'de> Deserialize<'de>>(
    r: &mut (impl AsyncBufReadExt + AsyncRead + Unpin),
    limit: u64,
) -> anyhow::Result<T> {
    let line = receive_line(r, limit).await?;
    serde_json::from_slice(&line).context("malformed message")
}

#[cfg(test)]
mod tests {
    use super::*;

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

    /// Another version's plan is a version mismatch even when it does not
    /// parse as this version's; a plan names its workload.
    #[test]
    fn the_version_is_checked_first() {
        let e = parse_hello(br#"{"plan": {"version": "0.0.1", "fax": {"pages": 3}}}"#)
            .expect_err("another version");
        assert_eq!(e, format!("version mismatch: prime 0.0.1, agent {VERSION}"));
        let e = parse_hello(
            format!(r#"{{"plan": {{"version": "{VERSION}", "fax": {{}}}}}}"#).as_bytes(),
        )
        .expect_err("unknown workload");
        assert!(e.starts_with("malformed plan: "), "{e}");
        assert_eq!(
            parse_hello(b"\"go\"").expect_err("not a plan"),
            "the first message must be the prime's plan"
        );
        assert_eq!(parse_hello(b"{").expect_err("junk"), "malformed message");
        let workload = stoa_mailgen::engine::Workload {
            smtp: "127.0.0.1:25".parse().expect("addr"),
            read_addr: "127.0.0.1:110".parse().expect("addr"),
            access: stoa_mailgen::access::Access::Pop3,
            domain: "stoa.test".into(),
            remote_domain: "remote.test".into(),
            users: 10,
            retry_pool: 1,
            password: "pw".into(),
            reply_timeout: Duration::from_secs(60),
            probe_share: 0.01,
            seed: 1,
            run_id: 1,
        };
        let hello = Hello {
            plan: HelloPlan {
                version: VERSION.into(),
                workload: Workload::Mail(Box::new(mail::Plan {
                    workload,
                    share: stoa_mailgen::engine::Share {
                        index: 1,
                        agents: 2,
                    },
                })),
            },
        };
        let line = serde_json::to_vec(&hello).expect("serialise");
        let text = String::from_utf8_lossy(&line);
        assert!(text.contains(r#""mail":{"#), "{text}");
        match parse_hello(&line) {
            Ok(Workload::Mail(p)) => assert_eq!(p.share.index, 1),
            other => panic!("{other:?}"),
        }
    }
}
