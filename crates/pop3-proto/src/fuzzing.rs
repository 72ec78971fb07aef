//! Fuzz targets, shared by the `cargo fuzz` harness in `fuzz/` and by the corpus
//! replay in `tests/fuzz_corpus.rs`.
//!
//! Each function takes arbitrary bytes and panics (through `assert!`) only when an
//! invariant of the codec is broken; refusing malformed input is not a failure. This
//! module is not part of the crate's API.

use std::sync::Arc;

use crate::command::{Line, next_line, parse_command};
use crate::encode::MessageEncoder;
use crate::listing::{Entry, Listing};
use crate::response::Response;
use crate::session::{Action, Config, Event, Limits, LoginDecision, Session, UpdateOutcome};

/// The mailbox of the session target: stuffing, a TOP split, a missing final CRLF.
const MAILBOX: [&[u8]; 3] = [
    b"Subject: a\r\n\r\n.\r\n..x\r\nend\r\n",
    b"H: 1\r\nH: 2\r\n\r\nb1\r\nb2\r\nb3\r\n",
    b"no header end\r\n.last",
];

/// Small limits, so that short inputs reach every limit check; STLS and clear-text
/// logins on, so that every command can be reached.
fn config() -> Config {
    Config {
        stls: true,
        require_tls: false,
        login_delay: Some(60),
        limits: Limits {
            max_line: 40,
            max_sasl_line: 60,
            max_errors: 12,
            max_auth_failures: 3,
        },
        ..Config::default()
    }
}

/// A whole conversation: `data` is what the client sends. It is fed whole, one byte
/// at a time and in 7-byte reads; all three must produce the same transcript, every
/// step must make progress, and every response must be well-formed. STLS ends the
/// conversation (what follows would be TLS), so the discarded plaintext cannot make
/// the transcripts differ.
pub fn session(data: &[u8]) {
    let whole = converse(data, data.len().max(1));
    assert_eq!(converse(data, 1), whole, "one byte at a time");
    assert_eq!(converse(data, 7), whole, "7-byte reads");
}

/// Runs a server over `data` read `chunk` bytes at a time; returns its transcript.
fn converse(data: &[u8], chunk: usize) -> Vec<u8> {
    let mut session = Session::new(Arc::new(config()));
    let mut transcript = Vec::new();
    write_response(&mut transcript, &session.greeting());
    let mut buffer: Vec<u8> = Vec::new();
    for read in data.chunks(chunk) {
        buffer.extend_from_slice(read);
        loop {
            let step = session.advance(&buffer);
            assert!(step.consumed <= buffer.len());
            let need_more = step.event == Event::NeedMore;
            let closed = record(&mut session, step.event, &mut transcript);
            assert!(step.consumed > 0 || need_more || closed, "no progress");
            buffer.drain(..step.consumed);
            if closed {
                // Closed, or upgraded by STLS (the one way `is_tls` turns on here).
                assert!(session.is_closed() || session.is_tls());
                return transcript;
            }
            if need_more {
                break;
            }
        }
    }
    transcript
}

/// Appends what the server does with `event`; returns whether the conversation is
/// over.
fn record(session: &mut Session, event: Event, out: &mut Vec<u8>) -> bool {
    let action = match event {
        Event::NeedMore => return false,
        Event::Action(action) => action,
        Event::Auth(credentials) => {
            assert!(!credentials.username.is_empty() && !credentials.password.is_empty());
            out.extend_from_slice(format!("[auth {}]", credentials.username.len()).as_bytes());
            let decision = match credentials.password.as_str() {
                "secret" => LoginDecision::Accept(listing()),
                "busy" => LoginDecision::InUse,
                _ => LoginDecision::BadCredentials,
            };
            session.decide_login(decision)
        }
        Event::Retrieve(retrieval) => {
            let message = MAILBOX[retrieval.index];
            assert_eq!(retrieval.size, message.len() as u64);
            let start = out.len();
            write_response(out, &retrieval.response());
            let body = out.len();
            // Streamed in 5-byte pieces, as one piece must give the same bytes.
            let mut encoder = retrieval.encoder();
            for piece in message.chunks(5) {
                if !encoder.encode(piece, out) {
                    break;
                }
            }
            encoder.finish(out);
            let mut whole = Vec::new();
            retrieval.write_to(message, &mut whole);
            assert_eq!(&out[start..], &whole[..]);
            check_encoded(&out[body..]);
            return false;
        }
        Event::Quit { deleted } => {
            assert!(deleted.windows(2).all(|w| w[0] < w[1]));
            assert!(deleted.iter().all(|&i| i < MAILBOX.len()));
            out.extend_from_slice(format!("[quit {deleted:?}]").as_bytes());
            let outcome = if deleted.contains(&2) {
                UpdateOutcome::Failed
            } else {
                UpdateOutcome::Committed
            };
            let action = session.decide_update(outcome);
            assert!(matches!(action, Action::Close(_)));
            action
        }
    };
    perform(action, out)
}

fn listing() -> Listing {
    let entries = MAILBOX
        .iter()
        .enumerate()
        .map(|(i, m)| Entry {
            size: m.len() as u64,
            uid: format!("u{i}"),
        })
        .collect();
    Listing::new(entries).expect("invariant: the fuzz listing's uids are valid")
}

/// Writes the action's response; returns whether the conversation is over.
fn perform(action: Action, out: &mut Vec<u8>) -> bool {
    match action {
        Action::Reply(response) => {
            write_response(out, &response);
            false
        }
        Action::Close(response) => {
            write_response(out, &response);
            true
        }
        Action::StartTls { response, .. } => {
            write_response(out, &response);
            out.extend_from_slice(b"[tls]");
            true
        }
        Action::LoginFailed { response, close } => {
            assert_eq!(response, Response::auth_failed());
            out.extend_from_slice(b"[delay]");
            write_response(out, &response);
            close
        }
        Action::Forward { response, .. } => {
            write_response(out, &response);
            false
        }
    }
}

/// Writes `response`, checking its wire form: a status line of printable ASCII
/// within 512 octets, then for a multi-line response lines that never are a lone `.`
/// and a final `.` line.
fn write_response(out: &mut Vec<u8>, response: &Response) {
    let wire = response.to_bytes();
    let lines: Vec<&[u8]> = wire.split_inclusive(|&b| b == b'\n').collect();
    let first = lines[0];
    assert!(first.len() <= crate::response::MAX_RESPONSE_LINE);
    assert!(first.starts_with(b"+OK") || first.starts_with(b"-ERR") || first.starts_with(b"+ "));
    for line in &lines {
        assert!(line.ends_with(b"\r\n"), "{line:?}");
        let text = &line[..line.len() - 2];
        assert!(text.iter().all(|b| (b' '..=b'~').contains(b)), "{line:?}");
    }
    if response.lines().is_some() {
        assert_eq!(lines.last(), Some(&&b".\r\n"[..]));
        assert!(lines[1..lines.len() - 1].iter().all(|l| *l != b".\r\n"));
    } else {
        assert_eq!(lines.len(), 1);
    }
    out.extend_from_slice(&wire);
}

/// An encoded message body: CRLF lines only, no `.` line but the last.
fn check_encoded(body: &[u8]) {
    assert!(body.ends_with(b".\r\n"));
    let lines: Vec<&[u8]> = body.split_inclusive(|&b| b == b'\n').collect();
    for (i, line) in lines.iter().enumerate() {
        assert!(line.ends_with(b"\r\n"), "{line:?}");
        let text = &line[..line.len() - 2];
        assert!(!text.contains(&b'\r') && !text.contains(&b'\n'));
        assert_eq!(text == b".", i + 1 == lines.len(), "{body:?}");
    }
}

/// The message encoder on arbitrary bytes. The first byte chooses RETR or TOP (and
/// its line count); the rest is the stored message. Encoded whole, byte by byte, in
/// 7-byte pieces and in pieces cut where the message says (`|` bytes), the output
/// must be the same; it must be well-formed, unstuff to the message with every line
/// end made CRLF, and TOP's must be a prefix of RETR's.
pub fn encoder(data: &[u8]) {
    let Some((&mode, message)) = data.split_first() else {
        return;
    };
    let top = (mode & 0x80 != 0).then_some(u32::from(mode & 0x0f));
    let whole = encode(message, top, &[message.len()]);
    let bytes: Vec<usize> = (1..=message.len()).collect();
    assert_eq!(encode(message, top, &bytes), whole, "byte by byte");
    let sevens: Vec<usize> = (7..message.len())
        .step_by(7)
        .chain([message.len()])
        .collect();
    assert_eq!(encode(message, top, &sevens), whole, "7-byte pieces");
    let bars: Vec<usize> = (0..message.len())
        .filter(|&i| message[i] == b'|')
        .chain([message.len()])
        .collect();
    assert_eq!(encode(message, top, &bars), whole, "cut at |");
    check_encoded(&whole);
    let retr = unstuff(&encode(message, None, &[message.len()]));
    assert_eq!(retr, normalise(message));
    if top.is_some() {
        assert!(retr.starts_with(&unstuff(&whole)));
    }
}

/// Encodes `message` in pieces ending at `ends` (ascending, the last is the length).
fn encode(message: &[u8], top: Option<u32>, ends: &[usize]) -> Vec<u8> {
    let mut encoder = match top {
        None => MessageEncoder::retr(),
        Some(lines) => MessageEncoder::top(lines),
    };
    let mut out = Vec::new();
    let mut start = 0;
    for &end in ends {
        let more = encoder.encode(&message[start..end], &mut out);
        assert_eq!(more, !encoder.is_done());
        if !more {
            break;
        }
        start = end;
    }
    encoder.finish(&mut out);
    out
}

/// The client's view: lines without their stuffing, the terminator removed.
fn unstuff(wire: &[u8]) -> Vec<u8> {
    let body = &wire[..wire.len() - 3];
    let mut out = Vec::with_capacity(body.len());
    for line in body.split_inclusive(|&b| b == b'\n') {
        out.extend_from_slice(line.strip_prefix(b".").unwrap_or(line));
    }
    out
}

/// Every CR LF, bare CR and bare LF made CRLF, and a final CRLF added if missing.
fn normalise(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 2);
    let mut bytes = message.iter().peekable();
    while let Some(&b) = bytes.next() {
        match b {
            b'\r' => {
                bytes.next_if_eq(&&b'\n');
                out.extend_from_slice(b"\r\n");
            }
            b'\n' => out.extend_from_slice(b"\r\n"),
            _ => out.push(b),
        }
    }
    if !out.is_empty() && !out.ends_with(b"\r\n") {
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Command lines: framing and parsing never panic; a parsed command parses the same
/// with its keyword in another case; a rejected line is rejected the same way.
pub fn command(data: &[u8]) {
    let mut rest = data;
    while !rest.is_empty() {
        let line = match next_line(rest, 255) {
            Line::Complete { line, consumed } => {
                rest = &rest[consumed..];
                line
            }
            _ => std::mem::take(&mut rest),
        };
        let parsed = parse_command(line);
        let keyword_end = line.iter().position(|&b| b == b' ').unwrap_or(line.len());
        let mut flipped = line.to_vec();
        for b in &mut flipped[..keyword_end] {
            if b.is_ascii_alphabetic() {
                *b ^= 0x20;
            }
        }
        assert_eq!(parse_command(&flipped), parsed, "{line:?}");
    }
}
