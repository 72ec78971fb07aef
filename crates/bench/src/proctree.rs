//! The CPU time of a server's process tree over a window, by program name:
//! where a system of many processes (Postfix's `smtpd`, `cleanup`, `qmgr`;
//! Dovecot's `pop3`, `auth`, `pop3-login`) spends it.
//!
//! The tree is the given processes (`--server-pid`) and every descendant,
//! found by scanning `/proc/*/stat` for parent links. Two figures come out:
//!
//! - **The tree's total**, exact: the sum over the tree of each process's own
//!   time (utime + stime, all threads) and its reaped children's (cutime +
//!   cstime), at the window's end minus at its start. A process that ends
//!   inside the window moves its whole time into its parent's reaped time
//!   when the parent waits for it (Postfix's and Dovecot's masters do), so
//!   nothing is lost or counted twice.
//! - **By program name** (`/proc/PID/comm`): each process's own time, sampled
//!   every second; a process born inside the window counts from zero. A
//!   process that ends between two samples loses what it spent after the last
//!   one (and one that lives less than a second may not be seen at all): that
//!   remainder is reported as *not attributed*, the total minus the named rows.
//!
//! A process is keyed by its pid and start time, so a reused pid is another
//! process. Processes that leave the tree (a daemon that double-forks to
//! init) are not followed.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

/// Most processes tracked in one window; a tree larger than this (a fork
/// bomb, a misnamed pid) keeps the first ones seen.
const MAX_TRACKED: usize = 100_000;

/// What `/proc/PID/stat` says about one process.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stat {
    pid: u32,
    ppid: u32,
    /// The program name, as `/proc/PID/stat` gives it (at most 15 bytes).
    comm: String,
    /// utime + stime, clock ticks.
    own: u64,
    /// cutime + cstime: reaped children, clock ticks.
    reaped: u64,
    /// stime + cstime: the kernel's part of `own` + `reaped`, clock ticks.
    system: u64,
    /// Start time after boot, clock ticks: with the pid, the process's key.
    start: u64,
}

/// Parses one `/proc/PID/stat` line.
fn parse_stat(line: &str) -> Option<Stat> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let pid = line[..open].trim().parse().ok()?;
    let comm = line.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = line.get(close + 1..)?.split_whitespace().collect();
    // Fields after the name, from 0: state, ppid (1), …, utime (11), stime
    // (12), cutime (13), cstime (14), …, starttime (19).
    let num = |i: usize| -> Option<u64> { fields.get(i)?.parse().ok() };
    Some(Stat {
        pid,
        ppid: fields.get(1)?.parse().ok()?,
        comm,
        own: num(11)? + num(12)?,
        // cutime and cstime are signed in the kernel's format; never negative
        // in practice.
        reaped: num(13).unwrap_or(0) + num(14).unwrap_or(0),
        system: num(12)? + num(14).unwrap_or(0),
        start: num(19)?,
    })
}

/// A process's own CPU time so far (utime + stime, all threads), clock ticks;
/// `None` when it does not run.
pub(crate) fn own_ticks(pid: u32) -> Option<u64> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(parse_stat(&line)?.own)
}

/// A process's reaped children's CPU time so far (cutime + cstime), clock
/// ticks: what a harness that waits for its load generator was charged for
/// it; `None` when it does not run.
pub(crate) fn reaped_ticks(pid: u32) -> Option<u64> {
    let line = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(parse_stat(&line)?.reaped)
}

/// The CPU time of a process tree so far, clock ticks: each process's own and
/// reaped time (so a child that ended and was waited for still counts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TreeTicks {
    /// User + system.
    pub(crate) total: u64,
    /// System (kernel) time alone.
    pub(crate) system: u64,
}

impl TreeTicks {
    /// `roots` and their descendants now; zero when none runs.
    pub(crate) fn of(roots: &[u32]) -> TreeTicks {
        tree(all_processes(), roots)
            .iter()
            .fold(TreeTicks::default(), |t, s| TreeTicks {
                total: t.total + s.own + s.reaped,
                system: t.system + s.system,
            })
    }

    /// What was spent from `before` to `self`.
    pub(crate) fn since(self, before: TreeTicks) -> TreeTicks {
        TreeTicks {
            total: self.total.saturating_sub(before.total),
            system: self.system.saturating_sub(before.system),
        }
    }
}

/// The descendants of `root` now (not `root` itself), deepest last.
pub(crate) fn descendants(root: u32) -> Vec<u32> {
    tree(all_processes(), &[root])
        .into_iter()
        .map(|s| s.pid)
        .filter(|&p| p != root)
        .collect()
}

/// Clock ticks (`/proc`'s unit) as a duration.
pub(crate) fn ticks_to_duration(ticks: u64) -> Duration {
    let per_sec = rustix::param::clock_ticks_per_second().max(1);
    Duration::from_micros(ticks * 1_000_000 / per_sec)
}

/// Every process of this machine now (those that end while being read are
/// skipped).
fn all_processes() -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|line| parse_stat(&line))
        .collect()
}

/// The processes of `all` that are `roots` or descend from them.
fn tree(all: Vec<Stat>, roots: &[u32]) -> Vec<Stat> {
    let mut children: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut index: HashMap<u32, usize> = HashMap::new();
    for (i, s) in all.iter().enumerate() {
        children.entry(s.ppid).or_default().push(i);
        index.insert(s.pid, i);
    }
    let mut keep = vec![false; all.len()];
    let mut stack: Vec<usize> = roots.iter().filter_map(|p| index.get(p).copied()).collect();
    while let Some(i) = stack.pop() {
        if std::mem::replace(&mut keep[i], true) {
            continue;
        }
        if let Some(c) = children.get(&all[i].pid) {
            stack.extend(c.iter().copied().filter(|&c| !keep[c]));
        }
    }
    all.into_iter()
        .zip(keep)
        .filter_map(|(s, k)| k.then_some(s))
        .collect()
}

/// One program's share of the tree's CPU time over a window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Program {
    /// The program name (`comm`).
    pub(crate) name: String,
    /// Processes of that name seen in the window.
    pub(crate) processes: u32,
    /// Their own CPU time in the window.
    pub(crate) cpu: Duration,
}

/// The tree's CPU time over a window (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct TreeCpu {
    /// Everything the tree spent, exact.
    pub(crate) total: Duration,
    /// By program name, largest first.
    pub(crate) programs: Vec<Program>,
    /// The total minus the programs' rows: processes that ended between samples.
    pub(crate) not_attributed: Duration,
}

/// A window being sampled.
#[derive(Debug)]
pub(crate) struct Sampler {
    roots: Vec<u32>,
    /// The tree's own + reaped time at the start.
    total_before: u64,
    /// Per process (pid, start): name, own time at the start (0 for one born
    /// later), own time at the last sample.
    seen: HashMap<(u32, u64), (String, u64, u64)>,
}

impl Sampler {
    /// Starts a window over `roots` and their descendants; `None` when none of
    /// them runs.
    pub(crate) fn begin(roots: &[u32]) -> Option<Sampler> {
        let now = tree(all_processes(), roots);
        if now.is_empty() {
            return None;
        }
        let total_before = now.iter().map(|s| s.own + s.reaped).sum();
        let seen = now
            .into_iter()
            .take(MAX_TRACKED)
            .map(|s| ((s.pid, s.start), (s.comm, s.own, s.own)))
            .collect();
        Some(Sampler {
            roots: roots.to_vec(),
            total_before,
            seen,
        })
    }

    /// Reads the tree again: new processes join from zero; returns the
    /// tree's own + reaped time now.
    pub(crate) fn sample(&mut self) -> u64 {
        let now = tree(all_processes(), &self.roots);
        let total = now.iter().map(|s| s.own + s.reaped).sum();
        for s in now {
            let room = self.seen.len() < MAX_TRACKED;
            match self.seen.get_mut(&(s.pid, s.start)) {
                Some(entry) => entry.2 = s.own,
                None if room => {
                    self.seen.insert((s.pid, s.start), (s.comm, 0, s.own));
                }
                None => {}
            }
        }
        total
    }

    /// Ends the window with one last sample.
    pub(crate) fn end(mut self) -> TreeCpu {
        let total_after = self.sample();
        let d = ticks_to_duration;
        let mut by_name: HashMap<String, (u32, u64)> = HashMap::new();
        for (name, before, last) in self.seen.values() {
            let entry = by_name.entry(name.clone()).or_default();
            entry.0 += 1;
            entry.1 += last.saturating_sub(*before);
        }
        let attributed: u64 = by_name.values().map(|&(_, t)| t).sum();
        let total = total_after.saturating_sub(self.total_before);
        let mut programs: Vec<Program> = by_name
            .into_iter()
            .map(|(name, (processes, t))| Program {
                name,
                processes,
                cpu: d(t),
            })
            .collect();
        programs.sort_by(|a, b| b.cpu.cmp(&a.cpu).then_with(|| a.name.cmp(&b.name)));
        TreeCpu {
            total: d(total),
            programs,
            not_attributed: d(total.saturating_sub(attributed)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_parses_with_spaces_and_parens_in_the_name() {
        let line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 30 12 5 7 20 0 1 0 \
                    9000 1000 100 18446744073709551615";
        let s = parse_stat(line).expect("parses");
        assert_eq!(
            s,
            Stat {
                pid: 4242,
                ppid: 1,
                comm: "a (b) c".into(),
                own: 42,
                reaped: 12,
                system: 19,
                start: 9000,
            }
        );
        assert_eq!(parse_stat("12 (x) S"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn the_tree_is_the_roots_and_their_descendants() {
        let p = |pid, ppid| Stat {
            pid,
            ppid,
            comm: format!("p{pid}"),
            own: 0,
            reaped: 0,
            system: 0,
            start: 0,
        };
        let all = vec![p(1, 0), p(10, 1), p(11, 10), p(12, 11), p(20, 1), p(21, 20)];
        let mut pids: Vec<u32> = tree(all, &[10]).iter().map(|s| s.pid).collect();
        pids.sort_unstable();
        assert_eq!(pids, [10, 11, 12]);
    }

    /// This test process and a child that burns CPU and ends inside the
    /// window: the total holds the child's time (reaped by us), and the
    /// child's name holds what the samples saw of it.
    #[test]
    fn a_child_that_ends_in_the_window_is_counted_in_the_total() {
        let me = std::process::id();
        let mut sampler = Sampler::begin(&[me]).expect("this process runs");
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
            .spawn()
            .expect("sh");
        // Sample while it runs (each scan of /proc takes a few ms), then reap
        // it (its time moves to our cutime).
        while child.try_wait().expect("wait").is_none() {
            sampler.sample();
        }
        let cpu = sampler.end();
        let sh: Duration = cpu
            .programs
            .iter()
            .filter(|p| p.name == "sh")
            .map(|p| p.cpu)
            .sum();
        let named: Duration = cpu.programs.iter().map(|p| p.cpu).sum();
        assert!(
            cpu.total >= Duration::from_millis(50),
            "the child's loop is in the total: {cpu:?}"
        );
        assert!(cpu.total >= named, "{cpu:?}");
        assert!(
            sh + cpu.not_attributed >= Duration::from_millis(50),
            "{cpu:?}"
        );
    }
}
