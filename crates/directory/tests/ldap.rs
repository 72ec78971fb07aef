//! The LDAP backend against a real slapd (Debian's `slapd`, started by the test in
//! a temporary directory): lookups, aliases, the password schemes, filter
//! injection, failover, an outage and the cache's TTLs.

use std::time::Duration;

use stoa_directory::ldap::AuthMode;
use stoa_directory::password::{PasswordCost, hash_password};
use stoa_directory::scheme::ssha;
use stoa_directory::{Directory, LdapDirectory, LdapOptions, MailboxId, Resolution, Target};
use stoa_testkit::slapd::{ADMIN_DN, ADMIN_PASSWORD, BASE};
use stoa_testkit::{Slapd, wait_until};

/// One user entry in LDIF.
fn user(uid: &str, mailbox: Option<u64>, host: &str, password: &str, aliases: &[&str]) -> String {
    let mut ldif = format!(
        "dn: uid={uid},ou=people,{BASE}\nobjectClass: inetOrgPerson\n\
         objectClass: inetLocalMailRecipient\nuid: {uid}\ncn: {uid}\nsn: {uid}\n\
         mail: {uid}@stoa.test\nmailHost: {host}\nuserPassword: {password}\n"
    );
    if let Some(n) = mailbox {
        ldif.push_str(&format!("employeeNumber: {n}\n"));
    }
    for alias in aliases {
        ldif.push_str(&format!("mailLocalAddress: {alias}\n"));
    }
    ldif + "\n"
}

/// Four users, one per password scheme; joe on this host, ann elsewhere.
fn users() -> String {
    use sha_crypt::PasswordHasher as _;
    let sha512 = sha_crypt::ShaCrypt::default()
        .hash_password_with_salt(b"ann-pw", b"annsalt1")
        .expect("sha-crypt");
    let bcrypt = bcrypt::hash("bob-pw", 4).expect("bcrypt");
    let argon = hash_password("eve-pw", &PasswordCost::MINIMUM).expect("argon2");
    [
        user(
            "joe",
            Some(7),
            "store-a.stoa.test",
            &ssha("joe-pw", b"salt"),
            &["joseph@stoa.test"],
        ),
        user(
            "ann",
            Some(8),
            "Store-B.stoa.test.",
            &format!("{{CRYPT}}{}", sha512.as_str()),
            &[],
        ),
        user(
            "bob",
            None,
            "store-a.stoa.test",
            &format!("{{CRYPT}}{bcrypt}"),
            &[],
        ),
        user(
            "eve",
            Some(10),
            "store-a.stoa.test",
            &format!("{{ARGON2}}{argon}"),
            &[],
        ),
    ]
    .concat()
}

fn options(urls: Vec<String>) -> LdapOptions {
    LdapOptions {
        urls,
        base: BASE.into(),
        bind_dn: Some(ADMIN_DN.into()),
        bind_password: ADMIN_PASSWORD.into(),
        this_host: Some("store-a.stoa.test".into()),
        timeout: Duration::from_secs(2),
        ..LdapOptions::default()
    }
}

/// The slapd, or `None` (the test passes vacuously, loudly) where it is missing.
fn slapd() -> Option<Slapd> {
    if !Slapd::available() {
        eprintln!("SKIPPED: /usr/sbin/slapd is not installed (scripts/test.sh installs it)");
        return None;
    }
    Some(Slapd::start(&users()))
}

/// A loopback URL where nothing listens.
fn dead_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    format!("ldap://127.0.0.1:{port}")
}

#[test]
fn lookups_by_mail_alias_and_detail() {
    let Some(slapd) = slapd() else { return };
    let dir = LdapDirectory::new(options(vec![slapd.url()])).expect("directory");
    let joe = dir.lookup("Joe@STOA.test").expect("lookup").expect("joe");
    assert_eq!(joe.address, "joe@stoa.test");
    assert_eq!(joe.mailbox, MailboxId(7));
    assert_eq!(joe.mail_host, None, "this_host is here");
    let by_alias = dir
        .lookup("joseph@stoa.test")
        .expect("lookup")
        .expect("alias");
    assert_eq!(by_alias, joe);
    assert_eq!(
        dir.lookup("joe+news@stoa.test").expect("lookup"),
        Some(joe.clone())
    );
    let ann = dir.lookup("ann@stoa.test").expect("lookup").expect("ann");
    assert_eq!(ann.mail_host.as_deref(), Some("store-b.stoa.test"));
    let bob = dir.lookup("bob@stoa.test").expect("lookup").expect("bob");
    assert!(
        bob.mailbox.0 >= 1 << 63,
        "derived from entryUUID: {}",
        bob.mailbox
    );
    assert_eq!(dir.lookup("nobody@stoa.test").expect("lookup"), None);
    assert!(dir.is_local_domain("stoa.test").expect("domain"));
    assert!(!dir.is_local_domain("elsewhere.test").expect("domain"));
    assert_eq!(
        dir.resolve("joseph@stoa.test").expect("resolve"),
        Resolution::Deliver(vec![Target::Local(joe)])
    );
    assert_eq!(
        dir.resolve("nobody@stoa.test").expect("resolve"),
        Resolution::Unknown
    );
    assert_eq!(
        dir.resolve("x@elsewhere.test").expect("resolve"),
        Resolution::NotLocal
    );
}

#[test]
fn the_password_schemes_and_wrong_passwords() {
    let Some(slapd) = slapd() else { return };
    let dir = LdapDirectory::new(options(vec![slapd.url()])).expect("directory");
    for (login, right) in [
        ("joe@stoa.test", "joe-pw"),
        ("ann@stoa.test", "ann-pw"),
        ("bob@stoa.test", "bob-pw"),
        ("eve@stoa.test", "eve-pw"),
    ] {
        let user = dir.verify_password(login, right).expect("check");
        assert_eq!(user.map(|u| u.address).as_deref(), Some(login), "{login}");
        // Twice: the second comes from the cache of successes.
        assert!(dir.verify_password(login, right).expect("check").is_some());
        assert_eq!(
            dir.verify_password(login, "wrong").expect("check"),
            None,
            "{login}"
        );
        assert_eq!(
            dir.verify_password(login, "").expect("check"),
            None,
            "{login}"
        );
    }
    assert_eq!(
        dir.verify_password("nobody@stoa.test", "x").expect("check"),
        None
    );
}

#[test]
fn bind_mode_lets_the_server_check() {
    let Some(slapd) = slapd() else { return };
    let mut opts = options(vec![slapd.url()]);
    opts.auth = AuthMode::Bind;
    let dir = LdapDirectory::new(opts).expect("directory");
    assert!(
        dir.verify_password("joe@stoa.test", "joe-pw")
            .expect("bind")
            .is_some()
    );
    assert!(
        dir.verify_password("joe@stoa.test", "nope")
            .expect("bind")
            .is_none()
    );
    assert!(
        dir.verify_password("joe@stoa.test", "")
            .expect("bind")
            .is_none()
    );
    assert!(
        dir.verify_password("nobody@stoa.test", "x")
            .expect("bind")
            .is_none()
    );
    // The connection bound back as the service account: lookups still work.
    assert!(dir.lookup("ann@stoa.test").expect("lookup").is_some());
}

#[test]
fn filter_injection_finds_nothing() {
    let Some(slapd) = slapd() else { return };
    let dir = LdapDirectory::new(options(vec![slapd.url()])).expect("directory");
    // `*` is a valid local-part character: unescaped, `mail=*@stoa.test` would match
    // every user.
    for attempt in [
        "*)(uid=*",
        "*)(uid=*@stoa.test",
        "*@stoa.test",
        "j*@stoa.test",
        "*",
    ] {
        assert_eq!(dir.lookup(attempt).expect("lookup"), None, "{attempt}");
        assert_eq!(
            dir.verify_password(attempt, "joe-pw").expect("check"),
            None,
            "{attempt}"
        );
    }
    assert!(!dir.is_local_domain("*").expect("domain"));
}

#[test]
fn fails_over_to_the_second_url() {
    let Some(slapd) = slapd() else { return };
    let dir = LdapDirectory::new(options(vec![dead_url(), slapd.url()])).expect("directory");
    assert!(dir.lookup("joe@stoa.test").expect("failover").is_some());
    assert!(
        dir.verify_password("ann@stoa.test", "ann-pw")
            .expect("check")
            .is_some()
    );
}

#[test]
fn an_outage_is_temporary_and_ends_by_itself() {
    let Some(mut slapd) = slapd() else { return };
    let dir = LdapDirectory::new(options(vec![slapd.url()])).expect("directory");
    assert!(dir.lookup("joe@stoa.test").expect("up").is_some());
    slapd.stop();
    // Not cached: a temporary failure, never "unknown".
    let e = dir.lookup("ann@stoa.test").expect_err("slapd is down");
    assert!(e.is_temporary(), "{e}");
    let e = dir
        .verify_password("bob@stoa.test", "bob-pw")
        .expect_err("down");
    assert!(e.is_temporary(), "{e}");
    assert!(
        dir.resolve("eve@stoa.test")
            .expect_err("down")
            .is_temporary()
    );
    // Cached within its TTL: still answered.
    assert!(dir.lookup("joe@stoa.test").expect("cached").is_some());
    slapd.restart();
    // The pooled connection died with the old slapd; the next call reconnects.
    assert!(dir.lookup("ann@stoa.test").expect("back").is_some());
    assert!(
        dir.verify_password("bob@stoa.test", "bob-pw")
            .expect("back")
            .is_some()
    );
}

#[test]
fn cached_answers_expire_after_their_ttls() {
    let Some(mut slapd) = slapd() else { return };
    let mut opts = options(vec![slapd.url()]);
    // TTLs long enough that stopping slapd on a loaded machine (the whole test
    // suite at once) fits well within them: at 600 ms the cached answer had
    // expired once before it was asked for.
    opts.cache_ttl = Duration::from_secs(4);
    opts.negative_cache_ttl = Duration::from_secs(2);
    let dir = LdapDirectory::new(opts).expect("directory");
    assert!(dir.lookup("joe@stoa.test").expect("up").is_some());
    assert!(dir.lookup("nobody@stoa.test").expect("up").is_none());
    let cached_at = std::time::Instant::now();
    slapd.stop();
    // Both answers come from the cache until their TTLs pass, then the directory
    // is asked, and it is down. (Checked only while the shorter TTL runs: a
    // stop slower than that proves nothing either way.)
    if cached_at.elapsed() < Duration::from_millis(1500) {
        assert!(dir.lookup("joe@stoa.test").expect("cached").is_some());
        assert!(dir.lookup("nobody@stoa.test").expect("cached").is_none());
    }
    let expired = |address: &str| dir.lookup(address).is_err_and(|e| e.is_temporary());
    assert!(wait_until(Duration::from_secs(10), || expired(
        "nobody@stoa.test"
    )));
    assert!(wait_until(Duration::from_secs(10), || expired(
        "joe@stoa.test"
    )));
}

#[test]
fn a_server_that_never_answers_times_out_and_is_failed_over() {
    let Some(slapd) = slapd() else { return };
    // Connections complete in the kernel's backlog, and nothing ever answers.
    let hung = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let hung_url = format!("ldap://{}", hung.local_addr().expect("address"));
    let mut opts = options(vec![hung_url.clone()]);
    opts.timeout = Duration::from_millis(300);
    let dir = LdapDirectory::new(opts.clone()).expect("directory");
    let started = std::time::Instant::now();
    let e = dir.lookup("joe@stoa.test").expect_err("no answer");
    assert!(e.is_temporary(), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    opts.urls = vec![hung_url, slapd.url()];
    let dir = LdapDirectory::new(opts).expect("directory");
    assert!(dir.lookup("joe@stoa.test").expect("second URL").is_some());
}

#[test]
fn the_pool_is_bounded_and_shared_by_threads() {
    let Some(slapd) = slapd() else { return };
    let mut opts = options(vec![slapd.url()]);
    opts.pool_size = 2;
    opts.cache_capacity = 0;
    let dir = LdapDirectory::new(opts).expect("directory");
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                for address in ["joe@stoa.test", "ann@stoa.test", "nobody@stoa.test"] {
                    let found = dir.lookup(address).expect("lookup");
                    assert_eq!(found.is_some(), address != "nobody@stoa.test");
                    assert!(dir.connections() <= 2, "{}", dir.connections());
                }
            });
        }
    });
    assert!(
        (1..=2).contains(&dir.connections()),
        "{}",
        dir.connections()
    );
}

/// A connection as the directory's manager, to change entries under the cache.
fn admin(slapd: &Slapd) -> ldap3::LdapConn {
    let mut conn = ldap3::LdapConn::new(&slapd.url()).expect("connect");
    conn.simple_bind(ADMIN_DN, ADMIN_PASSWORD)
        .expect("bind")
        .success()
        .expect("manager bind");
    conn
}

#[test]
fn a_changed_password_or_a_new_user_is_seen_at_the_next_login() {
    use std::collections::HashSet;
    let Some(slapd) = slapd() else { return };
    let dir = LdapDirectory::new(options(vec![slapd.url()])).expect("directory");
    assert!(
        dir.verify_password("joe@stoa.test", "joe-pw")
            .expect("check")
            .is_some()
    );
    assert!(
        dir.verify_password("new@stoa.test", "new-pw")
            .expect("check")
            .is_none()
    );
    let mut conn = admin(&slapd);
    let new_value = ssha("joe-new", b"salt2");
    conn.modify(
        &format!("uid=joe,ou=people,{BASE}"),
        vec![ldap3::Mod::Replace(
            "userPassword",
            HashSet::from([new_value.as_str()]),
        )],
    )
    .expect("modify")
    .success()
    .expect("password changed");
    let entry = user(
        "new",
        Some(42),
        "store-a.stoa.test",
        &ssha("new-pw", b"s"),
        &[],
    );
    let mut attrs: Vec<(&str, HashSet<&str>)> = Vec::new();
    for line in entry.lines().skip(1).filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(": ").expect("attribute line");
        match attrs.iter_mut().find(|(n, _)| *n == name) {
            Some((_, values)) => {
                values.insert(value);
            }
            None => attrs.push((name, HashSet::from([value]))),
        }
    }
    conn.add(&format!("uid=new,ou=people,{BASE}"), attrs)
        .expect("add")
        .success()
        .expect("user added");
    // Both answers were cached; the failure sends the login back to the directory.
    assert!(
        dir.verify_password("joe@stoa.test", "joe-new")
            .expect("check")
            .is_some()
    );
    let new = dir
        .verify_password("new@stoa.test", "new-pw")
        .expect("check");
    assert_eq!(new.map(|u| u.mailbox), Some(MailboxId(42)));
    assert!(
        dir.verify_password("joe@stoa.test", "wrong")
            .expect("check")
            .is_none()
    );
}

/// `stoa user export-ldif`'s values in slapd: each scheme checked locally, and
/// by slapd itself in bind mode where OpenLDAP knows it (`{CRYPT}` through the
/// system's crypt(3) for sha512-crypt and bcrypt, `{SSHA}` built in; `{ARGON2}`
/// needs the argon2 module, which this slapd does not load).
#[test]
fn exported_values_of_every_scheme_verify_in_slapd() {
    use stoa_directory::scheme::{self, Cost, Scheme};
    if !Slapd::available() {
        eprintln!("SKIPPED: /usr/sbin/slapd is not installed (scripts/test.sh installs it)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let embedded =
        stoa_directory::EmbeddedDirectory::open(tmp.path(), stoa_directory::Options::default())
            .expect("open");
    embedded.add_domain("stoa.test").expect("domain");
    let schemes = [
        (Scheme::Sha512Crypt, true),
        (Scheme::BlfCrypt, true),
        (Scheme::Ssha, true),
        (Scheme::Argon2id, false),
    ];
    let users: Vec<stoa_directory::embedded::NewUser> = schemes
        .iter()
        .map(|(s, _)| stoa_directory::embedded::NewUser {
            address: format!("{}@stoa.test", s.name()),
            password_hash: Some(scheme::hash("x-pw", *s, &Cost::default()).expect("hash")),
        })
        .collect();
    embedded.add_users(&users).expect("users");
    let mut ldif = Vec::new();
    embedded
        .write_ldif(&format!("ou=people,{BASE}"), None, &mut ldif)
        .expect("export");
    let slapd = Slapd::start(&String::from_utf8(ldif).expect("UTF-8"));
    let local = LdapDirectory::new(options(vec![slapd.url()])).expect("directory");
    let mut opts = options(vec![slapd.url()]);
    opts.auth = AuthMode::Bind;
    let bind = LdapDirectory::new(opts).expect("directory");
    for (s, slapd_knows_it) in schemes {
        let login = format!("{}@stoa.test", s.name());
        assert!(
            local
                .verify_password(&login, "x-pw")
                .expect("check")
                .is_some(),
            "{s}"
        );
        assert!(
            local
                .verify_password(&login, "x-pW")
                .expect("check")
                .is_none(),
            "{s}"
        );
        let bound = bind
            .verify_password(&login, "x-pw")
            .expect("bind")
            .is_some();
        assert_eq!(bound, slapd_knows_it, "{s}: slapd's own check");
        assert!(
            bind.verify_password(&login, "x-pW")
                .expect("bind")
                .is_none(),
            "{s}"
        );
    }
}
