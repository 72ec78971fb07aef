//! The outcome of a conversation must not depend on how TCP cut it into reads.
//!
//! A client sends groups of commands (RFC 2920: it waits for the replies at the end
//! of a group). Within each group, the bytes are cut at random places; across
//! thousands of seeds, the replies, the events and the messages must be exactly those
//! of the same conversation delivered one group per read.

use super::tests::Server;
use super::{AuthPolicy, Config, Limits};

/// A conversation exercising every phase: EHLO, AUTH (both mechanisms, a failure),
/// pipelined MAIL/RCPT with a refused recipient, dot-stuffed messages with long
/// lines, a message over the size limit, RSET, NOOP, a too-long command line, and
/// QUIT.
fn conversation() -> Vec<Vec<u8>> {
    let big_line = "x".repeat(700);
    let mut body = String::from("Subject: split\r\n\r\n");
    for i in 0..20 {
        body.push_str(&format!(".line {i} {big_line}\r\n..\r\n\r\n"));
    }
    let too_big = format!("{}\r\n", "y".repeat(990)).repeat(25);
    let groups = [
        "EHLO client.example\r\n".to_owned(),
        "AUTH PLAIN AHVzZXIAd3Jvbmc=\r\n".to_owned(),
        "AUTH LOGIN\r\n".to_owned(),
        "dXNlcg==\r\n".to_owned(),
        "c2VjcmV0\r\n".to_owned(),
        "MAIL FROM:<a@b.example> SIZE=100 BODY=8BITMIME\r\nRCPT TO:<user@ours.example>\r\n\
         RCPT TO:<nobody@ours.example>\r\nRCPT TO:<x@ext.example>\r\nRCPT TO:<@r.example:user@OURS.example.>\r\n\
         DATA\r\n"
            .to_owned(),
        format!("{body}.\r\n"),
        "RSET\r\nMAIL FROM:<>\r\nRCPT TO:<postmaster>\r\nDATA\r\n".to_owned(),
        format!("{too_big}MAIL FROM:<evil@x>\r\n.\r\n"),
        format!("NOOP {}\r\n", "z".repeat(3000)),
        "MAIL FROM:<c@d>\r\nRCPT TO:<user@ours.example>\r\nDATA\r\n".to_owned(),
        ".\r\nQUIT\r\n".to_owned(),
    ];
    groups.into_iter().map(String::into_bytes).collect()
}

fn config() -> Config {
    Config {
        auth: AuthPolicy::Always,
        limits: Limits {
            max_message_size: 20_000,
            ..Limits::default()
        },
        ..Config::default()
    }
}

/// Feeds each group in pieces cut by `cut(group_len)`.
fn run(groups: &[Vec<u8>], config: Config, mut cuts: impl FnMut(usize) -> Vec<usize>) -> Server {
    let mut server = Server::new(config);
    for group in groups {
        let mut start = 0;
        for end in cuts(group.len()) {
            server.receive(&group[start..end]);
            start = end;
        }
        server.receive(&group[start..]);
    }
    server
}

/// Sorted random cut points in `1..len`.
fn random_cuts(rng: &mut fastrand::Rng, len: usize) -> Vec<usize> {
    if len < 2 {
        return Vec::new();
    }
    let n = rng.usize(0..8.min(len));
    let mut cuts: Vec<usize> = (0..n).map(|_| rng.usize(1..len)).collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

fn assert_same(reference: &Server, other: &Server, what: &str) {
    assert_eq!(other.replies(), reference.replies(), "{what}");
    assert_eq!(other.log, reference.log, "{what}");
    assert_eq!(other.messages, reference.messages, "{what}");
    assert_eq!(other.closed, reference.closed, "{what}");
}

#[test]
fn conversation_does_what_it_should() {
    let server = run(&conversation(), config(), |_| Vec::new());
    let codes = server.codes();
    assert_eq!(
        codes,
        [
            220, 250, 535, 334, 334, 235, 250, 250, 550, 554, 250, 354, 250, 250, 250, 250, 354,
            552, 500, 250, 250, 354, 250, 221
        ],
        "{:#?}",
        server.replies()
    );
    assert_eq!(server.messages.len(), 2);
    assert!(server.messages[0].starts_with(b"Subject: split\r\n\r\nline 0 x"));
    assert!(server.messages[0].ends_with(b"\r\n.\r\n\r\n"));
    assert!(!server.log.iter().any(|l| l.contains("evil")));
    assert!(server.closed);
}

#[test]
fn random_splits_within_groups() {
    let groups = conversation();
    let reference = run(&groups, config(), |_| Vec::new());
    let bytes = run(&groups, config(), |len| (1..len).collect());
    assert_same(&reference, &bytes, "one byte per read");
    for seed in 0..2000 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let split = run(&groups, config(), |len| random_cuts(&mut rng, len));
        assert_same(&reference, &split, &format!("seed {seed}"));
    }
}

/// With the pipelining check off, the whole conversation may arrive in any pieces,
/// group boundaries included.
#[test]
fn random_splits_across_groups_without_the_pipelining_check() {
    let config = || Config {
        reject_unauth_pipelining: false,
        ..config()
    };
    let whole = vec![conversation().concat()];
    let reference = run(&conversation(), config(), |_| Vec::new());
    assert_same(
        &reference,
        &run(&whole, config(), |_| Vec::new()),
        "one read",
    );
    for seed in 0..500 {
        let mut rng = fastrand::Rng::with_seed(seed);
        let split = run(&whole, config(), |len| {
            let mut cuts: Vec<usize> = (0..rng.usize(0..40)).map(|_| rng.usize(1..len)).collect();
            cuts.sort_unstable();
            cuts.dedup();
            cuts
        });
        assert_same(&reference, &split, &format!("seed {seed}"));
    }
}
