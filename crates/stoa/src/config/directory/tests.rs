//! `[directory]` read through `load`, with in-memory files.

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
    let loaded = load_file(
        "[directory]\nbackend = \"ldap\"\nurls = [\"ldap://[::1]:389\"]\nbase = \"o=x\"\n",
        None,
    )
    .expect("valid");
    assert_eq!(
        loaded.warnings,
        [
            "directory.this_host: not set: every user with a mailHost is taken to live on another host"
        ]
    );
    let errors = load_file("[directory]\nbackend = \"sql\"\n", None).expect_err("invalid");
    assert!(errors[0].contains("unknown backend \"sql\""), "{errors:?}");
}

#[test]
fn embedded_is_the_default() {
    let loaded = load_file("", None).expect("valid");
    assert_eq!(loaded.directory, Directory::Embedded(Options::default()));
    let loaded =
        load_file("[directory]\nbackend = \"embedded\"\nurls = []\n", None).expect("valid");
    assert_eq!(loaded.directory, Directory::Embedded(Options::default()));
    assert_eq!(
        loaded.warnings,
        ["directory.urls: ignored by the embedded directory"]
    );
}

#[test]
fn the_embedded_directorys_password_keys() {
    let file = r#"
        [directory]
        password_scheme = "SHA512-Crypt"
        argon2_memory = "64MiB"
        argon2_iterations = 3
        argon2_parallelism = 2
        bcrypt_cost = 5
    "#;
    let loaded = load_file(file, None).expect("valid");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let Directory::Embedded(o) = loaded.directory else {
        panic!("not embedded");
    };
    assert_eq!(o.scheme, Scheme::Sha512Crypt);
    assert_eq!(
        (o.cost.memory_kib, o.cost.iterations, o.cost.parallelism),
        (65_536, 3, 2)
    );
    assert_eq!((o.bcrypt_cost, o.allow_plain), (5, false));
    // The defaults: argon2id at OWASP's cost, bcrypt 10, no plain text.
    let Directory::Embedded(d) = load_file("[directory]\n", None).expect("valid").directory else {
        panic!("not embedded");
    };
    assert_eq!(d, Options::default());
    assert_eq!(
        (d.scheme, d.bcrypt_cost, d.allow_plain),
        (Scheme::Argon2id, 10, false)
    );
}

#[test]
fn plain_text_only_when_allowed() {
    let errors =
        load_file("[directory]\npassword_scheme = \"plain\"\n", None).expect_err("refused");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("allow_plain_passwords = true")),
        "{errors:?}"
    );
    let loaded = load_file(
        "[directory]\npassword_scheme = \"plain\"\nallow_plain_passwords = true\n",
        None,
    )
    .expect("allowed");
    let Directory::Embedded(o) = &loaded.directory else {
        panic!("not embedded");
    };
    assert!(o.allow_plain && o.scheme == Scheme::Plain);
    assert_eq!(
        loaded.warnings,
        ["directory.allow_plain_passwords: plain-text passwords verify: for benchmarks only"]
    );
}

#[test]
fn bad_password_keys_are_named_together() {
    let file = r#"
        [directory]
        password_scheme = "md5"
        argon2_memory = "1000"
        argon2_iterations = 0
        argon2_parallelism = 65
        bcrypt_cost = 32
        allow_plain_passwords = "yes"
    "#;
    let errors = load_file(file, None).expect_err("invalid");
    for key in [
        "password_scheme: unknown password scheme \"md5\"",
        "argon2_memory: 1000 bytes",
        "argon2_iterations: must be 1 to 64",
        "argon2_parallelism: must be 1 to 64",
        "bcrypt_cost: must be 4 to 31",
        "allow_plain_passwords: expected true or false",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(key)),
            "{key} in {errors:?}"
        );
    }
}

#[test]
fn password_keys_are_ignored_by_ldap() {
    let file = "[directory]\nbackend = \"ldap\"\nurls = [\"ldap://127.0.0.1:389\"]\n\
                base = \"dc=x\"\nthis_host = \"a.x\"\npassword_scheme = \"ssha\"\n";
    let loaded = load_file(file, None).expect("valid");
    assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
    assert!(loaded.warnings[0].starts_with("directory.password_scheme: ignored by the LDAP"));
}

#[test]
fn the_user_commands_read_only_the_directory_table() {
    let files = HashMap::from([(
        PathBuf::from("/etc/stoa/stoa.toml"),
        "[smtp]\nlisten = \"not an address\"\n[directory]\npassword_scheme = \"blf-crypt\"\n"
            .to_owned(),
    )]);
    let read = |p: &Path| {
        files
            .get(p)
            .cloned()
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
    };
    let (o, warnings) =
        super::super::embedded_options(Path::new("/etc/stoa/stoa.toml"), read).expect("valid");
    assert_eq!(o.scheme, Scheme::BlfCrypt);
    assert!(warnings.is_empty(), "{warnings:?}");
    let errors =
        super::super::embedded_options(Path::new("/nowhere.toml"), read).expect_err("missing file");
    assert!(errors[0].starts_with("/nowhere.toml: "), "{errors:?}");
}
