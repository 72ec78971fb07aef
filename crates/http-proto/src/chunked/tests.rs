use super::*;

/// Decodes `input` fed in pieces of `step` bytes; returns the body.
fn decode_all(input: &[u8], step: usize) -> Result<(Vec<u8>, usize), ChunkedError> {
    let mut dec = ChunkedDecoder::new();
    let mut body = Vec::new();
    let mut fed = 0;
    let mut pos = 0;
    while !dec.is_done() {
        if pos == fed {
            if fed == input.len() {
                break;
            }
            fed = (fed + step).min(input.len());
        }
        let d = dec.decode(&input[pos..fed])?;
        body.extend_from_slice(d.data);
        pos += d.consumed;
    }
    Ok((body, pos))
}

#[test]
fn valid_bodies_in_any_split() {
    let cases: &[(&[u8], &[u8])] = &[
        (b"0\r\n\r\n", b""),
        (b"5\r\nhello\r\n0\r\n\r\n", b"hello"),
        (
            b"5;name=value\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            b"hello world",
        ),
        (
            b"A\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n",
            b"0123456789",
        ),
        (
            b"000000000000000a\r\n0123456789\r\n0\r\n\r\n",
            b"0123456789",
        ),
    ];
    for (input, body) in cases {
        for step in [1, 2, 3, 7, input.len()] {
            let (got, used) = decode_all(input, step).expect("valid");
            assert_eq!(
                got,
                *body,
                "{:?} step {step}",
                String::from_utf8_lossy(input)
            );
            assert_eq!(used, input.len());
        }
    }
}

#[test]
fn trailing_bytes_are_not_consumed() {
    let input = b"3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n";
    let (body, used) = decode_all(input, input.len()).expect("valid");
    assert_eq!(body, b"abc");
    assert_eq!(&input[used..], b"GET / HTTP/1.1\r\n");
}

#[test]
fn malformed_bodies() {
    let long_ext = [
        b"1;".as_slice(),
        &vec![b'x'; MAX_EXTENSION + 1],
        b"\r\na\r\n0\r\n\r\n",
    ]
    .concat();
    let cases: &[(&[u8], ChunkedError)] = &[
        (b"0x5\r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
        (b" 5\r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
        (b"5 \r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
        (b"-5\r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
        (b"5_0\r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
        (b"\r\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
        (b"10000000000000000\r\n", ChunkedError::BadSize),
        (b"5\nhello\r\n0\r\n\r\n", ChunkedError::BadSize),
        (b"5\r\rhello\r\n0\r\n\r\n", ChunkedError::BadLineEnding),
        (b"5\r\nhello\n0\r\n\r\n", ChunkedError::BadLineEnding),
        (b"5\r\nhelloX\r\n0\r\n\r\n", ChunkedError::BadLineEnding),
        (b"5\r\nhello\r\r0\r\n\r\n", ChunkedError::BadLineEnding),
        (
            b"5;a\x00b\r\nhello\r\n0\r\n\r\n",
            ChunkedError::BadExtension,
        ),
        (b"5;a\nb\r\nhello\r\n0\r\n\r\n", ChunkedError::BadExtension),
        (&long_ext, ChunkedError::BadExtension),
        (b"0\r\nX: 1\n\r\n", ChunkedError::BadTrailer),
        (b"0\r\n\r\r", ChunkedError::BadTrailer),
    ];
    for (input, want) in cases {
        assert_eq!(
            decode_all(input, 1).map(|_| ()),
            Err(*want),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
    let mut big_trailer = b"0\r\n".to_vec();
    while big_trailer.len() < MAX_TRAILERS + 100 {
        big_trailer.extend_from_slice(b"X-T: 0123456789\r\n");
    }
    assert_eq!(
        decode_all(&big_trailer, 64).map(|_| ()),
        Err(ChunkedError::BadTrailer)
    );
}

#[test]
fn largest_size_is_accepted_without_overflow() {
    let mut dec = ChunkedDecoder::new();
    let d = dec
        .decode(b"ffffffffffffffff\r\nab")
        .expect("16 digits are fine");
    assert_eq!(d.data, b"ab");
}

#[test]
fn trailer_fields_follow_the_head_rules() {
    let valid: &[&[u8]] = &[
        b"0\r\n\r\n",
        b"0\r\nX-Trailer: 1\r\n\r\n",
        b"0\r\nA: 1\r\nB:\r\nC: a\tb \xff\r\n\r\n",
    ];
    for input in valid {
        for step in [1, 5, input.len()] {
            let (_, used) = decode_all(input, step)
                .unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(input)));
            assert_eq!(used, input.len());
        }
    }
    let invalid: &[&[u8]] = &[
        // obs-fold
        b"0\r\nX: a\r\n b\r\n\r\n",
        b"0\r\nX: a\r\n\tb\r\n\r\n",
        b"0\r\n folded\r\n\r\n",
        // no colon
        b"0\r\nNoColon\r\n\r\n",
        b"0\r\nX: 1\r\nNoColon\r\n\r\n",
        // space before the colon, empty name, bad name byte
        b"0\r\nX : 1\r\n\r\n",
        b"0\r\n: 1\r\n\r\n",
        b"0\r\nX\xff: 1\r\n\r\n",
        // a request line where a field should be
        b"0\r\nGET / HTTP/1.1\r\n\r\n",
        b"0\r\nGET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
        // control bytes in a value
        b"0\r\nX: a\x01b\r\n\r\n",
        b"0\r\nX: a\rb\r\n\r\n",
    ];
    let accepted: Vec<String> = invalid
        .iter()
        .filter(|input| {
            [1, 5, input.len()]
                .iter()
                .any(|&step| decode_all(input, step).map(|_| ()) != Err(ChunkedError::BadTrailer))
        })
        .map(|input| String::from_utf8_lossy(input).into_owned())
        .collect();
    assert!(accepted.is_empty(), "accepted: {accepted:#?}");
}
