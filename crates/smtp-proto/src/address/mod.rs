//! Envelope addresses (RFC 5321 §4.1.2): paths, mailboxes, domains.
//!
//! The parser turns the text between `<` and `>` of `MAIL FROM:` / `RCPT TO:` into an
//! [`Address`] whose two halves are separate fields, so there is never a question of
//! which domain an address belongs to. The relay decision is the server's; this
//! module only makes sure the domain it decides on is the domain the mail goes to.
//!
//! # Policy on the address forms used to trick relays (docs/robustness.md §4.2)
//!
//! - **Source routes** (`<@a,@b:user@c>`): RFC 5321 §4.1.1.3 and §C say servers
//!   MUST accept the syntax and SHOULD ignore the route. We accept and strip it: the
//!   address is `user@c`, and the route's domains are only checked for syntax. The
//!   relay decision is therefore made on `c`, the final destination.
//! - **Percent hack** (`user%ext@ours`) and **bang paths** (`ext!user@ours`): `%` and
//!   `!` are ordinary `atext`, so these are local parts of a mailbox at `ours`; they
//!   are never rewritten. A bang path without `@` (`ext!user`) is not a mailbox and is
//!   refused. [`Address::has_routing_syntax`] lets the server refuse such local parts
//!   outright.
//! - **Quoted local parts** (`"user@ext"@ours`): the quotes are removed and the local
//!   part is `user@ext`, a mailbox at `ours`. A quoted string with no domain
//!   (`"user@ext"`) is refused. Quotes that were not needed (`"user"@x`) are dropped,
//!   so equal mailboxes compare equal; [`Address`]'s `Display` adds them back when the
//!   local part needs them.
//! - **Trailing dot** (`user@example.com.`): one trailing dot is the DNS root and is
//!   removed, so `example.com.` and `example.com` are the same domain; two are refused.
//! - **Case**: domains are lowercased; local parts keep their case (RFC 5321 §2.4 says
//!   they may be case-sensitive), and the directory decides how to fold them.
//! - **Address literals**: `[192.0.2.1]` and `[IPv6:2001:db8::1]` become
//!   [`Domain::Ipv4`] / [`Domain::Ipv6`]; general literals (`[tag:text]`) are refused.
//! - Only ASCII: Stoa does not offer SMTPUTF8.
//!
//! The local part has no length limit beyond the command line (VERP addresses are
//! longer than RFC 5321's 64 octets); domains keep the DNS limits (63 per label, 255
//! in all).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Longest domain name (RFC 1035 / RFC 5321 §4.5.3.1.2).
pub const MAX_DOMAIN: usize = 255;

/// Longest label of a domain name (RFC 1035).
pub const MAX_LABEL: usize = 63;

/// Why an address was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AddressError {
    /// The path is not enclosed in `<` and `>`, or something follows the `>`.
    MissingBrackets,
    /// The local part is empty, or not a dot-string or quoted string.
    BadLocalPart,
    /// No `@domain` after the local part.
    MissingDomain,
    /// The domain is not a valid name (labels of letters, digits and inner hyphens).
    BadDomain,
    /// An address literal that is not a valid IPv4 or IPv6 address.
    BadAddressLiteral,
    /// A general address literal (`[tag:text]`), which Stoa does not route.
    UnsupportedAddressLiteral,
    /// A malformed source route (`@a,@b:`).
    BadSourceRoute,
    /// A byte outside printable ASCII.
    NonAscii,
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AddressError::MissingBrackets => "address not enclosed in <>",
            AddressError::BadLocalPart => "malformed local part",
            AddressError::MissingDomain => "missing @domain",
            AddressError::BadDomain => "malformed domain",
            AddressError::BadAddressLiteral => "malformed address literal",
            AddressError::UnsupportedAddressLiteral => "unsupported address literal",
            AddressError::BadSourceRoute => "malformed source route",
            AddressError::NonAscii => "non-ASCII byte in address",
        })
    }
}

impl std::error::Error for AddressError {}

/// The domain half of a mailbox: a lowercased name without trailing dot, or an IP
/// address literal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Domain {
    /// A domain name, lowercase ASCII, no trailing dot.
    Name(String),
    /// `[a.b.c.d]`
    Ipv4(Ipv4Addr),
    /// `[IPv6:...]`
    Ipv6(Ipv6Addr),
}

impl Domain {
    /// Parses a domain name or address literal, normalised (lowercase, one trailing dot
    /// removed).
    pub fn parse(text: &str) -> Result<Domain, AddressError> {
        let bytes = text.as_bytes();
        if bytes.first() == Some(&b'[') {
            return parse_literal(bytes);
        }
        parse_name(bytes).map(Domain::Name)
    }

    /// The domain name, or `None` for an address literal.
    pub fn name(&self) -> Option<&str> {
        match self {
            Domain::Name(name) => Some(name),
            Domain::Ipv4(_) | Domain::Ipv6(_) => None,
        }
    }
}

impl fmt::Display for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Domain::Name(name) => f.write_str(name),
            Domain::Ipv4(ip) => write!(f, "[{ip}]"),
            Domain::Ipv6(ip) => write!(f, "[IPv6:{ip}]"),
        }
    }
}

/// A mailbox, `local@domain`, normalised (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Address {
    local: String,
    domain: Domain,
}

impl Address {
    /// Parses a bare mailbox (`user@example.com`, no angle brackets, no route).
    pub fn parse(text: &str) -> Result<Address, AddressError> {
        let mut cursor = Cursor::new(text.as_bytes());
        let address = cursor.mailbox(&[])?;
        if !cursor.at_end() {
            return Err(AddressError::BadDomain);
        }
        Ok(address)
    }

    /// The local part, unquoted (a quoted `"a b"@x` gives `a b`), case preserved.
    pub fn local(&self) -> &str {
        &self.local
    }

    /// The domain the mailbox belongs to: the one to decide relaying on.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// Whether the local part holds `%`, `!` or `@`: the percent hack, a bang path or a
    /// quoted address. They are never interpreted, but a server may refuse them.
    pub fn has_routing_syntax(&self) -> bool {
        self.local.bytes().any(|b| matches!(b, b'%' | b'!' | b'@'))
    }
}

impl fmt::Display for Address {
    /// `local@domain`, with the local part quoted when it is not a dot-string.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if is_dot_string(self.local.as_bytes()) {
            f.write_str(&self.local)?;
        } else {
            f.write_str("\"")?;
            for c in self.local.chars() {
                if c == '"' || c == '\\' {
                    f.write_str("\\")?;
                }
                write!(f, "{c}")?;
            }
            f.write_str("\"")?;
        }
        write!(f, "@{}", self.domain)
    }
}

/// The argument of `MAIL FROM:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReversePath {
    /// `<>`: the null sender of bounces (RFC 5321 §4.5.5).
    Null,
    /// A sender mailbox.
    Mailbox(Address),
}

impl fmt::Display for ReversePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReversePath::Null => f.write_str("<>"),
            ReversePath::Mailbox(a) => write!(f, "<{a}>"),
        }
    }
}

/// The argument of `RCPT TO:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ForwardPath {
    /// `<Postmaster>` without a domain (RFC 5321 §4.1.1.3), any case: the postmaster
    /// of this server.
    Postmaster,
    /// A recipient mailbox.
    Mailbox(Address),
}

impl fmt::Display for ForwardPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ForwardPath::Postmaster => f.write_str("<postmaster>"),
            ForwardPath::Mailbox(a) => write!(f, "<{a}>"),
        }
    }
}

/// Parses a reverse-path at the start of `input` (which begins with `<`); returns it
/// and the rest of the input after the `>`.
pub fn parse_reverse_path(input: &[u8]) -> Result<(ReversePath, &[u8]), AddressError> {
    if let Some(rest) = input.strip_prefix(b"<>") {
        return Ok((ReversePath::Null, rest));
    }
    let (address, rest) = parse_path(input)?;
    Ok((ReversePath::Mailbox(address), rest))
}

/// Parses a forward-path at the start of `input` (which begins with `<`); returns it
/// and the rest of the input after the `>`.
pub fn parse_forward_path(input: &[u8]) -> Result<(ForwardPath, &[u8]), AddressError> {
    const POSTMASTER: &[u8] = b"<postmaster>";
    if input.len() >= POSTMASTER.len() && input[..POSTMASTER.len()].eq_ignore_ascii_case(POSTMASTER)
    {
        return Ok((ForwardPath::Postmaster, &input[POSTMASTER.len()..]));
    }
    let (address, rest) = parse_path(input)?;
    Ok((ForwardPath::Mailbox(address), rest))
}

/// `"<" [ A-d-l ":" ] Mailbox ">"`, the route checked and dropped.
fn parse_path(input: &[u8]) -> Result<(Address, &[u8]), AddressError> {
    let Some(inner) = input.strip_prefix(b"<") else {
        return Err(AddressError::MissingBrackets);
    };
    let mut cursor = Cursor::new(inner);
    if cursor.peek() == Some(b'@') {
        cursor.source_route()?;
    }
    let address = cursor.mailbox(b">")?;
    if cursor.peek() != Some(b'>') {
        return Err(AddressError::MissingBrackets);
    }
    Ok((address, &inner[cursor.pos + 1..]))
}

/// A position in the bytes of an address.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, pos: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }

    /// The bytes up to (not including) the first of `stops`, or to the end.
    fn take_until(&mut self, stops: &[u8]) -> &'a [u8] {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if stops.contains(&b) {
                break;
            }
            self.pos += 1;
        }
        &self.bytes[start..self.pos]
    }

    /// `@dom1,@dom2:`: each domain checked, then forgotten.
    fn source_route(&mut self) -> Result<(), AddressError> {
        loop {
            if self.peek() != Some(b'@') {
                return Err(AddressError::BadSourceRoute);
            }
            self.pos += 1;
            let domain = self.take_until(b",:>");
            parse_domain_bytes(domain).map_err(|_| AddressError::BadSourceRoute)?;
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b':') => {
                    self.pos += 1;
                    return Ok(());
                }
                _ => return Err(AddressError::BadSourceRoute),
            }
        }
    }

    /// `Local-part "@" ( Domain / address-literal )`, stopping before any of `stops`.
    fn mailbox(&mut self, stops: &[u8]) -> Result<Address, AddressError> {
        let local = if self.peek() == Some(b'"') {
            self.quoted_string()?
        } else {
            let mut until = vec![b'@'];
            until.extend_from_slice(stops);
            let raw = self.take_until(&until);
            if !raw.is_ascii() {
                return Err(AddressError::NonAscii);
            }
            if !is_dot_string(raw) {
                return Err(AddressError::BadLocalPart);
            }
            String::from_utf8_lossy(raw).into_owned()
        };
        if local.is_empty() {
            return Err(AddressError::BadLocalPart);
        }
        if self.peek() != Some(b'@') {
            return Err(AddressError::MissingDomain);
        }
        self.pos += 1;
        let raw = if self.peek() == Some(b'[') {
            let start = self.pos;
            self.take_until(b"]");
            if self.peek() != Some(b']') {
                return Err(AddressError::BadAddressLiteral);
            }
            self.pos += 1;
            &self.bytes[start..self.pos]
        } else {
            self.take_until(stops)
        };
        let domain = parse_domain_bytes(raw)?;
        Ok(Address { local, domain })
    }

    /// `DQUOTE *QcontentSMTP DQUOTE`, returning the content with quoted-pairs undone.
    fn quoted_string(&mut self) -> Result<String, AddressError> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let Some(b) = self.peek() else {
                return Err(AddressError::BadLocalPart);
            };
            self.pos += 1;
            match b {
                b'"' => return Ok(out),
                b'\\' => match self.peek() {
                    Some(c @ 32..=126) => {
                        self.pos += 1;
                        out.push(char::from(c));
                    }
                    Some(128..) => return Err(AddressError::NonAscii),
                    _ => return Err(AddressError::BadLocalPart),
                },
                32..=126 => out.push(char::from(b)),
                128.. => return Err(AddressError::NonAscii),
                _ => return Err(AddressError::BadLocalPart),
            }
        }
    }
}

/// RFC 5322 `atext`.
fn is_atext(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&b)
}

/// `Atom *("." Atom)`.
fn is_dot_string(s: &[u8]) -> bool {
    !s.is_empty()
        && s.split(|&b| b == b'.')
            .all(|atom| !atom.is_empty() && atom.iter().all(|&b| is_atext(b)))
}

fn parse_domain_bytes(raw: &[u8]) -> Result<Domain, AddressError> {
    if !raw.is_ascii() {
        return Err(AddressError::NonAscii);
    }
    if raw.first() == Some(&b'[') {
        return parse_literal(raw);
    }
    parse_name(raw).map(Domain::Name)
}

/// `sub-domain *("." sub-domain)`, one trailing dot allowed and removed, lowercased.
fn parse_name(raw: &[u8]) -> Result<String, AddressError> {
    if !raw.is_ascii() {
        return Err(AddressError::NonAscii);
    }
    let name = raw.strip_suffix(b".").unwrap_or(raw);
    if name.is_empty() || name.len() > MAX_DOMAIN {
        return Err(AddressError::BadDomain);
    }
    for label in name.split(|&b| b == b'.') {
        let ok = !label.is_empty()
            && label.len() <= MAX_LABEL
            && label
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'-')
            && label.first() != Some(&b'-')
            && label.last() != Some(&b'-');
        if !ok {
            return Err(AddressError::BadDomain);
        }
    }
    Ok(String::from_utf8_lossy(name).to_ascii_lowercase())
}

/// `"[" ( IPv4-address-literal / IPv6-address-literal ) "]"`.
fn parse_literal(raw: &[u8]) -> Result<Domain, AddressError> {
    let inner = raw
        .strip_prefix(b"[")
        .and_then(|r| r.strip_suffix(b"]"))
        .ok_or(AddressError::BadAddressLiteral)?;
    let text = std::str::from_utf8(inner).map_err(|_| AddressError::NonAscii)?;
    if text.len() >= 5 && text[..5].eq_ignore_ascii_case("IPv6:") {
        return text[5..]
            .parse()
            .map(Domain::Ipv6)
            .map_err(|_| AddressError::BadAddressLiteral);
    }
    if let Ok(ip) = text.parse() {
        return Ok(Domain::Ipv4(ip));
    }
    // RFC 5321 General-address-literal: Standardized-tag ":" 1*dcontent.
    match text.split_once(':') {
        Some((tag, _))
            if !tag.is_empty() && tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') =>
        {
            Err(AddressError::UnsupportedAddressLiteral)
        }
        _ => Err(AddressError::BadAddressLiteral),
    }
}

#[cfg(test)]
mod tests;
