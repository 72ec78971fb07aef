//! The server's answers to the session's events: disk space at MAIL, the relay and
//! recipient rules at RCPT, the spool at DATA, the durable commit at the end of the
//! message, and password checks at AUTH.
//!
//! # Relay rules (no open relay)
//!
//! A recipient whose domain is local (a `--domain` or a directory domain) is
//! resolved through the directory: users, aliases, `+detail`; an unknown one gets
//! `550 5.1.1`. Any other recipient, address literals included, is accepted only
//! from an authenticated client or a trusted network, and only when a smart host is
//! configured; everyone else gets `554 5.7.1 Relay access denied` (Postfix's words).
//! Local parts with routing syntax (`%`, `!`, a quoted `@`) in a local domain are
//! refused the same way unless the client may relay: they are never rewritten, but
//! nothing good comes of accepting them from strangers. The decision is always made
//! on the domain the parser extracted (source routes are dropped by the parser).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use stoa_directory::{Resolution, Target};
use stoa_netkit::throttle::Attempt;
use stoa_smtp_proto::address::Domain;
use stoa_smtp_proto::session::Credentials;
use stoa_smtp_proto::{Decision, EnhancedStatus, ForwardPath, Reply, ReversePath};

use crate::conn::{Conn, Held, Txn};
use crate::headers;
use crate::metrics::{self, Reject};
use crate::queue::{Envelope, Recipient, Route, envelope, unix_now};

/// `451 4.3.0`: the directory could not answer; `451 4.4.3` (RFC 3463 "directory
/// server failure") when no directory server answered at all.
pub(crate) fn lookup_failure(failure: &LookupFailure) -> Reply {
    if failure.unavailable {
        Reply::new(
            451,
            EnhancedStatus::new(4, 4, 3),
            "Directory server unavailable",
        )
    } else {
        Reply::new(
            451,
            EnhancedStatus::new(4, 3, 0),
            "Temporary lookup failure",
        )
    }
}

/// Why a RCPT lookup failed, for the log and the reply.
pub(crate) struct LookupFailure {
    pub(crate) message: String,
    /// No directory server answered ([`stoa_directory::Error::is_temporary`]).
    pub(crate) unavailable: bool,
}

/// `554 5.4.6`: a mail loop.
fn too_many_hops() -> Reply {
    Reply::new(554, EnhancedStatus::new(5, 4, 6), "Error: too many hops")
}

/// What the directory said about a local recipient.
enum Lookup {
    /// Not one of our domains.
    NotLocal,
    /// Ours, and resolved.
    Resolved(Resolution),
}

impl Conn {
    /// MAIL: a new transaction, if the queue has room for a message of the largest
    /// size (1.5 × the limit, Postfix's rule).
    pub(crate) fn on_mail(&mut self, from: ReversePath) -> Decision {
        self.discard_spool();
        self.txn = Txn::default();
        let max = self.session.config().limits.max_message_size;
        let needed = max.saturating_add(max / 2);
        match self.shared.queue.free_space() {
            Ok(free) if free >= needed => {}
            Ok(free) => {
                tracing::warn!(
                    "{}: MAIL refused: {free} bytes free for the queue, {needed} needed",
                    self.peer
                );
                return reject(Reject::NoStorage, Reply::insufficient_storage());
            }
            Err(e) => {
                tracing::error!("{}: MAIL refused: cannot check free space: {e}", self.peer);
                return reject(Reject::NoStorage, Reply::insufficient_storage());
            }
        }
        self.txn.from = Some(from);
        Decision::Accept
    }

    /// RCPT: the relay rules of the module docs. An authenticated client's first
    /// RCPT first checks that the login owns the sender (`sender_login_match`).
    pub(crate) async fn on_rcpt(&mut self, to: ForwardPath) -> Decision {
        if let Some(refusal) = self.check_sender().await {
            return refusal;
        }
        let may_relay = self.session.authenticated_user().is_some() || self.trusted();
        let address = match &to {
            ForwardPath::Postmaster => {
                let domain = self.shared.domains.first().cloned();
                format!(
                    "postmaster@{}",
                    domain.unwrap_or_else(|| self.shared.config.hostname.clone())
                )
            }
            ForwardPath::Mailbox(a) => a.to_string(),
        };
        let name = match &to {
            ForwardPath::Postmaster => {
                Some(address.rsplit_once('@').map_or("", |(_, d)| d).to_owned())
            }
            ForwardPath::Mailbox(a) => match a.domain() {
                Domain::Name(name) => Some(name.clone()),
                Domain::Ipv4(_) | Domain::Ipv6(_) => None,
            },
        };
        let lookup = match name {
            Some(domain) => self.lookup(domain, address.clone()).await,
            None => Ok(Lookup::NotLocal),
        };
        let decision = match lookup {
            Err(e) => {
                let message = &e.message;
                tracing::error!(
                    "{}: directory lookup of {address} failed: {message}",
                    self.peer
                );
                reject(Reject::Temporary, lookup_failure(&e))
            }
            Ok(Lookup::NotLocal) => self.relay(&to, address.clone(), may_relay),
            Ok(Lookup::Resolved(_))
                if !may_relay
                    && matches!(&to, ForwardPath::Mailbox(a) if a.has_routing_syntax()) =>
            {
                reject(Reject::RelayDenied, Reply::relay_denied(&to))
            }
            Ok(Lookup::Resolved(Resolution::Deliver(targets))) => {
                for target in targets {
                    self.txn.add(match target {
                        Target::Local(user) => {
                            Recipient::new(user.address, address.clone(), Route::Local)
                        }
                        Target::Remote(remote) => {
                            Recipient::new(remote, address.clone(), Route::Remote)
                        }
                    });
                }
                Decision::Accept
            }
            Ok(Lookup::Resolved(Resolution::Unknown | Resolution::NotLocal)) => {
                reject(Reject::UnknownUser, Reply::user_unknown(&to))
            }
        };
        if matches!(decision, Decision::Accept) {
            self.txn.accepted.push(address);
        }
        tracing::debug!(
            "{}: RCPT {to}: {}",
            self.peer,
            Conn::decision_log(&decision)
        );
        decision
    }

    /// A recipient outside the local domains.
    fn relay(&mut self, to: &ForwardPath, address: String, may_relay: bool) -> Decision {
        if !may_relay || self.shared.config.relay_host.is_none() {
            tracing::info!("{}: relay to {to} denied", self.peer);
            return reject(Reject::RelayDenied, Reply::relay_denied(to));
        }
        self.txn
            .add(Recipient::new(address.clone(), address, Route::Remote));
        Decision::Accept
    }

    /// Whether `domain` is local and, if so, what `address` resolves to. The
    /// directory may block, so this runs on a blocking thread.
    async fn lookup(&self, domain: String, address: String) -> Result<Lookup, LookupFailure> {
        let directory = Arc::clone(&self.shared.directory);
        let configured = self.shared.domains.contains(&domain);
        let task = tokio::task::spawn_blocking(move || {
            if !configured && !directory.is_local_domain(&domain)? {
                return Ok(Lookup::NotLocal);
            }
            directory.resolve(&address).map(Lookup::Resolved)
        });
        match task.await {
            Ok(result) => result.map_err(|e: stoa_directory::Error| LookupFailure {
                message: e.to_string(),
                unavailable: e.is_temporary(),
            }),
            Err(e) => Err(LookupFailure {
                message: e.to_string(),
                unavailable: false,
            }),
        }
    }

    /// DATA: start the spool with our `Received:` field.
    pub(crate) fn on_data(&mut self) -> Decision {
        let mut spool = match self.shared.queue.create_spool() {
            Ok(spool) => spool,
            Err(e) => {
                tracing::error!("{}: cannot create a queue file: {e}", self.peer);
                return reject(Reject::Temporary, Reply::local_error());
            }
        };
        let single = match self.txn.accepted.as_slice() {
            [only] => Some(only.as_str()),
            _ => None,
        };
        let field = headers::received(
            self.session.helo().unwrap_or("unknown"),
            self.peer.ip(),
            &self.session.config().hostname,
            self.session.received_protocol(),
            spool.id(),
            single,
            SystemTime::now(),
        );
        spool.write(field.as_bytes());
        self.txn.spool = Some(spool);
        // RFC 6409 §8.2-8.3: a submission server adds the `Date:` and
        // `Message-ID:` a client left out.
        if self.session.authenticated_user().is_some() {
            self.txn.held = Some(Held::new(&self.session.config().hostname));
        }
        self.data_started = std::time::Instant::now();
        Decision::Accept
    }

    /// The end of the message: check the hop count, make it durable, then `250`.
    pub(crate) async fn on_end(&mut self) -> Decision {
        // A message that ended inside its header section (no body).
        self.txn.release_header(true);
        let Some(spool) = self.txn.spool.take() else {
            return reject(Reject::Temporary, Reply::local_error());
        };
        let hops = headers::count_received(spool.head());
        if hops > self.shared.config.queue.max_hops {
            tracing::info!(
                "{}: message refused: {hops} Received fields (mail loop)",
                self.peer
            );
            self.shared.queue.discard(spool);
            return reject(Reject::Loop, too_many_hops());
        }
        let now = unix_now();
        let sender = match &self.txn.from {
            Some(ReversePath::Mailbox(a)) => a.to_string(),
            Some(ReversePath::Null) | None => String::new(),
        };
        let id = spool.id().to_owned();
        let envelope = Envelope {
            version: envelope::VERSION,
            id: id.clone(),
            sender,
            arrival: now,
            attempts: 0,
            next_try: now,
            client: format!("[{}]", self.peer.ip()),
            recipients: std::mem::take(&mut self.txn.recipients),
        };
        let count = envelope.recipients.len();
        let (queue, size) = (Arc::clone(&self.shared.queue), spool.len());
        let committed = tokio::task::spawn_blocking(move || {
            queue.commit(spool, &envelope)?;
            before_reply()
        })
        .await;
        match committed {
            Ok(Ok(())) => {
                tracing::info!(
                    "{}: queued {id}: {size} bytes from <{}> for {count} recipients",
                    self.peer,
                    self.txn.from.as_ref().map_or(String::new(), |f| f
                        .to_string()
                        .trim_matches(['<', '>'])
                        .to_owned())
                );
                let _ = self.shared.notify.send(id.clone());
                metrics::count_accepted();
                Decision::AcceptWith(Reply::queued(&id))
            }
            Ok(Err(e)) => {
                tracing::error!("{}: cannot queue the message: {e}", self.peer);
                reject(Reject::Temporary, Reply::local_error())
            }
            Err(e) => {
                tracing::error!("{}: queueing task failed: {e}", self.peer);
                reject(Reject::Temporary, Reply::local_error())
            }
        }
    }

    /// AUTH: the directory checks the password, on a blocking thread (argon2),
    /// unless the client's address is past the throttle's limit. Every failure
    /// (unknown user, wrong password, someone else's authorization identity, a
    /// refused address) is the same `535 5.7.8`, counted against the address, and
    /// waits the throttle's delay (`Conn::auth_delay`, which the driver waits out)
    /// before it is sent.
    pub(crate) async fn on_auth(&mut self, credentials: Credentials) -> Decision {
        let Credentials {
            authzid,
            username,
            password,
        } = credentials;
        let ip = self.peer.ip();
        // Counted from here until the check ends: logins sent at once cannot all
        // be checked before the first failure counts.
        let attempt = match self.shared.throttle.begin(ip).await {
            Ok(attempt) => attempt,
            Err(delay) => {
                tracing::info!(
                    "{}: AUTH as {username:?} refused unchecked: too many failures",
                    self.peer
                );
                self.auth_delay = Some(delay);
                return reject(Reject::Throttled, Reply::auth_failed());
            }
        };
        if authzid.is_some_and(|z| !z.is_empty() && z != username) {
            tracing::info!("{}: AUTH as {username:?} for another identity", self.peer);
            return self.auth_failed(attempt);
        }
        match self.shared.verifier.verify(&username, &password).await {
            Ok(Some(user)) => {
                tracing::info!("{}: authenticated as {}", self.peer, user.address);
                attempt.succeeded();
                Decision::Accept
            }
            Ok(None) => {
                tracing::info!("{}: authentication failed for {username:?}", self.peer);
                self.auth_failed(attempt)
            }
            Err(e) => {
                tracing::error!("{}: password check failed: {e}", self.peer);
                reject(Reject::Temporary, temporary_auth_failure())
            }
        }
    }

    /// The refusal of a sender the authenticated user does not own: the address
    /// must resolve (alias, `+detail`) to the login's own mailbox. Checked once per
    /// transaction; the null sender, unauthenticated clients and
    /// `sender_login_match = false` pass.
    async fn check_sender(&mut self) -> Option<Decision> {
        if self.txn.sender_owned || !self.shared.config.sender_login_match {
            return None;
        }
        let login = self.session.authenticated_user()?.to_owned();
        let sender = match &self.txn.from {
            Some(ReversePath::Mailbox(a)) => a.to_string(),
            _ => return None,
        };
        let directory = Arc::clone(&self.shared.directory);
        let (who, from) = (login.clone(), sender.clone());
        let owned = tokio::task::spawn_blocking(move || -> stoa_directory::Result<bool> {
            let Some(user) = directory.lookup(&who)? else {
                return Ok(false);
            };
            Ok(match directory.resolve(&from)? {
                Resolution::Deliver(targets) => targets
                    .iter()
                    .any(|t| matches!(t, Target::Local(u) if u.mailbox == user.mailbox)),
                Resolution::NotLocal | Resolution::Unknown => false,
            })
        })
        .await;
        match owned {
            Ok(Ok(true)) => {
                self.txn.sender_owned = true;
                None
            }
            Ok(Ok(false)) => {
                tracing::info!("{}: {login} may not send as <{sender}>", self.peer);
                Some(reject(Reject::SenderMismatch, sender_not_owned()))
            }
            Ok(Err(e)) => {
                tracing::error!("{}: sender check for {login}: {e}", self.peer);
                Some(reject(Reject::Temporary, Reply::local_error()))
            }
            Err(e) => {
                tracing::error!("{}: sender check task failed: {e}", self.peer);
                Some(reject(Reject::Temporary, Reply::local_error()))
            }
        }
    }

    /// Counts a failed AUTH against the client's address and sets the delay of the
    /// `535` that follows.
    fn auth_failed(&mut self, attempt: Attempt) -> Decision {
        self.auth_delay = Some(attempt.failed(Instant::now()));
        reject(Reject::AuthFailed, Reply::auth_failed())
    }
}

/// `553 5.7.1`: the sender is not the authenticated user's.
fn sender_not_owned() -> Reply {
    Reply::new(
        553,
        EnhancedStatus::new(5, 7, 1),
        "Sender address not owned by the authenticated user",
    )
}

/// Counts a refusal for `reason` and makes it the decision.
fn reject(reason: Reject, reply: Reply) -> Decision {
    metrics::count_rejected(reason);
    Decision::Reject(reply)
}

/// `454 4.7.0`: the password could not be checked (our trouble, not the client's).
fn temporary_auth_failure() -> Reply {
    Reply::new(
        454,
        EnhancedStatus::new(4, 7, 0),
        "Temporary authentication failure",
    )
}

/// The last moment before the `250`: the message is durable. A crash point for the
/// crash tests (`smtp::before_250`).
fn before_reply() -> std::io::Result<()> {
    crate::queue::crash_point!("smtp::before_250");
    Ok(())
}
