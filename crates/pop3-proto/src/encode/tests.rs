use super::*;

/// Encodes `message` whole.
fn encode(message: &[u8], top: Option<u32>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = encoder(top);
    encoder.encode(message, &mut out);
    encoder.finish(&mut out);
    out
}

fn encoder(top: Option<u32>) -> MessageEncoder {
    match top {
        None => MessageEncoder::retr(),
        Some(lines) => MessageEncoder::top(lines),
    }
}

/// Encodes `message` in pieces ending at `cuts`, stopping when the encoder says so.
fn encode_cut(message: &[u8], top: Option<u32>, cuts: &[usize]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = encoder(top);
    let mut start = 0;
    for &end in cuts.iter().chain(std::iter::once(&message.len())) {
        if !encoder.encode(&message[start..end], &mut out) {
            break;
        }
        start = end;
    }
    encoder.finish(&mut out);
    out
}

/// The reference for RETR: bare CR and bare LF become CRLF, and a CRLF is added at
/// the end if missing; byte by byte, without the encoder's cleverness.
fn normalise(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < message.len() {
        match message[i] {
            b'\r' if message.get(i + 1) == Some(&b'\n') => {
                out.extend_from_slice(b"\r\n");
                i += 1;
            }
            b'\r' | b'\n' => out.extend_from_slice(b"\r\n"),
            b => out.push(b),
        }
        i += 1;
    }
    if !out.is_empty() && !out.ends_with(b"\r\n") {
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// What a client reads: checks the framing (CRLF lines only, no `.` line before
/// the last) and removes the byte-stuffing.
fn unstuff(wire: &[u8]) -> Vec<u8> {
    assert!(wire.ends_with(b".\r\n"), "{wire:?}");
    let mut out = Vec::new();
    let lines: Vec<&[u8]> = wire.split_inclusive(|&b| b == b'\n').collect();
    for (i, line) in lines.iter().enumerate() {
        assert!(line.ends_with(b"\r\n"), "{line:?} in {wire:?}");
        let content = &line[..line.len() - 2];
        assert!(!content.contains(&b'\r') && !content.contains(&b'\n'));
        if i + 1 == lines.len() {
            assert_eq!(content, b".");
            assert!(i == 0 || wire[..wire.len() - 3].ends_with(b"\r\n"));
        } else {
            assert_ne!(content, b".", "early end in {wire:?}");
            out.extend_from_slice(content.strip_prefix(b".").unwrap_or(content));
            out.extend_from_slice(b"\r\n");
        }
    }
    out
}

#[test]
fn retr_table() {
    let cases: &[(&[u8], &[u8])] = &[
        (b"", b".\r\n"),
        (b"a\r\nb\r\n", b"a\r\nb\r\n.\r\n"),
        (b"a\r\nb", b"a\r\nb\r\n.\r\n"),
        (b".a", b"..a\r\n.\r\n"),
        (b".\r\n..x\r\n.y", b"..\r\n...x\r\n..y\r\n.\r\n"),
        (b"x\r\n.\r\n", b"x\r\n..\r\n.\r\n"),
        (b"\r\n", b"\r\n.\r\n"),
        (b"a.b\r\n", b"a.b\r\n.\r\n"),
        // Bare line ends become CRLF, and the line after them is stuffed.
        (b"a\n.\r\nb", b"a\r\n..\r\nb\r\n.\r\n"),
        (b"a\r.b\r\n", b"a\r\n..b\r\n.\r\n"),
        (b"a\r\r\n", b"a\r\n\r\n.\r\n"),
        (b"a\n\r", b"a\r\n\r\n.\r\n"),
        (b"a\r", b"a\r\n.\r\n"),
        (b"\n.\n", b"\r\n..\r\n.\r\n"),
    ];
    for (message, expected) in cases {
        assert_eq!(
            String::from_utf8_lossy(&encode(message, None)),
            String::from_utf8_lossy(expected),
            "{:?}",
            String::from_utf8_lossy(message)
        );
    }
}

#[test]
fn top_table() {
    let mail: &[u8] = b"H: 1\r\nH: 2\r\n\r\nbody1\r\n.body2\r\nbody3";
    let cases: &[(&[u8], u32, &[u8])] = &[
        (mail, 0, b"H: 1\r\nH: 2\r\n\r\n.\r\n"),
        (mail, 1, b"H: 1\r\nH: 2\r\n\r\nbody1\r\n.\r\n"),
        (mail, 2, b"H: 1\r\nH: 2\r\n\r\nbody1\r\n..body2\r\n.\r\n"),
        (
            mail,
            3,
            b"H: 1\r\nH: 2\r\n\r\nbody1\r\n..body2\r\nbody3\r\n.\r\n",
        ),
        (
            mail,
            u32::MAX,
            b"H: 1\r\nH: 2\r\n\r\nbody1\r\n..body2\r\nbody3\r\n.\r\n",
        ),
        // No empty line: all header, sent whole.
        (b"H: 1\r\nH: 2", 0, b"H: 1\r\nH: 2\r\n.\r\n"),
        (b"H: 1\r\n", 3, b"H: 1\r\n.\r\n"),
        // An empty first line: no headers at all.
        (b"\r\nbody\r\n", 0, b"\r\n.\r\n"),
        (b"\r\nbody\r\nmore\r\n", 1, b"\r\nbody\r\n.\r\n"),
        // Empty body lines count.
        (b"H\r\n\r\n\r\n\r\nx\r\n", 2, b"H\r\n\r\n\r\n\r\n.\r\n"),
        // Bare line ends split the header from the body too.
        (b"H\n\nbody\n", 0, b"H\r\n\r\n.\r\n"),
        (b"H\r\rbody\rnext", 1, b"H\r\n\r\nbody\r\n.\r\n"),
        (b"", 0, b".\r\n"),
        (b"", 5, b".\r\n"),
    ];
    for (message, lines, expected) in cases {
        assert_eq!(
            String::from_utf8_lossy(&encode(message, Some(*lines))),
            String::from_utf8_lossy(expected),
            "TOP {lines} of {:?}",
            String::from_utf8_lossy(message)
        );
    }
}

#[test]
fn top_says_when_it_is_done() {
    let mut out = Vec::new();
    let mut encoder = MessageEncoder::top(1);
    assert!(encoder.encode(b"H: x\r\n\r", &mut out));
    assert!(encoder.encode(b"\n", &mut out));
    assert!(!encoder.is_done());
    // The line ends with the CR; its LF might follow, so not done yet.
    assert!(encoder.encode(b"line\r", &mut out));
    assert!(!encoder.encode(b"\nignored\r\n", &mut out));
    assert!(encoder.is_done());
    assert!(!encoder.encode(b"more\r\n", &mut out));
    encoder.finish(&mut out);
    assert_eq!(out, b"H: x\r\n\r\nline\r\n.\r\n");
    // RETR is never done before the end.
    let mut encoder = MessageEncoder::retr();
    assert!(encoder.encode(b"a\r\n\r\nb\r\n", &mut out));
    assert!(!encoder.is_done());
}

/// Messages that exercise every rule at once.
fn samples() -> Vec<Vec<u8>> {
    let mut big = Vec::new();
    for i in 0..300 {
        big.extend_from_slice(format!("{}line {i}\r\n", ".".repeat(i % 3)).as_bytes());
        if i == 5 {
            big.extend_from_slice(b"\r\n");
        }
    }
    vec![
        b"Subject: t\r\n\r\n.\r\n..\r\nx\r\n.".to_vec(),
        b"a\n.\n\r.\r\r\n.x\r\n\r\n\n.end".to_vec(),
        b".\r".to_vec(),
        big,
    ]
}

#[test]
fn chunk_boundaries_do_not_matter() {
    for message in samples() {
        for top in [None, Some(0), Some(1), Some(7), Some(1000)] {
            let whole = encode(&message, top);
            let bytes: Vec<usize> = (1..message.len()).collect();
            assert_eq!(encode_cut(&message, top, &bytes), whole, "byte by byte");
            for seed in 0..300 {
                let mut rng = fastrand::Rng::with_seed(seed);
                let mut cuts: Vec<usize> = (0..rng.usize(0..20))
                    .map(|_| rng.usize(0..=message.len()))
                    .collect();
                cuts.sort_unstable();
                assert_eq!(
                    encode_cut(&message, top, &cuts),
                    whole,
                    "seed {seed} top {top:?}"
                );
            }
        }
    }
}

#[test]
fn output_unstuffs_to_the_normalised_message() {
    let mut rng = fastrand::Rng::with_seed(7);
    let alphabet = b".\r\na ";
    for _ in 0..3000 {
        let message: Vec<u8> = (0..rng.usize(0..40))
            .map(|_| alphabet[rng.usize(0..alphabet.len())])
            .collect();
        let retr = encode(&message, None);
        let read = unstuff(&retr);
        assert_eq!(read, normalise(&message), "{message:?}");
        // TOP sends a prefix of RETR's lines.
        for lines in [0, 1, 3] {
            let top = unstuff(&encode(&message, Some(lines)));
            assert!(read.starts_with(&top), "TOP {lines} of {message:?}");
        }
    }
}

#[test]
fn crlf_messages_keep_their_listed_size() {
    // What RETR sends, unstuffed and without the terminator, is the stored message:
    // the size LIST reports.
    for message in samples() {
        if normalise(&message) == message {
            assert_eq!(unstuff(&encode(&message, None)), message);
        }
    }
    let stored = b"Subject: x\r\n\r\n.hello\r\n";
    let mut out = Vec::new();
    Retrieval {
        index: 0,
        size: stored.len() as u64,
        top_lines: None,
    }
    .write_to(stored, &mut out);
    assert_eq!(out, b"+OK 22 octets\r\nSubject: x\r\n\r\n..hello\r\n.\r\n");
}

#[test]
fn retrieval_responses() {
    let retr = Retrieval {
        index: 2,
        size: 120,
        top_lines: None,
    };
    assert_eq!(retr.number(), 3);
    assert_eq!(retr.response().to_bytes(), b"+OK 120 octets\r\n");
    assert_eq!(retr.encoder(), MessageEncoder::retr());
    let top = Retrieval {
        top_lines: Some(4),
        ..retr
    };
    assert_eq!(top.response().to_bytes(), b"+OK Top of message follows\r\n");
    assert_eq!(top.encoder(), MessageEncoder::top(4));
}
