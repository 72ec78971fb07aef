use super::*;

fn status(line: &[u8]) -> (Option<&str>, Status, Option<ReplyCode<'_>>, &[u8]) {
    match parse_line(line) {
        Ok(Reply::Status {
            tag,
            status,
            code,
            text,
        }) => (tag, status, code, text),
        other => panic!("{:?}: {other:?}", String::from_utf8_lossy(line)),
    }
}

#[test]
fn greetings() {
    let (tag, s, code, text) = status(b"* OK [CAPABILITY IMAP4rev1 SASL-IR AUTH=PLAIN] ready");
    assert_eq!((tag, s, text), (None, Status::Ok, &b"ready"[..]));
    let caps = code.and_then(|c| c.capabilities()).expect("capabilities");
    assert_eq!(caps, ["IMAP4rev1", "SASL-IR", "AUTH=PLAIN"]);
    assert!(has_capability(&caps, "auth=plain") && !has_capability(&caps, "STARTTLS"));
    assert_eq!(status(b"* PREAUTH hi").1, Status::PreAuth);
    assert_eq!(status(b"* bye going").1, Status::Bye);
    let (_, s, code, text) = status(b"* OK");
    assert_eq!((s, code, text), (Status::Ok, None, &b""[..]));
}

#[test]
fn tagged_status_with_codes() {
    let (tag, s, code, text) = status(b"a1 NO [UNAVAILABLE] Try later");
    assert_eq!((tag, s, text), (Some("a1"), Status::No, &b"Try later"[..]));
    let code = code.expect("code");
    assert!(code.is("unavailable") && code.arguments.is_empty());
    assert_eq!(code.capabilities(), None);
    let (_, _, code, text) = status(b"x.2 OK [APPENDUID 38505 3955] APPEND completed");
    let code = code.expect("code");
    assert_eq!(
        (code.name, code.arguments),
        ("APPENDUID", &b"38505 3955"[..])
    );
    assert_eq!(text, b"APPEND completed");
    assert_eq!(status(b"t bad").1, Status::Bad);
    assert_eq!(status(b"t OK [ALERT]").2.map(|c| c.name), Some("ALERT"));
}

#[test]
fn continuations_and_data() {
    assert_eq!(parse_line(b"+ "), Ok(Reply::Continuation(b"")));
    assert_eq!(parse_line(b"+"), Ok(Reply::Continuation(b"")));
    assert_eq!(parse_line(b"+ Ready"), Ok(Reply::Continuation(b"Ready")));
    assert_eq!(parse_line(b"* 3 EXISTS"), Ok(Reply::Data(b"3 EXISTS")));
    let caps = b"* CAPABILITY IMAP4rev2 IDLE";
    let Ok(Reply::Data(data)) = parse_line(caps) else {
        panic!("data")
    };
    assert_eq!(capability_data(data), Some(vec!["IMAP4rev2", "IDLE"]));
    assert_eq!(capability_data(b"CAPABILITY"), Some(vec![]));
    assert_eq!(capability_data(b"CAPABILITYX Y"), None);
    assert_eq!(capability_data(b"3 EXISTS"), None);
}

#[test]
fn what_is_not_a_response() {
    for (line, error) in [
        (&b""[..], ReplyError::Malformed),
        (b"*", ReplyError::Malformed),
        (b"a1", ReplyError::Malformed),
        (b" OK x", ReplyError::BadTag),
        (b"a(1 OK x", ReplyError::BadTag),
        (b"+x OK", ReplyError::BadTag),
        (b"a1 3 EXISTS", ReplyError::NotStatus),
        (b"a1 BYE x", ReplyError::NotStatus),
        (b"a1 PREAUTH", ReplyError::NotStatus),
        (b"* OK [CAPABILITY IMAP4rev1", ReplyError::BadCode),
        (b"a1 OK [] x", ReplyError::BadCode),
        (b"a1 OK [\x01] x", ReplyError::BadCode),
    ] {
        assert_eq!(
            parse_line(line),
            Err(error),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn literals_at_the_end_of_a_line() {
    assert_eq!(literal_at_end(b"* 1 FETCH (BODY[] {310}"), Some(310));
    assert_eq!(literal_at_end(b"* 1 FETCH (BODY[] {0}"), Some(0));
    assert_eq!(literal_at_end(b"* 1 FETCH (BODY[] {12+}"), Some(12));
    assert_eq!(literal_at_end(b"a OK done"), None);
    assert_eq!(literal_at_end(b"a OK {x}"), None);
    assert_eq!(literal_at_end(b"a OK {}"), None);
    assert_eq!(literal_at_end(b"}"), None);
    assert_eq!(
        literal_at_end(b"* 1 FETCH (BODY[] {99999999999999999999999}"),
        Some(u64::MAX)
    );
}

/// Every line, whatever its bytes, is parsed or refused without a panic, and a
/// parse keeps to the line.
#[test]
fn arbitrary_lines() {
    crate::fuzzing::reply_line(b"");
    let mut rng = fastrand::Rng::with_seed(52);
    let pieces: [&[u8]; 10] = [
        b"* ",
        b"a1 ",
        b"OK ",
        b"[",
        b"]",
        b"CAPABILITY ",
        b"{12}",
        b"+ ",
        b"NO",
        b" ",
    ];
    for _ in 0..20_000 {
        let mut line = Vec::new();
        for _ in 0..rng.usize(0..8) {
            match rng.u8(0..4) {
                0 => line.push(rng.u8(..)),
                _ => line.extend_from_slice(pieces[rng.usize(0..pieces.len())]),
            }
        }
        crate::fuzzing::reply_line(&line);
    }
}
