//! Helpers for the POP3 server's socket tests: an in-process server on port 0 over a
//! fresh mail directory (two users, a certificate), and a line-oriented POP3 client
//! (plain, STLS or POP3S, from any loopback source address).
//!
//! Every wait is bounded; servers shut down when dropped.

#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use stoa_directory::{Directory, EmbeddedDirectory, MailboxId, Options, PasswordCost};
use stoa_mailstore::MailStore;
use stoa_pop3::{Config, Server};

/// Cap on any read from a socket.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) const JOE: &str = "joe@example.test";
pub(crate) const JOE_PASSWORD: &str = "joe's secret";
pub(crate) const ANN: &str = "ann@example.test";
pub(crate) const ANN_PASSWORD: &str = "ann's secret";

/// A mail directory with the directory (two users), the store and a certificate.
pub(crate) struct MailDir {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) directory: Arc<EmbeddedDirectory>,
    pub(crate) store: Arc<MailStore>,
    pub(crate) cert: std::path::PathBuf,
    pub(crate) key: std::path::PathBuf,
    pub(crate) cert_der: Vec<u8>,
}

impl MailDir {
    pub(crate) fn new() -> MailDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = Options {
            cost: PasswordCost::MINIMUM,
            ..Options::default()
        };
        let directory =
            EmbeddedDirectory::open(&dir.path().join("directory"), options).expect("directory");
        directory.add_domain("example.test").expect("domain");
        directory.add_user(JOE, Some(JOE_PASSWORD)).expect("joe");
        directory.add_user(ANN, Some(ANN_PASSWORD)).expect("ann");
        let store = MailStore::open(dir.path().join("store"), stoa_mailstore::Options::default())
            .expect("store");
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).expect("params");
        let cert = params.self_signed(&key).expect("self-sign");
        let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert_path, cert.pem()).expect("write cert");
        std::fs::write(&key_path, key.serialize_pem()).expect("write key");
        MailDir {
            cert_der: cert.der().to_vec(),
            directory: Arc::new(directory),
            store: Arc::new(store),
            cert: cert_path,
            key: key_path,
            dir,
        }
    }

    /// The test configuration: one worker, POP3 and POP3S on 127.0.0.1:0, STLS,
    /// plaintext logins refused, login failures delayed by milliseconds.
    pub(crate) fn config(&self) -> Config {
        let mut config = Config::new();
        config.hostname = "pop.example.test".into();
        config.listen = vec!["127.0.0.1:0".parse().expect("addr")];
        config.tls_listen = vec!["127.0.0.1:0".parse().expect("addr")];
        config.tls = vec![stoa_pop3::config::CertKeyFiles {
            cert: self.cert.clone(),
            key: self.key.clone(),
        }];
        config.workers = 1;
        config.auth_throttle.delay = Duration::from_millis(10);
        config.auth_throttle.max_delay = Duration::from_millis(40);
        config.shutdown_grace = Duration::from_secs(5);
        config
    }

    /// The mailbox of `address`.
    pub(crate) fn mailbox(&self, address: &str) -> MailboxId {
        self.directory
            .lookup(address)
            .expect("lookup")
            .expect("user")
            .mailbox
    }

    /// Delivers `message` to `address` (as the SMTP server would).
    pub(crate) fn deliver(&self, address: &str, message: &[u8]) {
        self.store
            .deliver(message, &[self.mailbox(address)])
            .expect("deliver");
    }

    /// The messages in the mailbox of `address`, oldest first, read through the
    /// store (which takes the mailbox lock: no POP3 session may hold it).
    pub(crate) fn stored(&self, address: &str) -> Vec<Vec<u8>> {
        let session = self
            .store
            .open_mailbox(self.mailbox(address))
            .expect("mailbox not locked");
        (0..session.messages().len())
            .map(|i| session.read(i).expect("read"))
            .collect()
    }
}

/// A running server, shut down when dropped.
pub(crate) struct Running {
    pub(crate) pop3: SocketAddr,
    pub(crate) pop3s: Option<SocketAddr>,
    trigger: Option<stoa_netkit::shutdown::Trigger>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    pub(crate) fn start(mail: &MailDir, config: Config) -> Running {
        let directory: Arc<dyn Directory> = mail.directory.clone();
        let server =
            Server::bind(config, directory, Arc::clone(&mail.store)).expect("bind the server");
        let pop3 = server.local_addrs()[0];
        let pop3s = server.tls_addrs().first().copied();
        let (trigger, shutdown) = stoa_netkit::shutdown::channel();
        let thread = std::thread::spawn(move || server.run(shutdown).expect("run"));
        Running {
            pop3,
            pop3s,
            trigger: Some(trigger),
            thread: Some(thread),
        }
    }

    /// Starts the shutdown without waiting.
    pub(crate) fn trigger(&mut self) {
        if let Some(trigger) = self.trigger.take() {
            trigger.trigger();
        }
    }

    /// Shuts down and waits for the server's threads.
    pub(crate) fn stop(&mut self) {
        self.trigger();
        if let Some(thread) = self.thread.take() {
            thread.join().expect("server thread");
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

// ---------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------

enum Wire {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
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

/// A POP3 client connection.
pub(crate) struct Client {
    wire: Wire,
    buf: Vec<u8>,
    /// The greeting line.
    pub(crate) greeting: String,
}

fn tcp(addr: SocketAddr, from: Option<IpAddr>) -> TcpStream {
    let stream = match from {
        None => TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect"),
        Some(ip) => {
            let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                .expect("socket");
            socket
                .bind(&SocketAddr::new(ip, 0).into())
                .expect("bind the source address");
            socket
                .connect_timeout(&addr.into(), IO_TIMEOUT)
                .expect("connect");
            socket.into()
        }
    };
    stream.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    stream.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
    stream
}

fn tls_client(cert_der: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(cert_der.to_vec().into())
        .expect("trust the test certificate");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Arc::new(config)
}

fn handshake(tcp: TcpStream, cert_der: &[u8]) -> io::Result<Wire> {
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let conn = rustls::ClientConnection::new(tls_client(cert_der), name).expect("client");
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(Wire::Tls(Box::new(tls)))
}

impl Client {
    /// Connects and reads the greeting (any status: see [`Client::greeting`]).
    pub(crate) fn connect_raw(addr: SocketAddr, from: Option<IpAddr>) -> Client {
        let mut client = Client {
            wire: Wire::Plain(tcp(addr, from)),
            buf: Vec::new(),
            greeting: String::new(),
        };
        client.greeting = client.line().expect("a greeting");
        client
    }

    /// Connects and reads the `+OK` greeting.
    pub(crate) fn connect(addr: SocketAddr) -> Client {
        Client::connect_from(addr, None)
    }

    /// Connects from source address `from` (any of 127.0.0.0/8) and reads the `+OK`
    /// greeting.
    pub(crate) fn connect_from(addr: SocketAddr, from: Option<IpAddr>) -> Client {
        let client = Client::connect_raw(addr, from);
        assert!(
            client.greeting.starts_with("+OK "),
            "greeting {:?}",
            client.greeting
        );
        client
    }

    /// Connects to a POP3S listener: TLS first, then the greeting.
    pub(crate) fn connect_tls(addr: SocketAddr, cert_der: &[u8]) -> Client {
        let wire = handshake(tcp(addr, None), cert_der).expect("TLS handshake");
        let mut client = Client {
            wire,
            buf: Vec::new(),
            greeting: String::new(),
        };
        client.greeting = client.line().expect("a greeting");
        assert!(client.greeting.starts_with("+OK "), "{}", client.greeting);
        client
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.wire.write_all(bytes).expect("send");
        self.wire.flush().expect("flush");
    }

    /// Sends without asserting success (the server may have closed).
    pub(crate) fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.wire.write_all(bytes)?;
        self.wire.flush()
    }

    /// Sends `line` plus CRLF and reads the status line.
    pub(crate) fn cmd(&mut self, line: &str) -> String {
        self.send(format!("{line}\r\n").as_bytes());
        self.status()
    }

    /// Sends `line`, asserts the status starts with `expected`, returns it.
    pub(crate) fn ok(&mut self, line: &str) -> String {
        let status = self.cmd(line);
        assert!(status.starts_with("+OK"), "{line:?} → {status:?}");
        status
    }

    /// Reads one status line.
    pub(crate) fn status(&mut self) -> String {
        self.line()
            .unwrap_or_else(|| panic!("connection closed before a status line"))
    }

    /// Reads the lines of a multi-line response up to `.`, unstuffed.
    pub(crate) fn lines(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            let line = self.raw_line().expect("multi-line response cut short");
            if line == b"." {
                return out;
            }
            out.push(match line.strip_prefix(b".") {
                Some(rest) => rest.to_vec(),
                None => line,
            });
        }
    }

    /// Sends a multi-line command (LIST, UIDL, CAPA…), asserts `+OK`, returns the
    /// lines as text.
    pub(crate) fn multi(&mut self, line: &str) -> Vec<String> {
        self.ok(line);
        self.lines()
            .into_iter()
            .map(|l| String::from_utf8_lossy(&l).into_owned())
            .collect()
    }

    /// RETR n: the message as the client reassembles it (unstuffed, CRLF line
    /// ends), and the status line.
    pub(crate) fn retr(&mut self, n: usize) -> (String, Vec<u8>) {
        let status = self.ok(&format!("RETR {n}"));
        let mut message = Vec::new();
        for line in self.lines() {
            message.extend_from_slice(&line);
            message.extend_from_slice(b"\r\n");
        }
        (status, message)
    }

    /// Logs in with USER/PASS and asserts `+OK`.
    pub(crate) fn login(&mut self, user: &str, password: &str) -> String {
        self.ok(&format!("USER {user}"));
        self.ok(&format!("PASS {password}"))
    }

    /// STLS (asserting `+OK`), then the handshake trusting `cert_der`.
    pub(crate) fn starttls(&mut self, cert_der: &[u8]) {
        self.ok("STLS");
        assert!(self.buf.is_empty(), "bytes after the STLS answer");
        self.handshake(cert_der).expect("TLS handshake");
    }

    /// The TLS handshake over the plain connection.
    pub(crate) fn handshake(&mut self, cert_der: &[u8]) -> io::Result<()> {
        let Wire::Plain(tcp) = std::mem::replace(&mut self.wire, Wire::Gone) else {
            panic!("already TLS");
        };
        self.wire = handshake(tcp, cert_der)?;
        Ok(())
    }

    /// One CRLF line as text, or `None` at EOF.
    pub(crate) fn line(&mut self) -> Option<String> {
        self.raw_line()
            .map(|l| String::from_utf8_lossy(&l).into_owned())
    }

    fn raw_line(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(i) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..i].to_vec();
                self.buf.drain(..i + 2);
                return Some(line);
            }
            let mut chunk = [0u8; 16 * 1024];
            match self.wire.read(&mut chunk) {
                Ok(0) => return None,
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    /// Asserts the server closes with nothing more to say.
    pub(crate) fn expect_eof(&mut self) {
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

/// A CRLF message of at least `size` bytes with dot-leading lines (byte-stuffed on
/// the wire) and a final `.` line of its own.
pub(crate) fn message(n: usize, size: usize) -> Vec<u8> {
    let mut m =
        format!("From: <a@ext.test>\r\nSubject: message {n}\r\n\r\n.leading dot\r\n..two\r\n")
            .into_bytes();
    let mut line = 0;
    while m.len() < size {
        m.extend_from_slice(format!("line {line} of message {n}\r\n").as_bytes());
        line += 1;
    }
    m.extend_from_slice(b".\r\n");
    m
}

/// Standard base64 (for AUTH PLAIN).
pub(crate) fn base64(bytes: &[u8]) -> String {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
