//! The mail guide's fetchmail recipe, run as written against `stoa serve` on
//! loopback: the test certificate made with the mail guide's `openssl` command, then
//! fetchmail over STLS delivering through the mail guide's `--mda` into a Maildir and
//! into an mbox, each checked to be one mutt opens (Maildir: `tmp`, `new`, `cur`
//! and a file per message; mbox: a `From ` line before each message and `>From`
//! quoting in the bodies).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use stoa_directory::MailboxId;
use stoa_mailstore::MailStore;
use stoa_testkit::wait_until;

use common::{ServerBuilder, tls_pair};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const JOE: &str = "joe@example.test";

/// The mail guide's `--mda` for a Maildir (fetchmail runs it with `sh -c`).
const MAILDIR_MDA: &str = "python3 -c 'import mailbox, sys; \
    mailbox.Maildir(sys.argv[1]).add(sys.stdin.buffer.read())' $HOME/Maildir";

/// The mail guide's `--mda` for an mbox.
const MBOX_MDA: &str = "python3 -c 'import mailbox, sys; m = mailbox.mbox(sys.argv[1]); \
    m.lock(); m.add(sys.stdin.buffer.read()); m.close()' $HOME/joe.mbox";

/// The mail guide's command for the test certificate.
const OPENSSL: &[&str] = &[
    "req",
    "-x509",
    "-newkey",
    "ec",
    "-pkeyopt",
    "ec_paramgen_curve:prime256v1",
    "-nodes",
    "-days",
    "365",
    "-subj",
    "/CN=localhost",
    "-addext",
    "subjectAltName=DNS:localhost,IP:127.0.0.1",
    "-keyout",
    "pop.key",
    "-out",
    "pop.crt",
];

/// Runs `program args` in `dir` with `HOME=dir`, bounded; (exit code, output).
fn run(program: &str, args: &[&str], dir: &Path) -> (i32, String) {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .env_remove("RUST_LOG");
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    let output = format!("{}{}", done.stdout, done.stderr);
    (done.status.code().unwrap_or(-1), output)
}

fn installed(program: &str) -> bool {
    Command::new(program).arg("--version").output().is_ok()
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// `pop.crt` and `pop.key` in `dir`, made as the mail guide says when openssl is
/// installed.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    if !installed("openssl") {
        eprintln!("openssl is not installed; using a generated certificate");
        let (cert, key) = tls_pair(dir, "localhost");
        std::fs::rename(&cert, dir.join("pop.crt")).expect("rename");
        std::fs::rename(&key, dir.join("pop.key")).expect("rename");
    } else {
        let (code, out) = run("openssl", OPENSSL, dir);
        assert_eq!(code, 0, "openssl: {out}");
    }
    (dir.join("pop.crt"), dir.join("pop.key"))
}

/// A server with Joe; fetchmail's run-control file in `home`. Returns the server
/// and the mail directory.
fn server(home: &Path) -> (common::Server, PathBuf) {
    let mail = home.join("mail");
    let mut add = Command::new(env!("CARGO_BIN_EXE_stoa"));
    add.args(["user", "add", JOE, "--password-stdin", "--mail-dir"])
        .arg(&mail);
    let done = stoa_testkit::run(&mut add, b"secret\n", RUN_TIMEOUT);
    assert!(done.status.success(), "stoa user add: {}", done.stderr);
    let (cert, key) = certificate(home);
    let server = ServerBuilder::mail(&mail)
        .args([
            "--smtp-listen",
            "127.0.0.1:0",
            "--pop3-listen",
            "127.0.0.1:0",
        ])
        .args(["--tls-cert", arg(&cert), "--tls-key", arg(&key)])
        .start();
    // The mail guide's ~/.fetchmailrc, on the test's port.
    let rc = home.join(".fetchmailrc");
    std::fs::write(
        &rc,
        format!(
            "poll 127.0.0.1 proto POP3 service {} user \"{JOE}\" password \"secret\"\n",
            server.pop3_addrs[0].port()
        ),
    )
    .expect("write the rc file");
    std::fs::set_permissions(&rc, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod 0600");
    (server, mail)
}

/// Two messages for Joe, with body lines that an mbox must quote (`From `) and
/// POP3 must stuff (`.`).
fn deliver_two(server: &common::Server, mail: &Path, home: &Path) {
    let script = format!(
        r#"
import smtplib
s = smtplib.SMTP("127.0.0.1", {port}, timeout=10)
for n in (1, 2):
    s.sendmail("a@ext.test", ["{JOE}"],
        "Subject: fetch %d\r\n\r\nFrom here on, message %d\r\n.dot %d\r\n" % (n, n, n))
s.quit()
"#,
        port = server.smtp_addrs[0].port()
    );
    let (code, out) = run("python3", &["-c", &script], home);
    assert_eq!(code, 0, "smtplib: {out}");
    let store =
        MailStore::open(mail.join("store"), stoa_mailstore::Options::default()).expect("store");
    let count = || store.mailbox_stats(MailboxId(1)).unwrap_or_default().count;
    assert!(
        wait_until(Duration::from_secs(15), || count() == 2),
        "not delivered"
    );
}

/// The mail guide's fetchmail command with `mda` (and, for the test, no daemon and
/// no syslog).
fn fetchmail(home: &Path, mda: &str) {
    let (code, out) = run(
        "fetchmail",
        &[
            "--nodetach",
            "--nosyslog",
            "--sslproto",
            "tls1.2+",
            "--sslcertck",
            "--sslcertfile",
            "pop.crt",
            "--sslcommonname",
            "localhost",
            "--fetchall",
            "--nokeep",
            "--mda",
            mda,
        ],
        home,
    );
    assert_eq!(code, 0, "fetchmail failed ({code}):\n{out}");
}

fn skip_without_clients() -> bool {
    let missing = ["fetchmail", "python3"].iter().any(|p| !installed(p));
    if missing {
        eprintln!(
            "fetchmail or python3 is not installed (scripts/test.sh installs them); skipping"
        );
    }
    missing
}

/// One test, as fetchmail run by root takes a lock of the whole system
/// (`/var/run/fetchmail.pid`): the Maildir first, then the mbox.
#[test]
fn fetchmail_recipes_write_what_mutt_opens() {
    if skip_without_clients() {
        return;
    }
    let home = tempfile::tempdir().expect("tempdir");
    let (server, mail) = server(home.path());
    deliver_two(&server, &mail, home.path());
    fetchmail(home.path(), MAILDIR_MDA);
    check_maildir(&home.path().join("Maildir"));
    deliver_two(&server, &mail, home.path());
    fetchmail(home.path(), MBOX_MDA);
    check_mbox(&home.path().join("joe.mbox"));
}

/// `tmp`, `new` and `cur`, nothing left in `tmp`, a file per message.
fn check_maildir(maildir: &Path) {
    for sub in ["tmp", "new", "cur"] {
        assert!(maildir.join(sub).is_dir(), "Maildir/{sub} missing");
    }
    let files = |sub: &str| -> Vec<PathBuf> {
        std::fs::read_dir(maildir.join(sub))
            .expect("read the Maildir")
            .map(|e| e.expect("entry").path())
            .collect()
    };
    assert!(files("tmp").is_empty(), "a delivery was left in tmp");
    let mut texts: Vec<String> = (files("new").iter().chain(&files("cur")))
        .map(|f| std::fs::read_to_string(f).expect("read a message"))
        .collect();
    texts.sort_by_key(|t| t.contains("fetch 2"));
    assert_eq!(texts.len(), 2, "one file per message: {texts:?}");
    for (n, text) in (1..).zip(&texts) {
        assert!(text.contains(&format!("Subject: fetch {n}\n")), "{text}");
        assert!(
            text.contains(&format!("\nFrom here on, message {n}\n")),
            "{text}"
        );
        assert!(text.contains(&format!("\n.dot {n}\n")), "unstuffed: {text}");
        assert!(
            !text.contains('\r'),
            "LF line endings, as mutt reads: {text:?}"
        );
    }
}

/// A `From ` line before each message, a blank line between them, `From ` in
/// bodies quoted.
fn check_mbox(file: &Path) {
    let mbox = std::fs::read_to_string(file).expect("the mbox");
    assert!(mbox.starts_with("From "), "{mbox}");
    let separators: Vec<&str> = mbox.lines().filter(|l| l.starts_with("From ")).collect();
    assert_eq!(separators.len(), 2, "a From line per message: {mbox}");
    assert_eq!(
        mbox.matches("\n\nFrom ").count(),
        1,
        "a blank line before the second: {mbox}"
    );
    for n in [1, 2] {
        assert!(mbox.contains(&format!("Subject: fetch {n}\n")), "{mbox}");
        assert!(
            mbox.contains(&format!("\n>From here on, message {n}\n")),
            "quoted: {mbox}"
        );
        assert!(mbox.contains(&format!("\n.dot {n}\n")), "unstuffed: {mbox}");
    }
    assert!(!mbox.contains('\r'), "LF line endings: {mbox:?}");
}

/// The commands above are the mail guide's, word for word.
#[test]
fn the_readme_gives_these_commands() {
    let readme = include_str!("../../../docs/mail-guide.md").replace("\\\n    ", "");
    for mda in [MAILDIR_MDA, MBOX_MDA] {
        assert!(
            readme.contains(&format!("--mda \"{mda}\"")),
            "docs/mail-guide.md lacks {mda}"
        );
    }
    let openssl = format!("openssl {}", OPENSSL.join(" "));
    assert!(
        readme.contains(&openssl),
        "docs/mail-guide.md lacks {openssl}"
    );
}
