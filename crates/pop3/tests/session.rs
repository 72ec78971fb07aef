//! POP3 conversations over real sockets: logins, the mailbox lock, the UPDATE-state
//! rules, sizes against RETR's bytes, autologout, shutdown, connection limits.

mod common;

use std::time::{Duration, Instant};

use stoa_testkit::base64;

use common::{ANN, ANN_PASSWORD, Client, JOE, JOE_PASSWORD, MailDir, Running, message};

/// A configuration that takes passwords in clear text (the TLS rules have their
/// own tests).
fn plaintext(mail: &MailDir) -> stoa_pop3::Config {
    stoa_pop3::Config {
        allow_plaintext_auth: true,
        ..mail.config()
    }
}

/// Polls until the mailbox of `address` can be locked (the server noticed the end
/// of the session), bounded.
fn wait_unlocked(mail: &MailDir, address: &str) {
    let deadline = Instant::now() + common::IO_TIMEOUT;
    while mail.store.open_mailbox(mail.mailbox(address)).is_err() {
        assert!(Instant::now() < deadline, "the mailbox stayed locked");
        #[allow(
            clippy::disallowed_methods,
            reason = "a poll interval while checking a condition against a deadline"
        )]
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn wrong_user_and_wrong_password_get_the_same_refusal() {
    let mail = MailDir::new();
    let server = Running::start(&mail, plaintext(&mail));
    let mut c = Client::connect(server.pop3);
    assert_eq!(c.greeting, "+OK pop.example.test POP3 server ready");
    c.ok(&format!("USER {JOE}"));
    let wrong_password = c.cmd("PASS not the password");
    c.ok("USER nobody@example.test");
    let unknown_user = c.cmd(&format!("PASS {JOE_PASSWORD}"));
    assert_eq!(wrong_password, "-ERR [AUTH] Authentication failed");
    assert_eq!(unknown_user, wrong_password);
    // AUTH PLAIN with an authorization identity that is not the user: the same.
    let plain = base64(format!("{ANN}\0{JOE}\0{JOE_PASSWORD}").as_bytes());
    assert_eq!(c.cmd(&format!("AUTH PLAIN {plain}")), wrong_password);
    // The third failure closed the session.
    c.expect_eof();

    let mut c = Client::connect(server.pop3);
    let status = c.login(JOE, JOE_PASSWORD);
    assert_eq!(status, "+OK Logged in. Maildrop has 0 messages (0 octets)");
    let plain = base64(format!("\0{ANN}\0{ANN_PASSWORD}").as_bytes());
    let mut c2 = Client::connect(server.pop3);
    c2.ok(&format!("AUTH PLAIN {plain}"));
    assert_eq!(
        c.cmd("QUIT"),
        "+OK pop.example.test POP3 server signing off (maildrop empty)"
    );
    c.expect_eof();
}

#[test]
fn a_second_session_on_a_mailbox_is_in_use() {
    let mail = MailDir::new();
    mail.deliver(JOE, &message(1, 100));
    let server = Running::start(&mail, plaintext(&mail));
    let mut first = Client::connect(server.pop3);
    first.login(JOE, JOE_PASSWORD);
    let mut second = Client::connect(server.pop3);
    second.ok(&format!("USER {JOE}"));
    assert_eq!(
        second.cmd(&format!("PASS {JOE_PASSWORD}")),
        "-ERR [IN-USE] Mailbox is locked by another session"
    );
    first.ok("DELE 1");
    first.ok("QUIT");
    first.expect_eof();
    // Once the first session is over the second may log in, and sees the commit.
    second.ok(&format!("USER {JOE}"));
    let status = second.ok(&format!("PASS {JOE_PASSWORD}"));
    assert!(status.contains("0 messages"), "{status}");
}

#[test]
fn deletions_happen_only_at_quit() {
    let mail = MailDir::new();
    let messages: Vec<Vec<u8>> = (1..=3).map(|n| message(n, 200 * n)).collect();
    for m in &messages {
        mail.deliver(JOE, m);
    }
    let server = Running::start(&mail, plaintext(&mail));

    // A dropped connection deletes nothing.
    let mut c = Client::connect(server.pop3);
    c.login(JOE, JOE_PASSWORD);
    c.ok("DELE 1");
    c.ok("DELE 3");
    assert!(c.ok("STAT").starts_with("+OK 1 "));
    drop(c);
    wait_unlocked(&mail, JOE);
    assert_eq!(mail.stored(JOE), messages);

    // RSET unmarks; QUIT then deletes nothing.
    let mut c = Client::connect(server.pop3);
    c.login(JOE, JOE_PASSWORD);
    c.ok("DELE 2");
    assert_eq!(c.cmd("RETR 2"), "-ERR Message is deleted");
    assert_eq!(c.cmd("DELE 2"), "-ERR Message is deleted");
    let total: usize = messages.iter().map(Vec::len).sum();
    assert_eq!(
        c.cmd("RSET"),
        format!("+OK Maildrop has 3 messages ({total} octets)")
    );
    assert_eq!(
        c.cmd("QUIT"),
        "+OK pop.example.test POP3 server signing off (3 messages left)"
    );
    c.expect_eof();
    assert_eq!(mail.stored(JOE), messages);

    // Mail arriving during the session has no number and survives its QUIT.
    let mut c = Client::connect(server.pop3);
    c.login(JOE, JOE_PASSWORD);
    let late = message(99, 50);
    mail.deliver(JOE, &late);
    assert_eq!(c.multi("LIST").len(), 3);
    assert_eq!(c.cmd("RETR 4"), "-ERR No such message");
    assert_eq!(c.cmd("DELE 4"), "-ERR No such message");
    for n in 1..=3 {
        c.ok(&format!("DELE {n}"));
    }
    assert_eq!(
        c.cmd("QUIT"),
        "+OK pop.example.test POP3 server signing off (maildrop empty)"
    );
    c.expect_eof();
    assert_eq!(mail.stored(JOE), [late]);
}

#[test]
fn sizes_are_the_bytes_retr_sends() {
    let mail = MailDir::new();
    // Small, and several of the server's 64 KiB reads long.
    let messages = [message(1, 10), message(2, 150_000), message(3, 300_001)];
    for m in &messages {
        mail.deliver(JOE, m);
    }
    let server = Running::start(&mail, plaintext(&mail));
    let mut c = Client::connect(server.pop3);
    c.login(JOE, JOE_PASSWORD);
    let total: usize = messages.iter().map(Vec::len).sum();
    assert_eq!(c.cmd("STAT"), format!("+OK 3 {total}"));
    let listed: Vec<usize> = c
        .multi("LIST")
        .iter()
        .map(|l| {
            let (_, size) = l.split_once(' ').expect("n size");
            size.parse().expect("a size")
        })
        .collect();
    assert_eq!(listed, messages.iter().map(Vec::len).collect::<Vec<_>>());
    for (i, m) in messages.iter().enumerate() {
        let (status, got) = c.retr(i + 1);
        assert_eq!(status, format!("+OK {} octets", m.len()));
        assert_eq!(got.len(), listed[i]);
        assert!(got == *m, "message {} differs after unstuffing", i + 1);
        assert_eq!(
            c.cmd(&format!("LIST {}", i + 1)),
            format!("+OK {} {}", i + 1, m.len())
        );
    }
    // UIDL gives the store's uids.
    let uids: Vec<String> = c
        .multi("UIDL")
        .iter()
        .map(|l| l.split_once(' ').expect("n uid").1.to_owned())
        .collect();
    assert_eq!(uids.len(), 3);
    // TOP: the header, the empty line, n body lines.
    c.ok("TOP 1 1");
    let top = c.lines();
    assert_eq!(
        top,
        [
            &b"From: <a@ext.test>"[..],
            b"Subject: message 1",
            b"",
            b".leading dot"
        ]
    );
    c.ok("QUIT");
    let session = mail
        .store
        .open_mailbox(mail.mailbox(JOE))
        .expect("unlocked");
    let stored: Vec<&str> = session.messages().iter().map(|m| m.uid.as_str()).collect();
    assert_eq!(stored, uids);
}

#[test]
fn pipelined_commands_are_answered_in_order() {
    let mail = MailDir::new();
    mail.deliver(JOE, &message(1, 100));
    mail.deliver(JOE, &message(2, 100));
    let server = Running::start(&mail, plaintext(&mail));
    let mut c = Client::connect(server.pop3);
    c.send(
        format!("USER {JOE}\r\nPASS {JOE_PASSWORD}\r\nSTAT\r\nRETR 2\r\nDELE 1\r\nQUIT\r\n")
            .as_bytes(),
    );
    assert_eq!(c.status(), "+OK Send PASS");
    assert!(c.status().starts_with("+OK Logged in."));
    assert!(c.status().starts_with("+OK 2 "));
    assert!(c.status().starts_with("+OK "));
    let retr: Vec<Vec<u8>> = c.lines();
    assert_eq!(retr[1], b"Subject: message 2");
    assert_eq!(c.status(), "+OK Message 1 deleted");
    assert!(c.status().contains("(1 message left)"));
    c.expect_eof();
    assert_eq!(mail.stored(JOE), [message(2, 100)]);
}

#[test]
fn autologout_closes_without_deleting() {
    let mail = MailDir::new();
    mail.deliver(JOE, &message(1, 100));
    let mut config = plaintext(&mail);
    config.limits.idle_timeout = Duration::from_millis(300);
    config.limits.login_timeout = Duration::from_millis(200);
    let server = Running::start(&mail, config);

    let mut c = Client::connect(server.pop3);
    c.login(JOE, JOE_PASSWORD);
    c.ok("DELE 1");
    let idle = Instant::now();
    assert_eq!(c.status(), "-ERR Autologout; idle for too long");
    assert!(idle.elapsed() >= Duration::from_millis(300));
    c.expect_eof();
    wait_unlocked(&mail, JOE);
    assert_eq!(mail.stored(JOE).len(), 1, "nothing deleted");

    // Before login the shorter login timeout applies.
    let mut c = Client::connect(server.pop3);
    let idle = Instant::now();
    assert_eq!(c.status(), "-ERR Autologout; idle for too long");
    assert!(idle.elapsed() >= Duration::from_millis(200));
    c.expect_eof();
}

#[test]
fn shutdown_tells_waiting_sessions_and_deletes_nothing() {
    let mail = MailDir::new();
    mail.deliver(JOE, &message(1, 100));
    let mut server = Running::start(&mail, plaintext(&mail));
    let mut c = Client::connect(server.pop3);
    c.login(JOE, JOE_PASSWORD);
    c.ok("DELE 1");
    server.trigger();
    assert_eq!(c.status(), "-ERR [SYS/TEMP] Server shutting down");
    c.expect_eof();
    server.stop();
    assert_eq!(mail.stored(JOE).len(), 1);
}

#[test]
fn shutdown_cuts_a_failed_logins_delay_short() {
    let mail = MailDir::new();
    let mut config = plaintext(&mail);
    config.auth_throttle.delay = Duration::from_secs(20);
    config.auth_throttle.max_delay = Duration::from_secs(20);
    let mut server = Running::start(&mail, config);
    let mut c = Client::connect(server.pop3);
    // USER's answer is written out only once PASS has failed and its delay
    // begins (earlier answers go first), so after it the server is waiting.
    c.send(format!("USER {JOE}\r\nPASS wrong\r\n").as_bytes());
    assert!(c.status().starts_with("+OK"));
    let start = std::time::Instant::now();
    server.trigger();
    assert_eq!(c.status(), "-ERR [AUTH] Authentication failed");
    assert_eq!(c.status(), "-ERR [SYS/TEMP] Server shutting down");
    c.expect_eof();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    server.stop();
}

#[test]
fn connections_per_client_are_limited() {
    let mail = MailDir::new();
    let mut config = plaintext(&mail);
    config.limits.max_connections_per_client = 2;
    let server = Running::start(&mail, config);
    let one = Client::connect(server.pop3);
    let _two = Client::connect(server.pop3);
    let mut three = Client::connect_raw(server.pop3, None);
    assert_eq!(
        three.greeting,
        "-ERR [SYS/TEMP] Too many connections from your address"
    );
    three.expect_eof();
    drop(one);
    // The slot frees when the server sees the close; a new client gets in then.
    let deadline = Instant::now() + common::IO_TIMEOUT;
    loop {
        let c = Client::connect_raw(server.pop3, None);
        if c.greeting.starts_with("+OK") {
            break;
        }
        assert!(Instant::now() < deadline, "the slot was never freed");
    }
}
