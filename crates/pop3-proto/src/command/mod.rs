//! Command lines (RFC 1939 §3, RFC 2449 §3–4): framing out of a byte buffer and
//! parsing into [`Command`].
//!
//! [`next_line`] (`stoa-mail-proto`'s, shared with SMTP and re-exported here) finds
//! one CRLF-terminated line within the length limit. A line ended by LF alone is
//! reported as [`Line::BareLf`] (the session refuses it and closes, as smtp-proto
//! does: no POP3 client sends bare LF, and a peer whose framing differs from ours is
//! one we cannot stay in step with). A line over the limit is reported so the caller
//! can discard it without buffering it.
//!
//! [`parse_command`] turns a line (CRLF removed) into a [`Command`]. Keywords are
//! case-insensitive. Control bytes (a lone CR, NUL, DEL...) make the whole line one
//! bad command. Arguments are printable ASCII, except the USER and PASS arguments,
//! which may also be UTF-8 (real clients send 8-bit passwords). Leniency where it
//! creates no ambiguity: spaces may be repeated between arguments and trailing
//! spaces are ignored — except in PASS, whose argument is everything after the first
//! space, spaces included (RFC 1939 §7 allows this, and a password may contain
//! spaces). Message numbers are decimal digits only (no sign); a number too large
//! to represent saturates, and is then simply beyond the mailbox.

pub use stoa_mail_proto::line::{Line, next_line};

use crate::Error;

/// The command keywords Stoa knows. APOP is not among them: it needs the plaintext
/// password on the server, which the directory does not keep (argon2 hashes), so it
/// is never offered and the greeting carries no APOP timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `USER` (RFC 1939 §7)
    User,
    /// `PASS`
    Pass,
    /// `AUTH` (RFC 5034)
    Auth,
    /// `STAT`
    Stat,
    /// `LIST`
    List,
    /// `UIDL`
    Uidl,
    /// `RETR`
    Retr,
    /// `TOP`
    Top,
    /// `DELE`
    Dele,
    /// `RSET`
    Rset,
    /// `NOOP`
    Noop,
    /// `QUIT`
    Quit,
    /// `CAPA` (RFC 2449)
    Capa,
    /// `STLS` (RFC 2595)
    Stls,
    /// `XCLIENT` (Dovecot's and Postfix's): a trusted proxy names the client it
    /// speaks for.
    Xclient,
}

impl Verb {
    /// Every verb.
    pub const ALL: [Verb; 15] = [
        Verb::User,
        Verb::Pass,
        Verb::Auth,
        Verb::Stat,
        Verb::List,
        Verb::Uidl,
        Verb::Retr,
        Verb::Top,
        Verb::Dele,
        Verb::Rset,
        Verb::Noop,
        Verb::Quit,
        Verb::Capa,
        Verb::Stls,
        Verb::Xclient,
    ];

    /// The keyword as sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::User => "USER",
            Verb::Pass => "PASS",
            Verb::Auth => "AUTH",
            Verb::Stat => "STAT",
            Verb::List => "LIST",
            Verb::Uidl => "UIDL",
            Verb::Retr => "RETR",
            Verb::Top => "TOP",
            Verb::Dele => "DELE",
            Verb::Rset => "RSET",
            Verb::Noop => "NOOP",
            Verb::Quit => "QUIT",
            Verb::Capa => "CAPA",
            Verb::Stls => "STLS",
            Verb::Xclient => "XCLIENT",
        }
    }

    /// The usage text of a syntax error.
    pub(crate) fn usage(self) -> &'static str {
        match self {
            Verb::User => "Syntax: USER name",
            Verb::Pass => "Syntax: PASS password",
            Verb::Auth => "Syntax: AUTH [mechanism [initial-response]]",
            Verb::Stat => "Syntax: STAT",
            Verb::List => "Syntax: LIST [msg]",
            Verb::Uidl => "Syntax: UIDL [msg]",
            Verb::Retr => "Syntax: RETR msg",
            Verb::Top => "Syntax: TOP msg lines",
            Verb::Dele => "Syntax: DELE msg",
            Verb::Rset => "Syntax: RSET",
            Verb::Noop => "Syntax: NOOP",
            Verb::Quit => "Syntax: QUIT",
            Verb::Capa => "Syntax: CAPA",
            Verb::Stls => "Syntax: STLS",
            Verb::Xclient => "Syntax: XCLIENT ADDR=address [PORT=port] [name=value ...]",
        }
    }

    fn from_keyword(keyword: &str) -> Option<Verb> {
        Verb::ALL
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(keyword))
    }
}

/// A SASL mechanism Stoa offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// `PLAIN` (RFC 4616)
    Plain,
}

impl Mechanism {
    /// The mechanism name as advertised.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
        }
    }
}

/// One parsed command. Borrowed text points into the command line.
///
/// Message numbers are as the client sent them (1-based); 0 and numbers beyond the
/// mailbox parse, and are refused by the session.
#[derive(Clone, PartialEq, Eq)]
pub enum Command<'a> {
    /// `USER name`
    User(&'a str),
    /// `PASS password` (everything after the first space)
    Pass(&'a str),
    /// `AUTH` alone (list the mechanisms), or `AUTH mechanism [initial-response]`.
    Auth {
        /// The mechanism; `None` for a bare `AUTH`.
        mechanism: Option<Mechanism>,
        /// The base64 initial response (`=` for an empty one), not yet decoded.
        initial_response: Option<&'a str>,
    },
    /// `STAT`
    Stat,
    /// `LIST [msg]`
    List(Option<usize>),
    /// `UIDL [msg]`
    Uidl(Option<usize>),
    /// `RETR msg`
    Retr(usize),
    /// `TOP msg lines`
    Top {
        /// The message number.
        number: usize,
        /// How many body lines to send (saturated at `u32::MAX`).
        lines: u32,
    },
    /// `DELE msg`
    Dele(usize),
    /// `RSET`
    Rset,
    /// `NOOP`
    Noop,
    /// `QUIT`
    Quit,
    /// `CAPA`
    Capa,
    /// `STLS`
    Stls,
    /// `XCLIENT ADDR=… [PORT=…] …`: the client a proxy speaks for.
    Xclient(Forwarded),
}

/// The client named by `XCLIENT`: the address (and port) a proxy accepted the
/// connection from. Attributes other than `ADDR` and `PORT` (Dovecot's `SESSION`,
/// `TTL`, `FORWARD`…) are accepted and ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forwarded {
    /// The client's address.
    pub addr: std::net::IpAddr,
    /// The client's port, when the proxy gave one.
    pub port: Option<u16>,
}

/// Most attributes one `XCLIENT` may carry; the line limit bounds them anyway.
const MAX_XCLIENT_ATTRIBUTES: usize = 16;

impl Command<'_> {
    /// The command's verb.
    pub fn verb(&self) -> Verb {
        match self {
            Command::User(_) => Verb::User,
            Command::Pass(_) => Verb::Pass,
            Command::Auth { .. } => Verb::Auth,
            Command::Stat => Verb::Stat,
            Command::List(_) => Verb::List,
            Command::Uidl(_) => Verb::Uidl,
            Command::Retr(_) => Verb::Retr,
            Command::Top { .. } => Verb::Top,
            Command::Dele(_) => Verb::Dele,
            Command::Rset => Verb::Rset,
            Command::Noop => Verb::Noop,
            Command::Quit => Verb::Quit,
            Command::Capa => Verb::Capa,
            Command::Stls => Verb::Stls,
            Command::Xclient(_) => Verb::Xclient,
        }
    }
}

impl std::fmt::Debug for Command<'_> {
    /// Like a derived `Debug`, without the password or the SASL response.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Command::User(name) => f.debug_tuple("User").field(name).finish(),
            Command::Pass(_) => f.write_str("Pass(<redacted>)"),
            Command::Auth {
                mechanism,
                initial_response,
            } => f
                .debug_struct("Auth")
                .field("mechanism", mechanism)
                .field("initial_response", &initial_response.map(|_| "<redacted>"))
                .finish(),
            Command::List(n) => f.debug_tuple("List").field(n).finish(),
            Command::Uidl(n) => f.debug_tuple("Uidl").field(n).finish(),
            Command::Retr(n) => f.debug_tuple("Retr").field(n).finish(),
            Command::Top { number, lines } => f
                .debug_struct("Top")
                .field("number", number)
                .field("lines", lines)
                .finish(),
            Command::Dele(n) => f.debug_tuple("Dele").field(n).finish(),
            other => f.write_str(&other.verb().as_str().to_ascii_lowercase()),
        }
    }
}

/// Parses one command line (without its CRLF).
pub fn parse_command(line: &[u8]) -> Result<Command<'_>, Error> {
    check_characters(line)?;
    let line = std::str::from_utf8(line).map_err(|_| Error::BadCharacter)?;
    let (keyword, rest) = match line.split_once(' ') {
        Some((keyword, rest)) => (keyword, Some(rest)),
        None => (line, None),
    };
    let verb = Verb::from_keyword(keyword).ok_or(Error::UnknownCommand)?;
    // PASS keeps its argument verbatim; everything else splits on runs of spaces.
    if verb == Verb::Pass {
        return match rest {
            Some(password) if !password.is_empty() => Ok(Command::Pass(password)),
            _ => Err(Error::Syntax(verb)),
        };
    }
    if verb != Verb::User && !rest.unwrap_or_default().is_ascii() {
        return Err(Error::BadCharacter);
    }
    let args: Vec<&str> = rest
        .unwrap_or_default()
        .split(' ')
        .filter(|a| !a.is_empty())
        .collect();
    parse_arguments(verb, &args)
}

/// The command for `verb` with these arguments.
fn parse_arguments<'a>(verb: Verb, args: &[&'a str]) -> Result<Command<'a>, Error> {
    let num = |text: &str| number(text).ok_or(Error::Syntax(verb));
    let command = match (verb, args) {
        (Verb::User, [name]) => Command::User(name),
        (Verb::Auth, []) => Command::Auth {
            mechanism: None,
            initial_response: None,
        },
        (Verb::Auth, [mechanism, initial @ ..]) if initial.len() <= 1 => Command::Auth {
            mechanism: Some(mechanism_named(mechanism)?),
            initial_response: initial.first().copied(),
        },
        (Verb::Stat, []) => Command::Stat,
        (Verb::List, []) => Command::List(None),
        (Verb::List, [n]) => Command::List(Some(num(n)?)),
        (Verb::Uidl, []) => Command::Uidl(None),
        (Verb::Uidl, [n]) => Command::Uidl(Some(num(n)?)),
        (Verb::Retr, [n]) => Command::Retr(num(n)?),
        (Verb::Top, [n, lines]) => Command::Top {
            number: num(n)?,
            lines: u32::try_from(num(lines)?).unwrap_or(u32::MAX),
        },
        (Verb::Dele, [n]) => Command::Dele(num(n)?),
        (Verb::Rset, []) => Command::Rset,
        (Verb::Noop, []) => Command::Noop,
        (Verb::Quit, []) => Command::Quit,
        (Verb::Capa, []) => Command::Capa,
        (Verb::Stls, []) => Command::Stls,
        (Verb::Xclient, attributes) => Command::Xclient(xclient(attributes)?),
        _ => return Err(Error::Syntax(verb)),
    };
    Ok(command)
}

/// `XCLIENT`'s `NAME=VALUE` attributes: `ADDR` is required (an IPv4 or IPv6
/// address, Postfix's `IPV6:` prefix allowed), `PORT` optional, each at most once;
/// any other well-formed attribute is ignored. `[UNAVAILABLE]` values (Postfix's)
/// count as absent.
fn xclient(attributes: &[&str]) -> Result<Forwarded, Error> {
    let bad = Error::Syntax(Verb::Xclient);
    if attributes.len() > MAX_XCLIENT_ATTRIBUTES {
        return Err(bad);
    }
    let (mut addr, mut port) = (None, None);
    let mut seen: Vec<&str> = Vec::with_capacity(attributes.len());
    for attribute in attributes {
        let (name, value) = attribute.split_once('=').ok_or(bad)?;
        let well_formed = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !value.is_empty();
        if !well_formed || seen.iter().any(|s| s.eq_ignore_ascii_case(name)) {
            return Err(bad);
        }
        seen.push(name);
        let unavailable = value.eq_ignore_ascii_case("[UNAVAILABLE]")
            || value.eq_ignore_ascii_case("[TEMPUNAVAIL]");
        if unavailable {
            continue;
        }
        if name.eq_ignore_ascii_case("ADDR") {
            let text = match value.get(..5) {
                Some(prefix) if prefix.eq_ignore_ascii_case("IPV6:") => &value[5..],
                _ => value,
            };
            addr = Some(text.parse().map_err(|_| bad)?);
        } else if name.eq_ignore_ascii_case("PORT") {
            port = Some(value.parse::<u16>().map_err(|_| bad)?);
        }
    }
    Ok(Forwarded {
        addr: addr.ok_or(bad)?,
        port,
    })
}

/// The mechanism called `name` (case-insensitive), if Stoa offers it.
fn mechanism_named(name: &str) -> Result<Mechanism, Error> {
    if name.eq_ignore_ascii_case("PLAIN") {
        Ok(Mechanism::Plain)
    } else {
        Err(Error::UnknownMechanism)
    }
}

/// Decimal digits, saturating: `0001` is 1, and a number too large for `usize` is
/// `usize::MAX` (beyond any mailbox).
fn number(text: &str) -> Option<usize> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.bytes().fold(0usize, |n, d| {
        n.saturating_mul(10).saturating_add(usize::from(d - b'0'))
    }))
}

/// No control bytes; a CR gets its own error.
fn check_characters(line: &[u8]) -> Result<(), Error> {
    match line.iter().find(|&&b| b < b' ' || b == 0x7f) {
        None => Ok(()),
        Some(b'\r') => Err(Error::BareCr),
        Some(_) => Err(Error::BadCharacter),
    }
}

#[cfg(test)]
mod tests;
