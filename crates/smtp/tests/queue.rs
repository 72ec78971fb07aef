//! The queue: relay through a smart host (a scripted sink), retries, bounces,
//! expiry, and recovery after a restart.

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use stoa_directory::User;
use stoa_smtp::{DeliveryError, LocalDelivery};

use common::{Client, JOE, MailDir, Running, Sink};

/// A configuration whose clients (loopback) may relay to `sink`.
fn relaying(mail: &MailDir, sink: &Sink) -> stoa_smtp::Config {
    let mut config = mail.config();
    config.relay_host = Some(sink.addr.to_string());
    config.trusted_networks = vec!["127.0.0.0/8".parse().expect("net")];
    config
}

#[test]
fn trusted_network_relays_dot_stuffed() {
    let mail = MailDir::new();
    let sink = Sink::start(&[]);
    let server = Running::start(&mail, relaying(&mail, &sink));
    let mut c = Client::ehlo(server.mx);
    c.mail(
        JOE,
        &["bob@ext.test", "carol@ext.test"],
        "Subject: out\r\n\r\n..leading dot\r\n",
    )
    .assert(250, "queued");
    let got = sink.wait_messages(1);
    assert_eq!(got[0].to, ["bob@ext.test", "carol@ext.test"]);
    let text = String::from_utf8_lossy(&got[0].data).into_owned();
    assert!(
        text.starts_with("Received: from client.test ([127.0.0.1])\r\n"),
        "{text}"
    );
    assert!(
        text.ends_with("Subject: out\r\n\r\n.leading dot\r\n"),
        "{text}"
    );
    mail.wait_queue_empty();
}

#[test]
fn temporary_failure_is_retried() {
    let mail = MailDir::new();
    let sink = Sink::start(&["451 4.3.0 try again later"]);
    let server = Running::start(&mail, relaying(&mail, &sink));
    let mut c = Client::ehlo(server.mx);
    c.mail(JOE, &["bob@ext.test"], "Subject: retry\r\n\r\nx\r\n")
        .assert(250, "queued");
    let got = sink.wait_messages(1);
    assert_eq!(got[0].to, ["bob@ext.test"]);
    assert!(sink.connections.load(Ordering::Relaxed) >= 2);
    mail.wait_queue_empty();
    assert!(
        mail.delivered(JOE).is_empty(),
        "no bounce for a delivered message"
    );
}

#[test]
fn dropped_connection_is_retried() {
    let mail = MailDir::new();
    // First attempt: the smart host hangs up at RCPT; second: it reads the whole
    // message and hangs up before the final reply; third: it takes it.
    let sink = Sink::start(&["DROP", "DROP-DATA"]);
    let server = Running::start(&mail, relaying(&mail, &sink));
    let mut c = Client::ehlo(server.mx);
    c.mail(JOE, &["bob@ext.test"], "Subject: dropped\r\n\r\nx\r\n")
        .assert(250, "queued");
    let got = sink.wait_messages(1);
    assert_eq!(got[0].to, ["bob@ext.test"]);
    assert!(
        String::from_utf8_lossy(&got[0].data).ends_with("Subject: dropped\r\n\r\nx\r\n"),
        "the message arrives whole on the retry"
    );
    assert!(
        sink.connections.load(Ordering::Relaxed) >= 3,
        "two dropped attempts, then the delivery"
    );
    mail.wait_queue_empty();
    assert_eq!(sink.captured().len(), 1, "delivered once");
    assert!(
        mail.delivered(JOE).is_empty(),
        "a dropped connection is temporary: no bounce"
    );
}

#[test]
fn permanent_failure_bounces_to_the_sender() {
    let mail = MailDir::new();
    let sink = Sink::start(&["550 5.1.1 <bob@ext.test>: no such user"]);
    let server = Running::start(&mail, relaying(&mail, &sink));
    let mut c = Client::ehlo(server.mx);
    c.mail(
        JOE,
        &["bob@ext.test", "carol@ext.test"],
        "Subject: doomed\r\nMessage-ID: <m1@test>\r\n\r\nsecret body\r\n",
    )
    .assert(250, "queued");
    let bounce = mail.wait_delivered(JOE, 1);
    let text = String::from_utf8_lossy(&bounce[0]).into_owned();
    assert!(
        text.contains("Content-Type: multipart/report; report-type=delivery-status;"),
        "{text}"
    );
    assert!(
        text.contains("From: Mail Delivery System <MAILER-DAEMON@mx.example.test>"),
        "{text}"
    );
    assert!(
        text.contains(
            "Final-Recipient: rfc822; bob@ext.test\r\nAction: failed\r\nStatus: 5.1.1\r\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("Diagnostic-Code: smtp; host 127.0.0.1:"),
        "{text}"
    );
    assert!(
        !text.contains("carol@ext.test"),
        "carol was delivered: {text}"
    );
    assert!(text.contains("Message-ID: <m1@test>"), "{text}");
    assert!(!text.contains("secret body"), "{text}");
    // Carol got the message; the queue is empty once both are done.
    let got = sink.wait_messages(1);
    assert_eq!(got[0].to, ["carol@ext.test"]);
    mail.wait_queue_empty();
    assert_eq!(mail.delivered(JOE).len(), 1);
}

#[test]
fn null_sender_gets_no_bounce() {
    let mail = MailDir::new();
    let sink = Sink::start(&["554 5.7.1 rejected"]);
    let server = Running::start(&mail, relaying(&mail, &sink));
    let mut c = Client::ehlo(server.mx);
    c.cmd("MAIL FROM:<>").assert(250, "2.1.0");
    c.cmd("RCPT TO:<bob@ext.test>").assert(250, "2.1.5");
    c.cmd("DATA").assert(354, "");
    c.send(b"Subject: a bounce\r\n\r\nx\r\n.\r\n");
    c.reply().assert(250, "queued");
    mail.wait_queue_empty();
    assert_eq!(sink.connections.load(Ordering::Relaxed), 1);
    assert!(sink.captured().is_empty());
    assert!(mail.delivered(JOE).is_empty());
    assert!(mail.delivered(common::ANN).is_empty());
}

#[test]
fn expired_message_bounces() {
    let mail = MailDir::new();
    let sink = Sink::start(&["451 4.7.1 greylisted"; 100]);
    let mut config = relaying(&mail, &sink);
    // Long enough for a retry (backoff 200–400 ms) even when a loaded machine
    // delays the first attempt: with 1 s the message sometimes expired after
    // one attempt and the retry check below failed.
    config.queue.max_lifetime = Duration::from_secs(3);
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.mx);
    c.mail(JOE, &["bob@ext.test"], "Subject: late\r\n\r\nx\r\n")
        .assert(250, "queued");
    let bounce = mail.wait_delivered(JOE, 1);
    let text = String::from_utf8_lossy(&bounce[0]).into_owned();
    assert!(text.contains("Status: 4.4.7\r\n"), "{text}");
    assert!(
        text.contains("message expired in the queue; last error: host"),
        "{text}"
    );
    assert!(text.contains("greylisted"), "{text}");
    mail.wait_queue_empty();
    assert!(sink.captured().is_empty());
    assert!(sink.connections.load(Ordering::Relaxed) >= 2);
}

/// A store that is down: every delivery fails temporarily.
struct Down;

impl LocalDelivery for Down {
    fn deliver(
        &self,
        _sender: &str,
        _message: &[u8],
        to: &[User],
    ) -> Vec<Result<(), DeliveryError>> {
        to.iter()
            .map(|_| Err(DeliveryError::Temporary("store offline".into())))
            .collect()
    }
}

#[test]
fn queue_recovered_after_restart() {
    let mail = MailDir::new();
    let mut config = mail.config();
    config.queue.min_backoff = Duration::from_secs(1);
    let mut server = Running::start_with(&mail, config.clone(), Arc::new(Down));
    let mut c = Client::ehlo(server.mx);
    let reply = c.mail(
        "a@ext.test",
        &[JOE],
        "Subject: survivor\r\n\r\nstill here\r\n",
    );
    reply.assert(250, "queued");
    let id = reply.text.trim().rsplit(' ').next().expect("id").to_owned();
    let envelope = mail.queue().join(format!("{id}.env"));
    let deferred = stoa_testkit::wait_until(common::DELIVERY_TIMEOUT, || {
        std::fs::read_to_string(&envelope).is_ok_and(|t| t.contains("\"attempts\":1"))
    });
    assert!(
        deferred,
        "not deferred: {:?}",
        std::fs::read_to_string(&envelope)
    );
    drop(c);
    server.stop();
    assert_eq!(
        mail.queue_files(),
        [format!("{id}.env"), format!("{id}.msg")]
    );
    // Leftovers of a crash: an unfinished spool, a message whose envelope never
    // made it, an unfinished envelope rewrite.
    std::fs::write(mail.queue().join("X.msg.tmp"), b"half").expect("write");
    std::fs::write(mail.queue().join("Y.msg"), b"never acknowledged").expect("write");
    std::fs::write(mail.queue().join(format!("{id}.env.tmp")), b"{").expect("write");
    assert!(mail.delivered(JOE).is_empty());

    let _server = Running::start(&mail, config);
    let got = mail.wait_delivered(JOE, 1);
    assert!(String::from_utf8_lossy(&got[0]).contains("Subject: survivor\r\n\r\nstill here\r\n"));
    mail.wait_queue_empty();
    assert_eq!(mail.delivered(JOE).len(), 1);
}
