//! Header fields Stoa writes: the `Received:` trace field and RFC 5322 dates.

use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

/// The `Received:` field prepended to a message (RFC 5321 §4.4, with the `with`
/// protocol of RFC 3848), folded over three lines:
///
/// ```text
/// Received: from client.example ([192.0.2.1])
///         by mx.example (Stoa) with ESMTPS id 19A2B3C4D5E6F7A8B9C0D
///         for <ann@example.com>; Thu, 01 Jan 2026 12:00:00 +0000
/// ```
///
/// `for` is given only with a single recipient (more would disclose the others).
/// The HELO name and the recipient are the client's words: every byte outside a
/// conservative set is replaced, so they cannot end the field or forge another.
pub(crate) fn received(
    helo: &str,
    peer: IpAddr,
    hostname: &str,
    protocol: &str,
    id: &str,
    recipient: Option<&str>,
    when: SystemTime,
) -> String {
    let literal = match peer {
        IpAddr::V4(ip) => format!("[{ip}]"),
        IpAddr::V6(ip) => format!("[IPv6:{ip}]"),
    };
    let mut field = format!(
        "Received: from {} ({literal})\r\n\tby {} (Stoa) with {protocol} id {id}",
        clean(helo),
        clean(hostname)
    );
    if let Some(rcpt) = recipient {
        field.push_str(&format!("\r\n\tfor <{}>", clean(rcpt)));
    }
    field.push_str(&format!("; {}\r\n", rfc5322_date(when)));
    field
}

/// `text` with every byte that is not a letter, digit or one of `.-_@:[]+=%!"`
/// replaced by `?`; empty text becomes `unknown`.
fn clean(text: &str) -> String {
    if text.is_empty() {
        return "unknown".to_owned();
    }
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_@:[]+=%!\"".contains(c) {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// An RFC 5322 date in UTC: `Thu, 01 Jan 2026 12:00:00 +0000`.
pub(crate) fn rfc5322_date(when: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let secs = when.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    let weekday = DAYS[usize::try_from((days + 4).rem_euclid(7)).unwrap_or(0)];
    format!(
        "{weekday}, {day:02} {} {year} {:02}:{:02}:{:02} +0000",
        MONTHS[usize::try_from(month - 1).unwrap_or(0)],
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// (year, month 1–12, day 1–31) of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
pub(crate) fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The header section of a message (up to and including the empty line), or all of
/// `message` if it has no body.
pub(crate) fn header_section(message: &[u8]) -> &[u8] {
    if message.starts_with(b"\r\n") {
        return &message[..2];
    }
    match memchr::memmem::find(message, b"\r\n\r\n") {
        Some(i) => &message[..i + 4],
        None => message,
    }
}

/// The `Return-Path:` field of a final delivery (RFC 5321 §4.4): the envelope
/// sender, `<>` for the null sender, with anything that could end the field
/// replaced.
pub(crate) fn return_path(sender: &str) -> String {
    format!("Return-Path: <{}>\r\n", address_text(sender))
}

/// `address` as a trace field writes it: every byte that could end the field
/// or the angle brackets around it (a blank, a control, `<`, `>`, non-ASCII)
/// replaced by `?`.
fn address_text(address: &str) -> String {
    (address.chars())
        .map(|c| {
            if c.is_ascii_graphic() && c != '<' && c != '>' {
                c
            } else {
                '?'
            }
        })
        .collect()
}

/// Whether `line` starts a header field named `name` (lowercase, without the
/// colon; blanks before the colon allowed, as RFC 5322's obsolete syntax does).
fn is_named(line: &[u8], name: &[u8]) -> bool {
    line.len() > name.len()
        && line[..name.len()].eq_ignore_ascii_case(name)
        && line[name.len()..]
            .iter()
            .find(|&&b| b != b' ' && b != b'\t')
            == Some(&b':')
}

/// Whether the header section `header` has a field named `name` (lowercase,
/// without the colon).
pub(crate) fn has_field(header: &[u8], name: &[u8]) -> bool {
    header
        .split(|&b| b == b'\n')
        .any(|line| is_named(line, name))
}

/// The `Delivered-To:` field of a final delivery to `address`, with anything
/// that could end the field replaced.
pub(crate) fn delivered_to(address: &str) -> String {
    format!("Delivered-To: {}\r\n", address_text(address))
}

/// `message` without the header fields named `name` (lowercase, without the
/// colon), continuation lines included; `None` when it has none (no copy).
pub(crate) fn without_field(message: &[u8], name: &[u8]) -> Option<Vec<u8>> {
    let header = header_section(message);
    if !has_field(header, name) {
        return None;
    }
    let mut out = Vec::with_capacity(message.len());
    let mut dropping = false;
    let mut rest = message;
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        let (line, tail) = rest.split_at(end);
        if line == b"\r\n" || line == b"\n" {
            break;
        }
        let continuation = matches!(line.first(), Some(b' ' | b'\t'));
        if !continuation {
            dropping = is_named(line, name);
        }
        if !dropping {
            out.extend_from_slice(line);
        }
        rest = tail;
    }
    out.extend_from_slice(rest);
    Some(out)
}

/// How many `Received:` fields the header section of `message` holds.
pub(crate) fn count_received(message: &[u8]) -> usize {
    header_section(message)
        .split(|&b| b == b'\n')
        .filter(|line| line.len() >= 9 && line[..9].eq_ignore_ascii_case(b"received:"))
        .count()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn return_path_replaces_the_message_own() {
        assert_eq!(
            return_path("ann@ext.test"),
            "Return-Path: <ann@ext.test>\r\n"
        );
        assert_eq!(return_path(""), "Return-Path: <>\r\n");
        assert_eq!(return_path("a\r\nX: y"), "Return-Path: <a??X:?y>\r\n");
        let m = b"Return-Path: <forged@x>\r\nSubject: s\r\nreturn-path : <a>\r\n b\r\n\r\nReturn-Path: body\r\n";
        assert_eq!(
            without_field(m, b"return-path").as_deref(),
            Some(&b"Subject: s\r\n\r\nReturn-Path: body\r\n"[..])
        );
        assert_eq!(without_field(b"Subject: s\r\n\r\nb", b"return-path"), None);
        assert_eq!(
            without_field(b"Return-Pathx: s\r\n\r\n", b"return-path"),
            None
        );
    }

    #[test]
    fn dates() {
        let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
        assert_eq!(rfc5322_date(at(0)), "Thu, 01 Jan 1970 00:00:00 +0000");
        assert_eq!(
            rfc5322_date(at(951_782_400)),
            "Tue, 29 Feb 2000 00:00:00 +0000"
        );
        assert_eq!(
            rfc5322_date(at(1_767_225_600 + 3661)),
            "Thu, 01 Jan 2026 01:01:01 +0000"
        );
    }

    #[test]
    fn fields_are_found_by_name_in_any_case() {
        let header = b"From: a\r\nmessage-ID : <x@y>\r\nSubject: Date: no\r\n\r\n";
        assert!(has_field(header, b"message-id"));
        assert!(has_field(header, b"from"));
        assert!(!has_field(header, b"date"));
        assert!(!has_field(b"Dates: x\r\n\r\n", b"date"));
    }

    #[test]
    fn received_field() {
        let field = received(
            "client.example",
            "192.0.2.1".parse().expect("ip"),
            "mx.example",
            "ESMTPS",
            "ID1",
            Some("ann@example.com"),
            UNIX_EPOCH,
        );
        assert_eq!(
            field,
            "Received: from client.example ([192.0.2.1])\r\n\tby mx.example (Stoa) with \
             ESMTPS id ID1\r\n\tfor <ann@example.com>; Thu, 01 Jan 1970 00:00:00 +0000\r\n"
        );
        let forged = received(
            "x>\r\nReceived: evil",
            "::1".parse().expect("ip"),
            "h",
            "SMTP",
            "I",
            None,
            UNIX_EPOCH,
        );
        assert!(forged.starts_with("Received: from x???Received:?evil ([IPv6:::1])\r\n"));
        assert_eq!(forged.matches("\r\n").count(), 2);
    }

    #[test]
    fn received_count() {
        let m = b"Received: a\r\nreceived: b\r\n\tc\r\nSubject: x\r\n\r\nReceived: body\r\n";
        assert_eq!(count_received(m), 2);
        assert_eq!(count_received(b"\r\nReceived: x\r\n"), 0);
    }
}
