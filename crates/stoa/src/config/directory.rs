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
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::super::{Loaded, load};
    use super::*;
    use crate::cli::ServeArgs;

    /// Loads `file` as /etc/stoa/stoa.toml (plus `secret` as /etc/stoa/ldap.secret)
    /// with an SMTP server on the command line.
    fn load_file(file: &str, secret: Option<&str>) -> Result<Loaded, Vec<String>> {
        let mut files = HashMap::from([(PathBuf::from("/etc/stoa/stoa.toml"), file.to_owned())]);
        if let Some(secret) = secret {
            files.insert(PathBuf::from("/etc/stoa/ldap.secret"), secret.to_owned());
        }
        let args = ServeArgs {
            config: Some(PathBuf::from("/etc/stoa/stoa.toml")),
            mail_dir: Some(PathBuf::from("/var/mail/stoa")),
            smtp_listen: vec!["127.0.0.1:0".into()],
            ..ServeArgs::default()
        };
        let read = |p: &Path| {
            files
                .get(p)
                .cloned()
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        };
        load(&args, read, Path::new("/var/lib/stoa/web99"))
    }

    #[test]
    fn every_ldap_key() {
        let file = r#"
            [directory]
            backend = "ldap"
            urls = ["ldap://10.0.0.1:389", "ldap://10.0.0.2:389"]
            base = "dc=stoa,dc=test"
            bind_dn = "cn=stoa,dc=stoa,dc=test"
            bind_password_file = "ldap.secret"
            this_host = "store-a.stoa.test"
            filter = "(&(objectClass=inetLocalMailRecipient)(mail=%s))"
            auth = "bind"
            domains = ["stoa.test"]
            mailbox_attribute = "uidNumber"
            timeout = "1500ms"
            pool_size = 4
            cache_size = 100
            cache_ttl = "10m"
            negative_cache_ttl = 5
        "#;
        let loaded = load_file(file, Some("s3cret\n")).expect("valid");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let Directory::Ldap(o) = loaded.directory else {
            panic!("not LDAP");
        };
        assert_eq!(o.urls.len(), 2);
        assert_eq!(o.bind_password, "s3cret", "newline trimmed");
        assert_eq!(o.auth, AuthMode::Bind);
        assert_eq!(o.domains, ["stoa.test"]);
        assert_eq!(o.mailbox_attribute, "uidNumber");
        assert_eq!(o.timeout, Duration::from_millis(1500));
        assert_eq!((o.pool_size, o.cache_capacity), (4, 100));
        assert_eq!(o.cache_ttl, Duration::from_secs(600));
        assert_eq!(o.negative_cache_ttl, Duration::from_secs(5));
        assert_eq!(o.this_host.as_deref(), Some("store-a.stoa.test"));
    }

    #[test]
    fn every_problem_is_reported() {
        let file = r#"
            [directory]
            backend = "ldap"
            urls = ["ldaps://10.0.0.1"]
            filter = "(mail=x"
            auth = "sasl"
            pool_size = 0
            timeout = 0
            bind_password_file = "missing.secret"
            colour = "blue"
        "#;
        let errors = load_file(file, None).expect_err("invalid");
        for expected in [
            "directory.urls: \"ldaps://10.0.0.1\"",
            "directory.base: missing",
            "directory.filter:",
            "directory.auth: unknown mode \"sasl\"",
            "directory.pool_size: must be 1 to 512",
            "directory.timeout: must be more than zero",
            "directory.bind_password_file: given without bind_dn",
            "directory.bind_password_file: /etc/stoa/missing.secret",
        ] {
            assert!(
                errors.iter().any(|e| e.starts_with(expected)),
                "{expected}: {errors:?}"
            );
        }
        let errors = load_file("[directory]\nbackend = \"sql\"\n", None).expect_err("invalid");
        assert!(errors[0].contains("unknown backend \"sql\""), "{errors:?}");
    }

    #[test]
    fn embedded_is_the_default() {
        let loaded = load_file("", None).expect("valid");
        assert_eq!(loaded.directory, Directory::Embedded);
        let loaded =
            load_file("[directory]\nbackend = \"embedded\"\nurls = []\n", None).expect("valid");
        assert_eq!(loaded.directory, Directory::Embedded);
        assert_eq!(
            loaded.warnings,
            ["directory.urls: ignored by the embedded directory"]
        );
    }
}
