use super::*;

#[test]
fn commands_that_parse() {
    let plain = |initial| Command::Auth {
        mechanism: Some(Mechanism::Plain),
        initial_response: initial,
    };
    let cases: &[(&str, Command<'_>)] = &[
        ("USER joe", Command::User("joe")),
        ("user joe@example.org", Command::User("joe@example.org")),
        ("USER  joe  ", Command::User("joe")),
        ("USER jöe", Command::User("jöe")),
        ("PASS secret", Command::Pass("secret")),
        ("pass two words ", Command::Pass("two words ")),
        ("PASS  lead", Command::Pass(" lead")),
        ("PASS pässwörd", Command::Pass("pässwörd")),
        (
            "AUTH",
            Command::Auth {
                mechanism: None,
                initial_response: None,
            },
        ),
        ("AUTH PLAIN", plain(None)),
        (
            "auth plain AGpvZQBzZWNyZXQ=",
            plain(Some("AGpvZQBzZWNyZXQ=")),
        ),
        ("AUTH PLAIN =", plain(Some("="))),
        ("STAT", Command::Stat),
        ("stat", Command::Stat),
        ("sTaT ", Command::Stat),
        ("LIST", Command::List(None)),
        ("LIST 2", Command::List(Some(2))),
        ("LIST 0", Command::List(Some(0))),
        ("LIST 0002", Command::List(Some(2))),
        ("UIDL", Command::Uidl(None)),
        ("uidl 7", Command::Uidl(Some(7))),
        ("RETR 1", Command::Retr(1)),
        ("RETR  1 ", Command::Retr(1)),
        ("RETR 99999999999999999999999999", Command::Retr(usize::MAX)),
        (
            "TOP 1 0",
            Command::Top {
                number: 1,
                lines: 0,
            },
        ),
        (
            "top 3 10",
            Command::Top {
                number: 3,
                lines: 10,
            },
        ),
        (
            "TOP 1 99999999999",
            Command::Top {
                number: 1,
                lines: u32::MAX,
            },
        ),
        ("DELE 1", Command::Dele(1)),
        ("RSET", Command::Rset),
        ("NOOP", Command::Noop),
        ("QUIT", Command::Quit),
        ("CAPA", Command::Capa),
        ("STLS", Command::Stls),
        ("stls", Command::Stls),
    ];
    for (line, expected) in cases {
        assert_eq!(
            parse_command(line.as_bytes()).as_ref(),
            Ok(expected),
            "{line:?}"
        );
        let verb = expected.verb();
        assert_eq!(
            Verb::from_keyword(&verb.as_str().to_lowercase()),
            Some(verb)
        );
    }
}

#[test]
fn commands_that_fail() {
    use Error::*;
    let cases: &[(&[u8], Error)] = &[
        (b"", UnknownCommand),
        (b" STAT", UnknownCommand),
        (b"STATS", UnknownCommand),
        (b"APOP joe c4c9334bac560ecc979e58001b3e22fb", UnknownCommand),
        (b"LAST", UnknownCommand),
        (b"XTND XMIT", UnknownCommand),
        (b"USER", Syntax(Verb::User)),
        (b"USER ", Syntax(Verb::User)),
        (b"USER joe smith", Syntax(Verb::User)),
        (b"PASS", Syntax(Verb::Pass)),
        (b"PASS ", Syntax(Verb::Pass)),
        (b"AUTH PLAIN a b", Syntax(Verb::Auth)),
        (b"AUTH CRAM-MD5", UnknownMechanism),
        (b"AUTH LOGIN", UnknownMechanism),
        (b"STAT 1", Syntax(Verb::Stat)),
        (b"LIST 1 2", Syntax(Verb::List)),
        (b"LIST -1", Syntax(Verb::List)),
        (b"LIST +1", Syntax(Verb::List)),
        (b"LIST one", Syntax(Verb::List)),
        (b"UIDL 0x1", Syntax(Verb::Uidl)),
        (b"RETR", Syntax(Verb::Retr)),
        (b"RETR 1.0", Syntax(Verb::Retr)),
        (b"TOP 1", Syntax(Verb::Top)),
        (b"TOP 1 -1", Syntax(Verb::Top)),
        (b"TOP 1 2 3", Syntax(Verb::Top)),
        (b"DELE", Syntax(Verb::Dele)),
        (b"RSET now", Syntax(Verb::Rset)),
        (b"NOOP x", Syntax(Verb::Noop)),
        (b"QUIT now", Syntax(Verb::Quit)),
        (b"CAPA x", Syntax(Verb::Capa)),
        (b"STLS x", Syntax(Verb::Stls)),
        // One line, one bad command: a lone CR does not end a line.
        (b"RETR 1\rDELE 1", BareCr),
        (b"QUIT\r", BareCr),
        (b"USER joe\0", BadCharacter),
        (b"STAT\t", BadCharacter),
        (b"PASS a\x7fb", BadCharacter),
        (b"PASS \xff\xfe", BadCharacter),
        (b"\xc3\xa9STAT", UnknownCommand),
        (b"RETR \xd9\xa1", BadCharacter),
        (b"AUTH PLAIN \xc3\xa9", BadCharacter),
    ];
    for (line, expected) in cases {
        assert_eq!(
            parse_command(line),
            Err(*expected),
            "{:?}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn debug_hides_secrets() {
    let pass = parse_command(b"PASS hunter2").expect("valid");
    assert_eq!(format!("{pass:?}"), "Pass(<redacted>)");
    let auth = parse_command(b"AUTH PLAIN AGpvZQBodW50ZXIy").expect("valid");
    assert!(!format!("{auth:?}").contains("AGpv"));
    assert_eq!(format!("{:?}", Command::Retr(3)), "Retr(3)");
    assert_eq!(format!("{:?}", Command::Stat), "stat");
}
