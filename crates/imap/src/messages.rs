//! The commands on the selected folder's messages: FETCH, STORE, SEARCH, COPY,
//! MOVE, EXPUNGE (and UID EXPUNGE), CLOSE and UNSELECT.
//!
//! Each takes the selected folder to a blocking thread (file reads, fsyncs) and
//! back. FETCH answers in batches, so a `FETCH 1:* BODY[]` over a large folder
//! never holds more than a batch of messages in memory.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::io;

use stoa_imap_proto::command::Flag;
use stoa_imap_proto::command::{Fetch, FetchAttribute, Search, SearchReturn, Store, StoreMode};
use stoa_imap_proto::response::{self, Code, Esearch, FetchWriter};
use stoa_imap_proto::sequence::SequenceSet;
use stoa_imap_proto::state::State;
use stoa_imap_proto::{Section, SectionText};
use stoa_mailstore::{FlagOp, IndexedMessage, MailStore, StoreError};
use stoa_message::Structure;

use crate::conn::{Conn, Done, Selected, blocking};
use crate::mailboxes::open_named;
use crate::search::Matcher;

/// Output bytes after which a FETCH batch ends and is sent.
const BATCH_BYTES: usize = 1024 * 1024;

/// Messages per FETCH batch at most.
const BATCH_MESSAGES: usize = 256;

impl Conn {
    /// Runs `work` with the selected folder on a blocking thread.
    async fn with_selected<T: Send + 'static>(
        &mut self,
        work: impl FnOnce(&mut Selected, &MailStore) -> T + Send + 'static,
    ) -> io::Result<T> {
        let Some(mut selected) = self.selected.take() else {
            return Err(io::Error::other("no folder selected"));
        };
        let store = self.mail_store()?;
        let peer = self.peer;
        let (selected, result) = blocking(&self.shared, move || {
            // Released only when a reacquire in IDLE failed: try again.
            let reacquired;
            (selected.folder, reacquired) = selected.folder.reacquire();
            if let Err(e) = reacquired {
                tracing::error!("{peer}: cannot reopen the selected folder: {e}");
            }
            let result = work(&mut selected, &store);
            (selected, result)
        })
        .await?;
        self.selected = Some(selected);
        Ok(result)
    }

    /// The (sequence number, UID) pairs a set names, ascending; `uid` says whether
    /// it holds UIDs. Sequence numbers past the end are an error (BAD).
    fn resolve(&self, uid: bool, set: &SequenceSet) -> Result<Vec<(u32, u32)>, Done> {
        let Some(selected) = &self.selected else {
            return Err(Done::bad("No mailbox selected"));
        };
        let view = &selected.view;
        if set.is_saved() {
            return Ok(self
                .saved
                .iter()
                .filter_map(|&u| view.seq(u).map(|s| (s, u)))
                .collect());
        }
        if uid {
            let largest = view.max_uid();
            Ok(view
                .uids()
                .iter()
                .enumerate()
                .filter(|&(_, &u)| set.contains(u, largest))
                .map(|(i, &u)| (u32::try_from(i + 1).unwrap_or(u32::MAX), u))
                .collect())
        } else {
            // Numbers past the end are an error, but in an empty mailbox every set
            // (`1:*` included) is simply empty, as clients probe with it.
            if view.len() > 0 && !set.fits(view.len()) {
                return Err(Done::bad("Invalid message sequence number"));
            }
            Ok(set
                .to_sorted(view.len())
                .into_iter()
                .filter_map(|s| view.uid(s).map(|u| (s, u)))
                .collect())
        }
    }

    /// Turns CONDSTORE on at the first command that uses it, telling the client
    /// the folder's HIGHESTMODSEQ (RFC 7162 §3.1.2).
    fn enable_condstore(&mut self) {
        if self.enabled.condstore {
            return;
        }
        self.enabled.condstore = true;
        if let Some(selected) = &self.selected {
            let code = Code::HighestModSeq(selected.folder.state().highest_modseq);
            response::write_untagged(
                self.io.out(),
                response::Condition::Ok,
                Some(&code),
                "Highest",
            );
        }
    }

    fn read_only(&self) -> bool {
        self.selected.as_ref().is_some_and(|s| s.read_only)
    }

    /// FETCH and UID FETCH.
    pub(crate) async fn fetch(&mut self, fetch: Fetch) -> io::Result<Done> {
        if fetch.attributes.iter().any(|a| {
            matches!(
                a,
                FetchAttribute::Binary { .. } | FetchAttribute::BinarySize(_)
            )
        }) {
            return Ok(Done::bad("BINARY is not supported"));
        }
        let mut targets = match self.resolve(fetch.uid, &fetch.set) {
            Ok(targets) => targets,
            Err(done) => return Ok(done),
        };
        if fetch.changed_since.is_some() || fetch.attributes.contains(&FetchAttribute::ModSeq) {
            self.enable_condstore();
        }
        if fetch.uid
            && fetch.vanished
            && let (Some(since), Some(selected)) = (fetch.changed_since, &self.selected)
        {
            let largest = selected
                .view
                .max_uid()
                .max(selected.folder.state().uid_next - 1);
            let vanished: Vec<u32> = selected
                .folder
                .state()
                .expunged_since(since)
                .into_iter()
                .filter(|&u| fetch.set.contains(u, largest))
                .collect();
            if !vanished.is_empty() {
                response::write_vanished(self.io.out(), true, &vanished);
            }
        }
        // Implicit \Seen first, so that the FLAGS sent are the new ones.
        let mut silent = Vec::new();
        if !self.read_only() && fetch.attributes.iter().any(FetchAttribute::sets_seen) {
            let unseen: Vec<u32> = targets.iter().map(|&(_, u)| u).collect();
            let seen = vec!["\\Seen".to_owned()];
            let stored = self
                .with_selected(move |selected, store| {
                    selected
                        .folder
                        .open()?
                        .store_flags(store, &unseen, FlagOp::Add, &seen, None)
                })
                .await?;
            match stored {
                Ok(outcome) => silent = outcome.changed,
                Err(e) => return Ok(Done::store_error(self.peer, "fetch", &e)),
            }
        }
        if let Some(selected) = &mut self.selected {
            selected.announce_keywords(self.io.out(), false);
        }
        let condstore = self.enabled.condstore;
        let rev2 = self.enabled.rev2;
        let with_flags_for_seen = silent.clone();
        while !targets.is_empty() {
            let batch: Vec<(u32, u32)> =
                targets.drain(..targets.len().min(BATCH_MESSAGES)).collect();
            let attributes = fetch.attributes.clone();
            let changed_since = fetch.changed_since;
            let uid_fetch = fetch.uid;
            let seen = with_flags_for_seen.clone();
            let (out, rest) = self
                .with_selected(move |selected, _store| {
                    let mut out = Vec::new();
                    let mut done = 0;
                    for &(seq, uid) in &batch {
                        done += 1;
                        let Some(message) = selected.folder.state().get(uid) else {
                            continue;
                        };
                        if changed_since.is_some_and(|since| message.modseq <= since) {
                            continue;
                        }
                        let options = FetchOptions {
                            uid: uid_fetch,
                            modseq: condstore || changed_since.is_some(),
                            flags: seen.contains(&uid),
                            rev2,
                        };
                        write_fetch(&mut out, selected, seq, message, &attributes, options);
                        if out.len() >= BATCH_BYTES {
                            break;
                        }
                    }
                    (out, batch[done..].to_vec())
                })
                .await?;
            self.io.out().extend_from_slice(&out);
            // What a full batch left goes back in front.
            targets.splice(0..0, rest);
            if self.io.queued() >= crate::conn::OUT_HIGH {
                self.flush().await?;
            }
        }
        let mut done = Done::ok(if fetch.uid {
            "UID FETCH completed"
        } else {
            "FETCH completed"
        });
        done.silent = silent;
        Ok(done)
    }

    /// STORE and UID STORE (with UNCHANGEDSINCE).
    pub(crate) async fn store(&mut self, store: Store) -> io::Result<Done> {
        if self.read_only() {
            return Ok(Done::no(Some(Code::Cannot), "Mailbox is read-only"));
        }
        let targets = match self.resolve(store.uid, &store.set) {
            Ok(targets) => targets,
            Err(done) => return Ok(done),
        };
        if store.unchanged_since.is_some() {
            self.enable_condstore();
        }
        let flags: Vec<String> = store
            .flags
            .iter()
            .filter(|f| **f != Flag::Recent)
            .map(|f| f.as_str().to_owned())
            .collect();
        let op = match store.mode {
            StoreMode::Replace => FlagOp::Replace,
            StoreMode::Add => FlagOp::Add,
            StoreMode::Remove => FlagOp::Remove,
        };
        let uids: Vec<u32> = targets.iter().map(|&(_, u)| u).collect();
        let since = store.unchanged_since;
        let outcome = self
            .with_selected(move |selected, s| {
                selected
                    .folder
                    .open()?
                    .store_flags(s, &uids, op, &flags, since)
            })
            .await?;
        let outcome = match outcome {
            Ok(outcome) => outcome,
            Err(e) => return Ok(Done::store_error(self.peer, "store", &e)),
        };
        let mut silent = Vec::new();
        let rev2 = self.enabled.rev2;
        if let Some(selected) = &mut self.selected {
            let out = self.io.out();
            selected.announce_keywords(out, false);
            for &(seq, uid) in &targets {
                if outcome.modified.contains(&uid) {
                    continue;
                }
                silent.push(uid);
                if store.silent && since.is_none() {
                    continue;
                }
                let Some(message) = selected.folder.state().get(uid) else {
                    continue;
                };
                let mut fetch = FetchWriter::new(out, seq);
                if !store.silent {
                    fetch.flags(&selected.flags(message, rev2));
                }
                if store.uid {
                    fetch.uid(uid);
                }
                if self.enabled.condstore {
                    fetch.modseq(message.modseq);
                }
                fetch.finish();
            }
        }
        let mut done = if outcome.modified.is_empty() {
            Done::ok("STORE completed")
        } else {
            let numbers: Vec<u32> = targets
                .iter()
                .filter(|(_, u)| outcome.modified.contains(u))
                .map(|&(s, u)| if store.uid { u } else { s })
                .collect();
            Done::ok_code(
                Code::Modified(numbers),
                "Conditional STORE failed for some messages",
            )
        };
        done.silent = silent;
        Ok(done)
    }

    /// SEARCH and UID SEARCH (with ESEARCH's RETURN and SEARCHRES's SAVE).
    pub(crate) async fn search(&mut self, tag: &str, search: Search) -> io::Result<Done> {
        if let Some(charset) = &search.charset
            && !matches!(charset.as_str(), "US-ASCII" | "UTF-8")
        {
            return Ok(Done::no(
                None,
                "[BADCHARSET (UTF-8 US-ASCII)] Unsupported charset",
            ));
        }
        let Some(selected) = &self.selected else {
            return Ok(Done::bad("No mailbox selected"));
        };
        let targets: Vec<(u32, u32)> = selected
            .view
            .uids()
            .iter()
            .enumerate()
            .map(|(i, &u)| (u32::try_from(i + 1).unwrap_or(u32::MAX), u))
            .collect();
        let matcher = Matcher::new(
            search.key.clone(),
            self.saved.clone(),
            selected.recent.clone(),
            selected.view.len(),
            selected.view.max_uid(),
        );
        let found = self
            .with_selected(move |selected, _store| {
                let mut found = Vec::new();
                for &(seq, uid) in &targets {
                    let Some(message) = selected.folder.state().get(uid) else {
                        continue;
                    };
                    if matcher.matches(selected.folder.get().ok(), seq, message) {
                        found.push((seq, uid, message.modseq));
                    }
                }
                found
            })
            .await?;
        let numbers: Vec<u32> = found
            .iter()
            .map(|&(s, u, _)| if search.uid { u } else { s })
            .collect();
        let wants_modseq = search_has_modseq(&search.key);
        if wants_modseq {
            self.enable_condstore();
        }
        let esearch = search.ret.is_some() || self.enabled.rev2;
        let ret = search.ret.clone().unwrap_or_default();
        // MODSEQ is the highest of what is returned: of MIN and MAX alone when
        // only they are asked for (RFC 7162 §3.1.5).
        let only_ends = esearch
            && !ret.is_empty()
            && ret.iter().all(|r| {
                matches!(
                    r,
                    SearchReturn::Min | SearchReturn::Max | SearchReturn::Save
                )
            })
            && !(ret.len() == 1 && ret[0] == SearchReturn::Save);
        let modseq = if only_ends {
            let mut ends = Vec::new();
            if ret.contains(&SearchReturn::Min) {
                ends.extend(found.first());
            }
            if ret.contains(&SearchReturn::Max) {
                ends.extend(found.last());
            }
            ends.iter().map(|&&(_, _, m)| m).max().unwrap_or(0)
        } else {
            found.iter().map(|&(_, _, m)| m).max().unwrap_or(0)
        };
        let modseq = wants_modseq.then_some(modseq);
        if ret.contains(&SearchReturn::Save) {
            self.saved = found.iter().map(|&(_, u, _)| u).collect();
        }
        if esearch {
            let only_save = ret.len() == 1 && ret[0] == SearchReturn::Save;
            if !only_save {
                let all = ret.is_empty()
                    || ret.contains(&SearchReturn::All)
                    || (ret.len() == 1 && ret[0] == SearchReturn::Save);
                let result = Esearch {
                    tag: Some(tag),
                    uid: search.uid,
                    min: ret
                        .contains(&SearchReturn::Min)
                        .then(|| numbers.first().copied())
                        .flatten(),
                    max: ret
                        .contains(&SearchReturn::Max)
                        .then(|| numbers.last().copied())
                        .flatten(),
                    count: ret
                        .contains(&SearchReturn::Count)
                        .then(|| u32::try_from(numbers.len()).unwrap_or(u32::MAX)),
                    all: all.then_some(numbers.as_slice()),
                    modseq: modseq.filter(|_| !numbers.is_empty()),
                };
                response::write_esearch(self.io.out(), &result);
            }
        } else {
            response::write_search(self.io.out(), &numbers, modseq);
        }
        Ok(Done::ok(if search.uid {
            "UID SEARCH completed"
        } else {
            "SEARCH completed"
        }))
    }

    /// COPY and MOVE (UID or not).
    pub(crate) async fn copy(
        &mut self,
        uid: bool,
        set: &SequenceSet,
        raw: &[u8],
        remove: bool,
    ) -> io::Result<Done> {
        if remove && self.read_only() {
            return Ok(Done::no(Some(Code::Cannot), "Mailbox is read-only"));
        }
        let name = match self.mailbox_name(raw) {
            Ok(name) => name,
            Err(done) => return Ok(done),
        };
        let targets = match self.resolve(uid, set) {
            Ok(targets) => targets,
            Err(done) => return Ok(done),
        };
        let uids: Vec<u32> = targets.iter().map(|&(_, u)| u).collect();
        let mailbox = self.user.as_ref().map(|u| u.mailbox);
        let Some(mailbox) = mailbox else {
            return Ok(Done::bad("Not authenticated"));
        };
        let copied = self
            .with_selected(move |selected, store| {
                let mut target = open_named(store, mailbox, &name)?;
                let source = selected.folder.open()?;
                let pairs = source.copy_to(store, &uids, &mut target, remove)?;
                Ok::<_, StoreError>((target.state().uid_validity, pairs))
            })
            .await?;
        let (uid_validity, pairs) = match copied {
            Ok(copied) => copied,
            Err(StoreError::NoSuchFolder(_)) => {
                return Ok(Done::no(Some(Code::TryCreate), "No such mailbox"));
            }
            Err(e) => return Ok(Done::store_error(self.peer, "copy", &e)),
        };
        let what = if remove {
            "MOVE completed"
        } else {
            "COPY completed"
        };
        if pairs.is_empty() {
            return Ok(Done::ok(what));
        }
        let code = Code::CopyUid {
            uid_validity,
            source: pairs.iter().map(|&(s, _)| s).collect(),
            destination: pairs.iter().map(|&(_, d)| d).collect(),
        };
        if remove {
            response::write_untagged(self.io.out(), response::Condition::Ok, Some(&code), "Moved");
            return Ok(Done::ok(what));
        }
        Ok(Done::ok_code(code, what))
    }

    /// EXPUNGE, and UID EXPUNGE of a set.
    pub(crate) async fn expunge(&mut self, set: Option<SequenceSet>) -> io::Result<Done> {
        if self.read_only() {
            return Ok(Done::no(Some(Code::Cannot), "Mailbox is read-only"));
        }
        let only = match &set {
            Some(set) => match self.resolve(true, set) {
                Ok(targets) => Some(targets.into_iter().map(|(_, u)| u).collect::<Vec<u32>>()),
                Err(done) => return Ok(done),
            },
            None => None,
        };
        let expunged = self
            .with_selected(move |selected, store| {
                selected.folder.open()?.expunge(store, only.as_deref())
            })
            .await?;
        Ok(match expunged {
            Ok(_) => Done::ok("EXPUNGE completed"),
            Err(e) => Done::store_error(self.peer, "expunge", &e),
        })
    }

    /// CLOSE (expunging silently when writable) and UNSELECT.
    pub(crate) async fn close(&mut self, expunge: bool) -> io::Result<Done> {
        if expunge && !self.read_only() {
            let expunged = self
                .with_selected(move |selected, store| selected.folder.open()?.expunge(store, None))
                .await?;
            if let Err(e) = expunged {
                return Ok(Done::store_error(self.peer, "close", &e));
            }
        }
        self.selected = None;
        self.state = State::Authenticated;
        Ok(Done::ok(if expunge {
            "CLOSE completed"
        } else {
            "UNSELECT completed"
        }))
    }
}

/// Whether a search key asks for MODSEQ (then the result carries the highest).
fn search_has_modseq(key: &stoa_imap_proto::command::SearchKey) -> bool {
    use stoa_imap_proto::command::SearchKey as K;
    match key {
        K::ModSeq { .. } => true,
        K::And(keys) => keys.iter().any(search_has_modseq),
        K::Or(a, b) => search_has_modseq(a) || search_has_modseq(b),
        K::Not(a) => search_has_modseq(a),
        _ => false,
    }
}

#[derive(Debug, Clone, Copy)]
struct FetchOptions {
    /// UID FETCH: UID goes in every response.
    uid: bool,
    /// MODSEQ goes in every response (CONDSTORE on, or CHANGEDSINCE).
    modseq: bool,
    /// FLAGS goes in (\Seen was just set by this FETCH).
    flags: bool,
    /// IMAP4rev2 is on: no \Recent.
    rev2: bool,
}

/// Writes one message's FETCH response.
fn write_fetch(
    out: &mut Vec<u8>,
    selected: &Selected,
    seq: u32,
    message: &IndexedMessage,
    attributes: &[FetchAttribute],
    options: FetchOptions,
) {
    let needs_content = attributes.iter().any(|a| {
        matches!(
            a,
            FetchAttribute::Envelope
                | FetchAttribute::Body
                | FetchAttribute::BodyStructure
                | FetchAttribute::Rfc822
                | FetchAttribute::Rfc822Header
                | FetchAttribute::Rfc822Text
                | FetchAttribute::BodySection { .. }
        )
    });
    let content = if needs_content {
        match selected
            .folder
            .get()
            .and_then(|f| f.read_message(message.uid))
        {
            Ok(bytes) => Some(bytes),
            // Gone meanwhile (POP3, a crash's repair): nothing to say of it.
            Err(_) => return,
        }
    } else {
        None
    };
    // Parsed at the first attribute that needs the MIME structure: `BODY[]` and
    // `RFC822`, the retrievals, need only the bytes.
    let structure = OnceCell::new();
    let mut fetch = FetchWriter::new(out, seq);
    let mut uid_written = false;
    let mut flags_written = false;
    let mut modseq_written = false;
    if options.uid {
        fetch.uid(message.uid);
        uid_written = true;
    }
    for attribute in attributes {
        match attribute {
            FetchAttribute::Uid if !uid_written => {
                fetch.uid(message.uid);
                uid_written = true;
            }
            FetchAttribute::Flags if !flags_written => {
                fetch.flags(&selected.flags(message, options.rev2));
                flags_written = true;
            }
            FetchAttribute::ModSeq if !modseq_written => {
                fetch.modseq(message.modseq);
                modseq_written = true;
            }
            FetchAttribute::InternalDate => {
                fetch.internal_date(message.internal_date);
            }
            FetchAttribute::Rfc822Size => {
                fetch.rfc822_size(message.size);
            }
            _ => {}
        }
        let Some(bytes) = &content else {
            continue;
        };
        let structure = || structure.get_or_init(|| Structure::parse(bytes));
        let mut rendered = Vec::new();
        match attribute {
            FetchAttribute::Envelope => {
                structure().write_envelope(&mut rendered);
                fetch.raw("ENVELOPE", &rendered);
            }
            FetchAttribute::Body => {
                structure().write_body_structure(&mut rendered, false);
                fetch.raw("BODY", &rendered);
            }
            FetchAttribute::BodyStructure => {
                structure().write_body_structure(&mut rendered, true);
                fetch.raw("BODYSTRUCTURE", &rendered);
            }
            FetchAttribute::Rfc822 => {
                fetch.literal("RFC822", Some(bytes));
            }
            FetchAttribute::Rfc822Header => {
                let header = section_bytes(structure, bytes, &header_section());
                fetch.literal("RFC822.HEADER", Some(&header));
            }
            FetchAttribute::Rfc822Text => {
                let text = section_bytes(
                    structure,
                    bytes,
                    &Section {
                        part: Vec::new(),
                        text: SectionText::Text,
                    },
                );
                fetch.literal("RFC822.TEXT", Some(&text));
            }
            FetchAttribute::BodySection {
                section, partial, ..
            } => {
                let data = section_bytes(structure, bytes, section);
                match partial {
                    Some((origin, count)) => {
                        let start = (*origin as usize).min(data.len());
                        let end = start.saturating_add(*count as usize).min(data.len());
                        fetch.body_section(section, Some(*origin), Some(&data[start..end]));
                    }
                    None => {
                        fetch.body_section(section, None, Some(&data));
                    }
                }
            }
            _ => {}
        }
    }
    if options.flags && !flags_written {
        fetch.flags(&selected.flags(message, options.rev2));
    }
    if options.modseq && !modseq_written {
        fetch.modseq(message.modseq);
    }
    fetch.finish();
}

fn header_section() -> Section {
    Section {
        part: Vec::new(),
        text: SectionText::Header,
    }
}

/// The bytes of a section, or empty when the part does not exist. The whole
/// message (`BODY[]`) is the message itself: neither parsed nor copied.
fn section_bytes<'m>(
    structure: impl FnOnce() -> &'m Structure,
    message: &'m [u8],
    section: &Section,
) -> Cow<'m, [u8]> {
    if section.part.is_empty() && section.text == SectionText::Full {
        return Cow::Borrowed(message);
    }
    structure()
        .section(message, section)
        .unwrap_or(Cow::Borrowed(&[]))
}
