//! A folder's index: the IMAP state of its messages (UIDs, flags, modification
//! sequences, internal dates, sizes), kept as an append-only log of text records in
//! the folder's `.index` file. This module is the log's format and the state it
//! replays to; [`crate::folder`] does the file work.
//!
//! ```text
//! stoa-index 1 1767225600                   header: format version, UIDVALIDITY
//! + 1 1 1767225600 2048 1767225600.M1P2Q3.mx \Seen   a message gets UID 1 (modseq 1)
//! = 1 2 \Seen \Flagged                      UID 1's flags are now these (modseq 2)
//! - 1 3                                     UID 1 was expunged (modseq 3)
//! r 2                                       UIDs below 2 are no longer \Recent
//! h 5 9                                     high-water marks: UIDNEXT, HIGHESTMODSEQ
//! v 4                                       expunges up to modseq 4 are forgotten
//! ```
//!
//! Every record is one line; a line is only acted on once its `\n` is there, so a
//! write torn by a crash is ignored (and cut off by the next writer). File names are
//! percent-encoded where they hold a space, `%` or a control character. Flags are
//! IMAP atoms: system flags (`\Seen`…) and keywords.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The first word of an index file.
const MAGIC: &str = "stoa-index";

/// The format version written in the header.
const VERSION: u32 = 1;

/// Expunges a snapshot keeps in detail (half of this once it is passed); older ones
/// are forgotten past a floor (QRESYNC then reports every UID not present as
/// vanished, which RFC 7162 allows). Every session that opens the folder reads them:
/// measured under imaptest's churn, 9,300 of them made a 250 KB log and doubled the
/// CPU per command within a minute.
pub(crate) const MAX_EXPUNGED: usize = 2_000;

/// One message of a folder, as its index knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedMessage {
    /// The IMAP UID: unique in the folder for its UIDVALIDITY, never reused.
    pub uid: u32,
    /// The modification sequence of its last change (CONDSTORE).
    pub modseq: u64,
    /// IMAP's INTERNALDATE, as Unix seconds.
    pub internal_date: i64,
    /// Size in bytes (RFC822.SIZE: the stored CRLF message).
    pub size: u64,
    /// The message file's name in the folder directory.
    pub name: String,
    /// System flags and keywords, sorted, without duplicates.
    pub flags: Vec<String>,
}

impl IndexedMessage {
    /// Whether the message has `flag` (compared ASCII-case-insensitively, as IMAP
    /// compares flags).
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f.eq_ignore_ascii_case(flag))
    }
}

/// One record of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// A message enters the folder.
    Add(IndexedMessage),
    /// A message's flags are replaced.
    Flags {
        uid: u32,
        modseq: u64,
        flags: Vec<String>,
    },
    /// A message leaves the folder.
    Expunge { uid: u32, modseq: u64 },
    /// A session took the \Recent messages: UIDs below `uid` are not recent for
    /// anyone else.
    Recent { uid: u32 },
    /// The UIDNEXT and HIGHESTMODSEQ marks (a snapshot's, which may have dropped
    /// the records that raised them).
    Marks { uid_next: u32, modseq: u64 },
    /// Expunges with a modseq up to this one are no longer listed one by one.
    Forgotten { modseq: u64 },
}

/// Why an index file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct IndexError {
    /// The 1-based line number.
    pub line: usize,
    /// What is wrong with it.
    pub reason: String,
}

/// The state a folder's log replays to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexState {
    /// UIDVALIDITY: changes only when the folder is recreated.
    pub uid_validity: u32,
    /// The messages, by UID.
    pub(crate) messages: BTreeMap<u32, IndexedMessage>,
    /// The next UID to give (one more than the largest ever given).
    pub uid_next: u32,
    /// The largest modification sequence given (0 for a new folder).
    pub highest_modseq: u64,
    /// Expunged UIDs with the modseq of their expunge, for QRESYNC's VANISHED.
    pub(crate) expunged: Vec<(u32, u64)>,
    /// The first UID no session has taken as \Recent yet (IMAP4rev1).
    pub first_recent_uid: u32,
    /// Expunges up to this modseq are forgotten (see [`IndexState::expunged_since`]).
    forgotten: u64,
    /// Every keyword ever set in the folder (IMAP's FLAGS list only grows).
    keywords: std::collections::BTreeSet<String>,
    /// Lines read (for error positions).
    lines: usize,
}

impl IndexState {
    /// An empty folder's state.
    pub fn new(uid_validity: u32) -> IndexState {
        IndexState {
            uid_validity,
            messages: BTreeMap::new(),
            uid_next: 1,
            highest_modseq: 0,
            expunged: Vec::new(),
            first_recent_uid: 1,
            forgotten: 0,
            keywords: std::collections::BTreeSet::new(),
            lines: 1,
        }
    }

    /// The header line of a log for this state.
    pub(crate) fn header(uid_validity: u32) -> String {
        format!("{MAGIC} {VERSION} {uid_validity}\n")
    }

    /// Reads a whole log (header and records). Returns the state and how many bytes
    /// were used: a last line without its `\n` is left out.
    pub(crate) fn parse(bytes: &[u8]) -> Result<(IndexState, usize), IndexError> {
        let Some(end) = memchr(b'\n', bytes) else {
            return Err(IndexError {
                line: 1,
                reason: "no header".into(),
            });
        };
        let header = std::str::from_utf8(&bytes[..end]).map_err(|_| IndexError {
            line: 1,
            reason: "not UTF-8".into(),
        })?;
        let mut words = header.split(' ');
        let bad_header = || IndexError {
            line: 1,
            reason: format!("bad header {header:?}"),
        };
        if words.next() != Some(MAGIC) || words.next() != Some("1") {
            return Err(bad_header());
        }
        let uid_validity = words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(bad_header)?;
        let mut state = IndexState::new(uid_validity);
        let used = state.apply_log(&bytes[end + 1..])?;
        Ok((state, end + 1 + used))
    }

    /// Applies the complete records at the start of `bytes`; returns the bytes used
    /// (up to and including the last `\n`).
    pub(crate) fn apply_log(&mut self, bytes: &[u8]) -> Result<usize, IndexError> {
        let mut used = 0;
        while let Some(len) = memchr(b'\n', &bytes[used..]) {
            self.lines += 1;
            let line = &bytes[used..used + len];
            let record = parse_record(line).map_err(|reason| IndexError {
                line: self.lines,
                reason,
            })?;
            self.apply(record);
            used += len + 1;
        }
        Ok(used)
    }

    /// Applies one record.
    pub(crate) fn apply(&mut self, record: Record) {
        match record {
            Record::Add(message) => {
                self.uid_next = self.uid_next.max(message.uid.saturating_add(1));
                self.highest_modseq = self.highest_modseq.max(message.modseq);
                self.note_keywords(&message.flags);
                self.messages.insert(message.uid, message);
            }
            Record::Flags { uid, modseq, flags } => {
                self.highest_modseq = self.highest_modseq.max(modseq);
                self.note_keywords(&flags);
                if let Some(message) = self.messages.get_mut(&uid) {
                    message.flags = flags;
                    message.modseq = modseq;
                }
            }
            Record::Expunge { uid, modseq } => {
                self.highest_modseq = self.highest_modseq.max(modseq);
                // Writers refresh under the lock before they write, so an expunge
                // is recorded once; a snapshot lists expunges of UIDs it no longer
                // holds, which must still count.
                self.messages.remove(&uid);
                self.uid_next = self.uid_next.max(uid.saturating_add(1));
                self.expunged.push((uid, modseq));
            }
            Record::Recent { uid } => {
                self.first_recent_uid = self.first_recent_uid.max(uid);
            }
            Record::Marks { uid_next, modseq } => {
                self.uid_next = self.uid_next.max(uid_next);
                self.highest_modseq = self.highest_modseq.max(modseq);
            }
            Record::Forgotten { modseq } => {
                self.forgotten = self.forgotten.max(modseq);
            }
        }
    }

    fn note_keywords(&mut self, flags: &[String]) {
        for flag in flags.iter().filter(|f| !f.starts_with('\\')) {
            if !self.keywords.contains(flag) {
                self.keywords.insert(flag.clone());
            }
        }
    }

    /// Every keyword set on a message of the folder since it was made.
    pub fn keywords(&self) -> &std::collections::BTreeSet<String> {
        &self.keywords
    }

    /// The messages in UID order.
    pub fn messages(&self) -> impl DoubleEndedIterator<Item = &IndexedMessage> + ExactSizeIterator {
        self.messages.values()
    }

    /// The message with UID `uid`.
    pub fn get(&self, uid: u32) -> Option<&IndexedMessage> {
        self.messages.get(&uid)
    }

    /// How many messages the folder holds.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether the folder is empty.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// UIDs expunged with a modseq above `modseq`, ascending (QRESYNC's VANISHED
    /// (EARLIER)). When the expunges since then are no longer all known (a long
    /// history was compacted), every UID below UIDNEXT that is not present.
    pub fn expunged_since(&self, modseq: u64) -> Vec<u32> {
        if modseq < self.forgotten {
            return (1..self.uid_next)
                .filter(|uid| !self.messages.contains_key(uid))
                .collect();
        }
        let mut uids: Vec<u32> = self
            .expunged
            .iter()
            .filter(|&&(_, m)| m > modseq)
            .map(|&(uid, _)| uid)
            .collect();
        uids.sort_unstable();
        uids
    }

    /// The log that rebuilds this state: header, the expunge records, then one add
    /// per message (compaction).
    pub(crate) fn snapshot(&mut self) -> String {
        let mut out = IndexState::header(self.uid_validity);
        // The newest expunges, one by one; older ones below a floor.
        if self.expunged.len() > MAX_EXPUNGED {
            self.expunged.sort_unstable_by_key(|&(_, modseq)| modseq);
            let cut = self.expunged.len() - MAX_EXPUNGED / 2;
            self.forgotten = self.forgotten.max(self.expunged[cut - 1].1);
            self.expunged.drain(..cut);
        }
        if self.forgotten > 0 {
            write_record(
                &mut out,
                &Record::Forgotten {
                    modseq: self.forgotten,
                },
            );
        }
        for &(uid, modseq) in &self.expunged {
            write_record(&mut out, &Record::Expunge { uid, modseq });
        }
        // The UID and modseq high-water marks survive the records that set them.
        write_record(
            &mut out,
            &Record::Marks {
                uid_next: self.uid_next,
                modseq: self.highest_modseq,
            },
        );
        for message in self.messages.values() {
            write_record(&mut out, &Record::Add(message.clone()));
        }
        if self.first_recent_uid > 1 {
            write_record(
                &mut out,
                &Record::Recent {
                    uid: self.first_recent_uid,
                },
            );
        }
        out
    }
}

/// Appends `record` as one line to `out`.
pub(crate) fn write_record(out: &mut String, record: &Record) {
    match record {
        Record::Add(m) => {
            let _ = write!(
                out,
                "+ {} {} {} {} {}",
                m.uid,
                m.modseq,
                m.internal_date,
                m.size,
                encode_name(&m.name)
            );
            write_flags(out, &m.flags);
        }
        Record::Flags { uid, modseq, flags } => {
            let _ = write!(out, "= {uid} {modseq}");
            write_flags(out, flags);
        }
        Record::Expunge { uid, modseq } => {
            let _ = write!(out, "- {uid} {modseq}");
        }
        Record::Recent { uid } => {
            let _ = write!(out, "r {uid}");
        }
        Record::Marks { uid_next, modseq } => {
            let _ = write!(out, "h {uid_next} {modseq}");
        }
        Record::Forgotten { modseq } => {
            let _ = write!(out, "v {modseq}");
        }
    }
    out.push('\n');
}

fn write_flags(out: &mut String, flags: &[String]) {
    for flag in flags {
        out.push(' ');
        out.push_str(flag);
    }
}

/// Whether `flag` can be stored: a system flag (`\` then letters) or a keyword
/// atom, 1 to 100 printable ASCII characters without IMAP's atom-specials.
pub fn valid_flag(flag: &str) -> bool {
    let body = flag.strip_prefix('\\').unwrap_or(flag);
    (1..=100).contains(&body.len())
        && body.bytes().all(|b| {
            (0x21..=0x7e).contains(&b)
                && !matches!(b, b'(' | b')' | b'{' | b'%' | b'*' | b'"' | b'\\' | b']')
        })
}

/// Sorts `flags` and removes duplicates (case-insensitively, keeping the first
/// spelling), the form records keep.
pub fn normalize_flags(mut flags: Vec<String>) -> Vec<String> {
    flags.sort_by_key(|f| f.to_ascii_lowercase());
    flags.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    flags
}

fn parse_record(line: &[u8]) -> Result<Record, String> {
    let line = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_owned())?;
    let mut words = line.split(' ');
    let kind = words.next().unwrap_or_default();
    let mut number = |what: &str| -> Result<u64, String> {
        words
            .next()
            .and_then(|w| w.parse().ok())
            .ok_or_else(|| format!("bad {what} in {line:?}"))
    };
    match kind {
        "+" => {
            let uid = uid(number("uid")?)?;
            let modseq = number("modseq")?;
            let internal_date = number("date")? as i64;
            let size = number("size")?;
            let mut rest = line.splitn(7, ' ').skip(5);
            let name = rest
                .next()
                .and_then(decode_name)
                .ok_or_else(|| format!("bad name in {line:?}"))?;
            let flags = parse_flags(rest.next().unwrap_or_default())?;
            Ok(Record::Add(IndexedMessage {
                uid,
                modseq,
                internal_date,
                size,
                name,
                flags,
            }))
        }
        "=" => {
            let uid = uid(number("uid")?)?;
            let modseq = number("modseq")?;
            let flags = parse_flags(line.splitn(4, ' ').nth(3).unwrap_or_default())?;
            Ok(Record::Flags { uid, modseq, flags })
        }
        "-" => {
            let uid = uid(number("uid")?)?;
            let modseq = number("modseq")?;
            Ok(Record::Expunge { uid, modseq })
        }
        "r" => Ok(Record::Recent {
            uid: uid(number("uid")?)?,
        }),
        "h" => Ok(Record::Marks {
            uid_next: uid(number("uidnext")?)?,
            modseq: number("modseq")?,
        }),
        "v" => Ok(Record::Forgotten {
            modseq: number("modseq")?,
        }),
        _ => Err(format!("unknown record {line:?}")),
    }
}

fn uid(n: u64) -> Result<u32, String> {
    u32::try_from(n)
        .ok()
        .filter(|&u| u > 0)
        .ok_or_else(|| format!("bad uid {n}"))
}

fn parse_flags(text: &str) -> Result<Vec<String>, String> {
    text.split(' ')
        .filter(|f| !f.is_empty())
        .map(|f| {
            if valid_flag(f) {
                Ok(f.to_owned())
            } else {
                Err(format!("bad flag {f:?}"))
            }
        })
        .collect()
}

/// A file name with space, `%` and control characters percent-encoded.
pub(crate) fn encode_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c == ' ' || c == '%' || c.is_control() {
            let mut buf = [0; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "%{b:02X}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub(crate) fn decode_name(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok().filter(|n| !n.is_empty())
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|&b| b == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(uid: u32, modseq: u64, name: &str, flags: &[&str]) -> IndexedMessage {
        IndexedMessage {
            uid,
            modseq,
            internal_date: 1_767_225_600,
            size: 100,
            name: name.into(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
        }
    }

    #[test]
    fn log_replays_and_compacts() {
        let mut log = IndexState::header(42);
        write_record(&mut log, &Record::Add(message(1, 1, "a b%c", &["\\Seen"])));
        write_record(&mut log, &Record::Add(message(2, 2, "n2", &[])));
        write_record(
            &mut log,
            &Record::Flags {
                uid: 1,
                modseq: 3,
                flags: vec!["$Junk".into(), "\\Seen".into()],
            },
        );
        write_record(&mut log, &Record::Expunge { uid: 2, modseq: 4 });
        // A torn last record is not read.
        let torn = format!("{log}+ 3 5 0 1 n3");
        let (mut state, used) = IndexState::parse(torn.as_bytes()).expect("parses");
        assert_eq!(used, log.len());
        assert_eq!(state.uid_validity, 42);
        assert_eq!(state.len(), 1);
        assert_eq!(state.uid_next, 3);
        assert_eq!(state.highest_modseq, 4);
        let first = state.get(1).expect("uid 1");
        assert_eq!(first.name, "a b%c");
        assert_eq!(first.flags, ["$Junk", "\\Seen"]);
        assert!(first.has_flag("\\seen"));
        assert_eq!(state.expunged_since(3), [2]);
        assert!(state.expunged_since(4).is_empty());

        let snapshot = state.snapshot();
        let (again, _) = IndexState::parse(snapshot.as_bytes()).expect("snapshot parses");
        assert_eq!(again.messages, state.messages);
        assert_eq!(again.uid_next, 3);
        assert_eq!(again.highest_modseq, 4);
        assert_eq!(again.expunged_since(0), [2]);
    }

    #[test]
    fn a_long_expunge_history_is_forgotten_past_a_floor() {
        let mut state = IndexState::new(1);
        for uid in 1..=(MAX_EXPUNGED as u32 + 10) {
            state.apply(Record::Add(message(uid, u64::from(uid), "n", &[])));
        }
        state.apply(Record::Add(message(20_000, 20_000, "kept", &[])));
        for uid in 1..=(MAX_EXPUNGED as u32 + 10) {
            state.apply(Record::Expunge {
                uid,
                modseq: 20_000 + u64::from(uid),
            });
        }
        let highest = state.highest_modseq;
        let (again, _) = IndexState::parse(state.snapshot().as_bytes()).expect("parses");
        assert_eq!(again.uid_next, 20_001);
        assert_eq!(again.highest_modseq, highest);
        assert!(again.expunged.len() <= MAX_EXPUNGED / 2);
        // Recent history in detail, old history as every absent UID.
        assert_eq!(again.expunged_since(highest - 1).len(), 1);
        let all = again.expunged_since(0);
        assert_eq!(all.len(), 19_999);
        assert!(!all.contains(&20_000));
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for bad in [
            "",
            "nope 1 2\n",
            "stoa-index 2 1\n",
            "stoa-index 1 x\n",
            "stoa-index 1 1\n+ 0 1 1 1 n\n",
            "stoa-index 1 1\n+ 1 1 1 1\n",
            "stoa-index 1 1\n= 1 x\n",
            "stoa-index 1 1\n* 1\n",
            "stoa-index 1 1\n= 1 2 bad(flag\n",
            "stoa-index 1 1\n+ 1 1 1 1 %zz\n",
        ] {
            assert!(IndexState::parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let mut bytes = b"stoa-index 1 1\n".to_vec();
            let len = rng.usize(0..80);
            bytes
                .extend((0..len).map(|_| *rng.choice(b"+=- 0123456789\\Seen%\n").unwrap_or(&b' ')));
            let _ = IndexState::parse(&bytes);
        }
    }

    #[test]
    fn flags_are_checked_and_normalized() {
        assert!(valid_flag("\\Seen"));
        assert!(valid_flag("$Forwarded"));
        assert!(!valid_flag(""));
        assert!(!valid_flag("a b"));
        assert!(!valid_flag("a]"));
        assert!(!valid_flag("\\"));
        let flags = normalize_flags(vec![
            "\\Seen".into(),
            "b".into(),
            "\\seen".into(),
            "A".into(),
        ]);
        assert_eq!(flags, ["\\Seen", "A", "b"]);
    }
}
