//! An established TLS connection as HTTP/2's byte stream ([`Io`]), and the
//! [`Cork`] that holds its flushes back while the answers to one read are
//! queued.

use std::io::{self, IoSlice, Read as _};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::session::{Session, Socket};
use crate::local::TLS_BATCH;
use crate::output::MAX_IOVECS;

/// An established TLS connection as a byte stream for a framing layer that does
/// its own buffering (HTTP/2, through the h2 crate): reads decrypt what has
/// arrived; writes encrypt into rustls and are sent on `poll_flush`, or as soon
/// as a [`TLS_BATCH`] of them is waiting. So the frames of every stream answered
/// between two flushes leave in one `sendmsg`, and a frame's header and payload
/// (a vectored write) share a TLS record: measured on 1 KiB responses over h2,
/// sending at each write cost one system call and two records per response.
/// Writes push back (`Pending`) while a batch is waiting for a full socket, so
/// what is buffered beyond the socket stays within one batch.
///
/// h2 flushes each time its connection is polled, and the connection is polled
/// once per stream accepted; while a [`Cork`] holds, a flush of less than a batch
/// is put off, so the answers to the streams of one read leave together.
#[derive(Debug)]
pub(crate) struct Io {
    stream: TcpStream,
    session: Box<Session>,
    /// Plaintext bytes encrypted since the socket last took everything.
    unsent: usize,
    cork: Cork,
    /// `close_notify` was queued by `poll_shutdown`.
    shut: bool,
}

/// Puts off an [`Io`]'s flushes while it holds (see there), and counts the
/// times the socket took everything that was waiting.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cork(Arc<CorkState>);

#[derive(Debug, Default)]
struct CorkState {
    held: AtomicBool,
    sent: AtomicU64,
}

impl Cork {
    /// Holds back flushes of less than a batch until [`Cork::release`].
    pub(crate) fn hold(&self) {
        self.0.held.store(true, Ordering::Relaxed);
    }

    /// Lets flushes through again; the next one sends what was held.
    pub(crate) fn release(&self) {
        self.0.held.store(false, Ordering::Relaxed);
    }

    /// How many times the socket has taken every byte written so far: it
    /// changes while the client reads.
    pub(crate) fn sent(&self) -> u64 {
        self.0.sent.load(Ordering::Relaxed)
    }

    fn holds(&self) -> bool {
        self.0.held.load(Ordering::Relaxed)
    }

    fn count_sent(&self) {
        self.0.sent.fetch_add(1, Ordering::Relaxed);
    }
}

impl Io {
    /// HTTP/2's stream over `session`, established on `stream` (ALPN chose
    /// `h2`).
    pub(crate) fn new(stream: TcpStream, session: Box<Session>) -> Io {
        Io {
            stream,
            session,
            unsent: 0,
            cork: Cork::default(),
            shut: false,
        }
    }

    /// The cork of this stream's flushes.
    pub(crate) fn cork(&self) -> Cork {
        self.cork.clone()
    }

    /// This end's address (a CGI script's `SERVER_PORT`).
    pub(crate) fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.stream.local_addr()
    }

    /// Writes what rustls holds; `Pending` (with the waker registered) while the
    /// socket is full.
    fn poll_send(&mut self, cx: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
        loop {
            match self.session.send_pending(&self.stream, false) {
                Ok(()) => {
                    if self.unsent > 0 {
                        self.cork.count_sent();
                    }
                    self.unsent = 0;
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(self.stream.poll_write_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.session.conn.reader().read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                // The peer closed without `close_notify`: the end of input all the same.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Poll::Ready(Ok(())),
                Err(e) => return Poll::Ready(Err(e)),
            }
            let direct = false;
            match this.session.conn.read_tls(&mut Socket {
                stream: &this.stream,
                direct,
            }) {
                Ok(_) => this.session.process(&this.stream)?,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ready!(this.stream.poll_read_ready(cx))?;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.unsent >= TLS_BATCH {
            ready!(this.poll_send(cx))?;
        }
        // At most one batch more: the session has no buffer limit of its own.
        let mut room = TLS_BATCH;
        let mut taken = [IoSlice::new(&[]); MAX_IOVECS];
        let mut n = 0;
        for buf in bufs.iter().filter(|b| !b.is_empty()).take(MAX_IOVECS) {
            let part = &buf[..buf.len().min(room)];
            taken[n] = IoSlice::new(part);
            n += 1;
            room -= part.len();
            if room == 0 {
                break;
            }
        }
        let written = io::Write::write_vectored(&mut this.session.conn.writer(), &taken[..n])?;
        this.unsent += written;
        // A full batch goes now if the socket takes it; otherwise the next write
        // or the flush waits for it.
        if this.unsent >= TLS_BATCH {
            match this.session.send_pending(&this.stream, false) {
                Ok(()) => {
                    this.cork.count_sent();
                    this.unsent = 0;
                }
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Poll::Ready(Err(e)),
                Err(_) => {}
            }
        }
        Poll::Ready(Ok(written))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.cork.holds() {
            return Poll::Ready(Ok(()));
        }
        this.poll_send(cx)
    }

    fn poll_shutdown(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.shut {
            this.shut = true;
            this.session.closing = true;
            this.session.conn.send_close_notify();
        }
        ready!(this.poll_send(cx))?;
        let _ = rustix::net::shutdown(&this.stream, rustix::net::Shutdown::Write);
        Poll::Ready(Ok(()))
    }
}
