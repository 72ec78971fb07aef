//! Per-thread worker state: the date cache, the file cache, the access-log buffers
//! (one per log), a pool of read buffers and the TLS scratch buffer.
//!
//! It lives in a thread-local rather than in the connection tasks so that the tasks
//! stay `Send` (the same connection code runs on the per-core runtimes and, for
//! comparison, on tokio's multi-thread runtime) while every worker still gets its own
//! lock-free caches. Accessors are synchronous: nothing borrows this state across an
//! `.await`.

use std::cell::RefCell;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use stoa_http_proto::date::DateCache;

use crate::access_log::LogBuffer;
use crate::cache::FileCache;
use crate::encoding::Encoder;
use crate::idle::IdleSet;
use crate::output::Output;
use crate::shared::Shared;

/// Size of a pooled read buffer: a typical request head many times over, and the
/// unit in which pipelined requests are read.
pub(crate) const READ_BUFFER: usize = 8 * 1024;
/// Most idle read buffers kept per worker.
const MAX_POOLED: usize = 64;
/// Write queues holding more memory than this are freed rather than pooled.
const MAX_POOLED_OUTPUT: usize = 64 * 1024;
/// Plaintext handed to TLS per write: four full 16 KiB records, encrypted and sent
/// in one `sendmsg`. File bytes are read into a buffer of this size.
pub(crate) const TLS_BATCH: usize = 64 * 1024;

pub(crate) struct Local {
    /// Which server this state belongs to (tests run several in one process).
    server: u64,
    pub(crate) date: DateCache,
    /// When the wall-clock second `date` shows ends, on the monotonic clock: until
    /// then [`Local::tick_at`] needs no clock read of its own.
    next_second: Option<Instant>,
    pub(crate) cache: FileCache,
    pub(crate) encoder: Encoder,
    /// One buffer per access log, in the order of `Shared::logs`.
    pub(crate) logs: Box<[LogBuffer]>,
    buffers: Vec<Vec<u8>>,
    outputs: Vec<Output>,
    /// File bytes on their way into TLS records (allocated on first use).
    tls_scratch: Vec<u8>,
    /// Parked connections (per-core runtime only).
    pub(crate) idle: Option<IdleSet>,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's state for `shared`'s server.
pub(crate) fn with<R>(shared: &Shared, f: impl FnOnce(&mut Local) -> R) -> R {
    LOCAL.with(|cell| {
        let mut slot = cell.borrow_mut();
        let local = match &mut *slot {
            Some(local) if local.server == shared.id => local,
            _ => slot.insert(Local {
                server: shared.id,
                date: DateCache::new(),
                next_second: None,
                cache: FileCache::new(shared.config.cache),
                encoder: Encoder::new(shared.config.compression.clone()),
                logs: (shared.logs.iter()).map(|_| LogBuffer::default()).collect(),
                buffers: Vec::new(),
                outputs: Vec::new(),
                tls_scratch: Vec::new(),
                idle: None,
            }),
        };
        f(local)
    })
}

impl Local {
    /// Moves the cached dates to the current second.
    pub(crate) fn tick(&mut self) {
        self.tick_at(Instant::now());
    }

    /// [`Local::tick`] for a caller that has read the monotonic clock (`now`):
    /// the wall clock is read only once its second has run out, not for every
    /// batch of requests (a clock read per request was a measurable part of a
    /// small request's user time). A wall clock set back or forward shows in the
    /// dates within a second.
    pub(crate) fn tick_at(&mut self, now: Instant) {
        if self.next_second.is_some_and(|end| now < end) {
            return;
        }
        let since_epoch = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.date.update(since_epoch.as_secs());
        let left =
            Duration::from_secs(1) - Duration::from_nanos(u64::from(since_epoch.subsec_nanos()));
        self.next_second = Some(now + left);
    }

    /// A read buffer with [`READ_BUFFER`] capacity.
    pub(crate) fn take_buffer(&mut self) -> Vec<u8> {
        self.buffers
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(READ_BUFFER))
    }

    /// Returns a buffer to the pool (grown ones are freed instead).
    pub(crate) fn give_buffer(&mut self, mut buf: Vec<u8>) {
        if buf.capacity() == READ_BUFFER && self.buffers.len() < MAX_POOLED {
            buf.clear();
            self.buffers.push(buf);
        }
    }

    /// A write queue, with memory from an earlier connection when one is pooled.
    pub(crate) fn take_output(&mut self) -> Output {
        self.outputs.pop().unwrap_or_default()
    }

    /// Returns a write queue to the pool (large ones are freed instead).
    pub(crate) fn give_output(&mut self, mut out: Output) {
        let cap = out.capacity();
        if cap > 0 && cap <= MAX_POOLED_OUTPUT && self.outputs.len() < MAX_POOLED {
            out.reset();
            self.outputs.push(out);
        }
    }

    /// The worker's buffer for file bytes going into TLS records, [`TLS_BATCH`] long.
    pub(crate) fn tls_scratch(&mut self) -> &mut [u8] {
        if self.tls_scratch.is_empty() {
            self.tls_scratch = vec![0; TLS_BATCH];
        }
        &mut self.tls_scratch
    }

    /// Hands every access-log buffer over to its writer.
    pub(crate) fn flush_logs(&mut self, shared: &Shared) {
        for (buffer, sink) in self.logs.iter_mut().zip(&shared.logs) {
            buffer.flush(sink);
        }
    }

    /// Hands over each access-log buffer whose lines are old enough.
    pub(crate) fn flush_logs_if_stale(&mut self, shared: &Shared, now: Instant) {
        for (buffer, sink) in self.logs.iter_mut().zip(&shared.logs) {
            if buffer.is_stale(now) {
                buffer.flush(sink);
            }
        }
    }
}

/// Flushes this thread's access-log buffers (worker exit).
pub(crate) fn flush_logs(shared: &Shared) {
    if !shared.logs.is_empty() {
        with(shared, |local| local.flush_logs(shared));
    }
}
