//! SEARCH criteria evaluated over the selected folder (RFC 9051 §6.4.4). Flags,
//! sizes, dates and UIDs come from the index; header and text criteria read the
//! message, once per message and only when a criterion needs it.

use std::cell::OnceCell;
use std::collections::BTreeSet;

use stoa_imap_proto::command::SearchKey;
use stoa_imap_proto::date::Date;
use stoa_imap_proto::sequence::SequenceSet;
use stoa_mailstore::{Folder, IndexedMessage};
use stoa_message::Structure;

/// A search over one folder's messages.
#[derive(Debug)]
pub(crate) struct Matcher {
    key: SearchKey,
    /// The saved result (`$`), as UIDs.
    saved: Vec<u32>,
    /// The messages recent for this session.
    recent: BTreeSet<u32>,
    /// The number of messages and the largest UID the client knows (`*`).
    count: u32,
    max_uid: u32,
}

/// One message's content, read at the first criterion that needs it.
struct Content<'a> {
    /// `None`: the folder is released (deleted meanwhile): no content matches.
    folder: Option<&'a Folder>,
    uid: u32,
    loaded: OnceCell<Option<(Vec<u8>, Structure)>>,
}

impl Content<'_> {
    fn get(&self) -> Option<&(Vec<u8>, Structure)> {
        self.loaded
            .get_or_init(|| {
                let bytes = self.folder?.read_message(self.uid).ok()?;
                let structure = Structure::parse(&bytes);
                Some((bytes, structure))
            })
            .as_ref()
    }

    fn header(&self, field: &str, needle: &[u8]) -> bool {
        let needle = String::from_utf8_lossy(needle);
        self.get()
            .is_some_and(|(bytes, s)| s.header_contains(bytes, field, &needle))
    }

    fn text(&self, needle: &[u8], body_only: bool) -> bool {
        let needle = String::from_utf8_lossy(needle);
        self.get()
            .is_some_and(|(bytes, s)| s.text_contains(bytes, &needle, body_only))
    }

    fn sent_day(&self) -> Option<i64> {
        let (_, structure) = self.get()?;
        structure.sent_day()
    }
}

/// The day (days since the epoch, UTC) of a Unix time.
fn day(seconds: i64) -> Option<i64> {
    Date::from_unix(seconds).map(Date::days_since_epoch)
}

impl Matcher {
    pub(crate) fn new(
        key: SearchKey,
        saved: Vec<u32>,
        recent: BTreeSet<u32>,
        count: u32,
        max_uid: u32,
    ) -> Matcher {
        Matcher {
            key,
            saved,
            recent,
            count,
            max_uid,
        }
    }

    /// Whether message `message`, numbered `seq`, matches.
    pub(crate) fn matches(
        &self,
        folder: Option<&Folder>,
        seq: u32,
        message: &IndexedMessage,
    ) -> bool {
        let content = Content {
            folder,
            uid: message.uid,
            loaded: OnceCell::new(),
        };
        self.eval(&self.key, seq, message, &content)
    }

    fn in_set(&self, set: &SequenceSet, n: u32, largest: u32, uid: u32) -> bool {
        if set.is_saved() {
            return self.saved.contains(&uid);
        }
        set.contains(n, largest)
    }

    fn eval(&self, key: &SearchKey, seq: u32, m: &IndexedMessage, content: &Content<'_>) -> bool {
        use SearchKey as K;
        let date = || day(m.internal_date);
        match key {
            K::All => true,
            K::And(keys) => keys.iter().all(|k| self.eval(k, seq, m, content)),
            K::Or(a, b) => self.eval(a, seq, m, content) || self.eval(b, seq, m, content),
            K::Not(a) => !self.eval(a, seq, m, content),
            K::Sequence(set) => self.in_set(set, seq, self.count, m.uid),
            K::Uid(set) => self.in_set(set, m.uid, self.max_uid, m.uid),
            K::Answered => m.has_flag("\\Answered"),
            K::Deleted => m.has_flag("\\Deleted"),
            K::Draft => m.has_flag("\\Draft"),
            K::Flagged => m.has_flag("\\Flagged"),
            K::Seen => m.has_flag("\\Seen"),
            K::Unanswered => !m.has_flag("\\Answered"),
            K::Undeleted => !m.has_flag("\\Deleted"),
            K::Undraft => !m.has_flag("\\Draft"),
            K::Unflagged => !m.has_flag("\\Flagged"),
            K::Unseen => !m.has_flag("\\Seen"),
            K::Recent => self.recent.contains(&m.uid),
            K::New => self.recent.contains(&m.uid) && !m.has_flag("\\Seen"),
            K::Old => !self.recent.contains(&m.uid),
            K::Keyword(flag) => m.has_flag(flag.as_str()),
            K::Unkeyword(flag) => !m.has_flag(flag.as_str()),
            K::Bcc(text) => content.header("Bcc", text),
            K::Cc(text) => content.header("Cc", text),
            K::From(text) => content.header("From", text),
            K::To(text) => content.header("To", text),
            K::Subject(text) => content.header("Subject", text),
            K::Header(field, text) => content.header(field, text),
            K::Body(text) => content.text(text, true),
            K::Text(text) => content.text(text, false),
            K::Before(d) => date().is_some_and(|x| x < d.days_since_epoch()),
            K::On(d) => date().is_some_and(|x| x == d.days_since_epoch()),
            K::Since(d) => date().is_some_and(|x| x >= d.days_since_epoch()),
            K::SentBefore(d) => content.sent_day().is_some_and(|x| x < d.days_since_epoch()),
            K::SentOn(d) => content
                .sent_day()
                .is_some_and(|x| x == d.days_since_epoch()),
            K::SentSince(d) => content
                .sent_day()
                .is_some_and(|x| x >= d.days_since_epoch()),
            K::Larger(n) => m.size > *n,
            K::Smaller(n) => m.size < *n,
            K::ModSeq { modseq, .. } => m.modseq >= *modseq,
        }
    }
}
