//! The embedded directory: a text file under the mail directory, held in memory.
//!
//! Lookups read an in-memory snapshot (hash maps keyed by normalised address), so they
//! cost a hash lookup whatever the number of users. Changes lock the file against
//! other writers, pick up any change another process made, apply the edit to a copy,
//! write the copy atomically (temp file, fsync, rename, fsync of the directory; see
//! *Durability*) and only then publish it: a failed write changes nothing, on disk or
//! in memory. A server that shares the directory with `stoa user …` commands calls
//! [`EmbeddedDirectory::reload_if_changed`] now and then (a `stat`) to see their
//! changes.
//!
//! Why a text file and not an embedded database: the whole directory fits in memory
//! (about 350 MB for 1.5 M users), it must be readable by the server while an admin
//! command changes it (embedded KV stores such as redb allow one process at a time),
//! it loads in a few seconds at that size, and it can be inspected and backed up with
//! ordinary tools. The price is that every change rewrites the file, 1–2 s at
//! 1.5 M users; bulk provisioning goes through [`EmbeddedDirectory::add_users`] to pay
//! it once. Measured with `examples/directory_load.rs` (1.5 M users, default-cost
//! hashes, this 2-core machine with a benchmark running beside it): a 212 MB file,
//! loaded in 2.0–2.8 s into 345 MiB, lookups about 1 µs.
//!
//! # Format
//!
//! A text file, one record per line, fields separated by one space. Every field is
//! printable ASCII without spaces (addresses are dot-atoms, password values have no
//! spaces), so no quoting is needed and a line splits with no allocation:
//!
//! ```text
//! stoa-directory 1
//! next-mailbox 5
//! domain example.com
//! user joe@example.com 1 - {ARGON2ID}$argon2id$v=19$m=19456,t=2,p=1$…$…
//! user ann@example.com 2 store2.example.com -
//! user bob@example.com 3 - {SHA512-CRYPT}$6$…$…
//! user amy@example.com 4 - {PLAIN.BASE64}c2VjcmV0IHdpdGggc3BhY2Vz
//! alias postmaster@example.com joe@example.com ann@example.com
//! end 5
//! ```
//!
//! `user ADDRESS MAILBOX MAILHOST PASSWORD`, with `-` for no mail host (this server) or
//! no password (cannot log in). A password is a `{SCHEME}value` in Dovecot's
//! spelling, the same bytes a Dovecot passwd-file takes ([`crate::scheme`]: argon2id,
//! sha512-crypt, blf-crypt, ssha; plain text as `{PLAIN.BASE64}`, so that any
//! password stays one field). Files written before schemes hold bare argon2 PHC
//! strings (`$argon2id$…`): they are read as `{ARGON2ID}` ones and written back so
//! at the next save. The version line did not change (older versions refuse a
//! file with other schemes at its first such line). The last line counts the
//! records, so a file cut short by anything other than our own writes is refused
//! instead of silently losing users.
//!
//! # Passwords
//!
//! New hashes use [`Options::scheme`] (argon2id by default) at [`Options::cost`]
//! and [`Options::bcrypt_cost`]. Plain text is stored only when
//! [`Options::allow_plain`] says so, and a `{PLAIN}` value verifies only then:
//! without it such a user cannot log in. Hashes are not upgraded to the default
//! scheme when their user logs in: each upgrade would be a whole-file rewrite
//! (1–2 s at 1.5 M users, see above) on the login path, and a login storm after
//! a scheme change would queue thousands of them; `stoa user passwd` changes one.
//!
//! A failed login costs at least what an unknown one costs: an unknown login is
//! checked against a decoy hash of the default scheme, and a wrong password for a
//! user whose value has another scheme is checked against the decoy too.
//!
//! # Durability
//!
//! A save writes the whole file to `entries.txt.tmp`, fsyncs it, renames it over
//! `entries.txt` and fsyncs the directory: a crash at any point leaves either the old
//! file or the new one, and a stale temporary file is simply overwritten by the next
//! save. Writers take an exclusive `flock` on `lock` so that two processes (the server
//! and `stoa user add`) never interleave a read-modify-write.
//!
//! # Permissions
//!
//! The file holds password hashes: it, its temporary file and the lock file are
//! created `0600` and the directory `0700`, whatever the umask. Run by root on a
//! directory owned by another user (a server that dropped its privileges to it),
//! a save gives the new file the directory's owner and group, so that server can
//! still read it.

mod ldif;
mod store;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::address::{domain_of, normalize_address, normalize_domain, without_detail};
use crate::error::{Error, Result};
use crate::password::{PasswordCost, VerifyCache};
use crate::scheme::{self, Scheme};
use crate::{Directory, MailboxId, Resolution, Target, User};

pub use ldif::LdifSummary;
use store::{FileId, Snapshot, UserRecord};

/// How deep aliases may point at aliases before expansion stops.
const MAX_ALIAS_DEPTH: usize = 8;

/// Most targets one address may expand to (Postfix's `virtual_alias_expansion_limit`).
const MAX_TARGETS: usize = 1000;

/// Settings of an [`EmbeddedDirectory`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The scheme of new password hashes. Default argon2id.
    pub scheme: Scheme,
    /// Cost of new argon2id hashes (and of the decoy, when the scheme is argon2id).
    pub cost: PasswordCost,
    /// Cost of new bcrypt (`{BLF-CRYPT}`) hashes. Default
    /// [`scheme::DEFAULT_BCRYPT_COST`].
    pub bcrypt_cost: u32,
    /// Whether plain-text passwords (`{PLAIN}`) may be stored and verify. Default
    /// `false`; for benchmarks only.
    pub allow_plain: bool,
    /// Logins whose last successful check is remembered. Default 65,536: the
    /// SPECmail2001 retry pool of 1.5 M users is ~112,000 users, most of them checking
    /// again within minutes; 0 turns the cache off.
    pub cache_capacity: usize,
    /// How long a remembered success stays valid. Default 15 minutes (Sun's MMP
    /// `AuthCacheTTL 900`).
    pub cache_ttl: Duration,
    /// The subaddress separator: `joe+news@x` is delivered to `joe@x` unless it
    /// exists itself. Default `+`; `None` turns subaddressing off.
    pub subaddress_separator: Option<char>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            scheme: Scheme::default(),
            cost: PasswordCost::default(),
            bcrypt_cost: scheme::DEFAULT_BCRYPT_COST,
            allow_plain: false,
            cache_capacity: 65_536,
            cache_ttl: Duration::from_secs(15 * 60),
            subaddress_separator: Some('+'),
        }
    }
}

/// A user to create with [`EmbeddedDirectory::add_users`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewUser {
    /// The address.
    pub address: String,
    /// A `{SCHEME}value` ([`scheme::hash`]) or a bare argon2 PHC string
    /// ([`crate::password::hash_password`], stored as `{ARGON2ID}`), or `None` for a
    /// user who cannot log in. A plain-text value needs [`Options::allow_plain`].
    pub password_hash: Option<String>,
}

/// The snapshot in use and the file version it came from.
#[derive(Debug)]
struct Current {
    snapshot: Arc<Snapshot>,
    file: Option<FileId>,
}

/// The embedded directory (see the module docs).
#[derive(Debug)]
pub struct EmbeddedDirectory {
    dir: PathBuf,
    options: Options,
    current: RwLock<Current>,
    cache: VerifyCache,
    /// Checked against when the login is unknown, so that it takes as long as a
    /// wrong password: a value of [`Options::scheme`].
    decoy_hash: String,
}

impl EmbeddedDirectory {
    /// Opens the directory stored in `dir` (for instance `MAIL_DIR/directory`),
    /// creating it, empty, if needed.
    pub fn open(dir: &Path, options: Options) -> Result<EmbeddedDirectory> {
        store::create_dir(dir)?;
        if store::current_id(dir)?.is_none() {
            let _lock = store::lock(dir)?;
            if store::current_id(dir)?.is_none() {
                store::save(dir, &Snapshot::default())?;
            }
        }
        let (snapshot, file) = store::load(dir)?;
        let mut secret = [0u8; 16];
        getrandom::fill(&mut secret).map_err(|e| Error::Hashing(e.to_string()))?;
        let decoy: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        let decoy_hash = scheme::hash(&decoy, options.scheme, &hash_cost(&options))?;
        crate::password::release_spare_memory();
        Ok(EmbeddedDirectory {
            dir: dir.to_owned(),
            cache: VerifyCache::new(options.cache_capacity, options.cache_ttl)?,
            decoy_hash,
            options,
            current: RwLock::new(Current {
                snapshot: Arc::new(snapshot),
                file: Some(file),
            }),
        })
    }

    /// The directory's options.
    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The cache of successful password checks.
    pub fn verify_cache(&self) -> &VerifyCache {
        &self.cache
    }

    fn snapshot(&self) -> Arc<Snapshot> {
        let current = self.current.read().unwrap_or_else(|e| e.into_inner());
        Arc::clone(&current.snapshot)
    }

    /// Reloads the file if another process changed it; returns whether it did.
    pub fn reload_if_changed(&self) -> Result<bool> {
        let on_disk = store::current_id(&self.dir)?;
        let known = self.current.read().unwrap_or_else(|e| e.into_inner()).file;
        if on_disk == known {
            return Ok(false);
        }
        let (snapshot, file) = store::load(&self.dir)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Current {
            snapshot: Arc::new(snapshot),
            file: Some(file),
        };
        Ok(true)
    }

    /// Applies `change` to the latest directory and saves it: all or nothing.
    fn edit<R>(&self, change: impl FnOnce(&mut Snapshot) -> Result<R>) -> Result<R> {
        let _lock = store::lock(&self.dir)?;
        self.reload_if_changed()?;
        let mut next = (*self.snapshot()).clone();
        let result = change(&mut next)?;
        let file = store::save(&self.dir, &next)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Current {
            snapshot: Arc::new(next),
            file: Some(file),
        };
        Ok(result)
    }

    /// Adds a local domain.
    pub fn add_domain(&self, domain: &str) -> Result<()> {
        let domain = normalize_domain(domain)?;
        self.edit(|s| {
            if s.domains.insert(domain.clone()) {
                Ok(())
            } else {
                Err(Error::Exists(domain))
            }
        })
    }

    /// Removes a local domain that has no users or aliases left.
    pub fn remove_domain(&self, domain: &str) -> Result<()> {
        let domain = normalize_domain(domain)?;
        self.edit(|s| {
            if !s.domains.contains(&domain) {
                return Err(Error::NotFound(domain));
            }
            let mut names = s.users.keys().chain(s.aliases.keys());
            if names.any(|name| domain_of(name) == domain) {
                return Err(Error::DomainInUse(domain));
            }
            s.domains.remove(&domain);
            Ok(())
        })
    }

    /// A new value of the configured scheme and cost for `password`; refused for
    /// plain text unless allowed.
    pub fn hash(&self, password: &str) -> Result<String> {
        if self.options.scheme == Scheme::Plain && !self.options.allow_plain {
            return Err(Error::PlainNotAllowed);
        }
        scheme::hash(password, self.options.scheme, &hash_cost(&self.options))
    }

    /// Adds a user in a local domain, with a password (hashed here, with the
    /// configured scheme and cost) or none.
    pub fn add_user(&self, address: &str, password: Option<&str>) -> Result<User> {
        let password_hash = password.map(|p| self.hash(p)).transpose()?;
        let new = NewUser {
            address: address.to_owned(),
            password_hash,
        };
        let mut users = self.add_users(std::slice::from_ref(&new))?;
        users.pop().ok_or(Error::NotFound(new.address))
    }

    /// Adds many users in one write (bulk provisioning). All are added or none.
    pub fn add_users(&self, users: &[NewUser]) -> Result<Vec<User>> {
        let mut checked = Vec::with_capacity(users.len());
        for user in users {
            let address = normalize_address(&user.address)?;
            let hash = match &user.password_hash {
                None => None,
                Some(value) => {
                    let stored = scheme::normalize(value)
                        .filter(|v| scheme::is_valid(v))
                        .ok_or_else(|| Error::InvalidHash(address.clone()))?;
                    if scheme::scheme_of(&stored) == Some(Scheme::Plain)
                        && !self.options.allow_plain
                    {
                        return Err(Error::PlainNotAllowed);
                    }
                    Some(stored)
                }
            };
            checked.push((address, hash));
        }
        self.edit(|s| {
            s.users.reserve(checked.len());
            let mut added = Vec::with_capacity(checked.len());
            for (address, hash) in checked {
                let domain = domain_of(&address);
                if !s.domains.contains(domain) {
                    return Err(Error::NotLocalDomain(domain.to_owned()));
                }
                if s.users.contains_key(address.as_str())
                    || s.aliases.contains_key(address.as_str())
                {
                    return Err(Error::Exists(address));
                }
                let record = UserRecord {
                    mailbox: s.next_mailbox,
                    mail_host: None,
                    password: hash.as_deref().map(Into::into),
                };
                s.next_mailbox += 1;
                added.push(to_user(&address, &record));
                s.users.insert(address.into(), record);
            }
            Ok(added)
        })
    }

    /// Removes a user; returns it, so the caller can remove the mailbox too.
    pub fn remove_user(&self, address: &str) -> Result<User> {
        let address = normalize_address(address)?;
        self.edit(|s| match s.users.remove(address.as_str()) {
            Some(record) => Ok(to_user(&address, &record)),
            None => Err(Error::NotFound(address)),
        })
    }

    /// Sets (or, with `None`, removes) a user's password.
    pub fn set_password(&self, address: &str, password: Option<&str>) -> Result<()> {
        let address = normalize_address(address)?;
        let hash = password.map(|p| self.hash(p)).transpose()?;
        self.edit(|s| match s.users.get_mut(address.as_str()) {
            Some(record) => {
                record.password = hash.map(Into::into);
                Ok(())
            }
            None => Err(Error::NotFound(address)),
        })
    }

    /// Sets (or, with `None`, clears) the host that stores a user's mailbox.
    pub fn set_mail_host(&self, address: &str, host: Option<&str>) -> Result<()> {
        let address = normalize_address(address)?;
        let host = host.map(normalize_domain).transpose()?;
        self.edit(|s| match s.users.get_mut(address.as_str()) {
            Some(record) => {
                record.mail_host = host.map(Into::into);
                Ok(())
            }
            None => Err(Error::NotFound(address)),
        })
    }

    /// Adds an alias in a local domain that expands to `targets` (local users, other
    /// aliases, or remote addresses).
    pub fn add_alias(&self, alias: &str, targets: &[&str]) -> Result<()> {
        let alias = normalize_address(alias)?;
        let mut normal = Vec::with_capacity(targets.len());
        for target in targets {
            let target = normalize_address(target)?;
            if target != alias && !normal.contains(&target) {
                normal.push(target);
            }
        }
        if normal.is_empty() {
            return Err(Error::InvalidAlias(alias));
        }
        self.edit(|s| {
            let domain = domain_of(&alias);
            if !s.domains.contains(domain) {
                return Err(Error::NotLocalDomain(domain.to_owned()));
            }
            if s.users.contains_key(alias.as_str()) || s.aliases.contains_key(alias.as_str()) {
                return Err(Error::Exists(alias));
            }
            let targets = normal.into_iter().map(Into::into).collect();
            s.aliases.insert(alias.into(), targets);
            Ok(())
        })
    }

    /// Removes an alias.
    pub fn remove_alias(&self, alias: &str) -> Result<()> {
        let alias = normalize_address(alias)?;
        self.edit(|s| match s.aliases.remove(alias.as_str()) {
            Some(_) => Ok(()),
            None => Err(Error::NotFound(alias)),
        })
    }

    /// Every user, sorted by address.
    pub fn users(&self) -> Vec<User> {
        let snapshot = self.snapshot();
        let mut users: Vec<User> = snapshot.users.iter().map(|(a, r)| to_user(a, r)).collect();
        users.sort_by(|a, b| a.address.cmp(&b.address));
        users
    }

    /// Number of users.
    pub fn user_count(&self) -> usize {
        self.snapshot().users.len()
    }

    /// The local domains, sorted.
    pub fn domains(&self) -> Vec<String> {
        self.snapshot().domains.iter().cloned().collect()
    }

    /// Every alias and its targets, sorted by alias.
    pub fn aliases(&self) -> Vec<(String, Vec<String>)> {
        let snapshot = self.snapshot();
        let mut aliases: Vec<(String, Vec<String>)> = snapshot
            .aliases
            .iter()
            .map(|(a, t)| (a.to_string(), t.iter().map(|t| t.to_string()).collect()))
            .collect();
        aliases.sort();
        aliases
    }

    /// Follows `address` into `out` (see [`Directory::resolve`]).
    fn expand(&self, s: &Snapshot, address: &str, depth: usize, walk: &mut Walk) {
        if depth > MAX_ALIAS_DEPTH
            || walk.targets.len() >= MAX_TARGETS
            || !walk.seen.insert(address.to_owned())
        {
            return;
        }
        if !s.domains.contains(domain_of(address)) {
            walk.targets.push(Target::Remote(address.to_owned()));
        } else if let Some(record) = s.users.get(address) {
            if walk.mailboxes.insert(record.mailbox) {
                walk.targets.push(Target::Local(to_user(address, record)));
            }
        } else if let Some(targets) = s.aliases.get(address) {
            for target in targets {
                self.expand(s, target, depth + 1, walk);
            }
        } else if let Some(base) = self
            .options
            .subaddress_separator
            .and_then(|c| without_detail(address, c))
        {
            self.expand(s, &base, depth, walk);
        }
    }
}

/// The state of one alias expansion.
#[derive(Default)]
struct Walk {
    targets: Vec<Target>,
    seen: HashSet<String>,
    mailboxes: HashSet<u64>,
}

/// The user `login` names, its key and its stored password, if it has one.
fn with_password<'a>(s: &'a Snapshot, login: &str) -> Option<(&'a str, &'a UserRecord, &'a str)> {
    let login = normalize_address(login).ok()?;
    let (key, record) = s.users.get_key_value(login.as_str())?;
    Some((key, record, record.password.as_deref()?))
}

fn to_user(address: &str, record: &UserRecord) -> User {
    User {
        address: address.to_owned(),
        mailbox: MailboxId(record.mailbox),
        mail_host: record.mail_host.as_deref().map(str::to_owned),
    }
}

impl Directory for EmbeddedDirectory {
    fn is_local_domain(&self, domain: &str) -> Result<bool> {
        Ok(normalize_domain(domain).is_ok_and(|d| self.snapshot().domains.contains(&d)))
    }

    fn lookup(&self, address: &str) -> Result<Option<User>> {
        let Ok(address) = normalize_address(address) else {
            return Ok(None);
        };
        let s = self.snapshot();
        if let Some(record) = s.users.get(address.as_str()) {
            return Ok(Some(to_user(&address, record)));
        }
        let base = self
            .options
            .subaddress_separator
            .and_then(|c| without_detail(&address, c));
        Ok(base.and_then(|base| s.users.get(base.as_str()).map(|r| to_user(&base, r))))
    }

    fn resolve(&self, address: &str) -> Result<Resolution> {
        let s = self.snapshot();
        let domain = address.rsplit_once('@').map_or("", |(_, d)| d);
        if !normalize_domain(domain).is_ok_and(|d| s.domains.contains(&d)) {
            return Ok(Resolution::NotLocal);
        }
        let Ok(address) = normalize_address(address) else {
            return Ok(Resolution::Unknown);
        };
        let mut walk = Walk::default();
        self.expand(&s, &address, 0, &mut walk);
        Ok(if walk.targets.is_empty() {
            Resolution::Unknown
        } else {
            Resolution::Deliver(walk.targets)
        })
    }

    fn verify_cached(&self, login: &str, password: &str) -> Option<User> {
        let s = self.snapshot();
        let (login, record, stored) = with_password(&s, login)?;
        self.cache
            .hit(login, password, stored, Instant::now())
            .then(|| to_user(login, record))
    }

    fn verify_password(&self, login: &str, password: &str) -> Result<Option<User>> {
        let s = self.snapshot();
        let Some((login, record, stored)) = with_password(&s, login) else {
            // Same work as a wrong password, same answer.
            let _ = scheme::verify(password, &self.decoy_hash, true);
            return Ok(None);
        };
        let now = Instant::now();
        if self.cache.hit(login, password, stored, now) {
            return Ok(Some(to_user(login, record)));
        }
        if scheme::verify(password, stored, self.options.allow_plain) {
            self.cache.insert(login, password, stored, now);
            return Ok(Some(to_user(login, record)));
        }
        if scheme::scheme_of(stored) != Some(self.options.scheme) {
            // A failure costs at least what an unknown login costs, so a cheaper
            // scheme than the default does not tell existing logins apart.
            let _ = scheme::verify(password, &self.decoy_hash, true);
        }
        Ok(None)
    }
}

/// The costs of new hashes in `options`.
fn hash_cost(options: &Options) -> scheme::Cost {
    scheme::Cost {
        argon2: options.cost,
        bcrypt: options.bcrypt_cost,
    }
}

#[cfg(test)]
mod tests;
