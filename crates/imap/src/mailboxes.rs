//! The commands on mailboxes as wholes: SELECT and EXAMINE, CREATE, DELETE,
//! RENAME, SUBSCRIBE and UNSUBSCRIBE, LIST (with LIST-EXTENDED, LIST-STATUS and
//! SPECIAL-USE), LSUB, STATUS and APPEND.

use std::collections::BTreeSet;
use std::io;

use stoa_imap_proto::command::Flag;
use stoa_imap_proto::command::{Append, List, Select, StatusItem};
use stoa_imap_proto::response::{self, Code, FetchWriter, ListEntry};
use stoa_imap_proto::state::State;
use stoa_mailstore::{
    DELIMITER, Folder, FolderList, IndexState, MailStore, MailboxId, SpecialUse, StoreError,
};

use crate::conn::{Conn, Done, Selected, SelectedFolder, blocking, decode_lenient};
use crate::pattern::matches;
use crate::view::View;

/// Opens folder `name` of `mailbox`.
pub(crate) fn open_named(
    store: &MailStore,
    mailbox: MailboxId,
    name: &str,
) -> Result<Folder, StoreError> {
    let list = store.folder_list(mailbox)?;
    let info = list
        .get(name)
        .cloned()
        .ok_or_else(|| StoreError::NoSuchFolder(name.to_owned()))?;
    store.open_folder(mailbox, &info)
}

/// The STATUS values of a folder's state.
pub(crate) fn status_values(
    state: &IndexState,
    items: &[StatusItem],
    append_limit: u64,
) -> Vec<(StatusItem, u64)> {
    items
        .iter()
        .map(|&item| {
            let value = match item {
                StatusItem::Messages => state.len() as u64,
                StatusItem::UidNext => u64::from(state.uid_next),
                StatusItem::UidValidity => u64::from(state.uid_validity),
                StatusItem::Unseen => {
                    state.messages().filter(|m| !m.has_flag("\\Seen")).count() as u64
                }
                StatusItem::Deleted => {
                    state.messages().filter(|m| m.has_flag("\\Deleted")).count() as u64
                }
                StatusItem::Size => state.messages().map(|m| m.size).sum(),
                StatusItem::Recent => state
                    .messages()
                    .filter(|m| m.uid >= state.first_recent_uid)
                    .count() as u64,
                StatusItem::HighestModSeq => state.highest_modseq,
                StatusItem::AppendLimit => append_limit,
            };
            (item, value)
        })
        .collect()
}

impl Conn {
    fn mailbox_id(&self) -> MailboxId {
        self.user.as_ref().map_or(MailboxId(0), |u| u.mailbox)
    }

    /// Runs `work` with the store and the user's mailbox on a blocking thread.
    async fn with_store<T: Send + 'static>(
        &self,
        work: impl FnOnce(&MailStore, MailboxId) -> T + Send + 'static,
    ) -> io::Result<T> {
        let store = self.mail_store()?;
        let mailbox = self.mailbox_id();
        blocking(&self.shared, move || work(&store, mailbox)).await
    }

    /// SELECT and EXAMINE (with CONDSTORE and QRESYNC).
    pub(crate) async fn select(&mut self, select: Select, read_only: bool) -> io::Result<Done> {
        let name = match self.mailbox_name(&select.mailbox) {
            Ok(name) => name,
            Err(done) => return Ok(done),
        };
        if self.selected.take().is_some() && (self.enabled.condstore || self.enabled.qresync) {
            response::write_untagged(
                self.io.out(),
                response::Condition::Ok,
                Some(&Code::Closed),
                "Previous mailbox closed",
            );
        }
        self.state = State::Authenticated;
        if select.condstore {
            self.enabled.condstore = true;
        }
        if select.qresync.is_some() && !self.enabled.qresync {
            return Ok(Done::bad("QRESYNC is not enabled"));
        }
        let opened = self
            .with_store(move |store, mailbox| {
                let folder = open_named(store, mailbox, &name)?;
                let view = View::new(folder.state());
                let mut selected = Selected {
                    folder: SelectedFolder::Open(folder),
                    view,
                    read_only,
                    recent: Default::default(),
                    keywords: Default::default(),
                };
                selected.take_recent(store)?;
                Ok::<_, StoreError>(selected)
            })
            .await?;
        let mut selected = match opened {
            Ok(selected) => selected,
            Err(e) => return Ok(Done::store_error(self.peer, "select", &e)),
        };
        let rev2 = self.enabled.rev2;
        let out = self.io.out();
        selected.announce_keywords(out, true);
        let state = selected.folder.state();
        response::write_exists(out, selected.view.len());
        if !rev2 {
            let recent = u32::try_from(selected.recent.len()).unwrap_or(u32::MAX);
            response::write_recent(out, recent);
            if let Some(seq) = state
                .messages()
                .position(|m| !m.has_flag("\\Seen"))
                .and_then(|i| u32::try_from(i + 1).ok())
            {
                response::write_untagged(
                    out,
                    response::Condition::Ok,
                    Some(&Code::Unseen(seq)),
                    "First unseen",
                );
            }
        }
        let ok = response::Condition::Ok;
        response::write_untagged(
            out,
            ok,
            Some(&Code::UidValidity(state.uid_validity)),
            "UIDs valid",
        );
        response::write_untagged(
            out,
            ok,
            Some(&Code::UidNext(state.uid_next)),
            "Predicted next UID",
        );
        response::write_untagged(
            out,
            ok,
            Some(&Code::HighestModSeq(state.highest_modseq)),
            "Highest",
        );
        if let Some(qresync) = &select.qresync
            && qresync.uid_validity == state.uid_validity
        {
            let largest = state.uid_next.saturating_sub(1);
            let known = |uid: u32| {
                qresync
                    .known_uids
                    .as_ref()
                    .is_none_or(|set| set.contains(uid, largest))
            };
            let vanished: Vec<u32> = state
                .expunged_since(qresync.modseq)
                .into_iter()
                .filter(|&uid| known(uid))
                .collect();
            if !vanished.is_empty() {
                response::write_vanished(out, true, &vanished);
            }
            for (index, message) in state.messages().enumerate() {
                if message.modseq > qresync.modseq && known(message.uid) {
                    let seq = u32::try_from(index + 1).unwrap_or(u32::MAX);
                    let mut fetch = FetchWriter::new(out, seq);
                    fetch
                        .uid(message.uid)
                        .flags(&selected.flags(message, rev2))
                        .modseq(message.modseq);
                    fetch.finish();
                }
            }
        }
        self.selected = Some(selected);
        self.state = State::Selected { read_only };
        Ok(if read_only {
            Done::ok_code(Code::ReadOnly, "EXAMINE completed")
        } else {
            Done::ok_code(Code::ReadWrite, "SELECT completed")
        })
    }

    /// CREATE (with USE for SPECIAL-USE).
    pub(crate) async fn create(&mut self, raw: &[u8], special_use: &[String]) -> io::Result<Done> {
        if stoa_imap_proto::mailbox::decode_name(raw, self.enabled.utf8 || self.enabled.rev2)
            .is_err()
        {
            return Ok(Done::no(Some(Code::Cannot), "Invalid mailbox name"));
        }
        let name = match self.mailbox_name(raw) {
            Ok(name) => name.trim_end_matches(DELIMITER).to_owned(),
            Err(done) => return Ok(done),
        };
        if name == "INBOX" {
            return Ok(Done::no(Some(Code::AlreadyExists), "INBOX always exists"));
        }
        let mut usage = None;
        for attribute in special_use {
            match SpecialUse::parse(attribute) {
                Some(u) if usage.is_none() => usage = Some(u),
                _ => {
                    return Ok(Done::no(
                        Some(Code::Cannot),
                        "Unsupported special-use attribute",
                    ));
                }
            }
        }
        let created = self
            .with_store(move |store, mailbox| store.create_folder(mailbox, &name, usage))
            .await?;
        Ok(match created {
            Ok(_) => Done::ok("CREATE completed"),
            Err(e) => Done::store_error(self.peer, "create", &e),
        })
    }

    /// DELETE.
    pub(crate) async fn delete(&mut self, raw: &[u8]) -> io::Result<Done> {
        let name = match self.mailbox_name(raw) {
            Ok(name) => name,
            Err(done) => return Ok(done),
        };
        if name == "INBOX" {
            return Ok(Done::no(Some(Code::Cannot), "INBOX cannot be deleted"));
        }
        if self
            .selected
            .as_ref()
            .is_some_and(|s| s.folder.info().name == name)
        {
            self.selected = None;
            self.state = State::Authenticated;
        }
        let deleted = self
            .with_store(move |store, mailbox| store.delete_folder(mailbox, &name))
            .await?;
        Ok(match deleted {
            Ok(()) => Done::ok("DELETE completed"),
            Err(e) => Done::store_error(self.peer, "delete", &e),
        })
    }

    /// RENAME; renaming INBOX moves its messages into the new folder.
    pub(crate) async fn rename(&mut self, from: &[u8], to: &[u8]) -> io::Result<Done> {
        let (from, to) = match (self.mailbox_name(from), self.mailbox_name(to)) {
            (Ok(from), Ok(to)) => (from, to),
            (Err(done), _) | (_, Err(done)) => return Ok(done),
        };
        if to == "INBOX" {
            return Ok(Done::no(Some(Code::AlreadyExists), "INBOX always exists"));
        }
        let renamed = self
            .with_store(move |store, mailbox| {
                if from != "INBOX" {
                    return store.rename_folder(mailbox, &from, &to);
                }
                store.create_folder(mailbox, &to, None)?;
                let mut inbox = open_named(store, mailbox, "INBOX")?;
                let mut target = open_named(store, mailbox, &to)?;
                let uids: Vec<u32> = inbox.state().messages().map(|m| m.uid).collect();
                inbox.copy_to(store, &uids, &mut target, true).map(|_| ())
            })
            .await?;
        Ok(match renamed {
            Ok(()) => Done::ok("RENAME completed"),
            Err(e) => Done::store_error(self.peer, "rename", &e),
        })
    }

    /// SUBSCRIBE and UNSUBSCRIBE.
    pub(crate) async fn subscribe(&mut self, raw: &[u8], on: bool) -> io::Result<Done> {
        let name = match self.mailbox_name(raw) {
            Ok(name) => name,
            Err(done) => return Ok(done),
        };
        let done = self
            .with_store(move |store, mailbox| store.subscribe(mailbox, &name, on))
            .await?;
        Ok(match done {
            Ok(()) if on => Done::ok("SUBSCRIBE completed"),
            Ok(()) => Done::ok("UNSUBSCRIBE completed"),
            Err(e) => Done::store_error(self.peer, "subscribe", &e),
        })
    }

    /// LIST, basic and extended.
    pub(crate) async fn list(&mut self, list: List) -> io::Result<Done> {
        let utf8 = self.enabled.utf8 || self.enabled.rev2;
        let decode = |raw: &[u8]| decode_lenient(raw, utf8).ok_or(());
        let Ok(reference) = decode(&list.reference) else {
            return Ok(Done::bad("Invalid reference name"));
        };
        let mut patterns = Vec::new();
        for raw in &list.patterns {
            let Ok(pattern) = decode(raw) else {
                return Ok(Done::bad("Invalid mailbox pattern"));
            };
            patterns.push(pattern);
        }
        if patterns.len() == 1 && patterns[0].is_empty() && !list.selection.subscribed {
            let entry = ListEntry {
                attributes: &["\\Noselect"],
                delimiter: Some(DELIMITER),
                name: "",
                ..ListEntry::default()
            };
            response::write_list(self.io.out(), &entry, false, utf8);
            return Ok(Done::ok("LIST completed"));
        }
        let full: Vec<String> = patterns.iter().map(|p| format!("{reference}{p}")).collect();
        let status = list.ret.status.clone();
        let append_limit = self.reader.limits().max_literal;
        let listed = self
            .with_store(move |store, mailbox| -> Result<_, StoreError> {
                let folders = store.folder_list(mailbox)?;
                let statuses = match &status {
                    Some(items) => folders
                        .folders()
                        .iter()
                        .map(|f| {
                            store.open_folder(mailbox, f).map(|folder| {
                                (
                                    f.name.clone(),
                                    status_values(folder.state(), items, append_limit),
                                )
                            })
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                    None => Vec::new(),
                };
                Ok((folders, statuses))
            })
            .await?;
        let (folders, statuses) = match listed {
            Ok(listed) => listed,
            Err(e) => return Ok(Done::store_error(self.peer, "list", &e)),
        };
        let matches_any = |name: &str| full.iter().any(|p| matches(p, name));
        let sel = list.selection;
        let ret = &list.ret;
        // RECURSIVEMATCH (RFC 5258 §3.5): a name that matches but is not subscribed
        // is listed, with CHILDINFO, when a subscribed name below it does not match.
        let subscribed_below = |name: &str| {
            let prefix = format!("{name}{DELIMITER}");
            folders
                .subscribed()
                .iter()
                .any(|s| s.starts_with(&prefix) && !matches_any(s))
        };
        let out = self.io.out();
        for (name, exists, info) in candidates(&folders, sel.subscribed, sel.recursive_match) {
            if !matches_any(&name) {
                continue;
            }
            if sel.special_use && info.is_none_or(|f| f.special_use.is_none()) {
                continue;
            }
            let subscribed = folders.subscribed().contains(&name);
            let child_subscribed = sel.recursive_match && subscribed_below(&name);
            if sel.subscribed && !subscribed && !child_subscribed {
                continue;
            }
            let mut attributes: Vec<&str> = Vec::new();
            if !exists {
                attributes.push("\\NonExistent");
            } else if folders.has_children(&name) {
                attributes.push("\\HasChildren");
            } else {
                attributes.push("\\HasNoChildren");
            }
            if (ret.subscribed || sel.subscribed) && subscribed {
                attributes.push("\\Subscribed");
            }
            if let Some(usage) = info.and_then(|f| f.special_use) {
                attributes.push(usage.as_str());
            }
            let entry = ListEntry {
                attributes: &attributes,
                delimiter: Some(DELIMITER),
                name: &name,
                child_subscribed,
                ..ListEntry::default()
            };
            response::write_list(out, &entry, false, utf8);
            if let Some((_, values)) = statuses.iter().find(|(n, _)| *n == name) {
                response::write_status(out, &name, utf8, values);
            }
        }
        Ok(Done::ok("LIST completed"))
    }

    /// LSUB (IMAP4rev1): the subscribed names that match.
    pub(crate) async fn lsub(&mut self, reference: &[u8], pattern: &[u8]) -> io::Result<Done> {
        let utf8 = self.enabled.utf8 || self.enabled.rev2;
        let decode = |raw: &[u8]| decode_lenient(raw, utf8).ok_or(());
        let (Ok(reference), Ok(pattern)) = (decode(reference), decode(pattern)) else {
            return Ok(Done::bad("Invalid mailbox pattern"));
        };
        let full = format!("{reference}{pattern}");
        let folders = match self
            .with_store(|store, mailbox| store.folder_list(mailbox))
            .await?
        {
            Ok(folders) => folders,
            Err(e) => return Ok(Done::store_error(self.peer, "lsub", &e)),
        };
        // A level that is not subscribed but has subscribed names below it is
        // listed as \Noselect when the pattern matches it (RFC 3501 §6.3.9).
        let mut listed: BTreeSet<(String, bool)> = BTreeSet::new();
        for name in folders.subscribed() {
            if matches(&full, name) {
                listed.insert((name.clone(), folders.get(name).is_none()));
                continue;
            }
            let mut level = name.as_str();
            while let Some((parent, _)) = level.rsplit_once(DELIMITER) {
                if matches(&full, parent) && !folders.subscribed().contains(parent) {
                    listed.insert((parent.to_owned(), true));
                }
                level = parent;
            }
        }
        let out = self.io.out();
        for (name, noselect) in &listed {
            let attributes: &[&str] = if *noselect { &["\\Noselect"] } else { &[] };
            let entry = ListEntry {
                attributes,
                delimiter: Some(DELIMITER),
                name,
                ..ListEntry::default()
            };
            response::write_list(out, &entry, true, utf8);
        }
        Ok(Done::ok("LSUB completed"))
    }

    /// STATUS.
    pub(crate) async fn status(&mut self, raw: &[u8], items: &[StatusItem]) -> io::Result<Done> {
        let name = match self.mailbox_name(raw) {
            Ok(name) => name,
            Err(done) => return Ok(done),
        };
        let append_limit = self.reader.limits().max_literal;
        let items_owned = items.to_vec();
        let lookup = name.clone();
        let values = self
            .with_store(move |store, mailbox| {
                open_named(store, mailbox, &lookup)
                    .map(|folder| status_values(folder.state(), &items_owned, append_limit))
            })
            .await?;
        Ok(match values {
            Ok(values) => {
                let utf8 = self.enabled.utf8 || self.enabled.rev2;
                response::write_status(self.io.out(), &name, utf8, &values);
                Done::ok("STATUS completed")
            }
            Err(e) => Done::store_error(self.peer, "status", &e),
        })
    }

    /// APPEND.
    pub(crate) async fn append(&mut self, append: Append) -> io::Result<Done> {
        let name = match self.mailbox_name(&append.mailbox) {
            Ok(name) => name,
            Err(done) => return Ok(done),
        };
        let flags: Vec<String> = append
            .flags
            .iter()
            .filter(|f| **f != Flag::Recent)
            .map(|f| f.as_str().to_owned())
            .collect();
        let Append { message, date, .. } = append;
        let appended = self
            .with_store(move |store, mailbox| {
                let mut folder = open_named(store, mailbox, &name)?;
                let uid = folder.append(store, &message, &flags, date)?;
                Ok::<_, StoreError>((folder.state().uid_validity, uid))
            })
            .await?;
        Ok(match appended {
            Ok((uid_validity, uid)) => {
                Done::ok_code(Code::AppendUid { uid_validity, uid }, "APPEND completed")
            }
            Err(StoreError::NoSuchFolder(_)) => Done::no(Some(Code::TryCreate), "No such mailbox"),
            Err(e) => Done::store_error(self.peer, "append", &e),
        })
    }
}

/// The names LIST considers: every folder, or (SUBSCRIBED) every subscribed name,
/// existing or not, and with RECURSIVEMATCH the folders too; with whether each
/// exists and its folder.
fn candidates(
    folders: &FolderList,
    subscribed: bool,
    recursive: bool,
) -> Vec<(String, bool, Option<&stoa_mailstore::FolderInfo>)> {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    if !subscribed || recursive {
        names.extend(folders.folders().iter().map(|f| f.name.as_str()));
    }
    if subscribed {
        names.extend(folders.subscribed().iter().map(String::as_str));
    }
    let mut list: Vec<_> = names
        .into_iter()
        .map(|name| {
            let info = folders.get(name);
            (name.to_owned(), info.is_some(), info)
        })
        .collect();
    // INBOX first, as clients expect.
    list.sort_by_key(|(name, _, _)| name != "INBOX");
    list
}
