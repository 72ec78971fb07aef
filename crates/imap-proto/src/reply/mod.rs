//! The client side: one line of what an IMAP server sends (RFC 9051 §7), for the
//! IMAP proxy's login at a store host and the load generator's client.
//!
//! [`parse_line`] takes a line without its CRLF and says what it is: a status
//! response ([`Reply::Status`]: the greeting's `* OK`, `* PREAUTH` or `* BYE`, an
//! untagged `* NO`/`* BAD`, or a command's tagged `OK`/`NO`/`BAD`) with its
//! response code ([`ReplyCode`], whose [`ReplyCode::capabilities`] reads a
//! `[CAPABILITY ...]`), a continuation request (`+ ...`), or untagged data
//! (`* 3 EXISTS`, `* CAPABILITY ...`, `* 1 FETCH (...)`), kept as bytes for the
//! caller. [`literal_at_end`] says whether a line announces a literal (`{n}` or
//! `{n+}`), so a caller can skip its octets or refuse it; this module never reads
//! one.
//!
//! Like the rest of the crate it does no I/O, and it treats every byte as
//! hostile: the parse is a single pass over the line, and nothing is allocated
//! but the capability list a caller asks for.

use std::fmt;

use crate::string::is_atom_char;

/// The status word of a status response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// `OK`
    Ok,
    /// `NO`
    No,
    /// `BAD`
    Bad,
    /// `BYE`: the server is closing (untagged only).
    Bye,
    /// `PREAUTH`: a greeting that logged the client in already (untagged only).
    PreAuth,
}

impl Status {
    /// The status called `word` (any case).
    fn from_word(word: &[u8]) -> Option<Status> {
        [
            (&b"OK"[..], Status::Ok),
            (b"NO", Status::No),
            (b"BAD", Status::Bad),
            (b"BYE", Status::Bye),
            (b"PREAUTH", Status::PreAuth),
        ]
        .into_iter()
        .find(|(w, _)| w.eq_ignore_ascii_case(word))
        .map(|(_, s)| s)
    }
}

/// A response code (`[NAME arguments]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplyCode<'a> {
    /// The code's name as sent (`CAPABILITY`, `UNAVAILABLE`, ...).
    pub name: &'a str,
    /// What follows the name up to the `]`, without the separating space.
    pub arguments: &'a [u8],
}

impl<'a> ReplyCode<'a> {
    /// Whether the code is `name` (any case).
    pub fn is(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
    }

    /// The capabilities of a `[CAPABILITY ...]` code; `None` for another code.
    pub fn capabilities(&self) -> Option<Vec<&'a str>> {
        self.is("CAPABILITY")
            .then(|| capability_list(self.arguments))
    }
}

/// One line of a server's response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply<'a> {
    /// A status response: tagged (the command's end) or untagged (`tag` `None`:
    /// a greeting, a warning, a `BYE`).
    Status {
        /// The command's tag; `None` for `*`.
        tag: Option<&'a str>,
        /// The status word.
        status: Status,
        /// The response code, if any.
        code: Option<ReplyCode<'a>>,
        /// The human-readable text (perhaps empty).
        text: &'a [u8],
    },
    /// `+ text`: the server waits for the client (a literal's octets, a SASL
    /// response).
    Continuation(&'a [u8]),
    /// Untagged data (`3 EXISTS`, `CAPABILITY ...`, `1 FETCH (...)`): the line
    /// after `* `.
    Data(&'a [u8]),
}

/// Why a line is not a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReplyError {
    /// Empty, or no space after the tag.
    Malformed,
    /// A tag that is not made of atom characters (or is `+`).
    BadTag,
    /// A tagged line whose word is not `OK`, `NO` or `BAD`.
    NotStatus,
    /// A `[` without its `]`, or a code name that is not an atom.
    BadCode,
}

impl fmt::Display for ReplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReplyError::Malformed => "not an IMAP response line",
            ReplyError::BadTag => "invalid tag",
            ReplyError::NotStatus => "a tagged response without OK, NO or BAD",
            ReplyError::BadCode => "invalid response code",
        })
    }
}

impl std::error::Error for ReplyError {}

/// What `line` (without its CRLF) is.
pub fn parse_line(line: &[u8]) -> Result<Reply<'_>, ReplyError> {
    if line == b"+" {
        return Ok(Reply::Continuation(b""));
    }
    if let Some(text) = line.strip_prefix(b"+ ") {
        return Ok(Reply::Continuation(text));
    }
    let space = memchr::memchr(b' ', line).ok_or(ReplyError::Malformed)?;
    let (tag, rest) = (&line[..space], &line[space + 1..]);
    let tag = match tag {
        b"*" => None,
        _ if !tag.is_empty() && tag.iter().all(|&b| is_tag_char(b)) => {
            Some(std::str::from_utf8(tag).map_err(|_| ReplyError::BadTag)?)
        }
        _ => return Err(ReplyError::BadTag),
    };
    let word_end = memchr::memchr(b' ', rest).unwrap_or(rest.len());
    let status = Status::from_word(&rest[..word_end]);
    let status = match (tag, status) {
        (None, None) => return Ok(Reply::Data(rest)),
        (Some(_), None | Some(Status::Bye | Status::PreAuth)) => {
            return Err(ReplyError::NotStatus);
        }
        (_, Some(status)) => status,
    };
    let after = rest.get(word_end + 1..).unwrap_or(b"");
    let (code, text) = split_code(after)?;
    Ok(Reply::Status {
        tag,
        status,
        code,
        text,
    })
}

/// The code at the start of `text` (`[...] rest`), and the rest.
fn split_code(text: &[u8]) -> Result<(Option<ReplyCode<'_>>, &[u8]), ReplyError> {
    let Some(inner) = text.strip_prefix(b"[") else {
        return Ok((None, text));
    };
    let close = memchr::memchr(b']', inner).ok_or(ReplyError::BadCode)?;
    let (code, rest) = (&inner[..close], &inner[close + 1..]);
    let rest = rest.strip_prefix(b" ").unwrap_or(rest);
    let name_end = memchr::memchr(b' ', code).unwrap_or(code.len());
    let name = &code[..name_end];
    if name.is_empty() || !name.iter().all(|&b| is_atom_char(b)) {
        return Err(ReplyError::BadCode);
    }
    let name = std::str::from_utf8(name).map_err(|_| ReplyError::BadCode)?;
    let arguments = code.get(name_end + 1..).unwrap_or(b"");
    Ok((Some(ReplyCode { name, arguments }), rest))
}

/// The capabilities of untagged `CAPABILITY ...` data (the line after `* `);
/// `None` for other data.
pub fn capability_data(data: &[u8]) -> Option<Vec<&str>> {
    const WORD: &[u8] = b"CAPABILITY";
    let head = data.get(..WORD.len())?;
    if !head.eq_ignore_ascii_case(WORD) {
        return None;
    }
    match data.get(WORD.len()) {
        None => Some(Vec::new()),
        Some(b' ') => Some(capability_list(&data[WORD.len() + 1..])),
        Some(_) => None,
    }
}

/// The atoms of a space-separated capability list (anything else skipped).
fn capability_list(list: &[u8]) -> Vec<&str> {
    list.split(|&b| b == b' ')
        .filter(|w| !w.is_empty() && w.iter().all(|&b| is_atom_char(b)))
        .filter_map(|w| std::str::from_utf8(w).ok())
        .collect()
}

/// Whether `caps` holds `name` (capabilities compare without case).
pub fn has_capability(caps: &[&str], name: &str) -> bool {
    caps.iter().any(|c| c.eq_ignore_ascii_case(name))
}

/// The literal a line announces at its end (`{123}` or `{123+}`): its length,
/// saturated at `u64::MAX` when the digits say more. `None` when the line ends
/// otherwise.
pub fn literal_at_end(line: &[u8]) -> Option<u64> {
    let inner = line.strip_suffix(b"}")?;
    let open = memchr::memrchr(b'{', inner)?;
    let digits = &inner[open + 1..];
    let digits = digits.strip_suffix(b"+").unwrap_or(digits);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(digits.iter().fold(0u64, |n, &d| {
        n.saturating_mul(10).saturating_add(u64::from(d - b'0'))
    }))
}

/// A tag's characters: ASTRING-CHAR but `+` (`]` included).
fn is_tag_char(b: u8) -> bool {
    b != b'+' && (is_atom_char(b) || b == b']')
}

#[cfg(test)]
mod tests;
