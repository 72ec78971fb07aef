//! Password schemes through the binary: `stoa user add --scheme S` stores a
//! `{SCHEME}` value that a POP3 login through `stoa serve` verifies; `--scheme
//! plain` is refused unless the configuration's `[directory]` has
//! `allow_plain_passwords = true`, and such a user logs in only where the server
//! has it too; `stoa user passwd --scheme` changes the scheme; `stoa check-config`
//! prints the password settings. And the way `stoa user` is meant to be used on
//! a server: the mail directory read from the configuration `stoa serve` reads
//! (no `--mail-dir`), the password asked for twice without echo on a terminal
//! (driven through a pseudo-terminal by Python's `pty`).

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

/// A configuration naming the mail directory `mail` beside it, with a POP3
/// listener taking clear-text passwords.
fn config_with_mail_dir(dir: &Path) -> PathBuf {
    let path = dir.join("stoa.toml");
    std::fs::write(
        &path,
        "[pop3]\nlisten = [\"127.0.0.1:0\"]\nmail_dir = \"mail\"\nallow_plaintext_auth = true\n\
         auth_failure_delay = \"10ms\"\n",
    )
    .expect("write the configuration");
    path
}

#[test]
fn user_commands_find_the_mail_dir_in_the_configuration() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let conf = config_with_mail_dir(tmp.path());
    let mail = tmp.path().join("mail");
    let (code, _, err) = stoa(
        &[
            "user",
            "add",
            "joe@example.test",
            "--password-stdin",
            "--config",
            arg(&conf),
        ],
        "pass word\n",
    );
    assert_eq!(code, 0, "{err}");
    assert!(stored(&mail, "joe@example.test").starts_with("{ARGON2ID}"));
    // The default configuration file is read the same way.
    let mut list = Command::new(env!("CARGO_BIN_EXE_stoa"));
    list.args(["user", "list"])
        .env("STOA_DEFAULT_CONFIG", &conf);
    let listed = stoa_testkit::run(&mut list, b"", RUN_TIMEOUT);
    assert_eq!(
        (listed.status.code(), listed.stdout.as_str()),
        (Some(0), "joe@example.test\n"),
        "{}",
        listed.stderr
    );
    // --mail-dir still wins; a --config that does not exist is an error; with
    // neither a mail directory nor a configuration the command says what to give.
    let other = tmp.path().join("other");
    let (code, _, err) = stoa(&["user", "init", "--mail-dir", arg(&other)], "");
    assert_eq!(code, 0, "{err}");
    assert!(other.join("directory").is_dir());
    let missing = tmp.path().join("missing.toml");
    let (code, _, err) = stoa(&["user", "list", "--config", arg(&missing)], "");
    assert_ne!(code, 0);
    assert!(err.contains("missing.toml: no such file"), "{err}");
    let (code, _, err) = stoa(&["user", "list"], "");
    assert_ne!(code, 0);
    assert!(err.contains("give --mail-dir"), "{err}");
    let server = ServerBuilder::config(&conf).start();
    assert!(logs_in(
        server.pop3_addrs[0],
        "joe@example.test",
        "pass word"
    ));
}

/// Runs `stoa ARGS` on a pseudo-terminal, typing each of `answers` after the
/// prompt before it appears; (exit code, everything the terminal showed).
fn on_a_terminal(args: &[&str], prompts_and_answers: &[(&str, &str)]) -> (i32, String) {
    const DRIVER: &str = r#"
import os, pty, select, sys, time
stoa, script = sys.argv[1], sys.argv[2:]
sep = script.index("--")
args, steps = script[:sep], script[sep + 1:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(stoa, [stoa] + args)
seen = b""
def more(deadline):
    global seen
    r, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
    if not r:
        return False
    try:
        data = os.read(fd, 4096)
    except OSError:
        return False
    seen += data
    return bool(data)
for prompt, answer in zip(steps[0::2], steps[1::2]):
    deadline = time.monotonic() + 20
    while prompt.encode() not in seen and time.monotonic() < deadline:
        if not more(deadline):
            break
    if prompt.encode() not in seen:
        sys.stdout.write(f"no prompt {prompt!r}; the terminal showed {seen!r}\n")
        break
    seen = seen.replace(prompt.encode(), b"<" + prompt.encode() + b">", 1)
    os.write(fd, answer.encode() + b"\n")
deadline = time.monotonic() + 20
while time.monotonic() < deadline and more(deadline):
    pass
_, status = os.waitpid(pid, 0)
sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n{seen.decode(errors='replace')}")
"#;
    let mut command = Command::new("python3");
    command
        .args(["-c", DRIVER, env!("CARGO_BIN_EXE_stoa")])
        .args(args)
        .arg("--")
        .env("STOA_DEFAULT_CONFIG", "/nonexistent/stoa.toml");
    for (prompt, answer) in prompts_and_answers {
        command.args([prompt, answer]);
    }
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    let (code, shown) = done.stdout.split_once('\n').unwrap_or(("", ""));
    (code.parse().unwrap_or(-1), shown.to_owned())
}

#[test]
fn on_a_terminal_the_password_is_asked_twice_without_echo() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let conf = config_with_mail_dir(tmp.path());
    let mail = tmp.path().join("mail");
    // The mail directory is the configuration's (`mail` beside it), named here.
    let add = ["user", "add", "ann@example.test", "--mail-dir", arg(&mail)];
    // Two different answers: refused, and no user made.
    let (code, shown) = on_a_terminal(
        &add,
        &[
            ("Password: ", "first try"),
            ("Password again: ", "frist try"),
        ],
    );
    assert_ne!(code, 0, "{shown}");
    assert!(shown.contains("the two passwords differ"), "{shown}");
    assert!(
        !mail.join("directory/entries.txt").exists() || {
            let text =
                std::fs::read_to_string(mail.join("directory/entries.txt")).expect("entries");
            !text.contains("ann@example.test")
        }
    );
    let (code, shown) = on_a_terminal(
        &add,
        &[
            ("Password: ", "s3cret word"),
            ("Password again: ", "s3cret word"),
        ],
    );
    assert_eq!(code, 0, "{shown}");
    assert!(
        !shown.contains("s3cret"),
        "the password was echoed: {shown}"
    );
    assert!(stored(&mail, "ann@example.test").starts_with("{ARGON2ID}"));
    // --no-password asks for nothing, and says what it made.
    let (code, shown) = on_a_terminal(
        &[
            "user",
            "add",
            "bob@example.test",
            "--no-password",
            "--mail-dir",
            arg(&mail),
        ],
        &[],
    );
    assert_eq!(code, 0, "{shown}");
    assert!(!shown.contains("Password"), "{shown}");
    assert!(shown.contains("cannot log in"), "{shown}");
    // passwd asks the same way.
    let passwd = [
        "user",
        "passwd",
        "ann@example.test",
        "--mail-dir",
        arg(&mail),
    ];
    let (code, shown) = on_a_terminal(
        &passwd,
        &[("Password: ", "new word"), ("Password again: ", "new word")],
    );
    assert_eq!(code, 0, "{shown}");
    let server = ServerBuilder::config(&conf).start();
    assert!(logs_in(
        server.pop3_addrs[0],
        "ann@example.test",
        "new word"
    ));
    assert!(!logs_in(
        server.pop3_addrs[0],
        "ann@example.test",
        "s3cret word"
    ));
}
