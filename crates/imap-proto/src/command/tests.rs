use super::*;
use crate::date::Date;
use crate::section::SectionText;
use crate::sequence::SeqNumber::{Largest, Value};
use crate::{Error, Rejection};

fn kind(input: &str) -> CommandKind {
    match parse_command(input.as_bytes()) {
        Ok(command) => command.kind,
        Err(rejection) => panic!("{input:?}: {rejection:?}"),
    }
}

fn refusal(input: &[u8]) -> Rejection {
    match parse_command(input) {
        Ok(command) => panic!("{input:?} parsed as {command:?}"),
        Err(rejection) => rejection,
    }
}

fn set(ranges: &[(u32, u32)]) -> SequenceSet {
    SequenceSet::Ranges(ranges.iter().map(|&(a, b)| (Value(a), Value(b))).collect())
}

#[test]
fn simple_commands() {
    let cases: &[(&str, CommandKind)] = &[
        ("a CAPABILITY", CommandKind::Capability),
        ("a noop", CommandKind::Noop),
        ("a LogOut", CommandKind::Logout),
        ("a STARTTLS", CommandKind::StartTls),
        ("a NAMESPACE", CommandKind::Namespace),
        ("a IDLE", CommandKind::Idle),
        ("a CHECK", CommandKind::Check),
        ("a CLOSE", CommandKind::Close),
        ("a UNSELECT", CommandKind::Unselect),
        ("a EXPUNGE", CommandKind::Expunge),
        ("a ID NIL", CommandKind::Id(None)),
        ("a ID ()", CommandKind::Id(Some(vec![]))),
        (
            "a ID (\"name\" \"mutt\" \"os\" NIL)",
            CommandKind::Id(Some(vec![
                ("name".into(), Some("mutt".into())),
                ("os".into(), None),
            ])),
        ),
        (
            "a ENABLE condstore UTF8=ACCEPT",
            CommandKind::Enable(vec!["CONDSTORE".into(), "UTF8=ACCEPT".into()]),
        ),
        (
            "a LOGIN joe {6+}\r\nsecret",
            CommandKind::Login {
                username: "joe".into(),
                password: Secret("secret".into()),
            },
        ),
        (
            "a AUTHENTICATE plain",
            CommandKind::Authenticate {
                mechanism: "PLAIN".into(),
                initial_response: None,
            },
        ),
        (
            "a AUTHENTICATE PLAIN =",
            CommandKind::Authenticate {
                mechanism: "PLAIN".into(),
                initial_response: Some(Secret(vec![])),
            },
        ),
        (
            "a AUTHENTICATE PLAIN AGpvZQBzZWNyZXQ=",
            CommandKind::Authenticate {
                mechanism: "PLAIN".into(),
                initial_response: Some(Secret(b"\0joe\0secret".to_vec())),
            },
        ),
        (
            "a COMPRESS deflate",
            CommandKind::Compress("DEFLATE".into()),
        ),
        ("a DELETE \"a b\"", CommandKind::Delete(b"a b".to_vec())),
        (
            "a RENAME old {3}\r\nnew",
            CommandKind::Rename {
                from: b"old".to_vec(),
                to: b"new".to_vec(),
            },
        ),
        ("a SUBSCRIBE x]", CommandKind::Subscribe(b"x]".to_vec())),
        ("a UNSUBSCRIBE x", CommandKind::Unsubscribe(b"x".to_vec())),
        (
            "a LSUB \"\" %/*",
            CommandKind::Lsub {
                reference: vec![],
                pattern: b"%/*".to_vec(),
            },
        ),
        (
            "a CREATE Sent (USE (\\Sent \\Archive))",
            CommandKind::Create {
                mailbox: b"Sent".to_vec(),
                special_use: vec!["\\Sent".into(), "\\Archive".into()],
            },
        ),
        (
            "a STATUS INBOX (MESSAGES uidnext UIDVALIDITY UNSEEN DELETED SIZE RECENT HIGHESTMODSEQ APPENDLIMIT)",
            CommandKind::Status {
                mailbox: b"INBOX".to_vec(),
                items: StatusItem::ALL.to_vec(),
            },
        ),
        (
            "a COPY 1:3,5 Trash",
            CommandKind::Copy {
                uid: false,
                set: set(&[(1, 3), (5, 5)]),
                mailbox: b"Trash".to_vec(),
            },
        ),
        (
            "a uid move $ Trash",
            CommandKind::Move {
                uid: true,
                set: SequenceSet::Saved,
                mailbox: b"Trash".to_vec(),
            },
        ),
        (
            "a UID EXPUNGE 4:*",
            CommandKind::UidExpunge(SequenceSet::Ranges(vec![(Value(4), Largest)])),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(&kind(input), expected, "{input:?}");
    }
}

#[test]
fn select_and_list() {
    assert_eq!(
        kind("a SELECT inbox (CONDSTORE)"),
        CommandKind::Select(Select {
            mailbox: b"inbox".to_vec(),
            condstore: true,
            qresync: None,
        })
    );
    let CommandKind::Examine(select) = kind("a EXAMINE x (QRESYNC (1 2 (1:2 4:5)))") else {
        panic!("EXAMINE");
    };
    assert_eq!(
        select.qresync,
        Some(QResync {
            uid_validity: 1,
            modseq: 2,
            known_uids: None,
            seq_match: Some((set(&[(1, 2)]), set(&[(4, 5)]))),
        })
    );
    let CommandKind::Select(select) = kind("a SELECT x (QRESYNC (1 2 1:9))") else {
        panic!("SELECT");
    };
    assert_eq!(
        select.qresync.and_then(|q| q.known_uids),
        Some(set(&[(1, 9)]))
    );

    assert_eq!(
        kind("a LIST \"\" *"),
        CommandKind::List(List {
            reference: vec![],
            patterns: vec![b"*".to_vec()],
            ..List::default()
        })
    );
    let CommandKind::List(list) = kind(
        "a LIST (SUBSCRIBED REMOTE SPECIAL-USE RECURSIVEMATCH) ~ (a% \"b c\") RETURN (SUBSCRIBED CHILDREN SPECIAL-USE STATUS (MESSAGES SIZE))",
    ) else {
        panic!("LIST");
    };
    assert_eq!(list.reference, b"~");
    assert_eq!(list.patterns, vec![b"a%".to_vec(), b"b c".to_vec()]);
    assert_eq!(
        list.selection,
        ListSelection {
            subscribed: true,
            remote: true,
            recursive_match: true,
            special_use: true,
        }
    );
    assert_eq!(
        list.ret,
        ListReturn {
            subscribed: true,
            children: true,
            special_use: true,
            status: Some(vec![StatusItem::Messages, StatusItem::Size]),
        }
    );
    assert!(matches!(kind("a LIST () \"\" x"), CommandKind::List(_)));
}

#[test]
fn append() {
    assert_eq!(
        kind("a APPEND Sent (\\Seen $Label1) \"17-Jul-1996 02:44:25 -0700\" {5}\r\nhello"),
        CommandKind::Append(Append {
            mailbox: b"Sent".to_vec(),
            flags: vec![Flag::Seen, Flag::Keyword("$Label1".into())],
            date: Some(837_596_665),
            message: b"hello".to_vec(),
            binary: false,
        })
    );
    assert_eq!(
        kind("a APPEND x () ~{3+}\r\na\0b"),
        CommandKind::Append(Append {
            mailbox: b"x".to_vec(),
            flags: vec![],
            date: None,
            message: b"a\0b".to_vec(),
            binary: true,
        })
    );
    assert_eq!(
        refusal(b"a APPEND x {3}\r\na\0b").error,
        Error::Syntax("NUL in literal")
    );
    assert_eq!(
        refusal(b"a APPEND x \"bad date\" {1}\r\na").error,
        Error::Syntax("Invalid date-time")
    );
    assert_eq!(
        refusal(b"a APPEND x (\\Recent) {1}\r\na").error,
        Error::Syntax("\\Recent cannot be set")
    );
    assert!(parse_command(b"a APPEND x \"msg\"").is_err());
    assert_eq!(
        refusal(b"a APPEND x msg").error,
        Error::Syntax("Expected a literal")
    );
}

#[test]
fn search() {
    let CommandKind::Search(search) = kind(
        "a UID SEARCH RETURN () CHARSET utf-8 1:5,* UID 2 NOT (SEEN FLAGGED) OR ANSWERED DRAFT \
         HEADER Message-ID \"<x@y>\" ON 1-Jan-2020 SENTSINCE \"2-Feb-2021\" MODSEQ 5 NEW OLD RECENT",
    ) else {
        panic!("SEARCH");
    };
    assert!(search.uid);
    assert_eq!(search.charset.as_deref(), Some("UTF-8"));
    assert_eq!(search.ret, Some(vec![]));
    let expected = SearchKey::And(vec![
        SearchKey::Sequence(SequenceSet::Ranges(vec![
            (Value(1), Value(5)),
            (Largest, Largest),
        ])),
        SearchKey::Uid(set(&[(2, 2)])),
        SearchKey::Not(Box::new(SearchKey::And(vec![
            SearchKey::Seen,
            SearchKey::Flagged,
        ]))),
        SearchKey::Or(Box::new(SearchKey::Answered), Box::new(SearchKey::Draft)),
        SearchKey::Header("Message-ID".into(), b"<x@y>".to_vec()),
        SearchKey::On(Date::new(2020, 1, 1).expect("date")),
        SearchKey::SentSince(Date::new(2021, 2, 2).expect("date")),
        SearchKey::ModSeq {
            entry: None,
            modseq: 5,
        },
        SearchKey::New,
        SearchKey::Old,
        SearchKey::Recent,
    ]);
    assert_eq!(search.key, expected);
    let CommandKind::Search(search) = kind("a SEARCH (UNSEEN)") else {
        panic!("SEARCH");
    };
    assert_eq!(
        (search.key, search.ret, search.uid),
        (SearchKey::Unseen, None, false)
    );
    for key in [
        "a SEARCH",
        "a SEARCH BOGUS",
        "a SEARCH ON 31-Feb-2020",
        "a SEARCH KEYWORD \\Seen",
        "a SEARCH OR SEEN",
        "a SEARCH RETURN (NONE) ALL",
        "a SEARCH 0",
        "a SEARCH LARGER x",
    ] {
        assert!(parse_command(key.as_bytes()).is_err(), "{key}");
    }
}

#[test]
fn nesting_is_bounded() {
    let deep = format!("a SEARCH {}ALL{}", "(".repeat(40), ")".repeat(40));
    assert_eq!(refusal(deep.as_bytes()).error, Error::TooDeep);
    let nots = format!("a SEARCH {}ALL", "NOT ".repeat(40));
    assert_eq!(refusal(nots.as_bytes()).error, Error::TooDeep);
    let ok = format!("a SEARCH {}ALL{}", "(".repeat(10), ")".repeat(10));
    assert_eq!(kind(&ok), kind("a SEARCH ALL"));
    // Many keys side by side are not nesting.
    let wide = format!("a SEARCH {}", vec!["SEEN"; 500].join(" "));
    assert!(parse_command(wide.as_bytes()).is_ok());
}

#[test]
fn fetch() {
    let CommandKind::Fetch(fetch) = kind("a FETCH 1:* FAST") else {
        panic!("FETCH");
    };
    use FetchAttribute::*;
    assert_eq!(fetch.attributes, vec![Flags, InternalDate, Rfc822Size]);
    let CommandKind::Fetch(fetch) = kind("a UID FETCH 1 (FLAGS) (CHANGEDSINCE 7 VANISHED)") else {
        panic!("FETCH");
    };
    assert_eq!(fetch.attributes, vec![Flags, Uid, ModSeq]);
    assert_eq!((fetch.changed_since, fetch.vanished), (Some(7), true));
    let CommandKind::Fetch(fetch) = kind(
        "a FETCH 2 (body[] BODY.PEEK[1.2.3] BODY[HEADER.FIELDS.NOT (X-A \"X-B\")]<5.10> BODY[3.TEXT] \
         BINARY[] BINARY.PEEK[1.2]<0.5> BINARY.SIZE[4] RFC822 RFC822.TEXT RFC822.HEADER BODY \
         BODYSTRUCTURE ENVELOPE MODSEQ UID INTERNALDATE)",
    ) else {
        panic!("FETCH");
    };
    assert_eq!(
        fetch.attributes,
        vec![
            BodySection {
                section: Section::default(),
                partial: None,
                peek: false
            },
            BodySection {
                section: Section {
                    part: vec![1, 2, 3],
                    text: SectionText::Full
                },
                partial: None,
                peek: true
            },
            BodySection {
                section: Section {
                    part: vec![],
                    text: SectionText::HeaderFields {
                        names: vec!["X-A".into(), "X-B".into()],
                        not: true
                    }
                },
                partial: Some((5, 10)),
                peek: false
            },
            BodySection {
                section: Section {
                    part: vec![3],
                    text: SectionText::Text
                },
                partial: None,
                peek: false
            },
            Binary {
                part: vec![],
                partial: None,
                peek: false
            },
            Binary {
                part: vec![1, 2],
                partial: Some((0, 5)),
                peek: true
            },
            BinarySize(vec![4]),
            Rfc822,
            Rfc822Text,
            Rfc822Header,
            Body,
            BodyStructure,
            Envelope,
            ModSeq,
            Uid,
            InternalDate,
        ]
    );
    assert!(fetch.attributes[0].sets_seen() && !fetch.attributes[1].sets_seen());
    for bad in [
        "a FETCH 1 (FLAGS",
        "a FETCH 1 BODY[MIME]",
        "a FETCH 1 BODY[0]",
        "a FETCH 1 BODY[1.0]",
        "a FETCH 1 BODY[1.]",
        "a FETCH 1 BODY[.TEXT]",
        "a FETCH 1 BODY[HEADER.FIELDS ()]",
        "a FETCH 1 BODY[]<1.0>",
        "a FETCH 1 BODY.PEEK",
        "a FETCH 1 FLAGS (VANISHED)",
        "a UID FETCH 1 FLAGS (VANISHED)",
        "a FETCH 1 FLAGS (CHANGEDSINCE 9223372036854775808)",
        "a FETCH 1:4294967296 FLAGS",
        "a FETCH 1, FLAGS",
        "a FETCH 1 XYZ",
    ] {
        assert!(parse_command(bad.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn store() {
    assert_eq!(
        kind("a UID STORE 1:2 (UNCHANGEDSINCE 9) -FLAGS.SILENT \\Deleted foo"),
        CommandKind::Store(Store {
            uid: true,
            set: set(&[(1, 2)]),
            unchanged_since: Some(9),
            mode: StoreMode::Remove,
            silent: true,
            flags: vec![Flag::Deleted, Flag::Keyword("foo".into())],
        })
    );
    assert_eq!(
        kind("a STORE 1 FLAGS ()"),
        CommandKind::Store(Store {
            uid: false,
            set: set(&[(1, 1)]),
            unchanged_since: None,
            mode: StoreMode::Replace,
            silent: false,
            flags: vec![],
        })
    );
    for bad in [
        "a STORE 1 FLAGS (\\Bogus)",
        "a STORE 1 FLAGS \\Recent",
        "a STORE 1 FLAGZ (\\Seen)",
        "a STORE 1 +FLAGS",
        "a STORE 1 (FOO 1) FLAGS ()",
    ] {
        assert!(parse_command(bad.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn refusals() {
    assert_eq!(refusal(b"").tag, None);
    assert_eq!(refusal(b"+a NOOP").error, Error::BadTag);
    assert_eq!(refusal(b"* NOOP").tag, None);
    let r = refusal(b"a1 FOO");
    assert_eq!(
        (r.tag.as_deref(), r.error),
        (Some("a1"), Error::UnknownCommand)
    );
    assert_eq!(refusal(b"a1").error, Error::Syntax("Expected a space"));
    assert_eq!(
        refusal(b"a NOOP extra").error,
        Error::Syntax("Unexpected characters at end of command")
    );
    assert_eq!(refusal(b"a LOGIN joe \"pa\xffss\"").error, Error::NotUtf8);
    assert_eq!(
        refusal(b"a LOGIN joe {10}\r\nshort").error,
        Error::Syntax("Literal shorter than announced")
    );
    assert!(parse_command(b"a LOGIN \"unterminated").is_err());
    assert!(parse_command(b"a LOGIN \"a\\b\" c").is_err());
    assert!(parse_command(b"a LIST (RECURSIVEMATCH) \"\" *").is_err());
    assert!(parse_command(b"a UID NOOP").is_err());
    assert!(parse_command(b"a ENABLE").is_err());
    assert!(parse_command(b"a AUTHENTICATE PLAIN !!").is_err());
    assert!(parse_command(b"a AUTHENTICATE PLAIN am9").is_err());
    assert!(parse_command(b"a  NOOP").is_err());
    let many = format!("a ID ({})", vec!["\"k\" \"v\""; 31].join(" "));
    assert!(parse_command(many.as_bytes()).is_err());
}

#[test]
fn flags() {
    assert_eq!(Flag::parse(b"\\SEEN"), Some(Flag::Seen));
    assert_eq!(Flag::parse(b"\\recent"), Some(Flag::Recent));
    assert_eq!(Flag::parse(b"$Junk"), Some(Flag::Keyword("$Junk".into())));
    for bad in [&b"\\Foo"[..], b"", b"a(b", b"a]", b"\\", b"a b"] {
        assert_eq!(Flag::parse(bad), None, "{bad:?}");
    }
    assert_eq!(Flag::Draft.as_str(), "\\Draft");
}

#[test]
fn names() {
    assert_eq!(kind("a UID FETCH 1 UID").name(), "UID FETCH");
    assert_eq!(kind("a STORE 1 FLAGS ()").name(), "STORE");
    assert_eq!(kind("a UID COPY 1 x").name(), "UID COPY");
}

#[test]
fn lines_that_are_not_commands() {
    let ok = |input: &[u8]| match auth_response(input, 100) {
        Line::Complete { result, consumed } => (result, consumed),
        Line::Partial => panic!("partial"),
    };
    assert_eq!(ok(b"am9l\r\nx"), (Ok(b"joe".to_vec()), 6));
    assert_eq!(ok(b"\r\n"), (Ok(vec![]), 2));
    assert_eq!(ok(b"*\r\n"), (Err(Error::AuthCancelled), 3));
    assert_eq!(ok(b"am9\r\n"), (Err(Error::BadSaslResponse), 5));
    assert_eq!(ok(b"am9l\n"), (Err(Error::BareLf), 5));
    assert_eq!(ok(&[b'a'; 200]).0, Err(Error::LineTooLong));
    assert_eq!(auth_response(b"am9l", 100), Line::Partial);
    assert_eq!(
        idle_done(b"done\r\n", 100),
        Line::Complete {
            result: Ok(()),
            consumed: 6
        }
    );
    assert_eq!(
        idle_done(b"a NOOP\r\n", 100),
        Line::Complete {
            result: Err(Error::ExpectedDone),
            consumed: 8
        }
    );
}

// ---- framing ----

fn limits() -> Limits {
    Limits {
        max_line: 40,
        max_literal: 100,
        max_command: 300,
        literal_minus: false,
    }
}

/// Feeds `input` whole, drains what each step consumes; returns the events.
fn events(reader: &mut CommandReader, buffer: &mut Vec<u8>) -> Vec<Event> {
    let mut out = Vec::new();
    loop {
        let step = reader.next(buffer);
        assert!(step.consumed <= buffer.len());
        buffer.drain(..step.consumed);
        let stop = matches!(step.event, Event::NeedMore | Event::Continue)
            || matches!(&step.event, Event::Rejected(r) if r.is_fatal());
        out.push(step.event);
        if stop {
            return out;
        }
    }
}

fn tags(events: &[Event]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e {
            Event::Command(c) => c.tag.clone(),
            Event::NeedMore => "more".into(),
            Event::Continue => "+".into(),
            Event::Rejected(r) => format!("bad {}", r.tag.as_deref().unwrap_or("*")),
        })
        .collect()
}

#[test]
fn framing_lines() {
    let mut reader = CommandReader::new(limits());
    let mut buf = b"a NOOP\r\nb NO".to_vec();
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["a", "more"]);
    assert!(reader.in_command());
    buf.extend_from_slice(b"OP\r\n");
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["b", "more"]);
    assert!(buf.is_empty() && !reader.in_command());
}

#[test]
fn synchronizing_literals_are_acknowledged_once() {
    let mut reader = CommandReader::new(limits());
    let mut buf = b"a LOGIN {3}\r\n".to_vec();
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["+"]);
    // Called again with nothing new: no second continuation.
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["more"]);
    buf.extend_from_slice(b"jo");
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["more"]);
    buf.extend_from_slice(b"e {6}\r\n");
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["+"]);
    buf.extend_from_slice(b"secret\r\n");
    let events = events(&mut reader, &mut buf);
    assert_eq!(
        events[0],
        Event::Command(Command {
            tag: "a".into(),
            kind: CommandKind::Login {
                username: "joe".into(),
                password: Secret("secret".into())
            }
        })
    );
    // Data sent without waiting: no continuation; {0} waits for one.
    let mut buf = b"b LOGIN {3}\r\njoe {0}\r\n".to_vec();
    assert_eq!(tags(&events_of(&mut reader, &mut buf)), ["+"]);
    buf.extend_from_slice(b"\r\n");
    assert!(matches!(
        &events_of(&mut reader, &mut buf)[0],
        Event::Command(Command { kind: CommandKind::Login { password, .. }, .. }) if password.expose().is_empty()
    ));
    // Non-synchronizing: never.
    let mut buf = b"c LOGIN {3+}\r\n".to_vec();
    assert_eq!(tags(&events_of(&mut reader, &mut buf)), ["more"]);
    buf.extend_from_slice(b"joe x\r\n");
    assert_eq!(tags(&events_of(&mut reader, &mut buf)), ["c", "more"]);
}

fn events_of(reader: &mut CommandReader, buffer: &mut Vec<u8>) -> Vec<Event> {
    events(reader, buffer)
}

#[test]
fn literals_over_the_limit() {
    let mut reader = CommandReader::new(limits());
    // Synchronizing: refused before the data, the session goes on.
    let mut buf = b"a APPEND x {101}\r\nb NOOP\r\n".to_vec();
    let evs = events(&mut reader, &mut buf);
    assert_eq!(tags(&evs), ["bad a", "b", "more"]);
    let Event::Rejected(r) = &evs[0] else {
        panic!("rejected")
    };
    assert!(!r.is_fatal());
    let mut out = Vec::new();
    r.write_response(&mut out);
    assert_eq!(out, b"a NO [TOOBIG] Literal too large\r\n");
    // Over the command limit with literals that each fit.
    let mut buf = b"a LOGIN {100}\r\n".to_vec();
    buf.extend_from_slice(&[b'x'; 100]);
    buf.extend_from_slice(b" {100}\r\n");
    buf.extend_from_slice(&[b'x'; 100]);
    buf.extend_from_slice(b" {100}\r\nb NOOP\r\n");
    let evs = events(&mut reader, &mut buf);
    assert_eq!(tags(&evs), ["bad a", "b", "more"]);
    assert!(matches!(&evs[0], Event::Rejected(r) if r.error == Error::CommandTooLong));
    // Non-synchronizing: fatal.
    let mut buf = b"a APPEND x {101+}\r\nxxxx".to_vec();
    let evs = events(&mut reader, &mut buf);
    let Event::Rejected(r) = &evs[0] else {
        panic!("rejected")
    };
    assert!(r.is_fatal() && buf.is_empty());
    let mut out = Vec::new();
    r.write_response(&mut out);
    assert_eq!(
        out,
        b"a BAD [TOOBIG] Literal too large\r\n* BYE Literal too large\r\n"
    );
    // Everything after is dropped.
    buf.extend_from_slice(b"b NOOP\r\n");
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["more"]);
    assert!(buf.is_empty());
}

#[test]
fn literal_minus() {
    let limits = Limits {
        max_literal: 10_000,
        max_command: 20_000,
        literal_minus: true,
        ..limits()
    };
    let mut reader = CommandReader::new(limits);
    let mut buf = b"a APPEND x {4096+}\r\n".to_vec();
    buf.extend_from_slice(&[b'x'; 4096]);
    buf.extend_from_slice(b"\r\n");
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["a", "more"]);
    let mut buf = b"a APPEND x {4097+}\r\n".to_vec();
    let evs = events(&mut reader, &mut buf);
    assert!(matches!(&evs[0], Event::Rejected(r) if r.is_fatal()));
    let mut reader = CommandReader::new(limits);
    let mut buf = b"a APPEND x {4097}\r\n".to_vec();
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["+"]);
}

#[test]
fn long_lines_are_discarded_without_buffering() {
    let mut reader = CommandReader::new(limits());
    let mut buf = b"tag1 LOGIN ".to_vec();
    buf.extend_from_slice(&[b'x'; 50]);
    let evs = events(&mut reader, &mut buf);
    let Event::Rejected(r) = &evs[0] else {
        panic!("rejected")
    };
    assert_eq!(
        (r.tag.as_deref(), &r.error),
        (Some("tag1"), &Error::LineTooLong)
    );
    assert!(buf.is_empty(), "the line is dropped as it comes");
    buf.extend_from_slice(&[b'y'; 500]);
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["more"]);
    assert!(buf.is_empty());
    // The line ends by announcing a non-synchronizing literal: its data goes too.
    buf.extend_from_slice(b"yy {5+}\r\nb NOO\r\nc NOOP\r\n");
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["c", "more"]);
    // A synchronizing literal at the end of a discarded line: the client was told
    // BAD and sends no data.
    let mut buf = [&b"* "[..], &[b'z'; 45], b" {5}\r\nd NOOP\r\n"].concat();
    assert_eq!(tags(&events(&mut reader, &mut buf)), ["bad *", "d", "more"]);
}

#[test]
fn bare_lf_and_garbage() {
    let mut reader = CommandReader::new(limits());
    let mut buf = b"a NOOP\nb NOOP\r\n\r\n* x\r\nc\x00 NOOP\r\n".to_vec();
    let evs = events(&mut reader, &mut buf);
    assert_eq!(
        tags(&evs),
        ["bad a", "b", "bad *", "bad *", "bad *", "more"]
    );
    assert!(matches!(&evs[0], Event::Rejected(r) if r.error == Error::BareLf));
    let mut out = Vec::new();
    if let Event::Rejected(r) = &evs[2] {
        r.write_response(&mut out);
    }
    assert_eq!(out, b"* BAD Missing or invalid tag\r\n");
}

#[test]
fn literal_data_is_not_rescanned() {
    // A large literal fed a byte at a time: each step costs O(1) beyond the copy the
    // test itself makes, so this stays fast even unoptimised.
    let limits = Limits::default();
    let mut reader = CommandReader::new(limits);
    let mut buf = b"a APPEND INBOX {200000+}\r\n".to_vec();
    let data = vec![b'\n'; 200_000];
    assert_eq!(reader.next(&buf).event, Event::NeedMore);
    for chunk in data.chunks(1000) {
        buf.extend_from_slice(chunk);
        assert_eq!(reader.next(&buf).event, Event::NeedMore);
    }
    buf.extend_from_slice(b"\r\n");
    let step = reader.next(&buf);
    assert_eq!(step.consumed, buf.len());
    assert!(matches!(step.event, Event::Command(_)));
}

#[test]
fn literal_at_end_of_line() {
    use super::reader::literal_at_end;
    assert_eq!(literal_at_end(b"a {5}"), Some((5, true)));
    assert_eq!(literal_at_end(b"a {5+}"), Some((5, false)));
    assert_eq!(literal_at_end(b"a ~{0}"), Some((0, true)));
    assert_eq!(
        literal_at_end(b"{99999999999999999999999}"),
        Some((u64::MAX, true))
    );
    for none in [
        &b"a {}"[..],
        b"a {+}",
        b"a 5}",
        b"a {5",
        b"a {5 }",
        b"a {x5}",
        b"}",
    ] {
        assert_eq!(literal_at_end(none), None, "{none:?}");
    }
}

#[test]
fn plain_credentials() {
    let c = sasl_plain(b"\0joe\0secret").expect("valid");
    assert_eq!(
        (c.username.as_str(), c.password.as_str()),
        ("joe", "secret")
    );
    assert_eq!(sasl_plain(b"joe"), Err(Error::BadSaslResponse));
}

#[test]
fn refused_tags_do_not_depend_on_the_reads() {
    // A tag cut by the line limit is no tag, however the bytes arrive.
    for input in [[&[b'z'; 45][..], b" NOOP\r\n"].concat(), vec![b'z'; 45]] {
        let mut whole = CommandReader::new(limits());
        let Event::Rejected(r) = whole.next(&input).event else {
            panic!("rejected")
        };
        assert_eq!(r.tag, None);
        let mut reader = CommandReader::new(limits());
        let step = reader.next(&input[..40]);
        assert_eq!(step.event, Event::Rejected(r));
    }
}

#[test]
fn silly_limits_still_make_progress() {
    let mut reader = CommandReader::new(Limits {
        max_line: 0,
        max_literal: 0,
        max_command: 0,
        literal_minus: true,
    });
    let mut buf = b"a NOOP\r\nb NOOP\r\n".to_vec();
    let evs = events(&mut reader, &mut buf);
    assert!(
        evs.iter()
            .all(|e| matches!(e, Event::Rejected(_) | Event::NeedMore))
    );
    assert!(buf.is_empty());
    assert_eq!(reader.next(b"").event, Event::NeedMore);
}

#[test]
fn debug_hides_credentials() {
    let login = format!("{:?}", kind("a LOGIN joe hunter2"));
    assert!(
        login.contains("joe") && !login.contains("hunter2"),
        "{login}"
    );
    let auth = format!("{:?}", kind("a AUTHENTICATE PLAIN AGpvZQBodW50ZXIy"));
    assert!(!auth.contains("104"), "{auth}");
}
