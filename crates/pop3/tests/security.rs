//! Passwords only over TLS, STLS injection, POP3S, and brute force throttled per
//! client address.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use stoa_testkit::base64;

use common::{Client, JOE, JOE_PASSWORD, MailDir, Running, message};

#[test]
fn passwords_are_refused_before_stls() {
    let mail = MailDir::new();
    mail.deliver(JOE, &message(1, 100));
    let server = Running::start(&mail, mail.config());
    let mut c = Client::connect(server.pop3);
    let capa = c.multi("CAPA");
    assert!(capa.iter().any(|l| l == "STLS"), "{capa:?}");
    assert!(
        !capa.iter().any(|l| l == "USER" || l.starts_with("SASL")),
        "{capa:?}"
    );
    let refusal = "-ERR [SYS/PERM] Plaintext authentication disallowed without TLS";
    assert_eq!(c.cmd(&format!("USER {JOE}")), refusal);
    assert_eq!(c.cmd(&format!("PASS {JOE_PASSWORD}")), refusal);
    let plain = base64(format!("\0{JOE}\0{JOE_PASSWORD}").as_bytes());
    assert_eq!(c.cmd(&format!("AUTH PLAIN {plain}")), refusal);
    c.starttls(&mail.cert);
    let capa = c.multi("CAPA");
    assert!(capa.iter().any(|l| l == "USER"), "{capa:?}");
    assert!(capa.iter().any(|l| l == "SASL PLAIN"), "{capa:?}");
    assert!(!capa.iter().any(|l| l == "STLS"), "{capa:?}");
    assert_eq!(c.cmd("STLS"), "-ERR TLS already active");
    c.ok(&format!("AUTH PLAIN {plain}"));
    let (_, got) = c.retr(1);
    assert_eq!(got, message(1, 100));
    c.ok("QUIT");
}

#[test]
fn plaintext_after_stls_is_never_executed() {
    let mail = MailDir::new();
    let server = Running::start(&mail, mail.config());
    // CAPA injected behind STLS, in the same segment.
    let mut c = Client::connect(server.pop3);
    c.send(b"STLS\r\nCAPA\r\n");
    assert_eq!(c.status(), "+OK Begin TLS negotiation");
    c.handshake(&mail.cert).expect("TLS handshake");
    // The first answer inside TLS is to NOOP (refused before login), not a CAPA.
    assert_eq!(c.cmd("NOOP"), "-ERR Command not valid in this state");
    // A USER injected behind STLS is forgotten too.
    let mut c = Client::connect(server.pop3);
    c.send(format!("STLS\r\nUSER {JOE}\r\n").as_bytes());
    assert_eq!(c.status(), "+OK Begin TLS negotiation");
    c.handshake(&mail.cert).expect("TLS handshake");
    assert_eq!(
        c.cmd(&format!("PASS {JOE_PASSWORD}")),
        "-ERR No username given"
    );
    c.login(JOE, JOE_PASSWORD);
}

#[test]
fn pop3s_is_tls_from_the_first_byte() {
    let mail = MailDir::new();
    mail.deliver(JOE, &message(7, 70_000));
    let server = Running::start(&mail, mail.config());
    let addr = server.pop3s.expect("a POP3S listener");
    let mut c = Client::connect_tls(addr, &mail.cert);
    let capa = c.multi("CAPA");
    assert!(capa.iter().any(|l| l == "USER"), "{capa:?}");
    assert!(!capa.iter().any(|l| l == "STLS"), "{capa:?}");
    c.login(JOE, JOE_PASSWORD);
    let (_, got) = c.retr(1);
    assert_eq!(got, message(7, 70_000));
    c.ok("DELE 1");
    c.ok("QUIT");
    c.expect_eof();
    assert!(mail.stored(JOE).is_empty());
}

#[test]
fn no_stls_without_a_certificate() {
    let mail = MailDir::new();
    let mut config = mail.config();
    config.tls.clear();
    config.tls_listen.clear();
    config.allow_plaintext_auth = true;
    let server = Running::start(&mail, config);
    let mut c = Client::connect(server.pop3);
    let capa = c.multi("CAPA");
    assert!(!capa.iter().any(|l| l == "STLS"), "{capa:?}");
    assert_eq!(c.cmd("STLS"), "-ERR STLS not available");
    c.login(JOE, JOE_PASSWORD);
}

/// Sends a wrong password for `user` on `c`; returns the answer and how long it
/// took.
fn fail(c: &mut Client, user: &str) -> (String, Duration) {
    c.ok(&format!("USER {user}"));
    let start = Instant::now();
    let status = c.cmd("PASS wrong guess");
    (status, start.elapsed())
}

#[test]
fn brute_force_is_throttled_per_address() {
    let mail = MailDir::new();
    let mut config = mail.config();
    config.allow_plaintext_auth = true;
    config.auth_throttle.delay = Duration::from_millis(100);
    config.auth_throttle.max_delay = Duration::from_millis(300);
    config.auth_throttle.max_failures = 4;
    let server = Running::start(&mail, config);
    let guesser: IpAddr = "127.0.0.2".parse().expect("ip");
    let other: IpAddr = "127.0.0.3".parse().expect("ip");

    // 100 ms, then doubling, capped at 300 ms; the session closes after its third.
    let mut c = Client::connect_from(server.pop3, Some(guesser));
    for min in [100, 200, 300] {
        let (status, took) = fail(&mut c, JOE);
        assert_eq!(status, "-ERR [AUTH] Authentication failed");
        assert!(took >= Duration::from_millis(min), "{took:?} < {min} ms");
    }
    c.expect_eof();
    let mut c = Client::connect_from(server.pop3, Some(guesser));
    let (_, took) = fail(&mut c, "nobody@example.test");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    // Four failures: now even the right password is refused, after the delay,
    // with the same answer.
    c.ok(&format!("USER {JOE}"));
    let start = Instant::now();
    assert_eq!(
        c.cmd(&format!("PASS {JOE_PASSWORD}")),
        "-ERR [AUTH] Authentication failed"
    );
    assert!(start.elapsed() >= Duration::from_millis(300));
    let plain = base64(format!("\0{JOE}\0{JOE_PASSWORD}").as_bytes());
    assert_eq!(
        c.cmd(&format!("AUTH PLAIN {plain}")),
        "-ERR [AUTH] Authentication failed"
    );

    // Another address is not affected.
    let mut c = Client::connect_from(server.pop3, Some(other));
    c.login(JOE, JOE_PASSWORD);
    c.ok("QUIT");
}

#[test]
fn loopback_is_secure_by_default_and_other_clients_need_tls() {
    let mail = MailDir::new();
    let mut config = mail.config();
    config.secure_networks = stoa_pop3::config::loopback();
    let server = Running::start(&mail, config);
    let mut c = Client::connect(server.pop3);
    let capa = c.multi("CAPA");
    assert!(capa.iter().any(|l| l == "USER"), "{capa:?}");
    c.login(JOE, JOE_PASSWORD);
    c.ok("QUIT");
    drop(server);
    // Only 127.0.0.1 is secure: a client from 127.0.0.2 is refused as any other.
    let mut config = mail.config();
    config.secure_networks = vec!["127.0.0.1/32".parse().expect("net")];
    let server = Running::start(&mail, config);
    let mut c = Client::connect_from(server.pop3, Some("127.0.0.2".parse().expect("ip")));
    assert_eq!(
        c.cmd(&format!("USER {JOE}")),
        "-ERR [SYS/PERM] Plaintext authentication disallowed without TLS"
    );
    let mut c = Client::connect_from(server.pop3, Some("127.0.0.1".parse().expect("ip")));
    c.login(JOE, JOE_PASSWORD);
}

#[test]
fn a_trusted_proxy_forwards_the_client_address_and_others_cannot() {
    let mail = MailDir::new();
    let mut config = mail.config();
    config.allow_plaintext_auth = true;
    config.trusted_proxies = vec!["127.0.0.3/32".parse().expect("net")];
    config.auth_throttle.delay = Duration::from_millis(50);
    config.auth_throttle.max_delay = Duration::from_millis(50);
    config.auth_throttle.max_failures = 2;
    let server = Running::start(&mail, config);
    let proxy: IpAddr = "127.0.0.3".parse().expect("ip");
    let untrusted: IpAddr = "127.0.0.4".parse().expect("ip");

    // From anyone else XCLIENT is refused and not listed.
    let mut c = Client::connect_from(server.pop3, Some(untrusted));
    assert!(!c.multi("CAPA").iter().any(|l| l == "XCLIENT"));
    assert_eq!(
        c.cmd("XCLIENT ADDR=192.0.2.9 PORT=4242"),
        "-ERR XCLIENT not allowed from your address"
    );
    // So the failures it runs up are its own address's ...
    fail(&mut c, JOE);
    fail(&mut c, JOE);
    let mut c = Client::connect_from(server.pop3, Some(untrusted));
    c.ok(&format!("USER {JOE}"));
    assert_eq!(
        c.cmd(&format!("PASS {JOE_PASSWORD}")),
        "-ERR [AUTH] Authentication failed",
        "127.0.0.4 is locked out"
    );
    // ... and the proxy's clients are counted apart: the one it forwards from
    // 192.0.2.9 is not locked out, and the proxy's address is not either.
    let forwarded = |client: &str| {
        let mut c = Client::connect_from(server.pop3, Some(proxy));
        assert!(c.multi("CAPA").iter().any(|l| l == "XCLIENT"));
        c.ok(&format!("XCLIENT ADDR={client} PORT=4242"));
        c
    };
    let mut c = forwarded("192.0.2.10");
    fail(&mut c, JOE);
    fail(&mut c, JOE);
    let mut c = forwarded("192.0.2.10");
    c.ok(&format!("USER {JOE}"));
    assert_eq!(
        c.cmd(&format!("PASS {JOE_PASSWORD}")),
        "-ERR [AUTH] Authentication failed",
        "the forwarded 192.0.2.10 is locked out"
    );
    let mut c = forwarded("192.0.2.9");
    c.login(JOE, JOE_PASSWORD);
    c.ok("QUIT");
}
