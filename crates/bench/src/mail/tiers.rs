//! `--tier`: a system under test of several processes on this machine (the
//! published Sun page's POPSTORE, SMTPMTA, LDAP and MMP servers), grouped by
//! role, and what each tier cost and handled.
//!
//! For each level the harness samples every tier's CPU time (utime + stime of
//! its processes from `/proc/PID/stat`, all threads, reaped children not
//! included) at the start and the end of the measurement window, and counts the
//! lines a `--tier-count` names in a tier's log over the same window. At the end
//! of the run it reads each process's peak resident memory (`VmHWM` from
//! `/proc/PID/status`). What a tier handled comes from where it is known: the
//! harness's own tally for the tier that answers `--smtp` or `--pop3`
//! (`ROLE=PIDS@smtp`, `@pop3`), the tier's log for the others.
//!
//! It does not find processes, read a server's configuration or parse its log
//! beyond "this line contains that text": the caller names the processes, the
//! files and the text.

use std::fs::File;
use std::io::{BufRead, BufReader, Read as _, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::bail;
use serde::Serialize;
use stoa_mailgen::tally::LevelTally;

use crate::cpu_of;

/// Most tiers a run takes: a system of a few roles (the Sun page has five
/// servers), with room to split them finer.
const MAX_TIERS: usize = 32;
/// Most processes in one tier (an nginx master and its workers, say).
const MAX_PIDS: usize = 64;
/// Most `--tier-count`s and `--tier-note`s in all.
const MAX_EXTRAS: usize = 64;
/// Longest role, label, text or note, in bytes: they are printed in tables.
const MAX_TEXT: usize = 200;
/// Longest log line read whole; the rest of a longer line is skipped (a match
/// in its first part still counts). Servers' log lines are far shorter.
const MAX_LINE: u64 = 16 * 1024;

/// Which of the harness's addresses a tier answers: its row then shows the
/// sessions the harness made there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Front {
    /// The `--smtp` address: SMTP sessions and messages.
    Smtp,
    /// The `--pop3` address: POP sessions.
    Pop3,
}

/// `--tier ROLE=PID[+PID…][@smtp|@pop3]`: a role and its processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierSpec {
    /// The role as printed ("POP store 1").
    pub role: String,
    /// Its processes.
    pub pids: Vec<u32>,
    /// The harness address it answers, if any.
    pub front: Option<Front>,
}

/// `--tier-note ROLE=TEXT`: a line of description for a tier's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierNote {
    /// The tier.
    pub role: String,
    /// The text.
    pub text: String,
}

/// `--tier-count ROLE=LABEL:TEXT:FILE`: count the lines of FILE that contain
/// TEXT, written during each measurement window, as LABEL of the tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TierCount {
    /// The tier.
    pub role: String,
    /// What a line counts as ("POP logins").
    pub label: String,
    /// The text a counted line contains.
    pub needle: String,
    /// The log file.
    pub file: PathBuf,
}

/// Splits `ROLE=REST` and checks the role.
fn role_and_rest<'a>(s: &'a str, form: &str) -> Result<(&'a str, &'a str), String> {
    let (role, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected {form}"))?;
    let role = role.trim();
    if role.is_empty() {
        return Err(format!("{s:?}: the role is empty (expected {form})"));
    }
    check_text(role, "the role")?;
    Ok((role, rest))
}

/// A printable text of at most [`MAX_TEXT`] bytes.
fn check_text(text: &str, what: &str) -> Result<(), String> {
    if text.len() > MAX_TEXT {
        return Err(format!("{what} is longer than {MAX_TEXT} bytes"));
    }
    if text.chars().any(char::is_control) {
        return Err(format!("{what} {text:?} holds a control character"));
    }
    Ok(())
}

impl FromStr for TierSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<TierSpec, String> {
        const FORM: &str = "ROLE=PID[+PID…][@smtp|@pop3]";
        let (role, rest) = role_and_rest(s, FORM)?;
        let (pids, front) = match rest.rsplit_once('@') {
            Some((pids, "smtp")) => (pids, Some(Front::Smtp)),
            Some((pids, "pop3")) => (pids, Some(Front::Pop3)),
            Some((_, other)) => {
                return Err(format!("{s:?}: @{other}: expected @smtp or @pop3"));
            }
            None => (rest, None),
        };
        let pids: Vec<u32> = pids
            .split('+')
            .map(|p| match p.trim().parse::<u32>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!(
                    "{s:?}: {p:?} is not a process id (expected {FORM})"
                )),
            })
            .collect::<Result<_, _>>()?;
        if pids.len() > MAX_PIDS {
            return Err(format!("{s:?}: more than {MAX_PIDS} processes"));
        }
        Ok(TierSpec {
            role: role.to_owned(),
            pids,
            front,
        })
    }
}

impl FromStr for TierNote {
    type Err = String;

    fn from_str(s: &str) -> Result<TierNote, String> {
        let (role, text) = role_and_rest(s, "ROLE=TEXT")?;
        check_text(text, "the note")?;
        Ok(TierNote {
            role: role.to_owned(),
            text: text.trim().to_owned(),
        })
    }
}

impl FromStr for TierCount {
    type Err = String;

    fn from_str(s: &str) -> Result<TierCount, String> {
        const FORM: &str = "ROLE=LABEL:TEXT:FILE";
        let (role, rest) = role_and_rest(s, FORM)?;
        let mut parts = rest.splitn(3, ':');
        let (Some(label), Some(needle), Some(file)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("{s:?}: expected {FORM}"));
        };
        if label.trim().is_empty() || needle.is_empty() || file.is_empty() {
            return Err(format!(
                "{s:?}: LABEL, TEXT and FILE must not be empty ({FORM})"
            ));
        }
        check_text(label, "the label")?;
        check_text(needle, "the text")?;
        Ok(TierCount {
            role: role.to_owned(),
            label: label.trim().to_owned(),
            needle: needle.to_owned(),
            file: PathBuf::from(file),
        })
    }
}

/// One log's line count so far: where the next read starts.
#[derive(Debug, Default)]
struct Cursor {
    offset: u64,
    lines: u64,
}

/// One tier of the run, checked.
#[derive(Debug)]
struct Tier {
    spec: TierSpec,
    note: Option<String>,
    /// Its `--tier-count`s, each with its cursor (shared across levels).
    counts: Vec<(TierCount, Mutex<Cursor>)>,
    /// The processes' names (`/proc/PID/comm`), read at the start.
    processes: Vec<String>,
}

/// The tiers of a run (none unless `--tier` is given).
#[derive(Debug, Default)]
pub(crate) struct Tiers {
    tiers: Vec<Tier>,
}

impl Tiers {
    /// Checks the tiers: roles unique, every process running now, every note and
    /// count naming a tier, every counted file readable.
    pub(crate) fn new(
        specs: &[TierSpec],
        notes: &[TierNote],
        counts: &[TierCount],
    ) -> anyhow::Result<Tiers> {
        if specs.len() > MAX_TIERS || notes.len() + counts.len() > MAX_EXTRAS {
            bail!("at most {MAX_TIERS} --tier and {MAX_EXTRAS} --tier-note/--tier-count in all");
        }
        let mut tiers: Vec<Tier> = Vec::with_capacity(specs.len());
        for spec in specs {
            if tiers.iter().any(|t| t.spec.role == spec.role) {
                bail!("--tier {:?} is given twice", spec.role);
            }
            let processes = spec
                .pids
                .iter()
                .map(|&pid| process_name(pid))
                .collect::<anyhow::Result<_>>()?;
            tiers.push(Tier {
                spec: spec.clone(),
                note: None,
                counts: Vec::new(),
                processes,
            });
        }
        for front in [Front::Smtp, Front::Pop3] {
            if specs.iter().filter(|s| s.front == Some(front)).count() > 1 {
                bail!("only one --tier may answer {front:?} (@smtp, @pop3)");
            }
        }
        let find = |tiers: &[Tier], role: &str, flag: &str| -> anyhow::Result<usize> {
            match tiers.iter().position(|t| t.spec.role == role) {
                Some(i) => Ok(i),
                None => bail!("{flag} {role:?}: no --tier has that role"),
            }
        };
        for n in notes {
            let i = find(&tiers, &n.role, "--tier-note")?;
            let note = tiers[i].note.get_or_insert_with(String::new);
            if !note.is_empty() {
                note.push_str("; ");
            }
            note.push_str(&n.text);
        }
        for c in counts {
            let i = find(&tiers, &c.role, "--tier-count")?;
            if let Err(e) = File::open(&c.file) {
                bail!(
                    "--tier-count {:?}: cannot read {}: {e}",
                    c.role,
                    c.file.display()
                );
            }
            tiers[i]
                .counts
                .push((c.clone(), Mutex::new(Cursor::default())));
        }
        Ok(Tiers { tiers })
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.tiers.is_empty()
    }

    /// Each tier's CPU time so far and its log counts so far.
    fn sample(&self) -> Vec<(Option<Duration>, Vec<Option<u64>>)> {
        self.tiers
            .iter()
            .map(|t| {
                let counts = t
                    .counts
                    .iter()
                    .map(|(c, cursor)| {
                        let mut cursor = cursor.lock().unwrap_or_else(PoisonError::into_inner);
                        count_lines(&c.file, c.needle.as_bytes(), &mut cursor).ok()
                    })
                    .collect();
                (cpu_of(&t.spec.pids), counts)
            })
            .collect()
    }

    /// The description of every tier, with its processes' peak memory now.
    pub(crate) fn summary(&self) -> Vec<TierInfo> {
        self.tiers
            .iter()
            .map(|t| TierInfo {
                role: t.spec.role.clone(),
                pids: t.spec.pids.clone(),
                processes: t.processes.clone(),
                peak_kib: t
                    .spec
                    .pids
                    .iter()
                    .map(|&pid| peak_kib(pid))
                    .sum::<Option<u64>>(),
                front: t.spec.front,
                note: t.note.clone(),
                counts: t
                    .counts
                    .iter()
                    .map(|(c, _)| CountInfo {
                        label: c.label.clone(),
                        text: c.needle.clone(),
                        file: c.file.display().to_string(),
                    })
                    .collect(),
            })
            .collect()
    }
}

/// A process's name (`/proc/PID/comm`); an error if it does not run.
fn process_name(pid: u32) -> anyhow::Result<String> {
    match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
        Ok(name) => Ok(name.trim().to_owned()),
        Err(e) => bail!("--tier: process {pid} is not running here ({e})"),
    }
}

/// A process's peak resident set (`VmHWM`, KiB); `None` when it is gone.
fn peak_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .strip_suffix("kB")?
        .trim()
        .parse()
        .ok()
}

/// Counts the complete lines of `file` from the cursor on that contain
/// `needle`, and moves the cursor past them; a line still being written (no
/// newline yet) waits for the next call. Returns the count from the start.
fn count_lines(file: &Path, needle: &[u8], cursor: &mut Cursor) -> std::io::Result<u64> {
    let mut f = File::open(file)?;
    if f.metadata()?.len() < cursor.offset {
        // Truncated or replaced: start over, keeping what was counted.
        cursor.offset = 0;
    }
    f.seek(SeekFrom::Start(cursor.offset))?;
    let mut reader = BufReader::new(f);
    let finder = memchr::memmem::Finder::new(needle);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line)? as u64;
        if n == 0 {
            return Ok(cursor.lines);
        }
        let mut len = n;
        if line.last() != Some(&b'\n') {
            if n < MAX_LINE {
                // The last line, not finished yet.
                return Ok(cursor.lines);
            }
            // A long line: skip to its end.
            let mut rest = Vec::new();
            loop {
                rest.clear();
                let m = (&mut reader).take(MAX_LINE).read_until(b'\n', &mut rest)? as u64;
                len += m;
                if rest.last() == Some(&b'\n') {
                    break;
                }
                if m < MAX_LINE {
                    return Ok(cursor.lines);
                }
            }
        }
        cursor.offset += len;
        if finder.find(&line).is_some() {
            cursor.lines += 1;
        }
    }
}

/// What the run's report says of one tier.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TierInfo {
    /// The role.
    pub(crate) role: String,
    /// Its processes.
    pub(crate) pids: Vec<u32>,
    /// Their names, in the same order.
    pub(crate) processes: Vec<String>,
    /// The sum of its processes' peak resident memory (each process's own peak,
    /// so an upper bound on the tier's peak), KiB, at the end of the run.
    pub(crate) peak_kib: Option<u64>,
    /// The harness address it answers.
    pub(crate) front: Option<Front>,
    /// `--tier-note`s.
    pub(crate) note: Option<String>,
    /// Its `--tier-count`s.
    pub(crate) counts: Vec<CountInfo>,
}

/// A `--tier-count` as the report describes it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CountInfo {
    /// What a line counts as.
    pub(crate) label: String,
    /// The text a counted line contains.
    pub(crate) text: String,
    /// The log.
    pub(crate) file: String,
}

/// What one tier cost and handled in one level's measurement window.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct TierLevel {
    /// CPU time over the window; `None` when a process could not be read.
    pub(crate) cpu: Option<Duration>,
    /// The harness's count for a front tier: SMTP sessions (completed, failed
    /// or dropped) or POP sessions, of those started in the window.
    pub(crate) sessions: Option<u64>,
    /// For the SMTP front: messages sent in those sessions.
    pub(crate) messages: Option<u64>,
    /// Each `--tier-count`'s lines written during the window; `None` when the
    /// log could not be read.
    pub(crate) counts: Vec<Option<u64>>,
}

/// The window sampler of one level: samples at the window's start and end.
pub(crate) struct Window {
    task: Option<tokio::task::JoinHandle<Vec<TierLevel>>>,
}

impl Window {
    /// Starts sampling `tiers` `warmup` from now (the window's start) and
    /// `warmup + run` from now (its end); nothing when there are no tiers.
    pub(crate) fn start(tiers: &Arc<Tiers>, warmup: Duration, run: Duration) -> Window {
        if tiers.is_empty() {
            return Window { task: None };
        }
        let tiers = Arc::clone(tiers);
        let t0 = tokio::time::Instant::now();
        let task = tokio::spawn(async move {
            tokio::time::sleep_until(t0 + warmup).await;
            let before = sample_blocking(&tiers).await;
            tokio::time::sleep_until(t0 + warmup + run).await;
            let after = sample_blocking(&tiers).await;
            before
                .into_iter()
                .zip(after)
                .map(|((c0, n0), (c1, n1))| TierLevel {
                    cpu: c0.zip(c1).map(|(a, b)| b.saturating_sub(a)),
                    counts: n0
                        .into_iter()
                        .zip(n1)
                        .map(|(a, b)| a.zip(b).map(|(a, b)| b.saturating_sub(a)))
                        .collect(),
                    ..TierLevel::default()
                })
                .collect()
        });
        Window { task: Some(task) }
    }

    /// The window's figures, with the front tiers' sessions from `tally`
    /// (empty when there are no tiers). Call after the level has ended.
    pub(crate) async fn finish(self, tiers: &Tiers, tally: &LevelTally) -> Vec<TierLevel> {
        let Some(task) = self.task else {
            return Vec::new();
        };
        let mut levels = task
            .await
            .unwrap_or_else(|_| vec![TierLevel::default(); tiers.tiers.len()]);
        let c = &tally.counters;
        for (level, tier) in levels.iter_mut().zip(&tiers.tiers) {
            match tier.spec.front {
                Some(Front::Smtp) => {
                    level.sessions = Some(c.smtp_ended());
                    level.messages = Some(tally.data_up.count);
                }
                Some(Front::Pop3) => level.sessions = Some(c.pop_ended()),
                None => {}
            }
        }
        levels
    }
}

/// [`Tiers::sample`] off the load's threads (it reads files).
async fn sample_blocking(tiers: &Arc<Tiers>) -> Vec<(Option<Duration>, Vec<Option<u64>>)> {
    let t = Arc::clone(tiers);
    match tokio::task::spawn_blocking(move || t.sample()).await {
        Ok(s) => s,
        Err(_) => tiers
            .tiers
            .iter()
            .map(|t| (None, vec![None; t.counts.len()]))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::*;

    #[test]
    fn tier_flags_parse_and_refuse_what_they_should() {
        let t: TierSpec = "POP store 1=12+34@pop3".parse().expect("tier");
        assert_eq!(
            t,
            TierSpec {
                role: "POP store 1".into(),
                pids: vec![12, 34],
                front: Some(Front::Pop3)
            }
        );
        let t: TierSpec = "LDAP=7".parse().expect("tier");
        assert_eq!((t.pids, t.front), (vec![7], None));
        assert_eq!(
            "MTA=9@smtp".parse::<TierSpec>().expect("tier").front,
            Some(Front::Smtp)
        );
        for bad in [
            "",
            "=12",
            "LDAP",
            "LDAP=",
            "LDAP=0",
            "LDAP=x",
            "LDAP=1+",
            "LDAP=1@imap",
        ] {
            assert!(bad.parse::<TierSpec>().is_err(), "{bad:?}");
        }
        let c: TierCount = "store=POP logins:logged in (:/tmp/a:b.log"
            .parse()
            .expect("count");
        assert_eq!(
            (c.label.as_str(), c.needle.as_str(), c.file),
            ("POP logins", "logged in (", PathBuf::from("/tmp/a:b.log"))
        );
        for bad in [
            "store=POP logins:x",
            "store=:x:/f",
            "store=a::/f",
            "store=a:x:",
        ] {
            assert!(bad.parse::<TierCount>().is_err(), "{bad:?}");
        }
        let n: TierNote = "MTA=stoa serve, 127.0.0.13".parse().expect("note");
        assert_eq!(n.text, "stoa serve, 127.0.0.13");
        assert!("MTA=a\nb".parse::<TierNote>().is_err());
    }

    #[test]
    fn tiers_are_checked_against_the_running_processes() {
        let me = std::process::id();
        let spec = |role: &str, front| TierSpec {
            role: role.into(),
            pids: vec![me],
            front,
        };
        let tiers = Tiers::new(&[spec("harness", None)], &[], &[]).expect("own pid");
        let info = tiers.summary();
        assert!(info[0].peak_kib.is_some_and(|k| k > 0), "{info:?}");
        assert!(!info[0].processes[0].is_empty());
        assert!(tiers.sample()[0].0.is_some());
        let twice = [spec("a", None), spec("a", None)];
        assert!(Tiers::new(&twice, &[], &[]).is_err());
        let two_pop = [spec("a", Some(Front::Pop3)), spec("b", Some(Front::Pop3))];
        assert!(Tiers::new(&two_pop, &[], &[]).is_err());
        let note = TierNote {
            role: "nobody".into(),
            text: "x".into(),
        };
        let e = Tiers::new(&[spec("a", None)], &[note], &[]).expect_err("unknown role");
        assert!(e.to_string().contains("no --tier"), "{e}");
        // pid_max is at most 2^22: this one never runs.
        let gone = TierSpec {
            role: "gone".into(),
            pids: vec![u32::MAX],
            front: None,
        };
        assert!(Tiers::new(&[gone], &[], &[]).is_err());
    }

    #[test]
    fn log_lines_are_counted_once_and_only_when_complete() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("store.err");
        let mut f = File::create(&path).expect("create");
        write!(
            f,
            "a: u1 logged in (3 messages)\nb: other\nc: u2 logged in (0"
        )
        .expect("write");
        let mut cursor = Cursor::default();
        assert_eq!(
            count_lines(&path, b"logged in (", &mut cursor).expect("count"),
            1
        );
        // The unfinished line counts once it ends, and nothing twice.
        writeln!(f, " messages)").expect("write");
        assert_eq!(
            count_lines(&path, b"logged in (", &mut cursor).expect("count"),
            2
        );
        assert_eq!(
            count_lines(&path, b"logged in (", &mut cursor).expect("count"),
            2
        );
        // A line longer than MAX_LINE counts once, by its beginning.
        let long = format!("logged in ({}\n", "x".repeat(3 * MAX_LINE as usize));
        f.write_all(long.as_bytes()).expect("write");
        writeln!(f, "d: u3 logged in (1 messages)").expect("write");
        assert_eq!(
            count_lines(&path, b"logged in (", &mut cursor).expect("count"),
            4
        );
        assert_eq!(cursor.offset, std::fs::metadata(&path).expect("meta").len());
    }
}
