//! What the rest of the machine did around a measurement: the sectors the
//! whole disks read (a file set not all in the page cache is read from disk
//! during the run, by whichever server is serving, and a figure capped by
//! the disk shows it), the CPU the whole machine spent (what is left after the
//! server and the load is other work that disturbs the figures), and a
//! server's named threads (stoa's `web99-state`, the POSTs' durable commits).

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Above this share of all CPU busy with other work, the figures are
/// disturbed (`check_background` of the old `bench/lib.sh`).
pub(crate) const BUSY_LIMIT_PCT: f64 = 10.0;
/// How long one background sample looks at the machine.
const SAMPLE: Duration = Duration::from_secs(2);
/// Bytes in a `/proc/diskstats` sector (always 512, whatever the device's).
pub(crate) const SECTOR: u64 = 512;

/// Whether a `/proc/diskstats` device is a whole disk (`sda`, `vda`, `hdb`,
/// `xvda`, `nvme0n1`), not a partition, a loop device or a mapper.
fn whole_disk(name: &str) -> bool {
    let letters = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase());
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = name.strip_prefix("nvme") {
        return rest
            .split_once('n')
            .is_some_and(|(ctrl, ns)| digits(ctrl) && digits(ns));
    }
    ["xvd", "sd", "vd", "hd"]
        .iter()
        .find_map(|p| name.strip_prefix(p))
        .is_some_and(letters)
}

/// The sectors read by the whole disks in a `/proc/diskstats` text (its
/// sixth field, summed).
fn sectors_read(diskstats: &str) -> u64 {
    diskstats
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            (f.len() > 5 && whole_disk(f[2])).then(|| f[5].parse::<u64>().ok())?
        })
        .sum()
}

/// The sectors the machine's whole disks have read since boot; `None`
/// without `/proc/diskstats`.
pub(crate) fn disk_sectors_read() -> Option<u64> {
    std::fs::read_to_string("/proc/diskstats")
        .ok()
        .map(|t| sectors_read(&t))
}

/// The whole machine's CPU so far, clock ticks summed over its CPUs (the
/// first line of `/proc/stat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MachineTicks {
    /// Everything but idle and iowait.
    pub(crate) busy: u64,
    /// Everything.
    pub(crate) total: u64,
}

impl MachineTicks {
    fn parse(stat: &str) -> Option<MachineTicks> {
        let line = stat.lines().next()?.strip_prefix("cpu ")?;
        let v: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        // user nice system idle iowait irq softirq steal (guest time is
        // already in user and nice).
        let total: u64 = v.iter().take(8).sum();
        let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
        Some(MachineTicks {
            busy: total.saturating_sub(idle),
            total,
        })
    }

    /// Now; zero without `/proc/stat`.
    pub(crate) fn now() -> MachineTicks {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| MachineTicks::parse(&t))
            .unwrap_or_default()
    }

    /// The share of all CPU busy from `before` to `self`, less `ours` (ticks
    /// of the server and the load): the other work, %.
    pub(crate) fn other_pct(self, before: MachineTicks, ours: u64) -> Option<f64> {
        let total = self.total.checked_sub(before.total).filter(|&t| t > 0)?;
        let busy = self.busy.saturating_sub(before.busy).saturating_sub(ours);
        Some(100.0 * busy as f64 / total as f64)
    }
}

/// The share of all CPU busy over [`SAMPLE`], %: called while nothing of the
/// comparison runs, the machine's other work.
fn busy_pct() -> f64 {
    let before = MachineTicks::now();
    super::server::pause(SAMPLE);
    MachineTicks::now().other_pct(before, 0).unwrap_or(0.0)
}

/// The background-load checks of a comparison, for its README.
#[derive(Debug, Clone, Default)]
pub(crate) struct Background {
    notes: Vec<String>,
}

impl Background {
    /// Waits up to `max` for other work to fall to [`BUSY_LIMIT_PCT`] or less
    /// (`--wait-idle`; zero: not at all), then notes the load.
    pub(crate) fn wait_idle(&mut self, max: Duration, label: &str) {
        let start = Instant::now();
        if max.is_zero() {
            return self.check(label);
        }
        loop {
            let pct = busy_pct();
            if pct <= BUSY_LIMIT_PCT {
                return self.note(label, pct);
            }
            if start.elapsed() >= max {
                eprintln!(
                    "stoa bench peers: machine still {pct:.0} % busy after {max:?}; going ahead"
                );
                return self.note(label, pct);
            }
            eprintln!("stoa bench peers: machine {pct:.0} % busy with other work; waiting");
        }
    }

    /// Samples the machine's other work now and notes it.
    pub(crate) fn check(&mut self, label: &str) {
        self.note(label, busy_pct());
    }

    fn note(&mut self, label: &str, pct: f64) {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let load: Vec<&str> = load.split_whitespace().take(3).collect();
        let mut note = format!(
            "{label}: {pct:.0} % of all CPU busy with other work ({}s sample; load average {})",
            SAMPLE.as_secs(),
            load.join(" ")
        );
        if pct > BUSY_LIMIT_PCT {
            eprintln!("stoa bench peers: !!! WARNING: the machine is {pct:.0} % busy ({label})");
            note.push_str(" -- WARNING: figures disturbed");
        }
        self.notes.push(note);
    }

    /// The notes as a Markdown list.
    pub(crate) fn markdown(&self) -> String {
        let mut md = String::new();
        for n in &self.notes {
            let _ = writeln!(md, "- {n}");
        }
        md
    }
}

/// The CPU time (utime + stime) of the threads of `pid` named `name`
/// (`/proc/PID/task/TID/comm`), clock ticks; `None` when it has none.
pub(crate) fn thread_ticks(pid: u32, name: &str) -> Option<u64> {
    thread_ticks_in(Path::new(&format!("/proc/{pid}/task")), name)
}

fn thread_ticks_in(tasks: &Path, name: &str) -> Option<u64> {
    let mut found = None;
    for task in std::fs::read_dir(tasks).ok()?.flatten() {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(dir.join("stat")).unwrap_or_default();
        // Fields after the name: utime is the 12th, stime the 13th.
        let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<u64> = after
            .split_whitespace()
            .skip(11)
            .take(2)
            .filter_map(|w| w.parse().ok())
            .collect();
        if f.len() == 2 {
            *found.get_or_insert(0) += f[0] + f[1];
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_disks_count() {
        for d in ["sda", "vda", "hdb", "xvda", "nvme0n1", "sdaa"] {
            assert!(whole_disk(d), "{d}");
        }
        for p in [
            "sda1",
            "vda15",
            "nvme0n1p1",
            "loop0",
            "dm-0",
            "sr0",
            "md127",
        ] {
            assert!(!whole_disk(p), "{p}");
        }
    }

    #[test]
    fn sectors_read_sum_the_whole_disks() {
        let stats = "\
 254       0 vda 1000 10 8000 500 0 0 0 0 0 0 0
 254       1 vda1 900 10 7000 400 0 0 0 0 0 0 0
   7       0 loop0 5 0 40 1 0 0 0 0 0 0 0
 259       0 nvme0n1 10 0 24 1 0 0 0 0 0 0 0
";
        assert_eq!(sectors_read(stats), 8024);
        assert_eq!(sectors_read(""), 0);
    }

    #[test]
    fn other_work_is_the_busy_share_less_ours() {
        let a = MachineTicks::parse("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n")
            .expect("a cpu line");
        assert_eq!(
            a,
            MachineTicks {
                busy: 150,
                total: 1000
            }
        );
        let b = MachineTicks::parse("cpu  200 0 100 1600 100 0 0 0 0 0\n").expect("a cpu line");
        // 150 busy of 1000 over the window; 100 of them ours.
        assert_eq!(b.other_pct(a, 100), Some(5.0));
        assert_eq!(a.other_pct(a, 0), None);
        assert_eq!(MachineTicks::parse("intr 1 2"), None);
    }

    #[test]
    fn a_threads_ticks_are_found_by_its_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        for (tid, comm, u, s) in [(1, "stoa", 5, 5), (2, "web99-state", 7, 3)] {
            let t = dir.path().join(tid.to_string());
            std::fs::create_dir(&t).expect("task dir");
            std::fs::write(t.join("comm"), format!("{comm}\n")).expect("comm");
            std::fs::write(
                t.join("stat"),
                format!("{tid} ({comm}) S 1 1 1 0 -1 0 0 0 0 0 {u} {s} 0 0 20 0 1 0 100\n"),
            )
            .expect("stat");
        }
        assert_eq!(thread_ticks_in(dir.path(), "web99-state"), Some(10));
        assert_eq!(thread_ticks_in(dir.path(), "nothing"), None);
        // This test's own process has a main thread named after it.
        assert!(thread_ticks(std::process::id(), "web99-state").is_none());
    }
}
