//! What a `stoa bench mail` run produced: the input of the report.

use std::time::Duration;

use serde::Serialize;
use stoa_mail2001::Rates;
use stoa_mailgen::qos::Verdict;
use stoa_mailgen::sink::SinkStats;
use stoa_mailgen::tally::LevelTally;

use super::tiers::{TierInfo, TierLevel};

/// Phase lengths of one load level.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Phases {
    /// `quick`, `standard` or `custom`.
    pub(crate) profile: &'static str,
    /// Load without measurement.
    pub(crate) warmup: Duration,
    /// The measurement window: sessions starting in it are judged.
    pub(crate) run: Duration,
    /// Load continues while the window's sessions finish and remote mail reaches
    /// the sink.
    pub(crate) cooldown: Duration,
}

/// One load level's result.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LevelResult {
    /// The load factor (0.8, 1.0, 1.2).
    pub(crate) load: f64,
    /// The stream rates offered (per second).
    #[serde(skip)]
    pub(crate) rates: Rates,
    /// What was measured.
    pub(crate) tally: LevelTally,
    /// The judgement.
    pub(crate) verdict: Verdict,
    /// Wall time of the whole level (warm-up to the last measured session's end).
    pub(crate) wall: Duration,
    /// CPU time the harness used during the level.
    pub(crate) harness_cpu: Option<Duration>,
    /// CPU time the harness (this process) used over the measurement window.
    pub(crate) harness_window_cpu: Option<Duration>,
    /// CPU time the server's processes used during the level, when known.
    pub(crate) server_cpu: Option<Duration>,
    /// CPU time the whole machine was busy during the level (every process, the
    /// harness included, from `/proc/stat`): a server of many processes
    /// (Postfix + Dovecot) is measured as machine − harness.
    pub(crate) machine_cpu: Option<Duration>,
    /// With `--agents`: who offered what (this host's probes first, then each
    /// agent); empty otherwise.
    pub(crate) generators: Vec<crate::agent::mail::Generator>,
    /// With `--agents`: the CPU time the agents used during the level, all
    /// together (not in `harness_cpu`, which is this process's).
    pub(crate) agents_cpu: Option<Duration>,
    /// Each `--tier`'s CPU and work over the measurement window, in the order
    /// of [`MailRun::tiers`].
    pub(crate) tiers: Vec<TierLevel>,
    /// The server's process tree over the measurement window, by program
    /// (`--server-pid` and its descendants, or the built-in server).
    pub(crate) server_processes: Option<crate::proctree::TreeCpu>,
}

/// One trial of `--find-max`: the 100 % level at `mpm`.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Trial {
    /// The msgs/min tried.
    pub(crate) mpm: f64,
    /// Whether its 100 % level passed plainly (every row judged and passed).
    pub(crate) passed: bool,
    /// The rows that failed.
    pub(crate) failures: Vec<String>,
    /// The rows with too small a sample to judge (too few probes).
    pub(crate) unjudged: Vec<String>,
    /// How busy the harness was on its cores over the measurement window.
    pub(crate) harness: Option<crate::cpus::HarnessLoad>,
    /// How busy the server was on its cores over the level (`None`: its CPU
    /// was not measured: no `--server-pid`, or a server of many processes).
    pub(crate) server: Option<crate::cpus::ServerLoad>,
}

/// The store check made before the run (§1.11, §3.1).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StoreCheck {
    /// Mailboxes checked (a random sample).
    pub(crate) mailboxes: u64,
    /// Messages found in them.
    pub(crate) messages: u64,
    /// Octets found in them.
    pub(crate) octets: u64,
    /// Mailboxes found empty.
    pub(crate) empty: u64,
    /// Mean messages per mailbox, and the model's 3.43.
    pub(crate) mean_messages: f64,
    /// Mean message size found, bytes (the model: 24.5 KB).
    pub(crate) mean_size: f64,
    /// Whether the sample is close enough to the steady state.
    pub(crate) passed: bool,
    /// What was off.
    pub(crate) notes: Vec<String>,
}

/// The whole run.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct MailRun {
    /// The server's product name ("Stoa 0.1.0 (built-in)", or `--server-software`).
    pub(crate) server_software: String,
    /// The scheme of the generated users' passwords (`{SHA512-CRYPT}`…), for the
    /// built-in server; `None` for an external one, whose users are its own.
    pub(crate) password_scheme: Option<&'static str>,
    /// The claimed msgs/min (the 100 % level); for `--find-max`, the best passing.
    pub(crate) mpm: f64,
    /// Accounts the store holds (≥ 200 × msgs/min, unless declared smaller).
    pub(crate) users: u64,
    /// Whether the store's size was declared (`--store-users`).
    pub(crate) declared_store: bool,
    /// The highest rate the store carries (`--find-max`'s ceiling).
    pub(crate) capacity_mpm: f64,
    /// Accounts in the retry pool.
    pub(crate) retry_pool: u64,
    /// The local domain.
    pub(crate) domain: String,
    /// The domain relayed to the sink.
    pub(crate) remote_domain: String,
    /// The SMTP address.
    pub(crate) smtp: String,
    /// How the mailboxes were read (`--access`).
    pub(crate) access: stoa_mailgen::access::Access,
    /// The address they were read at: POP3's, or IMAP's.
    pub(crate) read_addr: String,
    /// The sink's address.
    pub(crate) sink: String,
    /// Phase lengths.
    pub(crate) phases: Phases,
    /// The levels run, in order.
    pub(crate) levels: Vec<LevelResult>,
    /// `--find-max` trials, in order (empty otherwise).
    pub(crate) search: Vec<Trial>,
    /// The store check before the run.
    pub(crate) store: Option<StoreCheck>,
    /// The sink's totals over the whole run.
    pub(crate) sink_stats: SinkStats,
    /// Share of SMTP sessions that carry a delivery probe (0.01 by the white
    /// paper, unless `--probe-share` says otherwise).
    pub(crate) probe_share: f64,
    /// How the run breaks the kit's run rules (`mail::compliance`); empty for
    /// the kit's run.
    pub(crate) deviations: Vec<crate::compliance::Deviation>,
    /// Load threads of the harness.
    pub(crate) threads: u32,
    /// The `stoa bench agent` daemons that generated the load (empty: this
    /// process did).
    pub(crate) agents: Vec<crate::agent::mail::AgentInfo>,
    /// The random seed of the run.
    pub(crate) seed: u64,
    /// Started, as RFC 3339 UTC.
    pub(crate) started: String,
    /// The interpretations this harness makes where the white paper is
    /// uncertain, one sentence each (printed in the report's notes).
    pub(crate) choices: Vec<&'static str>,
    /// The system's tiers (`--tier`), with their peak memory at the end.
    pub(crate) tiers: Vec<TierInfo>,
    /// The CPUs the harness and the server ran on.
    #[serde(skip)]
    pub(crate) placement: crate::cpus::Placement,
}

impl MailRun {
    /// How busy the harness was on its cores over `level`'s measurement
    /// window, when measured.
    pub(crate) fn harness_load(&self, level: &LevelResult) -> Option<crate::cpus::HarnessLoad> {
        harness_load(&self.placement, self.threads, level)
    }

    /// The 100 % level, if it ran.
    pub(crate) fn full_level(&self) -> Option<&LevelResult> {
        self.levels.iter().find(|l| (l.load - 1.0).abs() < 1e-9)
    }

    /// Whether the run's claim holds: its 100 % level ran and passed plainly
    /// (every row judged).
    pub(crate) fn passed(&self) -> bool {
        self.full_level().is_some_and(|l| l.verdict.passed)
    }
}

/// How busy the server was on its cores over `level`, when its CPU was
/// measured.
pub(crate) fn server_load(
    placement: &crate::cpus::Placement,
    level: &LevelResult,
) -> Option<crate::cpus::ServerLoad> {
    let cpu = level.server_cpu?;
    (!level.wall.is_zero())
        .then(|| crate::cpus::ServerLoad::new(cpu, level.wall, placement.server_cores()))
}

impl MailRun {
    /// What ended the `--find-max` search, and the trial that shows it (the
    /// lowest rate with a failing row); `None` without a search, or when that
    /// trial's harness CPU was not measured.
    pub(crate) fn limit(&self) -> Option<(crate::cpus::Limit, Option<&Trial>)> {
        if self.search.is_empty() {
            return None;
        }
        let failed = self
            .search
            .iter()
            .filter(|t| !t.failures.is_empty())
            .min_by(|a, b| a.mpm.total_cmp(&b.mpm));
        match failed {
            Some(t) => Some((crate::cpus::Limit::of(t.harness?, t.server), Some(t))),
            None => Some((crate::cpus::Limit::SearchCap, None)),
        }
    }
}

/// How busy the harness was on the cores `threads` load threads can use
/// over `level`'s measurement window, when measured.
pub(crate) fn harness_load(
    placement: &crate::cpus::Placement,
    threads: u32,
    level: &LevelResult,
) -> Option<crate::cpus::HarnessLoad> {
    let cpu = level.harness_window_cpu?;
    let window = Duration::from_secs_f64(level.tally.window_secs.max(0.0));
    (!window.is_zero()).then(|| {
        crate::cpus::HarnessLoad::new(cpu, window, placement.harness_cores(threads as usize))
    })
}
