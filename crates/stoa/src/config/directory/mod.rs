//! `[directory]`: which user directory the mail servers use. The embedded one
//! (the default) lives in the mail directory; its settings here are those of
//! its passwords (the scheme and costs of new hashes, whether plain text is
//! allowed), which `stoa user add`/`passwd` read too. The LDAP one takes the
//! server URLs, the search base, the service account (its password read from
//! `bind_password_file`, never written in the configuration) and the pool,
//! timeout and cache settings of [`stoa_directory::LdapOptions`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use stoa_directory::ldap::AuthMode;
use stoa_directory::scheme::{MAX_BCRYPT_COST, MIN_BCRYPT_COST, Scheme};
use stoa_directory::{EmbeddedDirectory, LdapDirectory, LdapOptions, Options};
use toml::{Table, Value};

use super::Report;

/// Most pooled LDAP connections accepted: slapd serves thousands, but more than the
/// blocking threads that could use them at once (512 in tokio) is a typo.
const MAX_POOL_SIZE: usize = 512;

/// The keys of `[directory]` for the embedded directory (`backend` aside).
pub(crate) const EMBEDDED_KEYS: &[&str] = &[
    "password_scheme",
    "argon2_memory",
    "argon2_iterations",
    "argon2_parallelism",
    "bcrypt_cost",
    "allow_plain_passwords",
];

/// Most argon2 memory accepted: 4 GiB (in KiB), far above any sane cost, low
/// enough to catch a unit typo before a login allocates it.
const MAX_ARGON2_MEMORY_KIB: u32 = 4 << 20;

/// Most argon2 passes or lanes accepted: a typo guard, like the memory's.
const MAX_ARGON2_COUNT: u32 = 64;

/// The keys of `[directory]` for the LDAP directory.
const KEYS: &[&str] = &[
    "backend",
    "urls",
    "base",
    "bind_dn",
    "bind_password_file",
    "this_host",
    "filter",
    "auth",
    "domains",
    "mailbox_attribute",
    "timeout",
    "pool_size",
    "cache_size",
    "cache_ttl",
    "negative_cache_ttl",
];

/// The directory the mail servers use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Directory {
    /// The embedded directory under the mail directory, with its options.
    Embedded(Options),
    /// An LDAP server (boxed: the options are large next to `Embedded`).
    Ldap(Box<LdapOptions>),
}

impl Default for Directory {
    fn default() -> Self {
        Directory::Embedded(Options::default())
    }
}

/// An open user directory, shared by the servers that use it.
pub(crate) type SharedDirectory = Arc<dyn stoa_directory::Directory>;

impl Directory {
    /// Opens it: the embedded one under `mail_dir` (returned again as itself,
    /// for reloads of its file), or the LDAP one.
    pub(crate) fn open(
        self,
        mail_dir: &Path,
    ) -> anyhow::Result<(SharedDirectory, Option<Arc<EmbeddedDirectory>>)> {
        match self {
            Directory::Embedded(options) => {
                let dir = mail_dir.join("directory");
                let embedded = EmbeddedDirectory::open(&dir, options)
                    .with_context(|| format!("cannot open the user directory {}", dir.display()))?;
                let embedded = Arc::new(embedded);
                Ok((embedded.clone(), Some(embedded)))
            }
            Directory::Ldap(options) => {
                let urls = options.urls.join(" ");
                let ldap =
                    LdapDirectory::new(*options).context("cannot set up the LDAP directory")?;
                tracing::info!("user directory: LDAP at {urls}");
                Ok((Arc::new(ldap), None))
            }
        }
    }
}

/// `[directory]` as read, before the password file is read.
#[derive(Debug)]
pub(super) enum Draft {
    /// The embedded directory and its options.
    Embedded(Options),
    /// The LDAP directory, its service account's password still in its file
    /// (boxed: the options are large next to the embedded ones).
    Ldap {
        options: Box<LdapOptions>,
        password_file: Option<PathBuf>,
    },
}

/// Reads `[directory]`, if present; `None` means the embedded directory with its
/// defaults. Relative paths are relative to the file's directory `base`.
pub(super) fn read_table(file: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    const P: &str = "directory.";
    let t = r.table(file, "", "directory")?;
    let all: Vec<&str> = KEYS.iter().chain(EMBEDDED_KEYS).copied().collect();
    r.known_keys(t, P, &all);
    match r.string(t, P, "backend").as_deref() {
        None | Some("embedded") => {
            if let Some(key) = t
                .keys()
                .find(|k| *k != "backend" && KEYS.contains(&k.as_str()))
            {
                r.warnings
                    .push(format!("{P}{key}: ignored by the embedded directory"));
            }
            return Some(Draft::Embedded(read_embedded(t, r)));
        }
        Some("ldap") => {}
        Some(other) => {
            r.errors.push(format!(
                "{P}backend: unknown backend {other:?} (supported: \"embedded\", \"ldap\")"
            ));
            return None;
        }
    }
    if let Some(key) = t.keys().find(|k| EMBEDDED_KEYS.contains(&k.as_str())) {
        r.warnings.push(format!(
            "{P}{key}: ignored by the LDAP directory (it makes no hashes, and never \
             accepts plain-text passwords)"
        ));
    }
    let mut o = LdapOptions {
        urls: r.strings(t, P, "urls"),
        domains: r.strings(t, P, "domains"),
        ..LdapOptions::default()
    };
    r.string_into(t, P, "base", &mut o.base);
    o.bind_dn = r.string(t, P, "bind_dn");
    o.this_host = r.string(t, P, "this_host");
    r.string_into(t, P, "filter", &mut o.filter);
    r.string_into(t, P, "mailbox_attribute", &mut o.mailbox_attribute);
    r.parsed(t, P, "auth", parse_auth, &mut o.auth);
    r.duration(t, P, "timeout", &mut o.timeout);
    r.integer_into(t, P, "pool_size", &mut o.pool_size);
    r.integer_into(t, P, "cache_size", &mut o.cache_capacity);
    r.duration(t, P, "cache_ttl", &mut o.cache_ttl);
    r.duration(t, P, "negative_cache_ttl", &mut o.negative_cache_ttl);
    let password_file = r.string(t, P, "bind_password_file").map(|f| match base {
        Some(base) if Path::new(&f).is_relative() => base.join(f),
        _ => PathBuf::from(f),
    });
    check(&o, password_file.is_some(), r);
    Some(Draft::Ldap {
        options: Box::new(o),
        password_file,
    })
}

impl Draft {
    /// The file the service account's password is read from, if any.
    pub(super) fn password_file(&self) -> Option<&Path> {
        match self {
            Draft::Ldap { password_file, .. } => password_file.as_deref(),
            Draft::Embedded(_) => None,
        }
    }
}

/// The embedded directory's keys: its passwords' scheme and costs.
fn read_embedded(t: &Table, r: &mut Report) -> Options {
    const P: &str = "directory.";
    let mut o = Options::default();
    r.parsed(t, P, "password_scheme", parse_scheme, &mut o.scheme);
    let mut memory_bytes = u64::from(o.cost.memory_kib) * 1024;
    r.size(t, P, "argon2_memory", &mut memory_bytes);
    match u32::try_from(memory_bytes / 1024) {
        Ok(kib) if memory_bytes.is_multiple_of(1024) && kib <= MAX_ARGON2_MEMORY_KIB => {
            o.cost.memory_kib = kib;
        }
        _ => r.errors.push(format!(
            "{P}argon2_memory: {memory_bytes} bytes: must be whole KiB, at most 4GiB"
        )),
    }
    r.integer_into(t, P, "argon2_iterations", &mut o.cost.iterations);
    r.integer_into(t, P, "argon2_parallelism", &mut o.cost.parallelism);
    r.integer_into(t, P, "bcrypt_cost", &mut o.bcrypt_cost);
    match t.get("allow_plain_passwords") {
        None => {}
        Some(Value::Boolean(b)) => o.allow_plain = *b,
        Some(other) => r.errors.push(format!(
            "{P}allow_plain_passwords: expected true or false, found {other}"
        )),
    }
    let c = o.cost;
    r.check(
        (1..=MAX_ARGON2_COUNT).contains(&c.iterations),
        &format!("{P}argon2_iterations: must be 1 to {MAX_ARGON2_COUNT}"),
    );
    r.check(
        (1..=MAX_ARGON2_COUNT).contains(&c.parallelism),
        &format!("{P}argon2_parallelism: must be 1 to {MAX_ARGON2_COUNT}"),
    );
    r.check(
        c.memory_kib >= 8 * c.parallelism,
        &format!("{P}argon2_memory: at least 8KiB per lane (argon2_parallelism)"),
    );
    r.check(
        (MIN_BCRYPT_COST..=MAX_BCRYPT_COST).contains(&o.bcrypt_cost),
        &format!("{P}bcrypt_cost: must be {MIN_BCRYPT_COST} to {MAX_BCRYPT_COST}"),
    );
    r.check(
        o.scheme != Scheme::Plain || o.allow_plain,
        &format!(
            "{P}password_scheme: \"plain\" stores passwords as they are: only with \
             allow_plain_passwords = true (for benchmarks)"
        ),
    );
    if o.allow_plain {
        r.warnings.push(format!(
            "{P}allow_plain_passwords: plain-text passwords verify: for benchmarks only"
        ));
    }
    o
}

/// A scheme by name, in any case.
pub(crate) fn parse_scheme(text: &str) -> Result<Scheme, String> {
    text.parse::<Scheme>().map_err(|e| e.to_string())
}

fn parse_auth(text: &str) -> Result<AuthMode, String> {
    match text {
        "local" => Ok(AuthMode::Local),
        "bind" => Ok(AuthMode::Bind),
        other => Err(format!(
            "unknown mode {other:?} (supported: \"local\", \"bind\")"
        )),
    }
}

/// Every problem with the LDAP settings.
fn check(o: &LdapOptions, has_password_file: bool, r: &mut Report) {
    const P: &str = "directory.";
    r.check(
        !o.urls.is_empty(),
        &format!("{P}urls: missing: give at least one ldap:// URL"),
    );
    for url in &o.urls {
        r.check(
            url.starts_with("ldap://") || url.starts_with("ldapi://"),
            &format!("{P}urls: {url:?}: expected ldap://HOST:PORT or ldapi:// (no TLS support)"),
        );
    }
    r.check(
        !o.base.is_empty(),
        &format!("{P}base: missing: the search base DN"),
    );
    r.check(
        o.filter.contains("%s") && stoa_directory::ldap::filter_is_valid(&o.filter),
        &format!("{P}filter: {:?} is not an LDAP filter with %s", o.filter),
    );
    r.check(
        o.bind_dn.is_some() || !has_password_file,
        &format!("{P}bind_password_file: given without bind_dn"),
    );
    r.check(
        (1..=MAX_POOL_SIZE).contains(&o.pool_size),
        &format!("{P}pool_size: must be 1 to {MAX_POOL_SIZE}"),
    );
    r.nonzero(P, &[("timeout", o.timeout)]);
    if o.this_host.is_none() {
        r.warnings.push(format!(
            "{P}this_host: not set: every user with a mailHost is taken to live on another host"
        ));
    }
}

/// The directory, with the service account's password read (through `read`, so
/// tests need no files) from its file, trailing newline removed.
pub(super) fn finish(
    draft: Option<Draft>,
    read: &impl Fn(&Path) -> std::io::Result<String>,
    r: &mut Report,
) -> Directory {
    let (mut options, password_file) = match draft {
        None => return Directory::default(),
        Some(Draft::Embedded(options)) => return Directory::Embedded(options),
        Some(Draft::Ldap {
            options,
            password_file,
        }) => (options, password_file),
    };
    if let Some(file) = password_file {
        match read(&file) {
            Ok(text) => options.bind_password = text.trim_end_matches(['\r', '\n']).to_owned(),
            Err(e) => r.errors.push(format!(
                "directory.bind_password_file: {}: {e}",
                file.display()
            )),
        }
    }
    Directory::Ldap(options)
}

#[cfg(test)]
mod tests;
