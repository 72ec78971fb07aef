//! The password values this crate makes are the ones Dovecot makes and checks:
//! `doveadm pw -t` verifies ours, and ours verify Dovecot's `doveadm pw -s`, so a
//! Dovecot passwd-file and the embedded directory can hold the same strings
//! (what `stoa bench mail-users --format dovecot` and bench/compare-*.sh rely on).
//!
//! Needs `doveadm` (Debian `dovecot-core`, which scripts/test.sh installs with
//! `dovecot-lmtpd`): without it these tests fail, saying so; they do not skip.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use stoa_directory::embedded::NewUser;
use stoa_directory::scheme::{self, Cost, Scheme};
use stoa_directory::{Directory, EmbeddedDirectory, Options};

const DOVEADM: &str = "/usr/bin/doveadm";
/// A password with a space, a colon and a non-ASCII letter.
const PASSWORD: &str = "pass word:é";

fn doveadm(args: &[&str]) -> stoa_testkit::Finished {
    assert!(
        Path::new(DOVEADM).exists(),
        "{DOVEADM} is not installed: install Debian's dovecot-core (scripts/test.sh does) \
         to check the password schemes against Dovecot"
    );
    // An empty configuration: `doveadm pw` needs none, and the system's may be
    // unreadable or absent.
    let tmp = tempfile::tempdir().expect("tempdir");
    let conf = tmp.path().join("dovecot.conf");
    std::fs::write(&conf, "").expect("write an empty dovecot.conf");
    let mut command = Command::new(DOVEADM);
    command.arg("-c").arg(&conf).args(args);
    stoa_testkit::run(&mut command, b"", Duration::from_secs(60))
}

/// The schemes checked both ways, with Dovecot's names.
const SCHEMES: [Scheme; 5] = [
    Scheme::Sha512Crypt,
    Scheme::BlfCrypt,
    Scheme::Argon2id,
    Scheme::Ssha,
    Scheme::Plain,
];

#[test]
fn doveadm_verifies_the_values_we_make() {
    // Default costs: the values as `stoa user add` makes them.
    let cost = Cost::default();
    for s in SCHEMES {
        let value = scheme::hash(PASSWORD, s, &cost).expect("hash");
        let right = doveadm(&["pw", "-t", &value, "-p", PASSWORD]);
        assert!(
            right.status.success(),
            "doveadm pw -t {value} with the right password: {} {}",
            right.stdout,
            right.stderr
        );
        assert!(right.stdout.contains("(verified)"), "{}", right.stdout);
        let wrong = doveadm(&["pw", "-t", &value, "-p", "pass word:e"]);
        assert!(
            !wrong.status.success(),
            "doveadm pw -t {value} took a wrong password: {}",
            wrong.stdout
        );
    }
}

#[test]
fn dovecots_values_verify_in_the_embedded_directory() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let options = Options {
        allow_plain: true,
        ..Options::default()
    };
    let directory = EmbeddedDirectory::open(tmp.path(), options).expect("open");
    directory.add_domain("stoa.test").expect("domain");
    let mut users = Vec::new();
    for s in SCHEMES {
        // PLAIN.BASE64: the spelling the directory writes plain text in.
        let name = match s {
            Scheme::Plain => "PLAIN.BASE64",
            other => other.dovecot_name(),
        };
        let made = doveadm(&["pw", "-s", name, "-p", PASSWORD]);
        assert!(
            made.status.success(),
            "doveadm pw -s {name}: {}",
            made.stderr
        );
        let value = made.stdout.trim().to_owned();
        assert!(value.starts_with(&format!("{{{name}}}")), "{value}");
        assert!(scheme::is_valid(&value), "{value}");
        assert_eq!(scheme::scheme_of(&value), Some(s), "{value}");
        users.push(NewUser {
            address: format!("{}@stoa.test", s.name()),
            password_hash: Some(value),
        });
    }
    directory.add_users(&users).expect("add Dovecot's values");
    let reopened = EmbeddedDirectory::open(
        tmp.path(),
        Options {
            allow_plain: true,
            ..Options::default()
        },
    )
    .expect("reopen");
    for user in &users {
        let login = &user.address;
        let found = reopened.verify_password(login, PASSWORD).expect("verify");
        assert!(found.is_some(), "{login}: {:?}", user.password_hash);
        let wrong = reopened
            .verify_password(login, "pass word:e")
            .expect("verify");
        assert!(wrong.is_none(), "{login}");
    }
}
