//! The connection's socket layer: the socket ([`Sock`]), the read and write
//! buffers (lent by the worker's pool, given back while idle), reads (a direct
//! `recv` first, then through tokio's readiness, or decrypted by TLS), writes
//! (`sendmsg` of the memory parts, `sendfile` of files, the last batch corked,
//! or encrypted by TLS), and the lingering close. [`discard_received`] also
//! serves parked sockets, which have no [`Conn`].

use std::io::{self, IoSlice};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use rustix::net::{SendAncillaryBuffer, SendFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::machine::{Conn, Phase, Step};
use crate::local;
use crate::output::MAX_SENDFILE_CHUNK;
use crate::tls;

/// A connection's socket. Served without a task, a new connection is not
/// registered with tokio's reactor: answered and closed at once, it costs no
/// `epoll_ctl` to add it and none to remove it. It is registered the first time
/// it has to wait, in a task or parked.
#[derive(Debug)]
pub(crate) enum Sock {
    /// Not known to the reactor; only non-blocking system calls are made on it.
    Raw(std::net::TcpStream),
    /// Registered: it can wait for readiness.
    Tokio(TcpStream),
    /// Its registration failed: the connection only closes.
    Lost,
}

impl Sock {
    /// Registers a raw socket with the reactor (`epoll_ctl(ADD)`); `false` when
    /// that failed (logged), the socket then `Lost`.
    pub(super) fn register(&mut self, peer: SocketAddr) -> bool {
        *self = match std::mem::replace(self, Sock::Lost) {
            Sock::Raw(raw) => {
                stoa_netkit::accept::register(raw, peer).map_or(Sock::Lost, Sock::Tokio)
            }
            registered => registered,
        };
        !matches!(self, Sock::Lost)
    }

    /// The registered socket, for a wait.
    pub(super) fn tokio(&self) -> &TcpStream {
        match self {
            Sock::Tokio(stream) => stream,
            Sock::Raw(_) | Sock::Lost => {
                unreachable!("invariant: a connection is registered before it waits")
            }
        }
    }

    /// The registered socket when it is one.
    pub(super) fn registered(&self) -> Option<&TcpStream> {
        match self {
            Sock::Tokio(stream) => Some(stream),
            Sock::Raw(_) | Sock::Lost => None,
        }
    }
}

impl std::os::fd::AsFd for Sock {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Sock::Raw(stream) => stream.as_fd(),
            Sock::Tokio(stream) => stream.as_fd(),
            Sock::Lost => {
                unreachable!("invariant: a connection whose registration failed only closes")
            }
        }
    }
}

/// How batches are written. It only moves forward, from `NoDelay` to `Last` for
/// the connection's final batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Writing {
    /// `TCP_NODELAY`, which every connection has from its listener
    /// (`server::configure_listener`): pipelined answers and file tails must not
    /// wait for the peer's delayed ACK.
    NoDelay,
    /// The batch being written is the connection's last: it is corked (`MSG_MORE`,
    /// and `TCP_CORK` before a file, `corked` once set) so the data leaves with the
    /// FIN of the close in as few packets as possible, as nginx's `tcp_nopush` does.
    Last { corked: bool },
}

/// How a read ended when it brought no bytes.
#[derive(Debug)]
pub(super) enum ReadEnd {
    /// The peer closed its side.
    Eof,
    /// The deadline for this phase passed.
    Timeout,
    /// The server is draining; close without another request.
    Draining,
    /// Idle long enough to park; the connection's idle deadline.
    Park(Instant),
    /// A socket error.
    Failed(io::Error),
}

/// Reads and drops every byte `socket` has received, without waiting, through
/// `buf`; `true` once the peer's end of input is seen. A socket closed with
/// unread bytes is reset, and the reset destroys whatever answer is still
/// queued for the peer: this goes before a close that should not do that.
pub(crate) fn discard_received(socket: &impl std::os::fd::AsFd, buf: &mut Vec<u8>) -> bool {
    if buf.capacity() == 0 {
        buf.reserve(4096);
    }
    loop {
        buf.clear();
        let spare = rustix::buffer::spare_capacity(buf);
        match rustix::net::recv(socket, spare, rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
    }
}

impl Conn {
    /// Reads more input for `step`, within that phase's deadline.
    pub(super) async fn read(&mut self, step: &Step) -> Result<(), ReadEnd> {
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        if matches!(step, Step::NeedHead) && self.buf.is_empty() {
            if self.phase == Phase::Fresh {
                self.phase = Phase::Idle;
                if self.read_direct()? {
                    return Ok(());
                }
            }
            return self.wait_for_request().await;
        }
        self.make_room();
        loop {
            match self.fill() {
                Ok(0) => return Err(ReadEnd::Eof),
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(ReadEnd::Failed(e)),
            }
            let deadline = self.deadline(step);
            match tokio::time::timeout_at(deadline.into(), self.stream.tokio().readable()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(ReadEnd::Failed(e)),
                Err(_) => return Err(ReadEnd::Timeout),
            }
        }
    }

    /// Reads what the socket has into the buffer: `Ok(0)` at the end of input,
    /// `WouldBlock` (and tokio's readiness cleared) when there is nothing.
    pub(super) fn fill(&mut self) -> io::Result<usize> {
        match &mut self.tls {
            None => {
                let spare = self.buf.capacity() - self.buf.len();
                let n = self.stream.tokio().try_read_buf(&mut self.buf)?;
                if n > 0 && n < spare && self.own_reactor {
                    self.forget_readiness();
                }
                Ok(n)
            }
            Some(tls) => tls.read_into(self.stream.tokio(), &mut self.buf),
        }
    }

    /// After a read that did not fill the buffer. TCP hands over everything queued
    /// up to the buffer's size, so the socket is empty now, but tokio still holds
    /// it readable: left alone, the wait for the next request would begin with a
    /// `recvfrom` that finds nothing (one per kept-alive request under the paced
    /// benchmark, about 2 % of the server's CPU). Clears that readiness without a
    /// system call, as a `WouldBlock` would, unless it says the peer closed or
    /// reset: that arrived before the read, and no new epoll edge would tell it
    /// again. Bytes that arrive after the read raise a new edge, which the reactor
    /// delivers as fresh readiness. Only on a single-threaded runtime, where the
    /// reactor cannot run between the look and the clear.
    pub(super) fn forget_readiness(&self) {
        // A raw socket has no readiness to forget.
        let Some(stream) = self.stream.registered() else {
            return;
        };
        let mut ready = std::pin::pin!(stream.ready(Interest::READABLE));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        if let std::task::Poll::Ready(Ok(ready)) = ready.as_mut().poll(&mut cx)
            && !ready.is_read_closed()
        {
            let _ = stream.try_io(Interest::READABLE, || {
                Err::<(), _>(io::ErrorKind::WouldBlock.into())
            });
        }
    }

    /// The first read of a new connection, as a plain system call (see
    /// [`Phase::Fresh`]). `Ok(false)` when nothing has arrived yet.
    pub(super) fn read_direct(&mut self) -> Result<bool, ReadEnd> {
        self.take_buffers();
        if self.tls.is_some() {
            // The request often came with the end of the handshake.
            return match self.fill() {
                Ok(0) => Err(ReadEnd::Eof),
                Ok(_) => {
                    self.set_busy(true);
                    Ok(true)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
                Err(e) => Err(ReadEnd::Failed(e)),
            };
        }
        let room = self.buf.capacity() - self.buf.len();
        let spare = rustix::buffer::spare_capacity(&mut self.buf);
        match rustix::net::recv(&self.stream, spare, rustix::net::RecvFlags::DONTWAIT) {
            Ok((0, _)) => Err(ReadEnd::Eof),
            Ok((n, _)) => {
                self.took(n, room);
                Ok(true)
            }
            Err(rustix::io::Errno::AGAIN) => {
                if self.own_reactor {
                    self.forget_readiness();
                }
                Ok(false)
            }
            Err(e) => Err(ReadEnd::Failed(e.into())),
        }
    }

    /// After a direct read brought `n > 0` bytes into `room`: the connection is
    /// in flight.
    pub(super) fn took(&mut self, n: usize, room: usize) {
        // tokio assumes an accepted socket readable, and a woken one stays
        // readable until told otherwise; unless the read filled the buffer, it
        // is not.
        if n < room && self.own_reactor {
            self.forget_readiness();
        }
        self.set_busy(true);
    }

    pub(super) fn take_buffers(&mut self) {
        let shared = Arc::clone(&self.shared);
        local::with(&shared, |local| {
            if self.buf.capacity() == 0 {
                self.buf = local.take_buffer();
            }
            if self.out.capacity() == 0 {
                self.out = local.take_output();
            }
        });
    }

    /// Ensures spare capacity for a read: moves unprocessed bytes to the front,
    /// and grows the buffer only as far as the head limit requires.
    fn make_room(&mut self) {
        if self.buf.capacity() == 0 {
            let shared = Arc::clone(&self.shared);
            local::with(&shared, |local| self.buf = local.take_buffer());
        }
        if self.buf.capacity() - self.buf.len() >= 1024 {
            return;
        }
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        // A head, or a head and the dynamic API's whole request body.
        let body = self.shared.max_dynamic_body;
        let max = self.shared.config.limits.head.max_head + body + local::READ_BUFFER;
        if self.buf.capacity() - self.buf.len() < 1024 && self.buf.capacity() < max {
            self.buf.reserve(self.buf.capacity());
        }
    }

    /// Gives the buffers back to the worker's pool.
    pub(super) fn release_buffers(&mut self) {
        let buf = std::mem::take(&mut self.buf);
        let out = std::mem::take(&mut self.out);
        self.pos = 0;
        let shared = Arc::clone(&self.shared);
        local::with(&shared, |local| {
            local.give_buffer(buf);
            local.give_output(out);
        });
    }

    /// Whether the client may have sent bytes we have not read. Closing a socket
    /// with unread input makes the kernel send a reset, which destroys responses
    /// still in the send buffer (RFC 9112 §9.6); such connections linger instead.
    ///
    /// Bytes left in our buffer say yes. Otherwise a kept-alive connection (the
    /// client may be pipelining) costs one non-blocking `recv` to find out; a
    /// connection closing after its first request, the common `Connection: close`
    /// case, is taken at its word, as nginx does.
    pub(super) fn input_pending(&mut self) -> bool {
        if self.pos < self.buf.len() {
            return true;
        }
        if self.client.served <= 1 {
            return false;
        }
        if self.tls.as_mut().is_some_and(|t| t.buffered()) {
            return true;
        }
        // Over TLS too: the raw bytes are thrown away, the connection is closing.
        self.buf.clear();
        self.pos = 0;
        self.take_buffers();
        let spare = rustix::buffer::spare_capacity(&mut self.buf);
        matches!(
            rustix::net::recv(&self.stream, spare, rustix::net::RecvFlags::DONTWAIT),
            Ok((n, _)) if n > 0
        )
    }

    /// The batch about to be written is the connection's last (see
    /// [`Writing::Last`]); a cork already set stays recorded.
    pub(super) fn write_last(&mut self) {
        if !matches!(self.writing, Writing::Last { .. }) {
            self.writing = Writing::Last { corked: false };
        }
    }

    /// Writes the queued responses.
    ///
    /// The first attempt is a plain system call: a socket that has room (the usual
    /// case) takes the bytes without a trip through the readiness machinery. Once a
    /// write would block, writes go through tokio's readiness tracking until the
    /// batch is out.
    pub(super) async fn flush(&mut self) -> io::Result<()> {
        if let Some(tls) = &mut self.tls {
            return tls::flush(tls, self.stream.tokio(), &mut self.out, &self.shared).await;
        }
        if self.write_now()? {
            return Ok(());
        }
        let send_timeout = self.shared.config.limits.send_timeout;
        loop {
            match tokio::time::timeout(send_timeout, self.stream.tokio().writable()).await {
                Ok(ready) => ready?,
                Err(_) => return Err(io::ErrorKind::TimedOut.into()),
            }
            while !self.out.is_done() {
                match (self.stream.tokio()).try_io(Interest::WRITABLE, || self.write_some()) {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => self.out.advance(n as u64),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
            if self.out.is_done() {
                return Ok(());
            }
        }
    }

    /// Writes the queued batch with plain system calls for as long as the socket
    /// takes it (plain HTTP only): `Ok(true)` once it is all out, `Ok(false)` when
    /// the socket is full.
    pub(super) fn write_now(&mut self) -> io::Result<bool> {
        if self.writing == (Writing::Last { corked: false }) && self.out.has_file() {
            // Best effort: without the cork the bytes just leave sooner.
            let corked = rustix::net::sockopt::set_tcp_cork(&self.stream, true).is_ok();
            self.writing = Writing::Last { corked };
        }
        while !self.out.is_done() {
            match self.write_some() {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.out.advance(n as u64),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// One system call writing from the cursor: `sendfile` for a file segment,
    /// `sendmsg` for the memory segments before the next file.
    fn write_some(&self) -> io::Result<usize> {
        let Some(file) = self.out.file_at_cursor() else {
            return self.send_memory();
        };
        let mut offset = file.offset;
        let chunk = file.len.min(MAX_SENDFILE_CHUNK as u64) as usize;
        rustix::fs::sendfile(&self.stream, &**file.fd, Some(&mut offset), chunk)
            .map_err(io::Error::from)
    }

    /// One `sendmsg` of the memory segments at the cursor, with `MSG_MORE` when a
    /// file follows (so the head and the first file bytes share packets) or when the
    /// connection closes next (the close pushes the data out with its FIN).
    fn send_memory(&self) -> io::Result<usize> {
        let mut iov = [IoSlice::new(&[]); 64];
        let (n, file_next) = self.out.fill_iovecs(&mut iov);
        let mut flags = SendFlags::NOSIGNAL | SendFlags::DONTWAIT;
        if file_next || matches!(self.writing, Writing::Last { .. }) {
            flags |= SendFlags::MORE;
        }
        rustix::net::sendmsg(
            &self.stream,
            &iov[..n],
            &mut SendAncillaryBuffer::default(),
            flags,
        )
        .map_err(io::Error::from)
    }

    /// After an error answer: stop sending, read and discard what the client still
    /// sends for a while, so our response is not destroyed by a reset (nginx's
    /// lingering close).
    pub(super) async fn linger(&mut self) {
        let limits = &self.shared.config.limits;
        let (idle, total) = (limits.linger_idle, limits.linger_timeout);
        if let Some(tls) = &mut self.tls {
            tls.close(self.stream.tokio());
        }
        if rustix::net::shutdown(&self.stream, rustix::net::Shutdown::Write).is_err() {
            return;
        }
        let end = Instant::now() + total;
        self.buf.clear();
        self.pos = 0;
        self.make_room();
        // What the client has sent already is read before a draining server may
        // stop waiting for this connection and close it.
        if discard_received(&self.stream, &mut self.buf) {
            return;
        }
        // The answer is out: shutdown need not wait for this.
        self.set_busy(false);
        loop {
            let deadline = end.min(Instant::now() + idle);
            if tokio::time::timeout_at(deadline.into(), self.stream.tokio().readable())
                .await
                .is_err()
            {
                return;
            }
            self.buf.clear();
            match self.stream.tokio().try_read_buf(&mut self.buf) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    }
}
