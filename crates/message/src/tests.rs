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
