//! `BODY[section]`: the bytes a section names (RFC 9051 §6.4.5).

use std::borrow::Cow;

use stoa_imap_proto::{Section, SectionText};

use crate::structure::{Kind, Msg, Part, Structure};

/// Where a part path leads: the message itself (empty path) or a part.
#[derive(Clone, Copy)]
enum Node<'s> {
    Message(&'s Msg),
    Part(&'s Part),
}

impl Structure {
    /// The bytes of `BODY[section]` of `message` (the bytes this structure was parsed
    /// from), `None` when the section names no part of it: a part number past the
    /// last, a part inside a leaf, `HEADER`, `TEXT` or `HEADER.FIELDS` of a part that
    /// is not `message/rfc822`, `MIME` without a part. The server sends `NIL` or an
    /// empty string for `None`, its choice.
    ///
    /// - `[]`: the whole message; `[HEADER]`: its header with the blank line;
    ///   `[TEXT]`: its body.
    /// - `[1]`, `[1.2]`: a part's body (its content, without its MIME header, still
    ///   transfer-encoded); `[1]` of a message that is not multipart is its body.
    /// - `[1.MIME]`: a part's MIME header with the blank line.
    /// - `[2.HEADER]`, `[2.TEXT]`, `[2.HEADER.FIELDS (..)]` when part 2 is
    ///   `message/rfc822`: the encapsulated message's header or body; `[2.1]` its
    ///   first part.
    /// - `[HEADER.FIELDS (A B)]` and `.NOT`: the matching (or other) fields, each with
    ///   its continuation lines, in message order, then a blank line (CRLF).
    pub fn section<'m>(&self, message: &'m [u8], section: &Section) -> Option<Cow<'m, [u8]>> {
        let mut node = Node::Message(&self.message);
        for &n in &section.part {
            let index = usize::try_from(n).ok()?.checked_sub(1)?;
            let container = match node {
                Node::Message(m) => &m.root,
                Node::Part(p) => match &p.kind {
                    Kind::Message(m) => &m.root,
                    Kind::Multipart(children) => {
                        node = Node::Part(children.get(index)?);
                        continue;
                    }
                    Kind::Single => return None,
                },
            };
            // The parts of a message: its root's children when it is a multipart,
            // else the root itself, as part 1.
            node = Node::Part(match &container.kind {
                Kind::Multipart(children) => children.get(index)?,
                _ if index == 0 => container,
                _ => return None,
            });
        }
        match &section.text {
            SectionText::Full => match node {
                Node::Message(_) => Some(Cow::Borrowed(message)),
                Node::Part(p) => p.body.of(message).map(Cow::Borrowed),
            },
            SectionText::Mime => match node {
                Node::Message(_) => None,
                Node::Part(p) => p.header.of(message).map(Cow::Borrowed),
            },
            SectionText::Header => message_of(node)?.root.header.of(message).map(Cow::Borrowed),
            SectionText::Text => {
                let inner = message_of(node)?;
                match node {
                    // An encapsulated message's text runs to the end of the part
                    // that holds it, past its own multipart's closing boundary
                    // (the epilogue is text too).
                    Node::Part(p) => {
                        let start = inner.root.body.start as usize;
                        let end = (p.body.end as usize).min(message.len());
                        message.get(start..end).map(Cow::Borrowed)
                    }
                    Node::Message(_) => inner.root.body.of(message).map(Cow::Borrowed),
                }
            }
            SectionText::HeaderFields { names, not } => {
                let header = message_of(node)?.root.header.of(message)?;
                Some(Cow::Owned(header_fields(header, names, *not)))
            }
        }
    }
}

/// The message a node is, if it is one: the message itself or a `message/rfc822` part.
fn message_of(node: Node<'_>) -> Option<&Msg> {
    match node {
        Node::Message(m) => Some(m),
        Node::Part(p) => match &p.kind {
            Kind::Message(m) => Some(m),
            _ => None,
        },
    }
}

/// The fields of `header` named in `names` (or, with `not`, the others), each with its
/// continuation lines, then a blank line.
pub(crate) fn header_fields(header: &[u8], names: &[String], not: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for field in fields(header) {
        let name = field_name(field);
        let named = names
            .iter()
            .any(|n| n.as_bytes().eq_ignore_ascii_case(name));
        if named != not {
            out.extend_from_slice(field);
            if !field.ends_with(b"\n") {
                out.extend_from_slice(b"\r\n");
            }
        }
    }
    out.extend_from_slice(b"\r\n");
    out
}

/// The raw fields of a header block, each with its continuation lines and line
/// breaks, up to the blank line.
pub(crate) fn fields(header: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut rest = header;
    std::iter::from_fn(move || {
        if rest.is_empty() || rest.starts_with(b"\r\n") || rest.starts_with(b"\n") {
            return None;
        }
        let mut end = 0;
        loop {
            end = match memchr::memchr(b'\n', &rest[end..]) {
                Some(i) => end + i + 1,
                None => rest.len(),
            };
            if !matches!(rest.get(end), Some(b' ' | b'\t')) {
                break;
            }
        }
        let (field, tail) = rest.split_at(end);
        rest = tail;
        Some(field)
    })
}

/// The name of a raw field: what precedes the colon, without trailing white space
/// (the whole field when it has no colon: it then matches no name).
pub(crate) fn field_name(field: &[u8]) -> &[u8] {
    match memchr::memchr(b':', field) {
        Some(i) => {
            let name = &field[..i];
            let end = name
                .iter()
                .rposition(|&b| b != b' ' && b != b'\t')
                .map_or(0, |e| e + 1);
            &name[..end]
        }
        None => field,
    }
}
