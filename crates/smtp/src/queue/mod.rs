//! The durable queue under `MAIL_DIR/queue/`.
//!
//! A queued message is two files in one directory: `ID.msg`, the message as it
//! will be delivered (our `Received:` header first), and `ID.env`, its
//! [`Envelope`] (JSON). The envelope is the commit point: a message without an
//! envelope was never acknowledged.
//!
//! # Accepting a message (the order of writes)
//!
//! 1. At DATA the message is written, as it arrives, to `ID.msg.tmp` (created with
//!    `O_EXCL`).
//! 2. At the end of DATA ([`Queue::commit`], off the event loop): the rest is
//!    written and `ID.msg.tmp` fsynced; the envelope is written to `ID.env.tmp`
//!    and fsynced; `ID.msg.tmp` is renamed to `ID.msg`, then `ID.env.tmp` to
//!    `ID.env`; the directory is fsynced. Only then is `250` sent.
//! 3. Any failure removes what was written and answers `451 4.3.0`; the client
//!    keeps the message and retries. Nothing already queued is touched.
//!
//! A state change (a recipient delivered or bounced, a retry time) rewrites the
//! envelope the same way (temp, fsync, rename, directory fsync). A finished message
//! loses its envelope first, then its message file, then the directory is fsynced.
//!
//! # Recovery ([`Queue::recover`])
//!
//! At start every `*.tmp` is removed (an unfinished write), every `ID.msg` without
//! an `ID.env` is removed (its client never got a 250, or it was already fully
//! delivered), an `ID.env` without its message is set aside as `ID.env.bad`, and
//! every other envelope is loaded and scheduled. Unreadable envelopes are set
//! aside the same way and logged, never deleted.
//!
//! # Beside the server: the operator's commands
//!
//! Every delivery attempt holds an exclusive `flock` on the message's `ID.msg`
//! ([`Queue::try_lock`]) from before it reads the envelope until the envelope is
//! saved or removed; `stoa queue delete | hold | release` take the same lock
//! ([`admin`]), so none of them cuts an attempt in half. A held message has an
//! empty `ID.hold` marker. `stoa queue flush` reaches the delivery thread through
//! the [`control`] files `.runner` and `.flush`.
//!
//! # Permissions
//!
//! Queued mail is private: the directory is created `0700` and every file
//! `0600` ([`DIR_MODE`], [`FILE_MODE`]), whatever the umask.

pub mod admin;
pub mod control;
pub mod envelope;

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

pub use envelope::{Envelope, Recipient, RecipientState, Route};

/// The permissions of every file the queue creates.
pub const FILE_MODE: u32 = 0o600;

/// The permissions of the queue directory when the queue creates it.
pub const DIR_MODE: u32 = 0o700;

/// Bytes kept in memory before they are written to the spool file: a typical message
/// (SPECmail2001's mean is 24.5 KB) is written in one or two system calls.
const SPOOL_BUFFER: usize = 64 * 1024;

/// Bytes of the start of a message kept for the header checks (hop count).
const HEAD_KEPT: usize = 64 * 1024;

/// A crash point: with the `failpoints` feature, `FAILPOINTS=name=return` makes the
/// enclosing function fail with an I/O error here, `pause` stops it (for `kill -9`).
macro_rules! crash_point {
    ($name:literal) => {
        fail::fail_point!($name, |_| Err(std::io::Error::other(concat!(
            "failpoint ",
            $name
        ))))
    };
}
pub(crate) use crash_point;

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The queue directory.
#[derive(Debug)]
pub struct Queue {
    dir: PathBuf,
}

/// A queued message's lock ([`Queue::try_lock`]), released when dropped.
#[derive(Debug)]
pub struct MessageLock {
    _file: File,
}

/// A message being received into the queue.
#[derive(Debug)]
pub struct Spool {
    id: String,
    file: File,
    pending: Vec<u8>,
    written: u64,
    head: Vec<u8>,
    error: Option<io::Error>,
}

impl Queue {
    /// Opens (creating) the queue directory.
    pub fn open(dir: &Path) -> io::Result<Queue> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(dir)?;
        Ok(Queue {
            dir: dir.to_owned(),
        })
    }

    /// The queue directory `dir` as it is, created or not (the operator's
    /// commands, which must not create a queue where none was).
    pub fn at(dir: &Path) -> Queue {
        Queue {
            dir: dir.to_owned(),
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, id: &str, ext: &str) -> PathBuf {
        self.dir.join(format!("{id}.{ext}"))
    }

    /// Bytes available to us on the queue's file system.
    pub fn free_space(&self) -> io::Result<u64> {
        let st = rustix::fs::statvfs(&self.dir)?;
        Ok(st.f_bavail.saturating_mul(st.f_frsize))
    }

    /// Starts a new message file with a fresh queue id.
    pub fn create_spool(&self) -> io::Result<Spool> {
        loop {
            let id = new_id();
            let open = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(FILE_MODE)
                .open(self.path(&id, "msg.tmp"));
            match open {
                Ok(file) => {
                    if self.path(&id, "env").exists() {
                        // An id of a queued message (a clock step back): pick another.
                        drop(file);
                        let _ = std::fs::remove_file(self.path(&id, "msg.tmp"));
                        continue;
                    }
                    return Ok(Spool {
                        id,
                        file,
                        pending: Vec::with_capacity(8 * 1024),
                        written: 0,
                        head: Vec::new(),
                        error: None,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Makes the spooled message and its envelope durable (see the module docs).
    /// Blocks: call it off the event loop. On error nothing of it is left behind.
    pub fn commit(&self, spool: Spool, envelope: &Envelope) -> io::Result<()> {
        let id = spool.id.clone();
        let result = self.commit_inner(spool, envelope);
        if result.is_ok() {
            crate::metrics::enter_queue(&id, true, envelope.arrival);
        } else {
            for ext in ["msg.tmp", "env.tmp", "env", "msg"] {
                let _ = std::fs::remove_file(self.path(&id, ext));
            }
        }
        result
    }

    fn commit_inner(&self, mut spool: Spool, envelope: &Envelope) -> io::Result<()> {
        spool.flush()?;
        if let Some(e) = spool.error.take() {
            return Err(e);
        }
        crash_point!("queue::after_write_before_fsync");
        spool.file.sync_data()?;
        drop(spool.file);
        self.write_temp(&spool.id, "env.tmp", &envelope.to_bytes())?;
        crash_point!("queue::after_fsync_before_rename");
        std::fs::rename(self.path(&spool.id, "msg.tmp"), self.path(&spool.id, "msg"))?;
        std::fs::rename(self.path(&spool.id, "env.tmp"), self.path(&spool.id, "env"))?;
        crash_point!("queue::after_rename_before_dir_fsync");
        self.sync_dir()
    }

    /// Throws a spool away (a refused or aborted message).
    pub fn discard(&self, spool: Spool) {
        let Spool { id, file, .. } = spool;
        drop(file);
        let _ = std::fs::remove_file(self.path(&id, "msg.tmp"));
    }

    /// Queues a whole message at once (a bounce). Blocks.
    pub fn enqueue(&self, message: &[u8], mut envelope: Envelope) -> io::Result<Envelope> {
        let mut spool = self.create_spool()?;
        envelope.id = spool.id.clone();
        spool.write(message);
        self.commit(spool, &envelope)?;
        Ok(envelope)
    }

    /// Writes `bytes` to `ID.ext` and fsyncs it.
    fn write_temp(&self, id: &str, ext: &str, bytes: &[u8]) -> io::Result<()> {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(FILE_MODE)
            .open(self.path(id, ext))?;
        file.write_all(bytes)?;
        file.sync_data()
    }

    fn sync_dir(&self) -> io::Result<()> {
        File::open(&self.dir)?.sync_all()
    }

    /// Rewrites a message's envelope durably. Blocks.
    pub fn save_envelope(&self, envelope: &Envelope) -> io::Result<()> {
        let id = &envelope.id;
        self.write_temp(id, "env.tmp", &envelope.to_bytes())?;
        std::fs::rename(self.path(id, "env.tmp"), self.path(id, "env"))?;
        self.sync_dir()
    }

    /// Reads a queued message. Blocks.
    pub fn read_message(&self, id: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.path(id, "msg"))
    }

    /// Reads a queued envelope. Blocks.
    pub fn read_envelope(&self, id: &str) -> io::Result<Envelope> {
        let bytes = std::fs::read(self.path(id, "env"))?;
        Envelope::from_bytes(&bytes).map_err(io::Error::other)
    }

    /// Removes a finished message: envelope first, then the message (and a hold
    /// marker). Blocks.
    pub fn remove(&self, id: &str) -> io::Result<()> {
        crash_point!("deliver::before_queue_remove");
        std::fs::remove_file(self.path(id, "env"))?;
        for ext in ["msg", "hold"] {
            match std::fs::remove_file(self.path(id, ext)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        crate::metrics::leave_queue(id);
        self.sync_dir()
    }

    /// Takes message `id`'s lock (an exclusive `flock` on `ID.msg`) if nobody
    /// holds it: `None` when someone does (an attempt, or an operator's command).
    /// Whoever holds it may change or remove the message's files; read the
    /// envelope after taking it. `NotFound` when the message is gone. Blocks.
    pub fn try_lock(&self, id: &str) -> io::Result<Option<MessageLock>> {
        let file = File::open(self.path(id, "msg"))?;
        match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(Some(MessageLock { _file: file })),
            Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether message `id` is on hold (its `ID.hold` marker exists). Blocks.
    pub fn is_held(&self, id: &str) -> bool {
        self.path(id, "hold").exists()
    }

    /// Cleans up after a crash and returns every queued envelope (see the module
    /// docs). Blocks.
    pub fn recover(&self) -> io::Result<Vec<Envelope>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            if entry.file_type()?.is_file() {
                names.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        let mut changed = false;
        let mut envelopes = Vec::new();
        for name in &names {
            if name.ends_with(".tmp") {
                tracing::info!("queue: removing unfinished {name}");
                std::fs::remove_file(self.dir.join(name))?;
                changed = true;
            } else if let Some(id) = name.strip_suffix(".msg") {
                if !names.iter().any(|n| n == &format!("{id}.env")) {
                    tracing::info!("queue: removing {name}, which has no envelope");
                    std::fs::remove_file(self.dir.join(name))?;
                    changed = true;
                }
            } else if let Some(id) = name.strip_suffix(".hold") {
                if !names.iter().any(|n| n == &format!("{id}.env")) {
                    std::fs::remove_file(self.dir.join(name))?;
                    changed = true;
                }
            } else if let Some(id) = name.strip_suffix(".env") {
                match self.recover_one(id, &names) {
                    Ok(envelope) => {
                        crate::metrics::enter_queue(id, false, envelope.arrival);
                        envelopes.push(envelope);
                    }
                    Err(reason) => {
                        tracing::error!("queue: setting {name} aside as {name}.bad: {reason}");
                        std::fs::rename(self.dir.join(name), self.dir.join(format!("{name}.bad")))?;
                        changed = true;
                    }
                }
            }
        }
        if changed {
            self.sync_dir()?;
        }
        envelopes.sort_by(|a, b| (a.next_try, &a.id).cmp(&(b.next_try, &b.id)));
        Ok(envelopes)
    }

    fn recover_one(&self, id: &str, names: &[String]) -> Result<Envelope, String> {
        if !names.iter().any(|n| n == &format!("{id}.msg")) {
            return Err("its message file is missing".into());
        }
        let envelope = self.read_envelope(id).map_err(|e| e.to_string())?;
        if envelope.id != id {
            return Err(format!("it names another message, {}", envelope.id));
        }
        Ok(envelope)
    }
}

impl Spool {
    /// The queue id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Bytes of message so far.
    pub fn len(&self) -> u64 {
        self.written + self.pending.len() as u64
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The start of the message (up to 64 KiB), for header checks.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// Appends message bytes. Full buffers go to the file at once (into the page
    /// cache; the fsync is in [`Queue::commit`]). A write error is kept and
    /// reported by the commit, so the client still gets its `451` after the end of
    /// the data.
    pub fn write(&mut self, data: &[u8]) {
        if self.head.len() < HEAD_KEPT {
            let n = data.len().min(HEAD_KEPT - self.head.len());
            self.head.extend_from_slice(&data[..n]);
        }
        if self.error.is_some() {
            self.written += data.len() as u64;
            return;
        }
        self.pending.extend_from_slice(data);
        if self.pending.len() >= SPOOL_BUFFER
            && let Err(e) = self.flush()
        {
            self.error = Some(e);
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.error.is_some() || self.pending.is_empty() {
            return Ok(());
        }
        self.file.write_all(&self.pending)?;
        self.written += self.pending.len() as u64;
        self.pending.clear();
        Ok(())
    }
}

/// A new queue id: the time in microseconds, 16 random bits and a counter, in
/// upper-case hex (21 characters, sorting by arrival).
fn new_id() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed) & 0xFFFF;
    format!("{micros:013X}{:04X}{n:04X}", fastrand::u16(..))
}

#[cfg(test)]
mod tests;
