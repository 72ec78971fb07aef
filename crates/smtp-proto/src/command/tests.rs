use super::*;
use crate::address::{Address, AddressError};

fn mailbox(s: &str) -> Address {
    Address::parse(s).expect("test address")
}

#[test]
fn commands_that_parse() {
    let cases: &[(&str, Command<'_>)] = &[
        ("EHLO client.example", Command::Ehlo("client.example")),
        ("ehlo client.example", Command::Ehlo("client.example")),
        ("EHLO  client.example  ", Command::Ehlo("client.example")),
        ("EHLO [192.0.2.1]", Command::Ehlo("[192.0.2.1]")),
        (
            "EHLO [IPv6:2001:db8::1]",
            Command::Ehlo("[IPv6:2001:db8::1]"),
        ),
        ("HELO my_pc", Command::Helo("my_pc")),
        (
            "MAIL FROM:<a@b.example>",
            Command::Mail {
                from: ReversePath::Mailbox(mailbox("a@b.example")),
                params: MailParams::default(),
            },
        ),
        (
            "mail from: <a@b.example>",
            Command::Mail {
                from: ReversePath::Mailbox(mailbox("a@b.example")),
                params: MailParams::default(),
            },
        ),
        (
            "MAIL FROM:<>",
            Command::Mail {
                from: ReversePath::Null,
                params: MailParams::default(),
            },
        ),
        (
            "MAIL FROM:<a@b> SIZE=1000 BODY=8BITMIME",
            Command::Mail {
                from: ReversePath::Mailbox(mailbox("a@b")),
                params: MailParams {
                    size: Some(1000),
                    body: Some(Body::EightBitMime),
                },
            },
        ),
        (
            "MAIL FROM:<> body=7bit  size=0 AUTH=<>",
            Command::Mail {
                from: ReversePath::Null,
                params: MailParams {
                    size: Some(0),
                    body: Some(Body::SevenBit),
                },
            },
        ),
        (
            "MAIL FROM:<a@b> SIZE=99999999999999999999",
            Command::Mail {
                from: ReversePath::Mailbox(mailbox("a@b")),
                params: MailParams {
                    size: Some(u64::MAX),
                    body: None,
                },
            },
        ),
        (
            "RCPT TO:<c@d.example>",
            Command::Rcpt {
                to: ForwardPath::Mailbox(mailbox("c@d.example")),
            },
        ),
        (
            "RCPT TO:<@ours:c@ext.example>",
            Command::Rcpt {
                to: ForwardPath::Mailbox(mailbox("c@ext.example")),
            },
        ),
        (
            "Rcpt To:<Postmaster>",
            Command::Rcpt {
                to: ForwardPath::Postmaster,
            },
        ),
        ("DATA", Command::Data),
        ("data ", Command::Data),
        ("RSET", Command::Rset),
        ("NOOP", Command::Noop),
        ("NOOP anything at all", Command::Noop),
        ("QUIT", Command::Quit),
        ("VRFY user", Command::Vrfy("user")),
        ("EXPN staff", Command::Expn("staff")),
        ("HELP", Command::Help(None)),
        ("HELP MAIL", Command::Help(Some("MAIL"))),
        ("STARTTLS", Command::StartTls),
        ("starttls", Command::StartTls),
        (
            "AUTH PLAIN",
            Command::Auth {
                mechanism: Mechanism::Plain,
                initial_response: None,
            },
        ),
        (
            "AUTH plain AGpvZQBzZWNyZXQ=",
            Command::Auth {
                mechanism: Mechanism::Plain,
                initial_response: Some("AGpvZQBzZWNyZXQ="),
            },
        ),
        (
            "AUTH LOGIN am9l",
            Command::Auth {
                mechanism: Mechanism::Login,
                initial_response: Some("am9l"),
            },
        ),
        (
            "AUTH PLAIN =",
            Command::Auth {
                mechanism: Mechanism::Plain,
                initial_response: Some("="),
            },
        ),
    ];
    for (line, expected) in cases {
        assert_eq!(
            parse_command(line.as_bytes()).as_ref(),
            Ok(expected),
            "{line}"
        );
    }
}

#[test]
fn commands_that_fail() {
    use AddressError::*;
    let cases: &[(&[u8], Error)] = &[
        (b"", Error::UnknownCommand),
        (b"FOO", Error::UnknownCommand),
        (b"DATAX", Error::UnknownCommand),
        (b"MAILFROM:<a@b>", Error::UnknownCommand),
        (b"EHLO", Error::Syntax(Verb::Ehlo)),
        (b"EHLO a b", Error::Syntax(Verb::Ehlo)),
        (b"EHLO a(b)", Error::Syntax(Verb::Ehlo)),
        (b"HELO <evil>", Error::Syntax(Verb::Helo)),
        (b"HELO a\"b", Error::Syntax(Verb::Helo)),
        (b"DATA x", Error::Syntax(Verb::Data)),
        (b"RSET x", Error::Syntax(Verb::Rset)),
        (b"QUIT now", Error::Syntax(Verb::Quit)),
        (b"STARTTLS x", Error::Syntax(Verb::StartTls)),
        (b"VRFY", Error::Syntax(Verb::Vrfy)),
        (b"EXPN", Error::Syntax(Verb::Expn)),
        (b"MAIL", Error::Syntax(Verb::Mail)),
        (b"MAIL TO:<a@b>", Error::Syntax(Verb::Mail)),
        (b"MAIL FROM:a@b", Error::Syntax(Verb::Mail)),
        (b"MAIL FROM:<a@b", Error::BadSender(MissingBrackets)),
        (b"MAIL FROM:<a@b>x", Error::BadSender(MissingBrackets)),
        (b"MAIL FROM:<a>", Error::BadSender(MissingDomain)),
        (b"MAIL FROM:<a@b> FOO=1", Error::UnsupportedParameter),
        (b"MAIL FROM:<a@b> SMTPUTF8", Error::UnsupportedParameter),
        (b"MAIL FROM:<a@b> RET=FULL", Error::UnsupportedParameter),
        (b"MAIL FROM:<a@b> SIZE=", Error::BadParameter),
        (b"MAIL FROM:<a@b> SIZE=12x", Error::BadParameter),
        (b"MAIL FROM:<a@b> SIZE=-1", Error::BadParameter),
        (
            b"MAIL FROM:<a@b> SIZE=123456789012345678901",
            Error::BadParameter,
        ),
        (b"MAIL FROM:<a@b> SIZE=1 SIZE=2", Error::BadParameter),
        (b"MAIL FROM:<a@b> BODY=BINARYMIME", Error::BadParameter),
        (b"MAIL FROM:<a@b> BODY", Error::BadParameter),
        (b"MAIL FROM:<a@b> =x", Error::BadParameter),
        (b"MAIL FROM:<a@b> SIZE=1=2", Error::BadParameter),
        (b"RCPT", Error::Syntax(Verb::Rcpt)),
        (b"RCPT TO:", Error::Syntax(Verb::Rcpt)),
        (b"RCPT FROM:<a@b>", Error::Syntax(Verb::Rcpt)),
        (b"RCPT TO:<>", Error::BadRecipient(BadLocalPart)),
        (b"RCPT TO:<ext!to>", Error::BadRecipient(MissingDomain)),
        (b"RCPT TO:<\"to@ext\">", Error::BadRecipient(MissingDomain)),
        (
            b"RCPT TO:<to@ext@[192.0.2.1]>",
            Error::BadRecipient(BadDomain),
        ),
        (b"RCPT TO:<a@b> NOTIFY=NEVER", Error::UnsupportedParameter),
        (b"AUTH", Error::Syntax(Verb::Auth)),
        (b"AUTH CRAM-MD5", Error::UnknownMechanism),
        (b"AUTH PLAIN a b", Error::Syntax(Verb::Auth)),
        // One bad command, never two: a lone CR does not split the line.
        (b"RSET\rQUIT", Error::BareCr),
        (b"NOOP\x00", Error::BadCharacter),
        (b"HELO caf\xc3\xa9", Error::BadCharacter),
        (b"HELO a\tb", Error::BadCharacter),
        (b"RCPT TO:<\xff@x>", Error::BadCharacter),
    ];
    for (line, error) in cases {
        assert_eq!(
            parse_command(line),
            Err(*error),
            "{}",
            String::from_utf8_lossy(line)
        );
    }
}

#[test]
fn group_enders() {
    for verb in [
        Verb::Ehlo,
        Verb::Data,
        Verb::Quit,
        Verb::Noop,
        Verb::StartTls,
    ] {
        assert!(verb.ends_group(), "{verb:?}");
    }
    for verb in [Verb::Mail, Verb::Rcpt, Verb::Rset, Verb::Auth] {
        assert!(!verb.ends_group(), "{verb:?}");
    }
}
