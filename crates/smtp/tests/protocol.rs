//! Conversations over real sockets: delivery, command order, limits, pipelining,
//! the open-relay forms, the smuggling endings, timeouts, disk space.

mod common;

use std::time::Duration;

use stoa_testkit::pause;

use common::{ANN, Client, DOMAIN, JOE, MailDir, Running, Sink};

const BODY: &str =
    "From: <sender@ext.test>\r\nSubject: hello\r\n\r\nHello, Joe.\r\n..a dotted line\r\n";

#[test]
fn local_delivery_with_received_header() {
    let mail = MailDir::new();
    let server = Running::start(&mail, mail.config());
    let mut c = Client::ehlo(server.mx);
    let reply = c.mail("sender@ext.test", &[JOE], BODY);
    reply.assert(250, "2.0.0 Ok: queued as ");
    let id = reply.text.trim().rsplit(' ').next().expect("id").to_owned();
    c.cmd("QUIT").assert(221, "2.0.0");
    c.expect_eof();
    let got = mail.wait_delivered(JOE, 1);
    let text = String::from_utf8(got[0].clone()).expect("utf-8");
    // The final delivery writes the envelope sender first (RFC 5321 §4.4).
    assert!(
        text.starts_with(
            "Return-Path: <sender@ext.test>\r\n\
             Received: from client.test ([127.0.0.1])\r\n\tby mx.example.test (Stoa) with ESMTP id "
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!("id {id}\r\n\tfor <{JOE}>; ")),
        "{text}"
    );
    assert!(
        text.ends_with("Subject: hello\r\n\r\nHello, Joe.\r\n.a dotted line\r\n"),
        "{text}"
    );
    mail.wait_queue_empty();
    assert!(mail.delivered(ANN).is_empty());
}

#[test]
fn several_recipients_aliases_and_subaddresses() {
    let mail = MailDir::new();
    mail.directory
        .add_alias(&format!("team@{DOMAIN}"), &[JOE, ANN])
        .expect("alias");
    let server = Running::start(&mail, mail.config());
    let mut c = Client::ehlo(server.mx);
    c.mail(
        "s@ext.test",
        &["team@example.test", "JOE+news@Example.Test.", ANN],
        BODY,
    )
    .assert(250, "queued");
    // One copy each, though joe and ann are named twice.
    assert_eq!(mail.wait_delivered(JOE, 1).len(), 1);
    assert_eq!(mail.wait_delivered(ANN, 1).len(), 1);
    mail.wait_queue_empty();
    assert_eq!(mail.delivered(JOE).len(), 1);
    let text = String::from_utf8(mail.delivered(JOE)[0].clone()).expect("utf-8");
    assert!(
        !text.contains("\tfor <"),
        "no `for` with several recipients: {text}"
    );
}

#[test]
fn command_order_and_simple_commands() {
    let mail = MailDir::new();
    let server = Running::start(&mail, mail.config());
    let mut c = Client::connect(server.mx);
    c.cmd(&format!("MAIL FROM:<a@{DOMAIN}>"))
        .assert(503, "5.5.1");
    c.cmd("EHLO client.test").assert(250, "ENHANCEDSTATUSCODES");
    c.cmd(&format!("RCPT TO:<{JOE}>")).assert(503, "5.5.1");
    c.cmd("DATA").assert(503, "5.5.1");
    c.cmd("MAIL FROM:<a@ext.test>").assert(250, "2.1.0");
    c.cmd("MAIL FROM:<a@ext.test>").assert(503, "nested");
    c.cmd("DATA").assert(503, "need RCPT");
    c.cmd(&format!("RCPT TO:<nobody@{DOMAIN}>"))
        .assert(550, "5.1.1");
    c.cmd("DATA").assert(554, "no valid recipients");
    c.cmd("RSET").assert(250, "2.0.0");
    c.cmd("NOOP").assert(250, "2.0.0");
    c.cmd(&format!("VRFY {JOE}")).assert(252, "2.0.0");
    c.cmd("EXPN team").assert(502, "5.5.1");
    c.cmd("FOO").assert(500, "5.5.2");
    c.cmd("MAIL FROM:<a@ext.test> BODY=8BITMIME SIZE=100")
        .assert(250, "2.1.0");
    c.cmd(&format!("RCPT TO:<{JOE}>")).assert(250, "2.1.5");
    c.cmd("QUIT").assert(221, "Bye");
    c.expect_eof();
    // The transaction was abandoned: nothing was queued.
    assert!(mail.queue_files().is_empty());
}

#[test]
fn every_open_relay_form_is_refused() {
    let mail = MailDir::new();
    let sink = Sink::start(&[]);
    let mut config = mail.config();
    config.relay_host = Some(sink.addr.to_string());
    let server = Running::start(&mail, config);
    let forms: &[(&str, &str)] = &[
        ("<>", "<to@ext.test>"),
        ("<from@ext.test>", "<to@ext.test>"),
        ("<from@example.test>", "<to@ext.test>"),
        ("<from@[127.0.0.1]>", "<to@ext.test>"),
        ("<from@[127.0.0.1]>", "<to%ext.test@[127.0.0.1]>"),
        ("<from@[127.0.0.1]>", "<to%ext.test@example.test>"),
        ("<from@[127.0.0.1]>", "<\"to@ext.test\">"),
        ("<from@[127.0.0.1]>", "<\"to%ext.test\">"),
        ("<from@[127.0.0.1]>", "<to@ext.test@[127.0.0.1]>"),
        ("<from@[127.0.0.1]>", "<\"to@ext.test\"@[127.0.0.1]>"),
        ("<from@[127.0.0.1]>", "<\"to@ext.test\"@example.test>"),
        ("<from@[127.0.0.1]>", "<@example.test:to@ext.test>"),
        ("<from@[127.0.0.1]>", "<@[127.0.0.1]:to@ext.test>"),
        ("<from@[127.0.0.1]>", "<ext.test!to>"),
        ("<from@[127.0.0.1]>", "<ext.test!to@[127.0.0.1]>"),
        ("<from@[127.0.0.1]>", "<ext.test!to@example.test>"),
        ("<from@[127.0.0.1]>", "<to@EXT.test.>"),
        ("<from@[127.0.0.1]>", "<to@[IPv6:::1]>"),
    ];
    let mut c = Client::ehlo(server.mx);
    for (from, to) in forms {
        c.cmd("RSET").assert(250, "Ok");
        c.cmd(&format!("MAIL FROM:{from}")).assert(250, "2.1.0");
        let reply = c.cmd(&format!("RCPT TO:{to}"));
        assert!(
            reply.code >= 500,
            "{from} -> {to} was not refused: {:?}",
            reply.text
        );
        if to.contains("ext.test")
            && !to.contains('"')
            && !to.ends_with("!to>")
            && !to.contains("@ext.test@")
        {
            reply.assert(554, "5.7.1");
            assert!(
                reply.text.contains("Relay access denied"),
                "{:?}",
                reply.text
            );
        }
        if reply.code == 501 {
            continue;
        }
        c.cmd("DATA").assert(554, "no valid recipients");
        // Each refusal counts as an error; keep under the hard limit.
        if c.cmd("NOOP").code != 250 {
            break;
        }
        if forms
            .iter()
            .position(|f| f == &(*from, *to))
            .is_some_and(|i| i % 4 == 3)
        {
            c.cmd("QUIT").assert(221, "Bye");
            c = Client::ehlo(server.mx);
        }
    }
    // Local users' address variants are not relaying and are accepted.
    for to in [
        "<joe+tag@example.test>",
        "<JOE@EXAMPLE.TEST>",
        "<joe@example.test.>",
    ] {
        let mut c = Client::ehlo(server.mx);
        c.cmd("MAIL FROM:<x@ext.test>").assert(250, "2.1.0");
        c.cmd(&format!("RCPT TO:{to}")).assert(250, "2.1.5");
    }
    assert!(sink.captured().is_empty());
    assert_eq!(
        sink.connections.load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert!(mail.queue_files().is_empty());
}

#[test]
fn smuggling_endings_never_end_a_message() {
    let mail = MailDir::new();
    let server = Running::start(&mail, mail.config());
    let endings: &[&[u8]] = &[
        b"\n.\n", b"\r.\r", b"\r.\n", b"\n.\r", b"\n.\r\n", b"\r\n.\n", b"\r.\r\n", b"\r\n.\r",
    ];
    for ending in endings {
        let mut c = Client::ehlo(server.mx);
        c.cmd("MAIL FROM:<a@ext.test>").assert(250, "2.1.0");
        c.cmd(&format!("RCPT TO:<{JOE}>")).assert(250, "2.1.5");
        c.cmd("DATA").assert(354, "");
        let mut attack = b"Subject: one\r\n\r\nfirst".to_vec();
        attack.extend_from_slice(ending);
        attack.extend_from_slice(
            format!("MAIL FROM:<ceo@{DOMAIN}>\r\nRCPT TO:<{ANN}>\r\nDATA\r\nSubject: spoofed\r\n\r\nsecond\r\n.\r\n")
                .as_bytes(),
        );
        c.send(&attack);
        c.reply().assert(550, "5.5.2");
        c.expect_eof();
    }
    // The NUL variant is just a line with a NUL: one message, the spoof inside it.
    let mut c = Client::ehlo(server.mx);
    c.cmd("MAIL FROM:<a@ext.test>").assert(250, "2.1.0");
    c.cmd(&format!("RCPT TO:<{JOE}>")).assert(250, "2.1.5");
    c.cmd("DATA").assert(354, "");
    c.send(format!("Subject: one\r\n\r\nfirst\r\n\0.\r\nMAIL FROM:<ceo@{DOMAIN}>\r\nRCPT TO:<{ANN}>\r\nDATA\r\nsecond\r\n.\r\n").as_bytes());
    c.reply().assert(250, "queued");
    c.cmd("QUIT").assert(221, "");
    let got = mail.wait_delivered(JOE, 1);
    assert!(String::from_utf8_lossy(&got[0]).contains("MAIL FROM:<ceo@"));
    mail.wait_queue_empty();
    assert!(mail.delivered(ANN).is_empty());
    assert_eq!(mail.delivered(JOE).len(), 1);
}

#[test]
fn pipelining_and_unauthorised_pipelining() {
    let mail = MailDir::new();
    let server = Running::start(&mail, mail.config());
    let mut c = Client::ehlo(server.mx);
    c.send(format!("MAIL FROM:<a@ext.test>\r\nRCPT TO:<{JOE}>\r\nRCPT TO:<nobody@{DOMAIN}>\r\nRCPT TO:<{ANN}>\r\nDATA\r\n").as_bytes());
    c.reply().assert(250, "2.1.0");
    c.reply().assert(250, "2.1.5");
    c.reply().assert(550, "5.1.1");
    c.reply().assert(250, "2.1.5");
    c.reply().assert(354, "");
    c.send(b"Subject: piped\r\n\r\nbody\r\n.\r\nMAIL FROM:<b@ext.test>\r\nRCPT TO:<ann@example.test>\r\nDATA\r\n");
    c.reply().assert(250, "queued");
    c.reply().assert(250, "2.1.0");
    c.reply().assert(250, "2.1.5");
    c.reply().assert(354, "");
    c.send(b"Subject: second\r\n\r\nbody\r\n.\r\nQUIT\r\n");
    c.reply().assert(250, "queued");
    c.reply().assert(221, "");
    c.expect_eof();
    mail.wait_delivered(ANN, 2);
    mail.wait_delivered(JOE, 1);

    // Before EHLO's reply (HELO only), a batch is unauthorised: 554 and close.
    let mut c = Client::connect(server.mx);
    c.cmd("HELO client.test").assert(250, "mx.example.test");
    c.send(
        format!(
            "MAIL FROM:<a@ext.test>\r\nRCPT TO:<{JOE}>\r\nDATA\r\nSubject: x\r\n\r\nx\r\n.\r\n"
        )
        .as_bytes(),
    );
    c.reply().assert(554, "5.5.0");
    c.expect_eof();
    // A command sent behind DATA (which ends a group) is refused too.
    let mut c = Client::ehlo(server.mx);
    c.cmd("MAIL FROM:<a@ext.test>").assert(250, "");
    c.cmd(&format!("RCPT TO:<{JOE}>")).assert(250, "");
    c.send(b"DATA\r\nSubject: early\r\n\r\nx\r\n.\r\n");
    c.reply().assert(554, "5.5.0");
    c.expect_eof();
    mail.wait_queue_empty();
    assert_eq!(mail.delivered(JOE).len(), 1);
}

#[test]
fn size_recipient_and_line_limits() {
    let mail = MailDir::new();
    let mut config = mail.config();
    config.limits.session.max_message_size = 2000;
    config.limits.session.max_recipients = 2;
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.mx);
    assert!(c.cmd("EHLO again.test").text.contains("SIZE 2000"));
    c.cmd("MAIL FROM:<a@ext.test> SIZE=999999999")
        .assert(552, "5.3.4");
    c.cmd("MAIL FROM:<a@ext.test>").assert(250, "");
    c.cmd(&format!("RCPT TO:<{JOE}>")).assert(250, "");
    c.cmd(&format!("RCPT TO:<{ANN}>")).assert(250, "");
    c.cmd(&format!("RCPT TO:<postmaster@{DOMAIN}>"))
        .assert(452, "4.5.3");
    c.cmd("DATA").assert(354, "");
    c.send("Subject: big\r\n\r\n".as_bytes());
    for _ in 0..50 {
        c.send(&[b'x'; 100]);
        c.send(b"\r\n");
    }
    c.send(b".\r\n");
    c.reply().assert(552, "5.3.4");
    // In sync for the next transaction.
    c.mail("a@ext.test", &[JOE], "Subject: small\r\n\r\nok\r\n")
        .assert(250, "queued");
    let long = format!("MAIL FROM:<{}@ext.test>", "a".repeat(3000));
    c.cmd(&long).assert(500, "5.5.2");
    c.cmd("NOOP").assert(250, "");
    drop(c);
    let got = mail.wait_delivered(JOE, 1);
    assert!(String::from_utf8_lossy(&got[0]).contains("Subject: small"));
    mail.wait_queue_empty();
    assert_eq!(mail.delivered(ANN).len(), 0);
}

#[test]
fn command_and_trickle_timeouts() {
    let mail = MailDir::new();
    let mut config = mail.config();
    config.limits.command_timeout = Duration::from_millis(400);
    config.limits.data_timeout = Duration::from_millis(400);
    let server = Running::start(&mail, config);
    // Silence after the greeting.
    let mut c = Client::connect(server.mx);
    c.reply().assert(421, "4.4.2");
    c.expect_eof();
    // One byte every 100 ms never completes a line in time.
    let mut c = Client::connect(server.mx);
    let started = std::time::Instant::now();
    let mut closed = false;
    for b in b"EHLO a-very-slow-client.test\r\n" {
        if c.try_send(&[*b]).is_err() {
            closed = true;
            break;
        }
        pause(Duration::from_millis(100));
    }
    let _ = closed;
    c.reply().assert(421, "4.4.2");
    assert!(started.elapsed() < Duration::from_secs(3));
    // A trickled message is cut by the DATA deadline.
    let mut c = Client::ehlo(server.mx);
    c.cmd("MAIL FROM:<a@ext.test>").assert(250, "");
    c.cmd(&format!("RCPT TO:<{JOE}>")).assert(250, "");
    c.cmd("DATA").assert(354, "");
    for _ in 0..20 {
        if c.try_send(b"x").is_err() {
            break;
        }
        pause(Duration::from_millis(50));
    }
    c.reply().assert(421, "4.4.2");
    c.expect_eof();
    assert!(mail.queue_files().is_empty(), "{:?}", mail.queue_files());
}

#[test]
fn mail_refused_when_the_disk_is_too_full() {
    let mail = MailDir::new();
    let mut config = mail.config();
    // No file system has 1.5 × 2^62 bytes free: the check fails as on a full disk.
    config.limits.session.max_message_size = 1 << 62;
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.mx);
    c.cmd("MAIL FROM:<a@ext.test>").assert(452, "4.3.1");
    c.cmd("NOOP").assert(250, "");
}

#[test]
fn write_errors_answer_451_and_lose_nothing_accepted() {
    let mail = MailDir::new();
    let mut config = mail.config();
    // Keep the first message queued (the smart host is down) while the queue breaks.
    config.relay_host = Some("127.0.0.1:9".into());
    config.trusted_networks = vec!["127.0.0.0/8".parse().expect("net")];
    config.queue.min_backoff = Duration::from_secs(3600);
    config.queue.max_backoff = Duration::from_secs(3600);
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.mx);
    c.mail(
        "a@ext.test",
        &["far@ext.test"],
        "Subject: kept\r\n\r\nx\r\n",
    )
    .assert(250, "queued");
    // The committed envelope, not its rewrite in progress (`.env.tmp`), must say so.
    let ok = stoa_testkit::wait_until(common::DELIVERY_TIMEOUT, || {
        std::fs::read_dir(mail.queue())
            .expect("queue")
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "env"))
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .any(|t| t.contains("\"attempts\":1"))
    });
    assert!(
        ok,
        "the first message was not deferred: {:?}",
        mail.queue_files()
    );
    // Unfinished temporary files come and go (an envelope rewrite, the failed
    // spool below); the finished files are what must be kept.
    let finished = || -> Vec<String> {
        mail.queue_files()
            .into_iter()
            .filter(|f| !f.ends_with(".tmp"))
            .collect()
    };
    let kept = finished();
    // The queue directory is moved away mid-message: the commit cannot happen.
    c.cmd("MAIL FROM:<a@ext.test>").assert(250, "");
    c.cmd(&format!("RCPT TO:<{JOE}>")).assert(250, "");
    c.cmd("DATA").assert(354, "");
    c.send(b"Subject: lost\r\n\r\n");
    let aside = mail.path().join("queue-aside");
    std::fs::rename(mail.queue(), &aside).expect("move the queue");
    c.send(b"body\r\n.\r\n");
    c.reply().assert(451, "4.3.0");
    // Without the queue directory MAIL is refused (free space unknown) …
    c.cmd("MAIL FROM:<a@ext.test>").assert(452, "4.3.1");
    std::fs::rename(&aside, mail.queue()).expect("restore the queue");
    // … and DATA cannot start a spool.
    c.cmd("MAIL FROM:<a@ext.test>").assert(250, "");
    c.cmd(&format!("RCPT TO:<{JOE}>")).assert(250, "");
    std::fs::rename(mail.queue(), &aside).expect("move the queue");
    c.cmd("DATA").assert(451, "4.3.0");
    std::fs::rename(&aside, mail.queue()).expect("restore the queue");
    // The queue is back: the client's retry succeeds, and the earlier message is intact.
    c.cmd("RSET").assert(250, "");
    c.mail("a@ext.test", &[JOE], "Subject: retried\r\n\r\nx\r\n")
        .assert(250, "queued");
    let got = mail.wait_delivered(JOE, 1);
    assert!(String::from_utf8_lossy(&got[0]).contains("Subject: retried"));
    // The failed spool could not be cleaned up while its directory was elsewhere;
    // it is an unfinished temporary file, which recovery removes at the next start.
    let ok = stoa_testkit::wait_until(common::DELIVERY_TIMEOUT, || finished() == kept);
    assert!(ok, "queue {:?}, expected {kept:?}", mail.queue_files());
}

#[test]
fn too_many_errors_close_the_session() {
    let mail = MailDir::new();
    let mut config = mail.config();
    config.limits.session.soft_error_limit = 100;
    config.limits.session.hard_error_limit = 5;
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.mx);
    for _ in 0..5 {
        c.cmd("BOGUS").assert(500, "5.5.2");
    }
    c.cmd("NOOP").assert(421, "4.7.0");
    c.expect_eof();
}
