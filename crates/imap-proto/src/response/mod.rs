//! Response encoding (RFC 9051 §7): status responses with their codes, untagged data,
//! continuation requests, and FETCH responses ([`FetchWriter`]).
//!
//! Every writer appends one complete response, CRLF included, to a `Vec<u8>`. Human
//! text is sanitised (CR and LF become spaces) so that no caller can split a
//! response. Names go through [`crate::mailbox::encode_name`] and strings through
//! [`crate::string`], which choose the form (atom, quoted, literal).

mod fetch;
#[cfg(test)]
mod tests;

pub use fetch::{FetchWriter, write_section_name};

use crate::command::{Flag, StatusItem};
use crate::mailbox::encode_name;
use crate::sequence::write_sequence;
use crate::string::{write_astring, write_string};

/// The condition of a status response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// `OK`
    Ok,
    /// `NO`
    No,
    /// `BAD`
    Bad,
}

impl Condition {
    /// The word on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Ok => "OK",
            Condition::No => "NO",
            Condition::Bad => "BAD",
        }
    }
}

/// A response code (RFC 9051 §7.1, RFC 4315, RFC 7162, RFC 5530, RFC 7889, RFC 4978).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Code {
    /// `ALERT`
    Alert,
    /// `CAPABILITY cap...`
    Capability(Vec<String>),
    /// `PARSE`
    Parse,
    /// `PERMANENTFLAGS (flags [\*])`
    PermanentFlags {
        /// The flags that can be changed permanently.
        flags: Vec<Flag>,
        /// `\*`: new keywords can be created.
        new_keywords: bool,
    },
    /// `READ-ONLY`
    ReadOnly,
    /// `READ-WRITE`
    ReadWrite,
    /// `TRYCREATE`
    TryCreate,
    /// `UIDNEXT n`
    UidNext(u32),
    /// `UIDVALIDITY n`
    UidValidity(u32),
    /// `UNSEEN n` (IMAP4rev1)
    Unseen(u32),
    /// `APPENDUID uidvalidity uid`
    AppendUid {
        /// The destination's UIDVALIDITY.
        uid_validity: u32,
        /// The new message's UID.
        uid: u32,
    },
    /// `COPYUID uidvalidity source-uids destination-uids`
    CopyUid {
        /// The destination's UIDVALIDITY.
        uid_validity: u32,
        /// The source UIDs, ascending.
        source: Vec<u32>,
        /// The new UIDs, in the same order.
        destination: Vec<u32>,
    },
    /// `HIGHESTMODSEQ n`
    HighestModSeq(u64),
    /// `NOMODSEQ`
    NoModSeq,
    /// `MODIFIED set` (the numbers, ascending)
    Modified(Vec<u32>),
    /// `CLOSED` (RFC 7162 §3.2.11)
    Closed,
    /// `UNAVAILABLE`
    Unavailable,
    /// `AUTHENTICATIONFAILED`
    AuthenticationFailed,
    /// `AUTHORIZATIONFAILED`
    AuthorizationFailed,
    /// `EXPIRED`
    Expired,
    /// `PRIVACYREQUIRED`
    PrivacyRequired,
    /// `CONTACTADMIN`
    ContactAdmin,
    /// `NOPERM`
    NoPerm,
    /// `INUSE`
    InUse,
    /// `EXPUNGEISSUED`
    ExpungeIssued,
    /// `CORRUPTION`
    Corruption,
    /// `SERVERBUG`
    ServerBug,
    /// `CLIENTBUG`
    ClientBug,
    /// `CANNOT`
    Cannot,
    /// `LIMIT`
    Limit,
    /// `OVERQUOTA`
    OverQuota,
    /// `ALREADYEXISTS`
    AlreadyExists,
    /// `NONEXISTENT`
    NonExistent,
    /// `TOOBIG` (RFC 7889 / RFC 4469)
    TooBig,
    /// `COMPRESSIONACTIVE` (RFC 4978)
    CompressionActive,
}

impl Code {
    /// Appends the code without its brackets.
    pub fn write(&self, out: &mut Vec<u8>) {
        let word = match self {
            Code::Alert => "ALERT",
            Code::Capability(caps) => {
                out.extend_from_slice(b"CAPABILITY");
                for cap in caps {
                    out.push(b' ');
                    push_atom(out, cap);
                }
                return;
            }
            Code::Parse => "PARSE",
            Code::PermanentFlags {
                flags,
                new_keywords,
            } => {
                out.extend_from_slice(b"PERMANENTFLAGS ");
                write_flag_list(out, flags, *new_keywords);
                return;
            }
            Code::ReadOnly => "READ-ONLY",
            Code::ReadWrite => "READ-WRITE",
            Code::TryCreate => "TRYCREATE",
            Code::UidNext(n) => return push_fmt(out, format_args!("UIDNEXT {n}")),
            Code::UidValidity(n) => return push_fmt(out, format_args!("UIDVALIDITY {n}")),
            Code::Unseen(n) => return push_fmt(out, format_args!("UNSEEN {n}")),
            Code::AppendUid { uid_validity, uid } => {
                return push_fmt(out, format_args!("APPENDUID {uid_validity} {uid}"));
            }
            Code::CopyUid {
                uid_validity,
                source,
                destination,
            } => {
                push_fmt(out, format_args!("COPYUID {uid_validity} "));
                write_sequence(out, source);
                out.push(b' ');
                write_sequence(out, destination);
                return;
            }
            Code::HighestModSeq(n) => return push_fmt(out, format_args!("HIGHESTMODSEQ {n}")),
            Code::NoModSeq => "NOMODSEQ",
            Code::Modified(set) => {
                out.extend_from_slice(b"MODIFIED ");
                write_sequence(out, set);
                return;
            }
            Code::Closed => "CLOSED",
            Code::Unavailable => "UNAVAILABLE",
            Code::AuthenticationFailed => "AUTHENTICATIONFAILED",
            Code::AuthorizationFailed => "AUTHORIZATIONFAILED",
            Code::Expired => "EXPIRED",
            Code::PrivacyRequired => "PRIVACYREQUIRED",
            Code::ContactAdmin => "CONTACTADMIN",
            Code::NoPerm => "NOPERM",
            Code::InUse => "INUSE",
            Code::ExpungeIssued => "EXPUNGEISSUED",
            Code::Corruption => "CORRUPTION",
            Code::ServerBug => "SERVERBUG",
            Code::ClientBug => "CLIENTBUG",
            Code::Cannot => "CANNOT",
            Code::Limit => "LIMIT",
            Code::OverQuota => "OVERQUOTA",
            Code::AlreadyExists => "ALREADYEXISTS",
            Code::NonExistent => "NONEXISTENT",
            Code::TooBig => "TOOBIG",
            Code::CompressionActive => "COMPRESSIONACTIVE",
        };
        out.extend_from_slice(word.as_bytes());
    }
}

fn push_fmt(out: &mut Vec<u8>, args: std::fmt::Arguments<'_>) {
    out.extend_from_slice(args.to_string().as_bytes());
}

/// Appends `text` with CR, LF and other control bytes made spaces.
fn push_text(out: &mut Vec<u8>, text: &str) {
    out.extend(
        text.bytes()
            .map(|b| if b.is_ascii_control() { b' ' } else { b }),
    );
}

/// Appends an atom the caller vouches for (capability names), dropping any byte
/// that is not an atom char.
fn push_atom(out: &mut Vec<u8>, atom: &str) {
    out.extend(
        atom.bytes()
            .filter(|&b| crate::string::is_atom_char(b) || b == b']'),
    );
}

fn status_tail(out: &mut Vec<u8>, condition: &str, code: Option<&Code>, text: &str) {
    out.extend_from_slice(condition.as_bytes());
    out.push(b' ');
    if let Some(code) = code {
        out.push(b'[');
        code.write(out);
        out.extend_from_slice(b"] ");
    }
    push_text(out, if text.is_empty() { "done" } else { text });
    out.extend_from_slice(b"\r\n");
}

/// `tag OK|NO|BAD [code] text`
pub fn write_tagged(
    out: &mut Vec<u8>,
    tag: &str,
    condition: Condition,
    code: Option<&Code>,
    text: &str,
) {
    push_text(out, tag);
    out.push(b' ');
    status_tail(out, condition.as_str(), code, text);
}

/// `* OK|NO|BAD [code] text`
pub fn write_untagged(out: &mut Vec<u8>, condition: Condition, code: Option<&Code>, text: &str) {
    out.extend_from_slice(b"* ");
    status_tail(out, condition.as_str(), code, text);
}

/// `* BYE [code] text`
pub fn write_bye(out: &mut Vec<u8>, code: Option<&Code>, text: &str) {
    out.extend_from_slice(b"* ");
    status_tail(out, "BYE", code, text);
}

/// `* PREAUTH [code] text`
pub fn write_preauth(out: &mut Vec<u8>, code: Option<&Code>, text: &str) {
    out.extend_from_slice(b"* ");
    status_tail(out, "PREAUTH", code, text);
}

/// `+ text` (a SASL challenge is its base64; `text` may be empty).
pub fn write_continuation(out: &mut Vec<u8>, text: &str) {
    out.extend_from_slice(b"+ ");
    push_text(out, text);
    out.extend_from_slice(b"\r\n");
}

fn write_atoms_line(out: &mut Vec<u8>, word: &str, atoms: &[&str]) {
    out.extend_from_slice(b"* ");
    out.extend_from_slice(word.as_bytes());
    for atom in atoms {
        out.push(b' ');
        push_atom(out, atom);
    }
    out.extend_from_slice(b"\r\n");
}

/// `* CAPABILITY cap...`
pub fn write_capability(out: &mut Vec<u8>, caps: &[&str]) {
    write_atoms_line(out, "CAPABILITY", caps);
}

/// `* ENABLED cap...` (RFC 5161)
pub fn write_enabled(out: &mut Vec<u8>, caps: &[&str]) {
    write_atoms_line(out, "ENABLED", caps);
}

/// `* ID NIL` or `* ID ("name" "value" ...)` (RFC 2971).
pub fn write_id(out: &mut Vec<u8>, fields: Option<&[(&str, Option<&str>)]>) {
    out.extend_from_slice(b"* ID ");
    match fields {
        None | Some([]) => out.extend_from_slice(b"NIL"),
        Some(fields) => {
            out.push(b'(');
            for (i, (key, value)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(b' ');
                }
                write_string(out, key.as_bytes());
                out.push(b' ');
                crate::string::write_nstring(out, value.map(str::as_bytes));
            }
            out.push(b')');
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// `* NAMESPACE (("" "/")) NIL NIL`: one personal namespace with this delimiter, no
/// other users' or shared ones.
pub fn write_namespace(out: &mut Vec<u8>, delimiter: char) {
    out.extend_from_slice(b"* NAMESPACE ((\"\" ");
    write_delimiter(out, Some(delimiter));
    out.extend_from_slice(b")) NIL NIL\r\n");
}

fn write_delimiter(out: &mut Vec<u8>, delimiter: Option<char>) {
    match delimiter {
        Some(c) if c.is_ascii() && !c.is_ascii_control() => {
            out.push(b'"');
            if c == '"' || c == '\\' {
                out.push(b'\\');
            }
            out.push(c as u8);
            out.push(b'"');
        }
        _ => out.extend_from_slice(b"NIL"),
    }
}

fn write_name(out: &mut Vec<u8>, name: &str, utf8: bool) {
    write_astring(out, &encode_name(name, utf8));
}

/// One LIST or LSUB response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListEntry<'a> {
    /// Attributes as they go on the wire (`\HasNoChildren`, `\Sent`...).
    pub attributes: &'a [&'a str],
    /// The hierarchy delimiter, or `None` for a flat name space (`NIL`).
    pub delimiter: Option<char>,
    /// The mailbox name (decoded; encoded here per the UTF-8 mode).
    pub name: &'a str,
    /// `CHILDINFO ("SUBSCRIBED")` (RFC 5258 RECURSIVEMATCH).
    pub child_subscribed: bool,
    /// `OLDNAME (name)` (RFC 5465 after a RENAME, RFC 9051 §7.3.1).
    pub old_name: Option<&'a str>,
}

/// `* LIST (attrs) "/" name [(extended items)]`, or `* LSUB ...` with `lsub`.
/// `utf8`: UTF8=ACCEPT is on (names as UTF-8, else modified UTF-7).
pub fn write_list(out: &mut Vec<u8>, entry: &ListEntry<'_>, lsub: bool, utf8: bool) {
    out.extend_from_slice(if lsub { b"* LSUB (" } else { b"* LIST (" });
    for (i, attribute) in entry.attributes.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        if let Some(name) = attribute.strip_prefix('\\') {
            out.push(b'\\');
            push_atom(out, name);
        } else {
            push_atom(out, attribute);
        }
    }
    out.extend_from_slice(b") ");
    write_delimiter(out, entry.delimiter);
    out.push(b' ');
    write_name(out, entry.name, utf8);
    if entry.child_subscribed || entry.old_name.is_some() {
        out.extend_from_slice(b" (");
        if entry.child_subscribed {
            out.extend_from_slice(b"\"CHILDINFO\" (\"SUBSCRIBED\")");
        }
        if let Some(old) = entry.old_name {
            if entry.child_subscribed {
                out.push(b' ');
            }
            out.extend_from_slice(b"\"OLDNAME\" (");
            write_name(out, old, utf8);
            out.push(b')');
        }
        out.push(b')');
    }
    out.extend_from_slice(b"\r\n");
}

/// `* STATUS name (ITEM n ...)`
pub fn write_status(out: &mut Vec<u8>, name: &str, utf8: bool, items: &[(StatusItem, u64)]) {
    out.extend_from_slice(b"* STATUS ");
    write_name(out, name, utf8);
    out.extend_from_slice(b" (");
    for (i, (item, value)) in items.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        push_fmt(out, format_args!("{} {value}", item.as_str()));
    }
    out.extend_from_slice(b")\r\n");
}

fn write_flag_list(out: &mut Vec<u8>, flags: &[Flag], new_keywords: bool) {
    out.push(b'(');
    for (i, flag) in flags.iter().enumerate() {
        if i > 0 {
            out.push(b' ');
        }
        let text = flag.as_str();
        if let Some(name) = text.strip_prefix('\\') {
            out.push(b'\\');
            push_atom(out, name);
        } else {
            push_atom(out, text);
        }
    }
    if new_keywords {
        if !flags.is_empty() {
            out.push(b' ');
        }
        out.extend_from_slice(b"\\*");
    }
    out.push(b')');
}

/// `* FLAGS (flags)`
pub fn write_flags(out: &mut Vec<u8>, flags: &[Flag]) {
    out.extend_from_slice(b"* FLAGS ");
    write_flag_list(out, flags, false);
    out.extend_from_slice(b"\r\n");
}

/// `* n EXISTS`
pub fn write_exists(out: &mut Vec<u8>, n: u32) {
    push_fmt(out, format_args!("* {n} EXISTS\r\n"));
}

/// `* n RECENT` (IMAP4rev1)
pub fn write_recent(out: &mut Vec<u8>, n: u32) {
    push_fmt(out, format_args!("* {n} RECENT\r\n"));
}

/// `* n EXPUNGE`
pub fn write_expunge(out: &mut Vec<u8>, n: u32) {
    push_fmt(out, format_args!("* {n} EXPUNGE\r\n"));
}

/// `* VANISHED [(EARLIER)] uids` (RFC 7162 §3.2.10); `uids` ascending, not empty.
pub fn write_vanished(out: &mut Vec<u8>, earlier: bool, uids: &[u32]) {
    out.extend_from_slice(b"* VANISHED ");
    if earlier {
        out.extend_from_slice(b"(EARLIER) ");
    }
    write_sequence(out, uids);
    out.extend_from_slice(b"\r\n");
}

/// `* SEARCH n... [(MODSEQ m)]` (RFC 7162 §3.1.5 for MODSEQ).
pub fn write_search(out: &mut Vec<u8>, numbers: &[u32], modseq: Option<u64>) {
    out.extend_from_slice(b"* SEARCH");
    for n in numbers {
        push_fmt(out, format_args!(" {n}"));
    }
    if let (Some(m), false) = (modseq, numbers.is_empty()) {
        push_fmt(out, format_args!(" (MODSEQ {m})"));
    }
    out.extend_from_slice(b"\r\n");
}

/// The results of a SEARCH with RETURN (RFC 4731): what was asked and found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Esearch<'a> {
    /// The command's tag (`(TAG "x")`).
    pub tag: Option<&'a str>,
    /// Whether the numbers are UIDs.
    pub uid: bool,
    /// `MIN n`
    pub min: Option<u32>,
    /// `MAX n`
    pub max: Option<u32>,
    /// `COUNT n`
    pub count: Option<u32>,
    /// `ALL set` (ascending numbers; left out when empty, as RFC 4731 says).
    pub all: Option<&'a [u32]>,
    /// `MODSEQ n`
    pub modseq: Option<u64>,
}

/// `* ESEARCH [(TAG "x")] [UID] [MIN n] [MAX n] [COUNT n] [ALL set] [MODSEQ n]`
pub fn write_esearch(out: &mut Vec<u8>, result: &Esearch<'_>) {
    out.extend_from_slice(b"* ESEARCH");
    if let Some(tag) = result.tag {
        out.extend_from_slice(b" (TAG ");
        write_string(out, tag.as_bytes());
        out.push(b')');
    }
    if result.uid {
        out.extend_from_slice(b" UID");
    }
    if let Some(n) = result.min {
        push_fmt(out, format_args!(" MIN {n}"));
    }
    if let Some(n) = result.max {
        push_fmt(out, format_args!(" MAX {n}"));
    }
    if let Some(n) = result.count {
        push_fmt(out, format_args!(" COUNT {n}"));
    }
    if let Some(all) = result.all.filter(|all| !all.is_empty()) {
        out.extend_from_slice(b" ALL ");
        write_sequence(out, all);
    }
    if let Some(n) = result.modseq {
        push_fmt(out, format_args!(" MODSEQ {n}"));
    }
    out.extend_from_slice(b"\r\n");
}
