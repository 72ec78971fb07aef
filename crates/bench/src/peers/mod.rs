//! `stoa bench peers`: Stoa and other servers (nginx, Dovecot) compared in
//! interleaved rounds, the one home of what `bench/compare-*.sh` orchestrated.
//!
//! Each peer is started from a configuration generated in a temporary
//! directory, on a free loopback port, pinned to the server CPUs
//! (`server::Running`); every round measures every row (a load, a file and a
//! connection mode, or an imaptest clients level) against every server, in an
//! order that alternates from round to round (`results::round_order`), with
//! the load pinned to the harness CPUs. A server's CPU is its whole process
//! tree's (nginx's master and workers, stoa's CGI children, Dovecot's master
//! and every child), from `/proc` before and after the run (`proctree`),
//! beside what the whole disks read and the CPU the machine spent on other
//! work over the same run (`machine`). The workloads ([`Workload`]):
//!
//! - `web99`: `stoa bench web --static-only` of this binary at each `--loads`
//!   (paced SPECweb99-style connections over the same file set, read once
//!   before each run), with `--mix-load` the full mix against stoa (its CGI
//!   and commit CPU apart), and with `--profile-load` one run per server
//!   under `perf` after the rounds (`profile`);
//! - `static`: `wrk` against 1 KiB, 10 KiB and 100 KiB files, keep-alive and
//!   `Connection: close`, the served bytes checked after every run (`check`);
//! - `h2`: both servers over TLS with HTTP/2 by ALPN (one self-signed ECDSA
//!   P-256 pair generated into the temporary directory, access log off),
//!   `h2load -c 100 -m 10` for 1 KiB and 10 KiB files, then batches of
//!   `h2load -c 50 -n 50 -m 1` (full handshakes) for the connection rate;
//! - `imap`: stoa's IMAP server (a temporary mail directory, one user with a
//!   plain password) against Dovecot's imapd (a private instance in the
//!   foreground, the same user in a passwd-file, Maildir), under Dovecot's
//!   imaptest in its stress mode (its default command mix, state checking on,
//!   `--clients` of one user appending from a small mbox) for `--run-time`
//!   at each clients level; the figure is the server's CPU per IMAP command
//!   (Dovecot's master and every child, reaped ones included), with the
//!   commands per second and imaptest's `Error` lines.
//!
//! The result directory gets `README.md` (the command, the machine, the setup,
//! how to read it), `summary.txt`, `raw.csv` and the peers' configurations;
//! each `stoa bench web` run's JSON goes to the results archive (labelled
//! `peers-WORKLOAD-SERVER`), never into the result directory.

mod check;
mod config;
mod load;
mod machine;
mod profile;
mod readme;
mod results;
mod server;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use crate::cpus::CpuList;
use crate::proctree::{self, TreeTicks};
use config::Setup;
use load::{H2loadRun, ImaptestRun, Load, Web99Run, WrkRun};
use results::Row;
use server::{Running, Software};

/// Most rounds a comparison may take.
const MAX_ROUNDS: u32 = 20;
/// Longest measurement of one row.
const MAX_RUN_TIME: Duration = Duration::from_secs(600);
/// wrk's warm-up per server and file before the rounds (static).
const WARM_UP: Duration = Duration::from_secs(2);
/// h2: h2load's connections and streams in flight on each (the old
/// `compare-h2.sh`'s), its files, and the new connections of a handshake batch.
const H2_CONNECTIONS: u32 = 100;
const H2_STREAMS: u32 = 10;
const H2_FILES: [StaticFile; 2] = [StaticFile::K1, StaticFile::K10];
const HANDSHAKE_BATCH: u32 = 50;

/// A server the comparison can start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Peer {
    /// `stoa serve` of `--stoa` (default: this binary).
    Stoa,
    /// `stoa serve` of `--baseline`: another build, the same flags.
    StoaBase,
    /// nginx (`nginx` on the path or /usr/sbin/nginx), one worker.
    Nginx,
    /// Dovecot's imapd (`dovecot` on the path or /usr/sbin/dovecot; the imap
    /// workload).
    Dovecot,
}

impl Peer {
    fn name(self) -> &'static str {
        match self {
            Peer::Stoa => "stoa",
            Peer::StoaBase => "stoa-base",
            Peer::Nginx => "nginx",
            Peer::Dovecot => "dovecot",
        }
    }
}

/// What load the servers are compared under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// Paced SPECweb99-style connections (`stoa bench web --static-only`) at
    /// each of --loads; the figure is the server's CPU per operation.
    Web99,
    /// wrk against 1k, 10k and 100k files, keep-alive and close.
    Static,
    /// TLS and HTTP/2: h2load on 1k and 10k files, and the full-handshake
    /// rate with ALPN h2.
    H2,
    /// IMAP: Dovecot's imaptest (stress mode, its default command mix) at
    /// each of --clients against stoa and Dovecot; the figure is the server's
    /// CPU per IMAP command.
    Imap,
}

impl Workload {
    fn name(self) -> &'static str {
        match self {
            Workload::Web99 => "web99",
            Workload::Static => "static",
            Workload::H2 => "h2",
            Workload::Imap => "imap",
        }
    }
}

/// A file of the static workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StaticFile {
    /// 1 KiB.
    #[value(name = "1k")]
    K1,
    /// 10 KiB.
    #[value(name = "10k")]
    K10,
    /// 100 KiB.
    #[value(name = "100k")]
    K100,
}

impl StaticFile {
    /// Its name in the document root (`1k.bin`).
    fn file(self) -> &'static str {
        match self {
            StaticFile::K1 => config::STATIC_FILES[0].0,
            StaticFile::K10 => config::STATIC_FILES[1].0,
            StaticFile::K100 => config::STATIC_FILES[2].0,
        }
    }
}

/// Connection counts, separated by commas or spaces (`1600,3200`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loads(pub Vec<u32>);

impl FromStr for Loads {
    type Err = String;

    fn from_str(s: &str) -> Result<Loads, String> {
        let loads = s
            .split([',', ' '])
            .filter(|w| !w.is_empty())
            .map(|w| match w.parse::<u32>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{w}: not a positive connection count")),
            })
            .collect::<Result<Vec<u32>, String>>()?;
        if loads.is_empty() {
            return Err("no load given".to_owned());
        }
        Ok(Loads(loads))
    }
}

/// `30`, `30s` or `2m`: whole seconds.
fn parse_secs(s: &str) -> Result<Duration, String> {
    let (n, unit) = match s.strip_suffix('m') {
        Some(n) => (n, 60),
        None => (s.strip_suffix('s').unwrap_or(s), 1),
    };
    match n.parse::<u64>() {
        Ok(n) if n > 0 => Ok(Duration::from_secs(n * unit)),
        _ => Err(format!("{s}: a positive number of seconds (30, 30s, 2m)")),
    }
}

/// `stoa bench peers`: its flags.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// The load the servers are compared under.
    #[arg(long, value_enum)]
    pub workload: Workload,
    /// The servers, in the first round's order (the order reverses every
    /// round); the ratios' reference is nginx, else dovecot, else stoa-base,
    /// else the first. The imap workload takes stoa, stoa-base and dovecot.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "nginx,stoa")]
    pub servers: Vec<Peer>,
    /// Rounds (at most 20).
    #[arg(long, default_value_t = 5)]
    pub rounds: u32,
    /// Measurement time of each run (default 30s for web99 and imap, 5s for
    /// static, 10s for h2; at most 10 minutes).
    #[arg(long, value_parser = parse_secs)]
    pub run_time: Option<Duration>,
    /// web99: the loads, paced connections (`1600,3200`).
    #[arg(long, default_value = "1600,3200")]
    pub loads: Loads,
    /// web99: also run the full mix (dynamic GET, POST, CGI) against each stoa
    /// at this load every round (0: not).
    #[arg(long, default_value_t = 0)]
    pub mix_load: u32,
    /// web99: after the rounds, one more run per server at this load
    /// (static-only) under `perf stat` (system calls per operation) and, when
    /// inferno is installed, `perf record -g` (a flame graph beside the run's
    /// record in the results archive).
    #[arg(long, value_name = "N")]
    pub profile_load: Option<u32>,
    /// web99: do not read the whole file set before each run (by default it is
    /// read once, so every run starts with it in the page cache).
    #[arg(long)]
    pub no_warm: bool,
    /// Wait up to this long (`60s`, `2m`) before the first round and between
    /// rounds for other work on the machine to fall to 10 % of the CPU
    /// (default: do not wait; the load is sampled and noted either way).
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub wait_idle: Option<Duration>,
    /// static: wrk's connections; several (`64,256`) make a row each.
    #[arg(long, default_value = "64")]
    pub connections: Loads,
    /// static: the files (of 1k, 10k, 100k).
    #[arg(long, value_delimiter = ',', default_value = "1k,10k,100k")]
    pub files: Vec<StaticFile>,
    /// static: wrk's threads.
    #[arg(long, default_value_t = 1)]
    pub threads: u32,
    /// imap: imaptest's clients, all one user; several (`10,50`) make a row
    /// each.
    #[arg(long, default_value = "10,50")]
    pub clients: Loads,
    /// imap: the imaptest binary (default $STOA_IMAPTEST, else
    /// /opt/imaptest/bin/imaptest, where scripts/test.sh builds it, else
    /// `imaptest` on the path).
    #[arg(long, value_name = "BINARY")]
    pub imaptest: Option<PathBuf>,
    /// The stoa binary the `stoa` server runs (default: this one).
    #[arg(long, value_name = "BINARY")]
    pub stoa: Option<PathBuf>,
    /// The stoa binary the `stoa-base` server runs (added to --servers).
    #[arg(long, value_name = "BINARY")]
    pub baseline: Option<PathBuf>,
    /// More `stoa serve` flags for `stoa` (`"--workers 2 --runtime
    /// per-core"`); a default they name again is left out.
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub stoa_flags: Option<String>,
    /// The same for `stoa-base`, which this adds to --servers (running
    /// --baseline, else the same binary as `stoa`): two configurations of
    /// one build compared.
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub baseline_flags: Option<String>,
    /// The servers' CPUs (default 0 with two or more CPUs).
    #[arg(long, value_name = "LIST")]
    pub server_cpus: Option<CpuList>,
    /// The load's CPUs (default: the others).
    #[arg(long, value_name = "LIST")]
    pub harness_cpus: Option<CpuList>,
    /// Pin nothing.
    #[arg(long)]
    pub no_pin: bool,
    /// The result directory (default bench-results/DATE-HOST-WORKLOAD).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The results archive for each `stoa bench web` run (default
    /// ~/.local/share/stoa/results).
    #[arg(long, value_name = "DIR")]
    pub archive: Option<PathBuf>,
    /// Archive nothing.
    #[arg(long)]
    pub no_archive: bool,
}

/// Where the servers and the load run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Pinning {
    server: Option<CpuList>,
    harness: Option<CpuList>,
}

impl Pinning {
    /// The flags' CPUs; by default, with `cores` of two or more, the servers on
    /// CPU 0 and the load on the others.
    fn of(args: &Args, cores: usize) -> anyhow::Result<Pinning> {
        if args.no_pin || cores < 2 {
            return Ok(Pinning::default());
        }
        let server = match &args.server_cpus {
            Some(l) => l.clone(),
            None => "0".parse()?,
        };
        let harness = match &args.harness_cpus {
            Some(l) => l.clone(),
            None if cores == 2 => "1".parse()?,
            None => format!("1-{}", cores - 1).parse()?,
        };
        Ok(Pinning {
            server: Some(server),
            harness: Some(harness),
        })
    }

    fn words(&self) -> String {
        match (&self.server, &self.harness) {
            (Some(s), Some(h)) => format!(
                "each server (all its processes and threads) on CPU(s) {s}, the load on CPU(s) {h}"
            ),
            _ => "not pinned: the load and the servers share the machine's CPUs".to_owned(),
        }
    }
}

/// One row of the comparison: what load, against which servers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum RowSpec {
    /// web99 at a load; `mix`: the full mix, stoa builds only.
    Web99 { connections: u32, mix: bool },
    /// wrk against a file, keep-alive or close; `suffix`: the connection
    /// count in the name when there are several.
    Static {
        file: &'static str,
        close: bool,
        connections: u32,
        suffix: bool,
    },
    /// h2load's timed run against a file over HTTP/2.
    H2 { file: &'static str },
    /// Batches of new TLS connections with ALPN h2, one request each.
    Handshake,
    /// imaptest with this many clients.
    Imap { clients: u32 },
}

impl RowSpec {
    fn name(&self) -> String {
        match self {
            RowSpec::Web99 { connections, mix } if *mix => format!("mix-{connections}"),
            RowSpec::Web99 { connections, .. } => connections.to_string(),
            RowSpec::Static {
                file,
                close,
                connections,
                suffix,
            } => {
                let mode = if *close { "close" } else { "keepalive" };
                let name = format!("{}-{mode}", file.trim_end_matches(".bin"));
                if *suffix {
                    format!("{name}-c{connections}")
                } else {
                    name
                }
            }
            RowSpec::H2 { file } => format!(
                "h2-{}-c{H2_CONNECTIONS}-m{H2_STREAMS}",
                file.trim_end_matches(".bin")
            ),
            RowSpec::Handshake => "handshake-h2".to_owned(),
            RowSpec::Imap { clients } => format!("imap-c{clients}"),
        }
    }

    fn wants(&self, server: &str) -> bool {
        !matches!(self, RowSpec::Web99 { mix: true, .. }) || server.starts_with("stoa")
    }
}

/// The rows of a comparison, in the order each round runs them.
fn rows_of(args: &Args) -> Vec<RowSpec> {
    match args.workload {
        Workload::Web99 => {
            let mut rows: Vec<RowSpec> = args
                .loads
                .0
                .iter()
                .map(|&connections| RowSpec::Web99 {
                    connections,
                    mix: false,
                })
                .collect();
            if args.mix_load > 0 {
                rows.push(RowSpec::Web99 {
                    connections: args.mix_load,
                    mix: true,
                });
            }
            rows
        }
        Workload::Static => {
            let several = args.connections.0.len() > 1;
            let mut rows = Vec::new();
            for &connections in &args.connections.0 {
                for f in &args.files {
                    for close in [false, true] {
                        rows.push(RowSpec::Static {
                            file: f.file(),
                            close,
                            connections,
                            suffix: several,
                        });
                    }
                }
            }
            rows
        }
        Workload::H2 => H2_FILES
            .iter()
            .map(|f| RowSpec::H2 { file: f.file() })
            .chain([RowSpec::Handshake])
            .collect(),
        Workload::Imap => args
            .clients
            .0
            .iter()
            .map(|&clients| RowSpec::Imap { clients })
            .collect(),
    }
}

/// The servers' names and software, in `--servers` order (`stoa-base` added
/// with `--baseline`).
fn peers_of(args: &Args, exe: &Path) -> anyhow::Result<Vec<(&'static str, Software)>> {
    let mut list = args.servers.clone();
    let base_wanted = args.baseline.is_some() || args.baseline_flags.is_some();
    if base_wanted && !list.contains(&Peer::StoaBase) {
        let at = list
            .iter()
            .position(|p| *p == Peer::Stoa)
            .unwrap_or(list.len());
        list.insert(at, Peer::StoaBase);
    }
    let stoa = args.stoa.clone().unwrap_or_else(|| exe.to_owned());
    let mut peers = Vec::new();
    for peer in list {
        if peers.iter().any(|(n, _)| *n == peer.name()) {
            bail!("--servers: {} twice", peer.name());
        }
        let software = match peer {
            Peer::Stoa => Software::Stoa(stoa.clone(), words(args.stoa_flags.as_deref())),
            Peer::StoaBase => {
                let exe = match (&args.baseline, &args.baseline_flags) {
                    (Some(base), _) => base.clone(),
                    (None, Some(_)) => stoa.clone(),
                    (None, None) => {
                        bail!("--servers stoa-base needs --baseline BINARY or --baseline-flags")
                    }
                };
                Software::Stoa(exe, words(args.baseline_flags.as_deref()))
            }
            Peer::Nginx if args.workload == Workload::Imap => {
                bail!("--servers: nginx serves no IMAP (the imap workload: stoa,dovecot)")
            }
            Peer::Nginx => Software::Nginx(
                server::nginx_binary()
                    .context("nginx is not installed (apt-get install nginx-light)")?,
            ),
            Peer::Dovecot if args.workload != Workload::Imap => {
                bail!("--servers: dovecot is for the imap workload")
            }
            Peer::Dovecot => Software::Dovecot(server::dovecot_binary().context(
                "Dovecot's imapd is not installed (/usr/sbin/dovecot and /usr/lib/dovecot/imap; \
                 apt-get install dovecot-imapd)",
            )?),
        };
        peers.push((peer.name(), software));
    }
    if peers.is_empty() {
        bail!("--servers: none given");
    }
    Ok(peers)
}

/// The words of a flags string (`"--workers 2"`); none for `None`.
fn words(flags: Option<&str>) -> Vec<String> {
    flags
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Runs the comparison, writes the result directory and prints the summary
/// on standard output.
#[allow(clippy::print_stdout, reason = "the summary is the command's output")]
pub fn run(args: &Args) -> anyhow::Result<()> {
    if !(1..=MAX_ROUNDS).contains(&args.rounds) {
        bail!("--rounds: 1 to {MAX_ROUNDS}");
    }
    let run_time = args.run_time.unwrap_or(match args.workload {
        Workload::Web99 => Duration::from_secs(30),
        Workload::Static => Duration::from_secs(5),
        Workload::H2 => Duration::from_secs(10),
        Workload::Imap => Duration::from_secs(30),
    });
    if run_time > MAX_RUN_TIME {
        bail!("--run-time: at most {MAX_RUN_TIME:?}");
    }
    if args.workload == Workload::Static && args.profile_load.is_some() {
        bail!("--profile-load is for the web99 workload");
    }
    if args.workload == Workload::Static && server::which("wrk").is_none() {
        bail!("the static workload needs wrk (apt-get install wrk)");
    }
    if args.workload == Workload::H2 && server::which("h2load").is_none() {
        bail!("the h2 workload needs h2load (apt-get install nghttp2-client)");
    }
    if args.workload != Workload::Web99 && args.profile_load.is_some() {
        bail!("--profile-load is for the web99 workload");
    }
    let imaptest = match args.workload {
        Workload::Imap => Some(server::imaptest_binary(args.imaptest.as_deref()).context(
            "the imap workload needs Dovecot's imaptest (--imaptest BINARY, $STOA_IMAPTEST, or \
             /opt/imaptest/bin/imaptest: scripts/test.sh builds it)",
        )?),
        _ => None,
    };
    let exe = crate::stoa_exe(None)?;
    let peers = peers_of(args, &exe)?;
    let pinning = Pinning::of(args, crate::cpus::machine_cores())?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out(args.workload));
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix("stoa-peers.")
        .tempdir()
        .context("cannot create a temporary directory")?;
    let mut cmp = Comparison::prepare(args, &exe, tmp.path(), run_time, pinning)?;
    cmp.imaptest = imaptest;
    for (name, software) in &peers {
        cmp.start(name, software)?;
    }
    cmp.rounds(args)?;
    if let Some(load) = args.profile_load {
        cmp.profile(load)?;
    }
    // The ratios' denominator: nginx, else dovecot, else the baseline, else
    // the first.
    let reference = ["nginx", "dovecot", "stoa-base"]
        .into_iter()
        .find(|r| peers.iter().any(|(n, _)| n == r))
        .unwrap_or(peers[0].0);
    let summary = cmp.write(args, &out, reference)?;
    print!("{summary}");
    eprintln!("stoa bench peers: results in {}", out.display());
    Ok(())
}

/// `bench-results/DATE-HOST-WORKLOAD` under the current directory.
fn default_out(workload: Workload) -> PathBuf {
    let date = time::OffsetDateTime::now_utc().date();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    PathBuf::from("bench-results").join(format!("{date}-{}-{}", host.trim(), workload.name()))
}

/// A comparison under way: its servers, its rows so far.
struct Comparison<'a> {
    args: &'a Args,
    exe: &'a Path,
    tmp: &'a Path,
    docroot: PathBuf,
    run_time: Duration,
    pinning: Pinning,
    max_connections: u32,
    /// h2: the certificate and key both servers use.
    tls: Option<(PathBuf, PathBuf)>,
    servers: Vec<Running>,
    rows: Vec<Row>,
    background: machine::Background,
    /// The summary's profile section (`--profile-load`), else empty.
    profile: String,
    /// imap: the imaptest binary.
    imaptest: Option<PathBuf>,
    /// imap: the mbox imaptest appends from.
    mbox: PathBuf,
}

/// The imap workload's mbox: the eight small messages of imaptest's
/// reference stress run (`shared/tools/imaptest/reference/small.mbox`).
const IMAPTEST_MBOX: &str = include_str!("imaptest-small.mbox");

impl<'a> Comparison<'a> {
    /// The open-file limit raised, the document root written.
    fn prepare(
        args: &'a Args,
        exe: &'a Path,
        tmp: &'a Path,
        run_time: Duration,
        pinning: Pinning,
    ) -> anyhow::Result<Comparison<'a>> {
        let max_connections = match args.workload {
            Workload::Web99 => args
                .loads
                .0
                .iter()
                .copied()
                .chain([args.mix_load, args.profile_load.unwrap_or(0)])
                .max()
                .unwrap_or(1),
            Workload::Static => args.connections.0.iter().copied().max().unwrap_or(1),
            Workload::H2 => H2_CONNECTIONS,
            Workload::Imap => args.clients.0.iter().copied().max().unwrap_or(1),
        };
        raise_nofile(u64::from(max_connections) * 2 + 1000)?;
        let docroot = tmp.join("www");
        match args.workload {
            Workload::Static | Workload::H2 => config::write_static_files(&docroot)?,
            Workload::Web99 => write_fileset(exe, max_connections, &docroot, &tmp.join("cgi-bin"))?,
            Workload::Imap => {}
        }
        let mbox = tmp.join("imaptest.mbox");
        if args.workload == Workload::Imap {
            std::fs::write(&mbox, IMAPTEST_MBOX)
                .with_context(|| format!("cannot write {}", mbox.display()))?;
        }
        let tls = match args.workload {
            Workload::H2 => Some(config::write_tls_pair(&tmp.join("tls"))?),
            _ => None,
        };
        Ok(Comparison {
            args,
            exe,
            tmp,
            docroot,
            tls,
            run_time,
            pinning,
            max_connections,
            servers: Vec::new(),
            rows: Vec::new(),
            background: machine::Background::default(),
            profile: String::new(),
            imaptest: None,
            mbox,
        })
    }

    fn start(&mut self, name: &str, software: &Software) -> anyhow::Result<()> {
        let dir = self.tmp.join(name);
        let imap = self.args.workload == Workload::Imap;
        let log = self.tmp.join(format!("{name}-access.log"));
        let state = self.tmp.join(format!("{name}-state"));
        let cgi = self.tmp.join("cgi-bin");
        let setup = Setup {
            dir: &dir,
            port: 0,
            docroot: &self.docroot,
            max_connections: self.max_connections,
            // h2: access log off, as the old script's; imap: none.
            access_log: (self.tls.is_none() && !imap).then_some(log.as_path()),
            root: rustix::process::geteuid().is_root(),
            tls: self.tls.as_ref().map(|(c, k)| (c.as_path(), k.as_path())),
            imap,
        };
        let web99 =
            (self.args.workload == Workload::Web99).then_some((state.as_path(), cgi.as_path()));
        let running = Running::start(name, software, &setup, web99, self.pinning.server.as_ref())?;
        self.servers.push(running);
        Ok(())
    }

    fn rounds(&mut self, args: &Args) -> anyhow::Result<()> {
        let specs = rows_of(args);
        if args.workload == Workload::Static {
            for i in 0..self.servers.len() {
                self.check_bytes(i)?;
            }
            self.warm_up()?;
        }
        let wait = args.wait_idle.unwrap_or_default();
        self.background.wait_idle(wait, "before the rounds");
        eprintln!(
            "stoa bench peers: {} rounds x {} rows x {} servers x {:?}",
            args.rounds,
            specs.len(),
            self.servers.len(),
            self.run_time
        );
        for round in 1..=args.rounds {
            if round > 1 && !wait.is_zero() {
                self.background
                    .wait_idle(wait, &format!("before round {round}"));
            }
            let order = results::round_order(round, self.servers.len());
            for spec in &specs {
                for &i in &order {
                    if !spec.wants(&self.servers[i].name) {
                        continue;
                    }
                    let row = self.measure(round, spec, i)?;
                    eprintln!(
                        "stoa bench peers: round {round} {} {}: {:.1} ops/s, {} µs/op, {} errors",
                        row.row,
                        row.server,
                        row.ops_per_sec,
                        row.server_cpu_us_per_op
                            .map_or("-".to_owned(), |c| format!("{c:.2}")),
                        row.errors
                    );
                    self.rows.push(row);
                }
            }
        }
        self.background.check("after the rounds (servers idle)");
        Ok(())
    }

    /// wrk against every server and file for [`WARM_UP`], results thrown away.
    fn warm_up(&mut self) -> anyhow::Result<()> {
        for i in 0..self.servers.len() {
            for f in &self.args.files {
                let spec = RowSpec::Static {
                    file: f.file(),
                    close: false,
                    connections: self.args.connections.0[0],
                    suffix: false,
                };
                self.load(i, &spec, WARM_UP, "warm-up")
                    .with_context(|| format!("warm-up of {}", self.servers[i].name))?;
            }
            self.servers[i].truncate_log();
        }
        Ok(())
    }

    /// One run of `spec` against server `i`, with its CPU, the disks' reads
    /// and the machine's other work.
    fn measure(&mut self, round: u32, spec: &RowSpec, i: usize) -> anyhow::Result<Row> {
        let warm = (self.args.workload == Workload::Web99 && !self.args.no_warm)
            .then(|| warm(&self.docroot));
        let root = self.servers[i].pid();
        let me = std::process::id();
        let mix = matches!(spec, RowSpec::Web99 { mix: true, .. });
        let parts = |root| mix.then(|| MixTicks::of(root));
        let (before, h0, own0, parts0) = (
            TreeTicks::of(&[root]),
            proctree::reaped_ticks(me),
            proctree::own_ticks(me),
            parts(root),
        );
        let (machine0, disk0, t0) = (
            machine::MachineTicks::now(),
            machine::disk_sectors_read(),
            Instant::now(),
        );
        let label = format!("r{round}-{}", spec.name());
        let load = self.load(i, spec, self.run_time, &label);
        let spent = TreeTicks::of(&[root]).since(before);
        let (machine1, disk1, wall) = (
            machine::MachineTicks::now(),
            machine::disk_sectors_read(),
            t0.elapsed().as_secs_f64(),
        );
        let harness_ticks = match (h0, proctree::reaped_ticks(me)) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        let own = match (own0, proctree::own_ticks(me)) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        let parts1 = parts(root);
        let harness = proctree::ticks_to_duration(harness_ticks).as_secs_f64();
        let server = &mut self.servers[i];
        server.truncate_log();
        if !server.alive() {
            bail!("{} died in round {round}, {}", server.name, spec.name());
        }
        let load = load
            .with_context(|| format!("round {round}, {} against {}", spec.name(), server.name))?;
        if let RowSpec::Static { .. } = spec {
            self.check_bytes(i)
                .with_context(|| format!("after round {round}, {}", spec.name()))?;
        }
        let cpu = proctree::ticks_to_duration(spent.total).as_secs_f64();
        let per_op = |ticks: u64| {
            (load.ops > 0.0)
                .then(|| proctree::ticks_to_duration(ticks).as_secs_f64() * 1e6 / load.ops)
        };
        let part = |f: fn(&MixTicks) -> Option<u64>| {
            let (a, b) = (parts0.as_ref()?, parts1.as_ref()?);
            per_op(f(b)?.saturating_sub(f(a)?))
        };
        let harness_cpu_pct = 100.0 * harness / wall.max(1e-9);
        let harness_bound = match load.harness_share {
            Some(share) => share > crate::cpus::HARNESS_BOUND_SHARE,
            None => {
                let cores = self
                    .pinning
                    .harness
                    .as_ref()
                    .map_or(crate::cpus::machine_cores(), CpuList::len);
                let threads = self.args.threads.clamp(1, cores.max(1) as u32);
                harness_cpu_pct / 100.0 / f64::from(threads) > crate::cpus::HARNESS_BOUND_SHARE
            }
        };
        let server = &self.servers[i];
        Ok(Row {
            round,
            row: spec.name(),
            server: server.name.clone(),
            ops_per_sec: load.ops_per_sec,
            errors: load.errors,
            server_cpu_us_per_op: (load.ops > 0.0).then(|| cpu * 1e6 / load.ops),
            server_kernel_pct: (spent.total > 0)
                .then(|| 100.0 * spent.system as f64 / spent.total as f64),
            harness_cpu_pct,
            harness_bound,
            conform_pct: load.conform_pct,
            disk_sectors: disk0.zip(disk1).map(|(a, b)| b.saturating_sub(a)),
            other_cpu_pct: machine1.other_pct(machine0, spent.total + harness_ticks + own),
            cgi_cpu_us_per_op: part(|p| p.cgi),
            commit_cpu_us_per_op: part(|p| p.commits),
            warm: warm.flatten(),
        })
    }

    /// The static files served by server `i` compared with those on disk.
    fn check_bytes(&self, i: usize) -> anyhow::Result<()> {
        let server = &self.servers[i];
        let files: Vec<&str> = self.args.files.iter().map(|f| f.file()).collect();
        check::served_files_match(server.addr, &self.docroot, &files).with_context(|| {
            format!(
                "{} served other bytes than the files': not a figure",
                server.name
            )
        })
    }

    /// Where server `i`'s run `label` writes (a temporary directory; the load's
    /// log is beside it, `.log`).
    fn run_dir(&self, i: usize, label: &str) -> PathBuf {
        self.tmp
            .join("runs")
            .join(format!("{}-{label}", self.servers[i].name))
    }

    /// `--profile-load`: one more static-only run per server at `load` with
    /// `perf` on its worker; the summary's profile section.
    fn profile(&mut self, load: u32) -> anyhow::Result<()> {
        let (perf, inferno) = profile::tools();
        if !perf {
            eprintln!("stoa bench peers: perf is not installed; no profile");
            self.profile = profile::section(
                load,
                &[],
                Some("perf is not installed (apt-get install linux-perf): no profile"),
            );
            return Ok(());
        }
        let spec = RowSpec::Web99 {
            connections: load,
            mix: false,
        };
        let label = format!("profile-{load}");
        let mut outcomes = Vec::new();
        for i in 0..self.servers.len() {
            let (name, root) = (self.servers[i].name.clone(), self.servers[i].pid());
            // nginx's worker does the work; stoa's one process.
            let worker = match name.as_str() {
                "nginx" => proctree::descendants(root).first().copied().unwrap_or(root),
                _ => root,
            };
            let run_dir = self.run_dir(i, &label);
            let flame = inferno && !self.args.no_archive;
            eprintln!("stoa bench peers: {name} at {load} connections under perf");
            let attached = profile::Attached::start(worker, &run_dir.with_extension("perf"), flame);
            let loaded = self.load(i, &spec, self.run_time, &label);
            self.servers[i].truncate_log();
            let finished = attached.and_then(profile::Attached::finish);
            let loaded = loaded.with_context(|| format!("the profiled run against {name}"))?;
            let (calls, folded) = match finished {
                Ok((calls, folded)) => (Ok(calls), folded),
                Err(e) => (Err(format!("{e:#}")), None),
            };
            let flame = match folded {
                Some(folded) => self.keep_flame(&run_dir, &folded, &name, load),
                None if !inferno => {
                    Err("inferno is not installed (cargo install inferno)".to_owned())
                }
                None if self.args.no_archive => Err("--no-archive: nowhere to keep it".to_owned()),
                None => Err("perf record gave no stacks".to_owned()),
            };
            outcomes.push(profile::Outcome {
                server: name,
                syscalls_per_op: calls.and_then(|c| {
                    (loaded.ops > 0.0)
                        .then(|| c as f64 / loaded.ops)
                        .ok_or_else(|| "no operation finished".to_owned())
                }),
                flame,
            });
        }
        self.profile = profile::section(load, &outcomes, None);
        Ok(())
    }

    /// Draws the flame graph of `folded` into the directory named after the
    /// run's record in the archive; returns the SVG's path.
    fn keep_flame(
        &self,
        run_dir: &Path,
        folded: &Path,
        name: &str,
        load: u32,
    ) -> Result<PathBuf, String> {
        let record = profile::archived_as(&run_dir.with_extension("log"))
            .ok_or("the run was not archived")?;
        let dir = record.with_extension("");
        let svg = dir.join(format!("flame-{name}.svg"));
        let title = format!("{name}, {load} paced connections, static-only, access log on");
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        std::fs::copy(folded, dir.join(format!("{name}.folded")))
            .map_err(|e| format!("cannot keep the folded stacks: {e}"))?;
        profile::draw(folded, &svg, &title).map_err(|e| format!("{e:#}"))?;
        Ok(svg)
    }

    /// The load of `spec` against server `i` for `time`.
    fn load(&self, i: usize, spec: &RowSpec, time: Duration, label: &str) -> anyhow::Result<Load> {
        let server = &self.servers[i];
        let run_dir = self.run_dir(i, label);
        std::fs::create_dir_all(run_dir.parent().unwrap_or(self.tmp))?;
        match *spec {
            RowSpec::Static {
                file,
                close,
                connections,
                ..
            } => WrkRun {
                url: format!("http://{}/{file}", server.addr),
                threads: self.args.threads,
                connections,
                duration: time,
                close,
                cpus: self.pinning.harness.as_ref(),
                log: &run_dir.with_extension("wrk"),
            }
            .run(),
            RowSpec::H2 { file } => H2loadRun {
                url: format!("https://{}/{file}", server.addr),
                connections: H2_CONNECTIONS,
                streams: H2_STREAMS,
                duration: Some(time),
                cpus: self.pinning.harness.as_ref(),
                log: &run_dir.with_extension("h2load"),
            }
            .run(),
            RowSpec::Handshake => H2loadRun {
                url: format!("https://{}/{}", server.addr, StaticFile::K1.file()),
                connections: HANDSHAKE_BATCH,
                streams: 1,
                duration: None,
                cpus: self.pinning.harness.as_ref(),
                log: &run_dir.with_extension("h2load"),
            }
            .handshakes(time),
            RowSpec::Imap { clients } => ImaptestRun {
                binary: self.imaptest.as_deref().context("no imaptest binary")?,
                port: server.addr.port(),
                mbox: &self.mbox,
                clients,
                duration: time,
                cpus: self.pinning.harness.as_ref(),
                log: &run_dir.with_extension("imaptest"),
            }
            .run(),
            RowSpec::Web99 { connections, mix } => {
                let root = server.pid();
                let archive = if self.args.no_archive {
                    vec!["--no-archive".to_owned()]
                } else {
                    let mut a = vec![
                        "--label".to_owned(),
                        format!("peers-{}-{}", self.args.workload.name(), server.name),
                    ];
                    if let Some(dir) = &self.args.archive {
                        a.extend(["--archive".to_owned(), dir.display().to_string()]);
                    }
                    a
                };
                Web99Run {
                    exe: self.exe,
                    url: format!("http://{}", server.addr),
                    connections,
                    run_time: time,
                    static_only: !mix,
                    server_pids: std::iter::once(root)
                        .chain(proctree::descendants(root))
                        .collect(),
                    harness_cpus: self.pinning.harness.as_ref(),
                    out: &run_dir,
                    archive,
                }
                .run()
            }
        }
    }

    /// `raw.csv`, `summary.txt`, the configurations and `README.md` in `out`;
    /// returns the summary.
    fn write(&self, args: &Args, out: &Path, reference: &str) -> anyhow::Result<String> {
        let units = match args.workload {
            Workload::Imap => results::PER_COMMAND,
            _ => results::PER_OP,
        };
        let summary = results::summary(&self.rows, reference, &units) + &self.profile;
        let put = |name: &str, text: &str| {
            let path = out.join(name);
            std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
        };
        put("raw.csv", &results::raw_csv(&self.rows))?;
        put("summary.txt", &summary)?;
        for s in &self.servers {
            let name = if s.config.starts_with("stoa ") {
                format!("{}.args", s.name)
            } else {
                format!("{}.conf", s.name)
            };
            put(&name, &config::with_tmp_named(&s.config, self.tmp))?;
        }
        put("README.md", &self.readme(args, &summary))?;
        Ok(summary)
    }

    fn readme(&self, args: &Args, summary: &str) -> String {
        readme::readme(&readme::Parts {
            args,
            servers: &self
                .servers
                .iter()
                .map(|s| s.name.clone())
                .collect::<Vec<_>>(),
            pinning: &self.pinning,
            run_time: self.run_time,
            background: &self.background.markdown(),
            summary,
        })
    }
}

/// The parts of a stoa's CPU so far that the mix row gives on lines of their
/// own, clock ticks.
#[derive(Debug, Clone, Copy)]
struct MixTicks {
    /// Its reaped children's (cutime + cstime): the CGI scripts.
    cgi: Option<u64>,
    /// Its `web99-state` thread's: the POSTs' durable commits.
    commits: Option<u64>,
}

impl MixTicks {
    fn of(pid: u32) -> MixTicks {
        MixTicks {
            cgi: proctree::reaped_ticks(pid),
            commits: machine::thread_ticks(pid, "web99-state"),
        }
    }
}

/// Runs `stoa fileset` for `connections` into `docroot` and `cgi`.
fn write_fileset(exe: &Path, connections: u32, docroot: &Path, cgi: &Path) -> anyhow::Result<()> {
    eprintln!("stoa bench peers: writing the file set for {connections} connections");
    let status = std::process::Command::new(exe)
        .args([
            "fileset",
            "--connections",
            &connections.to_string(),
            "--dir",
        ])
        .arg(docroot)
        .arg("--cgi-dir")
        .arg(cgi)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .context("cannot run stoa fileset")?;
    if !status.success() {
        bail!("stoa fileset failed ({status})");
    }
    Ok(())
}

/// Reads every file under `dir` once, so a run starts with the whole file set
/// in the page cache; returns the sectors the whole disks read meanwhile and
/// the seconds it took (`None` without `/proc/diskstats`).
fn warm(dir: &Path) -> Option<(u64, f64)> {
    let (before, t0) = (machine::disk_sectors_read(), Instant::now());
    read_all(dir);
    let after = machine::disk_sectors_read();
    Some((after?.saturating_sub(before?), t0.elapsed().as_secs_f64()))
}

/// Reads every file under `dir` once.
fn read_all(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        match entry.file_type() {
            Ok(t) if t.is_dir() => read_all(&path),
            Ok(t) if t.is_file() => {
                if let Ok(mut f) = std::fs::File::open(&path) {
                    let _ = std::io::copy(&mut f, &mut std::io::sink());
                }
            }
            _ => {}
        }
    }
}

/// Raises this process's open-file limit (which its servers and loads
/// inherit) to `want`, or as far as the hard limit allows.
fn raise_nofile(want: u64) -> anyhow::Result<()> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    let hard = limit.maximum.unwrap_or(u64::MAX);
    let soft = want.min(hard);
    if limit.current.is_some_and(|c| c >= soft) {
        return Ok(());
    }
    limit.current = Some(soft);
    setrlimit(Resource::Nofile, limit).context("cannot raise the open-file limit")?;
    Ok(())
}

#[cfg(test)]
mod tests;
