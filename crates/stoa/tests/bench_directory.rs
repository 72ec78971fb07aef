//! `stoa bench directory` end to end against a real slapd (Debian's `slapd`,
//! started by the test): a handful of `userN@stoa.test` users with `{SSHA}`
//! passwords and one `{ARGON2}` user, the configuration read as `stoa serve`
//! reads it, one-second runs cold and warm at two concurrencies plus password
//! checks, and every row of the table found users and had no errors. And a
//! domain that matches nobody fails the run instead of printing zeros.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use stoa_directory::ldap::scheme::ssha;
use stoa_directory::password::{PasswordCost, hash_password};
use stoa_testkit::slapd::{ADMIN_DN, ADMIN_PASSWORD, BASE, user_entry};
use stoa_testkit::{Finished, Slapd, run};

/// Users in the directory.
const USERS: u64 = 5;

/// Longest a run of four one-second measurements (plus password checks) may take
/// on a loaded machine.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// One user `uid@stoa.test` with `userPassword` `password`.
fn user(uid: &str, n: u64, password: &str) -> String {
    let host = if n % 2 == 1 { "store-a" } else { "store-b" };
    user_entry(uid, n, &format!("{host}.stoa.test"), password, "")
}

/// A configuration with nothing but `[directory]`, beside its password file.
fn write_config(dir: &Path, url: &str) -> PathBuf {
    std::fs::write(dir.join("ldap.secret"), format!("{ADMIN_PASSWORD}\n")).expect("secret");
    let path = dir.join("bench.toml");
    let config = format!(
        "[directory]\nbackend = \"ldap\"\nurls = [\"{url}\"]\nbase = \"{BASE}\"\n\
         bind_dn = \"{ADMIN_DN}\"\nbind_password_file = \"ldap.secret\"\n\
         this_host = \"store-a.stoa.test\"\ntimeout = \"5s\"\n"
    );
    std::fs::write(&path, config).expect("write the configuration");
    path
}

fn bench(config: &Path, extra: &[&str]) -> Finished {
    run(
        Command::new(env!("CARGO_BIN_EXE_stoa"))
            .args(["bench", "directory", "--config"])
            .arg(config)
            .args(["--users", &USERS.to_string(), "--duration", "1s"])
            .args(extra)
            .env_remove("RUST_LOG"),
        b"",
        RUN_TIMEOUT,
    )
}

#[test]
fn lookups_and_password_checks_against_slapd() {
    if !Slapd::available() {
        eprintln!("SKIPPED: /usr/sbin/slapd is not installed (scripts/test.sh installs it)");
        return;
    }
    let mut ldif: String = (1..=USERS)
        .map(|n| user(&format!("user{n}"), n, &ssha("pw", &n.to_be_bytes())))
        .collect();
    let argon = hash_password("pw", &PasswordCost::MINIMUM).expect("argon2");
    ldif.push_str(&user("argon1", 100, &format!("{{ARGON2}}{argon}")));
    let slapd = Slapd::start(&ldif);
    let config = write_config(&slapd.dir(), &slapd.url());

    let done = bench(
        &config,
        &[
            "--concurrency",
            "1,4",
            "--hot-set",
            "3",
            "--password",
            "pw",
            "--verify",
            "ssha=user1@stoa.test,user2@stoa.test",
            "--verify",
            "argon2=argon1@stoa.test",
        ],
    );
    assert!(done.status.success(), "{}\n{}", done.stdout, done.stderr);
    let rows: Vec<&str> = done
        .stdout
        .lines()
        .filter(|l| l.starts_with("lookup") || l.starts_with("verify"))
        .collect();
    assert_eq!(rows.len(), 8, "{}", done.stdout);
    for (row, case) in rows.iter().zip([
        "lookup, cold",
        "lookup, cold",
        "lookup, warm",
        "lookup, warm",
        "verify_password ssha",
        "verify_password ssha",
        "verify_password argon2",
        "verify_password argon2",
    ]) {
        assert!(row.starts_with(case), "{row}");
        // The last two columns: misses and errors.
        let fields: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(fields[fields.len() - 2..], ["0", "0"], "{row}");
    }

    let done = bench(&config, &["--domain", "elsewhere.test", "--cache", "off"]);
    assert!(!done.status.success(), "{}", done.stdout);
    assert!(done.stderr.contains("nobody was found"), "{}", done.stderr);
}
