//! The cache form of a [`Structure`]: a small length-prefixed binary, versioned, for
//! the server to keep beside the message so that FETCH ENVELOPE and BODYSTRUCTURE
//! need not parse it again.
//!
//! Layout (integers little-endian): the magic `SMS` and a version byte, then the
//! sent date (`0`, or `1`, the seconds and the local day as two `i64`), then the
//! message. A message is its envelope
//! then its root part. Byte strings are a `u32` length then the bytes; optional ones
//! a `0` byte, or `1` then the string; lists a `u32` count then the items. A part is
//! its header and body spans (four `u32`), its line count, its body fields, then its
//! kind: `0` a leaf, `1` a multipart and its children, `2` a message.

use crate::structure::{
    AddressItem, Envelope, Kind, MAX_DEPTH, Msg, Params, Part, Span, Structure,
};

const MAGIC: &[u8; 3] = b"SMS";
/// Bumped whenever the layout or the meaning of a field changes: an old entry is then
/// rejected and the message parsed again.
const VERSION: u8 = 1;

impl Structure {
    /// The cache form of this structure (see [`Structure::from_cache`]).
    pub fn to_cache(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        match self.sent {
            Some((seconds, day)) => {
                out.push(1);
                out.extend_from_slice(&seconds.to_le_bytes());
                out.extend_from_slice(&day.to_le_bytes());
            }
            None => out.push(0),
        }
        put_message(&mut out, &self.message);
        out
    }

    /// The structure from its cache form, `None` when `bytes` is not one written by
    /// this version of [`Structure::to_cache`] (another version, truncated, garbage):
    /// the caller then parses the message again. Never panics, whatever the bytes.
    pub fn from_cache(bytes: &[u8]) -> Option<Structure> {
        let mut r = Reader { rest: bytes };
        if r.take(3)? != MAGIC || r.byte()? != VERSION {
            return None;
        }
        let sent = match r.byte()? {
            0 => None,
            1 => Some((r.i64()?, r.i64()?)),
            _ => return None,
        };
        let message = r.message(0)?;
        r.rest.is_empty().then_some(Structure { message, sent })
    }
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_len(out: &mut Vec<u8>, n: usize) {
    put_u32(out, u32::try_from(n).unwrap_or(u32::MAX));
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Nothing the parser keeps comes near 4 GiB (a message is at most that).
    let b = &b[..b.len().min(u32::MAX as usize)];
    put_len(out, b.len());
    out.extend_from_slice(b);
}

fn put_opt(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            out.push(1);
            put_bytes(out, b);
        }
        None => out.push(0),
    }
}

fn put_params(out: &mut Vec<u8>, params: &Params) {
    put_len(out, params.len());
    for (name, value) in params {
        put_bytes(out, name);
        put_bytes(out, value);
    }
}

fn put_addresses(out: &mut Vec<u8>, list: &[AddressItem]) {
    put_len(out, list.len());
    for item in list {
        match item {
            AddressItem::Mailbox {
                name,
                adl,
                mailbox,
                host,
            } => {
                out.push(0);
                put_opt(out, name.as_deref());
                put_opt(out, adl.as_deref());
                put_bytes(out, mailbox);
                put_bytes(out, host);
            }
            AddressItem::GroupStart(name) => {
                out.push(1);
                put_bytes(out, name);
            }
            AddressItem::GroupEnd => out.push(2),
        }
    }
}

fn put_opt_addresses(out: &mut Vec<u8>, list: Option<&[AddressItem]>) {
    match list {
        Some(list) => {
            out.push(1);
            put_addresses(out, list);
        }
        None => out.push(0),
    }
}

fn put_message(out: &mut Vec<u8>, m: &Msg) {
    let e = &m.envelope;
    put_opt(out, e.date.as_deref());
    put_opt(out, e.subject.as_deref());
    put_addresses(out, &e.from);
    put_opt_addresses(out, e.sender.as_deref());
    put_opt_addresses(out, e.reply_to.as_deref());
    put_addresses(out, &e.to);
    put_addresses(out, &e.cc);
    put_addresses(out, &e.bcc);
    put_opt(out, e.in_reply_to.as_deref());
    put_opt(out, e.message_id.as_deref());
    put_part(out, &m.root);
}

fn put_part(out: &mut Vec<u8>, p: &Part) {
    for v in [
        p.header.start,
        p.header.end,
        p.body.start,
        p.body.end,
        p.lines,
    ] {
        put_u32(out, v);
    }
    put_bytes(out, &p.media_type);
    put_bytes(out, &p.subtype);
    put_params(out, &p.params);
    put_opt(out, p.id.as_deref());
    put_opt(out, p.description.as_deref());
    put_bytes(out, &p.encoding);
    put_opt(out, p.md5.as_deref());
    match &p.disposition {
        Some((kind, params)) => {
            out.push(1);
            put_bytes(out, kind);
            put_params(out, params);
        }
        None => out.push(0),
    }
    put_len(out, p.language.len());
    for l in &p.language {
        put_bytes(out, l);
    }
    put_opt(out, p.location.as_deref());
    match &p.kind {
        Kind::Single => out.push(0),
        Kind::Multipart(children) => {
            out.push(1);
            put_len(out, children.len());
            for c in children {
                put_part(out, c);
            }
        }
        Kind::Message(m) => {
            out.push(2);
            put_message(out, m);
        }
    }
}

/// Reads the cache form; every read checks what is left, counts larger than the input
/// could hold are rejected (and reserve nothing), and nesting is bounded as at parse
/// time.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.rest.len() {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }

    fn byte(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }

    /// A count of items each at least `min` bytes long: rejected when the input is
    /// too short to hold them.
    fn count(&mut self, min: usize) -> Option<usize> {
        let n = usize::try_from(self.u32()?).ok()?;
        (n.checked_mul(min)? <= self.rest.len()).then_some(n)
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = usize::try_from(self.u32()?).ok()?;
        Some(self.take(n)?.to_vec())
    }

    fn opt(&mut self) -> Option<Option<Vec<u8>>> {
        match self.byte()? {
            0 => Some(None),
            1 => Some(Some(self.bytes()?)),
            _ => None,
        }
    }

    fn params(&mut self) -> Option<Params> {
        let n = self.count(8)?;
        let mut params = Vec::new();
        for _ in 0..n {
            params.push((self.bytes()?, self.bytes()?));
        }
        Some(params)
    }

    fn addresses(&mut self) -> Option<Vec<AddressItem>> {
        let n = self.count(1)?;
        let mut list = Vec::new();
        for _ in 0..n {
            list.push(match self.byte()? {
                0 => AddressItem::Mailbox {
                    name: self.opt()?,
                    adl: self.opt()?,
                    mailbox: self.bytes()?,
                    host: self.bytes()?,
                },
                1 => AddressItem::GroupStart(self.bytes()?),
                2 => AddressItem::GroupEnd,
                _ => return None,
            });
        }
        Some(list)
    }

    fn opt_addresses(&mut self) -> Option<Option<Vec<AddressItem>>> {
        match self.byte()? {
            0 => Some(None),
            1 => Some(Some(self.addresses()?)),
            _ => None,
        }
    }

    fn span(&mut self) -> Option<Span> {
        let (start, end) = (self.u32()?, self.u32()?);
        (start <= end).then_some(Span { start, end })
    }

    fn message(&mut self, depth: usize) -> Option<Msg> {
        let envelope = Envelope {
            date: self.opt()?,
            subject: self.opt()?,
            from: self.addresses()?,
            sender: self.opt_addresses()?,
            reply_to: self.opt_addresses()?,
            to: self.addresses()?,
            cc: self.addresses()?,
            bcc: self.addresses()?,
            in_reply_to: self.opt()?,
            message_id: self.opt()?,
        };
        let root = self.part(depth)?;
        Some(Msg { envelope, root })
    }

    fn part(&mut self, depth: usize) -> Option<Part> {
        if depth > MAX_DEPTH {
            return None;
        }
        let header = self.span()?;
        let body = self.span()?;
        let lines = self.u32()?;
        let media_type = self.bytes()?;
        let subtype = self.bytes()?;
        let params = self.params()?;
        let id = self.opt()?;
        let description = self.opt()?;
        let encoding = self.bytes()?;
        let md5 = self.opt()?;
        let disposition = match self.byte()? {
            0 => None,
            1 => Some((self.bytes()?, self.params()?)),
            _ => return None,
        };
        let n = self.count(4)?;
        let mut language = Vec::new();
        for _ in 0..n {
            language.push(self.bytes()?);
        }
        let location = self.opt()?;
        let kind = match self.byte()? {
            0 => Kind::Single,
            1 => {
                let n = self.count(1)?;
                let mut children = Vec::new();
                for _ in 0..n {
                    children.push(self.part(depth + 1)?);
                }
                if children.is_empty() {
                    return None;
                }
                Kind::Multipart(children)
            }
            2 => Kind::Message(Box::new(self.message(depth + 1)?)),
            _ => return None,
        };
        Some(Part {
            header,
            body,
            lines,
            media_type,
            subtype,
            params,
            id,
            description,
            encoding,
            md5,
            disposition,
            language,
            location,
            kind,
        })
    }
}
