//! The on-disk names: where a mailbox lives, how a message file is named, and how a
//! listing reads a name back. Everything here is part of the store's format: changing
//! it strands existing mail.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use stoa_directory::MailboxId;

/// The directory of messages being written, under the store root.
pub(crate) const TMP_DIR: &str = "tmp";

/// The directory of the mailboxes' fan-out directories, under the store root.
pub(crate) const MAILBOXES_DIR: &str = "mailboxes";

/// Fan-out directories: 4,096 keeps each one small at the benchmark's scale (1.5 M
/// mailboxes → ~370 entries each, a few directory blocks) while an empty store costs
/// at most 16 MiB of them, created only as mailboxes appear.
const FANOUT: u64 = 4096;

/// Maildir++'s size field: `NAME,S=SIZE` lets a listing read sizes from the
/// directory alone, without a `stat` per message (Dovecot does the same).
const SIZE_TAG: &str = ",S=";

/// Longest unique id POP3's UIDL allows (RFC 1939 §7).
pub(crate) const MAX_UID_LEN: usize = 70;

/// Longest host name part of a unique name, so that the whole stays within
/// [`MAX_UID_LEN`] (the rest is at most 10 + 8 + 8 + 21 + 3 = 50 characters).
const MAX_HOST_LEN: usize = 16;

/// Deliveries made by this process, for unique names (shared by every store the
/// process opens, so two stores on one directory still never collide).
static SEQUENCE: AtomicU64 = AtomicU64::new(0);

/// The identifier of a stored message within its mailbox: the POP3 UIDL.
///
/// At most 70 printable ASCII characters without spaces, unique within the mailbox
/// and never reused; the same message delivered to several mailboxes has the same
/// uid in each.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageUid(pub(crate) String);

impl MessageUid {
    /// The uid as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for MessageUid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The mailbox's directory: `mailboxes/FFF/ID`, FFF a hash of the id in hex, so
/// that sequential ids spread over every fan-out directory.
pub(crate) fn mailbox_dir(mailboxes: &Path, id: MailboxId) -> PathBuf {
    let mut dir = fanout_dir(mailboxes, id);
    dir.push(id.0.to_string());
    dir
}

/// The fan-out directory holding the mailbox's directory.
pub(crate) fn fanout_dir(mailboxes: &Path, id: MailboxId) -> PathBuf {
    mailboxes.join(format!("{:03x}", mix(id.0) % FANOUT))
}

/// splitmix64's finaliser: a fixed, well-spread hash (part of the format).
fn mix(id: u64) -> u64 {
    let mut z = id.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The host part of unique names: the node name, cut to letters, digits and `-`.
pub(crate) fn host_part(nodename: &str) -> String {
    let host: String = nodename
        .split('.')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(MAX_HOST_LEN)
        .collect();
    if host.is_empty() {
        "localhost".to_owned()
    } else {
        host
    }
}

/// A new unique name, Maildir style: `SECONDS.MMICROSPPIDQSEQ.HOST`. Seconds and
/// microseconds are zero-padded so that names sort in delivery order.
pub(crate) fn unique_name(host: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let seq = SEQUENCE.fetch_add(1, Ordering::Relaxed);
    format!(
        "{:010}.M{:06}P{}Q{}.{host}",
        now.as_secs(),
        now.subsec_micros(),
        std::process::id(),
        seq
    )
}

/// The file name of a message in a mailbox: the unique name and the size.
pub(crate) fn message_name(unique: &str, size: u64) -> String {
    format!("{unique}{SIZE_TAG}{size}")
}

/// What a listing learns from a file name: the uid, and the size if the name says.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ParsedName {
    pub(crate) uid: String,
    pub(crate) size: Option<u64>,
}

/// Reads a message file name back. Our names give `(unique, size)`. A file put there
/// by hand (say, copied from another Maildir) keeps its name as uid when that is a
/// valid UIDL, else gets a stable hash of it; its size comes from `stat`.
pub(crate) fn parse_name(name: &str) -> ParsedName {
    if let Some((unique, size)) = name.rsplit_once(SIZE_TAG)
        && let Ok(size) = size.parse::<u64>()
        && valid_uid(unique)
    {
        return ParsedName {
            uid: unique.to_owned(),
            size: Some(size),
        };
    }
    let uid = if valid_uid(name) {
        name.to_owned()
    } else {
        format!("x{:016x}", fnv1a(name.as_bytes()))
    };
    ParsedName { uid, size: None }
}

/// Whether `uid` is a valid UIDL: 1 to 70 characters in 0x21..=0x7E.
pub(crate) fn valid_uid(uid: &str) -> bool {
    (1..=MAX_UID_LEN).contains(&uid.len()) && uid.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// FNV-1a, 64 bits: stable across versions and platforms (unlike std's hasher).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fanout_is_fixed_and_spread() {
        // Pinned: a different hash would strand every stored mailbox.
        let root = Path::new("m");
        assert_eq!(mailbox_dir(root, MailboxId(1)), Path::new("m/cc1/1"));
        assert_eq!(mailbox_dir(root, MailboxId(2)), Path::new("m/6ce/2"));
        let mut used = std::collections::HashSet::new();
        for id in 0..20_000 {
            used.insert(fanout_dir(root, MailboxId(id)));
        }
        assert!(
            used.len() > 3900,
            "{} of 4096 fan-out dirs used",
            used.len()
        );
    }

    #[test]
    fn unique_names_are_valid_uids_and_sort_in_order() {
        let host = host_part("a-very-long-host-name-indeed.example.com");
        assert_eq!(host, "a-very-long-host");
        let a = unique_name(&host);
        let b = unique_name(&host);
        assert_ne!(a, b);
        assert!(a < b, "{a} < {b}");
        assert!(valid_uid(&a), "{a}");
        // The longest possible name still fits UIDL's 70 characters.
        let longest = format!(
            "{}.M{}P{}Q{}.{host}",
            u32::MAX,
            999_999,
            4_194_304,
            u64::MAX
        );
        assert!(longest.len() <= MAX_UID_LEN, "{} chars", longest.len());
        assert_eq!(host_part(""), "localhost");
        assert_eq!(host_part("mx/1:2"), "mx12");
    }

    #[test]
    fn names_parse_back() {
        let name = message_name("1700000000.M000001P42Q7.mx", 1234);
        assert_eq!(
            parse_name(&name),
            ParsedName {
                uid: "1700000000.M000001P42Q7.mx".into(),
                size: Some(1234)
            }
        );
        // Foreign names: kept when valid, hashed when not; sizes left to stat.
        assert_eq!(parse_name("plain").uid, "plain");
        assert_eq!(parse_name("plain").size, None);
        assert_eq!(parse_name("x,S=notanumber").size, None);
        let odd = parse_name("with space");
        assert_eq!(odd.uid, parse_name("with space").uid, "stable");
        assert!(valid_uid(&odd.uid));
        assert!(valid_uid(&parse_name(&"y".repeat(200)).uid));
        assert!(!valid_uid(""));
        assert!(!valid_uid(&"y".repeat(71)));
    }
}
