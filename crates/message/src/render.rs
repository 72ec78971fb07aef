//! ENVELOPE and BODYSTRUCTURE / BODY as IMAP sends them (RFC 9051 §7.5.2, RFC 3501
//! §7.4.2).

use stoa_imap_proto::string::{write_nstring, write_string};

use crate::structure::{AddressItem, Envelope, Kind, Params, Part, Structure};

impl Structure {
    /// Writes the message's `ENVELOPE` value: `(date subject from sender reply-to to
    /// cc bcc in-reply-to message-id)`. Text fields are the raw header values
    /// (unfolded; RFC 2047 words left for the client), `NIL` when absent; sender and
    /// reply-to repeat from when absent or empty; address lists are
    /// `((name adl mailbox host) ...)` with groups as `(NIL NIL "group" NIL)` ...
    /// `(NIL NIL NIL NIL)`, `NIL` when empty.
    pub fn write_envelope(&self, out: &mut Vec<u8>) {
        write_envelope(out, &self.message.envelope);
    }

    /// Writes the message's `BODYSTRUCTURE` value (`extended`: with the extension
    /// data, md5, disposition, language and location of single parts; parameters,
    /// disposition, language and location of multiparts) or its `BODY` value (not
    /// `extended`). Text parts carry their line count; `message/rfc822` parts the
    /// envelope, body structure and line count of the encapsulated message.
    pub fn write_body_structure(&self, out: &mut Vec<u8>, extended: bool) {
        write_part(out, &self.message.root, extended);
    }
}

pub(crate) fn write_envelope(out: &mut Vec<u8>, e: &Envelope) {
    out.push(b'(');
    write_nstring(out, e.date.as_deref());
    out.push(b' ');
    write_nstring(out, e.subject.as_deref());
    out.push(b' ');
    write_addresses(out, &e.from);
    out.push(b' ');
    write_addresses(out, e.sender.as_deref().unwrap_or(&e.from));
    out.push(b' ');
    write_addresses(out, e.reply_to.as_deref().unwrap_or(&e.from));
    for list in [&e.to, &e.cc, &e.bcc] {
        out.push(b' ');
        write_addresses(out, list);
    }
    out.push(b' ');
    write_nstring(out, e.in_reply_to.as_deref());
    out.push(b' ');
    write_nstring(out, e.message_id.as_deref());
    out.push(b')');
}

fn write_addresses(out: &mut Vec<u8>, list: &[AddressItem]) {
    if list.is_empty() {
        out.extend_from_slice(b"NIL");
        return;
    }
    out.push(b'(');
    for item in list {
        match item {
            AddressItem::Mailbox {
                name,
                adl,
                mailbox,
                host,
            } => {
                out.push(b'(');
                write_nstring(out, name.as_deref());
                out.push(b' ');
                write_nstring(out, adl.as_deref());
                out.push(b' ');
                write_string(out, mailbox);
                out.push(b' ');
                write_string(out, host);
                out.push(b')');
            }
            AddressItem::GroupStart(name) => {
                out.extend_from_slice(b"(NIL NIL ");
                write_string(out, name);
                out.extend_from_slice(b" NIL)");
            }
            AddressItem::GroupEnd => out.extend_from_slice(b"(NIL NIL NIL NIL)"),
        }
    }
    out.push(b')');
}

fn write_part(out: &mut Vec<u8>, part: &Part, extended: bool) {
    out.push(b'(');
    if let Kind::Multipart(children) = &part.kind {
        for child in children {
            write_part(out, child, extended);
        }
        out.push(b' ');
        write_string(out, &part.subtype);
        if extended {
            out.push(b' ');
            write_params(out, &part.params);
            write_extension_tail(out, part);
        }
        out.push(b')');
        return;
    }
    write_string(out, &part.media_type);
    out.push(b' ');
    write_string(out, &part.subtype);
    out.push(b' ');
    write_params(out, &part.params);
    out.push(b' ');
    write_nstring(out, part.id.as_deref());
    out.push(b' ');
    write_nstring(out, part.description.as_deref());
    out.push(b' ');
    write_string(out, &part.encoding);
    out.push(b' ');
    out.extend_from_slice(part.body.len().to_string().as_bytes());
    match &part.kind {
        Kind::Message(m) => {
            out.push(b' ');
            write_envelope(out, &m.envelope);
            out.push(b' ');
            write_part(out, &m.root, extended);
            out.push(b' ');
            out.extend_from_slice(part.lines.to_string().as_bytes());
        }
        _ if part.media_type.eq_ignore_ascii_case(b"text") => {
            out.push(b' ');
            out.extend_from_slice(part.lines.to_string().as_bytes());
        }
        _ => {}
    }
    if extended {
        out.push(b' ');
        write_nstring(out, part.md5.as_deref());
        write_extension_tail(out, part);
    }
    out.push(b')');
}

/// ` disposition language location`, common to single parts and multiparts.
fn write_extension_tail(out: &mut Vec<u8>, part: &Part) {
    out.push(b' ');
    match &part.disposition {
        Some((kind, params)) => {
            out.push(b'(');
            write_string(out, kind);
            out.push(b' ');
            write_params(out, params);
            out.push(b')');
        }
        None => out.extend_from_slice(b"NIL"),
    }
    out.push(b' ');
    if part.language.is_empty() {
        out.extend_from_slice(b"NIL");
    } else {
        out.push(b'(');
        for (i, l) in part.language.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            write_string(out, l);
        }
        out.push(b')');
    }
    out.push(b' ');
    write_nstring(out, part.location.as_deref());
}

fn write_params(out: &mut Vec<u8>, params: &Params) {
    if params.is_empty() {
        out.extend_from_slice(b"NIL");
        return;
    }
    out.push(b'(');
    for (i, (name, value)) in params.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        write_string(out, name);
        out.push(b' ');
        write_string(out, value);
    }
    out.push(b')');
}
