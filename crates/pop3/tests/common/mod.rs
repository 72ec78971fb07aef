//! What the POP3 server's socket tests share beyond `stoa-testkit`: an in-process
//! server on port 0 over a fresh mail directory (two users, a certificate), and the
//! POP3 grammar (status lines, dot-terminated lists) over the kit's line client
//! (plain, STLS or POP3S, from any loopback source address).
//!
//! Every wait is bounded; servers shut down when dropped.

#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::ClientConfig;
use stoa_directory::{Directory, EmbeddedDirectory, MailboxId, Options, PasswordCost};
use stoa_mailstore::MailStore;
use stoa_pop3::{Config, Server};
use stoa_testkit::{LineConn, TestCert, client_config};

/// Cap on any read from a socket.
pub(crate) const IO_TIMEOUT: Duration = stoa_testkit::line::DEFAULT_IO_TIMEOUT;

pub(crate) const JOE: &str = "joe@example.test";
pub(crate) const JOE_PASSWORD: &str = "joe's secret";
pub(crate) const ANN: &str = "ann@example.test";
pub(crate) const ANN_PASSWORD: &str = "ann's secret";

/// A mail directory with the directory (two users), the store and a certificate.
pub(crate) struct MailDir {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) directory: Arc<EmbeddedDirectory>,
    pub(crate) store: Arc<MailStore>,
    /// For `localhost`: the server's STLS and POP3S certificate.
    pub(crate) cert: TestCert,
}

impl MailDir {
    pub(crate) fn new() -> MailDir {
        let dir = stoa_testkit::temp_dir();
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
        MailDir {
            cert: TestCert::new(dir.path(), "localhost"),
            directory: Arc::new(directory),
            store: Arc::new(store),
            dir,
        }
    }

    /// The test configuration: one worker, POP3 and POP3S on 127.0.0.1:0, STLS,
    /// plaintext logins refused (loopback too), login failures delayed by
    /// milliseconds.
    pub(crate) fn config(&self) -> Config {
        let mut config = Config::new();
        config.hostname = "pop.example.test".into();
        config.listen = vec!["127.0.0.1:0".parse().expect("addr")];
        config.tls_listen = vec!["127.0.0.1:0".parse().expect("addr")];
        config.tls = vec![stoa_pop3::config::CertKeyFiles {
            cert: self.cert.cert.clone(),
            key: self.cert.key.clone(),
        }];
        config.workers = 1;
        // No network is secure by itself here: the TLS rules apply on loopback
        // too (tests of the loopback default set it back).
        config.secure_networks.clear();
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

/// A POP3 client connection.
pub(crate) struct Client {
    conn: LineConn,
    /// The greeting line.
    pub(crate) greeting: String,
}

/// A TCP connection to `addr`, from source address `from` when given.
fn tcp(addr: SocketAddr, from: Option<IpAddr>) -> TcpStream {
    match from {
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
    }
}

/// A client trusting only `cert` (the server's).
fn tls_client(cert: &TestCert) -> Arc<ClientConfig> {
    client_config(&[&cert.der], &[])
}

impl Client {
    /// Connects and reads the greeting (any status: see [`Client::greeting`]).
    pub(crate) fn connect_raw(addr: SocketAddr, from: Option<IpAddr>) -> Client {
        Client::greeted(LineConn::from_stream(tcp(addr, from), IO_TIMEOUT))
    }

    fn greeted(conn: LineConn) -> Client {
        let mut client = Client {
            conn,
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
    pub(crate) fn connect_tls(addr: SocketAddr, cert: &TestCert) -> Client {
        let conn =
            LineConn::connect_tls(addr, &tls_client(cert), "localhost").expect("TLS handshake");
        let client = Client::greeted(conn);
        assert!(client.greeting.starts_with("+OK "), "{}", client.greeting);
        client
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.conn.send(bytes);
    }

    /// Sends without asserting success (the server may have closed).
    pub(crate) fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.conn.try_send(bytes)
    }

    /// Sends `line` plus CRLF and reads the status line.
    pub(crate) fn cmd(&mut self, line: &str) -> String {
        self.conn.send_line(line);
        self.status()
    }

    /// Sends `line`, asserts the status is `+OK`, returns it.
    pub(crate) fn ok(&mut self, line: &str) -> String {
        self.conn.expect(line, "+OK")
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
            let line = self.conn.raw_line().expect("multi-line response cut short");
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

    /// STLS (asserting `+OK`), then the handshake trusting `cert`.
    pub(crate) fn starttls(&mut self, cert: &TestCert) {
        self.ok("STLS");
        self.handshake(cert).expect("TLS handshake");
    }

    /// The TLS handshake over the plain connection (panics if bytes came after
    /// the last line read).
    pub(crate) fn handshake(&mut self, cert: &TestCert) -> io::Result<()> {
        self.conn.upgrade_tls(&tls_client(cert), "localhost")
    }

    /// One CRLF line as text, or `None` at EOF.
    pub(crate) fn line(&mut self) -> Option<String> {
        self.conn.line()
    }

    /// Asserts the server closes with nothing more to say.
    pub(crate) fn expect_eof(&mut self) {
        self.conn.expect_eof();
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
