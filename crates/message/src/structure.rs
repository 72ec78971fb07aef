//! [`Structure`]: the part tree of a message and its envelope, built once from
//! mail-parser's parse and owned (nothing borrows the message).

use std::collections::HashSet;

use mail_parser::parsers::MessageStream;
use mail_parser::{
    Addr, Address as MpAddress, Encoding, Header, HeaderValue, MessageParser, PartType,
};

/// How deep parts may nest (multiparts and encapsulated messages together) before
/// the parts below are described as opaque `application/octet-stream` leaves.
pub const MAX_DEPTH: usize = 100;

/// How many parts a message may have before the parts after them are described as
/// opaque leaves (Dovecot's default limit is the same).
pub const MAX_PARTS: usize = 10_000;

/// How many `message/*` or `multipart/digest` Content-Type fields a message may
/// have before it is not split into parts at all: mail-parser nests encapsulated
/// messages recursively (and drops them so), and each level needs one such field.
pub(crate) const MAX_MESSAGE_FIELDS: usize = 500;

/// The longest multipart boundary accepted (RFC 2046 allows 70 characters; mail-parser
/// compares the boundary at every `--` of the body).
pub(crate) const MAX_BOUNDARY: usize = 200;

/// A byte range of the stored message, `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) end: u32,
}

impl Span {
    /// The bytes of this span in `message`, `None` when it lies outside (a cache
    /// entry for another message).
    pub(crate) fn of<'m>(&self, message: &'m [u8]) -> Option<&'m [u8]> {
        message.get(self.start as usize..self.end as usize)
    }

    pub(crate) fn len(&self) -> u32 {
        self.end.saturating_sub(self.start)
    }

    /// `start..end` clamped inside `outer` (and made non-decreasing).
    fn clamped(start: u32, end: u32, outer: Span) -> Span {
        let start = start.clamp(outer.start, outer.end);
        let end = end.clamp(start, outer.end);
        Span { start, end }
    }
}

/// One entry of an envelope address list, in the order IMAP sends them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AddressItem {
    /// A mailbox: display name (RFC 2047 form, see [`encode_word`]), local part, domain.
    Mailbox {
        name: Option<Vec<u8>>,
        /// The obsolete source route (`@a,@b`, RFC 5322 §4.4).
        adl: Option<Vec<u8>>,
        mailbox: Vec<u8>,
        host: Vec<u8>,
    },
    /// The start of a group, with its name: `(NIL NIL "name" NIL)`.
    GroupStart(Vec<u8>),
    /// The end of a group: `(NIL NIL NIL NIL)`.
    GroupEnd,
}

/// The envelope fields of a message (RFC 9051 §7.5.2). Text fields are the raw
/// header values, unfolded and trimmed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Envelope {
    pub(crate) date: Option<Vec<u8>>,
    pub(crate) subject: Option<Vec<u8>>,
    pub(crate) from: Vec<AddressItem>,
    /// `None` when the header is absent or empty: the envelope repeats `from`.
    pub(crate) sender: Option<Vec<AddressItem>>,
    pub(crate) reply_to: Option<Vec<AddressItem>>,
    pub(crate) to: Vec<AddressItem>,
    pub(crate) cc: Vec<AddressItem>,
    pub(crate) bcc: Vec<AddressItem>,
    pub(crate) in_reply_to: Option<Vec<u8>>,
    pub(crate) message_id: Option<Vec<u8>>,
}

/// A parameter list (`name`, `value`), as the body structure sends it.
pub(crate) type Params = Vec<(Vec<u8>, Vec<u8>)>;

/// One MIME part: where it is, and its body fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Part {
    /// Its MIME header, with the blank line that ends it (for a message's root part:
    /// the message header).
    pub(crate) header: Span,
    /// Its body: for a part inside a multipart, up to the line break before the next
    /// boundary.
    pub(crate) body: Span,
    /// Lines of the body (line feeds in it).
    pub(crate) lines: u32,
    pub(crate) media_type: Vec<u8>,
    pub(crate) subtype: Vec<u8>,
    pub(crate) params: Params,
    pub(crate) id: Option<Vec<u8>>,
    pub(crate) description: Option<Vec<u8>>,
    pub(crate) encoding: Vec<u8>,
    pub(crate) md5: Option<Vec<u8>>,
    pub(crate) disposition: Option<(Vec<u8>, Params)>,
    pub(crate) language: Vec<Vec<u8>>,
    pub(crate) location: Option<Vec<u8>>,
    pub(crate) kind: Kind,
}

/// What a part contains.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Kind {
    /// A leaf: text, an attachment, or anything described as opaque.
    #[default]
    Single,
    /// A multipart with at least one child.
    Multipart(Vec<Part>),
    /// A `message/rfc822` (or `message/global`) part: the encapsulated message.
    Message(Box<Msg>),
}

/// A message (the stored one, or one encapsulated in a part): its envelope and its
/// root part, whose header is the message header.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Msg {
    pub(crate) envelope: Envelope,
    pub(crate) root: Part,
}

/// What FETCH and SEARCH need of a stored message, parsed once: the part tree with
/// the byte ranges of every header and body, each part's body fields, the envelope
/// of the message and of every encapsulated message, and the sent date.
///
/// It holds no reference to the message: [`Structure::section`] and the search
/// methods take the message bytes again (the same bytes, or they answer `None` or
/// nonsense, never panic). [`Structure::to_cache`] gives a compact form to store
/// beside the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Structure {
    pub(crate) message: Msg,
    /// The `Date:` header: seconds since the epoch, and its day in the sender's zone.
    pub(crate) sent: Option<(i64, i64)>,
}

impl Structure {
    /// Parses `message` (stored as received, CRLF line endings; LF alone is read too).
    /// Never fails: whatever is malformed is described as best it can be, and a
    /// message that is no MIME at all is one `text/plain` part.
    pub fn parse(message: &[u8]) -> Structure {
        let Ok(len) = u32::try_from(message.len()) else {
            // Never stored (the server's size limit is far lower); described as one
            // opaque part so that nothing downstream overflows.
            return Structure {
                message: Msg {
                    envelope: Envelope::default(),
                    root: opaque_part(
                        Span::default(),
                        Span {
                            start: 0,
                            end: u32::MAX,
                        },
                    ),
                },
                sent: None,
            };
        };
        let whole = Span { start: 0, end: len };
        let lines = LineIndex::new(message);
        let parser = MessageParser::default();
        let mut flat = too_costly(message);
        let mut parsed = None;
        if !flat {
            match guarded(|| parser.parse(message)) {
                Some(p) => parsed = p,
                None => flat = true,
            }
        }
        if flat {
            // Only the header: the body stays one opaque part.
            parsed = guarded(|| parser.parse_headers(message)).flatten();
        }
        let Some(parsed) = parsed else {
            // No header at all: the whole message is a text/plain body.
            let mut root = default_part(Span { start: 0, end: 0 }, whole, false);
            root.lines = lines.count(whole);
            return Structure {
                message: Msg {
                    envelope: Envelope::default(),
                    root,
                },
                sent: None,
            };
        };
        let mut builder = Builder {
            raw: message,
            lines: &lines,
            budget: MAX_PARTS,
        };
        let sent = parsed
            .parts
            .first()
            .and_then(|p| find(&p.headers, "date"))
            .and_then(|h| h.value.as_datetime())
            .filter(|d| d.is_valid())
            .map(|d| (d.to_timestamp(), d.to_timestamp_local().div_euclid(86_400)));
        let mut msg = builder.message(&parsed, whole, 0);
        if flat {
            let end = header_end(message, &parsed);
            msg.root = opaque_part(
                Span { start: 0, end },
                Span {
                    start: end,
                    end: len,
                },
            );
        }
        Structure { message: msg, sent }
    }

    /// The `Date:` header of the message as seconds since the Unix epoch, `None` when
    /// absent or unreadable.
    pub fn sent_date(&self) -> Option<i64> {
        self.sent.map(|(seconds, _)| seconds)
    }

    /// The day of the `Date:` header in the sender's own time zone, as days since
    /// 1970-01-01: what SENTBEFORE, SENTON and SENTSINCE compare with the search
    /// date (RFC 3501 §6.4.4: "disregarding time and timezone"). `None` when absent
    /// or unreadable.
    pub fn sent_day(&self) -> Option<i64> {
        self.sent.map(|(_, day)| day)
    }
}

/// Runs a mail-parser call with its panics caught: `None` if it panicked. mail-parser
/// has debug assertions that malformed input reaches (a test shows one), and a
/// third-party parser on hostile input gets no chance to take a server thread down;
/// the callers then describe the message more coarsely.
pub(crate) fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// Where the header of a message parsed with `parse_headers` ends: after its last
/// field and the blank line that follows it.
fn header_end(message: &[u8], parsed: &mail_parser::Message<'_>) -> u32 {
    let last = parsed
        .parts
        .first()
        .and_then(|p| p.headers.iter().map(|h| h.offset_end).max())
        .unwrap_or(0);
    let last = (last as usize).min(message.len());
    let rest = &message[last..];
    let blank = if rest.starts_with(b"\r\n") {
        2
    } else {
        usize::from(rest.starts_with(b"\n"))
    };
    u32::try_from(last + blank).unwrap_or(u32::MAX)
}

/// Whether mail-parser's full parse of `message` could cost more than linear time or
/// deep recursion, judged in one linear pass beforehand. Every Content-Type field of
/// the message (a superset of those mail-parser will read: fields in bodies count
/// too) is parsed with mail-parser's own parser, and the message is too costly when:
///
/// - more than [`MAX_MESSAGE_FIELDS`] of them are `message/*` or `multipart/digest`
///   (the nesting bound);
/// - a multipart boundary is longer than [`MAX_BOUNDARY`];
/// - mail-parser's search for the first boundary of each multipart (from the end of
///   its header to the first `--boundary`, to the end of the message when there is
///   none: many multiparts without their boundary make its parse quadratic), plus
///   this pass's own reading of the fields (eight units a byte), would scan more
///   than eight times the message plus 1 MiB in total.
pub(crate) fn too_costly(message: &[u8]) -> bool {
    let budget = message.len().saturating_mul(8).saturating_add(1 << 20);
    let mut spent = 0usize;
    let mut message_fields = 0;
    let mut line_start = 0;
    while line_start < message.len() {
        let rest = &message[line_start..];
        let line_end = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
        let line = &rest[..line_end];
        line_start += line_end;
        // Any line may start a field for mail-parser (it skips leading white space),
        // and it reads a name as it does: the non-white bytes before the first colon
        // that follows one (a leading colon is skipped).
        let Some(colon) = field_colon(line) else {
            continue;
        };
        let mut name = line[..colon]
            .iter()
            .filter(|&&b| !b.is_ascii_whitespace() && b != b':');
        let is_content_type = b"content-type"
            .iter()
            .all(|&c| name.next().is_some_and(|b| b.eq_ignore_ascii_case(&c)))
            && name.next().is_none();
        if !is_content_type {
            continue;
        }
        let value_start = line_start - line_end + colon + 1;
        // Folded lines that look like fields are read again from each: that reading
        // is paid from the budget too.
        let Some((value, read)) = guarded(|| {
            let mut field = MessageStream::new(&message[value_start..]);
            (field.parse_content_type(), field.offset())
        }) else {
            return true;
        };
        // Field parsing is slower than mail-parser's byte scan: eight units a byte.
        spent = spent.saturating_add(read.saturating_mul(8));
        if spent >= budget {
            return true;
        }
        let HeaderValue::ContentType(ct) = value else {
            continue;
        };
        let subtype = ct.subtype().unwrap_or("");
        if ct.ctype().eq_ignore_ascii_case("message") || subtype.eq_ignore_ascii_case("digest") {
            message_fields += 1;
            if message_fields > MAX_MESSAGE_FIELDS {
                return true;
            }
        }
        if !ct.ctype().eq_ignore_ascii_case("multipart") {
            continue;
        }
        let Some(boundary) = ct.attribute("boundary") else {
            continue;
        };
        if boundary.len() > MAX_BOUNDARY {
            return true;
        }
        // The search starts after the header: at the first blank line from here.
        let window = &message[value_start
            ..message
                .len()
                .min(value_start.saturating_add(budget - spent))];
        let body = blank_line_end(window).unwrap_or(window.len());
        let mut needle = b"--".to_vec();
        needle.extend_from_slice(boundary.as_bytes());
        let scanned =
            body + memchr::memmem::find(&window[body..], &needle).unwrap_or(window.len() - body);
        spent += scanned;
        if scanned == window.len() && value_start + window.len() < message.len() || spent >= budget
        {
            return true;
        }
    }
    false
}

/// Where the colon that ends a field name is in `line`, read as mail-parser reads it:
/// the first colon after a byte that is neither white space nor a colon.
fn field_colon(line: &[u8]) -> Option<usize> {
    let mut named = false;
    for (i, &b) in line.iter().enumerate() {
        match b {
            b':' if named => return Some(i),
            b':' => {}
            b'\n' => return None,
            _ if !b.is_ascii_whitespace() => named = true,
            _ => {}
        }
    }
    None
}

/// Where the first blank line of `s` ends, scanning no further than it.
fn blank_line_end(s: &[u8]) -> Option<usize> {
    let mut at = 0;
    while let Some(i) = memchr::memchr(b'\n', &s[at..]) {
        at += i + 1;
        let rest = &s[at..];
        if rest.starts_with(b"\n") {
            return Some(at + 1);
        }
        if rest.starts_with(b"\r\n") {
            return Some(at + 2);
        }
    }
    None
}

/// Line feeds counted per 4 KiB block of a message, to count the lines of any range
/// in constant time (parts nest, and each level counts its own lines) with a memory
/// of a thousandth of the message.
pub(crate) struct LineIndex<'a> {
    message: &'a [u8],
    /// `before[i]`: the line feeds in the first `i` blocks.
    before: Vec<u32>,
}

const BLOCK: usize = 4096;

impl<'a> LineIndex<'a> {
    pub(crate) fn new(message: &'a [u8]) -> LineIndex<'a> {
        let mut before = Vec::with_capacity(message.len() / BLOCK + 2);
        let mut total = 0u32;
        before.push(total);
        for block in message.chunks(BLOCK) {
            let n = memchr::memchr_iter(b'\n', block).count();
            total = total.saturating_add(u32::try_from(n).unwrap_or(u32::MAX));
            before.push(total);
        }
        LineIndex { message, before }
    }

    /// Line feeds before offset `at`.
    fn feeds_before(&self, at: usize) -> u32 {
        let at = at.min(self.message.len());
        let block = at / BLOCK;
        let partial = memchr::memchr_iter(b'\n', &self.message[block * BLOCK..at]).count();
        let full = self.before.get(block).copied().unwrap_or(0);
        full.saturating_add(u32::try_from(partial).unwrap_or(u32::MAX))
    }

    /// Line feeds within `span`.
    pub(crate) fn count(&self, span: Span) -> u32 {
        self.feeds_before(span.end as usize)
            .saturating_sub(self.feeds_before(span.start as usize))
    }
}

struct Builder<'a> {
    raw: &'a [u8],
    lines: &'a LineIndex<'a>,
    /// Parts still allowed ([`MAX_PARTS`]).
    budget: usize,
}

impl Builder<'_> {
    /// The message `m` (the stored one or an encapsulated one), lying in `extent`.
    fn message(&mut self, m: &mail_parser::Message<'_>, extent: Span, depth: usize) -> Msg {
        let Some(root) = m.parts.first() else {
            return Msg {
                envelope: Envelope::default(),
                root: default_part(
                    Span {
                        start: extent.start,
                        end: extent.start,
                    },
                    extent,
                    false,
                ),
            };
        };
        let envelope = self.envelope(&root.headers);
        let root = self.part(m, 0, extent, false, depth);
        Msg { envelope, root }
    }

    /// Part `id` of `m`, lying in `extent` (its parent's body).
    fn part(
        &mut self,
        m: &mail_parser::Message<'_>,
        id: usize,
        extent: Span,
        in_digest: bool,
        depth: usize,
    ) -> Part {
        let Some(p) = m.parts.get(id) else {
            return default_part(
                Span {
                    start: extent.start,
                    end: extent.start,
                },
                extent,
                false,
            );
        };
        self.budget = self.budget.saturating_sub(1);
        let header = Span::clamped(p.offset_header, p.offset_body, extent);
        let body = Span::clamped(p.offset_body, p.offset_end, extent);
        let headers = &p.headers;
        let mut part = default_part(header, body, in_digest);

        if let Some(h) = find(headers, "content-type")
            && let HeaderValue::ContentType(ct) = &h.value
        {
            let subtype = ct.subtype().unwrap_or("");
            if !ct.ctype().is_empty() && !subtype.is_empty() {
                part.media_type = ct.ctype().as_bytes().to_vec();
                part.subtype = subtype.as_bytes().to_vec();
                part.params = params(ct.attributes(), self.raw_bytes(h));
            }
        }
        if let Some(h) = find(headers, "content-id") {
            part.id = Some(self.raw_value(h));
        }
        if let Some(h) = find(headers, "content-description") {
            part.description = Some(self.raw_value(h));
        }
        if let Some(h) = find(headers, "content-transfer-encoding") {
            let value = self.raw_value(h);
            if !value.is_empty() && value.iter().all(|&b| is_token_char(b)) {
                part.encoding = value;
            }
        }
        if let Some(h) = find(headers, "content-md5") {
            part.md5 = Some(self.raw_value(h));
        }
        if let Some(h) = find(headers, "content-disposition")
            && let HeaderValue::ContentType(d) = &h.value
            && !d.ctype().is_empty()
        {
            let params = params(d.attributes(), self.raw_bytes(h));
            part.disposition = Some((d.ctype().as_bytes().to_vec(), params));
        }
        if let Some(h) = find(headers, "content-language") {
            part.language = match &h.value {
                HeaderValue::TextList(list) => list
                    .iter()
                    .filter(|l| !l.is_empty())
                    .map(|l| l.as_bytes().to_vec())
                    .collect(),
                HeaderValue::Text(l) if !l.is_empty() => vec![l.as_bytes().to_vec()],
                _ => Vec::new(),
            };
        }
        if let Some(h) = find(headers, "content-location") {
            part.location = Some(self.raw_value(h));
        }

        let is_multipart = part.media_type.eq_ignore_ascii_case(b"multipart");
        let is_message = part.media_type.eq_ignore_ascii_case(b"message")
            && (part.subtype.eq_ignore_ascii_case(b"rfc822")
                || part.subtype.eq_ignore_ascii_case(b"global"));
        let room = depth < MAX_DEPTH && self.budget > 0;
        match &p.body {
            PartType::Multipart(children) if is_multipart && room && !children.is_empty() => {
                let digest = part.subtype.eq_ignore_ascii_case(b"digest");
                let mut parts = Vec::with_capacity(children.len().min(self.budget));
                for &child in children {
                    if self.budget == 0 {
                        break;
                    }
                    parts.push(self.part(m, child as usize, body, digest, depth + 1));
                }
                part.kind = Kind::Multipart(parts);
            }
            PartType::Message(inner) if is_message && room && p.encoding == Encoding::None => {
                part.lines = self.lines.count(body);
                part.kind = Kind::Message(Box::new(self.message(inner, body, depth + 1)));
            }
            _ if is_multipart || is_message => {
                // Not structured as its type says (no boundary, no parts, encoded,
                // unparsable, or past the limits): an opaque leaf.
                part = opaque_part(header, body);
            }
            _ => {
                if part.media_type.eq_ignore_ascii_case(b"text") {
                    part.lines = self.lines.count(body);
                    if !part
                        .params
                        .iter()
                        .any(|(n, _)| n.eq_ignore_ascii_case(b"charset"))
                    {
                        part.params
                            .insert(0, (b"charset".to_vec(), b"us-ascii".to_vec()));
                    }
                }
            }
        }
        part
    }

    fn envelope(&self, headers: &[Header<'_>]) -> Envelope {
        let text = |name: &str| find(headers, name).map(|h| self.raw_value(h));
        let addresses = |name: &str| -> Option<Vec<AddressItem>> {
            let h = find(headers, name)?;
            let raw = self.raw_bytes(h);
            let list = match &h.value {
                HeaderValue::Address(a) => address_items(a, raw),
                _ => Vec::new(),
            };
            (!list.is_empty()).then_some(list)
        };
        Envelope {
            date: text("date"),
            subject: text("subject"),
            from: addresses("from").unwrap_or_default(),
            sender: addresses("sender"),
            reply_to: addresses("reply-to"),
            to: addresses("to").unwrap_or_default(),
            cc: addresses("cc").unwrap_or_default(),
            bcc: addresses("bcc").unwrap_or_default(),
            in_reply_to: text("in-reply-to"),
            message_id: text("message-id"),
        }
    }

    /// The raw bytes of a header's value (after the colon, with its folding).
    fn raw_bytes(&self, h: &Header<'_>) -> &[u8] {
        let start = (h.offset_start as usize).min(self.raw.len());
        let end = (h.offset_end as usize).clamp(start, self.raw.len());
        &self.raw[start..end]
    }

    /// A header's value as IMAP wants it in the envelope and body fields: raw
    /// (RFC 2047 words left for the client), unfolded and trimmed.
    fn raw_value(&self, h: &Header<'_>) -> Vec<u8> {
        unfold(self.raw_bytes(h))
    }
}

/// The first header named `name` (case-insensitive).
pub(crate) fn find<'h, 'x>(headers: &'h [Header<'x>], name: &str) -> Option<&'h Header<'x>> {
    headers
        .iter()
        .find(|h| h.name.as_str().eq_ignore_ascii_case(name))
}

/// Removes the line breaks of a folded value and trims the white space around it.
pub(crate) fn unfold(value: &[u8]) -> Vec<u8> {
    let out: Vec<u8> = value
        .iter()
        .copied()
        .filter(|&b| b != b'\r' && b != b'\n')
        .collect();
    let start = out
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(out.len());
    let end = out
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |e| e + 1);
    out[start..end].to_vec()
}

/// A MIME `token` character (RFC 2045): printable ASCII but `tspecials`.
fn is_token_char(b: u8) -> bool {
    matches!(b, 0x21..=0x7e) && !b"()<>@,;:\\\"/[]?=".contains(&b)
}

/// A part with the defaults of RFC 2045: `text/plain; charset=us-ascii` (or
/// `message/rfc822` inside a `multipart/digest`), `7BIT`.
fn default_part(header: Span, body: Span, in_digest: bool) -> Part {
    let (media_type, subtype, params) = if in_digest {
        (&b"message"[..], &b"rfc822"[..], Vec::new())
    } else {
        let charset = (b"charset".to_vec(), b"us-ascii".to_vec());
        (&b"text"[..], &b"plain"[..], vec![charset])
    };
    Part {
        header,
        body,
        media_type: media_type.to_vec(),
        subtype: subtype.to_vec(),
        params,
        encoding: b"7bit".to_vec(),
        ..Part::default()
    }
}

/// An `application/octet-stream` leaf: what a part is described as when it cannot be
/// described as its type says.
fn opaque_part(header: Span, body: Span) -> Part {
    Part {
        header,
        body,
        media_type: b"application".to_vec(),
        subtype: b"octet-stream".to_vec(),
        encoding: b"7bit".to_vec(),
        ..Part::default()
    }
}

/// Parameters as the body structure sends them, from mail-parser's decoded values
/// and the raw field (`raw`). ASCII values go as they are; so do non-ASCII ones when
/// the field was raw UTF-8 (RFC 6532). A value that decoding made non-ASCII is
/// encoded again the way the sender encoded it: RFC 2231 (`name*` =
/// `utf-8''%XX...`) when the field has `name*`, else RFC 2047 words under the plain
/// name (what most senders write, and what clients decode in `name` and `filename`).
/// Continuations (`name*0`, `name*1`) come merged.
fn params(attributes: Option<&[mail_parser::Attribute<'_>]>, raw: &[u8]) -> Params {
    let raw_ascii = raw.is_ascii();
    let extended = if raw_ascii {
        extended_names(raw)
    } else {
        HashSet::new()
    };
    let mut out = Params::new();
    for a in attributes.unwrap_or_default() {
        let name = a.name.as_bytes();
        if a.value.is_ascii() || !raw_ascii {
            out.push((name.to_vec(), a.value.as_bytes().to_vec()));
        } else if extended.contains(&name.to_ascii_lowercase()) {
            let mut value = b"utf-8''".to_vec();
            for &b in a.value.as_bytes() {
                if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
                    value.push(b);
                } else {
                    value.extend_from_slice(&[
                        b'%',
                        HEX[usize::from(b >> 4)],
                        HEX[usize::from(b & 15)],
                    ]);
                }
            }
            let mut name = name.to_vec();
            name.push(b'*');
            out.push((name, value));
        } else {
            out.push((name.to_vec(), encode_word(&a.value, true)));
        }
    }
    out
}

/// The names written with a `*` in a raw field (RFC 2231 parameters), lowercased;
/// one pass, whatever the number of parameters.
fn extended_names(raw: &[u8]) -> HashSet<Vec<u8>> {
    let mut names = HashSet::new();
    for (i, _) in raw.iter().enumerate().filter(|&(_, &b)| b == b'*') {
        let start = raw[..i]
            .iter()
            .rposition(|&b| !is_token_char(b) || b == b'*')
            .map_or(0, |p| p + 1);
        if start < i {
            names.insert(raw[start..i].to_ascii_lowercase());
        }
    }
    names
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

/// The envelope entries of an address header, from mail-parser's parse and the raw
/// field (`raw`).
fn address_items(address: &MpAddress<'_>, raw: &[u8]) -> Vec<AddressItem> {
    let ctx = AddressContext {
        raw_ascii: raw.is_ascii(),
        comments: comments(raw),
    };
    let mut out = Vec::new();
    match address {
        MpAddress::List(list) => {
            out.extend(list.iter().filter_map(|a| mailbox(a, &ctx)));
        }
        MpAddress::Group(groups) => {
            for g in groups {
                match &g.name {
                    Some(name) => {
                        out.push(AddressItem::GroupStart(encode_word(name, ctx.raw_ascii)));
                        out.extend(g.addresses.iter().filter_map(|a| mailbox(a, &ctx)));
                        out.push(AddressItem::GroupEnd);
                    }
                    None => out.extend(g.addresses.iter().filter_map(|a| mailbox(a, &ctx))),
                }
            }
        }
    }
    out
}

/// What an address header's raw field tells about mail-parser's entries.
struct AddressContext<'a> {
    /// The field was 7-bit: any non-ASCII name came from RFC 2047 decoding and is
    /// encoded again.
    raw_ascii: bool,
    /// The texts of its comments: an entry without address whose name is one of them
    /// is a lone comment, not a mailbox.
    comments: HashSet<&'a [u8]>,
}

/// The texts between parentheses in a raw field (not nested), trimmed; one pass.
fn comments(raw: &[u8]) -> HashSet<&[u8]> {
    let mut out = HashSet::new();
    let mut rest = raw;
    while let Some(open) = memchr::memchr(b'(', rest) {
        let Some(close) = memchr::memchr(b')', &rest[open..]) else {
            break;
        };
        out.insert(rest[open + 1..open + close].trim_ascii());
        rest = &rest[open + close + 1..];
    }
    out
}

fn mailbox(a: &Addr<'_>, ctx: &AddressContext<'_>) -> Option<AddressItem> {
    let decoded = a.name.as_deref().filter(|n| !n.is_empty());
    let name = decoded.map(|n| encode_word(n, ctx.raw_ascii));
    let (name, mailbox, host) = match a.address.as_deref() {
        Some(address) => match address.rsplit_once('@') {
            Some((local, domain)) => (name, local.as_bytes().to_vec(), domain.as_bytes().to_vec()),
            None => (name, address.as_bytes().to_vec(), Vec::new()),
        },
        // A lone comment (`group: (nobody) ;`) names no one.
        None if decoded.is_some_and(|n| ctx.comments.contains(n.as_bytes())) => return None,
        // Other text without an address (`To: bob`): a local part without domain.
        // The host is never NIL, which would start a group.
        None => (None, name?, Vec::new()),
    };
    // mail-parser leaves a source route at the front of the local part.
    let (adl, mailbox) = match mailbox.iter().position(|&b| b == b':') {
        Some(colon) if mailbox.first() == Some(&b'@') => (
            Some(mailbox[..colon].to_vec()),
            mailbox[colon + 1..].to_vec(),
        ),
        _ => (None, mailbox),
    };
    Some(AddressItem::Mailbox {
        name,
        adl,
        mailbox,
        host,
    })
}

/// A display name for the envelope: as it is when ASCII (or when the header was raw
/// UTF-8, RFC 6532), else RFC 2047 encoded again (`=?utf-8?q?...?=` words of at most
/// 75 characters), since mail-parser gives names decoded.
pub(crate) fn encode_word(name: &str, raw_ascii: bool) -> Vec<u8> {
    if name.is_ascii() || !raw_ascii {
        return name.as_bytes().to_vec();
    }
    let mut out = Vec::new();
    let mut word = Vec::new();
    for c in name.chars() {
        let mut buf = [0u8; 4];
        let mut encoded = Vec::with_capacity(12);
        for &b in c.encode_utf8(&mut buf).as_bytes() {
            if b.is_ascii_alphanumeric() || b"!*+-/".contains(&b) {
                encoded.push(b);
            } else if b == b' ' {
                encoded.push(b'_');
            } else {
                encoded.extend_from_slice(&[
                    b'=',
                    HEX[usize::from(b >> 4)],
                    HEX[usize::from(b & 15)],
                ]);
            }
        }
        // "=?utf-8?q?" + text + "?=" stays within 75.
        if word.len() + encoded.len() > 75 - 12 {
            flush_word(&mut out, &mut word);
        }
        word.extend_from_slice(&encoded);
    }
    flush_word(&mut out, &mut word);
    out
}

fn flush_word(out: &mut Vec<u8>, word: &mut Vec<u8>) {
    if word.is_empty() {
        return;
    }
    if !out.is_empty() {
        out.push(b' ');
    }
    out.extend_from_slice(b"=?utf-8?q?");
    out.append(word);
    out.extend_from_slice(b"?=");
}
