//! The LMTP server's answers: MAIL starts a transaction, RCPT looks the recipient
//! up (local users only, see the module docs of `lmtp`), DATA starts the message
//! with our `Received:` field, and the end of the message stores it for every
//! accepted recipient, fsynced, before one reply per RCPT is sent.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use stoa_directory::{Resolution, Target, User};
use stoa_smtp_proto::address::Domain;
use stoa_smtp_proto::{Decision, EnhancedStatus, ForwardPath, Reply, ReversePath};

use super::conn::{Conn, Rcpt, Txn};
use crate::delivery::DeliveryError;
use crate::headers;
use crate::policy::{LookupFailure, lookup_failure};
use crate::queue::unix_now;

/// `550 5.1.2`: not an address this store host serves; LMTP never relays.
fn not_here(to: &ForwardPath) -> Reply {
    Reply::new(
        550,
        EnhancedStatus::new(5, 1, 2),
        format!("{to}: Recipient address rejected: not a local address, and LMTP does not relay"),
    )
}

/// `450 4.1.6`: the user's mailbox is on another store host.
fn elsewhere(to: &ForwardPath, host: &str) -> Reply {
    Reply::new(
        450,
        EnhancedStatus::new(4, 1, 6),
        format!("{to}: Recipient address rejected: mailbox is on {host}"),
    )
}

/// What became of one recipient's copy.
fn outcome_reply(address: &str, outcome: Option<&DeliveryError>) -> Decision {
    match outcome {
        None => Decision::AcceptWith(Reply::new(
            250,
            EnhancedStatus::new(2, 0, 0),
            format!("<{address}> Ok: delivered"),
        )),
        Some(DeliveryError::Temporary(_)) => Decision::Reject(Reply::new(
            451,
            EnhancedStatus::new(4, 2, 0),
            format!("<{address}> Error: cannot store the message, try again later"),
        )),
        Some(DeliveryError::Permanent(_)) => Decision::Reject(Reply::new(
            554,
            EnhancedStatus::new(5, 2, 0),
            format!("<{address}> Error: mailbox unavailable"),
        )),
    }
}

impl Conn {
    /// MAIL: a new transaction.
    pub(super) fn on_mail(&mut self, from: ReversePath) -> Decision {
        self.txn = Txn {
            from: Some(from),
            ..Txn::default()
        };
        Decision::Accept
    }

    /// RCPT: a local user (or an alias of local users) of a local domain, whose
    /// mailbox is on this host.
    pub(super) async fn on_rcpt(&mut self, to: ForwardPath) -> Decision {
        let (address, domain) = match &to {
            ForwardPath::Postmaster => {
                let host = self.shared.config.hostname.to_ascii_lowercase();
                (format!("postmaster@{host}"), host)
            }
            ForwardPath::Mailbox(a) => match a.domain() {
                Domain::Name(name) if !a.has_routing_syntax() => (a.to_string(), name.clone()),
                _ => return Decision::Reject(not_here(&to)),
            },
        };
        let directory = Arc::clone(&self.shared.directory);
        let key = address.clone();
        let task = tokio::task::spawn_blocking(move || {
            if !directory.is_local_domain(&domain)? {
                return Ok(Resolution::NotLocal);
            }
            directory.resolve(&key)
        });
        let decision = match task.await {
            Ok(Ok(resolution)) => self.recipient(&to, address, resolution),
            Ok(Err(e)) => {
                tracing::error!("{}: directory lookup of {address} failed: {e}", self.peer);
                Decision::Reject(lookup_failure(&LookupFailure {
                    message: e.to_string(),
                    unavailable: e.is_temporary(),
                }))
            }
            Err(e) => {
                tracing::error!("{}: directory lookup task failed: {e}", self.peer);
                Decision::Reject(lookup_failure(&LookupFailure {
                    message: e.to_string(),
                    unavailable: false,
                }))
            }
        };
        tracing::debug!(
            "{}: LMTP RCPT {to}: {}",
            self.peer,
            Conn::decision_log(&decision)
        );
        decision
    }

    /// The decision on what the directory said about `to`.
    fn recipient(&mut self, to: &ForwardPath, address: String, found: Resolution) -> Decision {
        let targets = match found {
            Resolution::NotLocal => return Decision::Reject(not_here(to)),
            Resolution::Unknown => return Decision::Reject(Reply::user_unknown(to)),
            Resolution::Deliver(targets) => targets,
        };
        let mut users = Vec::with_capacity(targets.len());
        for target in targets {
            match target {
                // An alias forwarding out of the local domains: nothing to forward
                // it with.
                Target::Remote(_) => return Decision::Reject(not_here(to)),
                Target::Local(user) => match self.remote_host(&user) {
                    Some(host) => return Decision::Reject(elsewhere(to, &host)),
                    None => users.push(user),
                },
            }
        }
        self.txn.rcpts.push(Rcpt { address, users });
        Decision::Accept
    }

    /// The host holding `user`'s mailbox when it is not this one (`mailHost`
    /// naming this server's host name counts as here).
    fn remote_host(&self, user: &User) -> Option<String> {
        let host = user.mail_host.as_deref()?;
        let here = host
            .trim_end_matches('.')
            .eq_ignore_ascii_case(self.shared.config.hostname.trim_end_matches('.'));
        (!here).then(|| host.to_owned())
    }

    /// DATA: the message starts with our `Received:` field.
    pub(super) fn on_data(&mut self) -> Decision {
        let n = self.shared.messages.fetch_add(1, Ordering::Relaxed);
        let id = format!("L{:X}{n:05X}", unix_now());
        let single = match self.txn.rcpts.as_slice() {
            [only] => Some(only.address.as_str()),
            _ => None,
        };
        let field = headers::received(
            self.session.helo().unwrap_or("unknown"),
            self.peer.ip(),
            &self.session.config().hostname,
            self.session.received_protocol(),
            &id,
            single,
            SystemTime::now(),
        );
        self.txn.message = field.into_bytes();
        self.data_started = std::time::Instant::now();
        Decision::Accept
    }

    /// The end of the message: one stored copy for every user of every accepted
    /// RCPT, fsynced by the store before it returns; then one decision per RCPT,
    /// in RCPT order.
    pub(super) async fn on_end(&mut self) -> Vec<Decision> {
        let Txn {
            from,
            rcpts,
            message,
        } = std::mem::take(&mut self.txn);
        let users = distinct_users(&rcpts);
        let from = match from {
            Some(ReversePath::Mailbox(a)) => a.to_string(),
            Some(ReversePath::Null) | None => String::new(),
        };
        let (local, size) = (Arc::clone(&self.shared.local), message.len());
        let sender = from.clone();
        let task = tokio::task::spawn_blocking(move || {
            let results = local.deliver(&sender, &message, &users);
            before_reply().map(|()| (users, results))
        });
        let stored = match task.await {
            Ok(Ok(stored)) => stored,
            Ok(Err(e)) => {
                tracing::error!("{}: delivery failed: {e}", self.peer);
                return vec![Decision::Reject(Reply::local_error()); rcpts.len()];
            }
            Err(e) => {
                tracing::error!("{}: delivery task failed: {e}", self.peer);
                return vec![Decision::Reject(Reply::local_error()); rcpts.len()];
            }
        };
        let peer = self.peer;
        let decide = |rcpt: &Rcpt| {
            let failure = worst_failure(rcpt, &stored);
            match &failure {
                None => tracing::info!(
                    "{peer}: LMTP delivered {size} bytes from <{from}> to <{}>",
                    rcpt.address
                ),
                Some(e) => tracing::warn!("{peer}: LMTP <{}>: {e}", rcpt.address),
            }
            outcome_reply(&rcpt.address, failure.as_ref())
        };
        rcpts.iter().map(decide).collect()
    }
}

/// Every user of `rcpts` once (the store links one copy per mailbox), in order.
fn distinct_users(rcpts: &[Rcpt]) -> Vec<User> {
    let mut users: Vec<User> = Vec::new();
    for user in rcpts.iter().flat_map(|r| &r.users) {
        if !users.iter().any(|u| u.mailbox == user.mailbox) {
            users.push(user.clone());
        }
    }
    users
}

/// The failure that decides `rcpt`'s reply: a temporary one before a permanent
/// one (the client retries, and the copies that did arrive are only duplicated),
/// or none when every user of it got the message.
fn worst_failure(
    rcpt: &Rcpt,
    (users, results): &(Vec<User>, Vec<Result<(), DeliveryError>>),
) -> Option<DeliveryError> {
    let mut worst = None;
    for user in &rcpt.users {
        let result = users
            .iter()
            .position(|u| u.mailbox == user.mailbox)
            .and_then(|i| results.get(i));
        let failure = match result {
            Some(Ok(())) => continue,
            Some(Err(e)) => e.clone(),
            None => DeliveryError::Temporary("the store gave no result".into()),
        };
        if matches!(failure, DeliveryError::Temporary(_)) {
            return Some(failure);
        }
        worst = Some(failure);
    }
    worst
}

/// The last moment before the replies: the copies are durable. A crash point
/// for the crash tests (`lmtp::before_reply`).
fn before_reply() -> std::io::Result<()> {
    crate::queue::crash_point!("lmtp::before_reply");
    Ok(())
}
