//! What SEARCH needs: header and text matching on decoded values.

use mail_parser::parsers::MessageStream;
use mail_parser::{Address, HeaderValue, MessageParser, PartType};

use crate::structure::{Structure, guarded, too_costly, unfold};

impl Structure {
    /// SEARCH `HEADER field needle` (and FROM, TO, CC, BCC, SUBJECT): whether a
    /// `field` header of the message contains `needle`, case-insensitively, in its
    /// RFC 2047-decoded, unfolded value. Address fields also match on each address's
    /// decoded display name and its address. An empty `needle` matches any message
    /// that has the field.
    pub fn header_contains(&self, message: &[u8], field: &str, needle: &str) -> bool {
        let Some(header) = self.message.root.header.of(message) else {
            return false;
        };
        let needle = needle.to_lowercase();
        parse_fields(header)
            .iter()
            .filter(|h| h.name.as_str().eq_ignore_ascii_case(field.trim()))
            .any(|h| {
                needle.is_empty()
                    || decoded_values(header, h)
                        .iter()
                        .any(|v| v.to_lowercase().contains(&needle))
            })
    }

    /// SEARCH `BODY needle` (`body_only`) or `TEXT needle`: whether the decoded text
    /// of the message contains `needle`, case-insensitively. The body text is that of
    /// every text part, encapsulated messages' included, with its transfer encoding
    /// (base64, quoted-printable) undone and its charset converted to UTF-8 where
    /// mail-parser knows it; `TEXT` adds the message header, raw and decoded.
    pub fn text_contains(&self, message: &[u8], needle: &str, body_only: bool) -> bool {
        let needle = needle.to_lowercase();
        if needle.is_empty() {
            return true;
        }
        let contains = |text: &str| text.to_lowercase().contains(&needle);
        if !body_only && let Some(header) = self.message.root.header.of(message) {
            if contains(&String::from_utf8_lossy(&unfold(header))) {
                return true;
            }
            if parse_fields(header)
                .iter()
                .any(|h| decoded_values(header, h).iter().any(|v| contains(v)))
            {
                return true;
            }
        }
        let raw_body = || {
            self.message
                .root
                .body
                .of(message)
                .is_some_and(|b| contains(&String::from_utf8_lossy(b)))
        };
        if too_costly(message) {
            // Not split into parts (see Structure::parse): the raw body.
            return raw_body();
        }
        let Some(parsed) = guarded(|| MessageParser::default().parse(message)) else {
            return raw_body();
        };
        let Some(parsed) = parsed else {
            return contains(&String::from_utf8_lossy(message));
        };
        // Encapsulated messages on a stack, not by recursion.
        let mut stack = vec![&parsed];
        while let Some(m) = stack.pop() {
            for part in &m.parts {
                match &part.body {
                    PartType::Text(text) | PartType::Html(text) if contains(text) => return true,
                    PartType::Message(inner) => stack.push(inner),
                    _ => {}
                }
            }
        }
        false
    }
}

/// The fields of a header block as mail-parser reads them (none if it panics).
fn parse_fields(header: &[u8]) -> Vec<mail_parser::Header<'_>> {
    guarded(|| {
        let mut fields = Vec::new();
        MessageStream::new(header).parse_headers(&MessageParser::default(), &mut fields);
        fields
    })
    .unwrap_or_default()
}

/// The decoded forms of a header's value that a search looks in: the RFC 2047-decoded
/// unfolded text, and for addresses each display name and address.
fn decoded_values(header: &[u8], h: &mail_parser::Header<'_>) -> Vec<String> {
    let start = (h.offset_start as usize).min(header.len());
    let end = (h.offset_end as usize).clamp(start, header.len());
    let mut out = Vec::new();
    match guarded(|| MessageStream::new(&header[start..end]).parse_unstructured()) {
        Some(HeaderValue::Text(t)) => out.push(t.into_owned()),
        _ => out.push(String::from_utf8_lossy(&unfold(&header[start..end])).into_owned()),
    }
    let add = |out: &mut Vec<String>, a: &mail_parser::Addr<'_>| {
        out.extend(a.name.as_deref().map(str::to_owned));
        out.extend(a.address.as_deref().map(str::to_owned));
    };
    match &h.value {
        HeaderValue::Address(Address::List(list)) => list.iter().for_each(|a| add(&mut out, a)),
        HeaderValue::Address(Address::Group(groups)) => {
            for g in groups {
                out.extend(g.name.as_deref().map(str::to_owned));
                g.addresses.iter().for_each(|a| add(&mut out, a));
            }
        }
        _ => {}
    }
    out
}
