//! Fuzz targets, shared by the `cargo fuzz` harness in `fuzz/` and by the corpus
//! replay in `tests/fuzz_corpus.rs`.
//!
//! Each function takes arbitrary bytes and panics (through `assert!`) only when an
//! invariant of the codec is broken; refusing malformed input is not a failure. This
//! module is not part of the crate's API.

use std::sync::Arc;

use stoa_mail_proto::Status;

use crate::address::{Address, ForwardPath, parse_forward_path, parse_reverse_path};
use crate::command::{next_line, parse_command};
use crate::data::DataDecoder;
use crate::reply::{ParsedReply, ReplyLimits, parse_reply};
use crate::session::{Action, AuthPolicy, Config, Decision, Event, Limits, Session};
use crate::{Domain, Reply};

/// Small limits, so that short inputs reach every limit check.
fn config() -> Config {
    Config {
        auth: AuthPolicy::Always,
        // Off: with it, the outcome legitimately depends on how input is cut (that
        // is the point of the check), and the oracle below compares cuts.
        reject_unauth_pipelining: false,
        limits: Limits {
            max_line: 64,
            max_text_line: 40,
            max_message_size: 200,
            max_recipients: 3,
            soft_error_limit: 3,
            hard_error_limit: 8,
            max_junk_commands: 5,
        },
        ..Config::default()
    }
}

/// A whole conversation: `data` is what the client sends. It is fed whole, one byte at
/// a time and in 7-byte reads; all three must produce the same replies, events and
/// messages, every step must make progress, and every reply must be well-formed.
pub fn session(data: &[u8]) {
    split_invariant(data, &config());
}

/// [`session`] in LMTP: the same input to a store host, whose message ends get one
/// decision per recipient.
pub fn lmtp_session(data: &[u8]) {
    let config = Config {
        dialect: crate::Dialect::Lmtp,
        ..config()
    };
    split_invariant(data, &config);
}

fn split_invariant(data: &[u8], config: &Config) {
    let whole = converse(data, data.len().max(1), config);
    assert_eq!(converse(data, 1, config), whole, "one byte at a time");
    assert_eq!(converse(data, 7, config), whole, "7-byte reads");
}

/// Runs a server over `data` read `chunk` bytes at a time; returns its transcript.
fn converse(data: &[u8], chunk: usize, config: &Config) -> Vec<u8> {
    let mut session = Session::new(Arc::new(config.clone()));
    let mut transcript = Vec::new();
    write_reply(&mut transcript, &session.greeting());
    let mut buffer: Vec<u8> = Vec::new();
    // The message being received: only kept if it is accepted, as a server does.
    let mut message = Vec::new();
    for read in data.chunks(chunk) {
        buffer.extend_from_slice(read);
        loop {
            let step = session.advance(&buffer);
            assert!(step.consumed <= buffer.len());
            let (stop, closed) = record(&mut session, step.event, &mut transcript, &mut message);
            assert!(step.consumed > 0 || stop || closed, "no progress");
            buffer.drain(..step.consumed);
            if closed {
                return transcript;
            }
            if stop {
                break;
            }
        }
    }
    transcript
}

/// Appends what the server does with `event`; returns (needs more input, closed).
fn record(
    session: &mut Session,
    event: Event<'_>,
    out: &mut Vec<u8>,
    message: &mut Vec<u8>,
) -> (bool, bool) {
    let decision = match event {
        Event::NeedMore => return (true, false),
        Event::Action(action) => return (false, perform(action, out)),
        Event::MessageData(data) => {
            assert!(!data.is_empty());
            message.extend_from_slice(data);
            return (false, false);
        }
        Event::MessageAborted { action, .. } => {
            // What was handed out before the refusal depends on the reads; it is
            // thrown away.
            message.clear();
            out.extend_from_slice(b"[aborted]");
            return (false, perform(action, out));
        }
        Event::Mail { from, .. } => {
            out.extend_from_slice(format!("[mail {from}]").as_bytes());
            Decision::Accept
        }
        Event::Rcpt { to } => {
            out.extend_from_slice(format!("[rcpt {to}]").as_bytes());
            check_forward_path(&to);
            match &to {
                ForwardPath::Mailbox(a) if a.local().starts_with('x') => {
                    Decision::Reject(Reply::user_unknown(&to))
                }
                _ => Decision::Accept,
            }
        }
        Event::Data => Decision::Accept,
        Event::MessageEnd { size } => {
            assert_eq!(size, message.len() as u64);
            out.extend_from_slice(b"[message]");
            out.append(message);
            out.extend_from_slice(format!("[end {size}]").as_bytes());
            Decision::AcceptWith(Reply::queued(&size))
        }
        Event::Auth(credentials) => {
            out.extend_from_slice(format!("[auth {}]", credentials.username).as_bytes());
            if credentials.password == "secret" {
                Decision::Accept
            } else {
                Decision::Reject(Reply::auth_failed())
            }
        }
    };
    // One decision, or in LMTP one per recipient at the end of a message.
    let mut closed = false;
    while session.pending_decisions() > 0 && !closed {
        closed = perform(session.decide(decision.clone()), out);
    }
    (false, closed)
}

/// Writes the action's reply; returns whether the connection closes.
fn perform(action: Action, out: &mut Vec<u8>) -> bool {
    match action {
        Action::Reply(reply) => {
            write_reply(out, &reply);
            false
        }
        Action::Close(reply) => {
            write_reply(out, &reply);
            true
        }
        Action::StartTls { .. } => panic!("STARTTLS is not offered"),
    }
}

/// Writes `reply`, checking its wire form: `DDD-` lines then one `DDD ` line, each
/// printable ASCII ending in CRLF.
fn write_reply(out: &mut Vec<u8>, reply: &Reply) {
    let wire = reply.to_bytes();
    let lines: Vec<&[u8]> = wire.split_inclusive(|&b| b == b'\n').collect();
    for (i, line) in lines.iter().enumerate() {
        assert!(line.len() >= 6 && line.ends_with(b"\r\n"), "{line:?}");
        assert!(line[..3].iter().all(u8::is_ascii_digit));
        assert_eq!(line[3], if i + 1 == lines.len() { b' ' } else { b'-' });
        assert!(
            line[..line.len() - 2]
                .iter()
                .all(|b| (b' '..=b'~').contains(b))
        );
    }
    out.extend_from_slice(&wire);
}

/// A recipient's domain is normalised and its text form parses back to it.
fn check_forward_path(path: &ForwardPath) {
    if let ForwardPath::Mailbox(address) = path {
        check_address(address);
    }
}

fn check_address(address: &Address) {
    if let Domain::Name(name) = address.domain() {
        assert!(!name.ends_with('.') && !name.bytes().any(|b| b.is_ascii_uppercase()));
    }
    assert_eq!(Address::parse(&address.to_string()).as_ref(), Ok(address));
}

/// The DATA decoder fed whole, byte by byte and in 7-byte pieces: same end, same
/// outcome, and the same message when it is accepted.
pub fn data(data: &[u8]) {
    let whole = decode(data, data.len().max(1));
    for chunk in [1, 7] {
        let split = decode(data, chunk);
        assert_eq!((&split.1, split.2), (&whole.1, whole.2), "chunk {chunk}");
        if matches!(whole.1, Some(Ok(_))) {
            assert_eq!(split.0, whole.0, "chunk {chunk}");
        }
    }
    if let Some(Ok(size)) = whole.1 {
        // An accepted message is CRLF-clean and ends where `CRLF.CRLF` was.
        assert_eq!(size, whole.0.len() as u64);
        assert!(data[..whole.2].ends_with(b".\r\n"));
        assert!(whole.2 == 3 || data[..whole.2].ends_with(b"\r\n.\r\n"));
        assert!(!whole.0.windows(2).any(|w| w[1] == b'\n' && w[0] != b'\r'));
    }
}

type Decoded = (Vec<u8>, Option<Result<u64, crate::Error>>, usize);

fn decode(input: &[u8], chunk: usize) -> Decoded {
    let mut decoder = DataDecoder::new(100_000, 60);
    let (mut out, mut used, mut available) = (Vec::new(), 0, 0);
    while !decoder.is_done() {
        if available == used {
            if available == input.len() {
                break;
            }
            available = (available + chunk).min(input.len());
        }
        let step = decoder.decode(&input[used..available]);
        assert!(
            step.consumed > 0 || available == used || step.done,
            "no progress"
        );
        out.extend_from_slice(step.data);
        used += step.consumed;
    }
    let outcome = decoder.is_done().then(|| decoder.outcome());
    (out, outcome, used)
}

/// Command lines and paths: no panic, and every parsed address is normalised and
/// survives a round trip through its text form.
pub fn command(data: &[u8]) {
    let mut rest = data;
    while !rest.is_empty() {
        let line = match next_line(rest, 512) {
            crate::command::Line::Complete { line, consumed } => {
                rest = &rest[consumed..];
                line
            }
            _ => std::mem::take(&mut rest),
        };
        let _ = parse_command(line);
        // The paths on their own, from the first `<` on.
        let path = line
            .iter()
            .position(|&b| b == b'<')
            .map_or(line, |i| &line[i..]);
        if let Ok((crate::ReversePath::Mailbox(address), _)) = parse_reverse_path(path) {
            check_address(&address);
        }
        if let Ok((path, _)) = parse_forward_path(path) {
            check_forward_path(&path);
        }
    }
}

/// Small reply limits, so that short inputs reach both of them.
const TIGHT_REPLY: ReplyLimits = ReplyLimits {
    max_line: 24,
    max_lines: 3,
};

/// Server replies as a client reads them: `data` is what a server sends, read as a
/// series of replies with the default limits and with tight ones. Every reply found
/// fits the input and the limits, ends in CRLF, parses the same alone, is
/// [`Status::Partial`] for each of its proper prefixes, has one code and a status of
/// the code's class; and one of printable text is what the server's own encoder
/// writes for the same code and lines.
pub fn reply(data: &[u8]) {
    for limits in [ReplyLimits::default(), TIGHT_REPLY] {
        let mut rest = data;
        while let Ok(Status::Complete(parsed)) = parse_reply(rest, &limits) {
            check_reply(rest, &parsed, &limits);
            rest = &rest[parsed.consumed()..];
        }
    }
}

/// The invariants of one reply parsed at the start of `input`.
fn check_reply(input: &[u8], parsed: &ParsedReply<'_>, limits: &ReplyLimits) {
    let len = parsed.consumed();
    assert!(
        len > 0 && len <= input.len(),
        "reply length {len} out of bounds"
    );
    assert_eq!(parsed.as_bytes(), &input[..len]);
    assert!(input[..len].ends_with(b"\r\n"), "reply not ended by CRLF");
    let lines = parsed.line_count();
    assert!(lines >= 1 && lines <= limits.max_lines, "{lines} lines");
    assert!(
        len <= lines * limits.max_line,
        "{len} bytes in {lines} lines"
    );
    assert_eq!(parsed.lines().count(), lines, "lines() disagrees");
    let code = parsed.code();
    assert!((200..=559).contains(&code), "code {code}");
    if let Some(status) = parsed.status() {
        assert_eq!(
            u16::from(status.class),
            code / 100,
            "status {status} of {code}"
        );
    }
    match parse_reply(&input[..len], limits) {
        Ok(Status::Complete(alone)) => assert_eq!(alone, *parsed, "reply alone differs"),
        other => panic!("reply alone is not complete: {other:?}"),
    }
    for cut in [0, 1, len / 2, len - 1] {
        let prefix = parse_reply(&input[..cut.min(len - 1)], limits);
        assert!(
            matches!(prefix, Ok(Status::Partial)),
            "prefix of {cut} bytes of a {len}-byte reply gave {prefix:?}"
        );
    }
    check_reencoding(parsed);
}

/// A reply whose text is printable ASCII, ended by `code SP`, is byte for byte what
/// [`Reply::write_to`] makes of its code and lines (the encoder writes every line's
/// status itself, so the lines are given without one).
fn check_reencoding(parsed: &ParsedReply<'_>) {
    let printable = |l: &[u8]| l.iter().all(|b| (b' '..=b'~').contains(b));
    let wire = parsed.as_bytes();
    let body = &wire[..wire.len() - 2];
    let last_line = &body[body
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |lf| lf + 1)..];
    // `250` alone ends a reply too; the encoder always writes `250 `.
    if !parsed.lines().all(printable) || last_line.len() == 3 {
        return;
    }
    let text = |l: &[u8]| String::from_utf8_lossy(l).into_owned();
    let mut lines = parsed.lines();
    let first = lines.next().map(text).unwrap_or_default();
    let mut again = Reply::plain(parsed.code(), first);
    for line in lines {
        again = again.with_line(text(line));
    }
    assert_eq!(again.to_bytes(), wire, "re-encoding differs");
}
