//! The user directory of Stoa's mail server: who has a mailbox, under which
//! addresses, on which host, with which password; which domains are local; which
//! aliases expand to whom.
//!
//! # Layout
//!
//! - [`Directory`]: the trait the SMTP and POP3 servers use; two backends implement it.
//! - [`embedded`]: [`EmbeddedDirectory`], the default backend: one text file under
//!   the mail directory, loaded into memory, rewritten atomically on every change.
//! - [`ldap`]: [`LdapDirectory`], users in an LDAP server (OpenLDAP `slapd`): a
//!   bounded pool of connections with failover, a cache of answers with TTLs,
//!   `userPassword` checked locally ([`scheme`]) or by a bind.
//! - [`scheme`]: the password schemes both backends check (`{ARGON2ID}`,
//!   `{SHA512-CRYPT}`, `{BLF-CRYPT}`, `{SSHA}`, `{PLAIN}`, and LDAP's spellings of
//!   them) and the embedded one makes.
//! - [`password`]: argon2id hashing with a configurable [`PasswordCost`], and the
//!   bounded [`password::VerifyCache`] of successful checks.
//! - [`verifier`]: [`Verifier`], password checks for async servers: remembered successes answered
//!   on the spot, the rest queued in line (first come, first served) for a bounded
//!   number of blocking threads.
//! - [`metrics`]: this process's cache hits and misses and LDAP failures.
//! - [`store_hosts`]: the store hosts the POP3 and IMAP proxies send users to
//!   (`[[mail_host]]`), the proxies' settings for that leg, and where a `mailHost`
//!   serves each protocol.
//! - [`address`]: how addresses and domains are normalised into directory keys.
//!
//! Errors that mean "ask again later" ([`Error::is_temporary`]: no LDAP server
//! answered) are told apart from the rest, so that the servers answer them with a
//! temporary failure and never with "unknown user".
//!
//! # What it does not do
//!
//! No network beyond the LDAP backend's client connections (no server of its own,
//! no TLS to the LDAP server yet), no writes to LDAP (provisioning is the LDAP
//! server's tools' job; [`EmbeddedDirectory::write_ldif`] feeds them), no mail
//! storage (the mailstore owns mailboxes; the directory only hands out their
//! [`MailboxId`]s), no rate limiting of logins (the servers delay failures), no
//! quota.
//!
//! # Mapping to LDAP
//!
//! The types follow the attributes of Sun's messaging schema (mail2001.md §5.3) and
//! OpenLDAP's `misc.schema`: [`User::address`] is `mail`; further addresses of the
//! same user (`mailLocalAddress`) find the same user; [`User::mail_host`] is
//! `mailHost`, the FQDN of the store that holds the mailbox (`None` means this
//! server, which is always the case in the embedded backend); [`MailboxId`] comes
//! from a numeric attribute; passwords are `userPassword` values. The details are
//! in [`ldap`].

pub mod address;
pub mod embedded;
mod error;
pub mod ldap;
pub mod metrics;
pub mod password;
pub mod scheme;
pub mod store_hosts;
pub mod verifier;

use std::fmt;

pub use embedded::{EmbeddedDirectory, Options};
pub use error::{Error, Result};
pub use ldap::{LdapDirectory, LdapOptions};
pub use password::PasswordCost;
pub use scheme::Scheme;
pub use verifier::Verifier;

/// A host name as `mailHost` values, `this_host` and the servers' store-host
/// lists compare it: no surrounding spaces, no trailing dot, lowercase.
pub fn normalize_host(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// The stable identifier of a user's mailbox in the mail store. Never reused: a
/// deleted user's id is not given to a new one, so stale mail cannot reach a stranger.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MailboxId(pub u64);

impl fmt::Display for MailboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A user with a mailbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The primary address, normalised (lowercase); also the login name.
    pub address: String,
    /// The mailbox in the store.
    pub mailbox: MailboxId,
    /// The host that stores the mailbox (LDAP `mailHost`); `None` is this host.
    pub mail_host: Option<String>,
}

/// Where mail for one recipient goes after alias expansion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A local user's mailbox.
    Local(User),
    /// An address outside the local domains (an alias may forward there); relayed.
    Remote(String),
}

/// What [`Directory::resolve`] found for an address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// The domain is not local: the server's relay rules decide.
    NotLocal,
    /// The domain is local but nobody has this address (`550 5.1.1`).
    Unknown,
    /// Deliver to these targets (at least one, no duplicates).
    Deliver(Vec<Target>),
}

/// The directory as the servers see it.
///
/// Calls may block: password checks run argon2 (tens of milliseconds), and a network
/// backend waits for its server. Async servers call them through `spawn_blocking`,
/// and check passwords through a [`Verifier`], which answers remembered successes
/// without a thread and keeps the other checks from filling the blocking pool.
/// Addresses are taken in any case and with an optional trailing dot on the domain;
/// an address the directory cannot hold is simply not found.
pub trait Directory: Send + Sync {
    /// Whether mail for `domain` is accepted here.
    fn is_local_domain(&self, domain: &str) -> Result<bool>;

    /// The user whose address this is, with `user+detail@domain` falling back to
    /// `user@domain`. Aliases are not followed.
    fn lookup(&self, address: &str) -> Result<Option<User>>;

    /// Where mail for `address` goes: users, aliases (followed recursively, loops
    /// cut), subaddresses.
    fn resolve(&self, address: &str) -> Result<Resolution>;

    /// The user, if `login` (a user's address) and `password` are right. An unknown
    /// login and a wrong password give the same answer in about the same time.
    fn verify_password(&self, login: &str, password: &str) -> Result<Option<User>>;

    /// The user, if `login` and `password` are a success this directory remembers
    /// ([`password::VerifyCache`]) and can tell without blocking: no hash run, no
    /// network, a few microseconds. `None` says nothing either way; only
    /// [`Directory::verify_password`] refuses. The default remembers nothing.
    fn verify_cached(&self, login: &str, password: &str) -> Option<User> {
        let _ = (login, password);
        None
    }

    /// How many [`Directory::verify_password`] calls are worth running at once
    /// ([`Verifier`] queues the rest without holding threads). The default, two per
    /// core, keeps every argon2 slot (one per core) busy with the next check
    /// already waiting at it.
    fn concurrent_checks(&self) -> usize {
        2 * verifier::cores()
    }
}
