//! Tests with realistic messages; expected values worked out by hand from RFC 3501
//! §7.4.2 and checked against Dovecot's answers where it has one.

use std::borrow::Cow;

use stoa_imap_proto::{Section, SectionText};

use crate::Structure;

/// `text` with every LF made CRLF (messages are stored with CRLF).
fn crlf(text: &str) -> Vec<u8> {
    text.replace('\n', "\r\n").into_bytes()
}

fn body_structure(message: &[u8], extended: bool) -> String {
    let mut out = Vec::new();
    Structure::parse(message).write_body_structure(&mut out, extended);
    String::from_utf8(out).expect("utf-8")
}

fn envelope(message: &[u8]) -> String {
    let mut out = Vec::new();
    Structure::parse(message).write_envelope(&mut out);
    String::from_utf8(out).expect("utf-8")
}

fn section(message: &[u8], spec: &str) -> Option<String> {
    let s = Structure::parse(message);
    let section = parse_section(spec);
    s.section(message, &section)
        .map(|b: Cow<'_, [u8]>| String::from_utf8_lossy(&b).into_owned())
}

/// A section spec as a client writes it between the brackets (a test helper, not the
/// command parser's).
fn parse_section(spec: &str) -> Section {
    let mut part = Vec::new();
    let mut rest = spec;
    while let Some(c) = rest.chars().next() {
        if !c.is_ascii_digit() {
            break;
        }
        let end = rest.find('.').unwrap_or(rest.len());
        part.push(rest[..end].parse().expect("number"));
        rest = rest.get(end + 1..).unwrap_or("");
    }
    let text = if rest.is_empty() {
        SectionText::Full
    } else if rest == "HEADER" {
        SectionText::Header
    } else if rest == "TEXT" {
        SectionText::Text
    } else if rest == "MIME" {
        SectionText::Mime
    } else if let Some(list) = rest.strip_prefix("HEADER.FIELDS.NOT ") {
        SectionText::HeaderFields {
            names: names(list),
            not: true,
        }
    } else if let Some(list) = rest.strip_prefix("HEADER.FIELDS ") {
        SectionText::HeaderFields {
            names: names(list),
            not: false,
        }
    } else {
        panic!("bad spec {spec}")
    };
    Section { part, text }
}

fn names(list: &str) -> Vec<String> {
    list.trim_matches(|c| c == '(' || c == ')')
        .split(' ')
        .map(str::to_owned)
        .collect()
}

/// Dovecot's own test message (src/lib-imap/test-imap-bodystructure.c), with CRLF.
const DOVECOT: &str = "From: user@domain.org
Date: Sat, 24 Mar 2007 23:00:00 +0200
Mime-Version: 1.0
Content-Type: multipart/mixed; boundary=\"foo
 bar\"

Root MIME prologue

--foo bar
Content-Type: text/x-myown; charset=us-ascii; foo=\"quoted\\\"string\"
Content-ID: <foo@example.com>
Content-MD5: Q2hlY2sgSW50ZWdyaXR5IQ==
Content-Disposition: inline; foo=bar
Content-Description: hellodescription
Content-Language: en, fi, se
Content-Location: http://example.com/test.txt

hello

--foo bar
Content-Type: message/rfc822

From: sub@domain.org
To: sub-to1@domain.org, sub-to2@domain.org
Date: Sun, 12 Aug 2012 12:34:56 +0300
Subject: submsg
Content-Type: multipart/alternative; boundary=\"sub1\"

Sub MIME prologue
--sub1
Content-Type: text/html
Content-Transfer-Encoding: 8bit

<p>Hello world</p>

--sub1
Content-Type: text/plain
Content-Transfer-Encoding: ?invalid

Hello another world

--sub1--
Sub MIME epilogue

--foo bar--
Root MIME epilogue
";

/// Dovecot's expected BODYSTRUCTURE for [`DOVECOT`] (it writes the outer multipart
/// without its parentheses; here they are added).
const DOVECOT_BODYSTRUCTURE: &str = "((\"text\" \"x-myown\" (\"charset\" \"us-ascii\" \"foo\" \"quoted\\\"string\") \"<foo@example.com>\" \"hellodescription\" \"7bit\" 7 1 \"Q2hlY2sgSW50ZWdyaXR5IQ==\" (\"inline\" (\"foo\" \"bar\")) (\"en\" \"fi\" \"se\") \"http://example.com/test.txt\")(\"message\" \"rfc822\" NIL NIL NIL \"7bit\" 412 (\"Sun, 12 Aug 2012 12:34:56 +0300\" \"submsg\" ((NIL NIL \"sub\" \"domain.org\")) ((NIL NIL \"sub\" \"domain.org\")) ((NIL NIL \"sub\" \"domain.org\")) ((NIL NIL \"sub-to1\" \"domain.org\")(NIL NIL \"sub-to2\" \"domain.org\")) NIL NIL NIL NIL) ((\"text\" \"html\" (\"charset\" \"us-ascii\") NIL NIL \"8bit\" 20 1 NIL NIL NIL NIL)(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 21 1 NIL NIL NIL NIL) \"alternative\" (\"boundary\" \"sub1\") NIL NIL NIL) 21 NIL NIL NIL NIL) \"mixed\" (\"boundary\" \"foo bar\") NIL NIL NIL)";

const DOVECOT_BODY: &str = "((\"text\" \"x-myown\" (\"charset\" \"us-ascii\" \"foo\" \"quoted\\\"string\") \"<foo@example.com>\" \"hellodescription\" \"7bit\" 7 1)(\"message\" \"rfc822\" NIL NIL NIL \"7bit\" 412 (\"Sun, 12 Aug 2012 12:34:56 +0300\" \"submsg\" ((NIL NIL \"sub\" \"domain.org\")) ((NIL NIL \"sub\" \"domain.org\")) ((NIL NIL \"sub\" \"domain.org\")) ((NIL NIL \"sub-to1\" \"domain.org\")(NIL NIL \"sub-to2\" \"domain.org\")) NIL NIL NIL NIL) ((\"text\" \"html\" (\"charset\" \"us-ascii\") NIL NIL \"8bit\" 20 1)(\"text\" \"plain\" (\"charset\" \"us-ascii\") NIL NIL \"7bit\" 21 1) \"alternative\") 21) \"mixed\")";

#[test]
fn dovecot_reference_message() {
    let m = crlf(DOVECOT);
    assert_eq!(body_structure(&m, true), DOVECOT_BODYSTRUCTURE);
    assert_eq!(body_structure(&m, false), DOVECOT_BODY);
}

const PLAIN: &str = "Return-Path: <alice@example.org>
Received: from mx.example.org by mail.example.com; Mon, 7 Dec 2026 10:00:00 +0000
From: Alice Example <alice@example.org>
To: Bob <bob@example.com>, carol@example.com
Cc: \"Dave, Jr.\" <dave@example.net>
Subject: Lunch
 tomorrow?
Date: Mon, 7 Dec 2026 10:59:59 +0100
Message-ID: <123@example.org>
In-Reply-To: <122@example.com>
Reply-To: lunch-list@example.org

Hi Bob,

Lunch tomorrow at noon?

Alice
";

const ALTERNATIVE: &str = "From: news@example.com
To: bob@example.com
Subject: Newsletter
Date: Tue, 1 Dec 2026 08:00:00 +0000
MIME-Version: 1.0
Content-Type: multipart/alternative; boundary=\"alt-1\"

--alt-1
Content-Type: text/plain; charset=\"utf-8\"
Content-Transfer-Encoding: quoted-printable

Caf=C3=A9 news
--alt-1
Content-Type: text/html; charset=\"utf-8\"
Content-Transfer-Encoding: quoted-printable

<p>Caf=C3=A9 news</p>
--alt-1--
";

const MIXED: &str = "From: Alice <alice@example.org>
To: bob@example.com
Subject: Report
Date: Wed, 2 Dec 2026 12:00:00 -0500
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=\"mix\"

This is a multi-part message in MIME format.
--mix
Content-Type: text/plain; charset=us-ascii

See the attached report.
--mix
Content-Type: application/pdf; name=\"report.pdf\"
Content-Transfer-Encoding: base64
Content-Disposition: attachment; filename=\"report.pdf\"

JVBERi0xLjQKJcfsj6IKNSAwIG9iago8PC9MZW5ndGggNiAwIFI+PgpzdHJlYW0K
ZW5kc3RyZWFtCmVuZG9iagp0cmFpbGVyCjw8L1Jvb3QgMSAwIFI+PgolJUVPRgo=
--mix
Content-Type: text/plain; name=\"=?utf-8?q?r=C3=A9sum=C3=A9.txt?=\"
Content-Disposition: attachment; filename*=utf-8''r%C3%A9sum%C3%A9.txt
Content-Transfer-Encoding: base64

SGVsbG8gd29ybGQ=
--mix--
";

const FORWARD: &str = "From: bob@example.com
To: carol@example.com
Subject: Fwd: Lunch
Date: Thu, 3 Dec 2026 09:00:00 +0000
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=\"outer\"

--outer
Content-Type: text/plain

FYI
--outer
Content-Type: message/rfc822
Content-Disposition: inline

From: Alice <alice@example.org>
To: bob@example.com
Subject: Lunch
Date: Mon, 7 Dec 2026 10:59:59 +0100
Message-ID: <123@example.org>

Lunch tomorrow?
--outer--
";

const ENCODED: &str = "From: =?ISO-8859-1?Q?Andr=E9?= Pirard <PIRARD@vm1.ulg.ac.be>
To: =?utf-8?b?SsO8cmdlbg==?= <juergen@example.de>
Subject: =?ISO-8859-1?B?SWYgeW91IGNhbiByZWFkIHRoaXMgeW8=?=
 =?ISO-8859-2?B?dSB1bmRlcnN0YW5kIHRoZSBleGFtcGxlLg==?=
Date: Fri, 4 Dec 2026 00:00:00 +0000

body
";

const GROUPS: &str = "From: alice@example.org
To: undisclosed-recipients:;
Cc: Team: bob@example.com, \"Carol C\" <carol@example.com>;, dave@example.net
Subject: groups

x
";

const TRUNCATED: &str = "From: a@example.org
Content-Type: multipart/mixed; boundary=\"b\"

--b
Content-Type: text/plain

first
--b
Content-Type: text/plain

second (trunc";

fn q(s: &str) -> String {
    s.replace('\'', "\"")
}

#[test]
fn dovecot_reference_sections_and_envelope() {
    let m = crlf(DOVECOT);
    assert_eq!(
        envelope(&m),
        q(
            "('Sat, 24 Mar 2007 23:00:00 +0200' NIL ((NIL NIL 'user' 'domain.org')) ((NIL NIL 'user' 'domain.org')) ((NIL NIL 'user' 'domain.org')) NIL NIL NIL NIL NIL)"
        )
    );
    assert_eq!(
        section(&m, "").as_deref(),
        Some(&*String::from_utf8_lossy(&m))
    );
    assert_eq!(section(&m, "1").as_deref(), Some("hello\r\n"));
    assert_eq!(
        section(&m, "1.MIME").as_deref(),
        Some(&*String::from_utf8_lossy(&crlf(
            "Content-Type: text/x-myown; charset=us-ascii; foo=\"quoted\\\"string\"\nContent-ID: <foo@example.com>\nContent-MD5: Q2hlY2sgSW50ZWdyaXR5IQ==\nContent-Disposition: inline; foo=bar\nContent-Description: hellodescription\nContent-Language: en, fi, se\nContent-Location: http://example.com/test.txt\n\n"
        )))
    );
    let inner = section(&m, "2").expect("part 2");
    assert_eq!(inner.len(), 412);
    assert!(inner.starts_with("From: sub@domain.org\r\n"));
    assert!(inner.ends_with("--sub1--\r\nSub MIME epilogue\r\n"));
    assert_eq!(
        section(&m, "2.HEADER").as_deref(),
        Some(
            "From: sub@domain.org\r\nTo: sub-to1@domain.org, sub-to2@domain.org\r\nDate: Sun, 12 Aug 2012 12:34:56 +0300\r\nSubject: submsg\r\nContent-Type: multipart/alternative; boundary=\"sub1\"\r\n\r\n"
        )
    );
    let text = section(&m, "2.TEXT").expect("2.TEXT");
    assert!(text.starts_with("Sub MIME prologue\r\n--sub1\r\n"));
    assert!(text.ends_with("Sub MIME epilogue\r\n"));
    assert_eq!(
        section(&m, "2.1").as_deref(),
        Some("<p>Hello world</p>\r\n")
    );
    assert_eq!(
        section(&m, "2.2").as_deref(),
        Some("Hello another world\r\n")
    );
    assert_eq!(
        section(&m, "2.2.MIME").as_deref(),
        Some("Content-Type: text/plain\r\nContent-Transfer-Encoding: ?invalid\r\n\r\n")
    );
    assert_eq!(
        section(&m, "2.HEADER.FIELDS (subject TO)").as_deref(),
        Some("To: sub-to1@domain.org, sub-to2@domain.org\r\nSubject: submsg\r\n\r\n")
    );
    assert_eq!(
        section(&m, "HEADER.FIELDS (FROM DATE)").as_deref(),
        Some("From: user@domain.org\r\nDate: Sat, 24 Mar 2007 23:00:00 +0200\r\n\r\n")
    );
    assert_eq!(
        section(&m, "HEADER.FIELDS.NOT (FROM DATE)").as_deref(),
        Some(
            "Mime-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"foo\r\n bar\"\r\n\r\n"
        )
    );
    let text = section(&m, "TEXT").expect("TEXT");
    assert!(text.starts_with("Root MIME prologue\r\n\r\n--foo bar\r\n"));
    assert!(text.ends_with("--foo bar--\r\nRoot MIME epilogue\r\n"));
    for missing in [
        "3", "0", "1.1", "1.HEADER", "1.TEXT", "2.3", "2.1.1", "MIME", "4.MIME",
    ] {
        assert_eq!(section(&m, missing), None, "{missing}");
    }
}

#[test]
fn plain_text() {
    let m = crlf(PLAIN);
    let s = Structure::parse(&m);
    assert_eq!(
        envelope(&m),
        q(
            "('Mon, 7 Dec 2026 10:59:59 +0100' 'Lunch tomorrow?' (('Alice Example' NIL 'alice' 'example.org')) (('Alice Example' NIL 'alice' 'example.org')) ((NIL NIL 'lunch-list' 'example.org')) (('Bob' NIL 'bob' 'example.com')(NIL NIL 'carol' 'example.com')) (('Dave, Jr.' NIL 'dave' 'example.net')) NIL '<122@example.com>' '<123@example.org>')"
        )
    );
    assert_eq!(
        body_structure(&m, true),
        q("('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 45 5 NIL NIL NIL NIL)")
    );
    assert_eq!(
        body_structure(&m, false),
        q("('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 45 5)")
    );
    let body = "Hi Bob,\r\n\r\nLunch tomorrow at noon?\r\n\r\nAlice\r\n";
    assert_eq!(section(&m, "TEXT").as_deref(), Some(body));
    // A message that is not multipart: [1] is its body, [1.MIME] its header.
    assert_eq!(section(&m, "1").as_deref(), Some(body));
    assert_eq!(section(&m, "1.MIME"), section(&m, "HEADER"));
    assert!(
        section(&m, "HEADER")
            .expect("header")
            .ends_with("lunch-list@example.org\r\n\r\n")
    );
    assert_eq!(
        section(&m, "HEADER.FIELDS (SUBJECT X-NONE)").as_deref(),
        Some("Subject: Lunch\r\n tomorrow?\r\n\r\n")
    );
    assert_eq!(
        section(&m, "HEADER.FIELDS (X-NONE)").as_deref(),
        Some("\r\n")
    );
    assert_eq!(section(&m, "2"), None);
    assert_eq!(section(&m, "1.1"), None);
    // 2026-12-07T09:59:59Z.
    assert_eq!(s.sent_date(), Some(1_796_637_599));
    // Its own day, 2026-12-07, whatever the zone.
    assert_eq!(s.sent_day(), Some(20_794));
    let late = crlf("Date: Mon, 7 Dec 2026 23:30:00 -0500\n\nx\n");
    let late = Structure::parse(&late);
    assert_eq!(late.sent_day(), Some(20_794));
    assert_eq!(late.sent_date(), Some(1_796_704_200));

    assert!(s.header_contains(&m, "From", "alice example"));
    assert!(s.header_contains(&m, "from", "ALICE@EXAMPLE.ORG"));
    assert!(s.header_contains(&m, "to", "Carol@"));
    assert!(s.header_contains(&m, "Subject", "lunch tomorrow"));
    assert!(s.header_contains(&m, "subject", ""));
    assert!(!s.header_contains(&m, "subject", "dinner"));
    assert!(!s.header_contains(&m, "x-missing", ""));
    assert!(!s.header_contains(&m, "bcc", "bob"));
    assert!(s.text_contains(&m, "NOON", true));
    assert!(s.text_contains(&m, "noon", false));
    assert!(s.text_contains(&m, "", true));
    // Only in the header: TEXT finds it, BODY does not.
    assert!(s.text_contains(&m, "bob <bob@", false));
    assert!(!s.text_contains(&m, "bob <bob@", true));
    assert!(!s.text_contains(&m, "dinner", false));
}

#[test]
fn multipart_alternative() {
    let m = crlf(ALTERNATIVE);
    let s = Structure::parse(&m);
    assert_eq!(
        body_structure(&m, true),
        q(
            "(('text' 'plain' ('charset' 'utf-8') NIL NIL 'quoted-printable' 14 0 NIL NIL NIL NIL)('text' 'html' ('charset' 'utf-8') NIL NIL 'quoted-printable' 21 0 NIL NIL NIL NIL) 'alternative' ('boundary' 'alt-1') NIL NIL NIL)"
        )
    );
    assert_eq!(
        body_structure(&m, false),
        q(
            "(('text' 'plain' ('charset' 'utf-8') NIL NIL 'quoted-printable' 14 0)('text' 'html' ('charset' 'utf-8') NIL NIL 'quoted-printable' 21 0) 'alternative')"
        )
    );
    assert_eq!(section(&m, "1").as_deref(), Some("Caf=C3=A9 news"));
    assert_eq!(section(&m, "2").as_deref(), Some("<p>Caf=C3=A9 news</p>"));
    assert_eq!(section(&m, "3"), None);
    // Quoted-printable undone, then case-insensitive on the UTF-8 text.
    assert!(s.text_contains(&m, "CAFÉ NEWS", true));
    assert!(!s.text_contains(&m, "C3=A9", true));
}

#[test]
fn multipart_mixed_with_attachments() {
    let m = crlf(MIXED);
    let s = Structure::parse(&m);
    assert_eq!(
        body_structure(&m, true),
        q("(('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 24 0 NIL NIL NIL NIL)('application' 'pdf' ('name' 'report.pdf') NIL NIL 'base64' 130 NIL ('attachment' ('filename' 'report.pdf')) NIL NIL)('text' 'plain' ('charset' 'us-ascii' 'name' 'Q') NIL NIL 'base64' 16 0 NIL ('attachment' ('filename*' 'UTF8')) NIL NIL) 'mixed' ('boundary' 'mix') NIL NIL NIL)")
        .replace("UTF8", "utf-8''r%C3%A9sum%C3%A9.txt")
        .replace("Q", "=?utf-8?q?r=C3=A9sum=C3=A9=2Etxt?=")
    );
    assert_eq!(
        body_structure(&m, false),
        q("(('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 24 0)('application' 'pdf' ('name' 'report.pdf') NIL NIL 'base64' 130)('text' 'plain' ('charset' 'us-ascii' 'name' 'Q') NIL NIL 'base64' 16 0) 'mixed')")
        .replace("Q", "=?utf-8?q?r=C3=A9sum=C3=A9=2Etxt?=")
        .replace("UTF8", "utf-8''r%C3%A9sum%C3%A9.txt")
    );
    assert_eq!(
        section(&m, "2").as_deref(),
        Some(
            "JVBERi0xLjQKJcfsj6IKNSAwIG9iago8PC9MZW5ndGggNiAwIFI+PgpzdHJlYW0K\r\nZW5kc3RyZWFtCmVuZG9iagp0cmFpbGVyCjw8L1Jvb3QgMSAwIFI+PgolJUVPRgo="
        )
    );
    assert_eq!(
        section(&m, "2.MIME").as_deref(),
        Some(
            "Content-Type: application/pdf; name=\"report.pdf\"\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"report.pdf\"\r\n\r\n"
        )
    );
    assert!(
        section(&m, "TEXT")
            .expect("text")
            .starts_with("This is a multi-part message")
    );
    // The base64 text part is decoded for BODY; the PDF is not text.
    assert!(s.text_contains(&m, "hello world", true));
    assert!(!s.text_contains(&m, "trailer", true));
    assert!(!s.text_contains(&m, "JVBERi0x", true));
    assert_eq!(s.sent_date(), Some(1_796_230_800));
}

#[test]
fn nested_message() {
    let m = crlf(FORWARD);
    let s = Structure::parse(&m);
    let inner_envelope = "('Mon, 7 Dec 2026 10:59:59 +0100' 'Lunch' (('Alice' NIL 'alice' 'example.org')) (('Alice' NIL 'alice' 'example.org')) (('Alice' NIL 'alice' 'example.org')) ((NIL NIL 'bob' 'example.com')) NIL NIL NIL '<123@example.org>')";
    assert_eq!(
        body_structure(&m, true),
        q(&format!(
            "(('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 3 0 NIL NIL NIL NIL)('message' 'rfc822' NIL NIL NIL '7bit' 156 {inner_envelope} ('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 15 0 NIL NIL NIL NIL) 6 NIL ('inline' NIL) NIL NIL) 'mixed' ('boundary' 'outer') NIL NIL NIL)"
        ))
    );
    assert_eq!(
        body_structure(&m, false),
        q(&format!(
            "(('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 3 0)('message' 'rfc822' NIL NIL NIL '7bit' 156 {inner_envelope} ('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 15 0) 6) 'mixed')"
        ))
    );
    let header = "From: Alice <alice@example.org>\r\nTo: bob@example.com\r\nSubject: Lunch\r\nDate: Mon, 7 Dec 2026 10:59:59 +0100\r\nMessage-ID: <123@example.org>\r\n\r\n";
    assert_eq!(section(&m, "2.HEADER").as_deref(), Some(header));
    assert_eq!(
        section(&m, "2").as_deref(),
        Some(&*format!("{header}Lunch tomorrow?"))
    );
    assert_eq!(section(&m, "2.TEXT").as_deref(), Some("Lunch tomorrow?"));
    assert_eq!(section(&m, "2.1").as_deref(), Some("Lunch tomorrow?"));
    assert_eq!(section(&m, "2.1.MIME").as_deref(), Some(header));
    assert_eq!(
        section(&m, "2.MIME").as_deref(),
        Some("Content-Type: message/rfc822\r\nContent-Disposition: inline\r\n\r\n")
    );
    assert_eq!(
        section(&m, "2.HEADER.FIELDS.NOT (from to date message-id)").as_deref(),
        Some("Subject: Lunch\r\n\r\n")
    );
    assert_eq!(section(&m, "1.HEADER"), None);
    assert_eq!(section(&m, "2.2"), None);
    assert!(s.header_contains(&m, "subject", "fwd:"));
    // SEARCH HEADER looks at the message's own header only.
    assert!(!s.header_contains(&m, "message-id", "123@"));
    assert!(s.text_contains(&m, "TOMORROW", true));
}

#[test]
fn encoded_words() {
    let m = crlf(ENCODED);
    let s = Structure::parse(&m);
    // The subject stays raw, unfolded; decoded names are encoded again.
    assert_eq!(
        envelope(&m),
        q(
            "('Fri, 4 Dec 2026 00:00:00 +0000' '=?ISO-8859-1?B?SWYgeW91IGNhbiByZWFkIHRoaXMgeW8=?= =?ISO-8859-2?B?dSB1bmRlcnN0YW5kIHRoZSBleGFtcGxlLg==?=' (('=?utf-8?q?Andr=C3=A9_Pirard?=' NIL 'PIRARD' 'vm1.ulg.ac.be')) (('=?utf-8?q?Andr=C3=A9_Pirard?=' NIL 'PIRARD' 'vm1.ulg.ac.be')) (('=?utf-8?q?Andr=C3=A9_Pirard?=' NIL 'PIRARD' 'vm1.ulg.ac.be')) (('=?utf-8?q?J=C3=BCrgen?=' NIL 'juergen' 'example.de')) NIL NIL NIL NIL)"
        )
    );
    assert!(s.header_contains(&m, "subject", "you can read this you understand"));
    assert!(s.header_contains(&m, "from", "andré pirard"));
    assert!(s.header_contains(&m, "to", "JÜRGEN"));
    assert!(!s.header_contains(&m, "subject", "SWYg"));
    assert!(s.text_contains(&m, "the example.", false));

    // RFC 6532: a raw UTF-8 name goes out as it is (a literal).
    let m = crlf("From: Jürgen <j@example.de>\nSubject: Grüße\n\nx\n");
    assert_eq!(
        envelope(&m),
        "(NIL {7}\r\nGrüße (({7}\r\nJürgen NIL \"j\" \"example.de\")) (({7}\r\nJürgen NIL \"j\" \"example.de\")) (({7}\r\nJürgen NIL \"j\" \"example.de\")) NIL NIL NIL NIL NIL)"
    );
    // A long decoded name is split into words of at most 75 characters.
    let long = format!("From: =?utf-8?q?{}?= <a@b.c>\n\nx\n", "=C3=A9".repeat(40));
    let mut out = Vec::new();
    Structure::parse(&crlf(&long)).write_envelope(&mut out);
    let text = String::from_utf8(out).expect("utf-8");
    let name = text.split('"').nth(1).expect("name");
    assert!(
        name.split(' ')
            .all(|w| w.len() <= 75 && w.starts_with("=?utf-8?q?")),
        "{name}"
    );
    assert_eq!(name.matches("=C3=A9").count(), 40);
}

#[test]
fn groups() {
    let m = crlf(GROUPS);
    assert_eq!(
        envelope(&m),
        q(
            "(NIL 'groups' ((NIL NIL 'alice' 'example.org')) ((NIL NIL 'alice' 'example.org')) ((NIL NIL 'alice' 'example.org')) ((NIL NIL 'undisclosed-recipients' NIL)(NIL NIL NIL NIL)) ((NIL NIL 'Team' NIL)(NIL NIL 'bob' 'example.com')('Carol C' NIL 'carol' 'example.com')(NIL NIL NIL NIL)(NIL NIL 'dave' 'example.net')) NIL NIL NIL)"
        )
    );
    let s = Structure::parse(&m);
    assert!(s.header_contains(&m, "cc", "carol c"));
    assert!(s.header_contains(&m, "cc", "team"));

    // Oddities: a bare local part, an empty address, a comment as the name.
    let m = crlf("From: bob\nTo: <>, a@b.c (Comment Name)\n\nx\n");
    assert_eq!(
        envelope(&m),
        q(
            "(NIL NIL ((NIL NIL 'bob' '')) ((NIL NIL 'bob' '')) ((NIL NIL 'bob' '')) (('Comment Name' NIL 'a' 'b.c')) NIL NIL NIL NIL)"
        )
    );
}

#[test]
fn missing_headers_and_defaults() {
    // No header at all: one text/plain body.
    let m = crlf("just some text\nand more\n");
    let s = Structure::parse(&m);
    assert_eq!(envelope(&m), "(NIL NIL NIL NIL NIL NIL NIL NIL NIL NIL)");
    assert_eq!(s.sent_date(), None);
    let bs = body_structure(&m, false);
    assert!(
        bs.starts_with(&q("('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' ")),
        "{bs}"
    );
    assert!(s.text_contains(&m, "AND MORE", true));

    // An empty message.
    assert_eq!(
        body_structure(b"", true),
        q("('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 0 0 NIL NIL NIL NIL)")
    );
    assert_eq!(section(b"", ""), Some(String::new()));

    // Only a subject; sender and reply-to empty: they repeat from (here NIL).
    let m = crlf("Subject: hi\nSender:\n\nbody\n");
    assert_eq!(
        envelope(&m),
        q("(NIL 'hi' NIL NIL NIL NIL NIL NIL NIL NIL)")
    );

    // A header without a body (no blank line).
    let m = crlf("Subject: hi\nFrom: a@b.c\n");
    assert_eq!(
        body_structure(&m, false),
        q("('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 0 0)")
    );
    assert_eq!(section(&m, "TEXT").as_deref(), Some(""));
    assert_eq!(
        section(&m, "HEADER.FIELDS (from)").as_deref(),
        Some("From: a@b.c\r\n\r\n")
    );

    // Unknown transfer encodings that are tokens are kept; others are 7bit; a
    // Content-Type without subtype is the default.
    let m = crlf("Content-Type: text\nContent-Transfer-Encoding: x-uuencode\n\nx\n");
    assert_eq!(
        body_structure(&m, false),
        q("('text' 'plain' ('charset' 'us-ascii') NIL NIL 'x-uuencode' 3 1)")
    );
    let m = crlf("Content-Type: image/png\nContent-Transfer-Encoding: base 64\n\nx\n");
    assert_eq!(
        body_structure(&m, false),
        q("('image' 'png' NIL NIL NIL '7bit' 3)")
    );
}

#[test]
fn digest_defaults_to_message() {
    let m = crlf(
        "Content-Type: multipart/digest; boundary=d\n\n--d\n\nFrom: a@b.c\nSubject: one\n\nfirst\n--d\nContent-Type: text/plain\n\nsecond\n--d--\n",
    );
    let bs = body_structure(&m, false);
    assert_eq!(
        bs,
        q(
            "(('message' 'rfc822' NIL NIL NIL '7bit' 34 (NIL 'one' ((NIL NIL 'a' 'b.c')) ((NIL NIL 'a' 'b.c')) ((NIL NIL 'a' 'b.c')) NIL NIL NIL NIL NIL) ('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 5 0) 3)('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 6 0) 'digest')"
        )
    );
    assert_eq!(
        section(&m, "1.HEADER.FIELDS (subject)").as_deref(),
        Some("Subject: one\r\n\r\n")
    );
    assert_eq!(section(&m, "1.1").as_deref(), Some("first"));
}

#[test]
fn mail_parser_assertions_are_contained() {
    // Reaches a debug assertion of mail-parser 0.11 ("Invalid part ID, could not find
    // multipart."): caught, and the message is described as one opaque body. (The
    // panic message the test prints is that assertion's, and expected.)
    let m = b"Content-Type:multipart/;boundary=outer\n\n--outerContent-Type:message/rfc822\nn\n\nr\nContent-Type:message/rfc822\n\n\n--outer--";
    exercise(m);
    assert!(Structure::parse(m).text_contains(m, "rfc822", true));
}

#[test]
fn malformed_mime() {
    // Truncated: no closing boundary, the last part runs to the end.
    let m = crlf(TRUNCATED);
    assert_eq!(
        body_structure(&m, true),
        q(
            "(('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 5 0 NIL NIL NIL NIL)('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 13 0 NIL NIL NIL NIL) 'mixed' ('boundary' 'b') NIL NIL NIL)"
        )
    );
    assert_eq!(section(&m, "2").as_deref(), Some("second (trunc"));

    // A multipart without boundary, and one whose boundary never appears: opaque.
    for m in [
        crlf("Content-Type: multipart/mixed\n\n--x\n\nhello\n--x--\n"),
        crlf("Content-Type: multipart/mixed; boundary=zz\n\n--x\n\nhello\n--x--\n"),
    ] {
        let bs = body_structure(&m, false);
        assert_eq!(
            bs,
            q("('application' 'octet-stream' NIL NIL NIL '7bit' 21)"),
            "{bs}"
        );
        assert_eq!(
            section(&m, "1").as_deref(),
            Some("--x\r\n\r\nhello\r\n--x--\r\n")
        );
        assert_eq!(section(&m, "1.1"), None);
    }

    // A base64-encoded message/rfc822 is not opened (RFC 2046 forbids the
    // encoding; its offsets would not be the stored bytes').
    let m = crlf(
        "Content-Type: message/rfc822\nContent-Transfer-Encoding: base64\n\nU3ViamVjdDogeA0KDQp5\n",
    );
    assert_eq!(
        body_structure(&m, false),
        q("('application' 'octet-stream' NIL NIL NIL '7bit' 22)")
    );

    // Header garbage: a line without colon, a field with an empty name.
    let m = crlf("Subject: ok\nthis is not a header\n: empty\n\nbody\n");
    let s = Structure::parse(&m);
    assert!(s.header_contains(&m, "subject", "ok"));
    let _ = body_structure(&m, true);
}

#[test]
fn lf_only_endings() {
    let m = PLAIN.as_bytes();
    let s = Structure::parse(m);
    assert_eq!(
        body_structure(m, false),
        q("('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 40 5)")
    );
    assert_eq!(
        section(m, "HEADER.FIELDS (subject)").as_deref(),
        Some("Subject: Lunch\n tomorrow?\n\r\n")
    );
    assert!(s.header_contains(m, "subject", "lunch tomorrow"));

    let m = FORWARD.as_bytes();
    assert_eq!(section(m, "2.TEXT").as_deref(), Some("Lunch tomorrow?"));
    assert_eq!(section(m, "1").as_deref(), Some("FYI"));
    let m = DOVECOT.as_bytes();
    let bs = body_structure(m, false);
    // Dovecot's sizes count CRLF; stored LF-only, each line is a byte shorter.
    assert!(bs.contains(&q("'7bit' 6 1)")), "{bs}");
    assert!(bs.contains(&q("'8bit' 19 1)")), "{bs}");
}

#[test]
fn cache_round_trip() {
    for m in [
        DOVECOT,
        PLAIN,
        ALTERNATIVE,
        MIXED,
        FORWARD,
        ENCODED,
        GROUPS,
        TRUNCATED,
        "",
    ] {
        let m = crlf(m);
        let s = Structure::parse(&m);
        let cached = s.to_cache();
        let back = Structure::from_cache(&cached).expect("round trip");
        assert_eq!(back, s);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        s.write_body_structure(&mut a, true);
        back.write_body_structure(&mut b, true);
        assert_eq!(a, b);
        // Every truncation, and trailing garbage, is rejected.
        for n in 0..cached.len() {
            assert_eq!(Structure::from_cache(&cached[..n]), None);
        }
        let mut longer = cached.clone();
        longer.push(0);
        assert_eq!(Structure::from_cache(&longer), None);
        let mut other = cached.clone();
        other[3] = 99;
        assert_eq!(Structure::from_cache(&other), None, "another version");
    }
    assert_eq!(Structure::from_cache(b""), None);
    assert_eq!(Structure::from_cache(b"garbage"), None);
}

/// How many inputs the random tests try: 1,000, or `STOA_MESSAGE_FUZZ` for a longer
/// run.
fn fuzz_iterations() -> usize {
    std::env::var("STOA_MESSAGE_FUZZ")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

/// The random tests' seed: fixed, or `STOA_MESSAGE_SEED` to explore.
fn fuzz_seed(fixed: u64) -> u64 {
    std::env::var("STOA_MESSAGE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(fixed)
}

/// Samples for the mutation tests.
fn samples() -> Vec<Vec<u8>> {
    [
        DOVECOT,
        PLAIN,
        ALTERNATIVE,
        MIXED,
        FORWARD,
        ENCODED,
        GROUPS,
        TRUNCATED,
    ]
    .iter()
    .flat_map(|m| [crlf(m), m.as_bytes().to_vec()])
    .collect()
}

/// Everything a server may call, on any input: nothing may panic.
fn exercise(m: &[u8]) {
    let s = Structure::parse(m);
    let mut out = Vec::new();
    s.write_envelope(&mut out);
    s.write_body_structure(&mut out, true);
    s.write_body_structure(&mut out, false);
    for spec in [
        "",
        "HEADER",
        "TEXT",
        "1",
        "1.MIME",
        "2",
        "2.HEADER",
        "2.TEXT",
        "2.1",
        "1.2.3",
        "3.1.MIME",
        "HEADER.FIELDS (subject from)",
        "1.HEADER.FIELDS.NOT (to)",
    ] {
        let _ = s.section(m, &parse_section(spec));
    }
    let _ = s.header_contains(m, "from", "a");
    let _ = s.header_contains(m, "subject", "é");
    let _ = s.text_contains(m, "the", true);
    let _ = s.text_contains(m, "x", false);
    let cached = s.to_cache();
    assert_eq!(Structure::from_cache(&cached).as_ref(), Some(&s));
}

#[test]
fn random_bytes_do_not_panic() {
    let mut rng = fastrand::Rng::with_seed(fuzz_seed(0x5354_4f41));
    for _ in 0..fuzz_iterations() {
        let len = rng.usize(0..600);
        let alphabet: &[u8] = b"\r\n\r\n:- ;=\"abcXYZ/<>@,()\t?";
        let m: Vec<u8> = (0..len)
            .map(|_| {
                if rng.bool() {
                    rng.u8(..)
                } else {
                    alphabet[rng.usize(..alphabet.len())]
                }
            })
            .collect();
        exercise(&m);
        // And the structure of one message against the bytes of another.
        let s = Structure::parse(&m);
        for other in [&b""[..], b"x", &m[..m.len() / 2]] {
            let _ = s.section(other, &parse_section("1"));
            let _ = s.section(other, &parse_section("HEADER.FIELDS (a)"));
            let _ = s.text_contains(other, "a", false);
        }
    }
}

#[test]
fn mutated_samples_do_not_panic() {
    let mut rng = fastrand::Rng::with_seed(fuzz_seed(7));
    let samples = samples();
    for i in 0..fuzz_iterations() {
        let mut m = samples[i % samples.len()].clone();
        for _ in 0..rng.usize(1..8) {
            if m.is_empty() {
                break;
            }
            let at = rng.usize(..m.len());
            match rng.u8(0..5) {
                0 => m[at] = rng.u8(..),
                1 => {
                    m.remove(at);
                }
                2 => m.insert(at, *b"\r\n-:;\" =".get(rng.usize(..8)).unwrap_or(&b'x')),
                3 => m.truncate(at),
                _ => {
                    let end = (at + rng.usize(..64)).min(m.len());
                    let chunk = m[at..end].to_vec();
                    let to = rng.usize(..=m.len());
                    m.splice(to..to, chunk);
                }
            }
        }
        exercise(&m);
        let cached = Structure::parse(&m).to_cache();
        let mut bad = cached.clone();
        if !bad.is_empty() {
            let at = rng.usize(..bad.len());
            bad[at] = rng.u8(..);
            if let Some(s) = Structure::from_cache(&bad) {
                exercise_structure(&s, &m);
            }
        }
    }
}

/// A structure (perhaps from a corrupted cache entry) against a message.
fn exercise_structure(s: &Structure, m: &[u8]) {
    let mut out = Vec::new();
    s.write_envelope(&mut out);
    s.write_body_structure(&mut out, true);
    for spec in ["", "TEXT", "1", "2.1", "1.MIME", "2.HEADER.FIELDS (x)"] {
        let _ = s.section(m, &parse_section(spec));
    }
    let _ = s.header_contains(m, "from", "a");
}

/// Runs `f` and fails if it takes longer than `limit` (debug build, shared machine:
/// the limits are generous; a quadratic blow-up takes orders of magnitude longer).
fn within(limit_ms: u128, what: &str, f: impl FnOnce()) {
    let start = std::time::Instant::now();
    f();
    let took = start.elapsed().as_millis();
    eprintln!("{what}: {took} ms");
    assert!(took < limit_ms, "{what} took {took} ms");
}

fn depth_of(bodystructure: &[u8]) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    for &b in bodystructure {
        match b {
            b'(' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

#[test]
fn deep_multipart_nesting_is_capped() {
    let mut m = Vec::new();
    for i in 0..5000 {
        m.extend_from_slice(
            format!("Content-Type: multipart/mixed; boundary=b{i}\r\n\r\n--b{i}\r\n").as_bytes(),
        );
    }
    m.extend_from_slice(b"Content-Type: text/plain\r\n\r\ndeep\r\n");
    within(20_000, "5000 nested multiparts", || {
        let s = Structure::parse(&m);
        let mut out = Vec::new();
        s.write_body_structure(&mut out, true);
        assert!(depth_of(&out) <= crate::MAX_DEPTH + 2, "{}", depth_of(&out));
        let path: Vec<u32> = vec![1; 50];
        let _ = s.section(
            &m,
            &Section {
                part: path,
                text: SectionText::Mime,
            },
        );
        let back = Structure::from_cache(&s.to_cache()).expect("cache");
        assert_eq!(back, s);
    });
}

#[test]
fn deep_message_nesting_is_capped() {
    for levels in [400, 900, 50_000] {
        let mut m = Vec::new();
        for _ in 0..levels {
            m.extend_from_slice(b"Content-Type: message/rfc822\r\n\r\n");
        }
        m.extend_from_slice(b"Subject: inner\r\n\r\nbody\r\n");
        within(20_000, "nested messages", || {
            let s = Structure::parse(&m);
            let mut out = Vec::new();
            s.write_body_structure(&mut out, true);
            assert!(
                depth_of(&out) <= 3 * crate::MAX_DEPTH + 10,
                "{}",
                depth_of(&out)
            );
            assert!(s.text_contains(&m, "body", true));
            assert_eq!(Structure::from_cache(&s.to_cache()).as_ref(), Some(&s));
        });
    }
}

#[test]
fn many_parts_and_headers() {
    // 20,000 parts: the first MAX_PARTS are described.
    let mut m = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n".to_vec();
    for i in 0..20_000 {
        m.extend_from_slice(
            format!("--b\r\nContent-Type: text/plain\r\n\r\npart {i}\r\n").as_bytes(),
        );
    }
    m.extend_from_slice(b"--b--\r\n");
    within(30_000, "20,000 parts", || {
        let s = Structure::parse(&m);
        let mut out = Vec::new();
        s.write_body_structure(&mut out, false);
        let parts = out.windows(6).filter(|w| w == b"\"text\"").count();
        assert_eq!(parts, crate::MAX_PARTS - 1);
        let nth = |n: u32| {
            s.section(
                &m,
                &Section {
                    part: vec![n],
                    text: SectionText::Full,
                },
            )
        };
        assert_eq!(nth(5).as_deref(), Some(&b"part 4"[..]));
        assert_eq!(nth(20_000), None);
    });

    // 200,000 header fields.
    let mut m = Vec::new();
    for i in 0..200_000 {
        m.extend_from_slice(format!("X-Header-{i}: value {i}\r\n").as_bytes());
    }
    m.extend_from_slice(b"Subject: last\r\n\r\nbody\r\n");
    within(30_000, "200,000 header fields", || {
        let s = Structure::parse(&m);
        let mut out = Vec::new();
        s.write_envelope(&mut out);
        assert!(out.starts_with(b"(NIL \"last\""));
        assert!(s.header_contains(&m, "subject", "LAST"));
        assert!(s.text_contains(&m, "value 199999", false));
        let fields = s
            .section(&m, &parse_section("HEADER.FIELDS.NOT (subject)"))
            .expect("fields");
        assert_eq!(
            fields.len(),
            m.len() - b"Subject: last\r\n\r\nbody\r\n".len() + 2
        );
    });
}

#[test]
fn long_boundaries_and_lines() {
    // A 64 KiB boundary and a megabyte of near-misses.
    let boundary = "-".repeat(65_536);
    let mut m = format!(
        "Content-Type: multipart/mixed; boundary=\"{boundary}\"\r\n\r\n--{boundary}\r\n\r\n"
    )
    .into_bytes();
    for _ in 0..16 {
        m.extend_from_slice(b"--");
        m.extend_from_slice(&boundary.as_bytes()[1..]);
        m.extend_from_slice(b"x\r\n");
    }
    m.extend_from_slice(&vec![b'-'; 1 << 20]);
    within(30_000, "long boundary", || {
        exercise(&m);
    });
    // One megabyte-long header line and body line.
    let mut m = b"Subject: ".to_vec();
    m.extend_from_slice(&vec![b'a'; 1 << 20]);
    m.extend_from_slice(b"\r\n\r\n");
    m.extend_from_slice(&vec![b'='; 1 << 20]);
    within(30_000, "long lines", || exercise(&m));
}

#[test]
fn many_multiparts_without_boundaries() {
    // Each multipart whose boundary never comes makes mail-parser scan to the end:
    // quadratic. Such a message is described as one opaque body, quickly.
    // The last spelling is one mail-parser reads as Content-Type too.
    for (n, field) in [
        (4_000usize, "Content-Type"),
        (40_000, "Content-Type"),
        (4_000, " :Content - TYPE"),
    ] {
        let mut m = b"Subject: x\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n".to_vec();
        for i in 0..n {
            m.extend_from_slice(
                format!("--b\r\n{field}: multipart/mixed; boundary=zz{i}\r\n\r\nxx\r\n").as_bytes(),
            );
        }
        within(
            10_000,
            &format!("{n} missing boundaries ({} bytes)", m.len()),
            || {
                let s = Structure::parse(&m);
                exercise(&m);
                if n == 40_000 {
                    assert_eq!(
                        body_structure(&m, false),
                        q(&format!(
                            "('application' 'octet-stream' NIL NIL NIL '7bit' {})",
                            m.len() - 57
                        ))
                    );
                    assert!(s.header_contains(&m, "subject", "x"));
                    assert!(s.text_contains(&m, "zz39999", true));
                }
            },
        );
    }
    // A field folded over 100,000 lines that each look like a Content-Type field.
    let mut m = b"Subject: x\r\nContent-Type: text/plain;\r\n".to_vec();
    for i in 0..100_000 {
        m.extend_from_slice(
            format!(" Content-Type: multipart/mixed; boundary=zz{i};\r\n").as_bytes(),
        );
    }
    m.extend_from_slice(b"\r\nbody\r\n");
    within(10_000, "100,000 folded look-alike fields", || exercise(&m));

    // The same with a long boundary.
    let boundary = "-".repeat(300);
    let m = format!(
        "Content-Type: multipart/mixed; boundary=\"{boundary}\"\r\n\r\n--{boundary}\r\n\r\nx\r\n--{boundary}--\r\n"
    );
    assert_eq!(
        body_structure(m.as_bytes(), false),
        q(&format!(
            "('application' 'octet-stream' NIL NIL NIL '7bit' {})",
            m.len() - 346
        ))
    );
}

#[test]
fn many_encoded_words_and_parameters() {
    let mut m = b"Subject:".to_vec();
    for _ in 0..50_000 {
        m.extend_from_slice(b" =?utf-8?q?caf=C3=A9?=\r\n");
    }
    m.extend_from_slice(b"From:");
    for i in 0..20_000 {
        m.extend_from_slice(
            format!(" =?utf-8?q?J=C3=BCrgen_{i}?= <j{i}@example.de>,\r\n").as_bytes(),
        );
    }
    m.extend_from_slice(b"Content-Type: text/plain; charset=utf-8");
    for i in (0..20_000).rev() {
        m.extend_from_slice(format!(";\r\n name*{i}*=utf-8''%C3%A9{i}").as_bytes());
    }
    for i in 0..10_000 {
        m.extend_from_slice(format!(";\r\n p{i}=\"=?utf-8?q?=C3=A9?=\"").as_bytes());
    }
    m.extend_from_slice(b"\r\n\r\nbody\r\n");
    within(30_000, "many encoded words and parameters", || {
        let s = Structure::parse(&m);
        let mut out = Vec::new();
        s.write_envelope(&mut out);
        s.write_body_structure(&mut out, true);
        assert!(s.header_contains(&m, "subject", "cafécafé"));
        assert!(s.header_contains(&m, "from", "jürgen 19999"));
        assert_eq!(Structure::from_cache(&s.to_cache()).as_ref(), Some(&s));
    });
}

#[test]
fn nested_multipart_sections() {
    let m = crlf(
        "Content-Type: multipart/mixed; boundary=\"o\"

--o
Content-Type: multipart/alternative; boundary=\"i\"

--i
Content-Type: text/plain

plain
--i
Content-Type: text/html

<b>html</b>
--i--

--o
Content-Type: image/gif
Content-Transfer-Encoding: base64
Content-ID: <img1@x>

R0lGODlh
--o--
",
    );
    assert_eq!(
        body_structure(&m, true),
        q(
            "((('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 5 0 NIL NIL NIL NIL)('text' 'html' ('charset' 'us-ascii') NIL NIL '7bit' 11 0 NIL NIL NIL NIL) 'alternative' ('boundary' 'i') NIL NIL NIL)('image' 'gif' NIL '<img1@x>' NIL 'base64' 8 NIL NIL NIL NIL) 'mixed' ('boundary' 'o') NIL NIL NIL)"
        )
    );
    assert_eq!(
        section(&m, "1").as_deref(),
        Some(
            "--i\r\nContent-Type: text/plain\r\n\r\nplain\r\n--i\r\nContent-Type: text/html\r\n\r\n<b>html</b>\r\n--i--\r\n"
        )
    );
    assert_eq!(
        section(&m, "1.MIME").as_deref(),
        Some("Content-Type: multipart/alternative; boundary=\"i\"\r\n\r\n")
    );
    assert_eq!(section(&m, "1.1").as_deref(), Some("plain"));
    assert_eq!(section(&m, "1.2").as_deref(), Some("<b>html</b>"));
    assert_eq!(
        section(&m, "1.2.MIME").as_deref(),
        Some("Content-Type: text/html\r\n\r\n")
    );
    assert_eq!(section(&m, "2").as_deref(), Some("R0lGODlh"));
    assert_eq!(section(&m, "1.3"), None);
    assert_eq!(section(&m, "1.TEXT"), None);
    assert_eq!(section(&m, "2.1"), None);
}

#[test]
fn top_level_message_rfc822() {
    let m = crlf("Content-Type: message/rfc822\n\nSubject: in\n\nbody");
    assert_eq!(
        body_structure(&m, false),
        q(
            "('message' 'rfc822' NIL NIL NIL '7bit' 19 (NIL 'in' NIL NIL NIL NIL NIL NIL NIL NIL) ('text' 'plain' ('charset' 'us-ascii') NIL NIL '7bit' 4 0) 2)"
        )
    );
    assert_eq!(section(&m, "1").as_deref(), Some("Subject: in\r\n\r\nbody"));
    assert_eq!(
        section(&m, "1.HEADER").as_deref(),
        Some("Subject: in\r\n\r\n")
    );
    assert_eq!(section(&m, "1.TEXT").as_deref(), Some("body"));
    assert_eq!(section(&m, "1.1").as_deref(), Some("body"));
    assert_eq!(section(&m, "1.2"), None);
    assert_eq!(
        section(&m, "TEXT").as_deref(),
        Some("Subject: in\r\n\r\nbody")
    );
}

#[test]
fn line_index_counts_like_a_scan() {
    use crate::structure::{LineIndex, Span};
    let mut rng = fastrand::Rng::with_seed(3);
    let m: Vec<u8> = (0..20_000)
        .map(|_| if rng.u8(..8) == 0 { b'\n' } else { b'a' })
        .collect();
    let index = LineIndex::new(&m);
    for _ in 0..2_000 {
        let start = rng.u32(0..=20_000);
        let end = rng.u32(start..=20_000 + 10);
        let expected = m.get(start as usize..(end as usize).min(m.len()));
        let expected = expected.map_or(0, |b| b.iter().filter(|&&b| b == b'\n').count());
        assert_eq!(
            index.count(Span { start, end }) as usize,
            expected,
            "{start}..{end}"
        );
    }
}

#[test]
fn ordinary_messages_are_not_too_costly() {
    for m in samples() {
        assert!(!crate::structure::too_costly(&m));
    }
    // A big attachment, and a few multiparts whose boundary is missing.
    let mut m = crlf(MIXED);
    let at = m.len() - b"--mix--\r\n".len();
    let big: Vec<u8> = b"QUJD".iter().copied().cycle().take(8 << 20).collect();
    m.splice(at..at, big);
    assert!(!crate::structure::too_costly(&m));
    let mut m = b"Content-Type: multipart/mixed; boundary=b\r\n\r\n".to_vec();
    for i in 0..4 {
        m.extend_from_slice(
            format!("--b\r\nContent-Type: multipart/mixed; boundary=z{i}\r\n\r\n").as_bytes(),
        );
        m.extend_from_slice(&[b'x'; 100_000]);
        m.extend_from_slice(b"\r\n");
    }
    assert!(!crate::structure::too_costly(&m));
}

/// imaptest's envelope cases, as Dovecot's test-imap-envelope.c carries them.
#[test]
fn imaptest_envelopes() {
    let cases = [
        (
            "Message-ID: <msg@id>\nIn-Reply-To: <reply@to.id>\nDate: Thu, 15 Feb 2007 01:02:03 +0200\nSubject: subject header\nFrom: From Real <fromuser@fromdomain.org>\nTo: To Real <touser@todomain.org>\nCc: Cc Real <ccuser@ccdomain.org>\nBcc: Bcc Real <bccuser@bccdomain.org>\nSender: Sender Real <senderuser@senderdomain.org>\nReply-To: ReplyTo Real <replytouser@replytodomain.org>\n\nbody\n",
            "('Thu, 15 Feb 2007 01:02:03 +0200' 'subject header' (('From Real' NIL 'fromuser' 'fromdomain.org')) (('Sender Real' NIL 'senderuser' 'senderdomain.org')) (('ReplyTo Real' NIL 'replytouser' 'replytodomain.org')) (('To Real' NIL 'touser' 'todomain.org')) (('Cc Real' NIL 'ccuser' 'ccdomain.org')) (('Bcc Real' NIL 'bccuser' 'bccdomain.org')) '<reply@to.id>' '<msg@id>')",
        ),
        (
            "Date: Thu, 15 Feb 2007 01:02:03 +0200\nFrom: user@domain\n\nbody\n",
            "('Thu, 15 Feb 2007 01:02:03 +0200' NIL ((NIL NIL 'user' 'domain')) ((NIL NIL 'user' 'domain')) ((NIL NIL 'user' 'domain')) NIL NIL NIL NIL NIL)",
        ),
        (
            "Date: Thu, 15 Feb 2007 01:02:03 +0200\nFrom: user@domain (Real Name)\nTo: group: g1@d1.org, g2@d2.org;, group2: g3@d3.org;\nCc: group:;, group2: (foo) ;\n\nbody\n",
            "('Thu, 15 Feb 2007 01:02:03 +0200' NIL (('Real Name' NIL 'user' 'domain')) (('Real Name' NIL 'user' 'domain')) (('Real Name' NIL 'user' 'domain')) ((NIL NIL 'group' NIL)(NIL NIL 'g1' 'd1.org')(NIL NIL 'g2' 'd2.org')(NIL NIL NIL NIL)(NIL NIL 'group2' NIL)(NIL NIL 'g3' 'd3.org')(NIL NIL NIL NIL)) ((NIL NIL 'group' NIL)(NIL NIL NIL NIL)(NIL NIL 'group2' NIL)(NIL NIL NIL NIL)) NIL NIL NIL)",
        ),
        (
            "Date: Thu, 15 Feb 2007 01:02:03 +0200\nFrom: user@domain (Real Name)\nSender: \nReply-To: \n\nbody\n",
            "('Thu, 15 Feb 2007 01:02:03 +0200' NIL (('Real Name' NIL 'user' 'domain')) (('Real Name' NIL 'user' 'domain')) (('Real Name' NIL 'user' 'domain')) NIL NIL NIL NIL NIL)",
        ),
    ];
    for (message, expected) in cases {
        assert_eq!(envelope(&crlf(message)), q(expected));
        assert_eq!(envelope(message.as_bytes()), q(expected));
    }
    // The obsolete source route goes in the adl.
    let m = "Date: Thu, 15 Feb 2007 01:02:03 +0200\nFrom: <@route:user@domain>\n\nbody\n";
    assert_eq!(
        envelope(&crlf(m)),
        q(
            "('Thu, 15 Feb 2007 01:02:03 +0200' NIL ((NIL '@route' 'user' 'domain')) ((NIL '@route' 'user' 'domain')) ((NIL '@route' 'user' 'domain')) NIL NIL NIL NIL NIL)"
        )
    );
}
