//! CPU pinning (`--harness-cpus`, `--server-cpus`): `taskset`-style CPU lists
//! and `sched_setaffinity(2)` for the harness's threads and the built-in
//! server it starts.
//!
//! On a machine that runs the harness beside the server, pinning gives each
//! its own cores, so that a trial's result says which of the two ran out:
//! the harness's CPU share is then judged against its own cores (see
//! [`CpuList::len`]) instead of the whole machine's.

use std::fmt;
use std::str::FromStr;

use rustix::thread::{CpuSet, sched_getaffinity, sched_setaffinity};

/// A set of CPUs, written as `taskset --cpu-list` takes it: `0`, `0-3`,
/// `0,2,4-7`, `0-7:2` (every second CPU of 0–7). Displayed in the shortest such
/// form (`0-3,6`).
#[derive(Clone, PartialEq, Eq)]
pub struct CpuList {
    cpus: Vec<usize>,
}

/// Why a CPU list cannot be parsed or applied.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    /// Not a list of CPU numbers and ranges.
    #[error("bad CPU list {0:?}: expected numbers and ranges such as 0,2-3 or 0-7:2")]
    Syntax(String),
    /// A CPU number the kernel's CPU sets cannot hold.
    #[error("CPU {cpu} is out of range (at most {max})")]
    TooLarge {
        /// The CPU asked for.
        cpu: usize,
        /// The highest CPU number a set holds.
        max: usize,
    },
    /// A CPU this process may not run on (offline, or outside its cgroup's
    /// or its parent's affinity).
    #[error("CPU {cpu} is not available to this process (it may run on {allowed})")]
    NotAllowed {
        /// The CPU asked for.
        cpu: usize,
        /// The CPUs it may run on.
        allowed: CpuList,
    },
    /// The system call failed.
    #[error("cannot {what}: {source}")]
    Affinity {
        /// What was being done.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

impl CpuList {
    /// How many CPUs the list holds (at least one).
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// Never true: a parsed list holds at least one CPU.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    /// Whether the two lists share a CPU.
    pub fn overlaps(&self, other: &CpuList) -> bool {
        self.cpus
            .iter()
            .any(|c| other.cpus.binary_search(c).is_ok())
    }

    fn from_set(set: &CpuSet) -> CpuList {
        CpuList {
            cpus: (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        }
    }

    fn to_set(&self) -> CpuSet {
        let mut set = CpuSet::new();
        for &c in &self.cpus {
            set.set(c);
        }
        set
    }

    /// The CPUs this thread may run on now.
    pub fn current() -> Result<CpuList, CpuError> {
        sched_getaffinity(None)
            .map(|s| CpuList::from_set(&s))
            .map_err(|e| affinity_error("read this thread's CPU affinity", e))
    }

    /// Fails unless every CPU of the list is one this process may run on.
    pub fn check_available(&self) -> Result<(), CpuError> {
        let allowed = CpuList::current()?;
        match self
            .cpus
            .iter()
            .find(|c| allowed.cpus.binary_search(c).is_err())
        {
            Some(&cpu) => Err(CpuError::NotAllowed { cpu, allowed }),
            None => Ok(()),
        }
    }
}

fn affinity_error(what: &str, e: rustix::io::Errno) -> CpuError {
    CpuError::Affinity {
        what: what.to_owned(),
        source: e.into(),
    }
}

impl FromStr for CpuList {
    type Err = CpuError;

    fn from_str(s: &str) -> Result<CpuList, CpuError> {
        let syntax = || CpuError::Syntax(s.to_owned());
        let number = |t: &str| -> Result<usize, CpuError> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax());
            }
            let n: usize = t.parse().map_err(|_| syntax())?;
            let max = CpuSet::MAX_CPU - 1;
            if n > max {
                return Err(CpuError::TooLarge { cpu: n, max });
            }
            Ok(n)
        };
        let mut cpus = Vec::new();
        for item in s.trim().split(',') {
            let (range, stride) = match item.split_once(':') {
                Some((r, st)) => (r, number(st)?),
                None => (item, 1),
            };
            let (first, last) = match range.split_once('-') {
                Some((a, b)) => (number(a)?, number(b)?),
                None if stride == 1 => (number(range)?, number(range)?),
                None => return Err(syntax()),
            };
            if first > last || stride == 0 {
                return Err(syntax());
            }
            cpus.extend((first..=last).step_by(stride));
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList { cpus })
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut i = 0;
        let mut first = true;
        while i < self.cpus.len() {
            let start = self.cpus[i];
            let mut end = start;
            while self.cpus.get(i + 1) == Some(&(end + 1)) {
                end += 1;
                i += 1;
            }
            let sep = if first { "" } else { "," };
            first = false;
            if end == start {
                write!(f, "{sep}{start}")?;
            } else {
                write!(f, "{sep}{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl fmt::Debug for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CpuList({self})")
    }
}

/// Pins every thread of this process to `cpus`; threads started later inherit
/// it from the thread that starts them.
pub fn pin_process(cpus: &CpuList) -> Result<(), CpuError> {
    cpus.check_available()?;
    let set = cpus.to_set();
    let tasks = std::fs::read_dir("/proc/self/task").map_err(|e| CpuError::Affinity {
        what: "list this process's threads in /proc/self/task".into(),
        source: e,
    })?;
    for task in tasks.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
        else {
            continue;
        };
        match sched_setaffinity(Some(tid), &set) {
            // A thread that ended since the listing.
            Err(rustix::io::Errno::SRCH) => {}
            other => {
                other.map_err(|e| affinity_error(&format!("pin thread {tid} to {cpus}"), e))?
            }
        }
    }
    Ok(())
}

/// A run's pinning, before it starts anything: this process onto `harness`
/// (when given), after checking that the `server`'s CPUs exist for it; says on
/// standard error when the two share CPUs.
pub(crate) fn pin_harness(
    harness: Option<&CpuList>,
    server: Option<&CpuList>,
) -> anyhow::Result<()> {
    use anyhow::Context as _;
    if let Some(server) = server {
        server.check_available().context("--server-cpus")?;
    }
    if let Some(harness) = harness {
        pin_process(harness).context("--harness-cpus")?;
        eprintln!("stoa bench: the harness runs on CPU(s) {harness}");
    }
    if let (Some(h), Some(s)) = (harness, server)
        && h.overlaps(s)
    {
        eprintln!("stoa bench: note: the harness's CPUs ({h}) and the server's ({s}) overlap");
    }
    Ok(())
}

/// Runs `start` (which starts a process) with this thread pinned to `cpus`, so
/// that the new process and every thread it makes inherit them, then gives the
/// thread its own CPUs back. `None`: runs `start` as it is.
pub fn start_pinned<T>(cpus: Option<&CpuList>, start: impl FnOnce() -> T) -> Result<T, CpuError> {
    let Some(cpus) = cpus else {
        return Ok(start());
    };
    // Not checked against this thread's CPUs: a pinned harness starts a
    // server on others (`pin_harness` checked them before pinning).
    let own = sched_getaffinity(None)
        .map_err(|e| affinity_error("read this thread's CPU affinity", e))?;
    sched_setaffinity(None, &cpus.to_set())
        .map_err(|e| affinity_error(&format!("pin this thread to {cpus}"), e))?;
    let started = start();
    sched_setaffinity(None, &own)
        .map_err(|e| affinity_error("restore this thread's CPU affinity", e))?;
    Ok(started)
}

/// The machine's online CPUs (`/sys/devices/system/cpu/online`), whatever
/// this process is pinned to; else the CPUs this process may use.
pub(crate) fn machine_cores() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| s.trim().parse::<CpuList>().ok())
        .map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            |l| l.len(),
        )
}

/// The CPUs a process may run on, as `/proc/PID/status` lists them.
pub fn of_process(pid: u32) -> Option<CpuList> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    line.trim().parse().ok()
}

/// The share of its cores above which the harness, not the server, may have
/// set a trial's result (issue 16: a trial whose harness used more is
/// harness-bound, never the server's score).
pub const HARNESS_BOUND_SHARE: f64 = 0.70;

/// Where a run's harness and server ran: the CPUs each may use, as the kernel
/// reported them once the run had started (after `--harness-cpus` and
/// `--server-cpus`, or a `taskset` around either).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The machine's online CPUs.
    pub machine: usize,
    /// The harness's CPUs; `None`: every CPU of the machine.
    pub harness: Option<CpuList>,
    /// The server's CPUs (its first process's); `None`: every CPU of the
    /// machine, or not known (no server process on this machine).
    pub server: Option<CpuList>,
    /// Whether a server process on this machine was looked at.
    pub server_known: bool,
}

impl Placement {
    /// This process's CPUs and those of `server_pids`' first process, read now.
    pub fn measure(server_pids: &[u32]) -> Placement {
        let machine = machine_cores();
        let narrower = |l: Option<CpuList>| l.filter(|l| l.len() < machine);
        let server = server_pids.first().and_then(|&p| of_process(p));
        Placement {
            machine,
            harness: narrower(CpuList::current().ok()),
            server_known: server.is_some(),
            server: narrower(server),
        }
    }

    /// The cores `threads` load threads of the harness can keep busy: no more
    /// than its CPUs.
    pub fn harness_cores(&self, threads: usize) -> usize {
        let cpus = self.harness.as_ref().map_or(self.machine, CpuList::len);
        threads.clamp(1, cpus.max(1))
    }

    /// The harness's CPUs in words: "CPU 1 (pinned)" or "any of the 2 cores".
    pub fn harness_words(&self) -> String {
        self.words(self.harness.as_ref(), true)
    }

    /// The server's CPUs in words; "not known" without a server process here.
    pub fn server_words(&self) -> String {
        self.words(self.server.as_ref(), self.server_known)
    }

    fn words(&self, cpus: Option<&CpuList>, known: bool) -> String {
        match cpus {
            Some(l) if l.len() == 1 => format!("CPU {l} (pinned)"),
            Some(l) => format!("CPUs {l} (pinned)"),
            None if known => format!("any of the machine's {} CPUs", self.machine),
            None => "not known (no server process on this machine)".to_owned(),
        }
    }

    /// Whether the harness and the server may share a CPU (either unpinned,
    /// or lists that overlap); `None` when the server's CPUs are not known.
    pub fn shared(&self) -> Option<bool> {
        if !self.server_known {
            return None;
        }
        Some(match (&self.harness, &self.server) {
            (Some(h), Some(s)) => h.overlaps(s),
            _ => true,
        })
    }
}

/// How busy the harness was on the cores it could use over some wall time.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct HarnessLoad {
    /// The cores it could keep busy ([`Placement::harness_cores`]).
    pub cores: usize,
    /// Its CPU time over the wall time, divided by `cores` (1.0: every core
    /// busy all the time).
    pub share: f64,
}

impl HarnessLoad {
    /// `cpu` spent over `wall` on `cores` cores.
    pub fn new(cpu: std::time::Duration, wall: std::time::Duration, cores: usize) -> HarnessLoad {
        let (cores, share) = share_of(cpu, wall, cores);
        HarnessLoad { cores, share }
    }

    /// Above [`HARNESS_BOUND_SHARE`]: the harness may have set the result.
    pub fn bound(&self) -> bool {
        self.share > HARNESS_BOUND_SHARE
    }

    /// "48.0 % of its 1 core: not harness-bound (≤ 70 %)", or "HARNESS-BOUND".
    pub fn words(&self) -> String {
        let of = of_cores(self.share, self.cores);
        if self.bound() {
            format!(
                "{of}: HARNESS-BOUND (over {:.0} %): the harness may have set this result, not the server",
                HARNESS_BOUND_SHARE * 100.0
            )
        } else {
            format!(
                "{of}: not harness-bound (at most {:.0} %)",
                HARNESS_BOUND_SHARE * 100.0
            )
        }
    }
}

/// `cpu` over `wall` on `cores` cores (at least one): the cores and the share.
fn share_of(cpu: std::time::Duration, wall: std::time::Duration, cores: usize) -> (usize, f64) {
    let cores = cores.max(1);
    let share = cpu.as_secs_f64() / wall.as_secs_f64().max(1e-9) / cores as f64;
    (cores, share)
}

/// "48.0 % of its 1 core".
fn of_cores(share: f64, cores: usize) -> String {
    let unit = if cores == 1 { "core" } else { "cores" };
    format!("{:.1} % of its {cores} {unit}", share * 100.0)
}

/// The share of its cores at or above which the server under test had no CPU
/// left: a trial that failed there failed at the server's own limit.
pub const SERVER_SATURATED_SHARE: f64 = 0.90;

impl Placement {
    /// The cores the server could keep busy: its CPUs, or every CPU of the
    /// machine when it is not pinned (an unpinned one-worker server can use
    /// only one of them, so its share reads low: pin it to judge it).
    pub fn server_cores(&self) -> usize {
        self.server
            .as_ref()
            .map_or(self.machine, CpuList::len)
            .max(1)
    }
}

/// How busy the server under test was on its cores (`--server-pid`'s
/// processes, or the built-in server): over a wall time, or at a rate of
/// operations (a web iteration's run phase).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ServerLoad {
    /// The cores it could use ([`Placement::server_cores`]).
    pub cores: usize,
    /// Its CPU time over the wall time, divided by `cores`.
    pub share: f64,
}

impl ServerLoad {
    /// `cpu` spent over `wall` on `cores` cores.
    pub fn new(cpu: std::time::Duration, wall: std::time::Duration, cores: usize) -> ServerLoad {
        let (cores, share) = share_of(cpu, wall, cores);
        ServerLoad { cores, share }
    }

    /// `cpu_per_op` seconds of CPU for each of `ops_per_sec` operations a
    /// second, on `cores` cores.
    pub fn at_rate(cpu_per_op: f64, ops_per_sec: f64, cores: usize) -> ServerLoad {
        let cores = cores.max(1);
        ServerLoad {
            cores,
            share: cpu_per_op * ops_per_sec / cores as f64,
        }
    }

    /// At or above [`SERVER_SATURATED_SHARE`]: no CPU left for more work.
    pub fn saturated(&self) -> bool {
        self.share >= SERVER_SATURATED_SHARE
    }

    /// "97.1 % of its 1 core".
    pub fn words(&self) -> String {
        of_cores(self.share, self.cores)
    }
}

/// What ended a `--find-max` search, judged at its lowest failing trial (the
/// one just above the score): which side had run out of CPU there. A score is
/// the server's only when the server, not the harness, was the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// The server's cores were saturated and the harness's were not: the
    /// score is the server's own limit.
    Server,
    /// The harness passed [`HARNESS_BOUND_SHARE`] and the server had CPU left:
    /// the score is a lower bound for the server.
    Harness,
    /// Both sides were out of CPU: a lower bound for the server.
    Both,
    /// Neither was out of CPU: the server failed on response times or rates
    /// with CPU to spare (its design, the disk, the network), or the harness
    /// paced badly below its bound; the score is the system's, not a CPU limit.
    Neither,
    /// The harness had CPU left; the server's CPU was not measured (no
    /// `--server-pid`): the score is taken as the server's, unconfirmed.
    ServerNotMeasured,
    /// No trial failed: the search stopped at its own cap (`--find-max-limit`,
    /// the mail store's capacity, its trial count), so the score is a lower
    /// bound set by the search itself.
    SearchCap,
}

impl Limit {
    /// The verdict on a failing trial whose harness ran at `harness` and
    /// server at `server` (`None`: not measured). A harness past its 70 %
    /// bound but short of saturation beside a saturated server leaves the
    /// limit with the server: the server could not have done more.
    pub fn of(harness: HarnessLoad, server: Option<ServerLoad>) -> Limit {
        let harness_saturated = harness.share >= SERVER_SATURATED_SHARE;
        match server {
            Some(s) if s.saturated() && harness_saturated => Limit::Both,
            Some(s) if s.saturated() => Limit::Server,
            _ if harness.bound() => Limit::Harness,
            Some(_) => Limit::Neither,
            None => Limit::ServerNotMeasured,
        }
    }

    /// Its name in the JSON reports (a contract for the scripts).
    pub fn key(self) -> &'static str {
        match self {
            Limit::Server => "server",
            Limit::Harness => "harness",
            Limit::Both => "both",
            Limit::Neither => "neither",
            Limit::ServerNotMeasured => "server-not-measured",
            Limit::SearchCap => "search-cap",
        }
    }

    /// Whether the score is the server's own (a CPU limit of the server, or
    /// a failure with CPU to spare on both sides), not a lower bound.
    pub fn is_servers_score(self) -> bool {
        matches!(
            self,
            Limit::Server | Limit::Neither | Limit::ServerNotMeasured
        )
    }

    /// The verdict in words, with the failing trial's shares.
    pub fn words(self, harness: Option<HarnessLoad>, server: Option<ServerLoad>) -> String {
        let h = harness.map_or_else(String::new, |h| {
            format!("the harness at {:.1} % of its cores", h.share * 100.0)
        });
        let s = server.map_or_else(
            || "the server's CPU not measured".to_owned(),
            |s| format!("the server at {}", s.words()),
        );
        match self {
            Limit::Server => format!(
                "the server's limit: at the first failing trial {s}, {h} (the server had no CPU left)"
            ),
            Limit::Harness => format!(
                "the harness's limit: at the first failing trial {h}, {s}; a lower bound for the server, not its score"
            ),
            Limit::Both => format!(
                "both sides out of CPU at the first failing trial ({s}, {h}); a lower bound for the server, not its score"
            ),
            Limit::Neither => format!(
                "no CPU limit: at the first failing trial {s}, {h}; the server missed the response-time or rate rules with CPU to spare"
            ),
            Limit::ServerNotMeasured => format!(
                "the server's limit, unconfirmed: at the first failing trial {h}, {s} (--server-pid PID to measure it)"
            ),
            Limit::SearchCap => {
                "the search's own cap: no trial failed, so the score is a lower bound set by the search (its limit, the store's capacity or its trial count)".to_owned()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &str) -> CpuList {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn parses_taskset_lists_and_prints_them_short() {
        assert_eq!(list("0").to_string(), "0");
        assert_eq!(list("0-3").to_string(), "0-3");
        assert_eq!(list("3,0,1,2").to_string(), "0-3");
        assert_eq!(list("0,2,4-7").to_string(), "0,2,4-7");
        assert_eq!(list("0-7:2").to_string(), "0,2,4,6");
        assert_eq!(list("1,1,1").len(), 1);
        assert_eq!(list(" 1-2 ").to_string(), "1-2");
    }

    #[test]
    fn refuses_what_taskset_refuses() {
        for bad in [
            "", ",", "a", "1-", "-1", "3-1", "0-4:0", "1:2", "1 ,2", "+1", "0x1",
        ] {
            assert!(
                matches!(bad.parse::<CpuList>(), Err(CpuError::Syntax(_))),
                "{bad:?} parsed"
            );
        }
        assert!(matches!(
            "99999".parse::<CpuList>(),
            Err(CpuError::TooLarge { cpu: 99_999, .. })
        ));
    }

    #[test]
    fn the_machine_has_at_least_the_cpus_this_process_may_use() {
        assert!(machine_cores() >= CpuList::current().expect("affinity").len());
    }

    #[test]
    fn overlap() {
        assert!(list("0-1").overlaps(&list("1")));
        assert!(!list("0").overlaps(&list("1-3")));
    }

    #[test]
    fn a_cpu_this_process_may_not_use_is_refused() {
        let allowed = CpuList::current().expect("affinity");
        let last = CpuSet::MAX_CPU - 1;
        if allowed.cpus.contains(&last) {
            return;
        }
        let err = list(&last.to_string())
            .check_available()
            .expect_err("an unavailable CPU");
        assert!(err.to_string().contains("not available"), "{err}");
    }

    #[test]
    fn a_started_process_inherits_the_cpus_and_the_thread_gets_its_own_back() {
        let own = CpuList::current().expect("affinity");
        let first = list(&own.cpus[0].to_string());
        let mut child = start_pinned(Some(&first), || {
            std::process::Command::new("cat")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::null())
                .spawn()
        })
        .expect("pinned")
        .expect("cat starts");
        let seen = of_process(child.id());
        drop(child.stdin.take());
        let _ = child.wait();
        assert_eq!(seen, Some(first));
        assert_eq!(CpuList::current().expect("affinity"), own);
    }

    #[test]
    fn the_harness_is_bound_above_seventy_percent_of_its_own_cores() {
        use std::time::Duration;
        let s = Duration::from_secs;
        // One thread on a pinned core, 80 s of CPU in 100 s.
        let l = HarnessLoad::new(s(80), s(100), 1);
        assert!(l.bound());
        assert!(l.words().contains("HARNESS-BOUND"), "{}", l.words());
        // The same CPU over two cores is 40 % of each.
        let l = HarnessLoad::new(s(80), s(100), 2);
        assert!(!l.bound());
        assert!((l.share - 0.4).abs() < 1e-9);
        assert!(!HarnessLoad::new(s(70), s(100), 1).bound());
    }

    #[test]
    fn harness_cores_are_its_threads_but_no_more_than_its_cpus() {
        let pinned = Placement {
            machine: 8,
            harness: Some(list("2-3")),
            server: Some(list("0")),
            server_known: true,
        };
        assert_eq!(pinned.harness_cores(1), 1);
        assert_eq!(pinned.harness_cores(4), 2);
        assert_eq!(pinned.harness_words(), "CPUs 2-3 (pinned)");
        assert_eq!(pinned.server_words(), "CPU 0 (pinned)");
        assert_eq!(pinned.shared(), Some(false));
        let free = Placement {
            machine: 2,
            harness: None,
            server: None,
            server_known: false,
        };
        assert_eq!(free.harness_cores(4), 2);
        assert_eq!(free.harness_cores(0), 1);
        assert_eq!(free.harness_words(), "any of the machine's 2 CPUs");
        assert!(free.server_words().starts_with("not known"));
        assert_eq!(free.shared(), None);
    }

    #[test]
    fn a_pinned_child_is_seen_pinned() {
        let me = CpuList::current().expect("affinity");
        let Some(&first) = me.cpus.first() else {
            return;
        };
        let one = CpuList { cpus: vec![first] };
        let mut child = start_pinned(Some(&one), || {
            std::process::Command::new("sleep").arg("5").spawn()
        })
        .expect("pinned")
        .expect("spawn sleep");
        let p = Placement::measure(&[child.id()]);
        let _ = child.kill();
        let _ = child.wait();
        assert!(p.server_known);
        if p.machine > 1 {
            assert_eq!(p.server, Some(one));
        }
    }

    #[test]
    fn the_limit_is_the_side_that_ran_out_of_cpu() {
        let h = |share| HarnessLoad { cores: 1, share };
        let s = |share| Some(ServerLoad { cores: 1, share });
        assert_eq!(Limit::of(h(0.40), s(0.97)), Limit::Server);
        // Past the harness's 70 % bound but not saturated, beside a saturated
        // server (nginx over HTTPS on 12-05: harness 79 %, server 97 %).
        assert_eq!(Limit::of(h(0.79), s(0.97)), Limit::Server);
        assert_eq!(Limit::of(h(0.95), s(0.95)), Limit::Both);
        assert_eq!(Limit::of(h(0.75), s(0.60)), Limit::Harness);
        assert_eq!(Limit::of(h(0.75), None), Limit::Harness);
        assert_eq!(Limit::of(h(0.50), s(0.60)), Limit::Neither);
        assert_eq!(Limit::of(h(0.50), None), Limit::ServerNotMeasured);
        assert!(Limit::Server.is_servers_score());
        assert!(!Limit::Harness.is_servers_score());
        assert!(!Limit::Both.is_servers_score());
        assert!(!Limit::SearchCap.is_servers_score());
        let w = Limit::Server.words(Some(h(0.79)), s(0.971));
        assert!(
            w.contains("97.1 % of its 1 core") && w.contains("79.0 %"),
            "{w}"
        );
    }

    #[test]
    fn server_share_is_of_its_own_cores() {
        let l = ServerLoad::new(
            std::time::Duration::from_secs(3),
            std::time::Duration::from_secs(2),
            2,
        );
        assert!((l.share - 0.75).abs() < 1e-9);
        assert!(!l.saturated());
        let full = ServerLoad::new(
            std::time::Duration::from_millis(950),
            std::time::Duration::from_secs(1),
            1,
        );
        assert!(full.saturated());
        // nginx over HTTPS on 12-05: 4,367 ops/s at 221 µs each.
        let rate = ServerLoad::at_rate(221e-6, 4367.0, 1);
        assert!((rate.share - 0.965).abs() < 1e-3 && rate.saturated());
    }
}
