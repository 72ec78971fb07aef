//! `stoa queue list | flush | delete | hold | release`: the mail queue for its
//! operator, as Postfix's `postqueue -p/-f` and `postsuper -d/-h/-H`.
//!
//! The work is `stoa_smtp::queue::admin` (what the commands do to the queue
//! directory, locked against the server's delivery attempts) and
//! `stoa_smtp::queue::control` (how a flush reaches the running server); this
//! module finds the queue (the mail directory of `--mail-dir` or of the
//! configuration, as `stoa user` does), prints, and waits for the server's answer
//! to a flush the way `stoa reload` waits for its outcome (inotify).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use stoa_smtp::queue::admin::{self, AdminError, Listing};
use stoa_smtp::queue::{Queue, control};

use crate::cli::{MailDirArgs, QueueCommand, QueueDeleteArgs, QueueIdsArgs, QueueListArgs};

/// How long delete, hold and release wait for a delivery attempt in flight.
const LOCK_WAIT: Duration = Duration::from_secs(30);

/// How long flush waits for the server to take the request.
const FLUSH_WAIT: Duration = Duration::from_secs(10);

/// Runs a `stoa queue` command.
pub(crate) fn run(command: &QueueCommand) -> anyhow::Result<()> {
    match command {
        QueueCommand::List(args) => list(args),
        QueueCommand::Flush(args) => flush(&queue_dir(&args.dir)?),
        QueueCommand::Delete(args) => delete(args),
        QueueCommand::Hold(args) => each(args, "put on hold", Queue::hold),
        QueueCommand::Release(args) => each(args, "released", Queue::release),
    }
}

/// The queue directory of the mail directory `args` name, which must exist (a
/// mistyped `--mail-dir` is an error, not an empty queue).
fn queue_dir(args: &MailDirArgs) -> anyhow::Result<PathBuf> {
    let (mail_dir, _) = crate::user::configured_mail_dir(args)?;
    if !mail_dir.is_dir() {
        bail!(
            "no mail directory {}: is --mail-dir right?",
            mail_dir.display()
        );
    }
    Ok(mail_dir.join("queue"))
}

fn list(args: &QueueListArgs) -> anyhow::Result<()> {
    let dir = queue_dir(&args.dir)?;
    let listed = Queue::at(&dir)
        .list()
        .with_context(|| format!("cannot read the queue {}", dir.display()))?;
    let text = if args.json {
        let mut json = serde_json::to_string(&listed).context("cannot encode the listing")?;
        json.push('\n');
        json
    } else {
        render(&listed)
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("cannot write the listing")
}

/// The listing as text: a line per message, then its schedule, then a line per
/// recipient still to deliver; a total at the end.
fn render(listed: &[Listing]) -> String {
    use std::fmt::Write as _;
    if listed.is_empty() {
        return "The mail queue is empty.\n".into();
    }
    let mut out = format!(
        "{:<22} {:>9}  {:<19}  Sender\n",
        "ID (! on hold)", "Size", "Arrival (UTC)"
    );
    for m in listed {
        let id = format!("{}{}", m.id, if m.held { "!" } else { "" });
        let sender = if m.sender.is_empty() { "<>" } else { &m.sender };
        let _ = writeln!(
            out,
            "{id:<22} {:>9}  {}  {}",
            m.size,
            admin::utc_time(m.arrival),
            printable(sender)
        );
        let attempts = match m.attempts {
            1 => "1 attempt".to_owned(),
            n => format!("{n} attempts"),
        };
        let next = if m.held {
            "on hold, not attempted until released".to_owned()
        } else {
            format!("next {}", admin::utc_time(m.next_try))
        };
        let _ = writeln!(out, "    {attempts}; {next}");
        for r in &m.recipients {
            let last = match (&r.status, &r.diagnostic) {
                (Some(status), Some(diagnostic)) => format!("{status} {}", printable(diagnostic)),
                (None, Some(diagnostic)) => printable(diagnostic),
                (Some(status), None) => status.clone(),
                (None, None) => "not attempted yet".into(),
            };
            let _ = writeln!(out, "    {}: {last}", printable(&r.address));
        }
    }
    let bytes: u64 = listed.iter().map(|m| m.size).sum();
    let held = listed.iter().filter(|m| m.held).count();
    let _ = writeln!(
        out,
        "-- {} message{}, {bytes} bytes, {held} on hold",
        listed.len(),
        if listed.len() == 1 { "" } else { "s" }
    );
    out
}

/// `text` with control characters (a remote server's reply is anyone's) shown
/// as `?`.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Asks the server delivering from `dir` to try every message now and waits for
/// it to take the request.
fn flush(dir: &Path) -> anyhow::Result<()> {
    let alive = control::runner_alive(dir).with_context(|| {
        format!(
            "cannot tell whether a server delivers from {}",
            dir.display()
        )
    })?;
    if !alive {
        bail!(
            "no server delivers from {} (is `stoa serve` running on this mail directory?); \
             nothing was flushed",
            dir.display()
        );
    }
    // Watch before asking, so the answer cannot be missed.
    let watch = crate::serve::watch_dir(dir, rustix::fs::inotify::WatchFlags::DELETE);
    let request = control::request_flush(dir)
        .with_context(|| format!("cannot leave a flush request in {}", dir.display()))?;
    let Some(watch) = watch else {
        eprintln!("stoa: queue: flush requested (its answer cannot be watched for)");
        return Ok(());
    };
    let deadline = Instant::now() + FLUSH_WAIT;
    loop {
        if !request.exists() {
            eprintln!("stoa: queue: flush requested; the server is trying every message now");
            return Ok(());
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!(
                "the server did not take the flush request within {}s; see its log \
                 ({} stays until it does)",
                FLUSH_WAIT.as_secs(),
                request.display()
            );
        }
        crate::serve::wait_for_change(&watch, left);
    }
}

fn delete(args: &QueueDeleteArgs) -> anyhow::Result<()> {
    let dir = queue_dir(&args.dir)?;
    let queue = Queue::at(&dir);
    let ids = if args.all {
        queue
            .ids()
            .with_context(|| format!("cannot read the queue {}", dir.display()))?
    } else {
        parse_ids(&args.ids)?
    };
    act(&queue, &ids, "deleted", Queue::delete)
}

/// Hold or release: `action` on every id of `args`.
fn each(
    args: &QueueIdsArgs,
    done: &str,
    action: fn(&Queue, &str, Duration) -> Result<(), AdminError>,
) -> anyhow::Result<()> {
    let queue = Queue::at(&queue_dir(&args.dir)?);
    act(&queue, &parse_ids(&args.ids)?, done, action)
}

/// Every id checked before any is acted on: a typo refuses the whole command.
fn parse_ids(ids: &[String]) -> anyhow::Result<Vec<String>> {
    let parsed: Vec<Result<String, AdminError>> =
        ids.iter().map(|id| admin::parse_id(id)).collect();
    let bad: Vec<String> = (parsed.iter())
        .filter_map(|p| p.as_ref().err().map(ToString::to_string))
        .collect();
    if !bad.is_empty() {
        bail!("{}; nothing was done", bad.join("; "));
    }
    Ok(parsed.into_iter().filter_map(Result::ok).collect())
}

/// `action` on each of `ids`, each outcome said; an error if any failed.
fn act(
    queue: &Queue,
    ids: &[String],
    done: &str,
    action: fn(&Queue, &str, Duration) -> Result<(), AdminError>,
) -> anyhow::Result<()> {
    let mut failed = 0;
    for id in ids {
        match action(queue, id, LOCK_WAIT) {
            Ok(()) => eprintln!("stoa: queue: {id} {done}"),
            Err(e) => {
                eprintln!("stoa: error: {e}");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} messages not {done}", ids.len());
    }
    if ids.is_empty() {
        eprintln!("stoa: queue: the mail queue is empty");
    }
    Ok(())
}
