//! A session's view of its selected folder: the message sequence numbers it has
//! told the client, and what it has yet to tell (RFC 9051 §7.4: new messages,
//! expunges, flag changes made by others).
//!
//! The store's [`IndexState`] is the truth; the view is what the client believes.
//! [`View::sync`] compares them and returns the untagged updates that bring the
//! client up to date, in the order IMAP wants them. Expunges may be held back (no
//! EXPUNGE during FETCH, STORE or SEARCH, which number by sequence); the messages
//! stay numbered until the next sync that may announce them.

use stoa_mailstore::IndexState;

/// What the client must be told.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Updates {
    /// Sequence numbers to announce as `* n EXPUNGE`, in the order to send them
    /// (each as numbered after the previous ones were removed).
    pub(crate) expunged_seqs: Vec<u32>,
    /// The same messages' UIDs, ascending (for QRESYNC's `VANISHED`).
    pub(crate) expunged_uids: Vec<u32>,
    /// The new message count, when messages arrived (`* n EXISTS`).
    pub(crate) exists: Option<u32>,
    /// (sequence number, UID) of messages whose flags changed since the last sync.
    pub(crate) flag_changes: Vec<(u32, u32)>,
}

impl Updates {
    /// Whether there is nothing to say.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.expunged_seqs.is_empty() && self.exists.is_none() && self.flag_changes.is_empty()
    }
}

/// The client's numbering of the selected folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    /// UIDs by sequence number − 1, ascending.
    uids: Vec<u32>,
    /// The highest modseq whose changes the client has been told.
    modseq: u64,
}

impl View {
    /// The view right after SELECT: every message of `state`, nothing pending.
    pub(crate) fn new(state: &IndexState) -> View {
        View {
            uids: state.messages().map(|m| m.uid).collect(),
            modseq: state.highest_modseq,
        }
    }

    /// How many messages the client knows.
    pub(crate) fn len(&self) -> u32 {
        u32::try_from(self.uids.len()).unwrap_or(u32::MAX)
    }

    /// The UIDs in sequence order.
    pub(crate) fn uids(&self) -> &[u32] {
        &self.uids
    }

    /// The UID of sequence number `seq` (1-based).
    pub(crate) fn uid(&self, seq: u32) -> Option<u32> {
        let index = usize::try_from(seq).ok()?.checked_sub(1)?;
        self.uids.get(index).copied()
    }

    /// The sequence number of `uid`, if the client knows it.
    pub(crate) fn seq(&self, uid: u32) -> Option<u32> {
        let index = self.uids.binary_search(&uid).ok()?;
        u32::try_from(index + 1).ok()
    }

    /// The largest UID the client knows (0 when none).
    pub(crate) fn max_uid(&self) -> u32 {
        self.uids.last().copied().unwrap_or(0)
    }

    /// Compares the view with `state` and returns what to tell the client; the
    /// view then matches what was told. With `expunges` false, expunged messages
    /// keep their numbers until a later sync (flag changes of them are dropped).
    pub(crate) fn sync(&mut self, state: &IndexState, expunges: bool) -> Updates {
        let mut updates = Updates::default();
        if expunges {
            let mut seq = 1u32;
            let mut kept = Vec::with_capacity(self.uids.len());
            for &uid in &self.uids {
                if state.get(uid).is_some() {
                    kept.push(uid);
                    seq += 1;
                } else {
                    // Announced at its current number; the ones after move down.
                    updates.expunged_seqs.push(seq);
                    updates.expunged_uids.push(uid);
                }
            }
            self.uids = kept;
        }
        let max = self.max_uid();
        let before = self.uids.len();
        self.uids
            .extend(state.messages().map(|m| m.uid).filter(|&uid| uid > max));
        if self.uids.len() != before {
            updates.exists = Some(self.len());
        }
        for (index, &uid) in self.uids[..before].iter().enumerate() {
            if let Some(message) = state.get(uid)
                && message.modseq > self.modseq
            {
                let seq = u32::try_from(index + 1).unwrap_or(u32::MAX);
                updates.flag_changes.push((seq, uid));
            }
        }
        self.modseq = self.modseq.max(state.highest_modseq);
        updates
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stoa_mailstore::{FlagOp, Folder, MailStore, MailboxId, Options};

    const ID: MailboxId = MailboxId(1);

    fn setup(n: usize) -> (tempfile::TempDir, MailStore, Folder) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = MailStore::open(dir.path().join("s"), Options::default()).expect("store");
        for i in 0..n {
            store
                .deliver(format!("Subject: {i}\r\n\r\n").as_bytes(), &[ID])
                .expect("deliver");
        }
        let list = store.folder_list(ID).expect("list");
        let inbox = list.get("INBOX").expect("inbox").clone();
        let folder = store.open_folder(ID, &inbox).expect("open");
        (dir, store, folder)
    }

    #[test]
    fn expunges_renumber_and_new_mail_exists() {
        let (_dir, store, mut folder) = setup(4);
        let mut view = View::new(folder.state());
        assert_eq!(view.uids(), [1, 2, 3, 4]);
        let deleted = vec!["\\Deleted".to_owned()];
        folder
            .store_flags(&store, &[1, 3], FlagOp::Add, &deleted, None)
            .expect("flag");
        folder.expunge(&store, None).expect("expunge");
        store
            .deliver(b"Subject: new\r\n\r\n", &[ID])
            .expect("deliver");
        folder.refresh(&store).expect("refresh");

        // Held back: numbers stay, the new message is counted after them.
        let held = view.sync(folder.state(), false);
        assert!(held.expunged_seqs.is_empty());
        assert_eq!(held.exists, Some(5));
        assert_eq!(view.uid(5), Some(5));

        let updates = view.sync(folder.state(), true);
        assert_eq!(updates.expunged_seqs, [1, 2]);
        assert_eq!(updates.expunged_uids, [1, 3]);
        assert_eq!(updates.exists, None);
        assert_eq!(view.uids(), [2, 4, 5]);
        assert_eq!(view.seq(4), Some(2));
        assert_eq!(view.seq(3), None);
        assert_eq!(view.uid(0), None);
        assert!(view.sync(folder.state(), true).is_empty());
    }

    #[test]
    fn flag_changes_are_reported_once() {
        let (_dir, store, mut folder) = setup(3);
        let mut view = View::new(folder.state());
        let seen = vec!["\\Seen".to_owned()];
        folder
            .store_flags(&store, &[2], FlagOp::Add, &seen, None)
            .expect("flag");
        let updates = view.sync(folder.state(), true);
        assert_eq!(updates.flag_changes, [(2, 2)]);
        assert!(view.sync(folder.state(), true).is_empty());
    }
}
