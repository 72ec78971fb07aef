//! Routing to store hosts: users whose `mailHost` is another host get their mail
//! over LMTP from the queue, each recipient's reply honoured (250 delivered once,
//! 451 retried, 550 bounced), and the connection reused for the next message.

mod common;

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use stoa_smtp::config::MailHost;
use stoa_testkit::{pause, wait_until};

use common::{Client, DELIVERY_TIMEOUT, JOE, MailDir, Running};

const STORE_B: &str = "store-b.example.test";
const B1: &str = "b1@example.test";
const B2: &str = "b2@example.test";
const B3: &str = "b3@example.test";

/// Per recipient, the replies to give after the message, one per transaction;
/// `250` once the script runs out. The key `MAIL` scripts the replies to `MAIL`
/// (a `421` closes the connection).
type Script = HashMap<String, VecDeque<String>>;

/// (recipient, message) for every `250` after the message.
type Delivered = Mutex<Vec<(String, Vec<u8>)>>;

/// A scripted LMTP server on 127.0.0.1:0, a thread per connection: it accepts
/// every RCPT and answers the end of data per recipient from the script, keeping
/// (recipient, message) for every `250`.
struct LmtpStub {
    addr: SocketAddr,
    delivered: Arc<Delivered>,
    connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LmtpStub {
    fn start(script: Script) -> LmtpStub {
        LmtpStub::start_with(TcpListener::bind("127.0.0.1:0").expect("bind"), script)
    }

    /// On `addr`, answering `250` to everyone.
    fn start_on(addr: SocketAddr) -> LmtpStub {
        LmtpStub::start_with(TcpListener::bind(addr).expect("bind"), Script::new())
    }

    fn start_with(listener: TcpListener, script: Script) -> LmtpStub {
        listener.set_nonblocking(true).expect("nonblocking");
        let addr = listener.local_addr().expect("addr");
        let delivered = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let script = Arc::new(Mutex::new(script));
        let (d, c, s) = (delivered.clone(), connections.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        c.fetch_add(1, Ordering::Relaxed);
                        let (d, script) = (d.clone(), script.clone());
                        std::thread::spawn(move || session(stream, &d, &script));
                    }
                    Err(_) => pause(Duration::from_millis(10)),
                }
            }
        });
        LmtpStub {
            addr,
            delivered,
            connections,
            stop,
            thread: Some(thread),
        }
    }

    fn delivered_to(&self, rcpt: &str) -> usize {
        let d = self.delivered.lock().expect("lock");
        d.iter().filter(|(r, _)| r == rcpt).count()
    }

    fn wait_delivered(&self, rcpt: &str, n: usize) {
        let ok = wait_until(DELIVERY_TIMEOUT, || self.delivered_to(rcpt) >= n);
        assert!(ok, "{rcpt} did not get {n} messages over LMTP");
    }
}

impl Drop for LmtpStub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn session(stream: TcpStream, delivered: &Delivered, script: &Mutex<Script>) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    out.write_all(b"220 store-b LMTP\r\n")?;
    let mut rcpts: Vec<String> = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let upper = line.to_ascii_uppercase();
        if upper.starts_with("LHLO") {
            out.write_all(b"250-store-b\r\n250-SIZE 10000000\r\n250 ENHANCEDSTATUSCODES\r\n")?;
        } else if upper.starts_with("MAIL FROM:") || upper.starts_with("RSET") {
            rcpts.clear();
            let scripted = upper
                .starts_with("MAIL")
                .then(|| script.lock().expect("lock").get_mut("MAIL")?.pop_front())
                .flatten();
            let reply = scripted.unwrap_or_else(|| "250 2.1.0 Ok".into());
            out.write_all(format!("{reply}\r\n").as_bytes())?;
            if reply.starts_with("421") {
                return Ok(());
            }
        } else if upper.starts_with("RCPT TO:") {
            rcpts.push(line[8..].trim().trim_matches(['<', '>']).to_owned());
            out.write_all(b"250 2.1.5 Ok\r\n")?;
        } else if upper.starts_with("DATA") {
            out.write_all(b"354 go ahead\r\n")?;
            let data = read_data(&mut reader)?;
            for rcpt in &rcpts {
                let reply = script
                    .lock()
                    .expect("lock")
                    .get_mut(rcpt)
                    .and_then(VecDeque::pop_front)
                    .unwrap_or_else(|| "250 2.0.0 Ok".into());
                if reply.starts_with("250") {
                    let mut d = delivered.lock().expect("lock");
                    d.push((rcpt.clone(), data.clone()));
                }
                out.write_all(format!("{reply}\r\n").as_bytes())?;
            }
        } else if upper.starts_with("QUIT") {
            out.write_all(b"221 2.0.0 Bye\r\n")?;
            return Ok(());
        } else {
            out.write_all(b"500 5.5.1 what\r\n")?;
        }
    }
}

/// The message up to the final dot, dot-unstuffed.
fn read_data(reader: &mut BufReader<TcpStream>) -> io::Result<Vec<u8>> {
    let mut data = Vec::new();
    loop {
        let mut l = Vec::new();
        if reader.read_until(b'\n', &mut l)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if l == b".\r\n" {
            return Ok(data);
        }
        data.extend_from_slice(l.strip_prefix(b".").unwrap_or(&l));
    }
}

#[test]
fn per_recipient_replies_over_one_reused_connection() {
    let mail = MailDir::new();
    for rcpt in [B1, B2, B3] {
        mail.directory.add_user(rcpt, Some("pw")).expect("user");
        mail.directory
            .set_mail_host(rcpt, Some(STORE_B))
            .expect("mailHost");
    }
    let script: Script = [
        (B2, vec!["451 4.3.0 mailbox busy, later"]),
        (B3, vec!["550 5.1.1 no such mailbox here"]),
    ]
    .into_iter()
    .map(|(r, replies)| (r.to_owned(), replies.into_iter().map(Into::into).collect()))
    .collect();
    let stub = LmtpStub::start(script);
    let mut config = mail.config();
    config.mail_hosts = vec![MailHost {
        name: "Store-B.example.test".into(),
        lmtp: Some(stub.addr.to_string()),
        pop3: None,
        imap: None,
    }];
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.mx);
    c.mail(JOE, &[B1, B2, B3], "Subject: one\r\n\r\n..dot\r\n")
        .assert(250, "queued");
    stub.wait_delivered(B1, 1);
    // The 451 is retried on the queue's schedule; the 550 bounces to Joe, here.
    stub.wait_delivered(B2, 1);
    let bounce = mail.wait_delivered(JOE, 1);
    let bounce = String::from_utf8_lossy(&bounce[0]).into_owned();
    assert!(bounce.contains(B3) && bounce.contains("5.1.1"), "{bounce}");
    assert!(!bounce.contains(&format!("<{B2}>")), "{bounce}");
    mail.wait_queue_empty();
    assert_eq!(stub.delivered_to(B1), 1, "the 250 recipient got it once");
    assert_eq!(stub.delivered_to(B2), 1);
    assert_eq!(stub.delivered_to(B3), 0);
    let text = stub.delivered.lock().expect("lock")[0].1.clone();
    assert!(
        String::from_utf8_lossy(&text).ends_with("Subject: one\r\n\r\n.dot\r\n"),
        "dot-stuffed on the wire, unstuffed by the server"
    );
    for rcpt in [B1, B2, B3] {
        assert!(mail.delivered(rcpt).is_empty(), "{rcpt} stored locally");
    }
    c.mail(JOE, &[B1], "Subject: two\r\n\r\nx\r\n")
        .assert(250, "queued");
    stub.wait_delivered(B1, 2);
    mail.wait_queue_empty();
    assert_eq!(
        stub.connections.load(Ordering::Relaxed),
        1,
        "the retry and the second message reuse the first connection"
    );
}

#[test]
fn without_an_idle_time_every_message_connects_anew() {
    let mail = MailDir::new();
    mail.directory.add_user(B1, Some("pw")).expect("user");
    mail.directory
        .set_mail_host(B1, Some(STORE_B))
        .expect("mailHost");
    let stub = LmtpStub::start(Script::new());
    let mut config = mail.config();
    config.mail_hosts = store_b_at(stub.addr);
    config.queue.lmtp_idle_timeout = Duration::ZERO;
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.mx);
    for n in 1..=2 {
        c.mail(JOE, &[B1], "Subject: x\r\n\r\nx\r\n")
            .assert(250, "queued");
        stub.wait_delivered(B1, n);
    }
    mail.wait_queue_empty();
    assert_eq!(stub.connections.load(Ordering::Relaxed), 2);
}

#[test]
fn a_pooled_connection_the_server_closed_is_replaced_at_once() {
    let mail = MailDir::new();
    mail.directory.add_user(B1, Some("pw")).expect("user");
    mail.directory
        .set_mail_host(B1, Some(STORE_B))
        .expect("mailHost");
    let replies = ["250 2.1.0 Ok", "421 4.4.2 store-b: session timed out"];
    let script: Script = [("MAIL".to_owned(), replies.map(String::from).into())].into();
    let stub = LmtpStub::start(script);
    let mut config = mail.config();
    config.mail_hosts = store_b_at(stub.addr);
    // A deferral would not be retried within the test's wait.
    config.queue.min_backoff = Duration::from_secs(3600);
    config.queue.max_backoff = Duration::from_secs(3600);
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.mx);
    for n in 1..=2 {
        c.mail(JOE, &[B1], "Subject: x\r\n\r\nx\r\n")
            .assert(250, "queued");
        stub.wait_delivered(B1, n);
    }
    mail.wait_queue_empty();
    assert_eq!(stub.connections.load(Ordering::Relaxed), 2);
}

/// Waits until an attempt has failed for want of the store host and the envelope
/// says so.
fn wait_deferred(mail: &MailDir) {
    let deferred = wait_until(DELIVERY_TIMEOUT, || {
        mail.queue_files().iter().any(|f| {
            std::fs::read_to_string(mail.queue().join(f))
                .is_ok_and(|t| t.contains("\"attempts\":1") && t.contains("4.4.2"))
        })
    });
    assert!(deferred, "the first attempt failed and was recorded");
}

/// A `[[mail_host]]` entry for store B at `addr`.
fn store_b_at(addr: SocketAddr) -> Vec<MailHost> {
    vec![MailHost {
        name: STORE_B.into(),
        lmtp: Some(addr.to_string()),
        pop3: None,
        imap: None,
    }]
}

/// A loopback address nobody listens on (bound, then closed).
fn closed_port() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
}

#[test]
fn a_user_moved_while_mail_waits_gets_it_on_the_new_host() {
    let mail = MailDir::new();
    mail.directory.add_user(B1, Some("pw")).expect("user");
    mail.directory
        .set_mail_host(B1, Some(STORE_B))
        .expect("mailHost");
    let mut config = mail.config();
    config.mail_hosts = store_b_at(closed_port());
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.mx);
    c.mail(JOE, &[B1], "Subject: moved\r\n\r\nx\r\n")
        .assert(250, "queued");
    wait_deferred(&mail);
    // B1 moves to this host: the route is looked up again at the retry.
    mail.directory.set_mail_host(B1, None).expect("move");
    let got = mail.wait_delivered(B1, 1);
    assert!(String::from_utf8_lossy(&got[0]).contains("Subject: moved"));
    mail.wait_queue_empty();
}

#[test]
fn an_unreachable_store_host_is_retried_until_it_listens() {
    let mail = MailDir::new();
    mail.directory.add_user(B1, Some("pw")).expect("user");
    mail.directory
        .set_mail_host(B1, Some(STORE_B))
        .expect("mailHost");
    // Nobody listens there until the stub takes the port.
    let addr = closed_port();
    let mut config = mail.config();
    config.mail_hosts = store_b_at(addr);
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.mx);
    c.mail(JOE, &[B1], "Subject: later\r\n\r\nx\r\n")
        .assert(250, "queued");
    wait_deferred(&mail);
    assert!(mail.delivered(B1).is_empty(), "never stored locally");
    let stub = LmtpStub::start_on(addr);
    stub.wait_delivered(B1, 1);
    mail.wait_queue_empty();
    assert!(mail.delivered(JOE).is_empty(), "no bounce");
}
