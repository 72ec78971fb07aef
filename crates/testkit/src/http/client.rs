//! A raw HTTP/1.x client connection, plain or TLS, with its own read buffer so
//! that pipelined responses are parsed one at a time, and ways to watch how the
//! server ends the connection.

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::{ClientConfig, ClientConnection};

use super::{Response, bad, get, head_end};
use crate::net::{is_reset, is_timeout};

/// Default socket read and write timeout: long enough for a loaded machine, short
/// enough that a hung test fails instead of hanging.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How many bytes one read asks for.
const READ_CHUNK: usize = 64 * 1024;

/// Consumed bytes kept at the front of the buffer before it is compacted: large
/// enough that a deep pipeline is not copied on every response.
const MAX_CONSUMED: usize = 1 << 20;

/// How a read that brought no bytes ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Closed {
    /// Orderly EOF (FIN).
    Eof,
    /// The peer reset the connection.
    Reset,
}

/// A raw client connection with its own read buffer, so that pipelined responses can
/// be parsed one at a time.
pub struct Client {
    stream: TcpStream,
    /// The TLS state, for a client over HTTPS.
    tls: Option<Box<ClientConnection>>,
    buf: Vec<u8>,
    pos: usize,
    /// See [`Client::require_content_length`].
    strict: bool,
}

impl Client {
    /// Connects to `addr` (plain HTTP).
    pub fn connect(addr: SocketAddr) -> Client {
        Client::from_stream(TcpStream::connect(addr).expect("connect to the test server"))
    }

    /// Connects with a small receive buffer (set before `connect`, which disables
    /// receive-buffer autotuning), so that a large response cannot be absorbed by the
    /// client's kernel while the test is not reading.
    pub fn connect_small_rcvbuf(addr: SocketAddr, bytes: usize) -> Client {
        use rustix::net::{AddressFamily, SocketType};
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None)
            .expect("create socket");
        rustix::net::sockopt::set_socket_recv_buffer_size(&fd, bytes).expect("SO_RCVBUF");
        rustix::net::connect(&fd, &addr).expect("connect to the test server");
        Client::from_stream(TcpStream::from(fd))
    }

    /// Enlarges the receive buffer (after [`Client::connect_small_rcvbuf`]), so the
    /// rest of a large response arrives quickly.
    pub fn grow_rcvbuf(&self, bytes: usize) {
        rustix::net::sockopt::set_socket_recv_buffer_size(&self.stream, bytes).expect("SO_RCVBUF");
    }

    /// A client over `stream`, with [`DEFAULT_TIMEOUT`] on reads and writes and
    /// `TCP_NODELAY` (a test's small requests go out at once).
    pub fn from_stream(stream: TcpStream) -> Client {
        stream
            .set_read_timeout(Some(DEFAULT_TIMEOUT))
            .expect("set read timeout");
        stream
            .set_write_timeout(Some(DEFAULT_TIMEOUT))
            .expect("set write timeout");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        Client {
            stream,
            tls: None,
            buf: Vec::with_capacity(READ_CHUNK),
            pos: 0,
            strict: false,
        }
    }

    /// Makes every response that has a body carry `Content-Length` (an error
    /// otherwise), instead of reading a body without one to EOF.
    pub fn require_content_length(mut self) -> Client {
        self.strict = true;
        self
    }

    /// The socket itself, for a test that reads the raw stream (bypassing the
    /// buffer and any TLS).
    pub fn socket(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Connects and completes a TLS handshake for `name` (ALPN `http/1.1`).
    pub fn connect_tls(
        addr: SocketAddr,
        config: &Arc<ClientConfig>,
        name: &str,
    ) -> io::Result<Client> {
        let plain = Client::connect(addr);
        let tls = crate::tls::handshake(plain.stream, config, name)?;
        let mut client = Client::from_stream(tls.sock);
        client.tls = Some(Box::new(tls.conn));
        Ok(client)
    }

    /// `plaintext` as TLS records of this connection, to be written raw (with
    /// [`Client::writer`]) by a client that means to flood the server.
    pub fn encrypt(&mut self, plaintext: &[u8]) -> Vec<u8> {
        let tls = self.tls.as_mut().expect("a TLS client");
        let mut wire = Vec::new();
        // In pieces: rustls buffers at most 64 KiB of unsent records.
        for piece in plaintext.chunks(16 * 1024) {
            tls.writer().write_all(piece).expect("buffer plaintext");
            while tls.wants_write() {
                tls.write_tls(&mut wire).expect("encrypt");
            }
        }
        wire
    }

    /// The TLS state (panics for a plain connection).
    pub fn tls(&self) -> &ClientConnection {
        self.tls.as_ref().expect("a TLS client")
    }

    /// A second handle on the socket, for writing from another thread.
    pub fn writer(&self) -> TcpStream {
        self.stream.try_clone().expect("clone socket")
    }

    /// Sets the read timeout of the socket.
    pub fn set_read_timeout(&self, t: Duration) {
        self.stream.set_read_timeout(Some(t)).expect("set timeout");
    }

    /// Writes all of `bytes`; panics on error.
    #[track_caller]
    pub fn send(&mut self, bytes: &[u8]) {
        self.try_send(bytes).expect("write request");
    }

    /// Writes all of `bytes`, returning the error instead of panicking (the server
    /// may legitimately close while a refused request is still being sent).
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.tls {
            None => self.stream.write_all(bytes),
            Some(tls) => {
                tls.writer().write_all(bytes)?;
                while tls.wants_write() {
                    tls.write_tls(&mut self.stream)?;
                }
                Ok(())
            }
        }
    }

    /// Half-closes: the server sees EOF after what was sent.
    pub fn shutdown_write(&self) {
        self.stream
            .shutdown(Shutdown::Write)
            .expect("shutdown(Write)");
    }

    /// Sends `GET path` and reads the response.
    #[track_caller]
    pub fn get(&mut self, path: &str) -> Response {
        self.send(&get(path));
        self.response()
    }

    /// Sends `req` and reads one response (`head`: the request was a HEAD).
    #[track_caller]
    pub fn roundtrip(&mut self, req: &[u8], head: bool) -> Response {
        self.send(req);
        self.read_response(head)
    }

    /// Reads one response to a GET; panics on EOF or a timeout.
    #[track_caller]
    pub fn response(&mut self) -> Response {
        self.read_response(false)
    }

    /// Reads one response; panics on EOF, a reset or a timeout.
    #[track_caller]
    pub fn read_response(&mut self, head: bool) -> Response {
        match self.try_read_response(head) {
            Ok(Some(r)) => r,
            Ok(None) => panic!("connection closed where a response was expected"),
            Err(e) => panic!("reading a response: {e}"),
        }
    }

    /// Reads one response. `Ok(None)`: the connection closed cleanly before any byte
    /// of one. Responses to HEAD, 1xx, 204 and 304 have no body; others are framed
    /// by `Content-Length`, or run to EOF without it.
    pub fn try_read_response(&mut self, head: bool) -> io::Result<Option<Response>> {
        let Some(mut response) = self.read_head()? else {
            return Ok(None);
        };
        if response.is_bodiless(head) {
            return Ok(Some(response));
        }
        if self.strict && response.content_length().is_none() {
            return Err(bad(format!(
                "response without Content-Length: {:?}",
                response.headers
            )));
        }
        response.body = match response.content_length() {
            Some(n) => {
                let n = usize::try_from(n).map_err(|_| bad("huge Content-Length".into()))?;
                self.read_body(n, response.status)?
            }
            None => {
                while self.fill()? > 0 {}
                let body = self.buf[self.pos..].to_vec();
                self.pos = self.buf.len();
                body
            }
        };
        Ok(Some(response))
    }

    /// Reads and parses one response head; `Ok(None)` at a clean EOF before it.
    fn read_head(&mut self) -> io::Result<Option<Response>> {
        let end = loop {
            if let Some(i) = head_end(&self.buf[self.pos..]) {
                break self.pos + i;
            }
            if self.fill()? == 0 {
                if self.pos == self.buf.len() {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "EOF inside a response head: {:?}",
                        String::from_utf8_lossy(&self.buf[self.pos..])
                    ),
                ));
            }
        };
        let response = Response::parse_head(&self.buf[self.pos..end])?;
        self.pos = end;
        Ok(Some(response))
    }

    /// Reads a body of exactly `n` bytes (of a response with `status`).
    fn read_body(&mut self, n: usize, status: u16) -> io::Result<Vec<u8>> {
        while self.buf.len() - self.pos < n {
            if self.fill()? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "EOF after {} of {n} body bytes (status {status})",
                        self.buf.len() - self.pos
                    ),
                ));
            }
        }
        let body = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        Ok(body)
    }

    /// Reads more bytes into the buffer; `Ok(0)` on EOF.
    fn fill(&mut self) -> io::Result<usize> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > MAX_CONSUMED {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let len = self.buf.len();
        self.buf.resize(len + READ_CHUNK, 0);
        let result = loop {
            let read = match &mut self.tls {
                None => self.stream.read(&mut self.buf[len..]),
                Some(tls) => {
                    rustls::Stream::new(&mut **tls, &mut self.stream).read(&mut self.buf[len..])
                }
            };
            match read {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other,
            }
        };
        let n = *result.as_ref().unwrap_or(&0);
        self.buf.truncate(len + n);
        result
    }

    /// Reads exactly `n` raw bytes (from the buffer first).
    #[track_caller]
    pub fn read_exact_raw(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() - self.pos < n {
            match self.fill() {
                Ok(0) => panic!("EOF after {} of {n} raw bytes", self.buf.len() - self.pos),
                Ok(_) => {}
                Err(e) => panic!("reading raw bytes: {e}"),
            }
        }
        let out = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        out
    }

    /// Reads a response head only; its body stays unread (in the buffer or the
    /// socket) for [`Client::read_exact_raw`].
    #[track_caller]
    pub fn read_head_only(&mut self) -> Response {
        self.read_response(true)
    }

    /// Waits for the connection to close with nothing more sent; panics on more
    /// bytes or when it stays open past the read timeout.
    #[track_caller]
    pub fn expect_closed(&mut self) -> Closed {
        if self.pos < self.buf.len() {
            panic!(
                "unexpected bytes where the connection should close: {:?}",
                String::from_utf8_lossy(&self.buf[self.pos..])
            );
        }
        match self.fill() {
            Ok(0) => Closed::Eof,
            Ok(_) => panic!(
                "unexpected bytes where the connection should close: {:?}",
                String::from_utf8_lossy(&self.buf[self.pos..])
            ),
            Err(e) if is_reset(&e) => Closed::Reset,
            Err(e) if is_timeout(&e) => panic!("the connection was not closed by the server"),
            Err(e) => panic!("read failed: {e}"),
        }
    }

    /// Asserts the server closes with nothing more to say, in order (EOF, not a
    /// reset).
    #[track_caller]
    pub fn expect_eof(&mut self) {
        assert_eq!(
            self.expect_closed(),
            Closed::Eof,
            "expected an orderly close (EOF), got a reset"
        );
    }

    /// Reads and throws away bytes until the connection closes; returns how many
    /// bytes came and how it ended. Panics if it stays open past the read timeout.
    #[track_caller]
    pub fn drain_until_closed(&mut self) -> (usize, Closed) {
        let mut total = self.buf.len() - self.pos;
        self.buf.clear();
        self.pos = 0;
        loop {
            match self.fill() {
                Ok(0) => return (total, Closed::Eof),
                Ok(n) => {
                    total += n;
                    self.buf.clear();
                }
                Err(e) if is_reset(&e) => return (total, Closed::Reset),
                Err(e) if is_timeout(&e) => {
                    panic!("the connection was not closed by the server ({total} bytes read)")
                }
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    /// Asserts that the connection is still open and idle: nothing arrives within
    /// `wait`. (Only used where a wait is what is being tested.)
    #[track_caller]
    pub fn expect_open_and_silent(&mut self, wait: Duration) {
        assert!(
            self.pos == self.buf.len(),
            "unexpected bytes: {:?}",
            String::from_utf8_lossy(&self.buf[self.pos..])
        );
        self.set_read_timeout(wait);
        let result = self.fill();
        self.set_read_timeout(DEFAULT_TIMEOUT);
        match result {
            Err(e) if is_timeout(&e) => {}
            Ok(0) => panic!("the connection was closed"),
            Ok(_) => panic!(
                "unexpected bytes: {:?}",
                String::from_utf8_lossy(&self.buf[self.pos..])
            ),
            Err(e) => panic!("read failed: {e}"),
        }
    }
}
