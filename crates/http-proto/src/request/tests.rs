use super::*;

/// Method, version, body framing, keep-alive, head length.
type Summary = (Method, Version, BodyKind, bool, usize);

fn parse(input: &[u8]) -> Result<Option<Summary>, Error> {
    parse_with(input, &Limits::default())
}

fn parse_with(input: &[u8], limits: &Limits) -> Result<Option<Summary>, Error> {
    let mut storage = header_storage();
    match parse_request(input, &mut storage, limits)? {
        Status::Complete(h) => Ok(Some((h.method, h.version, h.body, h.keep_alive, h.len))),
        Status::Partial => Ok(None),
    }
}

#[test]
fn valid_heads() {
    use BodyKind::*;
    use Method::*;
    use Version::*;
    let cases: &[(&[u8], Method, Version, BodyKind, bool)] = &[
        (
            b"GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            Get,
            Http11,
            None,
            true,
        ),
        (b"GET / HTTP/1.0\r\n\r\n", Get, Http10, None, false),
        (
            b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
            Get,
            Http10,
            None,
            true,
        ),
        (
            b"HEAD /x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            Head,
            Http11,
            None,
            false,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, CLOSE\r\n\r\n",
            Get,
            Http11,
            None,
            false,
        ),
        (
            b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n",
            Post,
            Http11,
            Length(5),
            true,
        ),
        (
            b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n",
            Post,
            Http11,
            None,
            true,
        ),
        (
            b"POST /p HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551615\r\n\r\n",
            Post,
            Http11,
            Length(u64::MAX),
            true,
        ),
        (
            b"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
            Post,
            Http11,
            Chunked,
            true,
        ),
        (
            b"POST /p HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked \r\n\r\n",
            Post,
            Http11,
            Chunked,
            true,
        ),
        (
            b"BREW /pot HTTP/1.1\r\nHost: a\r\n\r\n",
            Other,
            Http11,
            None,
            true,
        ),
        (
            b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            Get,
            Http11,
            None,
            true,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\n\r\n",
            Get,
            Http11,
            None,
            true,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX: \xff\xfe obs-text\r\n\r\n",
            Get,
            Http11,
            None,
            true,
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\tb\r\n\r\n",
            Get,
            Http11,
            None,
            true,
        ),
    ];
    for (input, method, version, body, keep_alive) in cases {
        let got =
            parse(input).unwrap_or_else(|e| panic!("{:?}: {e}", String::from_utf8_lossy(input)));
        let (m, v, b, k, len) = got.expect("complete");
        assert_eq!(
            (m, v, b, k),
            (*method, *version, *body, *keep_alive),
            "{:?}",
            String::from_utf8_lossy(input)
        );
        assert_eq!(len, input.len());
    }
}

#[test]
fn malformed_heads() {
    let cases: &[(&[u8], Error)] = &[
        // HTTP/0.9 and other versions
        (b"GET /\r\n\r\n", Error::BadVersion),
        (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", Error::BadVersion),
        (b"GET / HTTP/1.2\r\nHost: a\r\n\r\n", Error::BadVersion),
        (b"GET / http/1.1\r\nHost: a\r\n\r\n", Error::BadVersion),
        // request line
        (b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", Error::BadRequestLine),
        (b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n", Error::BadRequestLine),
        (b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", Error::BadVersion),
        // line endings
        (b"GET / HTTP/1.1\nHost: a\r\n\r\n", Error::BareLineEnding),
        (b"GET / HTTP/1.1\r\nHost: a\n\r\n", Error::BareLineEnding),
        (b"GET / HTTP/1.1\r\nHost: a\r\n\n", Error::BareLineEnding),
        (b"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", Error::BareLineEnding),
        (b"GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", Error::BadHeader),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", Error::BadHeader),
        // header syntax
        (b"GET / HTTP/1.1\r\nHost : a\r\n\r\n", Error::BadHeader),
        (b"GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", Error::BadHeader),
        (b"GET / HTTP/1.1\r\nHost: a\r\n\tfolded\r\n\r\n", Error::BadHeader),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", Error::BadHeader),
        (b"GET / HTTP/1.1\r\nHost: a\r\nX\xff: b\r\n\r\n", Error::BadHeader),
        (b"GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", Error::BadHeader),
        // Host
        (b"GET / HTTP/1.1\r\n\r\n", Error::BadHost),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", Error::BadHost),
        (b"GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", Error::BadHost),
        // framing
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", Error::TransferEncodingWithContentLength),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", Error::TransferEncodingWithContentLength),
        (b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", Error::TransferEncodingInHttp10),
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n", Error::BadTransferEncoding),
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", Error::BadTransferEncoding),
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", Error::UnsupportedTransferCoding),
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", Error::UnsupportedTransferCoding),
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n", Error::BadTransferEncoding),
        (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;q=1\r\n\r\n", Error::BadTransferEncoding),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n", Error::BadContentLength),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\n", Error::BadContentLength),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", Error::BadContentLength),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n", Error::BadContentLength),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 0\r\n\r\n", Error::BadContentLength),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n", Error::BadContentLength),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", Error::BadContentLength),
        (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n", Error::BadContentLength),
        (b"GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", Error::UnsupportedExpectation),
    ];
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(input, want)| parse(input).map(|_| ()) != Err(*want))
        .map(|(input, want)| {
            let got = parse(input).map(|_| ());
            format!(
                "{:?}: got {got:?}, want {want:?}",
                String::from_utf8_lossy(input)
            )
        })
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn partial_heads_wait_for_more() {
    let full = b"GET /index.html HTTP/1.1\r\nHost: example\r\nUser-Agent: t\r\n\r\n";
    for cut in 0..full.len() {
        assert!(
            parse(&full[..cut]).expect("no error on a prefix").is_none(),
            "cut {cut}"
        );
    }
    assert!(parse(full).expect("complete").is_some());
}

#[test]
fn limits_are_enforced_on_partial_input() {
    let limits = Limits::default();
    // Request line of exactly the limit is fine, one more byte is a 414, before the
    // line is even complete.
    let prefix = b"GET /";
    let suffix = b" HTTP/1.1";
    let fill = limits.max_request_line - prefix.len() - suffix.len();
    let mut line = prefix.to_vec();
    line.extend(std::iter::repeat_n(b'a', fill));
    line.extend_from_slice(suffix);
    let ok = [line.as_slice(), b"\r\nHost: a\r\n\r\n"].concat();
    assert!(parse(&ok).expect("at the limit").is_some());
    let mut long = prefix.to_vec();
    long.extend(std::iter::repeat_n(b'a', fill + 1));
    assert_eq!(
        parse(&[long.as_slice(), suffix].concat()),
        Err(Error::RequestLineTooLong)
    );
    let no_end = vec![b'G'; limits.max_request_line + 1];
    assert_eq!(parse(&no_end), Err(Error::RequestLineTooLong));

    // One header line at the limit, then one byte over.
    let value_len = limits.max_header_line - "X: ".len() + 1;
    let head = |n: usize| {
        let mut h = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
        h.extend(std::iter::repeat_n(b'v', n));
        h.extend_from_slice(b"\r\n\r\n");
        h
    };
    assert!(parse(&head(value_len - 1)).expect("at the limit").is_some());
    assert_eq!(parse(&head(value_len)), Err(Error::HeaderLineTooLong));

    // 100 headers are fine, 101 are not.
    let many = |n: usize| {
        let mut h = b"GET / HTTP/1.1\r\n".to_vec();
        h.extend_from_slice(b"Host: a\r\n");
        for i in 1..n {
            h.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        h.extend_from_slice(b"\r\n");
        h
    };
    assert!(parse(&many(100)).expect("100 headers").is_some());
    assert_eq!(parse(&many(101)), Err(Error::TooManyHeaders));

    // A head growing past 32 KiB is refused while still partial.
    let mut big = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
    while big.len() <= limits.max_head {
        big.extend_from_slice(b"X-Filler: 0123456789012345678901234567890123456789\r\n");
    }
    let small = Limits {
        max_headers: 128,
        ..limits
    };
    assert_eq!(parse_with(&big, &small), Err(Error::HeadTooLarge));
    // ... and blank lines before the request line count too.
    assert_eq!(
        parse(&b"\r\n".repeat(limits.max_head)),
        Err(Error::HeadTooLarge)
    );
}

#[test]
fn header_lookup_is_case_insensitive() {
    let input = b"GET /a?b HTTP/1.1\r\nhost: h\r\nUSER-agent: curl\r\n\r\nGET";
    let mut storage = header_storage();
    let Ok(Status::Complete(head)) = parse_request(input, &mut storage, &Limits::default()) else {
        panic!("complete head expected");
    };
    assert_eq!(head.header("User-Agent"), Some(&b"curl"[..]));
    assert_eq!(head.header("Referer"), None);
    assert_eq!(head.target, b"/a?b");
    assert_eq!(head.len, input.len() - 3);
}

#[test]
fn trim_and_list_items() {
    assert_eq!(trim(b"  a b\t "), b"a b");
    assert_eq!(trim(b"   "), b"");
    let items: Vec<&[u8]> = list_items(b"a, b ,,c").collect();
    assert_eq!(items, vec![&b"a"[..], b"b", b"", b"c"]);
}

#[test]
fn host_values() {
    let valid: &[&str] = &[
        "",
        "a",
        "example.org",
        "example.org:8080",
        "example.org:",
        "127.0.0.1",
        "127.0.0.1:80",
        "a:65535",
        "a:00080",
        "[::1]",
        "[::1]:8080",
        "[2001:db8::7]:",
        "[v1.fe80::a+en1]",
        "xn--bcher-kva.example",
        "a_b-c~d",
        "%41b",
        "a!$&'()*+,;=",
    ];
    let invalid: &[&str] = &[
        "user:pw@t",
        "user@t",
        "a b",
        "a/../b",
        "a/b",
        "a:xyz",
        "a:80:80",
        "a:-1",
        // Issue 56 (7): a port is at most five digits and at most 65535.
        "a.test:999999",
        "a:65536",
        "a:99999",
        "a:000080",
        "[::1]:65536",
        "[::1]:123456",
        "a?b",
        "a#b",
        "a\\b",
        "%4",
        "%zz",
        "a\"b",
        "a<b>",
        "[::1",
        "::1",
        "[::1]x",
        "[::1]:a",
        "[a.b]",
        "[v.x]",
        "[vz.x]",
        "[v1.]",
        "[::1%25eth0]",
        "é.example",
    ];
    let host_req = |v: &str| format!("GET / HTTP/1.1\r\nHost: {v}\r\n\r\n").into_bytes();
    let wrong: Vec<String> = valid
        .iter()
        .filter(|v| !matches!(parse(&host_req(v)), Ok(Some(_))))
        .map(|v| format!("valid {v:?} refused"))
        .chain(
            invalid
                .iter()
                .filter(|v| parse(&host_req(v)) != Err(Error::BadHost))
                .map(|v| format!("invalid {v:?} accepted")),
        )
        .collect();
    assert!(wrong.is_empty(), "{wrong:#?}");
    // HTTP/1.0 need not send Host, but one it sends is held to the same syntax.
    assert_eq!(
        parse(b"GET / HTTP/1.0\r\nHost: a b\r\n\r\n"),
        Err(Error::BadHost)
    );
    // Surrounding whitespace is OWS, not part of the value.
    assert!(matches!(
        parse(b"GET / HTTP/1.1\r\nHost:  a:80 \t\r\n\r\n"),
        Ok(Some(_))
    ));
}
