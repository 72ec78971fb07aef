//! The SMTP client against the sink and against scripted fake servers, and the
//! sink against a raw, pipelining client. Real sockets on port 0.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use stoa_mailgen::pace::Pace;
use stoa_mailgen::sink::{Sink, SinkMessage};
use stoa_mailgen::smtp_client::{FillMessage, SmtpPlan, smtp_fill, smtp_session};
use stoa_mailgen::tally::{Failure, Function, Sized};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use common::{Script, message, refused_addr, serve_once, tag};

const TIMEOUT: Duration = Duration::from_secs(10);

/// A sink on port 0 and what its callback received.
async fn sink() -> (Sink, Arc<Mutex<Vec<SinkMessage>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&got);
    let sink = Sink::start(
        listener,
        Arc::new(move |m| seen.lock().expect("lock").push(m)),
    );
    (sink, got)
}

fn plan(addr: std::net::SocketAddr, size: usize, pace: Pace) -> SmtpPlan {
    SmtpPlan {
        addr,
        helo: "client7.remote.test".into(),
        mail_from: "sender@remote.test".into(),
        rcpts: vec![
            ("user1@stoa.test".into(), true),
            ("user2@stoa.test".into(), true),
            ("someone@remote.test".into(), false),
        ],
        message: message(&tag(1), size),
        pace,
        reply_timeout: TIMEOUT,
        drop_mid_data: false,
    }
}

fn functions(rec: &stoa_mailgen::tally::SessionRecord) -> Vec<Function> {
    rec.steps.iter().map(|s| s.function).collect()
}

#[tokio::test]
async fn session_to_the_sink() {
    let (sink, got) = sink().await;
    let plan = plan(sink.local_addr(), 5_000, Pace::full());
    let rec = smtp_session(&plan).await;
    assert_eq!(
        functions(&rec),
        [
            Function::SmtpConnect,
            Function::SmtpHello,
            Function::SmtpMailFrom,
            Function::SmtpRcptTo,
            Function::SmtpRcptTo,
            Function::SmtpRcptTo,
            Function::SmtpData,
            Function::SmtpQuit,
        ]
    );
    assert!(rec.steps.iter().all(|s| s.outcome.is_ok() && s.ms >= 0.0));
    assert_eq!(rec.failure(), None);
    assert!(rec.completed);
    assert_eq!((rec.to_local, rec.to_remote), (2, 1));
    assert_eq!(rec.transfers.len(), 1);
    let t = rec.transfers[0];
    assert_eq!(t.kind, Sized::DataResponse);
    assert_eq!(t.bytes, 5_000);
    assert!(t.ok);

    let got = got.lock().expect("lock").clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].tag, Some(tag(1)));
    assert_eq!(got[0].recipients, 3);
    assert_eq!(got[0].bytes, plan.message.len() as u64);
    let stats = sink.stats();
    assert_eq!(
        (stats.messages, stats.recipients, stats.bytes, stats.errors),
        (1, 3, 5_000, 0)
    );
}

#[tokio::test]
async fn fill_sends_many_messages_on_one_connection() {
    let (sink, got) = sink().await;
    let messages: Vec<FillMessage> = (0..5)
        .map(|i| FillMessage {
            mail_from: "fill@stoa.test".into(),
            rcpt: format!("user{i}@stoa.test"),
            message: message(&tag(100 + i), 1_024 + 100 * i as usize),
        })
        .collect();
    let (accepted, failure) = smtp_fill(sink.local_addr(), "fill.test", &messages, TIMEOUT).await;
    assert_eq!(accepted, 5);
    assert_eq!(failure, None);
    let got = got.lock().expect("lock").clone();
    let seqs: Vec<u64> = got.iter().filter_map(|m| m.tag.map(|t| t.seq)).collect();
    assert_eq!(seqs, [100, 101, 102, 103, 104]);
    assert_eq!(sink.stats().sessions, 1);
    assert_eq!(sink.stats().errors, 0);
}

#[tokio::test]
async fn fill_reports_the_failing_step() {
    let addr = serve_once(|mut s: Script| async move {
        s.send("220 hi\r\n").await;
        s.answer("250 hello").await;
        s.answer("250 ok").await;
        s.answer("550 5.1.1 no such user").await;
        s.answer("221 bye").await;
    })
    .await;
    let messages = [FillMessage {
        mail_from: "fill@stoa.test".into(),
        rcpt: "nobody@stoa.test".into(),
        message: message(&tag(1), 1_024),
    }];
    let (accepted, failure) = smtp_fill(addr, "fill.test", &messages, TIMEOUT).await;
    assert_eq!(accepted, 0);
    let (function, kind, detail) = failure.expect("a failure");
    assert_eq!((function, kind), (Function::SmtpRcptTo, Failure::Protocol));
    assert!(detail.contains("550"), "{detail}");
}

#[tokio::test]
async fn refused_banner_is_a_protocol_failure() {
    let addr = serve_once(|mut s: Script| async move {
        s.send("554 no service\r\n").await;
        s.answer("221 bye").await;
    })
    .await;
    let rec = smtp_session(&plan(addr, 2_000, Pace::full())).await;
    assert_eq!(
        rec.failure(),
        Some((Function::SmtpConnect, Failure::Protocol))
    );
    assert_eq!(rec.steps.len(), 1);
    assert!(!rec.completed);
}

#[tokio::test]
async fn close_after_helo_is_a_closed_connection() {
    let addr = serve_once(|mut s: Script| async move {
        s.send("220 hi\r\n").await;
        s.line().await;
    })
    .await;
    let rec = smtp_session(&plan(addr, 2_000, Pace::full())).await;
    assert_eq!(
        functions(&rec),
        [Function::SmtpConnect, Function::SmtpHello]
    );
    assert_eq!(rec.failure(), Some((Function::SmtpHello, Failure::Closed)));
    assert!(!rec.completed);
}

#[tokio::test]
async fn rejected_recipient_is_a_protocol_failure() {
    let addr = serve_once(|mut s: Script| async move {
        s.send("220 hi\r\n").await;
        s.answer("250 hello").await;
        s.answer("250 ok").await;
        s.answer("250 ok").await;
        s.answer("550 5.1.1 unknown").await;
        s.answer("221 bye").await;
    })
    .await;
    let rec = smtp_session(&plan(addr, 2_000, Pace::full())).await;
    assert_eq!(
        rec.failure(),
        Some((Function::SmtpRcptTo, Failure::Protocol))
    );
    assert_eq!(rec.steps.len(), 5);
    assert_eq!((rec.to_local, rec.to_remote), (1, 0));
}

#[tokio::test]
async fn silent_final_reply_is_a_timeout() {
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    let addr = serve_once(|mut s: Script| async move {
        s.send("220-hi\r\n220-more\r\n220 ready\r\n").await;
        s.answer("250-hello\r\n250-PIPELINING\r\n250 8BITMIME")
            .await;
        s.answer("250 ok").await;
        for _ in 0..3 {
            s.answer("250 ok").await;
        }
        s.answer("354 go").await;
        s.read_to_dot().await;
        // Never answer; wait for the client to give up and hang up.
        while s.line().await.is_some() {}
        let _ = done.send(());
    })
    .await;
    let mut plan = plan(addr, 3_000, Pace::full());
    plan.reply_timeout = Duration::from_millis(300);
    let rec = smtp_session(&plan).await;
    assert_eq!(
        functions(&rec),
        [
            Function::SmtpConnect,
            Function::SmtpHello,
            Function::SmtpMailFrom,
            Function::SmtpRcptTo,
            Function::SmtpRcptTo,
            Function::SmtpRcptTo,
            Function::SmtpData,
            Function::SmtpData,
        ]
    );
    assert!(rec.steps[6].outcome.is_ok());
    assert_eq!(rec.failure(), Some((Function::SmtpData, Failure::Timeout)));
    assert_eq!(rec.transfers.len(), 1);
    let t = rec.transfers[0];
    assert_eq!((t.kind, t.bytes, t.ok), (Sized::DataResponse, 3_000, false));
    assert!(t.ms >= 300.0, "{}", t.ms);
    assert!(!rec.completed);
    drop(rec);
    tokio::time::timeout(TIMEOUT, finished)
        .await
        .expect("the client hung up")
        .expect("server finished");
}

#[tokio::test]
async fn refused_connection_is_a_connect_failure() {
    let addr = refused_addr().await;
    let rec = smtp_session(&plan(addr, 2_000, Pace::full())).await;
    assert_eq!(
        rec.failure(),
        Some((Function::SmtpConnect, Failure::Connect))
    );
    assert_eq!(rec.steps.len(), 1);
}

#[tokio::test]
async fn modem_pacing_slows_the_body() {
    let (sink, _) = sink().await;
    let rec = smtp_session(&plan(sink.local_addr(), 12_000, Pace::modem())).await;
    assert!(rec.completed);
    let t = rec.transfers[0];
    assert!(t.ok);
    // 12,003 bytes at 6,000 B/s: the last 1,460-byte chunk may not start before
    // 11,680 / 6,000 = 1.95 s.
    assert!(t.ms >= 1_900.0, "{} ms", t.ms);

    let full = smtp_session(&plan(sink.local_addr(), 12_000, Pace::full())).await;
    assert!(full.completed);
    assert!(full.transfers[0].ok);
}

/// Reads from `stream` until `want` replies (lines not continued with `-`) came.
async fn replies(stream: &mut TcpStream, want: usize) -> Vec<String> {
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    loop {
        let done: Vec<String> = text
            .split_terminator("\r\n")
            .filter(|l| l.as_bytes().get(3) != Some(&b'-'))
            .map(str::to_owned)
            .collect();
        if done.len() >= want && text.ends_with("\r\n") {
            return done;
        }
        let n = tokio::time::timeout(TIMEOUT, stream.read(&mut buf))
            .await
            .expect("reply in time")
            .expect("read");
        assert!(n > 0, "sink closed early after {text:?}");
        text.push_str(std::str::from_utf8(&buf[..n]).expect("ascii"));
    }
}

#[tokio::test]
async fn sink_serves_pipelined_transactions() {
    let (sink, got) = sink().await;
    let mut c = TcpStream::connect(sink.local_addr())
        .await
        .expect("connect");
    assert!(replies(&mut c, 1).await[0].starts_with("220"));
    c.write_all(b"EHLO relay.test\r\nMAIL FROM:<a@stoa.test>\r\nRCPT TO:<x@remote.test>\r\nRCPT TO:<y@remote.test>\r\nDATA\r\n")
        .await
        .expect("write");
    let r = replies(&mut c, 5).await;
    let codes: Vec<&str> = r.iter().map(|l| &l[..3]).collect();
    assert_eq!(codes, ["250", "250", "250", "250", "354"]);
    let m = common::bytes(&message(&tag(9), 2_000));
    c.write_all(&m).await.expect("write");
    c.write_all(b"..stuffed line\r\n.\r\n")
        .await
        .expect("write");
    assert!(replies(&mut c, 1).await[0].starts_with("250"));
    c.write_all(b"RSET\r\nNOOP\r\nVRFY x\r\nRCPT TO:<z@remote.test>\r\nMAIL FROM:<>\r\nRCPT TO:<z@remote.test>\r\nDATA\r\n")
        .await
        .expect("write");
    let r = replies(&mut c, 7).await;
    let codes: Vec<&str> = r.iter().map(|l| &l[..3]).collect();
    assert_eq!(codes, ["250", "250", "502", "503", "250", "250", "354"]);
    c.write_all(b"Subject: untagged\r\n\r\nhi\r\n.\r\nQUIT\r\n")
        .await
        .expect("write");
    let r = replies(&mut c, 2).await;
    assert!(r[0].starts_with("250") && r[1].starts_with("221"), "{r:?}");

    let got = got.lock().expect("lock").clone();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].tag, Some(tag(9)));
    assert_eq!(got[0].recipients, 2);
    assert_eq!(got[0].bytes, 2_000 + b".stuffed line\r\n".len() as u64);
    assert_eq!((got[1].tag, got[1].recipients, got[1].bytes), (None, 1, 25));
    let stats = sink.stats();
    assert_eq!((stats.sessions, stats.messages, stats.errors), (1, 2, 2));
}

#[tokio::test]
async fn sink_rejects_long_lines_and_stops() {
    let (sink, _) = sink().await;
    let mut c = TcpStream::connect(sink.local_addr())
        .await
        .expect("connect");
    replies(&mut c, 1).await;
    let mut long = vec![b'N'; 5_000];
    long.extend_from_slice(b"\r\n");
    c.write_all(&long).await.expect("write");
    assert!(replies(&mut c, 1).await[0].starts_with("500"));

    let mut idle = TcpStream::connect(sink.local_addr())
        .await
        .expect("connect");
    replies(&mut idle, 1).await;
    sink.stop();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(TIMEOUT, idle.read(&mut buf))
        .await
        .expect("closed in time")
        .unwrap_or(0);
    assert_eq!(n, 0, "the connection ends when the sink stops");
    assert_eq!(sink.stats().errors, 1);
}

/// Issue 18, item 3: the kit's deliberate SMTP disconnects. The client sends
/// half the message after DATA's 354 and hangs up without the final dot: the
/// server sees an aborted transfer (and must not deliver it), the record is a
/// drop with an attempted, unpassed transfer and no failed step.
#[tokio::test]
async fn drop_mid_data_sends_half_and_hangs_up() {
    let (done, finished) = tokio::sync::oneshot::channel::<(usize, bool)>();
    let addr = serve_once(|mut s: Script| async move {
        s.send("220 hi\r\n").await;
        s.answer("250 hello").await;
        s.answer("250 ok").await;
        for _ in 0..3 {
            s.answer("250 ok").await;
        }
        s.answer("354 go").await;
        let (mut bytes, mut dot) = (0, false);
        while let Some(line) = s.line().await {
            bytes += line.len() + 2;
            dot |= line == "." || line == "QUIT";
        }
        let _ = done.send((bytes, dot));
    })
    .await;
    let mut plan = plan(addr, 20_000, Pace::full());
    plan.drop_mid_data = true;
    let rec = smtp_session(&plan).await;
    assert!(rec.dropped && !rec.completed);
    assert_eq!(rec.failure(), None);
    assert_eq!(
        rec.steps.last().map(|s| s.function),
        Some(Function::SmtpData)
    );
    assert_eq!(rec.transfers.len(), 1);
    let t = rec.transfers[0];
    assert_eq!(
        (t.kind, t.bytes, t.ok),
        (Sized::DataResponse, 20_000, false)
    );
    assert_eq!((rec.to_local, rec.to_remote), (2, 1));
    drop(rec);
    let (bytes, dot) = tokio::time::timeout(TIMEOUT, finished)
        .await
        .expect("the client hung up")
        .expect("server finished");
    assert!(!dot, "no final dot, no QUIT");
    // Half the 20,000 bytes, give or take the last line's CRLF.
    assert!((9_900..=10_100).contains(&bytes), "{bytes}");
}
