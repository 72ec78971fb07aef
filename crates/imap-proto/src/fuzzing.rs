//! Fuzz targets, shared by the `cargo fuzz` harness in `fuzz/` and by the unit tests
//! that replay the seed corpus (`fuzz/corpus/imap_command/`).
//!
//! Each function takes arbitrary bytes and panics (through `assert!`) only when an
//! invariant of the codec is broken; refusing malformed input is not a failure. This
//! module is not part of the crate's API.

use crate::command::{CommandKind, CommandReader, Event, Limits, Line, auth_response, idle_done};
use crate::mailbox::decode_name;
use crate::response::{self, Condition};
use crate::state::{State, check};

/// One server response line, as the client side reads it: parsed or refused, and
/// what a parse returns lies within the line.
pub fn reply_line(line: &[u8]) {
    use crate::reply::{Reply, capability_data, literal_at_end, parse_line};
    let within = |part: &[u8]| {
        let (start, end) = (line.as_ptr() as usize, line.as_ptr() as usize + line.len());
        let p = part.as_ptr() as usize;
        assert!(part.is_empty() || (p >= start && p + part.len() <= end));
    };
    match parse_line(line) {
        Ok(Reply::Status {
            tag, code, text, ..
        }) => {
            within(text);
            if let Some(tag) = tag {
                within(tag.as_bytes());
            }
            if let Some(code) = code {
                within(code.arguments);
                for cap in code.capabilities().unwrap_or_default() {
                    within(cap.as_bytes());
                }
            }
        }
        Ok(Reply::Continuation(text)) => within(text),
        Ok(Reply::Data(data)) => {
            within(data);
            for cap in capability_data(data).unwrap_or_default() {
                within(cap.as_bytes());
            }
        }
        Err(_) => {}
    }
    let _ = literal_at_end(line);
}

/// Small limits, so that short inputs reach every limit check.
fn limits(literal_minus: bool) -> Limits {
    Limits {
        max_line: 200,
        max_literal: 512,
        max_command: 2048,
        literal_minus,
    }
}

/// A whole session: `data` is everything the client sends. It is fed whole, one
/// byte at a time, in 7-byte reads and in reads cut after every byte whose low three
/// bits are `101` (so the fuzzer chooses the cuts); every run must give the same
/// commands and refusals, every consumed count must be within the buffer, every step
/// that is not a wait must make progress, and each continuation request is asked
/// once.
pub fn session(data: &[u8]) {
    let whole = converse(data, &[data.len()]);
    let bytes: Vec<usize> = (1..=data.len()).collect();
    assert_eq!(converse(data, &bytes), whole, "one byte at a time");
    let sevens: Vec<usize> = (7..data.len()).step_by(7).chain([data.len()]).collect();
    assert_eq!(converse(data, &sevens), whole, "7-byte reads");
    let chosen: Vec<usize> = (0..data.len())
        .filter(|&i| data[i] & 7 == 5)
        .map(|i| i + 1)
        .chain([data.len()])
        .collect();
    assert_eq!(converse(data, &chosen), whole, "cuts chosen by the input");
}

/// What the simulated server expects next.
enum Expect {
    Command,
    AuthResponse,
    Done,
}

/// Runs a reader over `data` delivered in reads ending at `ends` (ascending, the last
/// is the length); returns the transcript of what it parsed and refused.
fn converse(data: &[u8], ends: &[usize]) -> Vec<String> {
    let mut reader = CommandReader::new(limits(data.len() % 2 == 1));
    let mut transcript = Vec::new();
    let mut buffer: Vec<u8> = Vec::new();
    let mut expect = Expect::Command;
    // The stream offset at the buffer's start, and where the last continuation was.
    let mut base = 0usize;
    let mut last_continue = None;
    let mut start = 0;
    for &end in ends {
        buffer.extend_from_slice(&data[start..end.max(start)]);
        start = end.max(start);
        loop {
            let (consumed, more) = match expect {
                Expect::Command => {
                    let step = reader.next(&buffer);
                    assert!(step.consumed <= buffer.len());
                    let more = matches!(step.event, Event::NeedMore | Event::Continue);
                    if let Event::Continue = step.event {
                        let at = base + buffer.len();
                        assert_ne!(last_continue, Some(at), "continuation asked twice");
                        last_continue = Some(at);
                    }
                    assert!(step.consumed > 0 || more, "no progress");
                    match record(step.event, &mut transcript) {
                        Some(next) => expect = next,
                        None => return transcript,
                    }
                    (step.consumed, more)
                }
                Expect::AuthResponse | Expect::Done => {
                    let line = if matches!(expect, Expect::Done) {
                        match idle_done(&buffer, 200) {
                            Line::Partial => Line::Partial,
                            Line::Complete { result, consumed } => Line::Complete {
                                result: result.map(|()| Vec::new()),
                                consumed,
                            },
                        }
                    } else {
                        auth_response(&buffer, 200)
                    };
                    match line {
                        Line::Partial => (0, true),
                        Line::Complete { result, consumed } => {
                            assert!(consumed > 0 && consumed <= buffer.len());
                            let fatal = result == Err(crate::Error::LineTooLong);
                            transcript.push(format!("line {result:?}"));
                            if fatal {
                                // The line's end is unknown: the server closes.
                                return transcript;
                            }
                            expect = Expect::Command;
                            (consumed, false)
                        }
                    }
                }
            };
            buffer.drain(..consumed);
            base += consumed;
            if more {
                break;
            }
        }
    }
    transcript
}

/// Records an event and checks what a server would do with it; returns what comes
/// next, or `None` when the connection closes.
fn record(event: Event, transcript: &mut Vec<String>) -> Option<Expect> {
    match event {
        Event::NeedMore | Event::Continue => Some(Expect::Command),
        Event::Rejected(rejection) => {
            let mut out = Vec::new();
            rejection.write_response(&mut out);
            let lines: Vec<&[u8]> = out.split_inclusive(|&b| b == b'\n').collect();
            assert!(lines.len() == 1 || (rejection.is_fatal() && lines.len() <= 2));
            lines.iter().for_each(|line| check_one_line(line));
            assert_eq!(
                rejection.is_fatal(),
                lines.last().is_some_and(|l| l.starts_with(b"* BYE "))
            );
            transcript.push(format!("rejected {rejection:?}"));
            (!rejection.is_fatal()).then_some(Expect::Command)
        }
        Event::Command(command) => {
            let mut out = Vec::new();
            response::write_tagged(
                &mut out,
                &command.tag,
                Condition::Ok,
                None,
                command.kind.name(),
            );
            check_one_line(&out);
            for state in [
                State::NotAuthenticated,
                State::Authenticated,
                State::Selected { read_only: false },
                State::Logout,
            ] {
                let _ = check(&command.kind, state);
            }
            exercise(&command.kind);
            // Debug hides credentials; the transcript must not.
            let secret = match &command.kind {
                CommandKind::Login { password, .. } => password.expose().as_bytes().to_vec(),
                CommandKind::Authenticate {
                    initial_response: Some(response),
                    ..
                } => response.expose().clone(),
                _ => Vec::new(),
            };
            transcript.push(format!("{command:?} {secret:?}"));
            Some(match command.kind {
                CommandKind::Idle => Expect::Done,
                CommandKind::Authenticate {
                    initial_response: None,
                    ..
                } => Expect::AuthResponse,
                _ => Expect::Command,
            })
        }
    }
}

/// Runs the helpers a server would call on the command's values.
fn exercise(kind: &CommandKind) {
    let names: Vec<&[u8]> = match kind {
        CommandKind::Select(s) | CommandKind::Examine(s) => vec![&s.mailbox],
        CommandKind::Create { mailbox, .. }
        | CommandKind::Delete(mailbox)
        | CommandKind::Subscribe(mailbox)
        | CommandKind::Unsubscribe(mailbox)
        | CommandKind::Status { mailbox, .. }
        | CommandKind::Copy { mailbox, .. }
        | CommandKind::Move { mailbox, .. } => vec![mailbox],
        CommandKind::Rename { from, to } => vec![from, to],
        CommandKind::Append(a) => vec![&a.mailbox],
        _ => Vec::new(),
    };
    for name in names {
        for utf8 in [false, true] {
            if let Ok(decoded) = decode_name(name, utf8) {
                let encoded = crate::mailbox::encode_name(&decoded, utf8);
                assert_eq!(
                    decode_name(&encoded, utf8).as_deref(),
                    Ok(decoded.as_str()),
                    "{name:?}"
                );
            }
        }
    }
    let set = match kind {
        CommandKind::Fetch(f) => Some(&f.set),
        CommandKind::Store(s) => Some(&s.set),
        CommandKind::Copy { set, .. } | CommandKind::Move { set, .. } => Some(set),
        CommandKind::UidExpunge(set) => Some(set),
        _ => None,
    };
    if let Some(set) = set {
        for largest in [0, 1, 5, u32::MAX] {
            let _ = set.contains(3, largest);
            let _ = set.fits(largest);
        }
        let merged = set.merged(u32::MAX);
        assert!(
            merged
                .windows(2)
                .all(|w| w[0].end().saturating_add(1) < *w[1].start())
        );
        assert!(
            merged
                .iter()
                .all(|r| r.start() <= r.end() && *r.start() >= 1)
        );
        let sorted = set.to_sorted(20);
        assert!(sorted.windows(2).all(|w| w[0] < w[1]));
        assert!(
            sorted
                .iter()
                .all(|&n| (1..=20).contains(&n) && set.contains(n, 20))
        );
        let mut out = Vec::new();
        crate::sequence::write_sequence(&mut out, &sorted);
    }
}

/// A response is one line: CRLF at its end and nowhere else.
fn check_one_line(out: &[u8]) {
    assert!(out.ends_with(b"\r\n"), "{out:?}");
    let body = &out[..out.len() - 2];
    assert!(!body.contains(&b'\r') && !body.contains(&b'\n'), "{out:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_corpus() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fuzz/corpus/imap_command"
        );
        let mut count = 0;
        for entry in std::fs::read_dir(dir).expect("the seed corpus is committed") {
            let path = entry.expect("readable directory").path();
            let data = std::fs::read(&path).expect("readable seed");
            session(&data);
            count += 1;
        }
        assert!(count >= 5, "{count} seeds");
    }

    #[test]
    fn limits_reached() {
        for tag in [129, 130, 199, 250] {
            session(&[&vec![b'z'; tag][..], b" NOOP\r\nb NOOP\r\n"].concat());
        }
        session(&[&b"a APPEND x {512}\r\n"[..], &[b'x'; 512], b"\r\n"].concat());
        session(&[&b"a LOGIN {300+}\r\n"[..], &[b'\n'; 300], b" {300+}\r\n"].concat());
        session(&[&vec![b'x'; 300][..], b" {5+}\r\n12345 {3}\r\nb NOOP\r\n"].concat());
    }

    /// Mutations of the seed corpus: byte flips, inserted IMAP fragments, cuts and
    /// splices. Fast by default; `IMAP_FUZZ_ROUNDS=100000 cargo test --release ...
    /// -- --ignored` runs it longer.
    #[test]
    fn mutated_corpus() {
        mutate(200);
    }

    #[test]
    #[ignore = "long; run with --ignored and IMAP_FUZZ_ROUNDS"]
    fn mutated_corpus_long() {
        let rounds = std::env::var("IMAP_FUZZ_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(20_000);
        mutate(rounds);
    }

    fn mutate(rounds: usize) {
        const PIECES: &[&[u8]] = &[
            b"{0}\r\n",
            b"{5}\r\n",
            b"{3+}\r\n",
            b"~{2}\r\n",
            b"{600}\r\n",
            b"{9999+}\r\n",
            b"\r\n",
            b"\n",
            b"\r",
            b" ",
            b"(",
            b")",
            b"\"",
            b"\\",
            b"*",
            b"$",
            b":",
            b",",
            b"BODY[",
            b"]",
            b"<0.5>",
            b"UID ",
            b"NOT ",
            b"OR ",
            b"&",
            b"&-",
            b"&APw-",
            b"\0",
            b"a1 ",
            b"DONE\r\n",
            b"IDLE\r\n",
            b"AUTHENTICATE PLAIN\r\n",
        ];
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fuzz/corpus/imap_command"
        );
        let seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
            .expect("the seed corpus is committed")
            .map(|e| std::fs::read(e.expect("entry").path()).expect("seed"))
            .collect();
        let mut rng = fastrand::Rng::with_seed(0x5eed);
        for _ in 0..rounds {
            let mut data = seeds[rng.usize(..seeds.len())].clone();
            for _ in 0..rng.usize(1..6) {
                let at = rng.usize(..=data.len());
                match rng.u8(..5) {
                    0 if !data.is_empty() => {
                        let i = rng.usize(..data.len());
                        data[i] ^= 1 << rng.u8(..8);
                    }
                    1 => {
                        let piece = PIECES[rng.usize(..PIECES.len())];
                        data.splice(at..at, piece.iter().copied());
                    }
                    2 => {
                        let end = (at + rng.usize(..20)).min(data.len());
                        data.drain(at..end);
                    }
                    3 => {
                        let other = &seeds[rng.usize(..seeds.len())];
                        let from = rng.usize(..=other.len());
                        data.splice(at..at, other[from..].iter().copied());
                    }
                    _ => {
                        let run = vec![rng.u8(..); rng.usize(..300)];
                        data.splice(at..at, run);
                    }
                }
            }
            session(&data);
        }
    }

    /// The command corpus's lines read as server replies too.
    #[test]
    fn reply_lines_of_the_corpus() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fuzz/corpus/imap_command"
        );
        for entry in std::fs::read_dir(dir).expect("the seed corpus is committed") {
            let data = std::fs::read(entry.expect("entry").path()).expect("read");
            for line in data.split(|&b| b == b'\n') {
                super::reply_line(line.strip_suffix(b"\r").unwrap_or(line));
            }
        }
    }

    #[test]
    fn random_bytes() {
        let mut rng = fastrand::Rng::with_seed(0x1ba9);
        let alphabet: &[u8] =
            b"a1 {}+~()[]<>\"\\*$:,.%\r\n\r\nLOGIN FETCH SELECT UID SEARCH 0\x00\xff";
        for _ in 0..300 {
            let len = rng.usize(0..300);
            let data: Vec<u8> = (0..len)
                .map(|_| {
                    if rng.bool() {
                        alphabet[rng.usize(..alphabet.len())]
                    } else {
                        rng.u8(..)
                    }
                })
                .collect();
            session(&data);
        }
    }
}
