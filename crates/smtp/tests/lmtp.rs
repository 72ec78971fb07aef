//! The LMTP server on 127.0.0.1:0 over a real mail store: LHLO, HELO/EHLO refused,
//! one reply per accepted recipient after the final dot (a mix of delivered,
//! permanently and temporarily failed mailboxes), pipelining, no relaying, the
//! size limit.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use stoa_directory::{Directory, User};
use stoa_smtp::lmtp::{Config, Server};
use stoa_smtp::{DeliveryError, LocalDelivery, StoreDelivery};
use stoa_testkit::LineConn;

use common::{ANN, JOE, MailDir};

/// A third user, whose mailbox fails temporarily in [`Flaky`].
const TOM: &str = "tom@example.test";

/// A running LMTP server, shut down when dropped.
struct Running {
    addr: SocketAddr,
    trigger: Option<stoa_netkit::shutdown::Trigger>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    fn start(mail: &MailDir, config: Config, local: Arc<dyn LocalDelivery>) -> Running {
        let directory: Arc<dyn Directory> = mail.directory.clone();
        let server = Server::bind(config, directory, local).expect("bind the LMTP server");
        let addr = server.local_addrs()[0];
        let (trigger, shutdown) = stoa_netkit::shutdown::channel();
        let thread = std::thread::spawn(move || server.run(shutdown).expect("run"));
        Running {
            addr,
            trigger: Some(trigger),
            thread: Some(thread),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(trigger) = self.trigger.take() {
            trigger.trigger();
        }
        if let Some(thread) = self.thread.take() {
            thread.join().expect("server thread");
        }
    }
}

fn config() -> Config {
    Config {
        hostname: "store.example.test".into(),
        listen: vec!["127.0.0.1:0".parse().expect("addr")],
        workers: 1,
        ..Config::default()
    }
}

/// The store, except that Ann's mailbox is over quota (permanent) and Tom's
/// cannot be written just now (temporary).
struct Flaky(StoreDelivery);

impl LocalDelivery for Flaky {
    fn deliver(&self, sender: &str, message: &[u8], to: &[User]) -> Vec<Result<(), DeliveryError>> {
        let ok: Vec<User> = to
            .iter()
            .filter(|u| u.address != ANN && u.address != TOM)
            .cloned()
            .collect();
        let mut stored = if ok.is_empty() {
            Vec::new()
        } else {
            self.0.deliver(sender, message, &ok)
        }
        .into_iter();
        to.iter()
            .map(|u| match u.address.as_str() {
                ANN => Err(DeliveryError::Permanent("over quota".into())),
                TOM => Err(DeliveryError::Temporary("disk trouble".into())),
                _ => stored.next().expect("one result per user"),
            })
            .collect()
    }
}

/// Reads one reply; returns its last line.
fn reply(conn: &mut LineConn) -> String {
    loop {
        let line = conn.line().expect("a reply line");
        if line.as_bytes().get(3) != Some(&b'-') {
            return line;
        }
    }
}

fn cmd(conn: &mut LineConn, line: &str) -> String {
    conn.send_line(line);
    reply(conn)
}

/// Connects and sends LHLO.
fn lhlo(addr: SocketAddr) -> LineConn {
    let mut conn = LineConn::connect(addr);
    let greeting = reply(&mut conn);
    assert!(
        greeting.starts_with("220 store.example.test LMTP"),
        "{greeting}"
    );
    conn.send_line("LHLO mta.example.test");
    let mut caps = Vec::new();
    loop {
        let line = conn.line().expect("LHLO reply");
        caps.push(line[4..].to_owned());
        if line.as_bytes()[3] == b' ' {
            break;
        }
    }
    assert_eq!(caps.len(), 5, "{caps:?}");
    assert!(caps[2].starts_with("SIZE "), "{caps:?}");
    assert_eq!(
        [&caps[1], &caps[3], &caps[4]],
        ["PIPELINING", "ENHANCEDSTATUSCODES", "8BITMIME"]
    );
    conn
}

#[test]
fn one_reply_per_recipient_after_the_dot() {
    let mail = MailDir::new();
    let server = Running::start(&mail, config(), Arc::new(mail.store()));
    let mut conn = lhlo(server.addr);
    assert!(cmd(&mut conn, "MAIL FROM:<sender@far.test>").starts_with("250 2.1.0"));
    for (rcpt, expected) in [
        (JOE, "250 2.1.5"),
        ("nobody@example.test", "550 5.1.1"),
        ("x@elsewhere.test", "550 5.1.2"),
        (ANN, "250 2.1.5"),
        ("Joe@Example.Test", "250 2.1.5"),
    ] {
        let got = cmd(&mut conn, &format!("RCPT TO:<{rcpt}>"));
        assert!(got.starts_with(expected), "{rcpt}: {got}");
    }
    assert!(cmd(&mut conn, "DATA").starts_with("354"));
    conn.send(b"Subject: over LMTP\r\n\r\nHello\r\n..dot\r\n.\r\n");
    let replies: Vec<String> = (0..3).map(|_| reply(&mut conn)).collect();
    assert!(
        replies[0].starts_with("250 2.0.0 <joe@example.test>"),
        "{replies:?}"
    );
    assert!(
        replies[1].starts_with("250 2.0.0 <ann@example.test>"),
        "{replies:?}"
    );
    // Each reply names the recipient as the client wrote it.
    assert!(
        replies[2].starts_with("250 2.0.0 <Joe@example.test>"),
        "{replies:?}"
    );
    // The replies came after the store had the message: it is there now.
    for user in [JOE, ANN] {
        let got = mail.delivered(user);
        assert_eq!(got.len(), 1, "{user}: one copy");
        let text = String::from_utf8_lossy(&got[0]).into_owned();
        assert!(
            text.starts_with(
                "Return-Path: <sender@far.test>\r\nReceived: from mta.example.test ([127.0.0.1])"
            ),
            "{text}"
        );
        assert!(
            text.contains("by store.example.test (Stoa) with LMTP id L"),
            "{text}"
        );
        assert!(
            text.ends_with("Subject: over LMTP\r\n\r\nHello\r\n.dot\r\n"),
            "{text}"
        );
    }
    assert!(cmd(&mut conn, "QUIT").starts_with("221"));
    conn.expect_eof();
}

#[test]
fn a_failing_mailbox_fails_only_its_own_recipient() {
    let mail = MailDir::new();
    mail.directory.add_user(TOM, Some("x")).expect("tom");
    let server = Running::start(&mail, config(), Arc::new(Flaky(mail.store())));
    let mut conn = lhlo(server.addr);
    // Pipelined, as an MTA sends it.
    conn.send(
        format!(
            "MAIL FROM:<s@far.test>\r\nRCPT TO:<{ANN}>\r\nRCPT TO:<{JOE}>\r\nRCPT TO:<{TOM}>\r\nDATA\r\n"
        )
        .as_bytes(),
    );
    let codes: Vec<String> = (0..5).map(|_| reply(&mut conn)[..3].to_owned()).collect();
    assert_eq!(codes, ["250", "250", "250", "250", "354"]);
    conn.send(b"Subject: mixed\r\n\r\nbody\r\n.\r\n");
    let ann = reply(&mut conn);
    let joe = reply(&mut conn);
    let tom = reply(&mut conn);
    assert!(ann.starts_with("554 5.2.0 <ann@example.test>"), "{ann}");
    assert!(joe.starts_with("250 2.0.0 <joe@example.test>"), "{joe}");
    assert!(tom.starts_with("451 4.2.0 <tom@example.test>"), "{tom}");
    assert_eq!(mail.delivered(JOE).len(), 1);
    assert!(mail.delivered(ANN).is_empty());
    // The session goes on.
    assert!(cmd(&mut conn, "RSET").starts_with("250"));
}

#[test]
fn helo_and_ehlo_are_refused() {
    let mail = MailDir::new();
    let server = Running::start(&mail, config(), Arc::new(mail.store()));
    let mut conn = LineConn::connect(server.addr);
    reply(&mut conn);
    for greeting in ["EHLO mta.example.test", "HELO mta.example.test"] {
        let got = cmd(&mut conn, greeting);
        assert!(got.starts_with("500 5.5.1"), "{greeting}: {got}");
    }
    assert!(cmd(&mut conn, "MAIL FROM:<s@far.test>").starts_with("503 5.5.1"));
    assert!(cmd(&mut conn, "AUTH PLAIN AGpvZQBzZWNyZXQ=").starts_with("503"));
    assert!(cmd(&mut conn, "STARTTLS").starts_with("502"));
}

#[test]
fn nothing_is_relayed() {
    let mail = MailDir::new();
    let server = Running::start(&mail, config(), Arc::new(mail.store()));
    let mut conn = lhlo(server.addr);
    assert!(cmd(&mut conn, "MAIL FROM:<s@far.test>").starts_with("250"));
    for rcpt in [
        "victim@elsewhere.test",
        "joe@[127.0.0.1]",
        "victim%elsewhere.test@example.test",
        "elsewhere.test!victim@example.test",
    ] {
        let got = cmd(&mut conn, &format!("RCPT TO:<{rcpt}>"));
        assert!(got.starts_with("550 5.1.2"), "{rcpt}: {got}");
    }
    assert!(cmd(&mut conn, "DATA").starts_with("554 5.5.1"));
}

#[test]
fn a_message_over_the_size_limit_is_refused_for_each_recipient() {
    let mail = MailDir::new();
    let mut config = config();
    config.limits.session.max_message_size = 100;
    let server = Running::start(&mail, config, Arc::new(mail.store()));
    let mut conn = lhlo(server.addr);
    assert!(cmd(&mut conn, "MAIL FROM:<s@far.test> SIZE=200").starts_with("552 5.3.4"));
    assert!(cmd(&mut conn, "MAIL FROM:<s@far.test>").starts_with("250"));
    assert!(cmd(&mut conn, &format!("RCPT TO:<{JOE}>")).starts_with("250"));
    assert!(cmd(&mut conn, &format!("RCPT TO:<{ANN}>")).starts_with("250"));
    assert!(cmd(&mut conn, "DATA").starts_with("354"));
    conn.send(format!("Subject: big\r\n\r\n{}\r\n.\r\n", "x".repeat(300)).as_bytes());
    for _ in 0..2 {
        let got = reply(&mut conn);
        assert!(got.starts_with("552 5.3.4"), "{got}");
    }
    assert!(cmd(&mut conn, "NOOP").starts_with("250"));
    assert!(mail.delivered(JOE).is_empty());
}

#[test]
fn a_silent_client_is_timed_out() {
    let mail = MailDir::new();
    let mut config = config();
    config.limits.command_timeout = std::time::Duration::from_millis(300);
    let server = Running::start(&mail, config, Arc::new(mail.store()));
    let mut conn = lhlo(server.addr);
    let got = reply(&mut conn);
    assert!(got.starts_with("421 4.4.2"), "{got}");
    conn.expect_eof();
}
