//! An established TLS connection as the HTTP/1 connection loop uses it: its
//! [`Session`] decrypts into the loop's read buffer, and [`flush`] encrypts the
//! write queue in batches, each sent in one `sendmsg`. Below both, the socket as
//! rustls sees it ([`Socket`]): non-blocking system calls, direct or through
//! tokio's readiness.

use std::io::{self, IoSlice, Read as _};

use rustix::net::{RecvFlags, SendAncillaryBuffer, SendFlags};
use rustls::ServerConnection;
use tokio::io::Interest;
use tokio::net::TcpStream;

use crate::local::{self, TLS_BATCH};
use crate::output::{MAX_IOVECS, Output};
use crate::shared::Shared;

/// The TLS state of an established connection.
#[derive(Debug)]
pub(crate) struct Session {
    pub(super) conn: ServerConnection,
    /// `close_notify` was queued.
    pub(super) closing: bool,
}

impl Session {
    /// Whether ALPN chose HTTP/2.
    pub(crate) fn chose_h2(&self) -> bool {
        self.conn.alpn_protocol() == Some(b"h2")
    }

    /// Decrypts what has arrived into `buf`'s spare capacity, reading the socket
    /// when rustls holds no plaintext. `Ok(0)` is the end of input (the peer's
    /// `close_notify`, or its FIN without one); `WouldBlock` means the socket is
    /// drained and nothing is buffered, so waiting for readability is right.
    pub(crate) fn read_into(&mut self, stream: &TcpStream, buf: &mut Vec<u8>) -> io::Result<usize> {
        loop {
            let start = buf.len();
            // rustls reads into initialised memory only.
            buf.resize(buf.capacity(), 0);
            let read = self.conn.reader().read(&mut buf[start..]);
            buf.truncate(start + *read.as_ref().unwrap_or(&0));
            match read {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
                Err(e) => return Err(e),
            }
            let direct = false;
            self.conn.read_tls(&mut Socket { stream, direct })?;
            self.process(stream)?;
        }
    }

    /// Whether decrypted bytes (or the end of input) are waiting in rustls, so the
    /// next [`Session::read_into`] returns without the socket being readable.
    pub(crate) fn buffered(&mut self) -> bool {
        self.conn.process_new_packets().map_or(true, |s| {
            s.plaintext_bytes_to_read() > 0 || s.peer_has_closed()
        })
    }

    /// Processes the records read. What rustls wants to send in reply (a
    /// `KeyUpdate`, an alert) is sent at once if the socket takes it, otherwise
    /// with the next flush. A protocol error is returned after its alert is sent.
    pub(super) fn process(&mut self, stream: &TcpStream) -> io::Result<()> {
        let state = self.conn.process_new_packets();
        if self.conn.wants_write() {
            let _ = self.send_pending(stream, false);
        }
        state
            .map(drop)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Writes every TLS byte rustls holds; `WouldBlock` when the socket is full.
    pub(super) fn send_pending(&mut self, stream: &TcpStream, direct: bool) -> io::Result<()> {
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut Socket { stream, direct })? == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
        }
        Ok(())
    }

    /// Sends `close_notify`, if the socket takes it now; the connection is closing
    /// and waits for nothing.
    pub(crate) fn close(&mut self, stream: &TcpStream) {
        if !self.closing {
            self.closing = true;
            self.conn.send_close_notify();
        }
        let _ = self.send_pending(stream, true);
    }

    /// Encrypts the next batch of the write queue; returns its plaintext length.
    fn encrypt(&mut self, out: &Output, scratch: &mut [u8]) -> io::Result<u64> {
        let mut iov = [IoSlice::new(&[]); MAX_IOVECS];
        let n = out.gather_plaintext(&mut iov, scratch, TLS_BATCH)?;
        let len: usize = iov[..n].iter().map(|s| s.len()).sum();
        // Without a buffer limit rustls takes everything (and cuts it into
        // records together, not one record per slice).
        let taken = io::Write::write_vectored(&mut self.conn.writer(), &iov[..n])?;
        debug_assert_eq!(taken, len, "rustls took part of a batch");
        Ok(taken as u64)
    }
}

/// Writes the queued responses through `session`: one batch is encrypted, sent
/// whole (waiting up to the send timeout whenever the socket is full), and only
/// then counted as written, so an aborted flush logs the bytes that left (to
/// within a batch).
pub(crate) async fn flush(
    session: &mut Session,
    stream: &TcpStream,
    out: &mut Output,
    shared: &Shared,
) -> io::Result<()> {
    let send_timeout = shared.config.limits.send_timeout;
    let mut direct = true;
    let mut batch = 0;
    loop {
        match session.send_pending(stream, direct) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                direct = false;
                match tokio::time::timeout(send_timeout, stream.writable()).await {
                    Ok(ready) => ready?,
                    Err(_) => return Err(io::ErrorKind::TimedOut.into()),
                }
                continue;
            }
            Err(e) => return Err(e),
        }
        out.advance(batch);
        if out.is_done() {
            return Ok(());
        }
        batch = local::with(shared, |l| session.encrypt(out, l.tls_scratch()))?;
    }
}

/// The socket as rustls sees it: non-blocking reads and writes, as plain system
/// calls when `direct` (tokio has not seen the socket block yet), otherwise through
/// tokio's readiness, so a `WouldBlock` clears it and the next wait is real.
pub(super) struct Socket<'s> {
    pub(super) stream: &'s TcpStream,
    pub(super) direct: bool,
}

impl Socket<'_> {
    fn io<R>(&self, interest: Interest, f: impl FnOnce() -> io::Result<R>) -> io::Result<R> {
        if self.direct {
            f()
        } else {
            self.stream.try_io(interest, f)
        }
    }
}

impl io::Read for Socket<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.io(Interest::READABLE, || {
            rustix::net::recv(self.stream, &mut *buf, RecvFlags::DONTWAIT)
                .map(|(n, _)| n)
                .map_err(io::Error::from)
        })
    }
}

impl io::Write for Socket<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.io(Interest::WRITABLE, || {
            rustix::net::sendmsg(
                self.stream,
                bufs,
                &mut SendAncillaryBuffer::default(),
                SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
            )
            .map_err(io::Error::from)
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
