//! The LDAP directory: users in an OpenLDAP (or any LDAPv3) server, found with a
//! configurable filter, passwords checked here or by a bind.
//!
//! # Entries
//!
//! A user is an `inetOrgPerson` + `inetLocalMailRecipient` entry (OpenLDAP
//! `misc.schema`) under [`LdapOptions::base`]:
//!
//! | attribute | becomes |
//! |---|---|
//! | `mail` | [`User::address`] (the searched address when absent) |
//! | `mailLocalAddress` | aliases: the default filter finds the user by them too |
//! | `mailHost` | [`User::mail_host`]; absent or equal to [`LdapOptions::this_host`]: `None` |
//! | `employeeNumber` ([`LdapOptions::mailbox_attribute`]) | [`MailboxId`] |
//! | `userPassword` | checked by [`scheme`] (`{SSHA}`, `{CRYPT}$6$`/`$2b$`, `{ARGON2}`, and Dovecot's `{SHA512-CRYPT}`, `{BLF-CRYPT}`, `{ARGON2ID}`; never plain text) |
//!
//! Without a mailbox attribute the id is derived from the entry's `entryUUID` (a
//! 63-bit hash with the top bit set, so it never meets the embedded directory's
//! small sequential numbers); it survives renames but not a delete and re-add.
//! An address that matches two entries is treated as unknown: delivering to either
//! could give one person's mail to another.
//!
//! # Local domains
//!
//! With [`LdapOptions::domains`] set, exactly those. Otherwise a domain is local
//! when the filter, with every `%s` replaced by `*@domain`, finds an entry; the
//! answer is cached like an address.
//!
//! # Failures
//!
//! When no server answers (refused, timed out, the pool exhausted), every call
//! returns [`Error::Unavailable`], which the servers answer with a temporary
//! failure; nothing is reported as "unknown user" and errors are not cached, so the
//! first call after a server returns uses it: a failed connection is dropped with
//! every idle one and the call runs once more on a new one, trying the URLs in order.
//!
//! # Timing
//!
//! An unknown login costs one argon2 run at the default cost (a decoy hash); so
//! does a wrong password for a user whose hashes are not argon2 ones, on top of
//! the cheaper check, so that the time of a failure tells little about whether
//! the login exists. In bind mode an unknown login costs a
//! bind to a DN that does not exist, one round trip like a wrong password.

mod cache;
mod options;
mod pool;
/// The password schemes, shared with the embedded directory (once this module's
/// own; the path stays for callers of [`scheme::ssha`]).
pub use crate::scheme;

use std::sync::Arc;
use std::time::Instant;

use blake2::{Blake2b512, Digest};
use ldap3::{LdapConn, LdapError, Scope, SearchEntry, SearchOptions, SearchResult, ldap_escape};

use crate::address::{normalize_address, normalize_domain, without_detail};
use crate::error::{Error, Result};
use crate::normalize_host;
use crate::password::{self, PasswordCost, VerifyCache};
use crate::{Directory, MailboxId, Resolution, Target, User};

use cache::TtlCache;
pub use options::{
    AuthMode, DEFAULT_CACHE_CAPACITY, DEFAULT_CACHE_TTL, DEFAULT_FILTER, DEFAULT_MAILBOX_ATTRIBUTE,
    DEFAULT_NEGATIVE_CACHE_TTL, DEFAULT_POOL_SIZE, DEFAULT_TIMEOUT, LdapOptions,
};
use pool::Pool;

/// LDAP result code 4: more entries than the size limit; the ones sent are valid.
const RC_SIZE_LIMIT_EXCEEDED: u32 = 4;
/// LDAP result code 49: wrong DN or password in a bind.
const RC_INVALID_CREDENTIALS: u32 = 49;
/// Entries asked for per user search: two, to tell one match from an ambiguous one.
const USER_SIZE_LIMIT: i32 = 2;

/// A user entry as read from the directory.
#[derive(Debug)]
struct Found {
    dn: String,
    user: User,
    passwords: Vec<String>,
}

/// The LDAP directory (see the module docs).
#[derive(Debug)]
pub struct LdapDirectory {
    options: LdapOptions,
    pool: Pool,
    users: TtlCache<Option<Arc<Found>>>,
    domains: TtlCache<bool>,
    verified: VerifyCache,
    decoy_hash: String,
    this_host: Option<String>,
}

impl LdapDirectory {
    /// A directory with these settings. Connects lazily: a server that is down now
    /// gives temporary failures until it answers, not an error here.
    pub fn new(options: LdapOptions) -> Result<LdapDirectory> {
        check_options(&options)?;
        let (ttl, negative) = (options.cache_ttl, options.negative_cache_ttl);
        let mut secret = [0u8; 16];
        getrandom::fill(&mut secret).map_err(|e| Error::Hashing(e.to_string()))?;
        let decoy: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let decoy_hash = password::hash_password(&decoy, &PasswordCost::default())?;
        password::release_spare_memory();
        Ok(LdapDirectory {
            pool: Pool::new(&options),
            users: TtlCache::new(options.cache_capacity, ttl, negative),
            domains: TtlCache::new(options.cache_capacity, ttl, negative),
            verified: VerifyCache::new(options.cache_capacity, ttl)?,
            decoy_hash,
            this_host: options.this_host.as_deref().map(normalize_host),
            options,
        })
    }

    /// The settings.
    pub fn options(&self) -> &LdapOptions {
        &self.options
    }

    /// Connections open to the directory now (at most [`LdapOptions::pool_size`]).
    pub fn connections(&self) -> usize {
        self.pool.open()
    }

    /// The user entry for an exact (normalised) address, from the cache or a search.
    fn find(&self, address: &str) -> Result<Option<Arc<Found>>> {
        match self.users.get(address, Instant::now()) {
            Some(found) => Ok(found),
            None => self.refresh(address),
        }
    }

    /// The user entry for an exact (normalised) address, searched and cached.
    fn refresh(&self, address: &str) -> Result<Option<Arc<Found>>> {
        let found = self.search_user(address)?.map(Arc::new);
        self.users
            .put(address, found.clone(), found.is_some(), Instant::now());
        Ok(found)
    }

    /// The entry for `login`, or for `user@domain` when `login` is `user+x@domain`.
    fn find_with_detail(&self, address: &str) -> Result<Option<Arc<Found>>> {
        let Ok(address) = normalize_address(address) else {
            return Ok(None);
        };
        if let Some(found) = self.find(&address)? {
            return Ok(Some(found));
        }
        match self
            .options
            .subaddress_separator
            .and_then(|c| without_detail(&address, c))
        {
            Some(base) => self.find(&base),
            None => Ok(None),
        }
    }

    fn search_user(&self, address: &str) -> Result<Option<Found>> {
        let filter = self.options.filter.replace("%s", &ldap_escape(address));
        let mut attrs = vec![
            "mail",
            "mailHost",
            "entryUUID",
            self.options.mailbox_attribute.as_str(),
        ];
        if self.options.auth == AuthMode::Local {
            attrs.push("userPassword");
        }
        let mut entries = self.search(&filter, &attrs, USER_SIZE_LIMIT)?;
        if entries.len() != 1 {
            return Ok(None);
        }
        Ok(entries.pop().map(|entry| self.to_found(entry, address)))
    }

    /// A subtree search under the base, at most `limit` entries.
    fn search(&self, filter: &str, attrs: &[&str], limit: i32) -> Result<Vec<SearchEntry>> {
        let base = self.options.base.as_str();
        let entries = self.pool.run(|conn| {
            let SearchResult(entries, result) = conn
                .with_search_options(SearchOptions::new().sizelimit(limit))
                .search(base, Scope::Subtree, filter, attrs)?;
            if result.rc != 0 && result.rc != RC_SIZE_LIMIT_EXCEEDED {
                return Err(LdapError::from(result));
            }
            Ok(entries)
        })?;
        Ok(entries.into_iter().map(SearchEntry::construct).collect())
    }

    fn to_found(&self, entry: SearchEntry, searched: &str) -> Found {
        let first = |name: &str| values(&entry, name).and_then(|v| v.first());
        let address = first("mail")
            .and_then(|mail| normalize_address(mail).ok())
            .unwrap_or_else(|| searched.to_owned());
        let mailbox = first(&self.options.mailbox_attribute)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| derived_mailbox(first("entryUUID").unwrap_or(&entry.dn)));
        let mail_host = first("mailHost")
            .map(|h| normalize_host(h))
            .filter(|h| !h.is_empty() && Some(h) != self.this_host.as_ref());
        let passwords = values(&entry, "userPassword").cloned().unwrap_or_default();
        Found {
            user: User {
                address,
                mailbox: MailboxId(mailbox),
                mail_host,
            },
            dn: entry.dn,
            passwords,
        }
    }

    /// Whether some entry has an address in `domain` (see "Local domains").
    fn domain_has_entries(&self, domain: &str) -> Result<bool> {
        let now = Instant::now();
        if let Some(local) = self.domains.get(domain, now) {
            return Ok(local);
        }
        let pattern = format!("*@{}", ldap_escape(domain));
        let filter = self.options.filter.replace("%s", &pattern);
        let local = !self.search(&filter, &["1.1"], 1)?.is_empty();
        self.domains.put(domain, local, local, now);
        Ok(local)
    }

    /// A local check of `password` against the entry's `userPassword` values.
    /// Whether a success of `password` for `found` is remembered, under the keys
    /// `verify_local` (each `userPassword` value) and `verify_bind` (the DN) insert.
    fn remembered(&self, found: &Found, password: &str, now: Instant) -> bool {
        let address = &found.user.address;
        match self.options.auth {
            AuthMode::Local => found
                .passwords
                .iter()
                .any(|v| self.verified.hit(address, password, v, now)),
            AuthMode::Bind => {
                !password.is_empty() && self.verified.hit(address, password, &found.dn, now)
            }
        }
    }

    fn verify_local(&self, login: &str, password: &str, found: &Found) -> bool {
        let now = Instant::now();
        if self.remembered(found, password, now) {
            return true;
        }
        let mut argon2_checked = false;
        for value in found.passwords.iter() {
            let Some(scheme) = scheme::scheme_of(value) else {
                continue;
            };
            argon2_checked |= scheme == scheme::Scheme::Argon2id;
            // Plain text never: an LDAP value without a hash is not a benchmark's.
            if scheme::verify(password, value, false) {
                self.verified.insert(login, password, value, now);
                return true;
            }
        }
        if !argon2_checked {
            // A failure costs at least what an unknown login costs (the decoy), so
            // a cheap scheme ({SSHA}) does not tell existing logins apart.
            let _ = password::verify_password("", password, &self.decoy_hash);
        }
        false
    }

    /// A check by binding as `dn`; the connection binds back as the service account.
    fn verify_bind(&self, login: &str, password: &str, dn: &str) -> Result<bool> {
        let now = Instant::now();
        if password.is_empty() {
            // An empty password is an unauthenticated bind (RFC 4513 §5.1.2): it
            // "succeeds" for any DN.
            return Ok(false);
        }
        if self.verified.hit(login, password, dn, now) {
            return Ok(true);
        }
        let (service_dn, service_password) = self.pool.service_credentials();
        let timeout = self.pool.timeout();
        let ok = self.pool.run(|conn: &mut LdapConn| {
            let result = conn.simple_bind(dn, password)?;
            if result.rc != 0 && result.rc != RC_INVALID_CREDENTIALS {
                return Err(LdapError::from(result));
            }
            conn.with_timeout(timeout)
                .simple_bind(service_dn, service_password)?
                .success()?;
            Ok(result.rc == 0)
        })?;
        if ok {
            self.verified.insert(login, password, dn, now);
        }
        Ok(ok)
    }
}

impl Directory for LdapDirectory {
    fn is_local_domain(&self, domain: &str) -> Result<bool> {
        let Ok(domain) = normalize_domain(domain) else {
            return Ok(false);
        };
        if !self.options.domains.is_empty() {
            return Ok(self
                .options
                .domains
                .iter()
                .any(|d| normalize_host(d) == domain));
        }
        self.domain_has_entries(&domain)
    }

    fn lookup(&self, address: &str) -> Result<Option<User>> {
        Ok(self.find_with_detail(address)?.map(|f| f.user.clone()))
    }

    fn resolve(&self, address: &str) -> Result<Resolution> {
        let domain = address.rsplit_once('@').map_or("", |(_, d)| d);
        if !self.is_local_domain(domain)? {
            return Ok(Resolution::NotLocal);
        }
        Ok(match self.lookup(address)? {
            Some(user) => Resolution::Deliver(vec![Target::Local(user)]),
            None => Resolution::Unknown,
        })
    }

    /// A remembered success against a remembered entry (see `remembered`).
    fn verify_cached(&self, login: &str, password: &str) -> Option<User> {
        let login = normalize_address(login).ok()?;
        let now = Instant::now();
        let found = self.users.get(&login, now)??;
        self.remembered(&found, password, now)
            .then(|| found.user.clone())
    }

    /// The LDAP connections, and a core's worth of hashing besides.
    fn concurrent_checks(&self) -> usize {
        self.options.pool_size + crate::verifier::cores()
    }

    fn verify_password(&self, login: &str, password: &str) -> Result<Option<User>> {
        let Ok(login) = normalize_address(login) else {
            return self.check(login, password, None);
        };
        let cached = self.users.get(&login, Instant::now());
        let found = match &cached {
            Some(found) => found.clone(),
            None => self.refresh(&login)?,
        };
        let user = self.check(&login, password, found.as_deref())?;
        if user.is_some() || cached.is_none() {
            return Ok(user);
        }
        // A failure against a cached entry may come from a password changed, or a
        // user added, since: one more look at the directory, and a second check
        // only if the entry did change.
        let fresh = self.refresh(&login)?;
        let key = |f: &Option<Arc<Found>>| f.as_ref().map(|f| (f.dn.clone(), f.passwords.clone()));
        if key(&fresh) == key(&found) {
            return Ok(None);
        }
        self.check(&login, password, fresh.as_deref())
    }
}

impl LdapDirectory {
    /// The password check against one entry, or the decoy's work when there is
    /// none (see "Timing").
    fn check(&self, login: &str, password: &str, found: Option<&Found>) -> Result<Option<User>> {
        let Some(found) = found else {
            match self.options.auth {
                AuthMode::Local => {
                    let _ = password::verify_password("", password, &self.decoy_hash);
                }
                AuthMode::Bind => {
                    let decoy = format!("cn=stoa-decoy,{}", self.options.base);
                    let _ = self.verify_bind(login, password, &decoy)?;
                }
            }
            return Ok(None);
        };
        let ok = match self.options.auth {
            AuthMode::Local => self.verify_local(&found.user.address, password, found),
            AuthMode::Bind => self.verify_bind(&found.user.address, password, &found.dn)?,
        };
        Ok(ok.then(|| found.user.clone()))
    }
}

/// The values of attribute `name` (attribute names are case-insensitive).
fn values<'a>(entry: &'a SearchEntry, name: &str) -> Option<&'a Vec<String>> {
    entry
        .attrs
        .iter()
        .find(|(key, _)| key.eq_ignore_ascii_case(name))
        .map(|(_, v)| v)
}

/// A mailbox number from a stable entry identifier (see the module docs).
fn derived_mailbox(id: &str) -> u64 {
    let digest = Blake2b512::digest(id.as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(bytes) | (1 << 63)
}

/// Whether `filter` is an LDAP filter once every `%s` is filled in (for
/// configuration checks).
pub fn filter_is_valid(filter: &str) -> bool {
    ldap3::parse_filter(filter.replace("%s", "x")).is_ok()
}

fn check_options(options: &LdapOptions) -> Result<()> {
    let mut problems = Vec::new();
    if options.urls.is_empty() {
        problems.push("no LDAP URL".to_owned());
    }
    if !options.filter.contains("%s") {
        problems.push(format!("filter {:?} has no %s", options.filter));
    } else if !filter_is_valid(&options.filter) {
        problems.push(format!("filter {:?} is not an LDAP filter", options.filter));
    }
    if options.mailbox_attribute.is_empty() {
        problems.push("empty mailbox attribute".to_owned());
    }
    match problems.is_empty() {
        true => Ok(()),
        false => Err(Error::InvalidConfig(problems.join("; "))),
    }
}

#[cfg(test)]
mod tests;
