//! The state behind the dynamic API: one thread owns `post.log` and the ad tables'
//! files, so POST numbering is serial across all workers, and every answer that
//! depends on the disk waits for it.
//!
//! POSTs are group-committed: the thread takes every job waiting in its queue,
//! writes their records in one `pwrite`, calls `fdatasync` once, and only then
//! tells the connections, which only then send their 200. When POSTs come back to
//! back it first waits a few milliseconds for more to share the `fdatasync`, as
//! long as that gathers any ([`Linger`]). A write or sync error rolls the file
//! back to its last good length and fails those POSTs (507), so the log never
//! holds a record whose client was told otherwise, nor a torn one.
//!
//! The file is kept ahead of its records: zeros are written a megabyte at a time
//! beyond the last record (real zeros, not a hole or unwritten extents), so an
//! append lands inside the file and changes neither its size nor its block map,
//! and its `fdatasync` writes the record's page and no inode or journal block.
//! The count of records is the number of whole records before the first NUL byte
//! (a record is printable text, never NUL), and the count line at the head is
//! brought up to date when the log is read (Fetch), at a Reset, at start and when
//! the thread ends, when the zero tail is cut off again: a server that stopped
//! cleanly leaves exactly the kit's file. The kit requires the log to be
//! consistent when it is fetched, not between POSTs.
//!
//! At start the log is checked: the records end at the first NUL byte or at the
//! last whole record; whatever follows (a write cut by a crash or a full disk, or
//! the zero tail) is cut off, and the count line is rewritten to match.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, PoisonError, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use stoa_web99::ads::{self, Ad, ResetParams};
use stoa_web99::postlog::{self, HEADER, RECORD};
use tokio::sync::oneshot;

const POST_LOG: &str = "post.log";
const USERS: &str = "User.Personality";
const ADS: &str = "Custom.Ads";
/// Jobs taken per group commit.
const MAX_BATCH: usize = 1024;
/// How long a commit waits for more POSTs to share its `fdatasync`, when POSTs
/// come back to back (see [`Linger`]).
const COMMIT_WINDOW: Duration = Duration::from_millis(5);
/// The most commits that skip the wait after waits that gathered nothing.
const MAX_BACKOFF: u32 = 1024;
/// Zeros written beyond the records when the file runs out of them (7,543
/// records' worth).
const PREALLOCATE: u64 = 1 << 20;

/// Tables used when the state directory holds none yet: enough users for any
/// load this machine serves, and ads valid for a year, so CAD works before the
/// first Reset (the harness always sends one).
const DEFAULT_TABLES: ResetParams = ResetParams {
    maxload: 10_000,
    pttime: 15_811_200,
    maxthread: 10_000,
    expired: [0, 100],
};

/// The ad tables a CAD GET searches.
#[derive(Debug, Default)]
pub(crate) struct Tables {
    /// Demographics by user index.
    pub(crate) users: Vec<u32>,
    pub(crate) ads: Vec<Ad>,
}

/// A POST to log.
#[derive(Debug)]
pub(crate) struct PostEntry {
    pub(crate) dir: u32,
    pub(crate) class: u8,
    pub(crate) num: u8,
    pub(crate) client: u32,
    pub(crate) file: String,
    pub(crate) cookie: u32,
}

/// Work for the state thread; each job carries where to send its outcome.
#[derive(Debug)]
pub(crate) enum Job {
    /// Log a POST; replies with its record number.
    Post(PostEntry, oneshot::Sender<Result<u64, String>>),
    /// Regenerate the tables and empty the log.
    Reset(ResetParams, oneshot::Sender<Result<(), String>>),
    /// The whole log.
    Fetch(oneshot::Sender<Result<Vec<u8>, String>>),
}

/// The handle the server keeps.
#[derive(Debug)]
pub(crate) struct Service {
    tx: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    tables: Arc<RwLock<Arc<Tables>>>,
}

/// The state thread of each state directory of the process, by canonical path:
/// post.log has one writer, however many servers use the directory (a reload's
/// new web server beside the one it replaces, still finishing its requests).
static BY_DIR: Mutex<Vec<(PathBuf, Weak<Service>)>> = Mutex::new(Vec::new());

impl Service {
    /// The running service of `dir` (a canonical path), or a new one
    /// ([`Service::start`]). It ends when the last server using it does.
    pub(crate) fn for_dir(dir: &Path) -> io::Result<Arc<Service>> {
        let mut by_dir = BY_DIR.lock().unwrap_or_else(PoisonError::into_inner);
        by_dir.retain(|(_, service)| service.strong_count() > 0);
        if let Some(service) = by_dir
            .iter()
            .find(|(path, _)| path == dir)
            .and_then(|(_, service)| service.upgrade())
        {
            return Ok(service);
        }
        let service = Arc::new(Service::start(dir)?);
        by_dir.push((dir.to_owned(), Arc::downgrade(&service)));
        Ok(service)
    }

    /// Opens (and repairs) the state in `dir` and starts the thread.
    pub(crate) fn start(dir: &Path) -> io::Result<Service> {
        std::fs::create_dir_all(dir)?;
        let log = PostLog::open(&dir.join(POST_LOG))?;
        let tables = Arc::new(RwLock::new(Arc::new(load_or_create_tables(dir)?)));
        let (tx, rx) = channel();
        let state = State {
            dir: dir.to_owned(),
            log,
            tables: Arc::clone(&tables),
        };
        let thread = std::thread::Builder::new()
            .name("web99-state".into())
            .spawn(move || state.run(&rx))?;
        Ok(Service {
            tx: Some(tx),
            thread: Some(thread),
            tables,
        })
    }

    /// The current tables.
    pub(crate) fn tables(&self) -> Arc<Tables> {
        self.tables
            .read()
            .map(|t| Arc::clone(&t))
            .unwrap_or_default()
    }

    /// Queues a job; `false` if the thread is gone.
    pub(crate) fn submit(&self, job: Job) -> bool {
        self.tx.as_ref().is_some_and(|tx| tx.send(job).is_ok())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("web99 state thread panicked");
        }
    }
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

fn load_or_create_tables(dir: &Path) -> io::Result<Tables> {
    let users = std::fs::read_to_string(dir.join(USERS))
        .ok()
        .and_then(|t| ads::parse_users(&t));
    let ads = std::fs::read_to_string(dir.join(ADS))
        .ok()
        .and_then(|t| ads::parse_ads(&t));
    if let (Some(users), Some(ads)) = (users, ads) {
        return Ok(Tables { users, ads });
    }
    tracing::info!(
        "web99: no valid ad tables in {}; generating defaults",
        dir.display()
    );
    write_tables(dir, &DEFAULT_TABLES, now())
}

/// Writes both files (each to a temporary name, synced, renamed) and returns the
/// tables they hold.
fn write_tables(dir: &Path, params: &ResetParams, now: i64) -> io::Result<Tables> {
    let users_text = ads::user_personality(params);
    let ads = ads::generate_ads(params, now);
    write_synced(&dir.join(USERS), users_text.as_bytes())?;
    write_synced(&dir.join(ADS), ads::custom_ads(&ads).as_bytes())?;
    File::open(dir)?.sync_all()?;
    let users = ads::parse_users(&users_text).unwrap_or_default();
    Ok(Tables { users, ads })
}

fn write_synced(path: &Path, data: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let file = File::create(&tmp)?;
    file.write_all_at(data, 0)?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// `post.log`: the count line, `records` whole records, then zeros up to
/// `allocated` bytes.
#[derive(Debug)]
struct PostLog {
    file: File,
    records: u64,
    allocated: u64,
}

impl PostLog {
    fn open(path: &Path) -> io::Result<PostLog> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len = file.metadata()?.len();
        let (records, torn) = scan(&file, len)?;
        let good = HEADER as u64 + records * RECORD as u64;
        if torn > 0 {
            tracing::warn!(
                "web99: {}: cutting a torn tail of {torn} bytes",
                path.display()
            );
        }
        if len != good {
            file.set_len(good)?;
        }
        let log = PostLog {
            file,
            records,
            allocated: good,
        };
        log.write_count()?;
        log.file.sync_all()?;
        Ok(log)
    }

    fn write_count(&self) -> io::Result<()> {
        self.file
            .write_all_at(postlog::count_line(self.records).as_bytes(), 0)
    }

    fn end(&self) -> u64 {
        HEADER as u64 + self.records * RECORD as u64
    }

    /// Writes zeros up to `PREALLOCATE` bytes beyond `len` when the file is
    /// shorter than `len`, durably: the one append in thousands that changes the
    /// file's size. Without room for them (a nearly full disk) the file is left as
    /// it was and this append grows it by its records alone, as if unallocated.
    fn reserve(&mut self, len: u64) {
        if len <= self.allocated {
            return;
        }
        let target = len + PREALLOCATE;
        let zeros = vec![0; 64 * 1024];
        let mut at = self.allocated;
        let mut result = Ok(());
        while at < target && result.is_ok() {
            let n = (target - at).min(zeros.len() as u64);
            result = self.file.write_all_at(&zeros[..n as usize], at);
            at += n;
        }
        match result.and_then(|()| self.file.sync_data()) {
            Ok(()) => self.allocated = target,
            Err(e) => {
                tracing::debug!("web99: post.log: no zeros written ahead: {e}");
                let _ = self.file.set_len(self.allocated);
            }
        }
    }

    /// Appends `entries` durably; returns the first record number.
    fn append(&mut self, entries: &[&PostEntry], time: i64) -> io::Result<u64> {
        let first = self.records + 1;
        let mut text = String::with_capacity(entries.len() * RECORD);
        for (i, e) in entries.iter().enumerate() {
            let record = postlog::Record {
                number: first + i as u64,
                time,
                pid: std::process::id(),
                dir: e.dir,
                class: e.class,
                num: e.num,
                client: e.client,
                file: e.file.clone(),
                cookie: e.cookie,
            };
            postlog::write_record(&mut text, &record);
        }
        let end = self.end();
        let new_end = end + text.len() as u64;
        self.reserve(new_end);
        let result = self
            .file
            .write_all_at(text.as_bytes(), end)
            .and_then(|()| self.file.sync_data());
        if let Err(e) = result {
            // Roll back to the last durable state; never leave a torn record. The
            // zero tail goes too: the next append writes it again.
            self.allocated = end;
            let _ = self.file.set_len(end);
            return Err(e);
        }
        self.records += entries.len() as u64;
        self.allocated = self.allocated.max(new_end);
        Ok(first)
    }

    fn truncate(&mut self) -> io::Result<()> {
        self.file.set_len(HEADER as u64)?;
        self.records = 0;
        self.allocated = HEADER as u64;
        self.write_count()?;
        self.file.sync_data()
    }

    /// The whole log, its count line first brought up to date on disk too.
    fn contents(&self) -> io::Result<Vec<u8>> {
        self.write_count()?;
        let mut buf = vec![0; self.end() as usize];
        self.file.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }

    /// Leaves exactly the kit's file: the count line true, the zero tail gone.
    fn close(&mut self) -> io::Result<()> {
        self.write_count()?;
        self.file.set_len(self.end())?;
        self.allocated = self.end();
        self.file.sync_all()
    }
}

/// The whole records of a log file of `len` bytes (those before the first NUL
/// byte, which no record holds), and how far bytes other than NUL reach beyond
/// them: a torn write to cut off (0 if only zeros follow).
fn scan(file: &File, len: u64) -> io::Result<(u64, u64)> {
    let mut buf = vec![0; 64 * 1024];
    let mut at = HEADER as u64;
    let mut first_nul = len;
    let mut last_data = None;
    while at < len {
        let n = (len - at).min(buf.len() as u64) as usize;
        file.read_exact_at(&mut buf[..n], at)?;
        let chunk = &buf[..n];
        if first_nul == len
            && let Some(i) = chunk.iter().position(|&b| b == 0)
        {
            first_nul = at + i as u64;
        }
        if let Some(i) = chunk.iter().rposition(|&b| b != 0) {
            last_data = Some(at + i as u64);
        }
        at += n as u64;
    }
    let records = postlog::whole_records(first_nul);
    let good = HEADER as u64 + records * RECORD as u64;
    let torn = last_data.map_or(0, |last| (last + 1).saturating_sub(good));
    Ok((records, torn))
}

/// When a commit waits [`COMMIT_WINDOW`] for more POSTs, so that one
/// `fdatasync` (most of a POST's cost) serves them all: only when the last commit
/// ended less than a window ago (POSTs are arriving; a POST after a pause is
/// never held), and only while waiting pays. A wait that gathered no second POST
/// (one client posting one at a time, whose next POST cannot come before its
/// answer) doubles the number of commits that then skip the wait, up to
/// [`MAX_BACKOFF`]; a wait that gathered more resets it. Such a client loses one
/// window per `MAX_BACKOFF` commits; many clients posting at once get a few
/// POSTs per commit for at most a window more on each.
#[derive(Debug, Default)]
struct Linger {
    skip: u32,
    backoff: u32,
}

impl Linger {
    /// Whether the commit of a POST that arrived `since_last` after the last
    /// commit ended waits first.
    fn wait(&mut self, since_last: Option<Duration>) -> bool {
        if since_last.is_none_or(|d| d >= COMMIT_WINDOW) {
            return false;
        }
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        true
    }

    /// A wait ended with `posts` POSTs to commit.
    fn waited(&mut self, posts: usize) {
        self.backoff = if posts > 1 {
            0
        } else {
            (self.backoff * 2).clamp(1, MAX_BACKOFF)
        };
        self.skip = self.backoff;
    }
}

struct State {
    dir: PathBuf,
    log: PostLog,
    tables: Arc<RwLock<Arc<Tables>>>,
}

impl State {
    fn run(mut self, rx: &Receiver<Job>) {
        let mut linger = Linger::default();
        let mut last_commit: Option<Instant> = None;
        while let Ok(first) = rx.recv() {
            let wait =
                matches!(first, Job::Post(..)) && linger.wait(last_commit.map(|at| at.elapsed()));
            if wait {
                // A deliberate delay, not synchronisation: the POSTs that arrive
                // meanwhile queue without waking this thread, and all are
                // committed together after it.
                #[allow(clippy::disallowed_methods)]
                std::thread::sleep(COMMIT_WINDOW);
            }
            let mut jobs = vec![first];
            jobs.extend(rx.try_iter().take(MAX_BATCH - 1));
            let count = jobs.iter().filter(|j| matches!(j, Job::Post(..))).count();
            if wait {
                linger.waited(count);
            }
            let mut posts = Vec::new();
            for job in jobs {
                match job {
                    Job::Post(entry, reply) => posts.push((entry, reply)),
                    other => {
                        self.commit(std::mem::take(&mut posts));
                        self.handle(other);
                    }
                }
            }
            self.commit(posts);
            if count > 0 {
                last_commit = Some(Instant::now());
            }
        }
        // The last server using this directory is gone: leave the kit's file for
        // whoever reads it next (start-up repairs it anyway).
        if let Err(e) = self.log.close() {
            tracing::warn!("web99: cannot bring post.log up to date: {e}");
        }
    }

    fn commit(&mut self, posts: Vec<(PostEntry, oneshot::Sender<Result<u64, String>>)>) {
        if posts.is_empty() {
            return;
        }
        let entries: Vec<&PostEntry> = posts.iter().map(|(e, _)| e).collect();
        match self.log.append(&entries, now()) {
            Ok(first) => {
                for (i, (_, reply)) in posts.into_iter().enumerate() {
                    let _ = reply.send(Ok(first + i as u64));
                }
            }
            Err(e) => {
                tracing::error!("web99: cannot append to post.log: {e}");
                for (_, reply) in posts {
                    let _ = reply.send(Err(format!("post.log: {e}")));
                }
            }
        }
    }

    fn handle(&mut self, job: Job) {
        match job {
            Job::Post(..) => {}
            Job::Reset(params, reply) => {
                let result = write_tables(&self.dir, &params, now())
                    .and_then(|tables| {
                        if let Ok(mut t) = self.tables.write() {
                            *t = Arc::new(tables);
                        }
                        self.log.truncate()
                    })
                    .map_err(|e| format!("reset: {e}"));
                let _ = reply.send(result);
            }
            Job::Fetch(reply) => {
                let _ = reply.send(self.log.contents().map_err(|e| format!("post.log: {e}")));
            }
        }
    }
}

#[cfg(test)]
mod tests;
