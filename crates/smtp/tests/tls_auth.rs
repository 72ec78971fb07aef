//! STARTTLS, AUTH and the submission listener.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use stoa_netkit::throttle::Throttle;

use common::{ANN, Client, JOE, JOE_PASSWORD, MailDir, Running, Sink};

#[test]
fn auth_only_after_tls_then_relay_allowed() {
    let mail = MailDir::new();
    let sink = Sink::start(&[]);
    let mut config = mail.config();
    config.relay_host = Some(sink.addr.to_string());
    let server = Running::start(&mail, config);
    let mut c = Client::connect(server.mx);
    let ehlo = c.cmd("EHLO client.test");
    assert!(
        ehlo.text.contains("STARTTLS") && !ehlo.text.contains("AUTH"),
        "{}",
        ehlo.text
    );
    c.auth_plain(JOE, JOE_PASSWORD).assert(538, "5.7.11");
    c.cmd("MAIL FROM:<joe@example.test>").assert(250, "");
    c.cmd("RCPT TO:<friend@ext.test>").assert(554, "5.7.1");
    c.cmd("RSET").assert(250, "");
    c.starttls(&mail.cert);
    let ehlo = c.cmd("EHLO client.test");
    assert!(
        ehlo.text.contains("AUTH PLAIN LOGIN") && !ehlo.text.contains("STARTTLS"),
        "{}",
        ehlo.text
    );
    c.auth_plain(JOE, "wrong").assert(535, "5.7.8");
    c.auth_plain("nobody@example.test", "wrong")
        .assert(535, "5.7.8");
    c.auth_plain(JOE, JOE_PASSWORD).assert(235, "2.7.0");
    let reply = c.mail(JOE, &["friend@ext.test"], "Subject: out\r\n\r\nhi\r\n");
    reply.assert(250, "queued");
    let got = sink.wait_messages(1);
    assert_eq!(got[0].from, JOE);
    assert_eq!(got[0].to, ["friend@ext.test"]);
    let text = String::from_utf8_lossy(&got[0].data).into_owned();
    assert!(text.contains("with ESMTPSA id"), "{text}");
    mail.wait_queue_empty();
}

#[test]
fn auth_login_mechanism() {
    let mail = MailDir::new();
    let server = Running::start(&mail, mail.config());
    let mut c = Client::ehlo(server.submission);
    c.starttls(&mail.cert);
    c.cmd("EHLO client.test").assert(250, "AUTH");
    c.cmd("AUTH LOGIN").assert(334, "VXNlcm5hbWU6");
    c.cmd(&stoa_testkit::base64(JOE.as_bytes()))
        .assert(334, "UGFzc3dvcmQ6");
    c.cmd(&stoa_testkit::base64(JOE_PASSWORD.as_bytes()))
        .assert(235, "2.7.0");
}

#[test]
fn starttls_injection_is_not_executed_in_tls() {
    let mail = MailDir::new();
    let server = Running::start(&mail, mail.config());
    let mut c = Client::ehlo(server.mx);
    // RSET rides behind STARTTLS in one write: it must never be answered inside
    // TLS. With unauthorised pipelining refused, the whole session ends.
    c.send(b"STARTTLS\r\nRSET\r\n");
    c.reply().assert(554, "5.5.0");
    c.expect_eof();
}

#[test]
fn submission_requires_auth() {
    let mail = MailDir::new();
    let server = Running::start(&mail, mail.config());
    let mut c = Client::ehlo(server.submission);
    c.cmd("MAIL FROM:<joe@example.test>").assert(530, "5.7.0");
    c.starttls(&mail.cert);
    c.cmd("EHLO client.test").assert(250, "AUTH PLAIN LOGIN");
    c.cmd("MAIL FROM:<joe@example.test>").assert(530, "5.7.0");
    c.auth_plain(JOE, JOE_PASSWORD).assert(235, "");
    c.mail(JOE, &["ann@example.test"], "Subject: sub\r\n\r\nx\r\n")
        .assert(250, "queued");
    let got = mail.wait_delivered("ann@example.test", 1);
    assert!(String::from_utf8_lossy(&got[0]).contains("with ESMTPSA"));
}

#[test]
fn tls_session_forgets_plaintext_state() {
    let mail = MailDir::new();
    let server = Running::start(&mail, mail.config());
    let mut c = Client::ehlo(server.mx);
    c.starttls(&mail.cert);
    // RFC 3207: the EHLO before TLS no longer counts.
    c.cmd("MAIL FROM:<a@ext.test>").assert(503, "5.5.1");
    c.cmd("EHLO client.test").assert(250, "");
    c.cmd("STARTTLS").assert(554, "5.5.1");
    c.mail("a@ext.test", &[JOE], "Subject: tls\r\n\r\nx\r\n")
        .assert(250, "queued");
    let got = mail.wait_delivered(JOE, 1);
    assert!(String::from_utf8_lossy(&got[0]).contains("with ESMTPS id"));
}

/// Issue 21, hole 2: AUTH guessing on the submission port was answered at once
/// (44.6 wrong passwords a second from one address). Each `535` now waits the
/// throttle's doubling delay, and an address past the limit is refused even the
/// right password, with the same `535 5.7.8`, without it being checked.
#[test]
fn auth_failures_are_delayed_then_refused_per_address() {
    let mail = MailDir::new();
    let mut config = mail.config();
    config.auth_throttle.delay = Duration::from_millis(50);
    config.auth_throttle.max_delay = Duration::from_millis(200);
    config.auth_throttle.max_failures = 3;
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.submission);
    c.starttls(&mail.cert);
    c.cmd("EHLO client.test").assert(250, "AUTH PLAIN");
    // 50 ms, then doubled, capped at 200 ms.
    for min in [50, 100, 200] {
        let start = Instant::now();
        c.auth_plain(JOE, "wrong guess").assert(535, "5.7.8");
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(min), "{took:?} < {min} ms");
    }
    // Three failures: the right password gets the same answer after the longest
    // delay, on this connection and on a new one from the same address.
    let start = Instant::now();
    c.auth_plain(JOE, JOE_PASSWORD).assert(535, "5.7.8");
    assert!(start.elapsed() >= Duration::from_millis(200));
    let mut c = Client::ehlo(server.submission);
    c.starttls(&mail.cert);
    c.cmd("EHLO client.test").assert(250, "AUTH PLAIN");
    c.auth_plain(JOE, JOE_PASSWORD).assert(535, "5.7.8");
    c.cmd("MAIL FROM:<joe@example.test>").assert(530, "5.7.0");
}

/// A refused AUTH waiting out its delay does not hold up shutdown: the client
/// gets `421 4.3.2` at once, not `535` after the delay (nor, once the drain's grace
/// ran out, a dropped connection).
#[test]
fn shutdown_cuts_an_auth_delay_short() {
    let mail = MailDir::new();
    let mut config = mail.config();
    config.auth_throttle.delay = Duration::from_secs(60);
    config.auth_throttle.max_delay = Duration::from_secs(60);
    let throttle = Arc::new(Throttle::new(config.auth_throttle.clone()));
    let local = Arc::new(mail.store());
    let mut server = Running::start_shared(&mail, config, local, Arc::clone(&throttle));
    let mut c = Client::ehlo(server.submission);
    c.starttls(&mail.cert);
    c.cmd("EHLO client.test").assert(250, "AUTH PLAIN");
    let plain = stoa_testkit::base64(format!("\0{JOE}\0wrong guess").as_bytes());
    c.send(format!("AUTH PLAIN {plain}\r\n").as_bytes());
    // The failure is counted just before its delay starts.
    let ip = "127.0.0.1".parse().expect("address");
    let counted = stoa_testkit::wait_until(Duration::from_secs(10), || {
        throttle.failures(ip, Instant::now()) >= 1
    });
    assert!(counted, "the failed AUTH was not counted");
    server.stop();
    c.reply().assert(421, "4.3.2");
}

/// Issue 56, defect 10: logged in as joe, `MAIL FROM:<ann@…>` was relayed. An
/// authenticated client may send as its own address, an alias that reaches it and
/// a `+detail` form, not as anyone else; `sender_login_match = false` turns the
/// check off.
#[test]
fn an_authenticated_user_sends_only_as_an_address_it_owns() {
    let mail = MailDir::new();
    mail.directory
        .add_alias("joe.alias@example.test", &[JOE])
        .expect("alias");
    let server = Running::start(&mail, mail.config());
    let mut c = Client::ehlo(server.submission);
    c.starttls(&mail.cert);
    c.cmd("EHLO client.test").assert(250, "AUTH");
    c.auth_plain(JOE, JOE_PASSWORD).assert(235, "");
    c.cmd("MAIL FROM:<ann@example.test>").assert(250, "");
    c.cmd("RCPT TO:<ann@example.test>").assert(553, "5.7.1");
    c.cmd("RSET").assert(250, "");
    c.cmd("MAIL FROM:<someone@ext.test>").assert(250, "");
    c.cmd("RCPT TO:<ann@example.test>").assert(553, "5.7.1");
    c.cmd("RSET").assert(250, "");
    for own in [JOE, "joe.alias@example.test", "joe+lists@example.test"] {
        c.mail(own, &[ANN], "Subject: mine\r\n\r\nx\r\n")
            .assert(250, "queued");
    }
    c.mail("", &[ANN], "Subject: bounce\r\n\r\nx\r\n")
        .assert(250, "queued");
    mail.wait_delivered(ANN, 4);

    let mut config = mail.config();
    config.sender_login_match = false;
    let server = Running::start(&mail, config);
    let mut c = Client::ehlo(server.submission);
    c.starttls(&mail.cert);
    c.cmd("EHLO client.test").assert(250, "AUTH");
    c.auth_plain(JOE, JOE_PASSWORD).assert(235, "");
    c.mail("ann@example.test", &[ANN], "Subject: as ann\r\n\r\nx\r\n")
        .assert(250, "queued");
}
