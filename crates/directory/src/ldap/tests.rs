//! Unit tests without a server: options, the entry mapping, failures when
//! nothing answers. The tests against a real slapd are in `tests/ldap.rs`.

use std::time::Duration;

use super::*;

fn options(urls: &[&str]) -> LdapOptions {
    LdapOptions {
        urls: urls.iter().map(|u| (*u).to_owned()).collect(),
        base: "dc=stoa,dc=test".into(),
        timeout: Duration::from_millis(500),
        ..LdapOptions::default()
    }
}

#[test]
fn bad_options_are_refused_together() {
    let mut bad = options(&[]);
    bad.filter = "(mail=x)".into();
    let Err(Error::InvalidConfig(why)) = LdapDirectory::new(bad) else {
        panic!("accepted");
    };
    assert!(
        why.contains("no LDAP URL") && why.contains("no %s"),
        "{why}"
    );
    let mut bad = options(&["ldap://127.0.0.1:1"]);
    bad.filter = "(mail=%s".into();
    assert!(matches!(
        LdapDirectory::new(bad),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn nothing_listening_is_temporary_never_unknown() {
    // Port 1 on loopback: refused at once.
    let dir = LdapDirectory::new(options(&["ldap://127.0.0.1:1", "ldap://127.0.0.1:1"]))
        .expect("options");
    for result in [
        dir.lookup("joe@stoa.test").map(|_| ()),
        dir.resolve("joe@stoa.test").map(|_| ()),
        dir.is_local_domain("stoa.test").map(|_| ()),
        dir.verify_password("joe@stoa.test", "pw").map(|_| ()),
    ] {
        let e = result.expect_err("no server");
        assert!(e.is_temporary(), "{e}");
    }
    // Invalid addresses need no server.
    assert_eq!(dir.lookup("not an address").expect("no search"), None);
}

#[test]
fn configured_domains_need_no_server() {
    let mut opts = options(&["ldap://127.0.0.1:1"]);
    opts.domains = vec!["Stoa.Test.".into()];
    let dir = LdapDirectory::new(opts).expect("options");
    assert!(dir.is_local_domain("stoa.test").expect("configured"));
    assert!(!dir.is_local_domain("other.test").expect("configured"));
    assert_eq!(
        dir.resolve("x@other.test").expect("not local"),
        Resolution::NotLocal
    );
}

#[test]
fn derived_mailboxes_are_stable_and_high() {
    let a = derived_mailbox("0b9f7e1c-1111-2222-3333-444455556666");
    assert_eq!(a, derived_mailbox("0b9f7e1c-1111-2222-3333-444455556666"));
    assert_ne!(a, derived_mailbox("0b9f7e1c-1111-2222-3333-444455556667"));
    assert!(a >= 1 << 63);
}
