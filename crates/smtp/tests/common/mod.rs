//! What the SMTP server's socket tests share beyond `stoa-testkit`: an in-process
//! server on port 0 with a fresh mail directory and two users, the SMTP reply
//! grammar over the kit's line client (plain or STARTTLS), and a scripted SMTP sink
//! standing in for the smart host.
//!
//! Every wait is bounded; servers shut down (and sinks stop) when dropped.

#![allow(dead_code, reason = "each test binary uses a part of the helpers")]

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use stoa_directory::{Directory, EmbeddedDirectory, Options, PasswordCost};
use stoa_netkit::throttle::Throttle;
use stoa_smtp::{Config, LocalDelivery, Server, StoreDelivery};
use stoa_testkit::line::DEFAULT_IO_TIMEOUT as IO_TIMEOUT;
use stoa_testkit::{LineConn, TestCert, base64, client_config, pause, wait_until};

/// Cap on waiting for a delivery.
pub(crate) const DELIVERY_TIMEOUT: Duration = Duration::from_secs(15);

pub(crate) const DOMAIN: &str = "example.test";
pub(crate) const JOE: &str = "joe@example.test";
pub(crate) const JOE_PASSWORD: &str = "joe's secret";
pub(crate) const ANN: &str = "ann@example.test";

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

/// A mail directory with the directory (two users) and a certificate.
pub(crate) struct MailDir {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) directory: Arc<EmbeddedDirectory>,
    /// For `localhost`: the server's STARTTLS certificate.
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
        directory.add_domain(DOMAIN).expect("domain");
        directory.add_user(JOE, Some(JOE_PASSWORD)).expect("joe");
        directory.add_user(ANN, Some("ann's secret")).expect("ann");
        MailDir {
            cert: TestCert::new(dir.path(), "localhost"),
            directory: Arc::new(directory),
            dir,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn queue(&self) -> PathBuf {
        self.path().join("queue")
    }

    /// The test configuration: one worker, MX and submission on 127.0.0.1:0,
    /// STARTTLS, the test domain, fast retries.
    pub(crate) fn config(&self) -> Config {
        let mut config = Config::new(self.path().to_owned());
        config.hostname = "mx.example.test".into();
        config.domains = vec![DOMAIN.into()];
        config.listen = vec!["127.0.0.1:0".parse().expect("addr")];
        config.submission_listen = vec!["127.0.0.1:0".parse().expect("addr")];
        config.tls = vec![stoa_smtp::config::CertKeyFiles {
            cert: self.cert.cert.clone(),
            key: self.cert.key.clone(),
        }];
        config.workers = 1;
        config.queue.min_backoff = Duration::from_millis(200);
        config.queue.max_backoff = Duration::from_millis(400);
        config.queue.relay_command_timeout = Duration::from_secs(5);
        config.queue.relay_data_timeout = Duration::from_secs(5);
        config.shutdown_grace = Duration::from_secs(5);
        // Failed AUTH in other tests should not cost seconds.
        config.auth_throttle.delay = Duration::from_millis(10);
        config.auth_throttle.max_delay = Duration::from_millis(40);
        config
    }

    /// The mail store under this mail directory.
    pub(crate) fn store(&self) -> StoreDelivery {
        StoreDelivery::open(&self.path().join("store")).expect("open the mail store")
    }

    /// The messages delivered to `address`, oldest first.
    pub(crate) fn delivered(&self, address: &str) -> Vec<Vec<u8>> {
        let user = self
            .directory
            .lookup(address)
            .expect("lookup")
            .expect("user");
        let store = self.store();
        // A mailbox locked by another reader of this test reads as empty this time.
        let Ok(session) = store.store().open_mailbox(user.mailbox) else {
            return Vec::new();
        };
        (0..session.messages().len())
            .map(|i| session.read(i).expect("read message"))
            .collect()
    }

    /// Waits until `address` has `n` messages; returns them.
    pub(crate) fn wait_delivered(&self, address: &str, n: usize) -> Vec<Vec<u8>> {
        let ok = wait_until(DELIVERY_TIMEOUT, || self.delivered(address).len() >= n);
        assert!(
            ok,
            "{address} did not get {n} messages within {DELIVERY_TIMEOUT:?}"
        );
        self.delivered(address)
    }

    /// Names of the files in the queue directory, but its control files
    /// (`.runner`, `.flush`: `stoa_smtp::queue::control`).
    pub(crate) fn queue_files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.queue())
            .map(|d| {
                d.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                    .filter(|name| !name.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// Waits until the queue directory is empty.
    pub(crate) fn wait_queue_empty(&self) {
        let ok = wait_until(DELIVERY_TIMEOUT, || self.queue_files().is_empty());
        assert!(ok, "queue not empty: {:?}", self.queue_files());
    }
}

/// A running server, shut down when dropped.
pub(crate) struct Running {
    pub(crate) mx: SocketAddr,
    pub(crate) submission: SocketAddr,
    trigger: Option<stoa_netkit::shutdown::Trigger>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    pub(crate) fn start(mail: &MailDir, config: Config) -> Running {
        Running::start_with(mail, config, Arc::new(mail.store()))
    }

    pub(crate) fn start_with(
        mail: &MailDir,
        config: Config,
        local: Arc<dyn LocalDelivery>,
    ) -> Running {
        let throttle = Arc::new(Throttle::new(config.auth_throttle.clone()));
        Running::start_shared(mail, config, local, throttle)
    }

    /// A server counting failed AUTH in `throttle`, which the test can watch.
    pub(crate) fn start_shared(
        mail: &MailDir,
        config: Config,
        local: Arc<dyn LocalDelivery>,
        throttle: Arc<Throttle>,
    ) -> Running {
        let directory: Arc<dyn Directory> = mail.directory.clone();
        let server = Server::bind_with_throttle(config, directory, local, throttle)
            .expect("bind the SMTP server");
        let mx = server.local_addrs()[0];
        let submission = server.submission_addrs().first().copied().unwrap_or(mx);
        let (trigger, shutdown) = stoa_netkit::shutdown::channel();
        let thread = std::thread::spawn(move || server.run(shutdown).expect("run"));
        Running {
            mx,
            submission,
            trigger: Some(trigger),
            thread: Some(thread),
        }
    }

    /// Shuts down and waits for the server's threads.
    pub(crate) fn stop(&mut self) {
        if let Some(trigger) = self.trigger.take() {
            trigger.trigger();
        }
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

/// One reply: code and full text (all lines, `\n`-joined, codes included).
#[derive(Debug, Clone)]
pub(crate) struct Reply {
    pub(crate) code: u16,
    pub(crate) text: String,
}

impl Reply {
    pub(crate) fn assert(&self, code: u16, contains: &str) {
        assert!(
            self.code == code && self.text.contains(contains),
            "expected {code} …{contains}…, got {:?}",
            self.text
        );
    }
}

/// An SMTP client connection.
pub(crate) struct Client {
    conn: LineConn,
}

impl Client {
    /// Connects and reads the greeting (asserting 220).
    pub(crate) fn connect(addr: SocketAddr) -> Client {
        let mut client = Client {
            conn: LineConn::connect(addr),
        };
        client.reply().assert(220, "ESMTP");
        client
    }

    /// Connects, greets with EHLO.
    pub(crate) fn ehlo(addr: SocketAddr) -> Client {
        let mut client = Client::connect(addr);
        client.cmd("EHLO client.test").assert(250, "PIPELINING");
        client
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.conn.send(bytes);
    }

    /// Sends without asserting success (the server may have closed).
    pub(crate) fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.conn.try_send(bytes)
    }

    /// Sends `line` plus CRLF and reads one reply.
    pub(crate) fn cmd(&mut self, line: &str) -> Reply {
        self.conn.send_line(line);
        self.reply()
    }

    /// Reads one (possibly multiline) reply.
    pub(crate) fn reply(&mut self) -> Reply {
        let mut text = String::new();
        loop {
            let line = self
                .conn
                .line()
                .unwrap_or_else(|| panic!("connection closed; reply so far {text:?}"));
            let code: u16 = line
                .get(..3)
                .and_then(|c| c.parse().ok())
                .unwrap_or_else(|| panic!("bad reply line {line:?}"));
            text.push_str(&line);
            text.push('\n');
            if line.as_bytes().get(3) != Some(&b'-') {
                return Reply { code, text };
            }
        }
    }

    /// Asserts the server closes with nothing more to say.
    pub(crate) fn expect_eof(&mut self) {
        self.conn.expect_eof();
    }

    /// STARTTLS (asserting 220), then the handshake trusting `cert`.
    pub(crate) fn starttls(&mut self, cert: &TestCert) {
        self.cmd("STARTTLS").assert(220, "Ready to start TLS");
        let config = client_config(&[&cert.der], &[]);
        self.conn
            .upgrade_tls(&config, "localhost")
            .expect("TLS handshake");
    }

    /// AUTH PLAIN with `user` and `password`.
    pub(crate) fn auth_plain(&mut self, user: &str, password: &str) -> Reply {
        let raw = format!("\0{user}\0{password}");
        self.cmd(&format!("AUTH PLAIN {}", base64(raw.as_bytes())))
    }

    /// One whole transaction; returns the final reply.
    pub(crate) fn mail(&mut self, from: &str, to: &[&str], body: &str) -> Reply {
        self.cmd(&format!("MAIL FROM:<{from}>"))
            .assert(250, "2.1.0");
        for rcpt in to {
            self.cmd(&format!("RCPT TO:<{rcpt}>")).assert(250, "2.1.5");
        }
        self.cmd("DATA").assert(354, "End data");
        self.send(body.as_bytes());
        self.send(b".\r\n");
        self.reply()
    }
}

// ---------------------------------------------------------------------------
// Sink: a scripted smart host
// ---------------------------------------------------------------------------

/// A message the sink accepted.
#[derive(Debug, Clone)]
pub(crate) struct Captured {
    pub(crate) from: String,
    pub(crate) to: Vec<String>,
    pub(crate) data: Vec<u8>,
}

/// A tiny SMTP server on 127.0.0.1:0 that answers RCPT from a script (then `250`)
/// and keeps every accepted message. Two script words are actions, not replies:
/// `DROP` closes the connection instead of answering that RCPT, and `DROP-DATA`
/// accepts the recipient but closes the connection after reading the message,
/// before the final reply (the message is not kept).
pub(crate) struct Sink {
    pub(crate) addr: SocketAddr,
    pub(crate) messages: Arc<Mutex<Vec<Captured>>>,
    pub(crate) connections: Arc<AtomicUsize>,
    rcpt_replies: Arc<Mutex<VecDeque<String>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Sink {
    /// `rcpt_replies` are given to the first RCPTs, in order; later ones get `250`.
    pub(crate) fn start(rcpt_replies: &[&str]) -> Sink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind sink");
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let messages = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let replies = Arc::new(Mutex::new(
            rcpt_replies.iter().map(|s| s.to_string()).collect(),
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let (m, c, r, s) = (
            messages.clone(),
            connections.clone(),
            Arc::clone(&replies),
            stop.clone(),
        );
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        c.fetch_add(1, Ordering::Relaxed);
                        let _ = sink_session(stream, &m, &r);
                    }
                    Err(_) => pause(Duration::from_millis(10)),
                }
            }
        });
        Sink {
            addr,
            messages,
            connections,
            rcpt_replies: replies,
            stop,
            thread: Some(thread),
        }
    }

    /// Replies for the next RCPTs.
    pub(crate) fn script(&self, replies: &[&str]) {
        let mut queue = self.rcpt_replies.lock().expect("lock");
        queue.clear();
        queue.extend(replies.iter().map(|s| s.to_string()));
    }

    pub(crate) fn captured(&self) -> Vec<Captured> {
        self.messages.lock().expect("lock").clone()
    }

    pub(crate) fn wait_messages(&self, n: usize) -> Vec<Captured> {
        let ok = wait_until(DELIVERY_TIMEOUT, || self.captured().len() >= n);
        assert!(ok, "the sink did not get {n} messages");
        self.captured()
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn sink_session(
    stream: TcpStream,
    messages: &Mutex<Vec<Captured>>,
    replies: &Mutex<VecDeque<String>>,
) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    out.write_all(b"220 sink.test ESMTP\r\n")?;
    let (mut from, mut to, mut accepted) = (String::new(), Vec::new(), 0);
    let mut drop_after_data = false;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let upper = line.to_ascii_uppercase();
        let reply = if upper.starts_with("EHLO") {
            "250-sink.test\r\n250-SIZE 100000000\r\n250 8BITMIME".to_owned()
        } else if upper.starts_with("MAIL FROM:") {
            from = line[10..]
                .trim()
                .split(' ')
                .next()
                .unwrap_or("")
                .trim_matches(['<', '>'])
                .to_owned();
            to.clear();
            accepted = 0;
            "250 2.1.0 Ok".into()
        } else if upper.starts_with("RCPT TO:") {
            let scripted = replies.lock().expect("lock").pop_front();
            match scripted {
                Some(r) if r == "DROP" => return Ok(()),
                Some(r) if r == "DROP-DATA" => {
                    drop_after_data = true;
                    to.push(line[8..].trim().trim_matches(['<', '>']).to_owned());
                    accepted += 1;
                    "250 2.1.5 Ok".into()
                }
                Some(r) if !r.starts_with('2') => r,
                _ => {
                    to.push(line[8..].trim().trim_matches(['<', '>']).to_owned());
                    accepted += 1;
                    "250 2.1.5 Ok".into()
                }
            }
        } else if upper.starts_with("DATA") {
            if accepted == 0 {
                "554 5.5.1 no valid recipients".into()
            } else {
                out.write_all(b"354 go ahead\r\n")?;
                let mut data = Vec::new();
                loop {
                    let mut l = Vec::new();
                    if reader.read_until(b'\n', &mut l)? == 0 {
                        return Ok(());
                    }
                    if l == b".\r\n" {
                        break;
                    }
                    let l = if l.starts_with(b".") { &l[1..] } else { &l[..] };
                    data.extend_from_slice(l);
                }
                if drop_after_data {
                    return Ok(());
                }
                messages.lock().expect("lock").push(Captured {
                    from: from.clone(),
                    to: to.clone(),
                    data,
                });
                "250 2.0.0 Ok: queued".into()
            }
        } else if upper.starts_with("QUIT") {
            out.write_all(b"221 2.0.0 Bye\r\n")?;
            return Ok(());
        } else {
            "250 2.0.0 Ok".into()
        };
        out.write_all(format!("{reply}\r\n").as_bytes())?;
    }
}
