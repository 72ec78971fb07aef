//! Password schemes through the binary: `stoa user add --scheme S` stores a
//! `{SCHEME}` value that a POP3 login through `stoa serve` verifies; `--scheme
//! plain` is refused unless the configuration's `[directory]` has
//! `allow_plain_passwords = true`, and such a user logs in only where the server
//! has it too; `stoa user passwd --scheme` changes the scheme; `stoa check-config`
//! prints the password settings.

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use stoa_testkit::LineConn;

use common::ServerBuilder;

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// `stoa ARGS` with `stdin`, no default configuration file; (exit code, stderr).
fn stoa(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command
        .args(args)
        .env_remove("RUST_LOG")
        .env("STOA_DEFAULT_CONFIG", "/nonexistent/stoa.toml");
    let done = stoa_testkit::run(&mut command, stdin.as_bytes(), RUN_TIMEOUT);
    (done.status.code().unwrap_or(-1), done.stdout, done.stderr)
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// `stoa user add ADDRESS --scheme SCHEME --password-stdin` (plus `extra`).
fn add(mail: &Path, address: &str, scheme: &str, password: &str, extra: &[&str]) -> (i32, String) {
    let mut args = vec![
        "user",
        "add",
        address,
        "--scheme",
        scheme,
        "--password-stdin",
        "--mail-dir",
        arg(mail),
    ];
    args.extend_from_slice(extra);
    let (code, _, err) = stoa(&args, &format!("{password}\n"));
    (code, err)
}

/// The stored value of `address` in the directory file.
fn stored(mail: &Path, address: &str) -> String {
    let text = std::fs::read_to_string(mail.join("directory/entries.txt")).expect("entries");
    let line = text
        .lines()
        .find(|l| l.starts_with(&format!("user {address} ")))
        .unwrap_or_else(|| panic!("{address} in {text}"));
    line.rsplit(' ').next().expect("password field").to_owned()
}

/// A POP3-only configuration taking clear-text passwords, plus `directory`.
fn config(dir: &Path, name: &str, directory: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!(
            "[pop3]\nallow_plaintext_auth = true\nauth_failure_delay = \"10ms\"\n\n\
             [directory]\n{directory}"
        ),
    )
    .expect("write the configuration");
    path
}

/// Whether USER/PASS is answered `+OK` (a fresh connection each time).
fn logs_in(addr: SocketAddr, user: &str, password: &str) -> bool {
    let mut conn = LineConn::connect(addr);
    let greeting = conn.line().expect("greeting");
    assert!(greeting.starts_with("+OK"), "{greeting}");
    conn.expect(&format!("USER {user}"), "+OK");
    conn.send_line(&format!("PASS {password}"));
    let answer = conn.line().expect("an answer to PASS");
    answer.starts_with("+OK")
}

#[test]
fn each_scheme_added_by_the_cli_logs_in_over_pop3() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    let users = [
        ("joe@example.test", "sha512-crypt", "{SHA512-CRYPT}$6$"),
        ("ann@example.test", "BLF-CRYPT", "{BLF-CRYPT}$2y$10$"),
        ("bob@example.test", "ssha", "{SSHA}"),
        (
            "amy@example.test",
            "Argon2id",
            "{ARGON2ID}$argon2id$v=19$m=19456,t=2,p=1$",
        ),
    ];
    for (address, scheme, prefix) in users {
        let (code, err) = add(&mail, address, scheme, "pass word", &[]);
        assert_eq!(code, 0, "{scheme}: {err}");
        assert!(
            err.contains(&format!("password {}", scheme.to_ascii_lowercase())),
            "{err}"
        );
        let value = stored(&mail, address);
        assert!(value.starts_with(prefix), "{scheme}: {value}");
    }
    // passwd changes the scheme too.
    let (code, _, err) = stoa(
        &[
            "user",
            "passwd",
            "joe@example.test",
            "--scheme",
            "ssha",
            "--password-stdin",
            "--mail-dir",
            arg(&mail),
        ],
        "new word\n",
    );
    assert_eq!(code, 0, "{err}");
    assert!(stored(&mail, "joe@example.test").starts_with("{SSHA}"));
    let conf = config(tmp.path(), "stoa.toml", "");
    let server = ServerBuilder::mail(&mail)
        .args(["--config", arg(&conf), "--pop3-listen", "127.0.0.1:0"])
        .start();
    let pop3 = server.pop3_addrs[0];
    assert!(logs_in(pop3, "joe@example.test", "new word"));
    assert!(!logs_in(pop3, "joe@example.test", "pass word"));
    for (address, scheme, _) in &users[1..] {
        assert!(logs_in(pop3, address, "pass word"), "{scheme}");
        assert!(!logs_in(pop3, address, "pass wOrd"), "{scheme}");
    }
    assert!(!logs_in(pop3, "nobody@example.test", "pass word"));
}

#[test]
fn plain_text_needs_the_configuration_key() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    let (code, err) = add(&mail, "joe@example.test", "plain", "pass word", &[]);
    assert_ne!(code, 0, "plain text without the key");
    assert!(err.contains("allow_plain_passwords = true"), "{err}");
    assert!(
        !mail.join("directory/entries.txt").exists(),
        "nothing created"
    );
    let refusing = config(tmp.path(), "refusing.toml", "");
    let (code, err) = add(
        &mail,
        "joe@example.test",
        "PLAIN",
        "pass word",
        &["--config", arg(&refusing)],
    );
    assert_ne!(code, 0, "{err}");
    let allowing = config(
        tmp.path(),
        "allowing.toml",
        "allow_plain_passwords = true\n",
    );
    let (code, err) = add(
        &mail,
        "joe@example.test",
        "plain",
        "pass word",
        &["--config", arg(&allowing)],
    );
    assert_eq!(code, 0, "{err}");
    // Base64: the space stays inside one field.
    assert_eq!(
        stored(&mail, "joe@example.test"),
        "{PLAIN.BASE64}cGFzcyB3b3Jk"
    );
    // A server with the key lets joe in; one without does not.
    {
        let server = ServerBuilder::mail(&mail)
            .args(["--config", arg(&allowing), "--pop3-listen", "127.0.0.1:0"])
            .start();
        assert!(logs_in(
            server.pop3_addrs[0],
            "joe@example.test",
            "pass word"
        ));
        assert!(!logs_in(server.pop3_addrs[0], "joe@example.test", "pass"));
    }
    let server = ServerBuilder::mail(&mail)
        .args(["--config", arg(&refusing), "--pop3-listen", "127.0.0.1:0"])
        .start();
    assert!(!logs_in(
        server.pop3_addrs[0],
        "joe@example.test",
        "pass word"
    ));
}

#[test]
fn the_configured_scheme_is_the_default_and_check_config_prints_it() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    let conf = config(
        tmp.path(),
        "stoa.toml",
        "password_scheme = \"blf-crypt\"\nbcrypt_cost = 5\n",
    );
    let (code, _, err) = stoa(
        &[
            "user",
            "add",
            "joe@example.test",
            "--password-stdin",
            "--config",
            arg(&conf),
            "--mail-dir",
            arg(&mail),
        ],
        "pw\n",
    );
    assert_eq!(code, 0, "{err}");
    assert!(stored(&mail, "joe@example.test").starts_with("{BLF-CRYPT}$2y$05$"));
    let (code, out, err) = stoa(
        &[
            "check-config",
            "--config",
            arg(&conf),
            "--mail-dir",
            arg(&mail),
            "--pop3-listen",
            "127.0.0.1:0",
        ],
        "",
    );
    assert_eq!(code, 0, "{err}");
    for line in [
        "backend = \"embedded\"",
        "password_scheme = \"blf-crypt\"",
        "argon2_memory = \"19MiB\"",
        "argon2_iterations = 2",
        "argon2_parallelism = 1",
        "bcrypt_cost = 5",
        "allow_plain_passwords = false",
    ] {
        assert!(out.lines().any(|l| l == line), "{line} in {out}");
    }
    let (code, _, err) = stoa(
        &[
            "user",
            "add",
            "ann@example.test",
            "--scheme",
            "md5",
            "--password-stdin",
            "--mail-dir",
            arg(&mail),
        ],
        "pw\n",
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("unknown password scheme \"md5\""), "{err}");
}
