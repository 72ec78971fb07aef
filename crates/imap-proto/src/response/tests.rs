use super::*;
use crate::section::{Section, SectionText};

fn enc(f: impl FnOnce(&mut Vec<u8>)) -> String {
    let mut out = Vec::new();
    f(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn status_responses() {
    assert_eq!(
        enc(|o| write_tagged(o, "a1", Condition::Ok, None, "LOGIN completed")),
        "a1 OK LOGIN completed\r\n"
    );
    assert_eq!(
        enc(|o| write_tagged(
            o,
            "a2",
            Condition::No,
            Some(&Code::TryCreate),
            "No such mailbox"
        )),
        "a2 NO [TRYCREATE] No such mailbox\r\n"
    );
    assert_eq!(
        enc(|o| write_tagged(o, "a3", Condition::Bad, None, "evil\r\n* OK injected")),
        "a3 BAD evil  * OK injected\r\n"
    );
    assert_eq!(
        enc(|o| write_untagged(o, Condition::Ok, Some(&Code::UidValidity(42)), "UIDs valid")),
        "* OK [UIDVALIDITY 42] UIDs valid\r\n"
    );
    assert_eq!(
        enc(|o| write_bye(o, None, "Logging out")),
        "* BYE Logging out\r\n"
    );
    assert_eq!(enc(|o| write_preauth(o, None, "")), "* PREAUTH done\r\n");
    assert_eq!(enc(|o| write_continuation(o, "")), "+ \r\n");
    assert_eq!(enc(|o| write_continuation(o, "Ready")), "+ Ready\r\n");
}

#[test]
fn codes() {
    let code = |c: Code| enc(|o| c.write(o));
    assert_eq!(
        code(Code::Capability(vec![
            "IMAP4rev2".into(),
            "AUTH=PLAIN".into()
        ])),
        "CAPABILITY IMAP4rev2 AUTH=PLAIN"
    );
    assert_eq!(
        code(Code::PermanentFlags {
            flags: vec![Flag::Seen, Flag::Keyword("$Junk".into())],
            new_keywords: true
        }),
        "PERMANENTFLAGS (\\Seen $Junk \\*)"
    );
    assert_eq!(
        code(Code::PermanentFlags {
            flags: vec![],
            new_keywords: false
        }),
        "PERMANENTFLAGS ()"
    );
    assert_eq!(
        code(Code::AppendUid {
            uid_validity: 38505,
            uid: 3955
        }),
        "APPENDUID 38505 3955"
    );
    assert_eq!(
        code(Code::CopyUid {
            uid_validity: 38505,
            source: vec![304, 319, 320, 321],
            destination: vec![3956, 3957, 3958, 3959]
        }),
        "COPYUID 38505 304,319:321 3956:3959"
    );
    assert_eq!(code(Code::Modified(vec![7, 9])), "MODIFIED 7,9");
    assert_eq!(
        code(Code::HighestModSeq(u64::MAX >> 1)),
        "HIGHESTMODSEQ 9223372036854775807"
    );
    for (c, text) in [
        (Code::Alert, "ALERT"),
        (Code::Parse, "PARSE"),
        (Code::ReadOnly, "READ-ONLY"),
        (Code::ReadWrite, "READ-WRITE"),
        (Code::UidNext(5), "UIDNEXT 5"),
        (Code::Unseen(3), "UNSEEN 3"),
        (Code::NoModSeq, "NOMODSEQ"),
        (Code::Closed, "CLOSED"),
        (Code::Unavailable, "UNAVAILABLE"),
        (Code::AuthenticationFailed, "AUTHENTICATIONFAILED"),
        (Code::AuthorizationFailed, "AUTHORIZATIONFAILED"),
        (Code::Expired, "EXPIRED"),
        (Code::PrivacyRequired, "PRIVACYREQUIRED"),
        (Code::ContactAdmin, "CONTACTADMIN"),
        (Code::NoPerm, "NOPERM"),
        (Code::InUse, "INUSE"),
        (Code::ExpungeIssued, "EXPUNGEISSUED"),
        (Code::Corruption, "CORRUPTION"),
        (Code::ServerBug, "SERVERBUG"),
        (Code::ClientBug, "CLIENTBUG"),
        (Code::Cannot, "CANNOT"),
        (Code::Limit, "LIMIT"),
        (Code::OverQuota, "OVERQUOTA"),
        (Code::AlreadyExists, "ALREADYEXISTS"),
        (Code::NonExistent, "NONEXISTENT"),
        (Code::TooBig, "TOOBIG"),
        (Code::CompressionActive, "COMPRESSIONACTIVE"),
    ] {
        assert_eq!(code(c), text);
    }
}

#[test]
fn untagged_data() {
    assert_eq!(
        enc(|o| write_capability(o, &["IMAP4rev2", "IMAP4rev1", "LITERAL+", "bad cap"])),
        "* CAPABILITY IMAP4rev2 IMAP4rev1 LITERAL+ badcap\r\n"
    );
    assert_eq!(
        enc(|o| write_enabled(o, &["CONDSTORE"])),
        "* ENABLED CONDSTORE\r\n"
    );
    assert_eq!(enc(|o| write_id(o, None)), "* ID NIL\r\n");
    assert_eq!(
        enc(|o| write_id(o, Some(&[("name", Some("Stoa")), ("os", None)]))),
        "* ID (\"name\" \"Stoa\" \"os\" NIL)\r\n"
    );
    assert_eq!(
        enc(|o| write_namespace(o, '/')),
        "* NAMESPACE ((\"\" \"/\")) NIL NIL\r\n"
    );
    assert_eq!(enc(|o| write_exists(o, 23)), "* 23 EXISTS\r\n");
    assert_eq!(enc(|o| write_recent(o, 0)), "* 0 RECENT\r\n");
    assert_eq!(enc(|o| write_expunge(o, 3)), "* 3 EXPUNGE\r\n");
    assert_eq!(
        enc(|o| write_vanished(o, true, &[41, 43, 44, 45])),
        "* VANISHED (EARLIER) 41,43:45\r\n"
    );
    assert_eq!(enc(|o| write_vanished(o, false, &[7])), "* VANISHED 7\r\n");
    assert_eq!(
        enc(|o| write_flags(o, &[Flag::Answered, Flag::Keyword("$Forwarded".into())])),
        "* FLAGS (\\Answered $Forwarded)\r\n"
    );
    assert_eq!(enc(|o| write_search(o, &[], Some(5))), "* SEARCH\r\n");
    assert_eq!(
        enc(|o| write_search(o, &[2, 84, 882], Some(917162500))),
        "* SEARCH 2 84 882 (MODSEQ 917162500)\r\n"
    );
    assert_eq!(
        enc(|o| write_esearch(
            o,
            &Esearch {
                tag: Some("A282"),
                uid: true,
                min: Some(2),
                max: Some(47),
                count: Some(5),
                all: Some(&[2, 10, 11, 12, 47]),
                modseq: Some(9)
            }
        )),
        "* ESEARCH (TAG \"A282\") UID MIN 2 MAX 47 COUNT 5 ALL 2,10:12,47 MODSEQ 9\r\n"
    );
    assert_eq!(
        enc(|o| write_esearch(
            o,
            &Esearch {
                tag: Some("b"),
                count: Some(0),
                all: Some(&[]),
                ..Esearch::default()
            }
        )),
        "* ESEARCH (TAG \"b\") COUNT 0\r\n"
    );
}

#[test]
fn list_and_status() {
    let entry = ListEntry {
        attributes: &["\\HasNoChildren", "\\Drafts"],
        delimiter: Some('/'),
        name: "Entwürfe",
        ..ListEntry::default()
    };
    assert_eq!(
        enc(|o| write_list(o, &entry, false, false)),
        "* LIST (\\HasNoChildren \\Drafts) \"/\" Entw&APw-rfe\r\n"
    );
    assert_eq!(
        enc(|o| write_list(o, &entry, false, true)),
        "* LIST (\\HasNoChildren \\Drafts) \"/\" {9}\r\nEntwürfe\r\n"
    );
    let entry = ListEntry {
        attributes: &[],
        delimiter: None,
        name: "a b",
        child_subscribed: true,
        old_name: Some("old"),
    };
    assert_eq!(
        enc(|o| write_list(o, &entry, true, false)),
        "* LSUB () NIL \"a b\" (\"CHILDINFO\" (\"SUBSCRIBED\") \"OLDNAME\" (old))\r\n"
    );
    assert_eq!(
        enc(|o| write_status(
            o,
            "INBOX",
            false,
            &[(StatusItem::Messages, 17), (StatusItem::UidNext, 4392)]
        )),
        "* STATUS INBOX (MESSAGES 17 UIDNEXT 4392)\r\n"
    );
    assert_eq!(
        enc(|o| write_status(o, "", false, &[])),
        "* STATUS \"\" ()\r\n"
    );
}

#[test]
fn fetch_responses() {
    let out = enc(|o| {
        let mut f = FetchWriter::new(o, 12);
        f.uid(4827313)
            .flags(&[Flag::Seen])
            .internal_date(837_596_665)
            .rfc822_size(44827)
            .modseq(624140003)
            .raw("ENVELOPE", b"(NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL)");
        f.finish();
    });
    assert_eq!(
        out,
        "* 12 FETCH (UID 4827313 FLAGS (\\Seen) INTERNALDATE \"17-Jul-1996 09:44:25 +0000\" \
         RFC822.SIZE 44827 MODSEQ (624140003) ENVELOPE (NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL))\r\n"
    );
    let section = Section {
        part: vec![1, 2],
        text: SectionText::HeaderFields {
            names: vec!["From".into(), "X Y".into()],
            not: false,
        },
    };
    let out = enc(|o| {
        let mut f = FetchWriter::new(o, 1);
        f.body_section(&section, Some(0), Some(b"From: a\r\n\r\n"))
            .body_section(&Section::default(), None, None)
            .literal("RFC822.TEXT", Some(b""))
            .binary(&[1], None, Some(b"a\0b"))
            .binary_size(&[], 3);
        f.finish();
    });
    assert_eq!(
        out,
        "* 1 FETCH (BODY[1.2.HEADER.FIELDS (From \"X Y\")]<0> {11}\r\nFrom: a\r\n\r\n \
         BODY[] NIL RFC822.TEXT {0}\r\n BINARY[1] ~{3}\r\na\0b BINARY.SIZE[] 3)\r\n"
    );
    let name = |text, part: Vec<u32>| enc(|o| write_section_name(o, &Section { part, text }, None));
    assert_eq!(name(SectionText::Mime, vec![3]), "BODY[3.MIME]");
    assert_eq!(name(SectionText::Text, vec![]), "BODY[TEXT]");
    assert_eq!(name(SectionText::Full, vec![2, 1]), "BODY[2.1]");
    assert_eq!(
        name(
            SectionText::HeaderFields {
                names: vec!["A".into()],
                not: true
            },
            vec![]
        ),
        "BODY[HEADER.FIELDS.NOT (A)]"
    );
}
