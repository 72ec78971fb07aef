//! A CRLF line conversation over TCP, plain or TLS: send a line, read a line,
//! expect a reply prefix, upgrade to TLS in place (STARTTLS, STLS), expect the
//! close. The protocol's reply grammar (multi-line replies, dot-terminated lists)
//! is built on it in each crate's tests.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::{ClientConfig, ClientConnection, StreamOwned};

/// Default cap on connecting and on any single read or write: long enough for a
/// loaded machine, short enough that a hung test fails instead of hanging.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(10);

/// How many bytes one read asks for.
const READ_CHUNK: usize = 16 * 1024;

/// The socket under a [`LineConn`].
enum Wire {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
    /// Only while upgrading (or after a failed upgrade).
    Gone,
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Wire::Plain(s) => s.read(buf),
            Wire::Tls(s) => s.read(buf),
            Wire::Gone => Ok(0),
        }
    }
}

impl Write for Wire {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Wire::Plain(s) => s.write(buf),
            Wire::Tls(s) => s.write(buf),
            Wire::Gone => Err(io::ErrorKind::NotConnected.into()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Wire::Plain(s) => s.flush(),
            Wire::Tls(s) => s.flush(),
            Wire::Gone => Ok(()),
        }
    }
}

/// A client's side of a line-oriented conversation, with its own read buffer so
/// that pipelined replies are read one line at a time.
pub struct LineConn {
    wire: Wire,
    buf: Vec<u8>,
}

impl LineConn {
    /// Connects to `addr` with [`DEFAULT_IO_TIMEOUT`] on the connect, reads and
    /// writes.
    pub fn connect(addr: SocketAddr) -> LineConn {
        LineConn::from_stream(
            crate::net::connect(addr, DEFAULT_IO_TIMEOUT),
            DEFAULT_IO_TIMEOUT,
        )
    }

    /// Like [`LineConn::connect`], returning the error (the server may be gone).
    pub fn try_connect(addr: SocketAddr, timeout: Duration) -> io::Result<LineConn> {
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        Ok(LineConn::from_stream(stream, timeout))
    }

    /// A conversation over `stream` (for a socket set up by hand, e.g. bound to a
    /// chosen source address), with `timeout` on reads and writes.
    pub fn from_stream(stream: TcpStream, timeout: Duration) -> LineConn {
        crate::net::set_timeouts(&stream, timeout);
        LineConn {
            wire: Wire::Plain(stream),
            buf: Vec::new(),
        }
    }

    /// TLS from the first byte (SMTPS, POP3S): connects and completes the
    /// handshake for `name`.
    pub fn connect_tls(
        addr: SocketAddr,
        config: &Arc<ClientConfig>,
        name: &str,
    ) -> io::Result<LineConn> {
        let mut conn = LineConn::connect(addr);
        conn.upgrade_tls(config, name)?;
        Ok(conn)
    }

    /// Switches the plain connection to TLS (after a STARTTLS or STLS reply):
    /// the handshake for `name`. Panics if bytes after the reply were already
    /// read (the server spoke in plaintext after agreeing) or if already TLS.
    pub fn upgrade_tls(&mut self, config: &Arc<ClientConfig>, name: &str) -> io::Result<()> {
        assert!(
            self.buf.is_empty(),
            "bytes after the reply that started TLS: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        let Wire::Plain(tcp) = std::mem::replace(&mut self.wire, Wire::Gone) else {
            panic!("the connection is already TLS");
        };
        self.wire = Wire::Tls(Box::new(crate::tls::handshake(tcp, config, name)?));
        Ok(())
    }

    /// Whether the conversation runs over TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.wire, Wire::Tls(_))
    }

    /// Writes all of `bytes`; panics on error.
    #[track_caller]
    pub fn send(&mut self, bytes: &[u8]) {
        self.try_send(bytes).expect("send");
    }

    /// Writes all of `bytes`, returning the error (the server may legitimately
    /// have closed).
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.wire.write_all(bytes)?;
        self.wire.flush()
    }

    /// Sends `line` plus CRLF.
    #[track_caller]
    pub fn send_line(&mut self, line: &str) {
        self.send(format!("{line}\r\n").as_bytes());
    }

    /// Sends `line` plus CRLF and reads one line back; panics at EOF.
    #[track_caller]
    pub fn cmd(&mut self, line: &str) -> String {
        self.send_line(line);
        self.line()
            .unwrap_or_else(|| panic!("connection closed instead of answering {line:?}"))
    }

    /// Sends `line` plus CRLF and asserts that the reply line starts with
    /// `prefix`; returns the reply.
    #[track_caller]
    pub fn expect(&mut self, line: &str, prefix: &str) -> String {
        let reply = self.cmd(line);
        assert!(
            reply.starts_with(prefix),
            "{line:?} → {reply:?}, expected {prefix:?}…"
        );
        reply
    }

    /// One line without its CRLF, as text (lossy); `None` at EOF or a reset.
    /// Panics on any other error, a timeout included.
    #[track_caller]
    pub fn line(&mut self) -> Option<String> {
        self.raw_line()
            .map(|l| String::from_utf8_lossy(&l).into_owned())
    }

    /// One line without its CRLF, as bytes; `None` at EOF or a reset. Panics on
    /// any other error, a timeout included.
    #[track_caller]
    pub fn raw_line(&mut self) -> Option<Vec<u8>> {
        match self.try_raw_line() {
            Ok(line) => line,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => None,
            Err(e) => panic!("read failed: {e}"),
        }
    }

    /// One line without its CRLF; `Ok(None)` at EOF, the error as it came.
    pub fn try_raw_line(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..i].to_vec();
                self.buf.drain(..i + 2);
                return Ok(Some(line));
            }
            let mut chunk = [0u8; READ_CHUNK];
            match self.wire.read(&mut chunk) {
                Ok(0) => return Ok(None),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether bytes were read that no line has returned yet.
    pub fn has_buffered(&self) -> bool {
        !self.buf.is_empty()
    }

    /// Asserts the server closes with nothing more to say: the next read is EOF
    /// (or a reset), not data or a timeout.
    #[track_caller]
    pub fn expect_eof(&mut self) {
        assert!(
            self.buf.is_empty(),
            "unexpected bytes {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        let mut chunk = [0u8; 1024];
        match self.wire.read(&mut chunk) {
            Ok(0) => {}
            Ok(n) => panic!(
                "expected EOF, got {:?}",
                String::from_utf8_lossy(&chunk[..n])
            ),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            Err(e) => panic!("expected EOF, got {e}"),
        }
    }
}
