//! What the web server's in-process protocol tests share beyond `stoa-testkit`: a
//! server on 127.0.0.1:0 with a temporary document root, and a small raw HTTP/1.1
//! client over `std::net::TcpStream`, optionally through the kit's rustls client
//! (trusting a [`TestCert`] made for the server's HTTPS listener).
//!
//! Every wait is bounded: sockets get read and write timeouts, and the server guard
//! triggers shutdown and joins the server thread when dropped.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::{ClientConfig, ClientConnection};
use stoa_netkit::shutdown::Trigger;
use stoa_testkit::TestCert;
use stoa_testkit::http::{Response, get};
use stoa_testkit::net::{is_reset, is_timeout};
use stoa_web::config::{AccessLogTarget, CertKeyFiles, LogFormat, TlsListener};
use stoa_web::{Config, Server};

/// What the file outside the document root holds; no response may ever contain it.
pub(crate) const SECRET: &str = "TOP-SECRET-d41d8cd98f00b204";

/// Default socket read timeout: long enough for a loaded machine, short enough that
/// a hung test fails instead of hanging.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) const A_TXT: &[u8] = b"alpha\n";
pub(crate) const B_TXT: &[u8] = b"bravo bravo\n";
pub(crate) const C_HTML: &[u8] = b"<p>charlie</p>\n";
pub(crate) const DIR_INDEX: &[u8] = b"<h1>dir index</h1>\n";
/// Size of `big.bin`: above the 32 KiB in-memory threshold, so it goes out with
/// `sendfile`.
pub(crate) const BIG_LEN: usize = 300 * 1024;
/// Size of `100k.bin`.
pub(crate) const HUNDRED_K: usize = 100 * 1024;

/// Deterministic, non-repeating-looking content for binary files.
pub(crate) fn pattern(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(31) ^ (i >> 8) ^ (i >> 16)) as u8)
        .collect()
}

/// A temporary directory: `root/` is the document root, `x`, `x.html` and
/// `etc/passwd` next to it hold [`SECRET`].
pub(crate) struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let dir = stoa_testkit::temp_dir();
        let f = Fixture { dir };
        for outside in ["x", "x.html", "etc/passwd", "secret.txt"] {
            f.write_outside(outside, SECRET.as_bytes());
        }
        f.write("a.txt", A_TXT);
        f.write("b.txt", B_TXT);
        f.write("c.html", C_HTML);
        f.write("empty.txt", b"");
        f.write("big.bin", &pattern(BIG_LEN));
        f.write("100k.bin", &pattern(HUNDRED_K));
        f.write("dir/index.html", DIR_INDEX);
        f.write("noindex/file.txt", b"in noindex\n");
        f
    }

    /// The document root.
    pub(crate) fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// The directory holding the document root.
    pub(crate) fn outside(&self) -> &Path {
        self.dir.path()
    }

    /// Writes `rel` (beneath the document root), creating parent directories.
    pub(crate) fn write(&self, rel: &str, bytes: &[u8]) {
        stoa_testkit::write_file(&self.root().join(rel), bytes);
    }

    fn write_outside(&self, rel: &str, bytes: &[u8]) {
        stoa_testkit::write_file(&self.dir.path().join(rel), bytes);
    }

    /// Defaults for tests: two workers, short lingering and a bounded drain.
    pub(crate) fn config(&self) -> Config {
        let listen: SocketAddr = "127.0.0.1:0".parse().expect("address");
        let mut c = Config::new(self.root(), vec![listen]);
        c.workers = 2;
        c.shutdown_grace = Duration::from_secs(10);
        c.limits.linger_idle = Duration::from_secs(1);
        c.limits.linger_timeout = Duration::from_secs(5);
        c
    }

    /// A self-signed certificate for `name` (and a key), written next to the
    /// document root.
    pub(crate) fn cert(&self, name: &str) -> TestCert {
        TestCert::new(self.dir.path(), name)
    }

    /// Binds and runs a server on its own thread.
    pub(crate) fn start(self, config: Config) -> TestServer {
        let server = Server::bind(config).expect("bind the test server");
        let addr = server.local_addrs()[0];
        let tls_addr = server.tls_addrs().first().copied();
        let (trigger, shutdown) = stoa_netkit::shutdown::channel();
        let thread = std::thread::Builder::new()
            .name("test-server".into())
            .spawn(move || server.run(shutdown))
            .expect("spawn server thread");
        TestServer {
            addr,
            tls_addr,
            tls: None,
            trigger: Some(trigger),
            thread: Some(thread),
            fixture: self,
        }
    }
}

/// A running server; dropping it triggers shutdown and joins the server thread.
pub(crate) struct TestServer {
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
    /// The HTTPS listener's certificate, as a client trusts it.
    tls: Option<Arc<ClientConfig>>,
    trigger: Option<Trigger>,
    thread: Option<JoinHandle<Result<(), stoa_web::Error>>>,
    fixture: Fixture,
}

impl TestServer {
    /// A server with the test defaults.
    pub(crate) fn start() -> TestServer {
        TestServer::with(|_| {})
    }

    /// A server with the test defaults, adjusted by `edit`.
    pub(crate) fn with(edit: impl FnOnce(&mut Config)) -> TestServer {
        let fixture = Fixture::new();
        let mut config = fixture.config();
        edit(&mut config);
        fixture.start(config)
    }

    /// A server with the test defaults and an HTTPS listener (certificate for
    /// `localhost`), adjusted by `edit`.
    pub(crate) fn with_tls(edit: impl FnOnce(&mut Config)) -> TestServer {
        let fixture = Fixture::new();
        let cert = fixture.cert("localhost");
        let mut config = fixture.config();
        config.tls_listen.push(TlsListener {
            addr: "127.0.0.1:0".parse().expect("address"),
            certs: vec![CertKeyFiles {
                cert: cert.cert.clone(),
                key: cert.key.clone(),
            }],
        });
        edit(&mut config);
        let mut server = fixture.start(config);
        server.tls = Some(client_config(&[&cert]));
        server
    }

    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The HTTPS listener's address.
    pub(crate) fn tls_addr(&self) -> SocketAddr {
        self.tls_addr.expect("the server has an HTTPS listener")
    }

    /// A client connection over TLS, handshake done (SNI `localhost`).
    #[track_caller]
    pub(crate) fn connect_tls(&self) -> Client {
        let config = self.tls.as_ref().expect("started with_tls");
        Client::connect_tls(self.tls_addr(), config, "localhost").expect("TLS handshake")
    }

    pub(crate) fn root(&self) -> PathBuf {
        self.fixture.root()
    }

    /// A new client connection.
    pub(crate) fn connect(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Starts the shutdown without waiting for it.
    pub(crate) fn trigger(&self) {
        if let Some(t) = &self.trigger {
            t.trigger();
        }
    }

    /// Triggers shutdown and waits for `run` to return; returns how long the wait
    /// took. Panics if `run` failed or panicked.
    pub(crate) fn shutdown(&mut self) -> Duration {
        self.trigger();
        let start = Instant::now();
        let thread = self.thread.take().expect("server still running");
        thread
            .join()
            .expect("server thread panicked")
            .expect("Server::run failed");
        start.elapsed()
    }

    /// Whether `run` has returned (without waiting).
    pub(crate) fn has_stopped(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.trigger();
        if let Some(thread) = self.thread.take() {
            let result = thread.join();
            if !std::thread::panicking() {
                result
                    .expect("server thread panicked")
                    .expect("Server::run failed");
            }
        }
    }
}

/// How a read that brought no bytes ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Closed {
    /// Orderly EOF (FIN).
    Eof,
    /// The peer reset the connection.
    Reset,
}

/// A raw client connection with its own read buffer, so that pipelined responses can
/// be parsed one at a time.
pub(crate) struct Client {
    stream: TcpStream,
    /// The TLS state, for a client over HTTPS.
    tls: Option<Box<ClientConnection>>,
    buf: Vec<u8>,
    pos: usize,
}

impl Client {
    pub(crate) fn connect(addr: SocketAddr) -> Client {
        Client::from_stream(TcpStream::connect(addr).expect("connect to the test server"))
    }

    /// Connects with a small receive buffer (set before `connect`, which disables
    /// receive-buffer autotuning), so that a large response cannot be absorbed by the
    /// client's kernel while the test is not reading.
    pub(crate) fn connect_small_rcvbuf(addr: SocketAddr, bytes: usize) -> Client {
        use rustix::net::{AddressFamily, SocketType};
        let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None)
            .expect("create socket");
        rustix::net::sockopt::set_socket_recv_buffer_size(&fd, bytes).expect("SO_RCVBUF");
        rustix::net::connect(&fd, &addr).expect("connect to the test server");
        Client::from_stream(TcpStream::from(fd))
    }

    /// Enlarges the receive buffer (after [`Client::connect_small_rcvbuf`]), so the
    /// rest of a large response arrives quickly.
    pub(crate) fn grow_rcvbuf(&self, bytes: usize) {
        rustix::net::sockopt::set_socket_recv_buffer_size(&self.stream, bytes).expect("SO_RCVBUF");
    }

    pub(crate) fn from_stream(stream: TcpStream) -> Client {
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("set read timeout");
        stream
            .set_write_timeout(Some(READ_TIMEOUT))
            .expect("set write timeout");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        Client {
            stream,
            tls: None,
            buf: Vec::with_capacity(64 * 1024),
            pos: 0,
        }
    }

    /// Connects and completes a TLS handshake for `name` (ALPN `http/1.1`).
    pub(crate) fn connect_tls(
        addr: SocketAddr,
        config: &Arc<ClientConfig>,
        name: &str,
    ) -> io::Result<Client> {
        let plain = Client::connect(addr);
        let tls = stoa_testkit::handshake(plain.stream, config, name)?;
        let mut client = Client::from_stream(tls.sock);
        client.tls = Some(Box::new(tls.conn));
        Ok(client)
    }

    /// `plaintext` as TLS records of this connection, to be written raw (with
    /// [`Client::writer`]) by a client that means to flood the server.
    pub(crate) fn encrypt(&mut self, plaintext: &[u8]) -> Vec<u8> {
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
    pub(crate) fn tls(&self) -> &ClientConnection {
        self.tls.as_ref().expect("a TLS client")
    }

    /// A second handle on the socket, for writing from another thread.
    pub(crate) fn writer(&self) -> TcpStream {
        self.stream.try_clone().expect("clone socket")
    }

    pub(crate) fn set_read_timeout(&self, t: Duration) {
        self.stream.set_read_timeout(Some(t)).expect("set timeout");
    }

    /// Writes all of `bytes`; panics on error.
    #[track_caller]
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.try_send(bytes).expect("write request");
    }

    /// Writes all of `bytes`, returning the error instead of panicking (the server
    /// may legitimately close while a refused request is still being sent).
    pub(crate) fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
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
    pub(crate) fn shutdown_write(&self) {
        self.stream
            .shutdown(Shutdown::Write)
            .expect("shutdown(Write)");
    }

    /// Sends `GET path` and reads the response.
    #[track_caller]
    pub(crate) fn get(&mut self, path: &str) -> Response {
        self.send(&get(path));
        self.response()
    }

    /// Sends `req` and reads one response (`head`: the request was a HEAD).
    #[track_caller]
    pub(crate) fn roundtrip(&mut self, req: &[u8], head: bool) -> Response {
        self.send(req);
        self.read_response(head)
    }

    /// Reads one response to a GET; panics on EOF or a timeout.
    #[track_caller]
    pub(crate) fn response(&mut self) -> Response {
        self.read_response(false)
    }

    /// Reads one response; panics on EOF, a reset or a timeout.
    #[track_caller]
    pub(crate) fn read_response(&mut self, head: bool) -> Response {
        match self.try_read_response(head) {
            Ok(Some(r)) => r,
            Ok(None) => panic!("connection closed where a response was expected"),
            Err(e) => panic!("reading a response: {e}"),
        }
    }

    /// Reads one response. `Ok(None)`: the connection closed cleanly before any byte
    /// of one. Responses to HEAD, 1xx, 204 and 304 have no body; others are framed
    /// by `Content-Length`, or run to EOF without it.
    pub(crate) fn try_read_response(&mut self, head: bool) -> io::Result<Option<Response>> {
        let end = loop {
            if let Some(i) = memchr::memmem::find(&self.buf[self.pos..], b"\r\n\r\n") {
                break self.pos + i + 4;
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
        let mut response = Response::parse_head(&self.buf[self.pos..end])?;
        let status = response.status;
        self.pos = end;
        if response.is_bodiless(head) {
            return Ok(Some(response));
        }
        match response.content_length() {
            Some(n) => {
                let n = usize::try_from(n).map_err(|_| bad("huge Content-Length".into()))?;
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
                response.body = self.buf[self.pos..self.pos + n].to_vec();
                self.pos += n;
            }
            None => {
                while self.fill()? > 0 {}
                response.body = self.buf[self.pos..].to_vec();
                self.pos = self.buf.len();
            }
        }
        Ok(Some(response))
    }

    /// Reads more bytes into the buffer; `Ok(0)` on EOF.
    fn fill(&mut self) -> io::Result<usize> {
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 1 << 20 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        let len = self.buf.len();
        self.buf.resize(len + 64 * 1024, 0);
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
    pub(crate) fn read_exact_raw(&mut self, n: usize) -> Vec<u8> {
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
    pub(crate) fn read_head_only(&mut self) -> Response {
        self.read_response(true)
    }

    /// Waits for the connection to close with nothing more sent; panics on more
    /// bytes or when it stays open past the read timeout.
    #[track_caller]
    pub(crate) fn expect_closed(&mut self) -> Closed {
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

    /// Reads and throws away bytes until the connection closes; returns how many
    /// bytes came and how it ended. Panics if it stays open past the read timeout.
    #[track_caller]
    pub(crate) fn drain_until_closed(&mut self) -> (usize, Closed) {
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
    pub(crate) fn expect_open_and_silent(&mut self, wait: Duration) {
        assert!(
            self.pos == self.buf.len(),
            "unexpected bytes: {:?}",
            String::from_utf8_lossy(&self.buf[self.pos..])
        );
        self.set_read_timeout(wait);
        let result = self.fill();
        self.set_read_timeout(READ_TIMEOUT);
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

fn bad(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Asserts that `req` is refused with `status`, `Connection: close`, and that the
/// connection is then closed without answering anything after it. A valid request
/// is pipelined behind the bad one: it must never be answered.
#[track_caller]
pub(crate) fn assert_rejected(server: &TestServer, req: &[u8], status: u16) {
    let mut c = server.connect();
    let mut wire = req.to_vec();
    wire.extend_from_slice(&get("/b.txt"));
    // The server may close while we write; the response must still arrive.
    let _ = c.try_send(&wire);
    let what = String::from_utf8_lossy(req).into_owned();
    let r = match c.try_read_response(false) {
        Ok(Some(r)) => r,
        Ok(None) => panic!("{what:?}: closed without a response"),
        Err(e) => panic!("{what:?}: {e}"),
    };
    assert_eq!(
        r.status,
        status,
        "{what:?}: status; body {:?}",
        r.body_str()
    );
    assert!(
        r.closes(),
        "{what:?}: no Connection: close in {:?}",
        r.headers
    );
    c.expect_closed();
}

/// A TLS client configuration trusting `certs`, offering ALPN `http/1.1`.
pub(crate) fn client_config(certs: &[&TestCert]) -> Arc<ClientConfig> {
    let ders: Vec<_> = certs.iter().map(|c| &c.der).collect();
    stoa_testkit::client_config(&ders, &[b"http/1.1"])
}

/// Access-log target in `dir`, with the combined format.
pub(crate) fn combined_log(config: &mut Config, path: PathBuf) {
    config.access_log = AccessLogTarget::File(path);
    config.log_format = LogFormat::Combined;
}
