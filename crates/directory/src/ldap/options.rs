//! The settings of an [`LdapDirectory`](super::LdapDirectory).

use std::time::Duration;

/// The lookup filter when none is configured: a user is found by the primary
/// address or by any alias (Sun's `(|(mail=%s)(mailAlternateAddress=%s))`, with
/// OpenLDAP `misc.schema`'s alias attribute).
pub const DEFAULT_FILTER: &str = "(|(mail=%s)(mailLocalAddress=%s))";

/// The attribute holding the user's [`MailboxId`](crate::MailboxId) when none is
/// configured. `employeeNumber` is a single-valued attribute `inetOrgPerson`
/// already allows, so no extra schema is needed; `stoa user export-ldif` writes the
/// embedded directory's mailbox numbers there, so moved users keep their mail.
pub const DEFAULT_MAILBOX_ATTRIBUTE: &str = "employeeNumber";

/// How long one LDAP operation (connect, bind, search) may take before the server
/// counts as not answering. A loopback or LAN directory answers in milliseconds;
/// 5 s is long enough for a busy one and short enough that an SMTP client's RCPT
/// timeout (5 minutes, RFC 5321 §4.5.3.2) is never reached even with two URLs.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections kept open to the directory. Each blocking caller holds one for one
/// operation; 8 covers the blocking threads a 2–8 core host runs at once for
/// logins and RCPTs, and slapd handles thousands.
pub const DEFAULT_POOL_SIZE: usize = 8;

/// Addresses remembered (found or not). 65,536 like the embedded directory's
/// password cache: the SPECmail2001 retry pool of 1.5 M users is ~112,000 users.
pub const DEFAULT_CACHE_CAPACITY: usize = 65_536;

/// How long a found user is remembered: 5 minutes, a third of Sun's MMP
/// `LdapCacheTTL 900`, since a moved mailbox (`mailHost` changed) must be seen
/// soon by the MTA.
pub const DEFAULT_CACHE_TTL: Duration = Duration::from_secs(5 * 60);

/// How long "no such address" is remembered: 1 minute, so a new user receives
/// mail soon after being added while a burst of mail to unknown addresses still
/// costs one search per address.
pub const DEFAULT_NEGATIVE_CACHE_TTL: Duration = Duration::from_secs(60);

/// How passwords are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AuthMode {
    /// Read `userPassword` and verify it here (`{SSHA}`, `{CRYPT}`, `{ARGON2}`); the
    /// service account must be allowed to read the attribute.
    #[default]
    Local,
    /// Bind as the user's DN with the password: the directory checks it (any scheme
    /// it knows, its own lockout policy), and `userPassword` never leaves it.
    Bind,
}

/// Settings of an [`LdapDirectory`](super::LdapDirectory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LdapOptions {
    /// Server URLs (`ldap://host:port`), tried in order for every new connection:
    /// the first that answers is used (failover).
    pub urls: Vec<String>,
    /// The search base (`dc=example,dc=com`); users are searched in its subtree.
    pub base: String,
    /// The service account to bind as; `None` searches anonymously.
    pub bind_dn: Option<String>,
    /// The service account's password.
    pub bind_password: String,
    /// The `mailHost` value that means "this host": such users, and users without
    /// `mailHost`, get [`User::mail_host`](crate::User::mail_host) `None`.
    pub this_host: Option<String>,
    /// The search filter; every `%s` becomes the address, escaped (RFC 4515).
    pub filter: String,
    /// The attribute holding the mailbox number (see [`DEFAULT_MAILBOX_ATTRIBUTE`]).
    pub mailbox_attribute: String,
    /// How passwords are checked.
    pub auth: AuthMode,
    /// The local domains. Empty: a domain is local when some entry has an address
    /// in it (one search, cached like an address).
    pub domains: Vec<String>,
    /// Limit on each connect, bind and search.
    pub timeout: Duration,
    /// Most connections open at once; a caller waits (up to `timeout`) for one.
    pub pool_size: usize,
    /// Addresses and domains remembered; 0 turns the cache off.
    pub cache_capacity: usize,
    /// How long a found user or local domain is remembered.
    pub cache_ttl: Duration,
    /// How long an unknown address or domain is remembered.
    pub negative_cache_ttl: Duration,
    /// The subaddress separator (`joe+news@x` → `joe@x`); `None` turns it off.
    pub subaddress_separator: Option<char>,
}

impl Default for LdapOptions {
    fn default() -> Self {
        LdapOptions {
            urls: Vec::new(),
            base: String::new(),
            bind_dn: None,
            bind_password: String::new(),
            this_host: None,
            filter: DEFAULT_FILTER.to_owned(),
            mailbox_attribute: DEFAULT_MAILBOX_ATTRIBUTE.to_owned(),
            auth: AuthMode::Local,
            domains: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            pool_size: DEFAULT_POOL_SIZE,
            cache_capacity: DEFAULT_CACHE_CAPACITY,
            cache_ttl: DEFAULT_CACHE_TTL,
            negative_cache_ttl: DEFAULT_NEGATIVE_CACHE_TTL,
            subaddress_separator: Some('+'),
        }
    }
}
