//! The IMAP client (`--access imap`) against a scripted fake server on port 0:
//! the check, the probe's poll and the store check, the deliberate drops, and
//! a server that breaks the protocol in the ways a hostile one could.

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use stoa_mail2001::disconnect::PopDrop;
use stoa_mailgen::imap_client::{MAX_LITERAL, imap_probe_poll, imap_session, imap_stat};
use stoa_mailgen::pace::Pace;
use stoa_mailgen::pop_client::{PopPlan, ProbeResult};
use stoa_mailgen::tally::{Failure, Function, Sized};

use common::{Script, bytes, message, refused_addr, serve_once, tag};

const TIMEOUT: Duration = Duration::from_secs(10);

/// How the fake server misbehaves, if it does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hostile {
    /// Behaves.
    No,
    /// Announces a literal larger than the client accepts for FETCH.
    HugeLiteral,
    /// Never answers FETCH.
    Silent,
    /// Answers SELECT with `* BYE` and closes.
    Bye,
    /// Answers FETCH with a line longer than any the client reads.
    LongLine,
    /// Answers LOGIN with another command's tag.
    WrongTag,
    /// Greets with `* BYE`.
    ByeGreeting,
}

/// How the fake server behaves.
#[derive(Clone)]
struct Fake {
    messages: Vec<Vec<u8>>,
    reject_login: bool,
    hostile: Hostile,
}

impl Fake {
    fn new(messages: Vec<Vec<u8>>) -> Fake {
        Fake {
            messages,
            reject_login: false,
            hostile: Hostile::No,
        }
    }
}

/// The commands the fake server received, without their tags.
type Seen = Arc<Mutex<Vec<String>>>;

/// Starts a fake IMAP server for one connection; the receiver fires once the
/// conversation is over (the client logged out or hung up).
async fn fake(fake: Fake) -> (SocketAddr, Seen, tokio::sync::oneshot::Receiver<()>) {
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

/// The header section of `m` (up to and including the blank line).
fn header(m: &[u8]) -> &[u8] {
    let end = m
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(m.len(), |p| p + 4);
    &m[..end]
}

async fn send_bytes(s: &mut Script, data: &[u8]) {
    use tokio::io::AsyncWriteExt;
    let _ = s.writer.write_all(data).await;
}

async fn converse(mut s: Script, fake: Fake, seen: Seen) {
    if fake.hostile == Hostile::ByeGreeting {
        s.send("* BYE too busy\r\n").await;
        return;
    }
    s.send("* OK [CAPABILITY IMAP4rev1 IMAP4rev2 LITERAL+] fake IMAP ready\r\n")
        .await;
    while let Some(line) = s.line().await {
        let (tag, command) = line.split_once(' ').unwrap_or((&line, ""));
        let tag = tag.to_owned();
        seen.lock().expect("lock").push(command.to_owned());
        let mut words = command.split(' ');
        let verb = words.next().unwrap_or("").to_ascii_uppercase();
        let index: Option<usize> = words.next().and_then(|w| w.parse().ok());
        let msg = index.and_then(|i| fake.messages.get(i.wrapping_sub(1)));
        match (verb.as_str(), msg) {
            ("LOGIN", _) if fake.hostile == Hostile::WrongTag => {
                s.send("zz9 OK logged in\r\n").await;
            }
            ("LOGIN", _) if fake.reject_login => {
                s.send(&format!("{tag} NO [AUTHENTICATIONFAILED] invalid\r\n"))
                    .await;
            }
            ("LOGIN", _) => {
                s.send(&format!("{tag} OK [CAPABILITY IMAP4rev1] in\r\n"))
                    .await
            }
            ("SELECT" | "EXAMINE", _) if fake.hostile == Hostile::Bye => {
                s.send("* BYE shutting down\r\n").await;
                return;
            }
            ("SELECT" | "EXAMINE", _) => {
                s.send(&format!(
                    "* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)\r\n\
                     * {} EXISTS\r\n* OK [UIDVALIDITY 7] ok\r\n* OK [UIDNEXT 9] ok\r\n\
                     {tag} OK [READ-WRITE] selected\r\n",
                    fake.messages.len()
                ))
                .await;
            }
            ("FETCH", _) if command.contains("RFC822.SIZE") => {
                for (i, m) in fake.messages.iter().enumerate() {
                    s.send(&format!("* {} FETCH (RFC822.SIZE {})\r\n", i + 1, m.len()))
                        .await;
                }
                s.send(&format!("{tag} OK done\r\n")).await;
            }
            ("FETCH", Some(_)) if fake.hostile == Hostile::Silent => {}
            ("FETCH", Some(_)) if fake.hostile == Hostile::HugeLiteral => {
                s.send(&format!("* 1 FETCH (BODY[] {{{}}}\r\n", MAX_LITERAL + 1))
                    .await;
            }
            ("FETCH", Some(_)) if fake.hostile == Hostile::LongLine => {
                s.send(&format!("* 1 FETCH (X {})\r\n", "y".repeat(20_000)))
                    .await;
            }
            ("FETCH", Some(m)) => {
                let (name, data) = if command.contains("HEADER") {
                    ("BODY[HEADER]", header(m))
                } else {
                    ("BODY[]", &m[..])
                };
                let i = index.unwrap_or(0);
                // An untagged update first, as a server may send any time.
                s.send(&format!("* {} EXISTS\r\n", fake.messages.len()))
                    .await;
                s.send(&format!(
                    "* {i} FETCH (UID {} {name} {{{}}}\r\n",
                    i + 100,
                    data.len()
                ))
                .await;
                send_bytes(&mut s, data).await;
                s.send(&format!(" FLAGS (\\Seen))\r\n{tag} OK fetched\r\n"))
                    .await;
            }
            ("STORE", Some(_)) => s.send(&format!("{tag} OK stored\r\n")).await,
            ("EXPUNGE", _) => {
                s.send(&format!("* 1 EXPUNGE\r\n{tag} OK expunged\r\n"))
                    .await
            }
            ("LOGOUT", _) => {
                s.send(&format!("* BYE logging out\r\n{tag} OK bye\r\n"))
                    .await;
                return;
            }
            _ => s.send(&format!("{tag} BAD what\r\n")).await,
        }
    }
}

fn plan(addr: SocketAddr) -> PopPlan {
    PopPlan {
        addr,
        user: "user7@stoa.test".into(),
        password: "secret \"7\"".into(),
        pace: Pace::full(),
        reply_timeout: TIMEOUT,
        drop: None,
    }
}

/// Two messages; the second carries lines that look like IMAP responses,
/// which must be read as message octets, not as the server's answers.
fn two_messages() -> Vec<Vec<u8>> {
    vec![
        bytes(&message(&tag(1), 1_500)),
        b"Subject: tricky\r\n\r\na3 OK fake tagged\r\n* 9 EXISTS\r\n{5}\r\n)\r\n".to_vec(),
    ]
}

fn seen(seen: &Seen) -> Vec<String> {
    seen.lock().expect("lock").clone()
}

async fn finished(done: tokio::sync::oneshot::Receiver<()>) {
    tokio::time::timeout(TIMEOUT, done)
        .await
        .expect("the conversation ended")
        .expect("server finished");
}

#[tokio::test]
async fn session_fetches_stores_and_expunges_everything() {
    let messages = two_messages();
    let (addr, log, done) = fake(Fake::new(messages.clone())).await;
    let rec = imap_session(&plan(addr)).await;
    let functions: Vec<Function> = rec.steps.iter().map(|s| s.function).collect();
    assert_eq!(
        functions,
        [
            Function::PopConnect,
            Function::PopPassword,
            Function::PopStatus,
            Function::PopRetrieve,
            Function::PopDelete,
            Function::PopRetrieve,
            Function::PopDelete,
            Function::Expunge,
            Function::PopQuit,
        ]
    );
    assert_eq!(rec.failure(), None);
    assert!(rec.completed && !rec.dropped);
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
    finished(done).await;
    assert_eq!(
        seen(&log),
        [
            "LOGIN \"user7@stoa.test\" \"secret \\\"7\\\"\"",
            "SELECT INBOX",
            "FETCH 1 (BODY.PEEK[])",
            "STORE 1 +FLAGS.SILENT (\\Deleted)",
            "FETCH 2 (BODY.PEEK[])",
            "STORE 2 +FLAGS.SILENT (\\Deleted)",
            "EXPUNGE",
            "LOGOUT",
        ]
    );
}

#[tokio::test]
async fn an_empty_mailbox_logs_out_without_expunge() {
    let (addr, log, done) = fake(Fake::new(Vec::new())).await;
    let rec = imap_session(&plan(addr)).await;
    assert!(rec.completed);
    finished(done).await;
    assert_eq!(seen(&log)[1..], ["SELECT INBOX", "LOGOUT"]);
}

#[tokio::test]
async fn modem_paced_session_completes() {
    let (addr, _, _) = fake(Fake::new(vec![bytes(&message(&tag(3), 4_000))])).await;
    let mut plan = plan(addr);
    plan.pace = Pace::modem();
    let rec = imap_session(&plan).await;
    assert!(rec.completed);
    let t = rec.transfers[0];
    assert_eq!((t.bytes, t.ok), (4_000, true));
    // More than 4,000 bytes read at 6,000 B/s in 1,460-byte reads: the third
    // read may not start before 2,920 / 6,000 s.
    assert!(t.ms >= 480.0, "{} ms", t.ms);
}

#[tokio::test]
async fn rejected_login_is_a_protocol_failure() {
    let (addr, log, done) = fake(Fake {
        reject_login: true,
        ..Fake::new(two_messages())
    })
    .await;
    let rec = imap_session(&plan(addr)).await;
    assert_eq!(
        rec.failure(),
        Some((Function::PopPassword, Failure::Protocol))
    );
    assert_eq!(rec.steps.len(), 2);
    assert!(!rec.completed);
    finished(done).await;
    assert_eq!(seen(&log).last().map(String::as_str), Some("LOGOUT"));
}

#[tokio::test]
async fn refused_connection_is_a_connect_failure() {
    let addr = refused_addr().await;
    let rec = imap_session(&plan(addr)).await;
    assert_eq!(
        rec.failure(),
        Some((Function::PopConnect, Failure::Connect))
    );
    assert_eq!(
        imap_probe_poll(&plan(addr), &tag(1)).await,
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
async fn probe_finds_its_message_in_the_headers() {
    let (addr, log, done) = fake(Fake::new(probe_mailbox(11))).await;
    assert_eq!(
        imap_probe_poll(&plan(addr), &tag(11)).await,
        ProbeResult::Found
    );
    finished(done).await;
    assert_eq!(
        seen(&log)[1..],
        [
            "SELECT INBOX",
            "FETCH 1 (BODY.PEEK[HEADER])",
            "FETCH 2 (BODY.PEEK[HEADER])",
            "STORE 2 +FLAGS.SILENT (\\Deleted)",
            "EXPUNGE",
            "LOGOUT",
        ]
    );
}

#[tokio::test]
async fn probe_not_found_deletes_nothing() {
    let (addr, log, done) = fake(Fake::new(probe_mailbox(11))).await;
    assert_eq!(
        imap_probe_poll(&plan(addr), &tag(99)).await,
        ProbeResult::NotFound
    );
    finished(done).await;
    let log = seen(&log);
    assert!(!log.iter().any(|l| l.starts_with("STORE") || l == "EXPUNGE"));
    assert_eq!(log.last().map(String::as_str), Some("LOGOUT"));
}

#[tokio::test]
async fn probe_login_failure() {
    let (addr, _, _) = fake(Fake {
        reject_login: true,
        ..Fake::new(probe_mailbox(11))
    })
    .await;
    assert_eq!(
        imap_probe_poll(&plan(addr), &tag(11)).await,
        ProbeResult::Failed(Failure::Protocol)
    );
}

#[tokio::test]
async fn stat_counts_the_mailbox_read_only() {
    let messages = two_messages();
    let octets: usize = messages.iter().map(Vec::len).sum();
    let (addr, log, done) = fake(Fake::new(messages)).await;
    assert_eq!(imap_stat(&plan(addr)).await, Ok((2, octets as u64)));
    finished(done).await;
    assert_eq!(
        seen(&log)[1..],
        ["EXAMINE INBOX", "FETCH 1:2 (RFC822.SIZE)", "LOGOUT"]
    );

    let (addr, _, _) = fake(Fake {
        reject_login: true,
        ..Fake::new(Vec::new())
    })
    .await;
    let err = imap_stat(&plan(addr)).await.expect_err("login fails");
    assert_eq!(err.0, Failure::Protocol);
    assert!(err.1.contains("NO [AUTHENTICATIONFAILED]"), "{}", err.1);
}

/// The kit's deliberate disconnects, over IMAP: a drop mid-body hangs up
/// right after the first line of FETCH's data; nothing fails, and the server
/// sees no STORE of that message, no EXPUNGE and no LOGOUT, so it keeps all
/// the mail.
#[tokio::test]
async fn drop_mid_body_leaves_the_mailbox_alone() {
    let mut messages = two_messages();
    messages[1] = bytes(&message(&tag(2), 300_000));
    let (addr, log, done) = fake(Fake::new(messages)).await;
    let mut plan = plan(addr);
    plan.drop = Some(PopDrop {
        retrieve: 2,
        mid_body: true,
    });
    let rec = imap_session(&plan).await;
    assert!(rec.dropped && !rec.completed);
    assert_eq!(rec.failure(), None);
    let functions: Vec<Function> = rec.steps.iter().map(|s| s.function).collect();
    assert_eq!(
        functions,
        [
            Function::PopConnect,
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
    finished(done).await;
    let log = seen(&log);
    assert_eq!(
        log.last().map(String::as_str),
        Some("FETCH 2 (BODY.PEEK[])"),
        "{log:?}"
    );
}

/// The other drop point: after the whole body, before its STORE.
#[tokio::test]
async fn drop_after_the_body_skips_store_and_expunge() {
    let messages = two_messages();
    let (addr, log, done) = fake(Fake::new(messages.clone())).await;
    let mut p = plan(addr);
    p.drop = Some(PopDrop {
        retrieve: 1,
        mid_body: false,
    });
    let rec = imap_session(&p).await;
    assert!(rec.dropped && !rec.completed);
    assert_eq!(rec.failure(), None);
    assert_eq!(
        (rec.transfers[0].bytes, rec.transfers[0].ok),
        (messages[0].len() as u64, true)
    );
    drop(rec);
    finished(done).await;
    assert_eq!(
        seen(&log).last().map(String::as_str),
        Some("FETCH 1 (BODY.PEEK[])")
    );
}

/// Every way the fake server breaks the protocol ends the check with the
/// right failure at the right step, within the reply timeout.
#[tokio::test]
async fn hostile_servers_fail_the_right_step() {
    for (hostile, step, failure) in [
        (
            Hostile::HugeLiteral,
            Function::PopRetrieve,
            Failure::Protocol,
        ),
        (Hostile::Silent, Function::PopRetrieve, Failure::Timeout),
        (Hostile::Bye, Function::PopStatus, Failure::Protocol),
        (Hostile::LongLine, Function::PopRetrieve, Failure::Protocol),
        (Hostile::WrongTag, Function::PopPassword, Failure::Protocol),
        (
            Hostile::ByeGreeting,
            Function::PopConnect,
            Failure::Protocol,
        ),
    ] {
        let (addr, _, _) = fake(Fake {
            hostile,
            ..Fake::new(two_messages())
        })
        .await;
        let mut p = plan(addr);
        // Silence is judged against this.
        p.reply_timeout = Duration::from_millis(300);
        let rec = tokio::time::timeout(TIMEOUT, imap_session(&p))
            .await
            .expect("the check ended within its bounds");
        assert_eq!(rec.failure(), Some((step, failure)), "{:?}", rec.steps);
        assert!(!rec.completed);
    }
}
