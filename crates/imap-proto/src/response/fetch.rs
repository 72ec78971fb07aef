//! FETCH responses (RFC 9051 §7.5.2): `* n FETCH (item value ...)`, built item by
//! item by [`FetchWriter`].

use crate::command::Flag;
use crate::date::write_date_time;
use crate::section::{Section, SectionText};
use crate::string::{write_astring, write_literal};

use super::write_flag_list;

/// Builds one FETCH response in place: [`FetchWriter::new`] writes `* n FETCH (`,
/// each item method writes one item, [`FetchWriter::finish`] writes `)` CRLF.
#[derive(Debug)]
pub struct FetchWriter<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> FetchWriter<'a> {
    /// Starts the response for message sequence number `seq`.
    pub fn new(out: &'a mut Vec<u8>, seq: u32) -> FetchWriter<'a> {
        out.extend_from_slice(format!("* {seq} FETCH (").as_bytes());
        FetchWriter { out, first: true }
    }

    fn item(&mut self, name: &str) -> &mut Vec<u8> {
        if !self.first {
            self.out.push(b' ');
        }
        self.first = false;
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(b' ');
        self.out
    }

    /// `UID n`
    pub fn uid(&mut self, uid: u32) -> &mut Self {
        self.item("UID")
            .extend_from_slice(uid.to_string().as_bytes());
        self
    }

    /// `FLAGS (flags)`
    pub fn flags(&mut self, flags: &[Flag]) -> &mut Self {
        let out = self.item("FLAGS");
        write_flag_list(out, flags, false);
        self
    }

    /// `INTERNALDATE "dd-Mon-yyyy hh:mm:ss +0000"` from unix seconds.
    pub fn internal_date(&mut self, seconds: i64) -> &mut Self {
        write_date_time(self.item("INTERNALDATE"), seconds);
        self
    }

    /// `RFC822.SIZE n`
    pub fn rfc822_size(&mut self, size: u64) -> &mut Self {
        self.item("RFC822.SIZE")
            .extend_from_slice(size.to_string().as_bytes());
        self
    }

    /// `MODSEQ (n)`
    pub fn modseq(&mut self, modseq: u64) -> &mut Self {
        self.item("MODSEQ")
            .extend_from_slice(format!("({modseq})").as_bytes());
        self
    }

    /// `name value` with `value` already rendered (ENVELOPE, BODY, BODYSTRUCTURE, as
    /// the message structure renders them). `name` is written as given.
    pub fn raw(&mut self, name: &str, rendered: &[u8]) -> &mut Self {
        self.item(name).extend_from_slice(rendered);
        self
    }

    /// `name {n}` CRLF data, or `name NIL`: RFC822, RFC822.HEADER, RFC822.TEXT.
    pub fn literal(&mut self, name: &str, data: Option<&[u8]>) -> &mut Self {
        let out = self.item(name);
        match data {
            Some(data) => write_literal(out, data),
            None => out.extend_from_slice(b"NIL"),
        }
        self
    }

    /// `BODY[section]<origin> {n}` CRLF data (or `NIL`): the answer to `BODY[...]` and
    /// `BODY.PEEK[...]`; `origin` is the partial's start when one was asked.
    pub fn body_section(
        &mut self,
        section: &Section,
        origin: Option<u32>,
        data: Option<&[u8]>,
    ) -> &mut Self {
        let mut name = Vec::new();
        write_section_name(&mut name, section, origin);
        let name = String::from_utf8_lossy(&name).into_owned();
        self.literal(&name, data)
    }

    /// `BINARY[part]<origin> ~{n}` CRLF data (a literal8, RFC 3516), or `NIL`.
    pub fn binary(&mut self, part: &[u32], origin: Option<u32>, data: Option<&[u8]>) -> &mut Self {
        let mut name = String::from("BINARY[");
        push_part(&mut name, part);
        name.push(']');
        if let Some(origin) = origin {
            name.push_str(&format!("<{origin}>"));
        }
        let out = self.item(&name);
        match data {
            Some(data) => {
                out.push(b'~');
                write_literal(out, data);
            }
            None => out.extend_from_slice(b"NIL"),
        }
        self
    }

    /// `BINARY.SIZE[part] n`
    pub fn binary_size(&mut self, part: &[u32], size: u64) -> &mut Self {
        let mut name = String::from("BINARY.SIZE[");
        push_part(&mut name, part);
        name.push(']');
        self.item(&name)
            .extend_from_slice(size.to_string().as_bytes());
        self
    }

    /// Writes `)` CRLF.
    pub fn finish(self) {
        self.out.extend_from_slice(b")\r\n");
    }
}

fn push_part(name: &mut String, part: &[u32]) {
    for (i, n) in part.iter().enumerate() {
        if i > 0 {
            name.push('.');
        }
        name.push_str(&n.to_string());
    }
}

/// Appends a body item's name as the response gives it: `BODY[1.2.HEADER.FIELDS
/// (FROM TO)]<0>` (never `.PEEK`; the origin only, not the count).
pub fn write_section_name(out: &mut Vec<u8>, section: &Section, origin: Option<u32>) {
    let mut text = String::from("BODY[");
    push_part(&mut text, &section.part);
    let suffix = match &section.text {
        SectionText::Full => None,
        SectionText::Header => Some("HEADER"),
        SectionText::Text => Some("TEXT"),
        SectionText::Mime => Some("MIME"),
        SectionText::HeaderFields { not: false, .. } => Some("HEADER.FIELDS"),
        SectionText::HeaderFields { not: true, .. } => Some("HEADER.FIELDS.NOT"),
    };
    if let Some(suffix) = suffix {
        if !section.part.is_empty() {
            text.push('.');
        }
        text.push_str(suffix);
    }
    out.extend_from_slice(text.as_bytes());
    if let SectionText::HeaderFields { names, .. } = &section.text {
        out.extend_from_slice(b" (");
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            write_astring(out, name.as_bytes());
        }
        out.push(b')');
    }
    out.push(b']');
    if let Some(origin) = origin {
        out.extend_from_slice(format!("<{origin}>").as_bytes());
    }
}
