//! Serving without a task, and parking: the connection's side of the worker's
//! [`IdleSet`] ([`crate::idle`]).
//!
//! A plain-HTTP connection on the per-core runtime is served on the caller's
//! stack ([`start_now`] for a new one, [`resume_now`] for one woken in the idle
//! set) until a step must wait, and parks as soon as it has nothing left to do
//! ([`park`]). One that waits for its next request in a task
//! ([`Conn::wait_for_request`]) asks to be parked after [`PARK_AFTER`] of
//! silence. The worker's parking loop ([`run_parking`]) resumes parked
//! connections whose socket has input and closes those past their deadline;
//! [`close_parked`] closes them all on shutdown.

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Instant;

use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use super::Origin;
use super::io::{ReadEnd, Sock, discard_received};
use super::machine::{Conn, Now, Step};
use crate::config::RuntimeModel;
use crate::dispatch::Client;
use crate::idle::{IdleSet, PARK_AFTER, Parked, Woken};
use crate::local::{self, Local};
use crate::shared::Shared;

/// Serves a plain-HTTP connection whose request is (most likely) waiting, on the
/// caller's stack rather than in a task of its own: reads, answers and writes as
/// long as nothing has to wait, then parks the connection in the worker's idle
/// set, or closes it. Only what must wait (a response larger than the socket
/// takes at once, a partial head, a body, a dynamic answer, a lingering close)
/// moves the connection into a task, which goes on from that step.
///
/// The per-core runtime only, with its idle set installed (the caller checks
/// [`can_start_now`]): the accept loop calls this for a new connection, the idle
/// set for a parked one that became readable. Under the paced benchmark most
/// connections never get a task: the request that comes with the connection and
/// each one after a pause are answered here.
pub(crate) fn start_now(
    stream: Sock,
    origin: Origin,
    shared: Arc<Shared>,
    permit: OwnedSemaphorePermit,
) {
    let mut conn = Conn::new(stream, origin, shared, None);
    let now = conn.run_now();
    conn.go_on(now, permit);
}

/// Serves a parked connection whose socket became readable, as [`start_now`]
/// does, except that the read comes first. Most such wakes are the client's
/// close (the SPECweb99 kit's client closes each connection after its last
/// answer), and one that reads the end of input closes the socket without a
/// [`Conn`] ever being built: a pooled buffer taken and given back, a `recv` and
/// the close (callgrind, `bench/callgrind-keepalive.sh --fresh`).
pub(crate) fn resume_now(
    stream: TcpStream,
    origin: Origin,
    shared: Arc<Shared>,
    permit: OwnedSemaphorePermit,
) {
    let mut buf = local::with(&shared, Local::take_buffer);
    let room = buf.capacity();
    let spare = rustix::buffer::spare_capacity(&mut buf);
    let n = match rustix::net::recv(&stream, spare, rustix::net::RecvFlags::DONTWAIT) {
        Ok((n, _)) if n > 0 => n,
        nothing => {
            local::with(&shared, |l| l.give_buffer(buf));
            match nothing {
                // The end of input, nothing unread: the close is not a reset.
                Ok(_) => {}
                Err(rustix::io::Errno::AGAIN) => {
                    // A stale wake: the connection waits in a task, as
                    // `start_now`'s would after finding nothing.
                    let conn = Conn::new(Sock::Tokio(stream), origin, shared, None);
                    conn.forget_readiness();
                    conn.go_on(Now::Wait(Step::NeedHead), permit);
                }
                Err(e) => tracing::debug!("{}: read failed: {e}", origin.peer),
            }
            return;
        }
    };
    let mut conn = Conn::new(Sock::Tokio(stream), origin, shared, None);
    conn.buf = buf;
    conn.take_buffers();
    conn.took(n, room);
    let now = conn.serve_now();
    conn.go_on(now, permit);
}

/// Whether this thread can serve connections with [`start_now`]: it is a worker
/// of the per-core runtime with its idle set (where such connections park).
pub(crate) fn can_start_now(shared: &Shared) -> bool {
    shared.config.runtime == RuntimeModel::PerCore && local::with(shared, |l| l.idle.is_some())
}

/// Moves an idle connection (from its task, or served without one by
/// [`start_now`] or [`resume_now`]) into the worker's [`IdleSet`].
pub(super) fn park(conn: &mut Conn, permit: OwnedSemaphorePermit, deadline: Instant) {
    if conn.shared.draining.load(Ordering::Relaxed) {
        // Shutting down: an idle connection just closes (see `Drop for Conn`).
        return;
    }
    let Client {
        peer, served, born, ..
    } = conn.client;
    let mut stream = std::mem::replace(&mut conn.stream, Sock::Lost);
    stream.register(peer);
    let Sock::Tokio(stream) = stream else {
        // Its registration failed: it closes.
        return;
    };
    let parked = Parked {
        stream,
        peer,
        served,
        born,
        permit,
    };
    local::with(&conn.shared, |l| {
        if let Some(idle) = &mut l.idle {
            idle.park(parked, deadline);
        }
    });
}

impl Conn {
    /// Idles until the next request starts, then reads its first bytes. While
    /// idle the buffers are back in the worker's pool and the connection does not
    /// count as in flight. A connection that can park (plain HTTP on the per-core
    /// runtime) asks to be parked once idle for [`PARK_AFTER`].
    pub(super) async fn wait_for_request(&mut self) -> Result<(), ReadEnd> {
        // A draining server takes no new request. The connection ends here while
        // still busy, so its lingering close reads what the client already sent
        // before the shutdown may close the socket: leaving busy first and then
        // waiting for readiness let a shutdown that saw nothing busy close the
        // socket with a request unread, and the reset that sends destroys the
        // answer still queued in the kernel (`tests/shutdown.rs`).
        if self.shared.draining.load(Ordering::Relaxed) {
            return Err(ReadEnd::Draining);
        }
        self.release_buffers();
        self.set_busy(false);
        let now = Instant::now();
        let deadline = self.idle_deadline(now);
        // TLS connections keep their state in the task: they never park.
        let parking = self.tls.is_none() && local::with(&self.shared, |l| l.idle.is_some());
        let park_at = now + PARK_AFTER;
        let wait_until = if parking && park_at < deadline {
            park_at
        } else {
            deadline
        };
        loop {
            // Decrypted bytes already waiting in TLS need no readiness.
            if !self.tls.as_mut().is_some_and(|t| t.buffered()) {
                let readable = self.stream.tokio().readable();
                match tokio::time::timeout_at(wait_until.into(), readable).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return Err(ReadEnd::Failed(e)),
                    Err(_) if wait_until < deadline => return Err(ReadEnd::Park(deadline)),
                    Err(_) => return Err(ReadEnd::Timeout),
                }
            }
            if self.shared.draining.load(Ordering::Relaxed) {
                return Err(ReadEnd::Draining);
            }
            self.take_buffers();
            match self.fill() {
                Ok(0) => return Err(ReadEnd::Eof),
                Ok(_) => break,
                // Readiness left over from the last request: now cleared, so the
                // next wait is for real.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.release_buffers(),
                Err(e) => return Err(ReadEnd::Failed(e)),
            }
        }
        self.set_busy(true);
        if self.client.served > 0 {
            self.head_started = Instant::now();
        }
        Ok(())
    }
}

/// The worker's parking loop: installs the worker's [`IdleSet`], then resumes
/// parked connections whose socket has input and closes those whose deadline
/// passed, until the worker stops.
pub(crate) async fn run_parking(shared: Arc<Shared>) {
    let woken = Arc::new(Woken::default());
    let capacity = shared.config.limits.max_connections;
    local::with(&shared, |l| {
        l.idle = Some(IdleSet::new(Arc::clone(&woken), capacity));
    });
    let mut batch = VecDeque::new();
    let mut ready = Vec::new();
    std::future::poll_fn(|cx| {
        woken.take_woken(&mut batch, cx);
        local::with(&shared, |l| {
            let Some(idle) = &mut l.idle else {
                return;
            };
            ready.extend(batch.drain(..).filter_map(|slot| idle.take_ready(slot)));
            idle.expire(cx);
        });
        // Outside the worker's state: a connection's loop uses it, and may
        // park again.
        for parked in ready.drain(..) {
            resume(&shared, parked);
        }
        Poll::<()>::Pending
    })
    .await;
}

/// Serves a parked connection that has input again, from its direct read on.
fn resume(shared: &Arc<Shared>, parked: Parked) {
    let resumed = Origin {
        peer: parked.peer,
        served: parked.served,
        born: parked.born,
        sni: None,
    };
    resume_now(parked.stream, resumed, Arc::clone(shared), parked.permit);
}

/// Closes this worker's parked connections (the server is shutting down), each
/// after reading what it has received: a request that came in as the drain
/// began must not make the close a reset, which would destroy the last answer
/// if the kernel still holds part of it.
pub(crate) fn close_parked(shared: &Shared) {
    let mut scratch = Vec::new();
    local::with(shared, |l| {
        if let Some(idle) = &mut l.idle {
            idle.close_all(|stream| {
                discard_received(stream, &mut scratch);
            });
        }
    });
}
