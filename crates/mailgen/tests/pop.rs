//! The POP3 client against a scripted fake server on port 0.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stoa_mail2001::disconnect::PopDrop;
use stoa_mailgen::pace::Pace;
use stoa_mailgen::pop_client::{PopPlan, ProbeResult, pop_session, pop_stat, probe_poll};
use stoa_mailgen::tally::{Failure, Function, Sized};

use common::{Script, bytes, message, refused_addr, serve_once, tag};

const TIMEOUT: Duration = Duration::from_secs(10);

/// How the fake server behaves.
#[derive(Clone)]
struct Fake {
    messages: Vec<Vec<u8>>,
    reject_pass: bool,
    top: bool,
}

/// The commands the fake server received.
type Seen = Arc<Mutex<Vec<String>>>;

/// Starts a fake POP3 server for one connection.
async fn fake(fake: Fake) -> (SocketAddr, Seen) {
    let seen = Seen::default();
    let log = Arc::clone(&seen);
    let addr = serve_once(move |s| converse(s, fake, log)).await;
    (addr, seen)
}

/// Starts a fake POP3 server for one connection; the receiver fires once the
/// conversation is over (the client quit or hung up).
async fn fake_until_done(fake: Fake) -> (SocketAddr, Seen, tokio::sync::oneshot::Receiver<()>) {
    let seen = Seen::default();
    let log = Arc::clone(&seen);
    let (done, finished) = tokio::sync::oneshot::channel();
    let addr = serve_once(move |s| async move {
        converse(s, fake, log).await;
        let _ = done.send(());
    })
    .await;
    (addr, seen, finished)
}

/// Sends `data` dot-stuffed, then the terminator.
async fn send_body(s: &mut Script, data: &[u8]) {
    let mut wire = String::new();
    for line in String::from_utf8_lossy(data).split_inclusive("\r\n") {
        if line.starts_with('.') {
            wire.push('.');
        }
        wire.push_str(line);
    }
    wire.push_str(".\r\n");
    s.send(&wire).await;
}

async fn converse(mut s: Script, fake: Fake, seen: Seen) {
    s.send("+OK fake POP3 ready\r\n").await;
    while let Some(line) = s.line().await {
        seen.lock().expect("lock").push(line.clone());
        let mut words = line.split(' ');
        let verb = words.next().unwrap_or("");
        let index: Option<usize> = words.next().and_then(|w| w.parse().ok());
        let msg = index.and_then(|i| fake.messages.get(i.wrapping_sub(1)));
        match (verb, msg) {
            ("USER", _) => s.send("+OK\r\n").await,
            ("PASS", _) if fake.reject_pass => s.send("-ERR invalid login\r\n").await,
            ("PASS", _) => s.send("+OK logged in\r\n").await,
            ("STAT", _) => {
                let octets: usize = fake.messages.iter().map(Vec::len).sum();
                s.send(&format!("+OK {} {octets}\r\n", fake.messages.len()))
                    .await;
            }
            ("RETR", Some(m)) => {
                s.send(&format!("+OK {} octets\r\n", m.len())).await;
                send_body(&mut s, m).await;
            }
            ("TOP", Some(m)) if fake.top => {
                s.send("+OK\r\n").await;
                let end = m
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .map_or(m.len(), |p| p + 4);
                send_body(&mut s, &m[..end]).await;
            }
            ("DELE", Some(_)) => s.send("+OK deleted\r\n").await,
            ("QUIT", _) => {
                s.send("+OK bye\r\n").await;
                return;
            }
            _ => s.send("-ERR no\r\n").await,
        }
    }
}

fn plan(addr: SocketAddr) -> PopPlan {
    PopPlan {
        addr,
        user: "user7@stoa.test".into(),
        password: "secret7".into(),
        pace: Pace::full(),
        reply_timeout: TIMEOUT,
        drop: None,
    }
}

/// Two messages; the second has a line starting with a dot.
fn two_messages() -> Vec<Vec<u8>> {
    vec![
        bytes(&message(&tag(1), 1_500)),
        b"Subject: dots\r\n\r\n.leading dot\r\n..two dots\r\nend\r\n".to_vec(),
    ]
}

fn seen(seen: &Seen) -> Vec<String> {
    seen.lock().expect("lock").clone()
}

#[tokio::test]
async fn session_retrieves_and_deletes_everything() {
    let messages = two_messages();
    let (addr, log) = fake(Fake {
        messages: messages.clone(),
        reject_pass: false,
        top: true,
    })
    .await;
    let rec = pop_session(&plan(addr)).await;
    let functions: Vec<Function> = rec.steps.iter().map(|s| s.function).collect();
    assert_eq!(
        functions,
        [
            Function::PopConnect,
            Function::PopUserId,
            Function::PopPassword,
            Function::PopStatus,
            Function::PopRetrieve,
            Function::PopDelete,
            Function::PopRetrieve,
            Function::PopDelete,
            Function::PopQuit,
        ]
    );
    assert_eq!(rec.failure(), None);
    assert!(rec.completed);
    let sizes: Vec<(Sized, u64, bool)> = rec
        .transfers
        .iter()
        .map(|t| (t.kind, t.bytes, t.ok))
        .collect();
    assert_eq!(
        sizes,
        [
            (Sized::RetrieveResponse, messages[0].len() as u64, true),
            (Sized::RetrieveResponse, messages[1].len() as u64, true),
        ]
    );
    let log = seen(&log);
    assert!(log.contains(&"DELE 1".to_owned()) && log.contains(&"DELE 2".to_owned()));
    assert_eq!(
        log.first().map(String::as_str),
        Some("USER user7@stoa.test")
    );
}

#[tokio::test]
async fn modem_paced_session_completes() {
    let (addr, _) = fake(Fake {
        messages: vec![bytes(&message(&tag(3), 4_000))],
        reject_pass: false,
        top: true,
    })
    .await;
    let mut plan = plan(addr);
    plan.pace = Pace::modem();
    let rec = pop_session(&plan).await;
    assert!(rec.completed);
    let t = rec.transfers[0];
    assert_eq!((t.bytes, t.ok), (4_000, true));
    // About 4,030 bytes read at 6,000 B/s in 1,460-byte reads: the third read
    // may not start before 2,920 / 6,000 s.
    assert!(t.ms >= 480.0, "{} ms", t.ms);
}

#[tokio::test]
async fn rejected_password_is_a_protocol_failure() {
    let (addr, log) = fake(Fake {
        messages: two_messages(),
        reject_pass: true,
        top: true,
    })
    .await;
    let rec = pop_session(&plan(addr)).await;
    assert_eq!(
        rec.failure(),
        Some((Function::PopPassword, Failure::Protocol))
    );
    assert_eq!(rec.steps.len(), 3);
    assert!(!rec.completed);
    assert_eq!(seen(&log).last().map(String::as_str), Some("QUIT"));
}

#[tokio::test]
async fn refused_connection_is_a_connect_failure() {
    let addr = refused_addr().await;
    let rec = pop_session(&plan(addr)).await;
    assert_eq!(
        rec.failure(),
        Some((Function::PopConnect, Failure::Connect))
    );
    assert_eq!(
        probe_poll(&plan(addr), &tag(1)).await,
        ProbeResult::Failed(Failure::Connect)
    );
}

/// Three messages: the probe's tag is on the second one only.
fn probe_mailbox(probe: u64) -> Vec<Vec<u8>> {
    vec![
        bytes(&message(&tag(10), 1_200)),
        bytes(&message(&tag(probe), 3_000)),
        bytes(&message(&tag(12), 1_100)),
    ]
}

#[tokio::test]
async fn probe_finds_its_message_with_top() {
    let (addr, log) = fake(Fake {
        messages: probe_mailbox(11),
        reject_pass: false,
        top: true,
    })
    .await;
    assert_eq!(probe_poll(&plan(addr), &tag(11)).await, ProbeResult::Found);
    let log = seen(&log);
    let deletes: Vec<&String> = log.iter().filter(|l| l.starts_with("DELE")).collect();
    assert_eq!(deletes, ["DELE 2"]);
    assert!(log.contains(&"TOP 2 0".to_owned()));
    assert!(!log.iter().any(|l| l.starts_with("RETR")));
    assert_eq!(log.last().map(String::as_str), Some("QUIT"));
}

#[tokio::test]
async fn probe_not_found() {
    let (addr, log) = fake(Fake {
        messages: probe_mailbox(11),
        reject_pass: false,
        top: true,
    })
    .await;
    assert_eq!(
        probe_poll(&plan(addr), &tag(99)).await,
        ProbeResult::NotFound
    );
    let log = seen(&log);
    assert!(!log.iter().any(|l| l.starts_with("DELE")));
    assert_eq!(log.last().map(String::as_str), Some("QUIT"));
}

#[tokio::test]
async fn probe_falls_back_to_retr() {
    let (addr, log) = fake(Fake {
        messages: probe_mailbox(11),
        reject_pass: false,
        top: false,
    })
    .await;
    assert_eq!(probe_poll(&plan(addr), &tag(11)).await, ProbeResult::Found);
    let log = seen(&log);
    assert!(log.contains(&"RETR 2".to_owned()));
    let deletes: Vec<&String> = log.iter().filter(|l| l.starts_with("DELE")).collect();
    assert_eq!(deletes, ["DELE 2"]);
}

#[tokio::test]
async fn probe_login_failure() {
    let (addr, _) = fake(Fake {
        messages: probe_mailbox(11),
        reject_pass: true,
        top: true,
    })
    .await;
    assert_eq!(
        probe_poll(&plan(addr), &tag(11)).await,
        ProbeResult::Failed(Failure::Protocol)
    );
}

#[tokio::test]
async fn stat_counts_the_mailbox() {
    let messages = two_messages();
    let octets: usize = messages.iter().map(Vec::len).sum();
    let (addr, log) = fake(Fake {
        messages,
        reject_pass: false,
        top: true,
    })
    .await;
    assert_eq!(pop_stat(&plan(addr)).await, Ok((2, octets as u64)));
    assert_eq!(seen(&log).last().map(String::as_str), Some("QUIT"));

    let (addr, _) = fake(Fake {
        messages: Vec::new(),
        reject_pass: true,
        top: true,
    })
    .await;
    let err = pop_stat(&plan(addr)).await.expect_err("login fails");
    assert_eq!(err.0, Failure::Protocol);
    assert!(err.1.contains("-ERR"), "{}", err.1);
}

/// Issue 18, item 3: the kit's deliberate POP disconnects. A drop mid-body
/// hangs up right after RETR's +OK: the transfer is attempted and not passed,
/// nothing fails, and the server sees no DELE and no QUIT, so it keeps all
/// the mail.
#[tokio::test]
async fn drop_mid_body_leaves_the_mailbox_alone() {
    let mut messages = two_messages();
    messages[1] = bytes(&message(&tag(2), 300_000));
    let (addr, log, finished) = fake_until_done(Fake {
        messages,
        reject_pass: false,
        top: true,
    })
    .await;
    let mut plan = plan(addr);
    plan.drop = Some(PopDrop {
        retrieve: 2,
        mid_body: true,
    });
    let rec = pop_session(&plan).await;
    assert!(rec.dropped && !rec.completed);
    assert_eq!(rec.failure(), None);
    let functions: Vec<Function> = rec.steps.iter().map(|s| s.function).collect();
    assert_eq!(
        functions,
        [
            Function::PopConnect,
            Function::PopUserId,
            Function::PopPassword,
            Function::PopStatus,
            Function::PopRetrieve,
            Function::PopDelete,
            Function::PopRetrieve,
        ]
    );
    let transfers: Vec<(u64, bool)> = rec.transfers.iter().map(|t| (t.bytes, t.ok)).collect();
    assert_eq!(transfers.len(), 2);
    assert!(transfers[0].1 && !transfers[1].1, "{transfers:?}");
    drop(rec);
    tokio::time::timeout(TIMEOUT, finished)
        .await
        .expect("the client hung up")
        .expect("server finished");
    let log = seen(&log);
    assert_eq!(log.last().map(String::as_str), Some("RETR 2"), "{log:?}");
    assert!(!log.contains(&"DELE 2".to_owned()) && !log.contains(&"QUIT".to_owned()));
}

/// The other drop point: after the whole body, before its DELE; the transfer
/// passes as any other.
#[tokio::test]
async fn drop_after_the_body_skips_dele_and_quit() {
    let messages = two_messages();
    let (addr, log, finished) = fake_until_done(Fake {
        messages: messages.clone(),
        reject_pass: false,
        top: true,
    })
    .await;
    let mut p = plan(addr);
    p.drop = Some(PopDrop {
        retrieve: 1,
        mid_body: false,
    });
    let rec = pop_session(&p).await;
    assert!(rec.dropped && !rec.completed);
    assert_eq!(rec.failure(), None);
    assert_eq!(
        rec.steps.last().map(|s| s.function),
        Some(Function::PopRetrieve)
    );
    assert_eq!(rec.transfers.len(), 1);
    assert_eq!(
        (rec.transfers[0].bytes, rec.transfers[0].ok),
        (messages[0].len() as u64, true)
    );
    drop(rec);
    tokio::time::timeout(TIMEOUT, finished)
        .await
        .expect("the client hung up")
        .expect("server finished");
    let log = seen(&log);
    assert_eq!(log.last().map(String::as_str), Some("RETR 1"), "{log:?}");
    // A drop point past the mailbox's last message: an ordinary session.
    let (addr, _) = fake(Fake {
        messages: two_messages(),
        reject_pass: false,
        top: true,
    })
    .await;
    let mut p = plan(addr);
    p.drop = Some(PopDrop {
        retrieve: 3,
        mid_body: true,
    });
    let rec = pop_session(&p).await;
    assert!(rec.completed && !rec.dropped);
}
