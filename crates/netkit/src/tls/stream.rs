//! A mail connection's byte stream: plain TCP, TLS after an in-protocol upgrade
//! (SMTP STARTTLS, POP3 STLS), or TLS from the start (POP3S); the server's side
//! of it, or the client's (the POP3 proxy's leg to a store host). Shared by the
//! mail servers; the web server drives rustls on its socket itself.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsStream;

/// Plain or TLS; `Upgrading` only while the handshake owns the socket.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP, as the server or as the client.
    Tls(Box<TlsStream<TcpStream>>),
    /// The handshake owns the socket (or it failed): every I/O fails.
    Upgrading,
}

impl Stream {
    /// Runs the TLS handshake over the plain stream. On failure the connection is
    /// gone (the stream is left `Upgrading`, and every later I/O fails).
    pub async fn start_tls(&mut self, acceptor: &tokio_rustls::TlsAcceptor) -> io::Result<()> {
        let Stream::Plain(tcp) = std::mem::replace(self, Stream::Upgrading) else {
            return Err(io::Error::other(
                "TLS upgrade on a stream that is not plain",
            ));
        };
        let tls = acceptor.accept(tcp).await?;
        *self = Stream::Tls(Box::new(TlsStream::Server(tls)));
        Ok(())
    }

    /// The client's side of [`Stream::start_tls`]: the handshake with the server
    /// `name` (its certificate must name it), over the plain stream.
    pub async fn start_tls_client(
        &mut self,
        connector: &tokio_rustls::TlsConnector,
        name: rustls::pki_types::ServerName<'static>,
    ) -> io::Result<()> {
        let Stream::Plain(tcp) = std::mem::replace(self, Stream::Upgrading) else {
            return Err(io::Error::other(
                "TLS upgrade on a stream that is not plain",
            ));
        };
        let tls = connector.connect(name, tcp).await?;
        *self = Stream::Tls(Box::new(TlsStream::Client(tls)));
        Ok(())
    }
}

impl Stream {
    /// Writes all of `buf` and flushes it (TLS holds records until flushed),
    /// within `timeout`; a client that takes longer gets `TimedOut`.
    pub async fn write_all_within(&mut self, buf: &[u8], timeout: Duration) -> io::Result<()> {
        let write = async {
            self.write_all(buf).await?;
            self.flush().await
        };
        match tokio::time::timeout(timeout, write).await {
            Ok(result) => result,
            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "send timed out")),
        }
    }
}

fn gone() -> io::Error {
    io::Error::new(
        io::ErrorKind::NotConnected,
        "connection lost in the TLS handshake",
    )
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Upgrading => Poll::Ready(Err(gone())),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Upgrading => Poll::Ready(Err(gone())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Upgrading => Poll::Ready(Err(gone())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Upgrading => Poll::Ready(Ok(())),
        }
    }
}
