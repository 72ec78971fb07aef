//! The buffered I/O of one line-protocol connection (SMTP, POP3): the one type that
//! owns the socket and its buffers, so a server's connection loop and its command
//! handlers see unread bytes and a reply queue, never the socket.
//!
//! [`LineIo`] owns the [`Stream`] (plain, or TLS after an upgrade), the read buffer
//! and the output queue:
//!
//! - [`LineIo::unread`] is what has arrived and not been used yet: the protocol
//!   session parses from it, and the loop [`LineIo::consume`]s what it used.
//! - [`LineIo::read`] waits for more input, the caller's deadline or (when asked)
//!   the shutdown signal, and says which came first as a [`ReadEnd`].
//! - [`LineIo::out`] is the queue replies are written into; [`LineIo::flush`] sends
//!   it within a timeout.
//! - [`LineIo::start_tls`] drops the buffered plaintext and runs the TLS handshake
//!   (STARTTLS, STLS, or TLS from the first byte).
//!
//! The read buffer is bounded: it never holds more than the `max_buffered` bytes
//! given to [`LineIo::new`]. Each read takes at most what still fits, and a read with
//! the buffer full of unread bytes fails (`InvalidData`) rather than grow it. The
//! sessions never get there: each consumes every line it can see, and discards an
//! overlong line as it arrives.
//!
//! It does not parse (the sans-IO protocol crates do), compute deadlines or keep
//! protocol state (the servers do, and pass the deadline to each read), or know the
//! peer. [`Flow`] is the loop's own decision, shared so every line server's handlers
//! answer the same way.

use std::io;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::TlsAcceptor;

use crate::metrics::Handshake;
use crate::shutdown::Shutdown;
use crate::tls::Stream;

#[cfg(test)]
mod tests;

/// Initial capacity of the output queue: a few replies; a longer batch grows it.
const DEFAULT_OUT_CAPACITY: usize = 512;

/// The most capacity a buffer keeps once the command that grew it is done.
const KEPT_CAPACITY: usize = 64 * 1024;

/// How a wait for input ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadEnd {
    /// Bytes arrived: [`LineIo::unread`] has more.
    Data,
    /// The peer closed its side.
    Eof,
    /// The deadline passed first.
    Timeout,
    /// The shutdown signal came first (or had already come).
    Draining,
}

/// Whether a connection loop goes on after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Take the next command.
    Continue,
    /// Write out what is queued and close.
    Close,
}

/// One connection's stream, read buffer and output queue.
#[derive(Debug)]
pub struct LineIo {
    stream: Stream,
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed. They are dropped at the next read, so
    /// consuming a line does not move the rest of the buffer.
    start: usize,
    out: Vec<u8>,
    /// Room reserved before each read.
    read_chunk: usize,
    /// The most bytes `buf` ever holds.
    max_buffered: usize,
}

impl LineIo {
    /// Wraps `stream`. Each read reserves room for `read_chunk` more bytes (but never
    /// past `max_buffered`), and the buffer never holds more than `max_buffered`.
    pub fn new(stream: Stream, read_chunk: usize, max_buffered: usize) -> LineIo {
        LineIo {
            stream,
            buf: Vec::with_capacity(read_chunk),
            start: 0,
            out: Vec::with_capacity(DEFAULT_OUT_CAPACITY),
            read_chunk,
            max_buffered,
        }
    }

    /// The bytes received and not consumed yet.
    pub fn unread(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Marks the first `n` unread bytes as used (at most all of them).
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.buf.len() - self.start, "consumed past the input");
        self.start = (self.start + n).min(self.buf.len());
    }

    /// The output queue: replies are written into it, and [`LineIo::flush`] sends it.
    pub fn out(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// The stream itself, for a caller that stops speaking the line protocol and
    /// relays bytes (the POP3 proxy after a login). Take [`LineIo::unread`] first
    /// and [`LineIo::flush`] the queue: the stream knows neither.
    pub fn stream_mut(&mut self) -> &mut Stream {
        &mut self.stream
    }

    /// How many bytes are queued and not sent yet.
    pub fn queued(&self) -> usize {
        self.out.len()
    }

    /// Waits for more input until `deadline`. With `shutdown`, a shutdown (even one
    /// that came before the call) ends the wait as [`ReadEnd::Draining`]; without
    /// it, the wait ignores shutdown (SMTP in the middle of a message).
    ///
    /// The consumed bytes are dropped first. A read never takes more than still fits
    /// in `max_buffered`; with no room left it fails with `InvalidData`.
    pub async fn read(
        &mut self,
        deadline: Instant,
        shutdown: Option<&mut Shutdown>,
    ) -> io::Result<ReadEnd> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        // A buffer that grew for one large command (an APPEND's literal, a long
        // SMTP line) is not kept for the rest of the session.
        if self.buf.capacity() > KEPT_CAPACITY.max(self.read_chunk)
            && self.buf.len() <= self.read_chunk
        {
            self.buf.shrink_to(self.read_chunk);
        }
        // Nor an output queue that grew for one large answer (a FETCH of a big
        // message, a long listing), once it is sent.
        if self.out.is_empty() && self.out.capacity() > KEPT_CAPACITY {
            self.out = Vec::with_capacity(DEFAULT_OUT_CAPACITY);
        }
        if shutdown.as_ref().is_some_and(|s| s.is_triggered()) {
            return Ok(ReadEnd::Draining);
        }
        let room = self.max_buffered.saturating_sub(self.buf.len());
        if room == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "read buffer full without a complete line",
            ));
        }
        self.buf.reserve(self.read_chunk.min(room));
        let deadline = tokio::time::Instant::from_std(deadline);
        // `room` bounds what this read may take; `reserve` only made it available.
        let mut limited = (&mut self.stream).take(room as u64);
        tokio::select! {
            read = limited.read_buf(&mut self.buf) => match read? {
                0 => Ok(ReadEnd::Eof),
                _ => Ok(ReadEnd::Data),
            },
            () = tokio::time::sleep_until(deadline) => Ok(ReadEnd::Timeout),
            () = wait_for(shutdown) => Ok(ReadEnd::Draining),
        }
    }

    /// [`LineIo::read`] for a connection that may stay silent for long (an IMAP
    /// session in IDLE): with nothing unread and nothing queued, the read buffer
    /// and the output queue are given back first, and a plain connection waits for
    /// the socket to become readable before a buffer is taken again. An idle
    /// session then holds no buffer at all: 4.5 KiB less each, which at ten
    /// thousand sessions in IDLE is 45 MB. A TLS connection keeps its buffer (its
    /// plaintext may already sit decrypted in the TLS layer, where readiness of the
    /// socket says nothing).
    pub async fn read_parked(
        &mut self,
        deadline: Instant,
        mut shutdown: Option<&mut Shutdown>,
    ) -> io::Result<ReadEnd> {
        if self.start == self.buf.len() && self.out.is_empty() {
            self.buf = Vec::new();
            self.start = 0;
            self.out = Vec::new();
            if let Stream::Plain(tcp) = &self.stream {
                if shutdown.as_ref().is_some_and(|s| s.is_triggered()) {
                    return Ok(ReadEnd::Draining);
                }
                let at = tokio::time::Instant::from_std(deadline);
                tokio::select! {
                    ready = tcp.readable() => ready?,
                    () = tokio::time::sleep_until(at) => return Ok(ReadEnd::Timeout),
                    () = wait_for(shutdown.as_deref_mut()) => return Ok(ReadEnd::Draining),
                }
            }
        }
        self.read(deadline, shutdown).await
    }

    /// Writes the queued bytes out (and flushes TLS) within `send_timeout`; a peer
    /// that takes longer gets `TimedOut`. Nothing queued, nothing written.
    pub async fn flush(&mut self, send_timeout: Duration) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        self.stream
            .write_all_within(&self.out, send_timeout)
            .await?;
        self.out.clear();
        Ok(())
    }

    /// Upgrades the plain stream to TLS, the handshake within `timeout`. Whatever was
    /// buffered is dropped first: nothing read in clear text survives into the TLS
    /// session. On failure the connection is unusable (every later I/O fails).
    pub async fn start_tls(&mut self, acceptor: &TlsAcceptor, timeout: Duration) -> io::Result<()> {
        self.buf.clear();
        self.start = 0;
        let result = match tokio::time::timeout(timeout, self.stream.start_tls(acceptor)).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "TLS handshake timed out",
            )),
        };
        crate::metrics::record_handshake(match (&result, &self.stream) {
            (Ok(()), Stream::Tls(tls)) => Handshake::of(tls.get_ref().1),
            _ => Handshake::Failed,
        });
        result
    }

    /// Shuts the write side down (a TLS close_notify first), within `timeout`.
    pub async fn shutdown(&mut self, timeout: Duration) -> io::Result<()> {
        match tokio::time::timeout(timeout, self.stream.shutdown()).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "shutdown timed out",
            )),
        }
    }
}

/// Resolves at shutdown, or never without a signal to wait for.
async fn wait_for(shutdown: Option<&mut Shutdown>) {
    match shutdown {
        Some(shutdown) => shutdown.wait().await,
        None => std::future::pending().await,
    }
}
