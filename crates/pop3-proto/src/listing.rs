//! The mailbox as a session sees it: the listing the server hands over at login
//! ([`Listing`]), and the deletion marks the session keeps on it (`Maildrop`).
//!
//! # Sizes
//!
//! RFC 1939 gives LIST and STAT sizes "in octets" without saying of what. Stoa's
//! size is that of the stored message, which is CRLF-terminated (the SMTP side
//! refuses bare line ends), so it is exactly the number of bytes RETR sends before
//! byte-stuffing and without the terminating `.` line; docs/robustness.md §4.3 asks for
//! that, and it is what Dovecot reports too (its "virtual size"). Byte-stuffing is
//! not counted: the client removes it. For a stored message with a bare CR or LF the
//! count would be off by the CRs [`crate::MessageEncoder`] adds; such messages are
//! never stored.
//!
//! # Numbering
//!
//! Message numbers on the wire are 1-based positions in the listing; everything this
//! crate hands the server (`Retrieval::index`, `Event::Quit::deleted`) is the 0-based
//! index into the [`Listing`] the server gave, which is what the mail store's
//! listing uses. Mail that arrives during the session is not in the listing, so it
//! has no number and is never deleted by this session's QUIT.

use std::collections::HashSet;
use std::fmt;

use crate::Error;

/// The longest unique-id (RFC 1939 §7: 1 to 70 characters).
pub const MAX_UID: usize = 70;

/// One message of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Size in octets: the stored CRLF message, before byte-stuffing (see the module
    /// docs).
    pub size: u64,
    /// The UIDL unique-id: 1 to 70 characters in `0x21..=0x7E`, unique in the
    /// mailbox and stable across sessions.
    pub uid: String,
}

/// The mailbox listing taken at login: the session's numbering for its whole life.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listing {
    entries: Vec<Entry>,
}

impl Listing {
    /// A listing of these messages, in order (message 1 first). Every uid is
    /// checked: a malformed or repeated one would make clients skip or refetch mail,
    /// so it is the server's error to report rather than something to send.
    pub fn new(entries: Vec<Entry>) -> Result<Listing, ListingError> {
        let mut seen = HashSet::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let uid = entry.uid.as_bytes();
            if uid.is_empty() || uid.len() > MAX_UID {
                return Err(ListingError::UidLength { index });
            }
            if !uid.iter().all(|b| (0x21..=0x7e).contains(b)) {
                return Err(ListingError::UidCharacter { index });
            }
            if !seen.insert(uid) {
                return Err(ListingError::DuplicateUid { index });
            }
        }
        Ok(Listing { entries })
    }

    /// An empty mailbox.
    pub fn empty() -> Listing {
        Listing::default()
    }

    /// How many messages.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the mailbox is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The messages, in order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }
}

/// Why [`Listing::new`] refused a listing; `index` is the 0-based position of the
/// offending entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ListingError {
    /// A uid that is empty or longer than [`MAX_UID`].
    UidLength {
        /// The entry.
        index: usize,
    },
    /// A uid with a byte outside `0x21..=0x7E`.
    UidCharacter {
        /// The entry.
        index: usize,
    },
    /// A uid already used by an earlier entry.
    DuplicateUid {
        /// The entry.
        index: usize,
    },
}

impl fmt::Display for ListingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListingError::UidLength { index } => {
                write!(f, "uid of message {index} is empty or over {MAX_UID} bytes")
            }
            ListingError::UidCharacter { index } => {
                write!(f, "uid of message {index} has a byte outside 0x21-0x7e")
            }
            ListingError::DuplicateUid { index } => {
                write!(f, "uid of message {index} repeats an earlier one")
            }
        }
    }
}

impl std::error::Error for ListingError {}

/// A listing with this session's deletion marks, and the totals of what is not
/// marked (STAT, LIST and RSET's answers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Maildrop {
    listing: Listing,
    deleted: Vec<bool>,
    live_count: usize,
    live_size: u64,
}

impl Maildrop {
    pub(crate) fn new(listing: Listing) -> Maildrop {
        let mut maildrop = Maildrop {
            deleted: vec![false; listing.len()],
            listing,
            live_count: 0,
            live_size: 0,
        };
        maildrop.reset();
        maildrop
    }

    /// Messages not marked deleted, and their total size.
    pub(crate) fn stat(&self) -> (usize, u64) {
        (self.live_count, self.live_size)
    }

    /// The index of message `number` (1-based), which must exist and not be deleted.
    pub(crate) fn index(&self, number: usize) -> Result<usize, Error> {
        let index = number.checked_sub(1).ok_or(Error::NoSuchMessage)?;
        match self.deleted.get(index) {
            None => Err(Error::NoSuchMessage),
            Some(true) => Err(Error::MessageDeleted),
            Some(false) => Ok(index),
        }
    }

    /// The entry at `index`.
    pub(crate) fn entry(&self, index: usize) -> &Entry {
        &self.listing.entries[index]
    }

    /// Marks message `number` deleted.
    pub(crate) fn delete(&mut self, number: usize) -> Result<(), Error> {
        let index = self.index(number)?;
        self.deleted[index] = true;
        self.live_count -= 1;
        self.live_size = self
            .live_size
            .saturating_sub(self.listing.entries[index].size);
        Ok(())
    }

    /// Unmarks every message.
    pub(crate) fn reset(&mut self) {
        self.deleted.fill(false);
        self.live_count = self.listing.len();
        self.live_size = self
            .listing
            .entries
            .iter()
            .fold(0u64, |sum, e| sum.saturating_add(e.size));
    }

    /// The messages not marked deleted, as (index, entry).
    pub(crate) fn live(&self) -> impl Iterator<Item = (usize, &Entry)> {
        self.listing
            .entries
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.deleted[*i])
    }

    /// The indices marked deleted, ascending.
    pub(crate) fn deleted(&self) -> Vec<usize> {
        (0..self.deleted.len())
            .filter(|&i| self.deleted[i])
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(size: u64, uid: &str) -> Entry {
        Entry {
            size,
            uid: uid.to_owned(),
        }
    }

    #[test]
    fn uids_are_checked() {
        assert!(Listing::new(vec![entry(1, "a"), entry(2, &"b".repeat(70))]).is_ok());
        let cases = [
            (vec![entry(1, "")], ListingError::UidLength { index: 0 }),
            (
                vec![entry(1, "a"), entry(1, &"b".repeat(71))],
                ListingError::UidLength { index: 1 },
            ),
            (
                vec![entry(1, "a b")],
                ListingError::UidCharacter { index: 0 },
            ),
            (vec![entry(1, "é")], ListingError::UidCharacter { index: 0 }),
            (
                vec![entry(1, "a"), entry(2, "b"), entry(3, "a")],
                ListingError::DuplicateUid { index: 2 },
            ),
        ];
        for (entries, error) in cases {
            assert_eq!(Listing::new(entries), Err(error));
        }
        assert_eq!(
            ListingError::DuplicateUid { index: 2 }.to_string(),
            "uid of message 2 repeats an earlier one"
        );
    }

    #[test]
    fn marks_and_totals() {
        let listing = Listing::new(vec![entry(10, "a"), entry(20, "b"), entry(30, "c")])
            .expect("valid listing");
        let mut drop = Maildrop::new(listing);
        assert_eq!(drop.stat(), (3, 60));
        assert_eq!(drop.index(0), Err(Error::NoSuchMessage));
        assert_eq!(drop.index(4), Err(Error::NoSuchMessage));
        assert_eq!(drop.index(usize::MAX), Err(Error::NoSuchMessage));
        assert_eq!(drop.index(3), Ok(2));
        drop.delete(2).expect("message 2 exists");
        assert_eq!(drop.delete(2), Err(Error::MessageDeleted));
        assert_eq!(drop.index(2), Err(Error::MessageDeleted));
        assert_eq!(drop.stat(), (2, 40));
        let live: Vec<usize> = drop.live().map(|(i, _)| i).collect();
        assert_eq!(live, [0, 2]);
        drop.delete(3).expect("message 3 exists");
        assert_eq!(drop.deleted(), [1, 2]);
        drop.reset();
        assert_eq!((drop.stat(), drop.deleted()), ((3, 60), Vec::new()));
    }
}
