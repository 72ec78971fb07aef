use std::fs;

use super::*;
use crate::password;

fn options() -> Options {
    Options {
        cost: PasswordCost::MINIMUM,
        ..Options::default()
    }
}

fn open(dir: &Path) -> EmbeddedDirectory {
    EmbeddedDirectory::open(dir, options()).expect("open directory")
}

/// A directory with `example.com`, users joe (password "pw") and ann (none).
fn populated(dir: &Path) -> EmbeddedDirectory {
    let d = open(dir);
    d.add_domain("Example.COM").expect("domain");
    d.add_user("Joe@example.com", Some("pw")).expect("joe");
    d.add_user("ann@example.com", None).expect("ann");
    d
}

fn local(d: &EmbeddedDirectory, address: &str) -> Target {
    Target::Local(d.lookup(address).expect("lookup").expect("user exists"))
}

#[test]
fn users_and_domains() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = populated(tmp.path());
    assert_eq!(d.domains(), ["example.com"]);
    let users = d.users();
    let names: Vec<&str> = users.iter().map(|u| u.address.as_str()).collect();
    assert_eq!(names, ["ann@example.com", "joe@example.com"]);
    assert_eq!(users[1].mailbox, MailboxId(1));
    assert_eq!(users[0].mailbox, MailboxId(2));
    // Lookups fold case and a trailing dot, and strip +detail.
    for spelling in [
        "joe@example.com",
        "JOE@Example.Com.",
        "joe+news@example.com",
    ] {
        let user = d.lookup(spelling).expect("lookup").expect(spelling);
        assert_eq!(user.address, "joe@example.com");
    }
    assert_eq!(d.lookup("nobody@example.com").expect("lookup"), None);
    assert_eq!(d.lookup("not an address").expect("lookup"), None);
    assert!(matches!(
        d.add_user("joe@example.com", None),
        Err(Error::Exists(_))
    ));
    assert!(matches!(
        d.add_user("x@other.org", None),
        Err(Error::NotLocalDomain(_))
    ));
    assert!(matches!(
        d.add_user("a b@example.com", None),
        Err(Error::InvalidAddress(_))
    ));
    assert!(matches!(
        d.add_domain("example.com."),
        Err(Error::Exists(_))
    ));
    assert!(matches!(
        d.remove_domain("example.com"),
        Err(Error::DomainInUse(_))
    ));
    // Removal returns the user; its mailbox id is never given out again.
    let removed = d.remove_user("JOE@example.com").expect("remove");
    assert_eq!(removed.mailbox, MailboxId(1));
    assert!(matches!(
        d.remove_user("joe@example.com"),
        Err(Error::NotFound(_))
    ));
    let again = d.add_user("joe@example.com", None).expect("re-add");
    assert_eq!(again.mailbox, MailboxId(3));
    d.remove_user("joe@example.com").expect("remove");
    d.remove_user("ann@example.com").expect("remove");
    d.remove_domain("example.com").expect("empty domain");
    assert!(d.domains().is_empty());
    assert!(matches!(
        d.remove_domain("example.com"),
        Err(Error::NotFound(_))
    ));
}

#[test]
fn local_domains() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = populated(tmp.path());
    for (domain, local) in [
        ("example.com", true),
        ("EXAMPLE.com.", true),
        ("sub.example.com", false),
        ("example.org", false),
        ("[192.0.2.1]", false),
        ("", false),
    ] {
        assert_eq!(d.is_local_domain(domain).expect("check"), local, "{domain}");
    }
}

#[test]
fn alias_resolution() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = populated(tmp.path());
    d.add_alias("postmaster@example.com", &["joe@example.com"])
        .expect("alias");
    d.add_alias(
        "staff@example.com",
        &["joe@example.com", "ann@example.com", "friend@remote.org"],
    )
    .expect("alias");
    d.add_alias(
        "all@example.com",
        &[
            "staff@example.com",
            "postmaster@example.com",
            "gone@example.com",
        ],
    )
    .expect("alias");
    d.add_alias(
        "loop1@example.com",
        &["loop2@example.com", "ann@example.com"],
    )
    .expect("alias");
    d.add_alias("loop2@example.com", &["loop1@example.com"])
        .expect("alias");
    let joe = local(&d, "joe@example.com");
    let ann = local(&d, "ann@example.com");
    let remote = Target::Remote("friend@remote.org".to_owned());
    let cases = [
        ("joe@example.com", Resolution::Deliver(vec![joe.clone()])),
        (
            "Joe+List@Example.com",
            Resolution::Deliver(vec![joe.clone()]),
        ),
        (
            "postmaster@example.com",
            Resolution::Deliver(vec![joe.clone()]),
        ),
        (
            "staff+x@example.com",
            Resolution::Deliver(vec![joe.clone(), ann.clone(), remote.clone()]),
        ),
        // Nested, deduplicated, a dangling target dropped.
        (
            "all@example.com",
            Resolution::Deliver(vec![joe.clone(), ann.clone(), remote]),
        ),
        // A loop ends; what it reaches is delivered once.
        ("loop1@example.com", Resolution::Deliver(vec![ann.clone()])),
        ("loop2@example.com", Resolution::Deliver(vec![ann])),
        ("nobody@example.com", Resolution::Unknown),
        ("gone@example.com", Resolution::Unknown),
        ("\"a b\"@example.com", Resolution::Unknown),
        ("to%ext.org@example.com", Resolution::Unknown),
        ("joe@remote.org", Resolution::NotLocal),
        ("joe@example.com.evil.org", Resolution::NotLocal),
        ("joe@[192.0.2.1]", Resolution::NotLocal),
    ];
    for (address, expected) in cases {
        assert_eq!(d.resolve(address).expect("resolve"), expected, "{address}");
    }
    assert!(matches!(
        d.add_alias("joe@example.com", &["ann@example.com"]),
        Err(Error::Exists(_))
    ));
    assert!(matches!(
        d.add_alias("x@example.com", &[]),
        Err(Error::InvalidAlias(_))
    ));
    assert!(matches!(
        d.add_alias("x@example.com", &["x@example.com"]),
        Err(Error::InvalidAlias(_))
    ));
    assert!(matches!(
        d.add_alias("x@other.org", &["joe@example.com"]),
        Err(Error::NotLocalDomain(_))
    ));
    assert!(matches!(
        d.add_user("staff@example.com", None),
        Err(Error::Exists(_))
    ));
    d.remove_alias("staff@example.com").expect("remove alias");
    assert_eq!(
        d.resolve("staff@example.com").expect("resolve"),
        Resolution::Unknown
    );
    assert_eq!(d.aliases().len(), 4);
    // Without subaddressing, +detail is just another unknown name.
    let plain = EmbeddedDirectory::open(
        tmp.path(),
        Options {
            subaddress_separator: None,
            ..options()
        },
    )
    .expect("open");
    assert_eq!(
        plain.resolve("joe+x@example.com").expect("resolve"),
        Resolution::Unknown
    );
    assert_eq!(plain.lookup("joe+x@example.com").expect("lookup"), None);
}

#[test]
fn passwords() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = populated(tmp.path());
    let joe = d.lookup("joe@example.com").expect("lookup");
    assert_eq!(
        d.verify_password("joe@example.com", "pw").expect("verify"),
        joe
    );
    assert_eq!(
        d.verify_password("JOE@example.com", "pw").expect("verify"),
        joe
    );
    for (login, password) in [
        ("joe@example.com", "PW"),
        ("joe@example.com", ""),
        ("joe@example.com", "pw "),
        ("joe+x@example.com", "pw"),
        ("nobody@example.com", "pw"),
        ("ann@example.com", ""),
        ("not an address", "pw"),
    ] {
        assert_eq!(
            d.verify_password(login, password).expect("verify"),
            None,
            "{login} {password}"
        );
    }
}

#[test]
fn cache_never_accepts_a_wrong_password() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = populated(tmp.path());
    assert!(d.verify_cache().is_empty());
    assert!(
        d.verify_password("joe@example.com", "wrong")
            .expect("verify")
            .is_none()
    );
    assert!(d.verify_cache().is_empty(), "failures are not cached");
    assert!(
        d.verify_password("joe@example.com", "pw")
            .expect("verify")
            .is_some()
    );
    assert_eq!(d.verify_cache().len(), 1);
    // Hits for the right password, misses (and a full check) for a wrong one.
    assert!(
        d.verify_password("joe@example.com", "pw")
            .expect("verify")
            .is_some()
    );
    assert!(
        d.verify_password("joe@example.com", "wrong")
            .expect("verify")
            .is_none()
    );
    assert!(
        d.verify_password("joe@example.com", "pw\0")
            .expect("verify")
            .is_none()
    );
    // A password change makes the remembered success worthless.
    d.set_password("joe@example.com", Some("new")).expect("set");
    assert!(
        d.verify_password("joe@example.com", "pw")
            .expect("verify")
            .is_none()
    );
    assert!(
        d.verify_password("joe@example.com", "new")
            .expect("verify")
            .is_some()
    );
    // So does removing it.
    d.set_password("joe@example.com", None).expect("clear");
    assert!(
        d.verify_password("joe@example.com", "new")
            .expect("verify")
            .is_none()
    );
}

#[test]
fn persistence_across_reopen() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let before = {
        let d = populated(tmp.path());
        d.add_alias("info@example.com", &["joe@example.com", "x@remote.org"])
            .expect("alias");
        d.set_mail_host("ann@example.com", Some("Store2.Example.COM"))
            .expect("host");
        (d.users(), d.domains(), d.aliases())
    };
    let d = open(tmp.path());
    assert_eq!((d.users(), d.domains(), d.aliases()), before);
    assert_eq!(
        d.lookup("ann@example.com")
            .expect("lookup")
            .and_then(|u| u.mail_host)
            .as_deref(),
        Some("store2.example.com")
    );
    assert!(
        d.verify_password("joe@example.com", "pw")
            .expect("verify")
            .is_some()
    );
    // Mailbox ids keep counting after a reopen.
    assert_eq!(
        d.add_user("new@example.com", None).expect("add").mailbox,
        MailboxId(3)
    );
}

#[test]
fn two_handles_see_each_others_changes() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let server = populated(tmp.path());
    let admin = open(tmp.path());
    admin.add_user("new@example.com", Some("pw")).expect("add");
    assert_eq!(
        server.lookup("new@example.com").expect("lookup"),
        None,
        "not yet reloaded"
    );
    assert!(server.reload_if_changed().expect("reload"));
    assert!(!server.reload_if_changed().expect("reload"), "nothing new");
    assert!(server.lookup("new@example.com").expect("lookup").is_some());
    // An edit through a stale handle starts from the file, so nothing is lost.
    admin.add_user("other@example.com", None).expect("add");
    server
        .add_alias("team@example.com", &["new@example.com"])
        .expect("alias");
    let fresh = open(tmp.path());
    assert!(fresh.lookup("other@example.com").expect("lookup").is_some());
    assert_eq!(fresh.aliases().len(), 1);
    assert_eq!(fresh.user_count(), 4);
}

#[test]
fn bulk_add_is_all_or_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = populated(tmp.path());
    let hash = password::hash_password("p", &PasswordCost::MINIMUM).expect("hash");
    let new = |a: &str| NewUser {
        address: a.to_owned(),
        password_hash: Some(hash.clone()),
    };
    let batch = [
        new("u1@example.com"),
        new("u2@example.com"),
        new("joe@example.com"),
    ];
    assert!(matches!(d.add_users(&batch), Err(Error::Exists(_))));
    assert_eq!(d.user_count(), 2);
    let bad_hash = NewUser {
        address: "u3@example.com".to_owned(),
        password_hash: Some("plaintext".to_owned()),
    };
    assert!(matches!(
        d.add_users(&[bad_hash]),
        Err(Error::InvalidHash(_))
    ));
    let added = d.add_users(&batch[..2]).expect("add");
    assert_eq!(added.len(), 2);
    assert!(
        d.verify_password("u2@example.com", "p")
            .expect("verify")
            .is_some()
    );
}

#[test]
fn stale_temp_file_is_ignored_and_replaced() {
    let tmp = tempfile::tempdir().expect("tempdir");
    drop(populated(tmp.path()));
    // A crash mid-save leaves a partial temporary file behind.
    let temp = tmp.path().join(store::TEMP_FILE);
    fs::write(&temp, "stoa-directory 1\nnext-mailbox 9\nuser half@").expect("write");
    let d = open(tmp.path());
    assert_eq!(d.user_count(), 2);
    d.add_user("third@example.com", None).expect("add");
    assert!(!temp.exists(), "renamed into place");
    assert_eq!(open(tmp.path()).user_count(), 3);
}

#[test]
fn failed_save_changes_nothing() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = populated(tmp.path());
    let before = fs::read(tmp.path().join(store::FILE)).expect("read");
    // Make the temporary file impossible to create.
    let temp = tmp.path().join(store::TEMP_FILE);
    fs::create_dir(&temp).expect("mkdir");
    assert!(matches!(
        d.add_user("x@example.com", None),
        Err(Error::Io { .. })
    ));
    assert_eq!(
        fs::read(tmp.path().join(store::FILE)).expect("read"),
        before
    );
    assert_eq!(
        d.lookup("x@example.com").expect("lookup"),
        None,
        "memory unchanged"
    );
    fs::remove_dir(&temp).expect("rmdir");
    d.add_user("x@example.com", None).expect("add after repair");
    assert_eq!(d.users()[2].mailbox, MailboxId(3));
}

#[test]
fn damaged_files_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    drop(populated(tmp.path()));
    let path = tmp.path().join(store::FILE);
    let good = fs::read_to_string(&path).expect("read");
    let without_end: String = good
        .lines()
        .filter(|l| !l.starts_with("end "))
        .map(|l| format!("{l}\n"))
        .collect();
    let damaged = [
        ("truncated", good[..good.len() - 4].to_owned()),
        ("no end line", without_end.clone()),
        ("wrong count", good.replace("end 3", "end 4")),
        (
            "bad header",
            good.replace("stoa-directory 1", "stoa-directory 2"),
        ),
        (
            "upper case",
            good.replace("joe@example.com", "Joe@example.com"),
        ),
        (
            "unknown domain",
            good.replace("joe@example.com", "joe@example.org"),
        ),
        ("plain password", good.replace("$argon2id", "secret")),
        (
            "unknown scheme",
            good.replace("{ARGON2ID}$argon2id", "{MD5}x"),
        ),
        (
            "bare non-argon2",
            good.replace("{ARGON2ID}$argon2id", "$6$x"),
        ),
        ("duplicate mailbox", good.replace(" 2 - -", " 1 - -")),
        (
            "mailbox beyond next",
            good.replace("next-mailbox 3", "next-mailbox 2"),
        ),
        ("unknown record", format!("{without_end}group x\nend 4\n")),
        ("after end", format!("{good}domain x.org\n")),
    ];
    for (what, text) in damaged {
        assert_ne!(text, good, "{what}: the damage must change the file");
        fs::write(&path, &text).expect("write");
        let err = EmbeddedDirectory::open(tmp.path(), options()).expect_err(what);
        assert!(matches!(err, Error::Corrupt { .. }), "{what}: {err}");
    }
    fs::write(&path, &good).expect("restore");
    assert_eq!(open(tmp.path()).user_count(), 2);
}

/// The permission bits of `path`.
/// [`options`] with `scheme`, plain text allowed, and bcrypt's cheapest cost.
fn with_scheme(scheme: Scheme) -> Options {
    Options {
        scheme,
        bcrypt_cost: scheme::MIN_BCRYPT_COST,
        allow_plain: true,
        ..options()
    }
}

#[test]
fn every_scheme_is_stored_verified_and_kept_across_a_reopen() {
    // A space and a colon: neither may break the file's fields.
    const PASSWORD: &str = "a b:c";
    for scheme in Scheme::ALL {
        let tmp = tempfile::tempdir().expect("tempdir");
        {
            let d = EmbeddedDirectory::open(tmp.path(), with_scheme(scheme)).expect("open");
            d.add_domain("example.com").expect("domain");
            d.add_user("joe@example.com", Some(PASSWORD)).expect("joe");
        }
        let text = fs::read_to_string(tmp.path().join(store::FILE)).expect("read");
        let line = text
            .lines()
            .find(|l| l.starts_with("user joe@example.com "))
            .expect("joe's line");
        let value = line.rsplit(' ').next().expect("password field");
        assert_eq!(line.split(' ').count(), 5, "{line}");
        assert_eq!(scheme::scheme_of(value), Some(scheme), "{line}");
        assert!(
            value.starts_with(&format!("{{{}", scheme.dovecot_name())),
            "{line}"
        );
        // Reopened with the default options: the stored scheme decides, not the
        // configured one (plain text aside, which needs allow_plain).
        let d = EmbeddedDirectory::open(tmp.path(), with_scheme(Scheme::Argon2id)).expect("reopen");
        let joe = d
            .verify_password("joe@example.com", PASSWORD)
            .expect("verify");
        assert_eq!(
            joe.map(|u| u.address).as_deref(),
            Some("joe@example.com"),
            "{scheme}"
        );
        for wrong in ["a b:C", "a b", "", "a b:c "] {
            assert_eq!(
                d.verify_password("joe@example.com", wrong).expect("verify"),
                None
            );
        }
        // An unknown login still costs a decoy check and fails.
        assert_eq!(
            d.verify_password("nobody@example.com", PASSWORD)
                .expect("verify"),
            None
        );
    }
}

#[test]
fn plain_text_needs_allow_plain() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let refused = Options {
        scheme: Scheme::Plain,
        ..options()
    };
    let d = EmbeddedDirectory::open(tmp.path(), refused.clone()).expect("open");
    d.add_domain("example.com").expect("domain");
    assert!(matches!(
        d.add_user("joe@example.com", Some("pw")),
        Err(Error::PlainNotAllowed)
    ));
    let plain = NewUser {
        address: "joe@example.com".into(),
        password_hash: Some("{PLAIN}pw".into()),
    };
    assert!(matches!(
        d.add_users(std::slice::from_ref(&plain)),
        Err(Error::PlainNotAllowed)
    ));
    assert_eq!(d.user_count(), 0);
    // Stored where allowed, then read where not: the user exists but never logs in.
    let allowed = EmbeddedDirectory::open(tmp.path(), with_scheme(Scheme::Plain)).expect("open");
    allowed.add_users(&[plain]).expect("allowed");
    assert!(
        allowed
            .verify_password("joe@example.com", "pw")
            .expect("verify")
            .is_some()
    );
    let d = EmbeddedDirectory::open(tmp.path(), refused).expect("reopen");
    assert!(d.lookup("joe@example.com").expect("lookup").is_some());
    assert_eq!(
        d.verify_password("joe@example.com", "pw").expect("verify"),
        None
    );
}

#[test]
fn values_made_elsewhere_are_taken_and_checked() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let d = open(tmp.path());
    d.add_domain("example.com").expect("domain");
    // `doveadm pw -s SCHEME -p x`.
    let dovecot = [
        "{BLF-CRYPT}$2y$05$HfisMuHYg0KqyogGvXPtsOwcKW754JhDnA7c2NMTrWqWiibvCugVy",
        "{SHA512-CRYPT}$6$/kxZKEhU2V2e3R8B$Op.DA0BwbyTcYXKBRFpTxfWk6Lu6JRMXkSNF7ncS8eLNvXRSOv/\
         RzxBobR9YzbXc4hGyWN.9Bdkeqr7KTNDPQ0",
        "{SSHA}CU+OkCQnDf5hcYEy4/SBUTmLGVNoDGpD",
        "{ssha}CU+OkCQnDf5hcYEy4/SBUTmLGVNoDGpD",
    ];
    let users: Vec<NewUser> = dovecot
        .iter()
        .enumerate()
        .map(|(n, value)| NewUser {
            address: format!("u{n}@example.com"),
            password_hash: Some((*value).to_owned()),
        })
        .collect();
    d.add_users(&users).expect("add");
    for n in 0..dovecot.len() {
        let login = format!("u{n}@example.com");
        assert!(
            d.verify_password(&login, "x").expect("verify").is_some(),
            "{login}"
        );
        assert!(
            d.verify_password(&login, "y").expect("verify").is_none(),
            "{login}"
        );
    }
    for bad in [
        "{MD5}x",
        "{SHA512-CRYPT}$6$short",
        "plain",
        "{BLF-CRYPT}$2y$05$x",
    ] {
        let user = NewUser {
            address: "bad@example.com".into(),
            password_hash: Some(bad.into()),
        };
        assert!(
            matches!(d.add_users(&[user]), Err(Error::InvalidHash(_))),
            "{bad}"
        );
    }
}

#[test]
fn an_old_file_with_bare_argon2_strings_is_read_and_upgraded_on_save() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let phc = password::hash_password("pw", &PasswordCost::MINIMUM).expect("hash");
    let old = format!(
        "stoa-directory 1\nnext-mailbox 2\ndomain example.com\n\
         user joe@example.com 1 - {phc}\nend 2\n"
    );
    fs::write(tmp.path().join(store::FILE), old).expect("write");
    let d = open(tmp.path());
    assert!(
        d.verify_password("joe@example.com", "pw")
            .expect("verify")
            .is_some()
    );
    assert!(
        d.verify_password("joe@example.com", "px")
            .expect("verify")
            .is_none()
    );
    d.add_user("ann@example.com", None)
        .expect("a change saves the file");
    let text = fs::read_to_string(tmp.path().join(store::FILE)).expect("read");
    assert!(text.starts_with("stoa-directory 1\n"), "{text}");
    assert!(
        text.contains(&format!("user joe@example.com 1 - {{ARGON2ID}}{phc}\n")),
        "{text}"
    );
    assert!(
        open(tmp.path())
            .verify_password("joe@example.com", "pw")
            .expect("verify")
            .is_some()
    );
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).expect("stat").mode() & 0o7777
}

/// Issue 21: the file of password hashes is 0600 and its directory 0700, whatever
/// the umask (the usual 022 would give 0644 and 0755), also when a leftover
/// temporary file of a crashed save had wider permissions.
#[test]
fn the_password_file_is_private() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("directory");
    drop(populated(&dir));
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(store::FILE)), 0o600);
    assert_eq!(mode(&dir.join("lock")), 0o600);
    let temp = dir.join(store::TEMP_FILE);
    fs::write(&temp, "leftover").expect("write");
    fs::set_permissions(&temp, fs::Permissions::from_mode(0o644)).expect("chmod");
    open(&dir).add_user("third@example.com", None).expect("add");
    assert_eq!(mode(&dir.join(store::FILE)), 0o600);
}

/// Run by root on a directory owned by the server's unprivileged user, a save
/// leaves a file that user owns (else the server could not read it).
#[test]
fn a_save_by_root_keeps_the_directorys_owner() {
    use std::os::unix::fs::MetadataExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: needs root to give files away");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("directory");
    fs::create_dir(&dir).expect("mkdir");
    std::os::unix::fs::chown(&dir, Some(65534), Some(65534)).expect("chown");
    drop(populated(&dir));
    for name in [store::FILE, "lock"] {
        let meta = fs::metadata(dir.join(name)).expect("stat");
        assert_eq!((meta.uid(), meta.gid()), (65534, 65534), "{name}");
    }
}
