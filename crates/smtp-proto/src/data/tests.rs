use super::*;

/// Feeds `input` in pieces of `chunk` bytes (keeping unconsumed bytes, as a server
/// does); returns the message bytes, the outcome if the end was found, and the bytes
/// of `input` used.
fn run(
    input: &[u8],
    chunk: usize,
    max_size: u64,
    max_line: usize,
) -> (Vec<u8>, Option<Result<u64, Error>>, usize) {
    let mut decoder = DataDecoder::new(max_size, max_line);
    let mut out = Vec::new();
    let mut used = 0;
    let mut available = 0;
    while !decoder.is_done() {
        if available == used {
            if available == input.len() {
                break;
            }
            available = (available + chunk).min(input.len());
        }
        let step = decoder.decode(&input[used..available]);
        out.extend_from_slice(step.data);
        used += step.consumed;
        assert_eq!(step.done, decoder.is_done());
    }
    let outcome = decoder.is_done().then(|| decoder.outcome());
    (out, outcome, used)
}

/// The same in every split: whole, one byte at a time, and a few sizes between.
fn decode(input: &[u8]) -> (Vec<u8>, Option<Result<u64, Error>>, usize) {
    decode_limited(input, 1 << 20, 2048)
}

fn decode_limited(
    input: &[u8],
    max_size: u64,
    max_line: usize,
) -> (Vec<u8>, Option<Result<u64, Error>>, usize) {
    let whole = run(input, input.len().max(1), max_size, max_line);
    for chunk in [1, 2, 3, 5, 7, 64] {
        let split = run(input, chunk, max_size, max_line);
        let label = String::from_utf8_lossy(input);
        assert_eq!(
            (&split.1, split.2),
            (&whole.1, whole.2),
            "chunk {chunk}: {label:?}"
        );
        // Data handed out before a problem was found depends on the split; a refused
        // message is thrown away, so only an accepted one must match.
        if matches!(whole.1, Some(Ok(_))) {
            assert_eq!(split.0, whole.0, "chunk {chunk}: {label:?}");
        }
    }
    whole
}

#[test]
fn plain_messages() {
    let cases: &[(&[u8], &[u8], usize)] = &[
        (b".\r\n", b"", 3),
        (b"hello\r\n.\r\n", b"hello\r\n", 10),
        (b"a\r\nb\r\n.\r\nQUIT\r\n", b"a\r\nb\r\n", 9),
        (
            b"Subject: x\r\n\r\nbody\r\n.\r\n",
            b"Subject: x\r\n\r\nbody\r\n",
            23,
        ),
        // Dot-unstuffing: one leading dot removed, anywhere a line starts.
        (b"..\r\n.\r\n", b".\r\n", 7),
        (
            b"..hidden\r\n...\r\n.x\r\n.\r\n",
            b".hidden\r\n..\r\nx\r\n",
            22,
        ),
        // Dots not at a line start stay.
        (b"a.b\r\n a.\r\n.\r\n", b"a.b\r\n a.\r\n", 13),
        // NUL before a dot line is content, and the dot line is not the end.
        (b"\r\n\x00.\r\n.\r\n", b"\r\n\x00.\r\n", 9),
    ];
    for (input, message, used) in cases {
        let (out, outcome, consumed) = decode(input);
        let label = String::from_utf8_lossy(input);
        assert_eq!(out, *message, "{label}");
        assert_eq!(outcome, Some(Ok(message.len() as u64)), "{label}");
        assert_eq!(consumed, *used, "{label}");
    }
}

#[test]
fn incomplete_messages_wait() {
    for input in [
        &b""[..],
        b"abc",
        b"abc\r\n",
        b"abc\r\n.",
        b"abc\r\n.\r",
        b"\r\n.\n",
    ] {
        let (_, outcome, _) = decode(input);
        assert_eq!(outcome, None, "{:?}", String::from_utf8_lossy(input));
    }
}

/// Every ending of the smuggling family (docs/robustness.md §4.2) followed by a spoofed
/// second transaction: none ends the message, the real `CRLF.CRLF` does, and the
/// message is refused.
#[test]
fn smuggling_endings_never_end_the_message() {
    let endings: &[(&[u8], Error)] = &[
        (b"\n.\n", Error::BareLfInMessage),
        (b"\r.\r", Error::BareCrInMessage),
        (b"\r.\n", Error::BareLfInMessage),
        (b"\n.\r", Error::BareLfInMessage),
        (b"\n.\r\n", Error::BareLfInMessage),
        (b"\r\n.\n", Error::BareLfInMessage),
        (b"\r.\r\n", Error::BareCrInMessage),
        (b"\r\n.\r", Error::BareCrInMessage),
        (b"\r\n.\rX", Error::BareCrInMessage),
        (b"\n\n", Error::BareLfInMessage),
        (b"\r\r\n", Error::BareCrInMessage),
    ];
    let smuggled = b"MAIL FROM:<ceo@victim.example>\r\nRCPT TO:<x@y>\r\nDATA\r\nforged\r\n";
    for (ending, error) in endings {
        let mut input = b"Subject: hi\r\n\r\nbody".to_vec();
        input.extend_from_slice(ending);
        input.extend_from_slice(smuggled);
        input.extend_from_slice(b".\r\nQUIT\r\n");
        let (out, outcome, used) = decode(&input);
        let label = String::from_utf8_lossy(ending);
        assert_eq!(outcome, Some(Err(*error)), "{label:?}");
        assert_eq!(used, input.len() - b"QUIT\r\n".len(), "{label:?}");
        // Nothing after the problem is handed out.
        assert!(
            out.len() <= b"Subject: hi\r\n\r\nbody\r\n".len(),
            "{label:?}"
        );
        // Cut just after the fake ending: the message is still open.
        let cut = b"Subject: hi\r\n\r\nbody".len() + ending.len();
        let (_, outcome, _) = decode(&input[..cut]);
        assert_eq!(outcome, None, "{label:?}");
    }
}

#[test]
fn size_limit_reads_to_the_end() {
    let mut input = b"0123456789\r\n".repeat(10);
    input.extend_from_slice(b".\r\nRSET\r\n");
    // 120 bytes of message: fits in 120, not in 119.
    let (out, outcome, _) = decode_limited(&input, 120, 2048);
    assert_eq!((out.len(), outcome), (120, Some(Ok(120))));
    let (out, outcome, used) = decode_limited(&input, 119, 2048);
    assert_eq!(outcome, Some(Err(Error::MessageTooLarge)));
    assert_eq!(used, input.len() - b"RSET\r\n".len());
    assert!(out.len() <= 119);
}

#[test]
fn line_length_limit() {
    let ok = [b"x".repeat(10), b"\r\n.\r\n".to_vec()].concat();
    assert_eq!(decode_limited(&ok, 1000, 10).1, Some(Ok(12)));
    let long = [b"x".repeat(11), b"\r\n.\r\n".to_vec()].concat();
    assert_eq!(
        decode_limited(&long, 1000, 10).1,
        Some(Err(Error::MessageLineTooLong))
    );
    // A stuffed dot does not count.
    let stuffed = [b".".to_vec(), b"x".repeat(10), b"\r\n.\r\n".to_vec()].concat();
    assert_eq!(decode_limited(&stuffed, 1000, 10).1, Some(Ok(12)));
}

/// With several problems the most serious is reported, however the input is cut
/// (a case the fuzzer found: size and bare CR were reported in the order found).
#[test]
fn worst_problem_is_reported() {
    let cases: &[(&[u8], Error)] = &[
        (b"a\nb\rc\r\n.\r\n", Error::BareLfInMessage),
        (b"a\rb\nc\r\n.\r\n", Error::BareLfInMessage),
        (b"0123456789012345\rx\r\n.\r\n", Error::BareCrInMessage),
        (
            b"0123456789\r\n0123456789\r\n\r\r\n.\r\n",
            Error::BareCrInMessage,
        ),
        (b"0123456789\r\n0123456789\r\n.\r\n", Error::MessageTooLarge),
    ];
    for (input, error) in cases {
        let got = decode_limited(input, 15, 12).1;
        assert_eq!(
            got,
            Some(Err(*error)),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}
