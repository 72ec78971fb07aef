//! One HTTP/1 connection: the read → parse → respond → write loop, keep-alive,
//! pipelining, timeouts, lingering close, parking.
//!
//! [`Conn`] owns the socket and both buffers; what to answer is decided in
//! [`crate::dispatch`], which sees a parsed request head and appends to the
//! [`Output`](crate::output::Output). The loop in [`Conn::run_from`]:
//!
//! 1. parses every complete request in the read buffer and queues its response,
//!    up to [`crate::config::Limits::max_pipeline`] at a time (bounded look-ahead);
//! 2. writes the whole batch, memory parts in one `sendmsg`, files with `sendfile`;
//! 3. logs each response once its bytes are out (or the connection died);
//! 4. reads more only when no complete request is left.
//!
//! An idle kept-alive connection gives its buffers back to the worker's pool, so it
//! costs little more than its socket while it waits.
//!
//! A plain-HTTP connection on the per-core runtime runs the same loop without a
//! task for as long as nothing has to wait ([`start_now`], [`Conn::run_now`]): a
//! request that came with its connection, or woke it from the idle set, is read,
//! answered and written on the caller's stack, and the connection parks again at
//! once. Only a step that must wait (a full socket, a partial head or body, a
//! dynamic answer, a lingering close) moves it into a task, which goes on from
//! that step ([`Conn::run_from`]). Until then its socket is not registered with
//! tokio's reactor ([`Sock`]): a connection answered and closed at once makes no
//! `epoll_ctl` call at all.
//!
//! An HTTPS connection runs the same loop with a [`tls::Session`]: reads decrypt
//! through it and [`Conn::flush`] hands the batch to [`tls::flush`]; everything
//! else (parsing, answering, deadlines, logging) is shared. The plain path pays one
//! branch per read and per flush.
//!
//! # Layout
//!
//! As hyper splits its HTTP/1 connection into io, conn and dispatch (answering
//! is [`crate::dispatch`]'s here too):
//!
//! - `io.rs`: the socket layer: [`Sock`], the buffers lent by the worker's pool,
//!   reads (a direct `recv`, tokio's readiness, TLS) and writes (`sendmsg`,
//!   `sendfile`, the cork of the last batch, TLS), the lingering close.
//! - `machine.rs`: the state machine: [`Conn`], the steps and phases it goes
//!   through, parsing and answering each batch, deadlines, the in-flight count.
//! - `park.rs`: serving without a task ([`start_now`],
//!   [`resume_now`](park::resume_now)), the wait for the next request in a
//!   task, parking in the worker's [`IdleSet`](crate::idle::IdleSet), and the
//!   loop that resumes parked connections ([`run_parking`]).
//! - `log.rs`: counting and logging each written batch ([`log_written`], which
//!   HTTP/2 streams use too).

mod io;
mod log;
mod machine;
mod park;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use crate::shared::Shared;
use crate::tls;

pub(crate) use io::Sock;
pub(crate) use log::log_written;
use machine::{Conn, Step};
pub(crate) use park::{can_start_now, close_parked, run_parking, start_now};

/// Where a connection stands when its task starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin {
    pub(crate) peer: SocketAddr,
    /// Requests answered before (non-zero for a connection woken from parking).
    pub(crate) served: u32,
    pub(crate) born: Instant,
    /// The site a TLS client's SNI named (the default site for an unknown name);
    /// `None` without TLS or without SNI.
    pub(crate) sni: Option<u32>,
}

impl Origin {
    /// A connection just accepted.
    pub(crate) fn accepted(peer: SocketAddr) -> Origin {
        Origin {
            peer,
            served: 0,
            born: Instant::now(),
            sni: None,
        }
    }
}

/// Serves a connection until it closes or parks; `tls` for an HTTPS connection
/// whose handshake is done.
pub(crate) async fn serve(
    stream: TcpStream,
    origin: Origin,
    shared: Arc<Shared>,
    permit: OwnedSemaphorePermit,
    tls: Option<Box<tls::Session>>,
) {
    let mut conn = Conn::new(Sock::Tokio(stream), origin, shared, tls);
    let exit = conn.run_from(Step::NeedHead).await;
    conn.end(exit, permit);
}
