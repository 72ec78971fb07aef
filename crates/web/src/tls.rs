//! HTTPS: the TLS handshake of an accepted connection, and the TLS side of the
//! connection loop's reads and writes.
//!
//! rustls is driven sans-IO over the connection's own non-blocking socket, with the
//! readiness handling of the plain path (a direct system call first, tokio's
//! readiness after a `WouldBlock`), so `conn.rs` keeps one loop for both:
//!
//! - [`serve`] reads the ClientHello (rustls' `Acceptor`, at most 16 KiB), then
//!   takes one of the worker's handshake slots ([`Acceptor`]) to answer it, runs the
//!   rest of the handshake, and hands the connection to `conn::serve` with its
//!   [`Session`]. The slot is held only from a complete ClientHello until the
//!   server's flight has been written: the key exchange and signature, the part
//!   that costs the server. A client that stalls before or after holds no slot,
//!   so it cannot make complete ClientHellos wait; it holds only its connection
//!   (within `max_connections`). Everything counts against the first request's head
//!   deadline, so a client that never finishes its handshake is closed like one
//!   that never finishes its request head.
//! - [`Session::read_into`] decrypts into the connection's read buffer.
//! - [`flush`] encrypts the write queue in batches of [`TLS_BATCH`] bytes: memory
//!   segments (heads, cached file bodies) are handed to rustls as they are, file
//!   ranges are read into the worker's scratch buffer (there is no `sendfile`
//!   without kernel TLS), rustls cuts 16 KiB records, and each batch leaves in one
//!   `sendmsg`.
//!
//! TLS connections never park when idle: parking hands a bare socket to the
//! worker's epoll set, and the TLS state would have to be kept beside it. An idle
//! HTTPS connection stays in its task until the keep-alive timeout.

use std::io::{self, IoSlice, Read as _};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Poll, ready};

use rustix::net::{RecvFlags, SendAncillaryBuffer, SendFlags};
use rustls::server::AcceptedAlert;
use rustls::{ServerConfig, ServerConnection};
use stoa_netkit::metrics::Handshake;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::conn::{self, Origin};
use crate::local::{self, TLS_BATCH};
use crate::output::{MAX_IOVECS, Output};
use crate::server::Shared;

/// The protocols offered by ALPN, in the server's order of preference: HTTP/2
/// first unless `[web] http2 = false` (HTTP/1.0 clients send no ALPN, and a
/// client offering neither gets HTTP/1.1 with no ALPN answer).
pub(crate) fn alpn(http2: bool) -> &'static [&'static [u8]] {
    const BOTH: &[&[u8]] = &[b"h2", b"http/1.1"];
    const HTTP1: &[&[u8]] = &[b"http/1.1"];
    match http2 {
        true => BOTH,
        false => HTTP1,
    }
}

/// A TLS listener in one worker: its configurations and the worker's handshake
/// slots (shared by the worker's TLS listeners).
#[derive(Debug, Clone)]
pub(crate) struct Acceptor {
    pub(crate) configs: Arc<Configs>,
    pub(crate) handshakes: Arc<Semaphore>,
}

/// An HTTPS listener's TLS configurations: one per site with certificates of
/// its own, and the listener's, for the sites without. The ClientHello's SNI
/// name picks the site ([`crate::vhost::Names`], as a `Host` would), and the
/// site its configuration; no SNI, or a name no site has, picks the default
/// site. Each configuration chooses among its own certificates by SNI again.
#[derive(Debug)]
pub(crate) struct Configs {
    /// Per site: its own configuration, or `None` for the listener's.
    by_site: Box<[Option<Arc<ServerConfig>>]>,
    /// The listener's certificates; without them, the default site's.
    listener: Arc<ServerConfig>,
}

/// Per site, its own TLS configuration (`None`: the listener's).
pub(crate) type SiteConfigs = Vec<Option<Arc<ServerConfig>>>;

/// Builds the TLS configuration of every site with certificates, once for all
/// listeners; the error names the site (its index) whose files are wrong.
pub(crate) fn site_configs(
    sites: &[crate::config::SiteConfig],
    alpn: &[&[u8]],
) -> Result<SiteConfigs, (usize, Vec<stoa_netkit::tls::Error>)> {
    sites
        .iter()
        .enumerate()
        .map(|(i, site)| {
            if site.tls.is_empty() {
                return Ok(None);
            }
            stoa_netkit::tls::server_config(&site.tls, alpn)
                .map(Some)
                .map_err(|e| (i, e))
        })
        .collect()
}

impl Configs {
    /// A listener with certificates `certs` (may be empty when the default site
    /// has its own) over the sites' configurations.
    pub(crate) fn new(
        certs: &[stoa_netkit::tls::CertKeyFiles],
        by_site: &[Option<Arc<ServerConfig>>],
        default: usize,
        alpn: &[&[u8]],
    ) -> Result<Configs, Vec<stoa_netkit::tls::Error>> {
        let listener = match by_site.get(default).cloned().flatten() {
            Some(default) if certs.is_empty() => default,
            _ => stoa_netkit::tls::server_config(certs, alpn)?,
        };
        Ok(Configs {
            by_site: by_site.into(),
            listener,
        })
    }

    /// The configuration for a client whose SNI picked `site`.
    fn for_site(&self, site: usize) -> Arc<ServerConfig> {
        match self.by_site.get(site) {
            Some(Some(config)) => Arc::clone(config),
            _ => Arc::clone(&self.listener),
        }
    }
}

/// Longest ClientHello read before it is complete. A real one is 0.2 to 2 KiB
/// (a post-quantum key share included); rustls would join handshake fragments up
/// to 64 KiB, which a stalled connection would keep in memory.
const MAX_CLIENT_HELLO: usize = 16 * 1024;

/// Handshakes, then serves the connection. Nothing is answered to a client whose
/// handshake fails or times out: the connection just closes (after the alert
/// rustls chose, if any).
pub(crate) async fn serve(
    stream: TcpStream,
    origin: Origin,
    shared: Arc<Shared>,
    permit: OwnedSemaphorePermit,
    acceptor: Acceptor,
) {
    let deadline = origin.born + shared.config.limits.head_timeout;
    // Flights and responses are written whole, with the listener's TCP_NODELAY
    // (`server::configure_listener`): Nagle would only delay their tails.
    let shaken = tokio::time::timeout_at(deadline.into(), async {
        // No slot while the client is still sending its ClientHello: a client that
        // stalls there must not make complete ones wait (issue 21).
        let hello = client_hello(&stream).await?;
        // The site the client's SNI names: its certificate, and the site the
        // connection's requests must be for (421 otherwise).
        let sni = hello.client_hello().server_name().map(|name| {
            let site = shared.names.find(Some(name.as_bytes()));
            u32::try_from(site).unwrap_or(u32::MAX)
        });
        let config = acceptor
            .configs
            .for_site(sni.map_or(shared.names.default_site(), |s| s as usize));
        let slot = acceptor
            .handshakes
            .acquire_owned()
            .await
            .map_err(io::Error::other)?;
        handshake(&stream, hello, config, slot)
            .await
            .map(|session| (session, sni))
    })
    .await;
    let outcome = match &shaken {
        Ok(Ok((session, _))) => Handshake::of(&session.conn),
        _ => Handshake::Failed,
    };
    stoa_netkit::metrics::record_handshake(outcome);
    match shaken {
        Ok(Ok((session, sni))) => {
            let origin = Origin { sni, ..origin };
            if session.conn.alpn_protocol() == Some(b"h2") {
                let io = Io {
                    stream,
                    session,
                    unsent: 0,
                    cork: Cork::default(),
                    shut: false,
                };
                crate::h2::serve(io, origin, shared, permit).await;
            } else {
                conn::serve(stream, origin, shared, permit, Some(session)).await;
            }
        }
        Ok(Err(e)) => tracing::debug!("{}: TLS handshake failed: {e}", origin.peer),
        Err(_) => tracing::debug!("{}: TLS handshake timed out", origin.peer),
    }
}

/// Reads until the ClientHello is complete (rustls' [`rustls::server::Acceptor`]
/// says when), at most [`MAX_CLIENT_HELLO`] bytes. Until then the connection holds
/// only its buffer: no handshake slot, no key material.
async fn client_hello(stream: &TcpStream) -> io::Result<rustls::server::Accepted> {
    let mut acceptor = rustls::server::Acceptor::default();
    // The ClientHello has usually arrived with the connection: try at once.
    let mut direct = true;
    let mut read = 0;
    loop {
        if read >= MAX_CLIENT_HELLO {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "ClientHello too long",
            ));
        }
        let mut socket = Limited {
            socket: Socket { stream, direct },
            left: MAX_CLIENT_HELLO - read,
        };
        match acceptor.read_tls(&mut socket) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => read += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                direct = false;
                stream.readable().await?;
                continue;
            }
            Err(e) => return Err(e),
        }
        match acceptor.accept() {
            Ok(Some(hello)) => return Ok(hello),
            Ok(None) => {}
            Err((e, alert)) => return Err(refused(stream, e, alert)),
        }
    }
}

/// Sends the alert of a refused ClientHello if the socket takes it now, and
/// returns the error.
fn refused(stream: &TcpStream, e: rustls::Error, mut alert: AcceptedAlert) -> io::Error {
    // A plain system call: the socket may be too new for tokio to know it
    // writable, and nothing waits after this.
    let direct = true;
    let _ = alert.write_all(&mut Socket { stream, direct });
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Runs the server side of the handshake to its end, from a complete ClientHello.
/// `slot` is held while the ClientHello is answered (key exchange, signature) and
/// the server's flight is written, the part that costs the server; waiting for the
/// client's answer holds none, so a client that stalls there only holds its
/// connection (within the head deadline).
async fn handshake(
    stream: &TcpStream,
    hello: rustls::server::Accepted,
    config: Arc<ServerConfig>,
    slot: OwnedSemaphorePermit,
) -> io::Result<Box<Session>> {
    let mut conn = hello
        .into_connection(config)
        .map_err(|(e, alert)| refused(stream, e, alert))?;
    // What is handed to rustls is bounded by [`TLS_BATCH`] per flush instead.
    conn.set_buffer_limit(None);
    let mut session = Box::new(Session {
        conn,
        closing: false,
    });
    let mut slot = Some(slot);
    let mut direct = true;
    loop {
        match session.send_pending(stream, direct) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                direct = false;
                stream.writable().await?;
                continue;
            }
            Err(e) => return Err(e),
        }
        // The server's flight is out.
        drop(slot.take());
        if !session.conn.is_handshaking() {
            return Ok(session);
        }
        match session.conn.read_tls(&mut Socket { stream, direct }) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(_) => session.process(stream)?,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                direct = false;
                stream.readable().await?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The TLS state of an established connection.
#[derive(Debug)]
pub(crate) struct Session {
    conn: ServerConnection,
    /// `close_notify` was queued.
    closing: bool,
}

impl Session {
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
    fn process(&mut self, stream: &TcpStream) -> io::Result<()> {
        let state = self.conn.process_new_packets();
        if self.conn.wants_write() {
            let _ = self.send_pending(stream, false);
        }
        state
            .map(drop)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    /// Writes every TLS byte rustls holds; `WouldBlock` when the socket is full.
    fn send_pending(&mut self, stream: &TcpStream, direct: bool) -> io::Result<()> {
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

/// The socket as rustls sees it: non-blocking reads and writes, as plain system
/// calls when `direct` (tokio has not seen the socket block yet), otherwise through
/// tokio's readiness, so a `WouldBlock` clears it and the next wait is real.
struct Socket<'s> {
    stream: &'s TcpStream,
    direct: bool,
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

/// A [`Socket`] that reads at most `left` more bytes.
struct Limited<'s> {
    socket: Socket<'s>,
    left: usize,
}

impl io::Read for Limited<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let end = buf.len().min(self.left);
        let n = self.socket.read(&mut buf[..end])?;
        self.left -= n;
        Ok(n)
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
