//! The handshake of an accepted HTTPS connection, within its first request's
//! head deadline: the ClientHello read with no handshake slot held, then, with
//! one of the worker's slots, the server's answer, and the rest of the
//! handshake without it.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use rustls::ServerConfig;
use rustls::server::AcceptedAlert;
use stoa_netkit::metrics::Handshake;
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use super::session::{Session, Socket};
use super::setup::Acceptor;
use crate::shared::Shared;

/// Longest ClientHello read before it is complete. A real one is 0.2 to 2 KiB
/// (a post-quantum key share included); rustls would join handshake fragments up
/// to 64 KiB, which a stalled connection would keep in memory.
const MAX_CLIENT_HELLO: usize = 16 * 1024;

/// Handshakes a connection from `peer`, accepted at `born`, and returns its
/// session and the site its SNI named. `None` for a client whose handshake
/// fails or times out (logged): nothing is answered, the connection just closes
/// (after the alert rustls chose, if any).
pub(crate) async fn accept(
    stream: &TcpStream,
    peer: SocketAddr,
    born: Instant,
    shared: &Shared,
    acceptor: Acceptor,
) -> Option<(Box<Session>, Option<u32>)> {
    let deadline = born + shared.config.limits.head_timeout;
    // Flights and responses are written whole, with the listener's TCP_NODELAY
    // (`server::configure_listener`): Nagle would only delay their tails.
    let shaken = tokio::time::timeout_at(deadline.into(), async {
        // No slot while the client is still sending its ClientHello: a client that
        // stalls there must not make complete ones wait (issue 21).
        let hello = client_hello(stream).await?;
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
        handshake(stream, hello, config, slot)
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
        Ok(Ok(shaken)) => Some(shaken),
        Ok(Err(e)) => {
            tracing::debug!("{peer}: TLS handshake failed: {e}");
            None
        }
        Err(_) => {
            tracing::debug!("{peer}: TLS handshake timed out");
            None
        }
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
