//! A proxy's leg to its upstream server up to the relay (the POP3 and IMAP
//! proxies' login at a store host): the connection (plain, or TLS from the first
//! byte) within the connect timeout, reply lines bounded in length and each
//! within the reply timeout, sends within it too, and the in-protocol TLS
//! upgrade. Which reply is expected, and what it means, is the protocol's.
//!
//! Every byte from upstream is hostile: a line longer than the limit, a silence
//! longer than the timeout or a close ends the attempt with an I/O error, and
//! [`printable`] makes a reply safe to log.

use std::future::Future;
use std::io;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::tls::{Stream, client};

/// The conversation with an upstream server before the relay.
#[derive(Debug)]
pub struct Upstream {
    stream: Stream,
    /// What was read past the last line returned.
    buf: Vec<u8>,
    /// The longest wait for each reply (and each send).
    timeout: Duration,
    /// The longest reply line, line end included.
    max_line: usize,
}

/// How to reach an upstream server.
#[derive(Clone, Copy)]
pub struct Dial<'a> {
    /// `HOST:PORT`, resolved now.
    pub addr: &'a str,
    /// TLS from the first byte: the client and the name the certificate must bear.
    pub tls: Option<(&'a TlsConnector, &'a str)>,
    /// The longest wait for the TCP connection and the TLS handshake.
    pub connect_timeout: Duration,
    /// The longest wait for each reply line and each send.
    pub reply_timeout: Duration,
    /// The longest reply line accepted, line end included.
    pub max_line: usize,
}

impl std::fmt::Debug for Dial<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dial")
            .field("addr", &self.addr)
            .field("tls", &self.tls.map(|(_, host)| host))
            .finish_non_exhaustive()
    }
}

impl Upstream {
    /// Connects as `dial` says (no byte read yet).
    pub async fn connect(dial: Dial<'_>) -> io::Result<Upstream> {
        let connect = async {
            let tcp = TcpStream::connect(dial.addr).await?;
            let _ = tcp.set_nodelay(true);
            let mut stream = Stream::Plain(tcp);
            if let Some((connector, host)) = dial.tls {
                client::handshake(connector, host, &mut stream).await?;
            }
            Ok(stream)
        };
        let stream = within(dial.connect_timeout, connect).await?;
        Ok(Upstream {
            stream,
            buf: Vec::new(),
            timeout: dial.reply_timeout,
            max_line: dial.max_line,
        })
    }

    /// Sends `bytes` within the reply timeout.
    pub async fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all_within(bytes, self.timeout).await
    }

    /// One reply line, its line end included, within the timeout and the length
    /// limit.
    pub async fn line(&mut self) -> io::Result<Vec<u8>> {
        let (timeout, max) = (self.timeout, self.max_line);
        within(timeout, async {
            loop {
                if let Some(lf) = self.buf.iter().position(|&b| b == b'\n') {
                    let rest = self.buf.split_off(lf + 1);
                    return Ok(std::mem::replace(&mut self.buf, rest));
                }
                if self.buf.len() >= max {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "reply line too long",
                    ));
                }
                let mut chunk = vec![0u8; (max - self.buf.len()).min(16 * 1024)];
                let n = self.stream.read(&mut chunk).await?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the store host closed the connection",
                    ));
                }
                self.buf.extend_from_slice(&chunk[..n]);
            }
        })
        .await
    }

    /// Whether bytes were read past the last line (a server that talks out of turn).
    pub fn has_buffered(&self) -> bool {
        !self.buf.is_empty()
    }

    /// The TLS handshake after the protocol's upgrade command was accepted, within
    /// `timeout`; nothing may have followed the acceptance in clear text.
    pub async fn start_tls(
        &mut self,
        connector: &TlsConnector,
        host: &str,
        timeout: Duration,
    ) -> io::Result<()> {
        if self.has_buffered() {
            return Err(io::Error::other("data after the TLS upgrade's reply"));
        }
        within(
            timeout,
            client::handshake(connector, host, &mut self.stream),
        )
        .await
    }

    /// The stream, and the bytes read past the last line, for the relay.
    pub fn into_parts(self) -> (Stream, Vec<u8>) {
        (self.stream, self.buf)
    }
}

/// `line` without its line end (LF or CRLF).
pub fn strip_crlf(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A reply quoted for the log: its first 80 octets, each unprintable one a `?`.
pub fn printable(line: &[u8]) -> String {
    strip_crlf(line)
        .iter()
        .take(80)
        .map(|&b| match b {
            b' '..=b'~' => b as char,
            _ => '?',
        })
        .collect()
}

/// The error for a reply that is not the one expected, quoted for the log.
pub fn unexpected(what: &str, line: &[u8]) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected {what}: {:?}", printable(line)),
    )
}

/// `future` within `timeout`; a `TimedOut` error after it.
pub async fn within<T>(
    timeout: Duration,
    future: impl Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match tokio::time::timeout(timeout, future).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "timed out")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    async fn served(
        reply: &'static [u8],
        max_line: usize,
    ) -> (Upstream, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            s.write_all(reply).await.expect("write");
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink).await;
        });
        let dial = Dial {
            addr: &addr,
            tls: None,
            connect_timeout: Duration::from_secs(5),
            reply_timeout: Duration::from_millis(300),
            max_line,
        };
        (Upstream::connect(dial).await.expect("connect"), server)
    }

    #[tokio::test]
    async fn lines_are_bounded_in_length_and_time() {
        let (mut up, server) = served(b"* OK hi\r\n+OK two\r\nrest", 64).await;
        assert_eq!(up.line().await.expect("line"), b"* OK hi\r\n");
        assert_eq!(up.line().await.expect("line"), b"+OK two\r\n");
        let silent = up.line().await.expect_err("no line end in time");
        assert_eq!(silent.kind(), io::ErrorKind::TimedOut);
        let (_, rest) = up.into_parts();
        assert_eq!(rest, b"rest");
        server.abort();
        let (mut up, server) = served(&[b'x'; 100], 16).await;
        let long = up.line().await.expect_err("too long");
        assert_eq!(long.kind(), io::ErrorKind::InvalidData);
        server.abort();
    }

    #[test]
    fn replies_are_quoted_safely() {
        assert_eq!(printable(b"-ERR \x1b[31mno\r\n"), "-ERR ?[31mno");
        assert_eq!(printable(&[b'a'; 200]).len(), 80);
    }
}
