//! The outcome of a conversation must not depend on how TCP cut it into reads, nor
//! on the size of the chunks the server streams messages in.
//!
//! POP3 pipelining (RFC 2449 §6.6) lets a client send everything at once, so the
//! whole conversation is cut at random places, group boundaries included; across
//! thousands of seeds the output and the events must be exactly those of the same
//! conversation delivered one command per read.

use super::tests::{Server, mailbox, plain_config};
use super::{Config, Limits};

/// A conversation exercising every phase: CAPA, failed and cancelled SASL, a wrong
/// password, a login, every transaction command (deleted and missing messages
/// among them), RSET, an overlong line, and QUIT.
fn conversation() -> Vec<Vec<u8>> {
    let lines = [
        "CAPA\r\n".to_owned(),
        "AUTH PLAIN AGpvZQB3cm9uZw==\r\n".to_owned(),
        "AUTH PLAIN\r\n".to_owned(),
        "*\r\n".to_owned(),
        "USER joe\r\n".to_owned(),
        "PASS wrong\r\n".to_owned(),
        "STAT\r\n".to_owned(),
        "USER joe\r\n".to_owned(),
        "PASS secret\r\n".to_owned(),
        "STAT\r\n".to_owned(),
        "LIST\r\n".to_owned(),
        "UIDL\r\n".to_owned(),
        "RETR 1\r\n".to_owned(),
        "TOP 2 1\r\n".to_owned(),
        "TOP 3 0\r\n".to_owned(),
        "DELE 1\r\n".to_owned(),
        "RETR 1\r\n".to_owned(),
        "LIST 1\r\n".to_owned(),
        "RETR 4\r\n".to_owned(),
        "RSET\r\n".to_owned(),
        "DELE 2\r\n".to_owned(),
        format!("NOOP {}\r\n", "z".repeat(600)),
        "RETR 3\r\n".to_owned(),
        "noop\r\n".to_owned(),
        "QUIT\r\n".to_owned(),
    ];
    lines.into_iter().map(String::into_bytes).collect()
}

fn config() -> Config {
    Config {
        limits: Limits {
            max_errors: 100,
            ..Limits::default()
        },
        ..plain_config()
    }
}

/// Feeds the whole conversation in pieces ending at `cuts`.
fn run(whole: &[u8], cuts: &[usize], chunk: usize) -> Server {
    let mut server = Server::new(config());
    server.chunk = chunk;
    let mut start = 0;
    for &end in cuts {
        server.receive(&whole[start..end]);
        start = end;
    }
    server.receive(&whole[start..]);
    server
}

fn assert_same(reference: &Server, other: &Server, what: &str) {
    assert_eq!(
        String::from_utf8_lossy(&other.out),
        String::from_utf8_lossy(&reference.out),
        "{what}"
    );
    assert_eq!(other.log, reference.log, "{what}");
    assert_eq!(other.store, reference.store, "{what}");
    assert_eq!(other.closed, reference.closed, "{what}");
}

/// The reference: one command per read.
fn reference() -> Server {
    let mut server = Server::new(config());
    for line in conversation() {
        server.receive(&line);
    }
    server
}

#[test]
fn conversation_does_what_it_should() {
    let server = reference();
    assert_eq!(
        server.statuses(),
        [
            "+OK", "-ERR", "+", "-ERR", "+OK", "-ERR", "-ERR", "+OK", "+OK", "+OK", "+OK", "+OK",
            "+OK", "+OK", "+OK", "+OK", "-ERR", "-ERR", "-ERR", "+OK", "+OK", "-ERR", "+OK", "+OK",
            "+OK"
        ],
        "{:#?}",
        server.responses
    );
    assert_eq!(
        server.log,
        [
            "AUTH joe",
            "LOGIN FAILED",
            "AUTH joe",
            "LOGIN FAILED",
            "AUTH joe",
            "RETR 1",
            "TOP 2 1",
            "TOP 3 0",
            "RETR 3",
            "QUIT [1]",
            "CLOSE"
        ]
    );
    let mut left = mailbox();
    left.remove(1);
    assert_eq!(server.store, left);
    assert!(server.closed);
}

#[test]
fn random_splits_and_stream_chunks() {
    let whole = conversation().concat();
    let reference = reference();
    assert_same(&reference, &run(&whole, &[], 3), "one read");
    let bytes: Vec<usize> = (1..whole.len()).collect();
    assert_same(&reference, &run(&whole, &bytes, 1), "one byte per read");
    for seed in 0..2000 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let mut cuts: Vec<usize> = (0..rng.usize(0..40))
            .map(|_| rng.usize(1..whole.len()))
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        let chunk = rng.usize(1..100);
        let split = run(&whole, &cuts, chunk);
        assert_same(&reference, &split, &format!("seed {seed}"));
    }
}
