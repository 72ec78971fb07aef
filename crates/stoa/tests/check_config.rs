//! `stoa check-config`: every error and warning with exit status 2, the
//! effective configuration printed as a file `stoa serve` reads back to the same
//! settings, the default file (`STOA_DEFAULT_CONFIG` in place of
//! `/etc/stoa/stoa.toml`), and `stoa serve` showing warnings beside its errors.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{ServerBuilder, run_stoa, tls_pair};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// `stoa ARGS` with `env` set; (exit code, stdout, stderr).
fn stoa(args: &[&str], env: &[(&str, &Path)]) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command
        .args(args)
        .env_remove("RUST_LOG")
        .env_remove("STOA_DEFAULT_CONFIG")
        .envs(env.iter().map(|(k, v)| (*k, *v)));
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    (done.status.code().unwrap_or(-1), done.stdout, done.stderr)
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The printed configuration without its header comment (which names the file).
fn body(printed: &str) -> &str {
    let start = printed.find("\n\n").expect("a header, then the settings");
    &printed[start + 2..]
}

/// A web server, SMTP and POP3 with certificates, relative paths, on port 0.
fn write_config(dir: &Path) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("www")).expect("mkdir");
    tls_pair(dir, "localhost");
    let file = dir.join("stoa.toml");
    std::fs::write(
        &file,
        "[web]\ndocroot = \"www\"\n[web.limits]\nhead_timeout = \"5s\"\n\
         [[listener]]\naddress = \"127.0.0.1:0\"\n\
         [[listener]]\naddress = \"127.0.0.1:0\"\ntls = { cert = \"localhost.crt\", key = \"localhost.key\" }\n\
         [smtp]\nmail_dir = \"mail\"\nlisten = [\"127.0.0.1:0\"]\n\
         tls = { cert = \"localhost.crt\", key = \"localhost.key\" }\n\
         [pop3]\nlisten = [\"127.0.0.1:0\"]\nidle_timeout = \"15m\"\n",
    )
    .expect("write the configuration");
    file
}

#[test]
fn the_effective_configuration_is_printed_and_read_back() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = write_config(tmp.path());
    let (code, printed, err) = stoa(
        &["check-config", "--config", arg(&file), "--workers", "3"],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("the configuration is valid"), "{err}");
    assert!(printed.contains("# Roles: web, smtp, pop3."), "{printed}");
    for line in [
        "workers = 3",
        "head_timeout = \"5s\"",
        "keepalive_timeout = \"15s\"",
        "idle_timeout = \"15m\"",
        "protocol = \"https\"",
        "max_message_size = 10240000",
    ] {
        assert!(printed.contains(line), "{line:?} missing in:\n{printed}");
    }
    let mail = tmp.path().join("mail");
    assert!(
        printed.contains(&format!("mail_dir = \"{}\"", mail.display())),
        "{printed}"
    );
    // Fed back, from another directory and without the flag: the same settings.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let again = elsewhere.path().join("effective.toml");
    std::fs::write(&again, &printed).expect("write");
    let (code, reprinted, err) = stoa(&["check-config", "--config", arg(&again)], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(body(&reprinted), body(&printed));
    // And `stoa serve` runs it.
    let mut server = ServerBuilder::mail(&mail)
        .args(["--config", arg(&again)])
        .start();
    assert!(server.wait_for_stderr(RUN_TIMEOUT, |lines| {
        lines.iter().filter(|l| l.contains("listening on")).count() == 4
    }));
    server.stop_with(rustix::process::Signal::TERM);
}

#[test]
fn every_error_and_warning_is_reported_with_status_2() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("stoa.toml");
    std::fs::write(
        &file,
        "[web]\ndocroot = \"nowhere\"\nworkrs = 2\n[web.limits]\nmax_headers = 0\n\
         [smtp]\nlisten = [\"127.0.0.1:0\"]\n",
    )
    .expect("write");
    let (code, out, err) = stoa(&["check-config", "--config", arg(&file)], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        out.is_empty(),
        "nothing is printed for an invalid file: {out}"
    );
    // Issue 56: an error about a key of the file names its file and line.
    let at = |line: usize| format!("stoa: error: {}:{line}: ", file.display());
    let expected = [
        format!(
            "{}web.workrs: unknown key (did you mean web.workers?)",
            at(3)
        ),
        "stoa: error: document root".to_owned(),
        format!("{}web.limits.max_headers: must be 1 to", at(5)),
        "stoa: error: no mail directory".to_owned(),
        "stoa: invalid configuration (4 errors)".to_owned(),
    ];
    for line in &expected {
        assert!(err.contains(line.as_str()), "{line:?} missing in:\n{err}");
    }
    // `stoa serve` refuses it the same way.
    let (status, serve_err) = run_stoa(&["serve", "--config", arg(&file)], RUN_TIMEOUT);
    assert_eq!(status.code(), Some(2), "{serve_err}");
    for line in &expected {
        assert!(
            serve_err.contains(line.as_str()),
            "{line:?} missing in:\n{serve_err}"
        );
    }
}

#[test]
fn a_toml_syntax_error_is_the_only_error() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("stoa.toml");
    std::fs::write(&file, "[web\ndocroot = 1\n").expect("write");
    let (code, _, err) = stoa(&["check-config", "--config", arg(&file)], &[]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains(&format!("stoa: error: {}", file.display())),
        "{err}"
    );
    assert!(err.contains("invalid configuration (1 error)"), "{err}");
}

#[test]
fn the_default_file_is_read_when_it_exists() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = write_config(tmp.path());
    let default = [("STOA_DEFAULT_CONFIG", file.as_path())];
    let (code, printed, err) = stoa(&["check-config"], &default);
    assert_eq!(code, 0, "{err}");
    assert!(
        printed.contains(&format!("Read from {}", file.display())),
        "{printed}"
    );
    // --config wins over it.
    let other = tmp.path().join("other.toml");
    std::fs::write(&other, "[web]\ndocroot = \"www\"\n").expect("write");
    let (code, printed, err) = stoa(&["check-config", "--config", arg(&other)], &default);
    assert_eq!(code, 0, "{err}");
    assert!(printed.contains("# Roles: web."), "{printed}");
    // A default that does not exist is no file at all: the flags alone.
    let missing = tmp.path().join("missing.toml");
    let (code, _, err) = stoa(
        &["check-config"],
        &[("STOA_DEFAULT_CONFIG", missing.as_path())],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no document root"), "{err}");
    // `stoa serve` reads it too.
    let mail = tmp.path().join("mail");
    let mut server = ServerBuilder::mail(&mail)
        .env("STOA_DEFAULT_CONFIG", &file)
        .start();
    assert!(server.wait_for_stderr(RUN_TIMEOUT, |lines| {
        lines.iter().filter(|l| l.contains("listening on")).count() == 4
    }));
    server.stop_with(rustix::process::Signal::TERM);
}

/// Issue 21: "access log: Not a directory" did not say which file.
#[test]
fn an_access_log_that_cannot_be_opened_is_named() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let www = tmp.path().join("www");
    std::fs::create_dir(&www).expect("mkdir");
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "").expect("write");
    let log = file.join("access.log");
    let (status, err) = run_stoa(
        &[
            "serve",
            "--docroot",
            arg(&www),
            "--listen",
            "127.0.0.1:0",
            "--access-log",
            arg(&log),
        ],
        RUN_TIMEOUT,
    );
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("access log {}: ", log.display())),
        "{err}"
    );
}
