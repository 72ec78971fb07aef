//! What the web server's in-process protocol tests share beyond `stoa-testkit`: a
//! server on 127.0.0.1:0 with a temporary document root (and an HTTPS listener
//! with a [`TestCert`] when asked), connected to with the kit's raw HTTP client,
//! and the check that a bad request is refused and the connection closed.
//!
//! Every wait is bounded: sockets get read and write timeouts, and the server guard
//! triggers shutdown and joins the server thread when dropped.

#![allow(
    dead_code,
    reason = "each test binary uses a different part of the harness"
)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use stoa_netkit::shutdown::Trigger;
use stoa_testkit::TestCert;
use stoa_testkit::http::{Client, get};
use stoa_web::config::{AccessLogTarget, CertKeyFiles, LogFormat, TlsListener};
use stoa_web::{Config, Server};

/// What the file outside the document root holds; no response may ever contain it.
pub(crate) const SECRET: &str = "TOP-SECRET-d41d8cd98f00b204";

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
