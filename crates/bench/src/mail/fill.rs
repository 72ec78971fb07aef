//! The store of a run: the fill by SMTP to the steady state (resumable through
//! a journal of the accounts done), the wait for its delivery, and the check of
//! a sample of mailboxes against the model.

use std::collections::HashSet;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use stoa_mailgen::engine::Engine;
use stoa_mailgen::init::{self, FillProgress, StoreSample};

use super::Options;
use super::level::draw_target;
use super::run::StoreCheck;

/// Longest wait for the fill's mail to show up in the mailboxes (a server may
/// accept faster than it delivers, and work off a queue of a million messages).
const FILL_SETTLE: Duration = Duration::from_secs(3600);

/// What the fill calls with each account it has finished.
type OnDone = Arc<dyn Fn(u32) + Send + Sync>;

/// Fills the store (resuming from `journal` if given), then waits until the
/// fill's mail shows in a sample of mailboxes.
pub(super) async fn fill_store(
    engine: &Engine,
    args: &Options,
    journal: Option<&Path>,
) -> anyhow::Result<()> {
    let w = engine.workload();
    let header = format!(
        "stoa-bench-mail-init v1 users={} domain={} store-seed={}",
        w.users, w.domain, args.store_seed
    );
    let done = match journal {
        Some(path) => read_journal(path, &header)?,
        None => HashSet::new(),
    };
    let on_done = match journal {
        Some(path) => journal_writer(path, &header, done.is_empty())?,
        None => Arc::new(|_| {}),
    };
    let todo = w.users as usize - done.len();
    let total_messages: usize = (1..=w.users)
        .filter(|u| !done.contains(u))
        .map(|u| init::initial_mailbox(args.store_seed, u).len())
        .sum();
    eprintln!(
        "stoa bench: filling {todo} {} ({} already done) with {} over {}",
        crate::report::plural(todo as u64, "mailbox", "mailboxes"),
        done.len(),
        crate::report::count(total_messages as u64, "message"),
        crate::report::count(u64::from(args.init_connections), "connection")
    );
    if let Some(path) = journal {
        eprintln!("stoa bench: fill journal {}", path.display());
    }
    let progress = Arc::new(FillProgress::default());
    let (bar, ticker) = fill_progress(&progress, total_messages);
    let started = Instant::now();
    let result = init::fill(
        w,
        args.store_seed,
        args.init_connections,
        &done,
        &progress,
        on_done,
    )
    .await;
    ticker.abort();
    bar.finish_and_clear();
    let secs = started.elapsed().as_secs_f64();
    let messages = progress.messages.load(Ordering::Relaxed);
    let bytes = progress.bytes.load(Ordering::Relaxed);
    eprintln!(
        "stoa bench: fill sent {} ({:.1} MiB) in {secs:.1} s ({:.0} msgs/s)",
        crate::report::count(messages, "message"),
        bytes as f64 / 1_048_576.0,
        messages as f64 / secs.max(0.001)
    );
    result.map_err(|e| {
        let hint = if journal.is_some() {
            "; run --init-only again to resume"
        } else {
            ""
        };
        anyhow::anyhow!("{e}{hint}")
    })?;
    settle(engine, args.store_seed, &done).await
}

/// Opens the journal for appending (its header first when `fresh`) and returns
/// what records an account done.
fn journal_writer(path: &Path, header: &str, fresh: bool) -> anyhow::Result<OnDone> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open the journal {}", path.display()))?;
    if fresh {
        writeln!(f, "{header}").with_context(|| format!("cannot write {}", path.display()))?;
    }
    let f = std::sync::Mutex::new(f);
    Ok(Arc::new(move |u: u32| {
        let mut f = f.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = writeln!(f, "{u}");
    }))
}

/// The fill's progress: a bar on a terminal; in a log, a line every 30 s.
fn fill_progress(
    progress: &Arc<FillProgress>,
    total_messages: usize,
) -> (ProgressBar, tokio::task::JoinHandle<()>) {
    let bar = ProgressBar::with_draw_target(Some(total_messages as u64), draw_target());
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {pos}/{len} messages, {per_sec}, {eta} left")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let ticker = {
        let (bar, progress) = (bar.clone(), Arc::clone(progress));
        // On a terminal the bar moves; in a log, a line every 30 s.
        let terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            let mut ticks = 0u64;
            loop {
                tick.tick().await;
                ticks += 1;
                let sent = progress.messages.load(Ordering::Relaxed);
                bar.set_position(sent);
                if !terminal && ticks.is_multiple_of(60) {
                    eprintln!(
                        "stoa bench: fill: {sent} of {total_messages} messages, {} mailboxes done",
                        progress.users_done.load(Ordering::Relaxed)
                    );
                }
            }
        })
    };
    (bar, ticker)
}

/// The fill's journal when `--init-journal` is not given: `init-ADDR.journal`
/// for the server's SMTP address, in the harness's cache directory (created
/// here). The journal describes that server's store, so it is kept where every
/// later `--init-only` against the same server finds it, whatever the current
/// directory or `--out`.
pub fn default_journal(smtp: SocketAddr) -> anyhow::Result<PathBuf> {
    let dir = crate::cache_dir("bench-mail");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    Ok(dir.join(format!("init-{smtp}.journal")))
}

/// Reads the accounts a previous fill finished; the header must match.
fn read_journal(path: &Path, header: &str) -> anyhow::Result<HashSet<u32>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashSet::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut lines = text.lines();
    match lines.next() {
        None => return Ok(HashSet::new()),
        Some(h) if h == header => {}
        Some(h) => bail!(
            "{} is the journal of another fill ({h}); this one is {header}. Remove it to start over",
            path.display()
        ),
    }
    // A torn last line (a crash mid-write: "12" of "123") is ignored, that
    // account is redone: only lines ended by a newline count.
    let mut done: Vec<&str> = lines.collect();
    if !text.ends_with('\n') {
        done.pop();
    }
    Ok(done.iter().filter_map(|l| l.trim().parse().ok()).collect())
}

/// Waits until a sample of the accounts just filled hold at least their
/// initial messages (the server may still be delivering from its queue).
async fn settle(
    engine: &Engine,
    store_seed: u64,
    done_before: &HashSet<u32>,
) -> anyhow::Result<()> {
    let w = engine.workload();
    let mut rng = fastrand::Rng::with_seed(store_seed ^ 0x5e77);
    let mut sample: Vec<(u32, usize)> = (0..400)
        .map(|_| rng.u32(1..=w.users))
        .filter(|u| !done_before.contains(u))
        .map(|u| (u, init::initial_mailbox(store_seed, u).len()))
        .filter(|&(_, n)| n > 0)
        .collect();
    sample.sort_unstable();
    sample.dedup();
    sample.truncate(100);
    let start = Instant::now();
    let deadline = start + FILL_SETTLE;
    let mut said = start;
    loop {
        let users: Vec<u32> = sample.iter().map(|&(u, _)| u).collect();
        let (_, counts) = init::check_accounts(w, users, 8).await;
        let behind: Vec<u32> = counts
            .iter()
            .filter(|(u, n)| {
                let want = sample.iter().find(|(s, _)| s == u).map_or(0, |&(_, n)| n);
                n.is_none_or(|n| (n as usize) < want)
            })
            .map(|&(u, _)| u)
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "{} of {} sampled mailboxes still lack their initial mail after {} s (e.g. {}): is the server delivering?",
                behind.len(),
                sample.len(),
                FILL_SETTLE.as_secs(),
                w.account(behind[0])
            );
        }
        if said.elapsed() >= Duration::from_secs(15) {
            said = Instant::now();
            eprintln!(
                "stoa bench: waiting for the server to deliver the fill: {} of {} sampled mailboxes incomplete after {} s",
                behind.len(),
                sample.len(),
                start.elapsed().as_secs()
            );
        }
        sample.retain(|(u, _)| behind.contains(u));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Checks a random sample of mailboxes against the steady state.
pub(super) async fn check_store(engine: &Engine, args: &Options) -> StoreCheck {
    let w = engine.workload();
    let sample: StoreSample =
        init::sample_store(w, args.check_sample.max(1), args.store_seed ^ 0xc4ec, 8).await;
    let notes = init::judge_sample(&sample);
    let checked = (sample.mailboxes - sample.failed).max(1);
    StoreCheck {
        mailboxes: sample.mailboxes,
        messages: sample.messages,
        octets: sample.octets,
        empty: sample.empty,
        mean_messages: sample.messages as f64 / checked as f64,
        mean_size: if sample.messages == 0 {
            0.0
        } else {
            sample.octets as f64 / sample.messages as f64
        },
        passed: notes.is_empty(),
        notes,
    }
}

pub(super) fn print_store_check(c: &StoreCheck) {
    eprintln!(
        "stoa bench: store check: {} {}, {:.2} messages each (steady state 3.43), {:.1} KB mean size (24.5), {:.1} % empty (26.5): {}",
        c.mailboxes,
        crate::report::plural(c.mailboxes, "mailbox", "mailboxes"),
        c.mean_messages,
        c.mean_size / 1024.0,
        c.empty as f64 * 100.0 / c.mailboxes.max(1) as f64,
        if c.passed {
            "ok".to_owned()
        } else {
            c.notes.join("; ")
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_journal_resumes_only_its_own_fill() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("journal");
        let header = "stoa-bench-mail-init v1 users=10 domain=stoa.test store-seed=1";
        assert!(
            read_journal(&path, header)
                .expect("missing is empty")
                .is_empty()
        );
        // A torn last line (a crash mid-write of "123") is ignored.
        std::fs::write(&path, format!("{header}\n3\n1\n7\n12")).expect("write");
        let done = read_journal(&path, header).expect("read");
        assert_eq!(done, HashSet::from([1, 3, 7]));
        std::fs::write(&path, format!("{header}\n3\n1\n7\n123\n")).expect("write");
        assert_eq!(read_journal(&path, header).expect("read").len(), 4);
        let other = "stoa-bench-mail-init v1 users=20 domain=stoa.test store-seed=1";
        let e = read_journal(&path, other).expect_err("another fill");
        assert!(e.to_string().contains("journal of another fill"), "{e}");
    }
}
