//! The response-head parser ([`super::parse`]).

use super::{Framing, ResponseError, ResponseLimits, parse_response};
use crate::Error;
use crate::request::{Method, Status, Version, header_storage};

/// Status, version, framing, Content-Length, keep-alive, head length.
type Summary = (u16, Version, Framing, Option<u64>, bool, usize);

fn parse(input: &[u8]) -> Result<Option<Summary>, Error> {
    parse_with(input, &ResponseLimits::default(), Method::Get)
}

fn parse_with(
    input: &[u8],
    limits: &ResponseLimits,
    method: Method,
) -> Result<Option<Summary>, Error> {
    let mut storage = header_storage();
    match parse_response(input, &mut storage, limits, method)? {
        Status::Complete(h) => Ok(Some((
            h.status,
            h.version,
            h.framing,
            h.content_length,
            h.keep_alive,
            h.len,
        ))),
        Status::Partial => Ok(None),
    }
}

#[test]
fn valid_heads() {
    use Framing::*;
    use Version::*;
    type Case<'a> = (&'a [u8], u16, Version, Framing, Option<u64>, bool);
    let cases: &[Case<'_>] = &[
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            200,
            Http11,
            Length(5),
            Some(5),
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            200,
            Http11,
            None,
            Some(0),
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            200,
            Http11,
            Chunked,
            Option::None,
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: CHUNKED \r\n\r\n",
            200,
            Http11,
            Chunked,
            Option::None,
            true,
        ),
        // Neither: the body runs until the server closes, and then so does the
        // connection.
        (
            b"HTTP/1.1 200 OK\r\n\r\n",
            200,
            Http11,
            UntilClose,
            Option::None,
            false,
        ),
        (
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n",
            200,
            Http10,
            UntilClose,
            Option::None,
            false,
        ),
        (
            b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n",
            200,
            Http10,
            Length(3),
            Some(3),
            false,
        ),
        (
            b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 3\r\n\r\n",
            200,
            Http10,
            Length(3),
            Some(3),
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nConnection: foo, CLOSE\r\nContent-Length: 3\r\n\r\n",
            200,
            Http11,
            Length(3),
            Some(3),
            false,
        ),
        // Statuses without a body, whatever the fields say.
        (
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n",
            304,
            Http11,
            None,
            Some(100),
            true,
        ),
        (
            b"HTTP/1.1 204 No Content\r\n\r\n",
            204,
            Http11,
            None,
            Option::None,
            true,
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\n",
            100,
            Http11,
            None,
            Option::None,
            true,
        ),
        (
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
            101,
            Http11,
            None,
            Option::None,
            true,
        ),
        (
            b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n",
            103,
            Http11,
            None,
            Option::None,
            true,
        ),
        (
            b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n",
            204,
            Http11,
            None,
            Option::None,
            true,
        ),
        // Equal Content-Length values are one (RFC 9110 §8.6).
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 42, 42\r\n\r\n",
            200,
            Http11,
            Length(42),
            Some(42),
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\ncontent-length: 42\r\n\r\n",
            200,
            Http11,
            Length(42),
            Some(42),
            true,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n",
            200,
            Http11,
            Length(u64::MAX),
            Some(u64::MAX),
            true,
        ),
        // No reason phrase, an empty one, the smallest and largest statuses.
        (
            b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
            200,
            Http11,
            None,
            Some(0),
            true,
        ),
        (
            b"HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n",
            404,
            Http11,
            None,
            Some(0),
            true,
        ),
        (
            b"HTTP/1.1 599 x\r\nContent-Length: 1\r\n\r\n",
            599,
            Http11,
            Length(1),
            Some(1),
            true,
        ),
        // Blank lines before the status line are skipped, and counted.
        (
            b"\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n",
            200,
            Http11,
            Length(1),
            Some(1),
            true,
        ),
    ];
    for (input, status, version, framing, length, keep_alive) in cases {
        let shown = String::from_utf8_lossy(input);
        let parsed = parse(input).unwrap_or_else(|e| panic!("{shown}: {e}"));
        assert_eq!(
            parsed,
            Some((
                *status,
                *version,
                *framing,
                *length,
                *keep_alive,
                input.len()
            )),
            "{shown}"
        );
    }
}

#[test]
fn the_request_method_decides_too() {
    let head = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
    let framing =
        |method| parse_with(head, &ResponseLimits::default(), method).map(|s| s.map(|s| s.2));
    assert_eq!(framing(Method::Get), Ok(Some(Framing::Length(10))));
    assert_eq!(framing(Method::Post), Ok(Some(Framing::Length(10))));
    // HEAD's answer describes a body it does not carry.
    assert_eq!(framing(Method::Head), Ok(Some(Framing::None)));
    // A 2xx to CONNECT starts a tunnel.
    assert_eq!(framing(Method::Connect), Ok(Some(Framing::None)));
    let refused = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 10\r\n\r\n";
    assert_eq!(
        parse_with(refused, &ResponseLimits::default(), Method::Connect).map(|s| s.map(|s| s.2)),
        Ok(Some(Framing::Length(10)))
    );
}

#[test]
fn refusals() {
    use ResponseError::*;
    let cases: &[(&[u8], ResponseError)] = &[
        // Framing that two parties could read differently.
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
            TransferEncodingWithContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
            TransferEncodingWithContentLength,
        ),
        (
            b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n",
            TransferEncodingWithContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            BadContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
            BadContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5,\r\n\r\n",
            BadContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
            BadContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 0x5\r\n\r\n",
            BadContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 5 5\r\n\r\n",
            BadContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n",
            BadContentLength,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\n",
            BadContentLength,
        ),
        (
            b"HTTP/1.1 304 Not Modified\r\nContent-Length: x\r\n\r\n",
            BadContentLength,
        ),
        (
            b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            TransferEncodingInHttp10,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            BadTransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n",
            BadTransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: ,\r\n\r\n",
            BadTransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked;q=1\r\n\r\n",
            BadTransferEncoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            UnsupportedTransferCoding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
            UnsupportedTransferCoding,
        ),
        // Line endings.
        (
            b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
            BareLineEnding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\n\r\n",
            BareLineEnding,
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\n",
            BareLineEnding,
        ),
        (b"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", BadHeader),
        // The status line.
        (b"HTTP/1.1 99 Low\r\n\r\n", BadStatusLine),
        (b"HTTP/1.1 099 Low\r\n\r\n", BadStatusLine),
        (b"HTTP/1.1 600 High\r\n\r\n", BadStatusLine),
        (b"HTTP/1.1 2000 OK\r\n\r\n", BadStatusLine),
        (b"HTTP/1.1  200 OK\r\n\r\n", BadStatusLine),
        (b"HTTP/1.1 OK\r\n\r\n", BadStatusLine),
        (b"HTTP/1.2 200 OK\r\n\r\n", BadVersion),
        (b"HTTP/2 200\r\n\r\n", BadVersion),
        (b"http/1.1 200 OK\r\n\r\n", BadVersion),
        (b"ICY 200 OK\r\n\r\n", BadVersion),
        // Header fields.
        (b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", BadHeader),
        (b"HTTP/1.1 200 OK\r\nName : x\r\n\r\n", BadHeader),
        (b"HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n", BadHeader),
        (b"HTTP/1.1 200 OK\r\nA: b\0c\r\n\r\n", BadHeader),
    ];
    for (input, error) in cases {
        assert_eq!(
            parse(input),
            Err(Error::BadResponse(*error)),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn every_refusal_is_a_502() {
    let e = parse(b"HTTP/1.1 600 x\r\n\r\n").expect_err("refused");
    assert_eq!(e.status(), 502);
    assert_eq!(e.to_string(), "malformed response: malformed status line");
    assert!(std::error::Error::source(&e).is_some());
}

#[test]
fn partial_until_the_blank_line() {
    let whole = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello";
    let head_len = whole.len() - 5;
    for cut in 0..head_len {
        assert_eq!(parse(&whole[..cut]), Ok(None), "cut at {cut}");
    }
    for cut in head_len..=whole.len() {
        let parsed = parse(&whole[..cut]).expect("valid").expect("complete");
        assert_eq!(parsed.5, head_len, "the body is not the head's");
    }
}

#[test]
fn limits() {
    let tight = ResponseLimits {
        max_status_line: 20,
        max_header_line: 12,
        max_head: 64,
        max_headers: 2,
    };
    let parse = |input: &[u8]| parse_with(input, &tight, Method::Get).map(|s| s.map(|s| s.0));
    let refused = |e| Err(Error::BadResponse(e));
    // The status line: 20 bytes fit, 21 do not, and an endless one is refused
    // before its CRLF comes.
    assert_eq!(parse(b"HTTP/1.1 200 OKOKOKO\r\n\r\n"), Ok(Some(200)));
    assert_eq!(
        parse(b"HTTP/1.1 200 OKOKOKOK\r\n\r\n"),
        refused(ResponseError::StatusLineTooLong)
    );
    assert_eq!(
        parse(b"HTTP/1.1 200 OKOKOKOK"),
        refused(ResponseError::StatusLineTooLong)
    );
    assert_eq!(parse(b"HTTP/1.1 200 OKOKOKO"), Ok(None));
    // A header line, name, colon, space and value: 12 bytes fit, 13 do not.
    assert_eq!(
        parse(b"HTTP/1.1 200 OK\r\nAb: 12345678\r\n\r\n"),
        Ok(Some(200))
    );
    assert_eq!(
        parse(b"HTTP/1.1 200 OK\r\nAb: 123456789\r\n\r\n"),
        refused(ResponseError::HeaderLineTooLong)
    );
    // Two fields fit, three do not.
    assert_eq!(
        parse(b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n"),
        Ok(Some(200))
    );
    assert_eq!(
        parse(b"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"),
        refused(ResponseError::TooManyHeaders)
    );
    // The head: refused once the buffer passes the limit without a blank line,
    // and when a complete head is larger.
    let mut endless = b"HTTP/1.1 200 OK\r\n".to_vec();
    endless.resize(65, b'x');
    assert_eq!(parse(&endless), refused(ResponseError::HeadTooLarge));
    endless.truncate(64);
    assert_eq!(parse(&endless), Ok(None));
    let mut blank_lines = b"\r\n".repeat(30);
    blank_lines.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\n");
    assert_eq!(parse(&blank_lines), refused(ResponseError::HeadTooLarge));
    // A limit above the storage's size is the storage's size.
    let lavish = ResponseLimits {
        max_headers: usize::MAX,
        ..ResponseLimits::default()
    };
    let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..129 {
        many.extend_from_slice(format!("X-{i}: y\r\n").as_bytes());
    }
    many.extend_from_slice(b"\r\n");
    assert_eq!(
        parse_with(&many, &lavish, Method::Get).map(|s| s.map(|s| s.0)),
        refused(ResponseError::TooManyHeaders)
    );
}

#[test]
fn fields_and_reason_borrow_the_input() {
    let input = b"HTTP/1.1 404 Not Found\r\nServer: x\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\n\
                  Content-Length: 3\r\n\r\nabc";
    let mut storage = header_storage();
    let Ok(Status::Complete(head)) =
        parse_response(input, &mut storage, &ResponseLimits::default(), Method::Get)
    else {
        panic!("complete head expected");
    };
    assert_eq!(head.reason, "Not Found");
    assert_eq!(head.header("server"), Some(&b"x"[..]));
    assert_eq!(head.header("missing"), Option::None);
    let cookies: Vec<&[u8]> = head.headers_named("SET-COOKIE").collect();
    assert_eq!(cookies, [&b"a=1"[..], b"b=2"]);
    assert_eq!(head.headers.len(), 4);
    assert_eq!(&input[head.len..], b"abc");
}
