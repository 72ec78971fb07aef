//! `[directory]`: which user directory the mail servers use. The embedded one
//! (the default) lives in the mail directory and has no settings here; the LDAP
//! one takes the server URLs, the search base, the service account (its password
//! read from `bind_password_file`, never written in the configuration) and the
//! pool, timeout and cache settings of [`stoa_directory::LdapOptions`].

use std::path::{Path, PathBuf};

use stoa_directory::LdapOptions;
use stoa_directory::ldap::AuthMode;
use toml::Table;

use super::Report;

/// Most pooled LDAP connections accepted: slapd serves thousands, but more than the
/// blocking threads that could use them at once (512 in tokio) is a typo.
const MAX_POOL_SIZE: usize = 512;

/// The keys of `[directory]`.
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
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Directory {
    /// The embedded directory under the mail directory.
    #[default]
    Embedded,
    /// An LDAP server (boxed: the options are large next to `Embedded`).
    Ldap(Box<LdapOptions>),
}

/// `[directory]` as read, before the password file is read.
#[derive(Debug)]
pub(super) struct Draft {
    options: LdapOptions,
    password_file: Option<PathBuf>,
}

/// Reads `[directory]`, if present; `None` means the embedded directory. Relative
/// paths are relative to the file's directory `base`.
pub(super) fn read_table(file: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    const P: &str = "directory.";
    let t = r.table(file, "", "directory")?;
    r.known_keys(t, P, KEYS);
    match r.string(t, P, "backend").as_deref() {
        None | Some("embedded") => {
            if let Some(key) = t
                .keys()
                .find(|k| *k != "backend" && KEYS.contains(&k.as_str()))
            {
                r.warnings
                    .push(format!("{P}{key}: ignored by the embedded directory"));
            }
            return None;
        }
        Some("ldap") => {}
        Some(other) => {
            r.errors.push(format!(
                "{P}backend: unknown backend {other:?} (supported: \"embedded\", \"ldap\")"
            ));
            return None;
        }
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
    Some(Draft {
        options: o,
        password_file,
    })
}

impl Draft {
    /// The file the service account's password is read from, if any.
    pub(super) fn password_file(&self) -> Option<&Path> {
        self.password_file.as_deref()
    }
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
    let Some(Draft {
        mut options,
        password_file,
    }) = draft
    else {
        return Directory::Embedded;
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
    Directory::Ldap(Box::new(options))
}

#[cfg(test)]
mod tests;
