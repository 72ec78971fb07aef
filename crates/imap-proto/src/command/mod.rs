//! Client commands (RFC 9051 §6, RFC 3501 §6 and the extensions in the crate docs):
//! the types, the parser of one complete command ([`parse_command`]), and the
//! framing that finds complete commands, literals included, in the server's read
//! buffer ([`CommandReader`]).
//!
//! Strings that carry names (mailboxes, list patterns) stay raw bytes: what they mean
//! depends on UTF8=ACCEPT ([`crate::mailbox`] decodes them). Keywords are
//! case-insensitive. Every length and nesting depth is bounded.

mod parse;
mod reader;
#[cfg(test)]
mod tests;

pub use parse::{MAX_DEPTH, auth_response, idle_done, parse_command, sasl_plain};
pub use reader::{CommandReader, Event, LITERAL_MINUS_MAX, Limits, Line, Step};
pub use stoa_mail_proto::Credentials;

use crate::section::Section;
use crate::sequence::SequenceSet;

/// A value that `Debug` does not show (passwords, SASL responses), so that logging
/// a command never logs a credential.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret<T>(pub T);

impl<T> Secret<T> {
    /// The value.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> std::fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A complete command: its tag and what it asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// The tag, echoed in the tagged response.
    pub tag: String,
    /// The command and its arguments.
    pub kind: CommandKind,
}

/// A command and its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandKind {
    /// `CAPABILITY`
    Capability,
    /// `NOOP`
    Noop,
    /// `LOGOUT`
    Logout,
    /// `ID NIL` or `ID (field value ...)` (RFC 2971): `None` for `NIL`.
    Id(Option<Vec<(String, Option<String>)>>),
    /// `ENABLE cap...` (RFC 5161), the capability names upper-cased.
    Enable(Vec<String>),
    /// `STARTTLS`. Bytes the client sent after it, before the handshake, must be
    /// dropped, not read as commands (they would be plaintext injected into the
    /// TLS session); the reader is then between commands and can be reused.
    StartTls,
    /// `LOGIN user password`; both UTF-8.
    Login {
        /// The user name.
        username: String,
        /// The password (not shown by `Debug`).
        password: Secret<String>,
    },
    /// `AUTHENTICATE mechanism [initial-response]` (SASL-IR, RFC 4959).
    Authenticate {
        /// The mechanism, upper-cased.
        mechanism: String,
        /// The decoded initial response (`=` is an empty one), when sent; it holds
        /// the password for PLAIN (not shown by `Debug`).
        initial_response: Option<Secret<Vec<u8>>>,
    },
    /// `COMPRESS mechanism` (RFC 4978), upper-cased (`DEFLATE`). Bytes after it in
    /// the buffer are already compressed: the server inflates them before the reader
    /// sees them.
    Compress(String),
    /// `NAMESPACE` (RFC 2342)
    Namespace,
    /// `SELECT mailbox [(params)]`
    Select(Select),
    /// `EXAMINE mailbox [(params)]`
    Examine(Select),
    /// `CREATE mailbox [(USE (attrs))]` (RFC 6154 §5.2 for USE).
    Create {
        /// The raw name.
        mailbox: Vec<u8>,
        /// Special-use attributes to set, as sent (`\Sent`).
        special_use: Vec<String>,
    },
    /// `DELETE mailbox`
    Delete(Vec<u8>),
    /// `RENAME from to`
    Rename {
        /// The raw current name.
        from: Vec<u8>,
        /// The raw new name.
        to: Vec<u8>,
    },
    /// `SUBSCRIBE mailbox`
    Subscribe(Vec<u8>),
    /// `UNSUBSCRIBE mailbox`
    Unsubscribe(Vec<u8>),
    /// `LIST`, basic or extended (RFC 5258, RFC 5819, RFC 6154).
    List(List),
    /// `LSUB reference pattern` (RFC 3501).
    Lsub {
        /// The raw reference name.
        reference: Vec<u8>,
        /// The raw pattern.
        pattern: Vec<u8>,
    },
    /// `STATUS mailbox (items)`
    Status {
        /// The raw name.
        mailbox: Vec<u8>,
        /// The items asked for.
        items: Vec<StatusItem>,
    },
    /// `APPEND mailbox [(flags)] [date-time] literal`
    Append(Append),
    /// `IDLE` (RFC 2177); the client ends it with a `DONE` line ([`idle_done`]).
    Idle,
    /// `CHECK` (RFC 3501)
    Check,
    /// `CLOSE`
    Close,
    /// `UNSELECT` (RFC 3691)
    Unselect,
    /// `EXPUNGE`
    Expunge,
    /// `UID EXPUNGE set` (UIDPLUS, RFC 4315)
    UidExpunge(SequenceSet),
    /// `[UID] SEARCH`
    Search(Search),
    /// `[UID] FETCH`
    Fetch(Fetch),
    /// `[UID] STORE`
    Store(Store),
    /// `[UID] COPY set mailbox`
    Copy {
        /// Whether the set holds UIDs.
        uid: bool,
        /// The messages.
        set: SequenceSet,
        /// The raw destination name.
        mailbox: Vec<u8>,
    },
    /// `[UID] MOVE set mailbox` (RFC 6851)
    Move {
        /// Whether the set holds UIDs.
        uid: bool,
        /// The messages.
        set: SequenceSet,
        /// The raw destination name.
        mailbox: Vec<u8>,
    },
}

impl CommandKind {
    /// The command's name as the client would write it (`UID FETCH` for a UID fetch).
    pub fn name(&self) -> &'static str {
        match self {
            CommandKind::Capability => "CAPABILITY",
            CommandKind::Noop => "NOOP",
            CommandKind::Logout => "LOGOUT",
            CommandKind::Id(_) => "ID",
            CommandKind::Enable(_) => "ENABLE",
            CommandKind::StartTls => "STARTTLS",
            CommandKind::Login { .. } => "LOGIN",
            CommandKind::Authenticate { .. } => "AUTHENTICATE",
            CommandKind::Compress(_) => "COMPRESS",
            CommandKind::Namespace => "NAMESPACE",
            CommandKind::Select(_) => "SELECT",
            CommandKind::Examine(_) => "EXAMINE",
            CommandKind::Create { .. } => "CREATE",
            CommandKind::Delete(_) => "DELETE",
            CommandKind::Rename { .. } => "RENAME",
            CommandKind::Subscribe(_) => "SUBSCRIBE",
            CommandKind::Unsubscribe(_) => "UNSUBSCRIBE",
            CommandKind::List(_) => "LIST",
            CommandKind::Lsub { .. } => "LSUB",
            CommandKind::Status { .. } => "STATUS",
            CommandKind::Append(_) => "APPEND",
            CommandKind::Idle => "IDLE",
            CommandKind::Check => "CHECK",
            CommandKind::Close => "CLOSE",
            CommandKind::Unselect => "UNSELECT",
            CommandKind::Expunge => "EXPUNGE",
            CommandKind::UidExpunge(_) => "UID EXPUNGE",
            CommandKind::Search(s) if s.uid => "UID SEARCH",
            CommandKind::Search(_) => "SEARCH",
            CommandKind::Fetch(f) if f.uid => "UID FETCH",
            CommandKind::Fetch(_) => "FETCH",
            CommandKind::Store(s) if s.uid => "UID STORE",
            CommandKind::Store(_) => "STORE",
            CommandKind::Copy { uid: true, .. } => "UID COPY",
            CommandKind::Copy { .. } => "COPY",
            CommandKind::Move { uid: true, .. } => "UID MOVE",
            CommandKind::Move { .. } => "MOVE",
        }
    }
}

/// SELECT's and EXAMINE's arguments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Select {
    /// The raw mailbox name.
    pub mailbox: Vec<u8>,
    /// `(CONDSTORE)` (RFC 7162 §3.1.8).
    pub condstore: bool,
    /// `(QRESYNC (...))` (RFC 7162 §3.2.5).
    pub qresync: Option<QResync>,
}

/// The QRESYNC parameter of SELECT/EXAMINE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QResync {
    /// The UIDVALIDITY the client knows.
    pub uid_validity: u32,
    /// The last mod-sequence the client knows.
    pub modseq: u64,
    /// The UIDs the client knows, when given.
    pub known_uids: Option<SequenceSet>,
    /// Message sequence numbers and the UIDs they match, when given.
    pub seq_match: Option<(SequenceSet, SequenceSet)>,
}

/// A message flag (RFC 9051 §2.3.2).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Flag {
    /// `\Seen`
    Seen,
    /// `\Answered`
    Answered,
    /// `\Flagged`
    Flagged,
    /// `\Deleted`
    Deleted,
    /// `\Draft`
    Draft,
    /// `\Recent` (read-only; IMAP4rev1 only).
    Recent,
    /// A keyword (an atom without `\`), as sent.
    Keyword(String),
}

impl Flag {
    /// The flag as it goes on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Flag::Seen => "\\Seen",
            Flag::Answered => "\\Answered",
            Flag::Flagged => "\\Flagged",
            Flag::Deleted => "\\Deleted",
            Flag::Draft => "\\Draft",
            Flag::Recent => "\\Recent",
            Flag::Keyword(k) => k,
        }
    }

    /// Parses a flag: a system flag (case-insensitive) or a keyword atom. Unknown
    /// `\` flags are refused.
    pub fn parse(text: &[u8]) -> Option<Flag> {
        if let Some(name) = text.strip_prefix(b"\\") {
            let known = [
                (&b"Seen"[..], Flag::Seen),
                (b"Answered", Flag::Answered),
                (b"Flagged", Flag::Flagged),
                (b"Deleted", Flag::Deleted),
                (b"Draft", Flag::Draft),
                (b"Recent", Flag::Recent),
            ];
            return known
                .into_iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, f)| f);
        }
        if text.is_empty()
            || text.len() > 256
            || !text.iter().all(|&b| crate::string::is_atom_char(b))
        {
            return None;
        }
        Some(Flag::Keyword(String::from_utf8_lossy(text).into_owned()))
    }
}

/// A STATUS item (RFC 9051 §6.3.11, RFC 7162, RFC 7889, RFC 8438).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusItem {
    /// `MESSAGES`
    Messages,
    /// `UIDNEXT`
    UidNext,
    /// `UIDVALIDITY`
    UidValidity,
    /// `UNSEEN`
    Unseen,
    /// `DELETED`
    Deleted,
    /// `SIZE`
    Size,
    /// `RECENT` (IMAP4rev1)
    Recent,
    /// `HIGHESTMODSEQ` (CONDSTORE)
    HighestModSeq,
    /// `APPENDLIMIT` (RFC 7889)
    AppendLimit,
}

impl StatusItem {
    /// Every item.
    pub const ALL: [StatusItem; 9] = [
        StatusItem::Messages,
        StatusItem::UidNext,
        StatusItem::UidValidity,
        StatusItem::Unseen,
        StatusItem::Deleted,
        StatusItem::Size,
        StatusItem::Recent,
        StatusItem::HighestModSeq,
        StatusItem::AppendLimit,
    ];

    /// The item's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            StatusItem::Messages => "MESSAGES",
            StatusItem::UidNext => "UIDNEXT",
            StatusItem::UidValidity => "UIDVALIDITY",
            StatusItem::Unseen => "UNSEEN",
            StatusItem::Deleted => "DELETED",
            StatusItem::Size => "SIZE",
            StatusItem::Recent => "RECENT",
            StatusItem::HighestModSeq => "HIGHESTMODSEQ",
            StatusItem::AppendLimit => "APPENDLIMIT",
        }
    }
}

/// LIST's arguments (RFC 5258 LIST-EXTENDED).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct List {
    /// The raw reference name.
    pub reference: Vec<u8>,
    /// The raw patterns (one, or several in parentheses).
    pub patterns: Vec<Vec<u8>>,
    /// The selection options.
    pub selection: ListSelection,
    /// The return options.
    pub ret: ListReturn,
}

/// LIST selection options (RFC 5258 §3.1, RFC 6154 §5.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListSelection {
    /// `SUBSCRIBED`
    pub subscribed: bool,
    /// `REMOTE`
    pub remote: bool,
    /// `RECURSIVEMATCH` (only with another option that it modifies).
    pub recursive_match: bool,
    /// `SPECIAL-USE`
    pub special_use: bool,
}

/// LIST return options (RFC 5258 §3.2, RFC 5819, RFC 6154 §5.1).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListReturn {
    /// `SUBSCRIBED`
    pub subscribed: bool,
    /// `CHILDREN`
    pub children: bool,
    /// `SPECIAL-USE`
    pub special_use: bool,
    /// `STATUS (items)` (LIST-STATUS).
    pub status: Option<Vec<StatusItem>>,
}

/// APPEND's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Append {
    /// The raw mailbox name.
    pub mailbox: Vec<u8>,
    /// The flags to set (not `\Recent`).
    pub flags: Vec<Flag>,
    /// The internal date, unix seconds, when given.
    pub date: Option<i64>,
    /// The message.
    pub message: Vec<u8>,
    /// Sent as `~{n}` (BINARY, RFC 3516): may hold NUL bytes.
    pub binary: bool,
}

/// SEARCH's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    /// `UID SEARCH`.
    pub uid: bool,
    /// `CHARSET x`, upper-cased, when given (only US-ASCII and UTF-8 are required).
    pub charset: Option<String>,
    /// `RETURN (options)` (ESEARCH, RFC 4731): `None` without RETURN (a plain
    /// SEARCH response), `Some` with the options (empty means `ALL`).
    pub ret: Option<Vec<SearchReturn>>,
    /// The criteria: several top-level keys are an [`SearchKey::And`].
    pub key: SearchKey,
}

/// An ESEARCH return option (RFC 4731, RFC 5182 SAVE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SearchReturn {
    /// `MIN`
    Min,
    /// `MAX`
    Max,
    /// `ALL`
    All,
    /// `COUNT`
    Count,
    /// `SAVE`
    Save,
}

/// A search criterion (RFC 9051 §6.4.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SearchKey {
    /// `ALL`
    All,
    /// Every key must match: several keys in a row or in parentheses.
    And(Vec<SearchKey>),
    /// `OR a b`
    Or(Box<SearchKey>, Box<SearchKey>),
    /// `NOT a`
    Not(Box<SearchKey>),
    /// A sequence set of message numbers.
    Sequence(SequenceSet),
    /// `UID set`
    Uid(SequenceSet),
    /// `ANSWERED`
    Answered,
    /// `DELETED`
    Deleted,
    /// `DRAFT`
    Draft,
    /// `FLAGGED`
    Flagged,
    /// `SEEN`
    Seen,
    /// `RECENT`
    Recent,
    /// `NEW` (recent and unseen)
    New,
    /// `OLD` (not recent)
    Old,
    /// `UNANSWERED`
    Unanswered,
    /// `UNDELETED`
    Undeleted,
    /// `UNDRAFT`
    Undraft,
    /// `UNFLAGGED`
    Unflagged,
    /// `UNSEEN`
    Unseen,
    /// `KEYWORD flag`
    Keyword(Flag),
    /// `UNKEYWORD flag`
    Unkeyword(Flag),
    /// `BCC text`
    Bcc(Vec<u8>),
    /// `CC text`
    Cc(Vec<u8>),
    /// `FROM text`
    From(Vec<u8>),
    /// `TO text`
    To(Vec<u8>),
    /// `SUBJECT text`
    Subject(Vec<u8>),
    /// `BODY text`
    Body(Vec<u8>),
    /// `TEXT text`
    Text(Vec<u8>),
    /// `HEADER field text`
    Header(String, Vec<u8>),
    /// `BEFORE date` (internal date)
    Before(crate::date::Date),
    /// `ON date`
    On(crate::date::Date),
    /// `SINCE date`
    Since(crate::date::Date),
    /// `SENTBEFORE date` (Date: header)
    SentBefore(crate::date::Date),
    /// `SENTON date`
    SentOn(crate::date::Date),
    /// `SENTSINCE date`
    SentSince(crate::date::Date),
    /// `LARGER n`
    Larger(u64),
    /// `SMALLER n`
    Smaller(u64),
    /// `MODSEQ [entry type] n` (CONDSTORE); the entry name and type are kept but
    /// not interpreted.
    ModSeq {
        /// The metadata entry name and type (`"/flags/\\draft" all`), when given.
        entry: Option<(Vec<u8>, String)>,
        /// The mod-sequence.
        modseq: u64,
    },
}

/// FETCH's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// `UID FETCH` (the response must include UID: [`FetchAttribute::Uid`] is then
    /// added to the attributes when the client left it out).
    pub uid: bool,
    /// The messages.
    pub set: SequenceSet,
    /// What to return, macros expanded.
    pub attributes: Vec<FetchAttribute>,
    /// `(CHANGEDSINCE n)` (RFC 7162 §3.1.4.1): only messages changed since; MODSEQ
    /// is then implied ([`FetchAttribute::ModSeq`] is added when left out).
    pub changed_since: Option<u64>,
    /// `(VANISHED)` with CHANGEDSINCE in UID FETCH (RFC 7162 §3.2.6).
    pub vanished: bool,
}

/// A fetch attribute (RFC 9051 §6.4.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchAttribute {
    /// `ENVELOPE`
    Envelope,
    /// `FLAGS`
    Flags,
    /// `INTERNALDATE`
    InternalDate,
    /// `RFC822` (the message; sets `\Seen`)
    Rfc822,
    /// `RFC822.HEADER`
    Rfc822Header,
    /// `RFC822.TEXT` (sets `\Seen`)
    Rfc822Text,
    /// `RFC822.SIZE`
    Rfc822Size,
    /// `BODY` (the structure without extension data)
    Body,
    /// `BODYSTRUCTURE`
    BodyStructure,
    /// `UID`
    Uid,
    /// `MODSEQ` (CONDSTORE)
    ModSeq,
    /// `BODY[section]<partial>` or `BODY.PEEK[...]`.
    BodySection {
        /// The section.
        section: Section,
        /// `<origin.count>`, when given.
        partial: Option<(u32, u32)>,
        /// `.PEEK`: do not set `\Seen`.
        peek: bool,
    },
    /// `BINARY[part]<partial>` or `BINARY.PEEK[...]` (RFC 3516).
    Binary {
        /// The part path (empty for the whole message).
        part: Vec<u32>,
        /// `<origin.count>`, when given.
        partial: Option<(u32, u32)>,
        /// `.PEEK`
        peek: bool,
    },
    /// `BINARY.SIZE[part]` (RFC 3516).
    BinarySize(Vec<u32>),
}

impl FetchAttribute {
    /// Whether fetching this sets `\Seen` on a writable mailbox.
    pub fn sets_seen(&self) -> bool {
        matches!(
            self,
            FetchAttribute::Rfc822
                | FetchAttribute::Rfc822Text
                | FetchAttribute::BodySection { peek: false, .. }
                | FetchAttribute::Binary { peek: false, .. }
        )
    }
}

/// How STORE changes the flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreMode {
    /// `FLAGS`: replace.
    Replace,
    /// `+FLAGS`: add.
    Add,
    /// `-FLAGS`: remove.
    Remove,
}

/// STORE's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Store {
    /// `UID STORE`.
    pub uid: bool,
    /// The messages.
    pub set: SequenceSet,
    /// `(UNCHANGEDSINCE n)` (RFC 7162 §3.1.3).
    pub unchanged_since: Option<u64>,
    /// Replace, add or remove.
    pub mode: StoreMode,
    /// `.SILENT`: no FETCH responses for the change.
    pub silent: bool,
    /// The flags (not `\Recent`).
    pub flags: Vec<Flag>,
}
