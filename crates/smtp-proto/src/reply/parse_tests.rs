//! The client-side reply parser ([`super::parse`]).

use stoa_mail_proto::Status;

use super::parse::{ParsedReply, ReplyError, ReplyLimits, parse_reply};
use super::{EnhancedStatus, Reply};

fn parse(input: &[u8]) -> Result<Option<ParsedReply<'_>>, ReplyError> {
    parse_with(input, &ReplyLimits::default())
}

fn parse_with<'b>(
    input: &'b [u8],
    limits: &ReplyLimits,
) -> Result<Option<ParsedReply<'b>>, ReplyError> {
    match parse_reply(input, limits)? {
        Status::Complete(reply) => Ok(Some(reply)),
        Status::Partial => Ok(None),
    }
}

fn texts<'b>(reply: &ParsedReply<'b>) -> Vec<&'b str> {
    reply
        .lines()
        .map(|l| std::str::from_utf8(l).expect("test text is UTF-8"))
        .collect()
}

const fn st(class: u8, subject: u16, detail: u16) -> Option<EnhancedStatus> {
    Some(EnhancedStatus::new(class, subject, detail))
}

#[test]
fn valid_replies() {
    type Case<'a> = (&'a [u8], u16, Option<EnhancedStatus>, &'a [&'a str], usize);
    let cases: &[Case<'_>] = &[
        (
            b"220 mx.example ESMTP\r\n",
            220,
            None,
            &["mx.example ESMTP"],
            22,
        ),
        (b"250 2.1.0 Ok\r\n", 250, st(2, 1, 0), &["2.1.0 Ok"], 14),
        (
            b"550 5.1.1 <a@b>: User unknown\r\n",
            550,
            st(5, 1, 1),
            &["5.1.1 <a@b>: User unknown"],
            31,
        ),
        // No text at all, and a space with no text: both the last line.
        (b"250\r\n", 250, None, &[""], 5),
        (b"354 \r\n", 354, None, &[""], 6),
        (
            b"250-mx.example Hello c\r\n250-PIPELINING\r\n250 8BITMIME\r\n",
            250,
            None,
            &["mx.example Hello c", "PIPELINING", "8BITMIME"],
            54,
        ),
        (
            b"452-4.5.3 a\r\n452 4.5.3 b\r\nNEXT",
            452,
            st(4, 5, 3),
            &["4.5.3 a", "4.5.3 b"],
            26,
        ),
        // An empty continuation line.
        (b"250-\r\n250 x\r\n", 250, None, &["", "x"], 13),
        // A status of another class than the code is text, not a status.
        (b"550 2.0.0 odd\r\n", 550, None, &["2.0.0 odd"], 15),
        // Three digits at most per part; a status needs a space or the end after it.
        (b"421 4.4.2\r\n", 421, st(4, 4, 2), &["4.4.2"], 11),
        (b"421 4.4.1000 x\r\n", 421, None, &["4.4.1000 x"], 16),
        (b"421 4.4.2x y\r\n", 421, None, &["4.4.2x y"], 14),
        (b"554 5.7.11 x\r\n", 554, st(5, 7, 11), &["5.7.11 x"], 14),
        // TAB and 8-bit text pass.
        (b"250 a\tb \xc3\xa9\r\n", 250, None, &["a\tb \u{e9}"], 12),
        (b"559 x\r\n", 559, None, &["x"], 7),
        (b"200 x\r\n", 200, None, &["x"], 7),
    ];
    for (input, code, status, lines, consumed) in cases {
        let shown = String::from_utf8_lossy(input);
        let reply = parse(input).expect(&shown).expect(&shown);
        assert_eq!(reply.code(), *code, "{shown}");
        assert_eq!(reply.status(), *status, "{shown}");
        assert_eq!(texts(&reply), *lines, "{shown}");
        assert_eq!(reply.line_count(), lines.len(), "{shown}");
        assert_eq!(reply.consumed(), *consumed, "{shown}");
        assert_eq!(reply.as_bytes(), &input[..*consumed], "{shown}");
    }
}

#[test]
fn refusals() {
    let cases: &[(&[u8], ReplyError)] = &[
        (b"250 ok\n", ReplyError::BareLf),
        (b"250-a\r\n250 b\n", ReplyError::BareLf),
        (b"\n", ReplyError::BareLf),
        (b"\r\n", ReplyError::BadCode),
        (b"25\r\n", ReplyError::BadCode),
        (b"2x0 ok\r\n", ReplyError::BadCode),
        (b"150 ok\r\n", ReplyError::BadCode),
        (b"650 ok\r\n", ReplyError::BadCode),
        (b"260 ok\r\n", ReplyError::BadCode),
        (b"599 ok\r\n", ReplyError::BadCode),
        (b" 250 ok\r\n", ReplyError::BadCode),
        (b"+OK pop3\r\n", ReplyError::BadCode),
        (b"250-a\r\nxyz\r\n", ReplyError::BadCode),
        (b"2500 ok\r\n", ReplyError::BadSeparator),
        (b"250_ok\r\n", ReplyError::BadSeparator),
        (b"250\tok\r\n", ReplyError::BadSeparator),
        (b"250-a\r\n251 b\r\n", ReplyError::CodeMismatch),
        (b"250-a\r\n550 b\r\n", ReplyError::CodeMismatch),
        (b"250 a\rb\r\n", ReplyError::BadCharacter),
        (b"250 a\0b\r\n", ReplyError::BadCharacter),
        (b"250 a\x7f\r\n", ReplyError::BadCharacter),
        (b"250-\x1b[31m\r\n250 x\r\n", ReplyError::BadCharacter),
    ];
    for (input, error) in cases {
        assert_eq!(
            parse(input).map(|r| r.map(|r| r.code())),
            Err(*error),
            "{:?}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn partial_until_the_last_line_ends() {
    let whole = b"250-mx\r\n250-SIZE 100\r\n250 8BITMIME\r\n";
    for cut in 0..whole.len() {
        assert_eq!(parse(&whole[..cut]), Ok(None), "cut at {cut}");
    }
    assert!(parse(whole).expect("valid").is_some());
    // A garbled line is refused as soon as it ends, not when the reply would.
    assert_eq!(parse(b"250-mx\r\nbogus\r\n250-"), Err(ReplyError::BadCode));
}

#[test]
fn limits() {
    let tight = ReplyLimits {
        max_line: 10,
        max_lines: 3,
    };
    // The line limit counts the CRLF: 10 bytes fit, 11 do not.
    assert!(parse_with(b"250 1234\r\n", &tight).is_ok_and(|r| r.is_some()));
    assert_eq!(
        parse_with(b"250 12345\r\n", &tight),
        Err(ReplyError::LineTooLong)
    );
    // Refused before the line ends: the caller never buffers more than the limit.
    assert_eq!(
        parse_with(b"250 123456", &tight),
        Err(ReplyError::LineTooLong)
    );
    assert_eq!(parse_with(b"250 12345", &tight), Ok(None));
    let three = b"250-a\r\n250-b\r\n250 c\r\n";
    assert_eq!(
        parse_with(three, &tight).map(|r| r.map(|r| r.line_count())),
        Ok(Some(3))
    );
    // A third line that is not the last: refused without waiting for a fourth.
    assert_eq!(
        parse_with(b"250-a\r\n250-b\r\n250-c\r\n", &tight),
        Err(ReplyError::TooManyLines)
    );
    assert_eq!(parse_with(b"250-a\r\n250-b\r\n250-c", &tight), Ok(None));
    // Every line at the limit, all lines: the most a caller buffers.
    let mut longest = Vec::new();
    for last in [false, false, true] {
        longest.extend_from_slice(if last { b"250 1234" } else { b"250-1234" });
        longest.extend_from_slice(b"\r\n");
    }
    let reply = parse_with(&longest, &tight).expect("valid").expect("whole");
    assert_eq!(reply.consumed(), tight.max_line * tight.max_lines);
}

#[test]
fn pipelined_replies_come_one_at_a_time() {
    let input = b"250 2.1.0 Ok\r\n250 2.1.5 Ok\r\n354 End data\r\n";
    let mut rest = &input[..];
    let mut seen = Vec::new();
    while let Some(reply) = parse(rest).expect("valid") {
        seen.push((reply.code(), reply.status()));
        rest = &rest[reply.consumed()..];
    }
    assert!(rest.is_empty());
    assert_eq!(seen, [(250, st(2, 1, 0)), (250, st(2, 1, 5)), (354, None)]);
}

#[test]
fn ehlo_extensions() {
    let input = b"250-mx.example Hello SIZE\r\n250-PIPELINING\r\n250-SIZE 10240000\r\n\
                  250-AUTH PLAIN LOGIN\r\n250 8bitmime\r\n";
    let reply = parse(input).expect("valid").expect("whole");
    assert_eq!(reply.extension("size"), Some(&b"10240000"[..]));
    assert_eq!(reply.extension("PIPELINING"), Some(&b""[..]));
    assert_eq!(reply.extension("8BITMIME"), Some(&b""[..]));
    assert_eq!(reply.extension("AUTH"), Some(&b"PLAIN LOGIN"[..]));
    // The greeting line is not a keyword line, and keywords match whole.
    assert_eq!(reply.extension("Hello"), None);
    assert_eq!(reply.extension("STARTTLS"), None);
    assert_eq!(reply.extension("SIZ"), None);
    let helo = parse(b"250 mx.example\r\n").expect("valid").expect("whole");
    assert_eq!(helo.extension("mx.example"), None);
}

#[test]
fn what_the_server_encodes_the_client_reads() {
    let replies = [
        Reply::new(250, EnhancedStatus::new(2, 1, 0), "Ok"),
        Reply::plain(354, "End data with <CR><LF>.<CR><LF>"),
        Reply::new(214, EnhancedStatus::new(2, 0, 0), "a")
            .with_line("b")
            .with_line("c"),
        Reply::plain(334, ""),
        Reply::user_unknown(&"<joe@example.com>"),
        Reply::queued(&"x\r\n250 forged"),
    ];
    for sent in replies {
        let wire = sent.to_bytes();
        let got = parse(&wire).expect("valid").expect("whole");
        assert_eq!(got.code(), sent.code(), "{sent}");
        assert_eq!(got.status(), sent.status(), "{sent}");
        assert_eq!(got.line_count(), sent.lines().count(), "{sent}");
        assert_eq!(got.consumed(), wire.len(), "{sent}");
    }
}
