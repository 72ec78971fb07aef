//! One IMAP connection: the read → frame → execute → write loop around
//! [`stoa_imap_proto::CommandReader`], its deadlines, STARTTLS and IMAPS, and the
//! selected folder.
//!
//! [`Conn`] owns the connection's [`LineIo`] (the socket, the read buffer and the
//! response queue). Each complete command is checked against the state
//! ([`stoa_imap_proto::state::check`]), run by its handler (`auth.rs`,
//! `mailboxes.rs`, `messages.rs`, `idle.rs`), followed by the untagged updates the
//! selected folder owes the client, then its tagged answer. Store work (fsyncs,
//! message reads) runs on blocking threads; the folder moves there and back.
//!
//! Deadlines: before login each command must come within `login_timeout`, after it
//! within `idle_timeout` (then `* BYE Autologout`); each write within
//! `send_timeout`. On shutdown a session waiting for a command gets
//! `* BYE Server shutting down`.

use std::collections::BTreeSet;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use stoa_imap_proto::command::Flag;
use stoa_imap_proto::command::Line;
use stoa_imap_proto::response::{self, Code, Condition, FetchWriter};
use stoa_imap_proto::state::{self, State};
use stoa_imap_proto::{Command, CommandKind, CommandReader, Event};
use stoa_mailstore::{
    Folder, FolderInfo, IndexState, IndexedMessage, MailStore, MailboxId, ReleasedFolder,
    StoreError,
};
use stoa_netkit::line::{LineIo, ReadEnd};
use stoa_netkit::server::{Accepted, ClientSlot};
use stoa_netkit::shutdown::Shutdown;
use stoa_netkit::tls::Stream;

use crate::proxy::LoggedIn;
use crate::shared::{Backend, Shared};
use crate::view::View;
use crate::watch::Watch;

/// Bytes read at a time: 4 KiB, as POP3's (an APPEND's literal grows the buffer as
/// it arrives, up to the command limit). A session waiting for input holds no
/// buffer at all ([`LineIo::read_parked`]).
const READ_CHUNK: usize = 4 * 1024;

/// How long the close of the write side may take once the session is over.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);

/// Queued response bytes past which the loop writes them out before going on.
pub(crate) const OUT_HIGH: usize = 256 * 1024;

/// What the listener is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// IMAP: plain text, STARTTLS when there is a certificate.
    Plain,
    /// IMAPS: TLS from the first byte.
    Tls,
}

/// Whether the loop goes on after a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Take the next command.
    Continue,
    /// Write out what is queued and close.
    Close,
    /// The proxy logged the user in at a store host ([`Conn::proxied`]): relay
    /// from now on.
    Relay,
}

/// The extensions the client turned on with ENABLE (or SELECT's CONDSTORE).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Enabled {
    pub(crate) condstore: bool,
    pub(crate) qresync: bool,
    pub(crate) rev2: bool,
    pub(crate) utf8: bool,
}

/// The logged-in user.
pub(crate) struct User {
    pub(crate) address: String,
    pub(crate) mailbox: MailboxId,
    /// The store that holds the mailbox.
    pub(crate) store: Arc<MailStore>,
    /// Its place among the user's sessions; wakes IDLE.
    pub(crate) watch: Watch,
}

/// The selected folder: open, or released while the session waits in IDLE (it
/// then holds no descriptor but its socket), and still released after a failed
/// reacquire (the folder was deleted meanwhile): the session keeps its state and
/// what needs the folder's files fails with `NO`.
pub(crate) enum SelectedFolder {
    Open(Folder),
    Released(ReleasedFolder),
}

impl SelectedFolder {
    /// The folder's state as of the last refresh.
    pub(crate) fn state(&self) -> &IndexState {
        match self {
            SelectedFolder::Open(folder) => folder.state(),
            SelectedFolder::Released(folder) => folder.state(),
        }
    }

    /// The folder.
    pub(crate) fn info(&self) -> &FolderInfo {
        match self {
            SelectedFolder::Open(folder) => folder.info(),
            SelectedFolder::Released(folder) => folder.info(),
        }
    }

    /// The open folder; a released one (one whose reacquire failed) is
    /// [`StoreError::NoSuchFolder`].
    pub(crate) fn open(&mut self) -> Result<&mut Folder, StoreError> {
        match self {
            SelectedFolder::Open(folder) => Ok(folder),
            SelectedFolder::Released(folder) => {
                Err(StoreError::NoSuchFolder(folder.info().name.clone()))
            }
        }
    }

    /// The open folder, to read (see [`SelectedFolder::open`]).
    pub(crate) fn get(&self) -> Result<&Folder, StoreError> {
        match self {
            SelectedFolder::Open(folder) => Ok(folder),
            SelectedFolder::Released(folder) => {
                Err(StoreError::NoSuchFolder(folder.info().name.clone()))
            }
        }
    }

    /// Gives the folder's descriptors back.
    pub(crate) fn release(self) -> SelectedFolder {
        match self {
            SelectedFolder::Open(folder) => SelectedFolder::Released(folder.release()),
            released => released,
        }
    }

    /// Takes the folder's descriptors back, if it was released (nothing to do, and
    /// no system call, when it is open).
    pub(crate) fn reacquire(self) -> (SelectedFolder, Result<(), StoreError>) {
        match self {
            SelectedFolder::Released(folder) => match folder.reacquire() {
                Ok(folder) => (SelectedFolder::Open(folder), Ok(())),
                Err(failed) => {
                    let (folder, error) = *failed;
                    (SelectedFolder::Released(folder), Err(error))
                }
            },
            open => (open, Ok(())),
        }
    }
}

/// The selected folder and the client's numbering of it.
pub(crate) struct Selected {
    pub(crate) folder: SelectedFolder,
    pub(crate) view: View,
    pub(crate) read_only: bool,
    /// The messages that are `\Recent` for this session (IMAP4rev1).
    pub(crate) recent: BTreeSet<u32>,
    /// The keywords the client was told of in `* FLAGS`.
    pub(crate) keywords: BTreeSet<String>,
}

impl Selected {
    /// A message's flags as this session shows them (`\Recent` added where it is,
    /// for IMAP4rev1 clients).
    pub(crate) fn flags(&self, message: &IndexedMessage, rev2: bool) -> Vec<Flag> {
        let mut flags = flags_of(&message.flags);
        if !rev2 && self.recent.contains(&message.uid) {
            flags.insert(0, Flag::Recent);
        }
        flags
    }

    /// The recent messages of the folder for this session after a refresh: taken
    /// (read-write) or only seen (read-only).
    pub(crate) fn take_recent(&mut self, store: &MailStore) -> Result<(), StoreError> {
        if self.read_only {
            let from = self.folder.state().first_recent_uid;
            let uids: Vec<u32> = self
                .folder
                .state()
                .messages()
                .map(|m| m.uid)
                .filter(|&u| u >= from)
                .collect();
            self.recent.extend(uids);
        } else {
            self.recent.extend(self.folder.open()?.claim_recent(store)?);
        }
        Ok(())
    }

    /// `* FLAGS` and `PERMANENTFLAGS` with the folder's keywords, when they are not
    /// what the client was last told (a keyword must be announced before use).
    pub(crate) fn announce_keywords(&mut self, out: &mut Vec<u8>, always: bool) {
        let keywords = self.folder.state().keywords();
        if !always && keywords.is_subset(&self.keywords) {
            return;
        }
        self.keywords.extend(keywords.iter().cloned());
        let mut flags = vec![
            Flag::Answered,
            Flag::Flagged,
            Flag::Deleted,
            Flag::Seen,
            Flag::Draft,
        ];
        flags.extend(
            self.keywords
                .iter()
                .filter_map(|k| Flag::parse(k.as_bytes())),
        );
        response::write_flags(out, &flags);
        let permanent = Code::PermanentFlags {
            flags: if self.read_only { Vec::new() } else { flags },
            new_keywords: !self.read_only,
        };
        response::write_untagged(out, Condition::Ok, Some(&permanent), "Flags permitted");
    }
}

pub(crate) struct Conn {
    pub(crate) io: LineIo,
    pub(crate) peer: SocketAddr,
    pub(crate) slot: ClientSlot,
    pub(crate) shared: Arc<Shared>,
    pub(crate) reader: CommandReader,
    pub(crate) state: State,
    pub(crate) tls: bool,
    pub(crate) user: Option<User>,
    pub(crate) selected: Option<Selected>,
    pub(crate) enabled: Enabled,
    /// The result `SEARCH RETURN (SAVE)` kept, as UIDs (RFC 5182 `$`).
    pub(crate) saved: Vec<u32>,
    commands: u64,
    bad_commands: u32,
    pub(crate) failed_logins: u32,
    /// A trusted proxy named the client (`ID x-originating-ip`): `peer` is the
    /// client, and the connection counts as secure.
    pub(crate) forwarded: bool,
    /// The proxy's session at the store host, with the client's login tag, from
    /// the login to the relay.
    pub(crate) proxied: Option<(String, LoggedIn)>,
    phase_start: Instant,
    pub(crate) shutdown: Shutdown,
}

/// Serves one accepted connection to its end.
pub(crate) async fn serve(accepted: Accepted<Kind>, shared: Arc<Shared>, slot: ClientSlot) {
    let Accepted {
        stream,
        peer,
        kind,
        permit: _permit,
        shutdown,
    } = accepted;
    let Some(stream) = stoa_netkit::accept::register(stream, peer) else {
        return;
    };
    let _ = stream.set_nodelay(true);
    let limits = shared.config.limits.command;
    let max_buffered = limits.max_command.saturating_add(READ_CHUNK);
    let mut conn = Conn {
        io: LineIo::new(Stream::Plain(stream), READ_CHUNK, max_buffered),
        peer,
        slot,
        reader: CommandReader::new(limits),
        shared,
        state: State::NotAuthenticated,
        tls: false,
        user: None,
        selected: None,
        enabled: Enabled::default(),
        saved: Vec::new(),
        commands: 0,
        bad_commands: 0,
        failed_logins: 0,
        forwarded: false,
        proxied: None,
        phase_start: Instant::now(),
        shutdown,
    };
    let result = if conn.slot.over_limit() {
        tracing::info!("{peer}: too many connections from this address");
        response::write_bye(
            conn.io.out(),
            Some(&Code::Limit),
            "Too many connections from your address",
        );
        conn.flush().await
    } else {
        conn.start(kind).await
    };
    if let Err(e) = result {
        tracing::debug!("{peer}: connection ended: {e}");
    }
    let _ = conn.io.shutdown(CLOSE_TIMEOUT).await;
    tracing::debug!("{peer}: session closed");
}

impl Conn {
    async fn start(&mut self, kind: Kind) -> io::Result<()> {
        if kind == Kind::Tls {
            self.handshake().await?;
        }
        let caps = self.capabilities();
        let code = Code::Capability(caps);
        let greeting = format!("{} Stoa IMAP ready", self.shared.config.hostname);
        response::write_untagged(self.io.out(), Condition::Ok, Some(&code), &greeting);
        self.flush().await?;
        self.phase_start = Instant::now();
        loop {
            match self.process().await? {
                Flow::Continue => {}
                Flow::Close => return self.flush().await,
                Flow::Relay => return self.relay().await,
            }
            self.flush().await?;
            match self.read().await? {
                ReadEnd::Data => {}
                ReadEnd::Eof => return Ok(()),
                ReadEnd::Timeout => {
                    tracing::info!("{}: autologout", self.peer);
                    response::write_bye(self.io.out(), None, "Autologout; idle for too long");
                    return self.flush().await;
                }
                ReadEnd::Draining => {
                    response::write_bye(
                        self.io.out(),
                        Some(&Code::Unavailable),
                        "Server shutting down",
                    );
                    return self.flush().await;
                }
            }
        }
    }

    /// Runs every complete command in the buffer.
    async fn process(&mut self) -> io::Result<Flow> {
        loop {
            let step = self.reader.next(self.io.unread());
            self.io.consume(step.consumed);
            match step.event {
                Event::NeedMore => return Ok(Flow::Continue),
                Event::Continue => {
                    CommandReader::write_continuation(self.io.out());
                    return Ok(Flow::Continue);
                }
                Event::Rejected(rejection) => {
                    rejection.write_response(self.io.out());
                    if rejection.is_fatal() {
                        return Ok(Flow::Close);
                    }
                    // A message over the APPEND limit is not a broken client.
                    let too_big = matches!(
                        rejection.error,
                        stoa_imap_proto::Error::LiteralTooLarge { .. }
                    );
                    if !too_big && self.too_many_bad() {
                        return Ok(Flow::Close);
                    }
                }
                Event::Command(command) => {
                    self.phase_start = Instant::now();
                    let flow = match self.admit(&command) {
                        Some(flow) => flow,
                        // IDLE runs here rather than in `execute`, and `execute`'s
                        // future is boxed: a session waiting in IDLE (or for its
                        // next command) holds this loop's state, not the largest
                        // command's (the task shrank by 0.7 KB, to 2.6 KB).
                        None if matches!(command.kind, CommandKind::Idle) => {
                            self.idle(&command.tag).await?
                        }
                        None => Box::pin(self.execute(command)).await?,
                    };
                    self.phase_start = Instant::now();
                    if flow != Flow::Continue {
                        return Ok(flow);
                    }
                }
            }
            if self.io.queued() >= OUT_HIGH {
                self.flush().await?;
            }
        }
    }

    /// Counts a malformed command; past the limit, says BYE.
    fn too_many_bad(&mut self) -> bool {
        self.bad_commands += 1;
        if self.bad_commands >= self.shared.config.limits.max_bad_commands {
            response::write_bye(
                self.io.out(),
                Some(&Code::ClientBug),
                "Too many invalid commands",
            );
            return true;
        }
        false
    }

    /// Counts `command` and checks it against the state: `None` when it may run,
    /// else how the loop goes on after the refusal written.
    fn admit(&mut self, command: &Command) -> Option<Flow> {
        self.commands += 1;
        let max = self.shared.config.limits.max_commands;
        if max > 0 && self.commands > max {
            response::write_bye(
                self.io.out(),
                Some(&Code::Limit),
                "Too many commands in one session",
            );
            return Some(Flow::Close);
        }
        if let Err(text) = state::check(&command.kind, self.state) {
            response::write_tagged(self.io.out(), &command.tag, Condition::Bad, None, text);
            return Some(if self.too_many_bad() {
                Flow::Close
            } else {
                Flow::Continue
            });
        }
        None
    }

    /// Runs an admitted command (all but IDLE) and writes its answer.
    async fn execute(&mut self, command: Command) -> io::Result<Flow> {
        let Command { tag, kind } = command;
        let expunges_allowed = !matches!(
            &kind,
            CommandKind::Fetch(f) if !f.uid
        ) && !matches!(&kind, CommandKind::Store(s) if !s.uid)
            && !matches!(&kind, CommandKind::Search(s) if !s.uid);
        let outcome = match kind {
            CommandKind::Capability => {
                let caps = self.capabilities();
                let caps: Vec<&str> = caps.iter().map(String::as_str).collect();
                response::write_capability(self.io.out(), &caps);
                Done::ok("CAPABILITY completed")
            }
            CommandKind::Noop => Done::ok("NOOP completed"),
            CommandKind::Check => Done::ok("CHECK completed"),
            CommandKind::Logout => {
                if let Some(user) = &self.user {
                    tracing::debug!("{}: {} logged out", self.peer, user.address);
                }
                response::write_bye(self.io.out(), None, "Logging out");
                response::write_tagged(
                    self.io.out(),
                    &tag,
                    Condition::Ok,
                    None,
                    "LOGOUT completed",
                );
                self.state = State::Logout;
                return Ok(Flow::Close);
            }
            CommandKind::Id(fields) => {
                if let Some(flow) = self.forward(fields.as_deref()) {
                    return Ok(flow);
                }
                let fields = [
                    ("name", Some("Stoa")),
                    ("version", Some(env!("CARGO_PKG_VERSION"))),
                ];
                response::write_id(self.io.out(), Some(&fields));
                Done::ok("ID completed")
            }
            CommandKind::Enable(caps) => self.enable(&caps),
            CommandKind::StartTls => return self.starttls(&tag).await,
            CommandKind::Login { username, password } => {
                return self.login(&tag, username, password.0, None).await;
            }
            CommandKind::Authenticate {
                mechanism,
                initial_response,
            } => {
                return self
                    .authenticate(&tag, &mechanism, initial_response.map(|s| s.0))
                    .await;
            }
            CommandKind::Compress(_) => Done::no(Some(Code::Cannot), "COMPRESS is not supported"),
            CommandKind::Namespace => {
                response::write_namespace(self.io.out(), stoa_mailstore::DELIMITER);
                Done::ok("NAMESPACE completed")
            }
            CommandKind::Select(select) => self.select(select, false).await?,
            CommandKind::Examine(select) => self.select(select, true).await?,
            CommandKind::Create {
                mailbox,
                special_use,
            } => self.create(&mailbox, &special_use).await?,
            CommandKind::Delete(mailbox) => self.delete(&mailbox).await?,
            CommandKind::Rename { from, to } => self.rename(&from, &to).await?,
            CommandKind::Subscribe(mailbox) => self.subscribe(&mailbox, true).await?,
            CommandKind::Unsubscribe(mailbox) => self.subscribe(&mailbox, false).await?,
            CommandKind::List(list) => self.list(list).await?,
            CommandKind::Lsub { reference, pattern } => self.lsub(&reference, &pattern).await?,
            CommandKind::Status { mailbox, items } => self.status(&mailbox, &items).await?,
            CommandKind::Append(append) => self.append(append).await?,
            CommandKind::Idle => return Box::pin(self.idle(&tag)).await,
            CommandKind::Close => self.close(true).await?,
            CommandKind::Unselect => self.close(false).await?,
            CommandKind::Expunge => self.expunge(None).await?,
            CommandKind::UidExpunge(set) => self.expunge(Some(set)).await?,
            CommandKind::Search(search) => self.search(&tag, search).await?,
            CommandKind::Fetch(fetch) => self.fetch(fetch).await?,
            CommandKind::Store(store) => self.store(store).await?,
            CommandKind::Copy { uid, set, mailbox } => {
                self.copy(uid, &set, &mailbox, false).await?
            }
            CommandKind::Move { uid, set, mailbox } => self.copy(uid, &set, &mailbox, true).await?,
        };
        self.updates(expunges_allowed, &outcome.silent).await?;
        response::write_tagged(
            self.io.out(),
            &tag,
            outcome.condition,
            outcome.code.as_ref(),
            &outcome.text,
        );
        Ok(Flow::Continue)
    }

    /// Brings the client up to date with its selected folder: new messages,
    /// expunges (when allowed now), flag changes. UIDs in `silent` changed by the
    /// command itself (STORE .SILENT) get no FETCH.
    pub(crate) async fn updates(&mut self, expunges: bool, silent: &[u32]) -> io::Result<()> {
        let Some(selected) = self.selected.take() else {
            return Ok(());
        };
        let store = self.mail_store()?;
        let (mut selected, refreshed) = blocking(&self.shared, move || {
            let mut selected = selected;
            let reacquired;
            (selected.folder, reacquired) = selected.folder.reacquire();
            let result = reacquired
                .and_then(|()| selected.folder.open()?.refresh(&store))
                .and_then(|()| selected.take_recent(&store));
            (selected, result)
        })
        .await?;
        if let Err(e) = refreshed {
            tracing::error!("{}: cannot refresh the folder: {e}", self.peer);
        }
        let updates = selected.view.sync(selected.folder.state(), expunges);
        for uid in &updates.expunged_uids {
            selected.recent.remove(uid);
        }
        let rev2 = self.enabled.rev2;
        let out = self.io.out();
        selected.announce_keywords(out, false);
        if self.enabled.qresync && !updates.expunged_uids.is_empty() {
            response::write_vanished(out, false, &updates.expunged_uids);
        } else {
            for &seq in &updates.expunged_seqs {
                response::write_expunge(out, seq);
            }
        }
        if let Some(n) = updates.exists {
            response::write_exists(out, n);
            if !rev2 {
                let recent = u32::try_from(selected.recent.len()).unwrap_or(u32::MAX);
                response::write_recent(out, recent);
            }
        }
        for &(seq, uid) in &updates.flag_changes {
            if silent.contains(&uid) {
                continue;
            }
            let Some(message) = selected.folder.state().get(uid) else {
                continue;
            };
            let mut fetch = FetchWriter::new(out, seq);
            fetch.flags(&selected.flags(message, rev2)).uid(uid);
            if self.enabled.condstore {
                fetch.modseq(message.modseq);
            }
            fetch.finish();
        }
        self.selected = Some(selected);
        Ok(())
    }

    /// The logged-in user's mail store.
    pub(crate) fn mail_store(&self) -> io::Result<Arc<MailStore>> {
        let user = self.user.as_ref();
        user.map(|u| Arc::clone(&u.store))
            .ok_or_else(|| io::Error::other("no mail store before the login"))
    }

    /// The capabilities to advertise now; a proxy's, only what it does before the
    /// login (the store host's list comes with its login's `OK`).
    pub(crate) fn capabilities(&self) -> Vec<String> {
        let mut caps = vec!["IMAP4rev1", "IMAP4rev2"];
        let logged_in = self.state.is_authenticated();
        if !logged_in {
            if !self.tls && self.shared.tls.is_some() {
                caps.push("STARTTLS");
            }
            if self.password_allowed() {
                caps.extend(["AUTH=PLAIN", "SASL-IR"]);
            } else {
                caps.push("LOGINDISABLED");
            }
        }
        if let Backend::Proxy(_) = self.shared.backend {
            caps.extend(["LITERAL+", "ID"]);
            return caps.into_iter().map(str::to_owned).collect();
        }
        caps.extend([
            "LITERAL+",
            "ENABLE",
            "ID",
            "IDLE",
            "NAMESPACE",
            "UNSELECT",
            "UIDPLUS",
            "MOVE",
            "CHILDREN",
            "LIST-EXTENDED",
            "LIST-STATUS",
            "SPECIAL-USE",
            "CREATE-SPECIAL-USE",
            "ESEARCH",
            "SEARCHRES",
            "CONDSTORE",
            "QRESYNC",
            "STATUS=SIZE",
            "UTF8=ACCEPT",
        ]);
        let mut caps: Vec<String> = caps.into_iter().map(str::to_owned).collect();
        caps.push(format!("APPENDLIMIT={}", self.reader.limits().max_literal));
        caps
    }

    /// Whether a password may be sent on this connection now.
    pub(crate) fn password_allowed(&self) -> bool {
        self.tls
            || self.forwarded
            || self.shared.config.allow_plaintext_auth
            || self.shared.is_secure(self.peer.ip())
    }

    /// STARTTLS: the OK, then the handshake; nothing read before it survives.
    async fn starttls(&mut self, tag: &str) -> io::Result<Flow> {
        if self.tls || self.shared.tls.is_none() {
            response::write_tagged(
                self.io.out(),
                tag,
                Condition::Bad,
                None,
                "TLS is not available now",
            );
            return Ok(Flow::Continue);
        }
        response::write_tagged(
            self.io.out(),
            tag,
            Condition::Ok,
            None,
            "Begin TLS negotiation now",
        );
        self.flush().await?;
        self.handshake().await?;
        self.reader = CommandReader::new(self.shared.config.limits.command);
        Ok(Flow::Continue)
    }

    /// The TLS handshake (STARTTLS or IMAPS), within the login timeout.
    async fn handshake(&mut self) -> io::Result<()> {
        let Some(acceptor) = self.shared.tls.clone() else {
            return Err(io::Error::other("TLS without a certificate"));
        };
        let timeout = self.shared.config.limits.login_timeout;
        self.io.start_tls(&acceptor, timeout).await?;
        self.tls = true;
        Ok(())
    }

    /// Reads one line that is not a command (AUTHENTICATE's response, IDLE's DONE)
    /// with `parse`; `None` when the connection ended or timed out first.
    pub(crate) async fn read_line<T>(
        &mut self,
        parse: impl Fn(&[u8], usize) -> Line<T>,
    ) -> io::Result<Option<Result<T, stoa_imap_proto::Error>>> {
        let max = self.reader.limits().max_line;
        loop {
            match parse(self.io.unread(), max) {
                Line::Complete { result, consumed } => {
                    self.io.consume(consumed);
                    return Ok(Some(result));
                }
                Line::Partial => {}
            }
            self.flush().await?;
            match self.read().await? {
                ReadEnd::Data => {}
                _ => return Ok(None),
            }
        }
    }

    /// The inactivity limit of the current state.
    fn idle_limit(&self) -> Duration {
        let limits = &self.shared.config.limits;
        if self.state.is_authenticated() {
            limits.idle_timeout
        } else {
            limits.login_timeout
        }
    }

    /// Waits for input until the state's deadline or shutdown.
    /// The buffers are given back while the session waits (see
    /// [`LineIo::read_parked`]).
    pub(crate) async fn read(&mut self) -> io::Result<ReadEnd> {
        let deadline = self.phase_start + self.idle_limit();
        self.io
            .read_parked(deadline, Some(&mut self.shutdown))
            .await
    }

    /// Writes the queued responses out.
    pub(crate) async fn flush(&mut self) -> io::Result<()> {
        self.io.flush(self.shared.config.limits.send_timeout).await
    }

    /// Decodes a mailbox name as the client's mode wants it.
    pub(crate) fn mailbox_name(&self, raw: &[u8]) -> Result<String, Done> {
        let utf8 = self.enabled.utf8 || self.enabled.rev2;
        decode_lenient(raw, utf8)
            .map(|name| stoa_mailstore::canonical(&name))
            .ok_or_else(|| Done::bad("Invalid mailbox name"))
    }

    /// ENABLE: the extensions this server has, turned on.
    fn enable(&mut self, caps: &[String]) -> Done {
        let mut newly = Vec::new();
        for cap in caps {
            let on = match cap.as_str() {
                "CONDSTORE" => &mut self.enabled.condstore,
                "QRESYNC" => {
                    if !self.enabled.condstore {
                        self.enabled.condstore = true;
                    }
                    &mut self.enabled.qresync
                }
                "IMAP4REV2" => &mut self.enabled.rev2,
                "UTF8=ACCEPT" => &mut self.enabled.utf8,
                _ => continue,
            };
            if !*on {
                *on = true;
                newly.push(if cap == "IMAP4REV2" {
                    "IMAP4rev2"
                } else {
                    cap.as_str()
                });
            }
        }
        response::write_enabled(self.io.out(), &newly);
        Done::ok("ENABLE completed")
    }
}

/// How a command ended: the tagged response's parts.
#[derive(Debug)]
pub(crate) struct Done {
    pub(crate) condition: Condition,
    pub(crate) code: Option<Code>,
    pub(crate) text: String,
    /// UIDs whose flag change the command already answered (or must not).
    pub(crate) silent: Vec<u32>,
}

impl Done {
    pub(crate) fn ok(text: &str) -> Done {
        Done::with(Condition::Ok, None, text)
    }

    pub(crate) fn ok_code(code: Code, text: &str) -> Done {
        Done::with(Condition::Ok, Some(code), text)
    }

    pub(crate) fn no(code: Option<Code>, text: &str) -> Done {
        Done::with(Condition::No, code, text)
    }

    pub(crate) fn bad(text: &str) -> Done {
        Done::with(Condition::Bad, None, text)
    }

    fn with(condition: Condition, code: Option<Code>, text: &str) -> Done {
        Done {
            condition,
            code,
            text: text.to_owned(),
            silent: Vec::new(),
        }
    }

    /// The answer to a store error: what the client may do about it, never the
    /// server's paths.
    pub(crate) fn store_error(peer: SocketAddr, what: &str, error: &StoreError) -> Done {
        match error {
            StoreError::NoSuchFolder(_) => Done::no(Some(Code::NonExistent), "No such mailbox"),
            StoreError::FolderExists(_) => {
                Done::no(Some(Code::AlreadyExists), "Mailbox already exists")
            }
            StoreError::BadFolderName { reason, .. } => Done::no(
                Some(Code::Cannot),
                &format!("Invalid mailbox name: {reason}"),
            ),
            StoreError::HasChildren(_) => {
                Done::no(Some(Code::InUse), "Mailbox has children, delete them first")
            }
            StoreError::TooManyFolders(n) => {
                Done::no(Some(Code::Limit), &format!("At most {n} mailboxes"))
            }
            StoreError::BadFlag(_) => Done::bad("Invalid flag"),
            StoreError::NoSuchUid(_) => Done::no(Some(Code::ExpungeIssued), "Message was expunged"),
            other => {
                tracing::error!("{peer}: {what}: {other}");
                let code = match other.io_error().and_then(std::io::Error::raw_os_error) {
                    Some(28) | Some(122) => Code::OverQuota,
                    _ => Code::ServerBug,
                };
                Done::no(Some(code), "Internal error; try again later")
            }
        }
    }
}

/// A mailbox name or pattern as the client's mode wants it. A name that is not
/// valid modified UTF-7 is taken as it is (it names no folder Stoa made, so SELECT
/// says NO and LIST finds nothing, as with Dovecot); CREATE refuses it.
pub(crate) fn decode_lenient(raw: &[u8], utf8: bool) -> Option<String> {
    stoa_imap_proto::mailbox::decode_name(raw, utf8)
        .ok()
        .or_else(|| {
            std::str::from_utf8(raw)
                .ok()
                .filter(|n| !n.chars().any(char::is_control))
                .map(str::to_owned)
        })
}

/// The store's flag strings as protocol flags.
pub(crate) fn flags_of(flags: &[String]) -> Vec<Flag> {
    flags
        .iter()
        .filter_map(|f| Flag::parse(f.as_bytes()))
        .collect()
}

/// Runs `work` on a blocking thread, at most [`STORE_TASKS`] at once in the
/// process; a panic there is an I/O error here (the connection ends).
pub(crate) async fn blocking<T: Send + 'static>(
    shared: &Shared,
    work: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let _permit = shared
        .store_tasks
        .acquire()
        .await
        .map_err(|_| io::Error::other("store tasks closed"))?;
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| io::Error::other(format!("store task failed: {e}")))
}

/// Store operations running at once, process-wide. Without a bound, ten thousand
/// logins at once made tokio start hundreds of blocking threads (655 seen, 500 MB
/// of stacks and allocator heaps); the store's work is short and disk-bound, and
/// more threads than this only queue at the disk.
pub(crate) const STORE_TASKS: usize = 32;
