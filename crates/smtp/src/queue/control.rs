//! The queue's control files: how `stoa queue flush` asks the delivery thread of
//! a running server to try every message now, and knows whether one runs.
//!
//! - `.runner`: the delivery thread holds an exclusive `flock` on it while it
//!   runs (`Requests::open`); [`runner_alive`] tries a shared one. A lock, not
//!   a process id, so a stale file never names a server that is gone, and a
//!   reload (whose new servers keep the same delivery thread) changes nothing.
//! - `.flush`: a request. The command creates it; the delivery thread, woken by
//!   inotify on the queue directory, removes it (the command's answer: it watches
//!   for the removal) and schedules every queued message now. A request left by
//!   a command whose server stopped is taken at the next start.
//!
//! The command only needs the mail directory the configuration names, not the
//! `--pid-file` that `stoa reload` needs (a server need not write one).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rustix::fs::FlockOperation;
use tokio::io::unix::AsyncFd;

use super::FILE_MODE;

/// The delivery thread's lock file, in the queue directory.
pub const RUNNER_LOCK: &str = ".runner";

/// The flush request file, in the queue directory.
pub const FLUSH_REQUEST: &str = ".flush";

/// Whether a delivery thread runs on the queue directory `dir`. Blocks.
pub fn runner_alive(dir: &Path) -> io::Result<bool> {
    let file = match File::open(dir.join(RUNNER_LOCK)) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    match rustix::fs::flock(&file, FlockOperation::NonBlockingLockShared) {
        Ok(()) => Ok(false),
        Err(rustix::io::Errno::WOULDBLOCK) => Ok(true),
        Err(e) => Err(e.into()),
    }
}

/// Leaves a flush request in the queue directory `dir` (see the module docs);
/// returns its path, which the delivery thread removes once it has taken it.
/// Blocks.
pub fn request_flush(dir: &Path) -> io::Result<PathBuf> {
    let path = dir.join(FLUSH_REQUEST);
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(&path)?;
    Ok(path)
}

/// The delivery thread's side: the runner lock, held while it lives, and the
/// watch for requests.
#[derive(Debug)]
pub(crate) struct Requests {
    dir: PathBuf,
    _lock: Option<File>,
    watch: Option<AsyncFd<OwnedFd>>,
}

impl Requests {
    /// Takes the runner lock and watches the queue directory `dir`; what cannot
    /// be set up is logged (the server delivers anyway, without flush requests).
    /// Call it on the delivery thread's runtime.
    pub(crate) fn open(dir: &Path) -> Requests {
        let lock = match lock_runner(dir) {
            Ok(lock) => Some(lock),
            Err(e) => {
                tracing::warn!("queue: cannot take {RUNNER_LOCK} in {}: {e}", dir.display());
                None
            }
        };
        let watch = match watch(dir) {
            Ok(watch) => Some(watch),
            Err(e) => {
                tracing::warn!(
                    "queue: cannot watch {} for flush requests: {e}",
                    dir.display()
                );
                None
            }
        };
        Requests {
            dir: dir.to_owned(),
            _lock: lock,
            watch,
        }
    }

    /// Waits for a flush request and takes it (removes the file). Cancel-safe.
    /// Every message spooled makes events in the queue directory: only one
    /// naming the request (or a lost event) makes it look.
    pub(crate) async fn flush(&mut self) {
        let Some(watch) = &self.watch else {
            return std::future::pending().await;
        };
        let mut look = true;
        loop {
            if look {
                match std::fs::remove_file(self.dir.join(FLUSH_REQUEST)) {
                    Ok(()) => return,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => {
                        tracing::warn!("queue: cannot take the flush request: {e}");
                    }
                }
            }
            let Ok(mut ready) = watch.readable().await else {
                return std::future::pending().await;
            };
            look = names_request(watch.get_ref());
            ready.clear_ready();
        }
    }
}

/// Reads every pending event of `watch`: whether one names the request, or
/// events were lost.
fn names_request(watch: &OwnedFd) -> bool {
    use rustix::fs::inotify::{ReadFlags, Reader};
    let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut events = Reader::new(watch, &mut buf);
    let mut named = false;
    // Until EAGAIN: drained.
    while let Ok(event) = events.next() {
        named |= event.events().contains(ReadFlags::QUEUE_OVERFLOW)
            || event
                .file_name()
                .is_some_and(|name| name.to_bytes() == FLUSH_REQUEST.as_bytes());
    }
    named
}

/// The runner lock: refused (logged by the caller) when another delivery thread
/// holds it, e.g. a second server on the same mail directory.
fn lock_runner(dir: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(dir.join(RUNNER_LOCK))?;
    match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(io::Error::other(
            "another server's delivery thread holds it",
        )),
        Err(e) => Err(e.into()),
    }
}

/// A non-blocking inotify descriptor watching `dir` for new files.
fn watch(dir: &Path) -> io::Result<AsyncFd<OwnedFd>> {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK)?;
    inotify::add_watch(
        &fd,
        dir,
        inotify::WatchFlags::CREATE | inotify::WatchFlags::MOVED_TO,
    )?;
    // The safe constructor is deprecated for descriptors that could be closed
    // under it; an owned one cannot be (as netkit's listeners).
    #[allow(deprecated)]
    AsyncFd::with_interest(fd, tokio::io::Interest::READABLE)
}
