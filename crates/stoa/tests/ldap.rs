//! `stoa serve` with `[directory] backend = "ldap"` against a real slapd (Debian's
//! `slapd`, started by the test): RCPT and POP3 logins for LDAP users, and while
//! slapd is stopped, `451 4.4.3` for a user not yet cached and `-ERR [SYS/TEMP]`
//! for a login, both working again once slapd is back. And `stoa user
//! export-ldif`: its output loaded with slapadd serves the same users, with their
//! passwords and their mail.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use stoa_directory::ldap::scheme::ssha;
use stoa_directory::password::{PasswordCost, hash_password};
use stoa_directory::{EmbeddedDirectory, MailboxId};
use stoa_testkit::slapd::{ADMIN_DN, ADMIN_PASSWORD, BASE, user_entry};
use stoa_testkit::{LineConn, Slapd, wait_until};

use common::ServerBuilder;

/// How long a delivered message may take to reach the mailbox.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// One LDAP user on this store host, with mailbox `mailbox`.
fn user(uid: &str, mailbox: u64, password: &str) -> String {
    let alias = format!("mailLocalAddress: {uid}.alias@stoa.test\n");
    user_entry(uid, mailbox, "store-a.stoa.test", password, &alias)
}

/// The configuration: POP3 in clear text for the raw client, the LDAP directory.
fn write_config(dir: &Path, url: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("ldap.secret"), format!("{ADMIN_PASSWORD}\n")).expect("secret");
    let path = dir.join("stoa.toml");
    let config = format!(
        "[smtp]\nhostname = \"mx.stoa.test\"\n\n\
         [pop3]\nallow_plaintext_auth = true\nauth_failure_delay = \"50ms\"\n\n\
         [directory]\nbackend = \"ldap\"\nurls = [\"{url}\"]\nbase = \"{BASE}\"\n\
         bind_dn = \"{ADMIN_DN}\"\nbind_password_file = \"ldap.secret\"\n\
         this_host = \"store-a.stoa.test\"\ntimeout = \"2s\"\n"
    );
    std::fs::write(&path, config).expect("write the configuration");
    path
}

/// An SMTP client after HELO and `MAIL FROM`.
fn smtp_transaction(addr: SocketAddr) -> LineConn {
    let mut conn = LineConn::connect(addr);
    let greeting = conn.line().expect("greeting");
    assert!(greeting.starts_with("220"), "{greeting}");
    conn.expect("HELO client.test", "250");
    conn.expect("MAIL FROM:<alice@ext.test>", "250");
    conn
}

/// A POP3 login's answer to PASS (after `+OK` to USER), and the connection.
fn pop3_pass(addr: SocketAddr, user: &str, password: &str) -> (LineConn, String) {
    let mut conn = LineConn::connect(addr);
    let greeting = conn.line().expect("greeting");
    assert!(greeting.starts_with("+OK"), "{greeting}");
    conn.expect(&format!("USER {user}"), "+OK");
    let reply = conn.cmd(&format!("PASS {password}"));
    (conn, reply)
}

/// The number of messages in `user`'s mailbox, over POP3.
fn pop3_count(addr: SocketAddr, user: &str, password: &str) -> usize {
    let (mut conn, reply) = pop3_pass(addr, user, password);
    assert!(reply.starts_with("+OK"), "PASS → {reply}");
    let stat = conn.expect("STAT", "+OK");
    conn.expect("QUIT", "+OK");
    stat.split(' ')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("STAT count")
}

#[test]
fn ldap_users_receive_and_log_in_and_an_outage_is_temporary() {
    if !Slapd::available() {
        eprintln!("SKIPPED: /usr/sbin/slapd is not installed (scripts/test.sh installs it)");
        return;
    }
    let argon = hash_password("ann-pw", &PasswordCost::MINIMUM).expect("argon2");
    let ldif = [
        user("joe", 1, &ssha("joe-pw", b"salt")),
        user("ann", 2, &format!("{{ARGON2}}{argon}")),
        user("carl", 3, &ssha("carl-pw", b"pepper")),
    ]
    .concat();
    let mut slapd = Slapd::start(&ldif);
    let tmp = tempfile::tempdir().expect("tempdir");
    let config = write_config(tmp.path(), &slapd.url());
    let server = ServerBuilder::mail(&tmp.path().join("mail"))
        .args(["--config".as_ref(), config.as_os_str()])
        .args([
            "--smtp-listen",
            "127.0.0.1:0",
            "--pop3-listen",
            "127.0.0.1:0",
        ])
        .start();
    let (smtp, pop3) = (server.smtp_addrs[0], server.pop3_addrs[0]);

    // Mail for an LDAP user, by the primary address and by an alias.
    let mut conn = smtp_transaction(smtp);
    conn.expect("RCPT TO:<joe@stoa.test>", "250");
    conn.expect("RCPT TO:<nobody@stoa.test>", "550");
    conn.expect("DATA", "354");
    conn.send(b"Subject: hello\r\n\r\nvia LDAP\r\n.\r\n");
    assert!(conn.line().expect("queued").starts_with("250"));
    conn.expect("MAIL FROM:<alice@ext.test>", "250");
    conn.expect("RCPT TO:<joe.alias@stoa.test>", "250");
    conn.expect("DATA", "354");
    conn.send(b"Subject: again\r\n\r\nvia an alias\r\n.\r\n");
    assert!(conn.line().expect("queued").starts_with("250"));
    conn.expect("QUIT", "221");
    // Read with the LDAP password ({SSHA}); a wrong one is refused.
    assert!(wait_until(DELIVERY_TIMEOUT, || pop3_count(
        pop3,
        "joe@stoa.test",
        "joe-pw"
    ) == 2));
    let (_, reply) = pop3_pass(pop3, "joe@stoa.test", "wrong");
    assert!(reply.starts_with("-ERR [AUTH]"), "{reply}");
    assert_eq!(
        pop3_count(pop3, "ann@stoa.test", "ann-pw"),
        0,
        "{{ARGON2}} login"
    );

    slapd.stop();
    let mut conn = smtp_transaction(smtp);
    let reply = conn.cmd("RCPT TO:<carl@stoa.test>");
    assert!(
        reply.starts_with("451 4.4.3"),
        "not cached, slapd down: {reply}"
    );
    conn.expect("RCPT TO:<joe@stoa.test>", "250");
    conn.expect("QUIT", "221");
    let (_, reply) = pop3_pass(pop3, "carl@stoa.test", "carl-pw");
    assert!(reply.starts_with("-ERR [SYS/TEMP]"), "slapd down: {reply}");

    slapd.restart();
    let mut conn = smtp_transaction(smtp);
    conn.expect("RCPT TO:<carl@stoa.test>", "250");
    conn.expect("QUIT", "221");
    assert_eq!(pop3_count(pop3, "carl@stoa.test", "carl-pw"), 0, "back");
}

/// `stoa ARGS` with `input` on standard input; its standard output.
fn stoa(args: &[&str], input: &[u8]) -> String {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_stoa"));
    command.args(args);
    let done = stoa_testkit::run(&mut command, input, Duration::from_secs(60));
    assert!(done.status.success(), "stoa {args:?}: {}", done.stderr);
    done.stdout
}

#[test]
fn export_ldif_moves_users_with_their_passwords_and_mail() {
    if !Slapd::available() {
        eprintln!("SKIPPED: /usr/sbin/slapd is not installed (scripts/test.sh installs it)");
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let mail = tmp.path().join("mail");
    let dir = mail.to_str().expect("UTF-8 path");
    stoa(
        &[
            "user",
            "add",
            "joe@stoa.test",
            "--password-stdin",
            "--mail-dir",
            dir,
        ],
        b"joe-secret\n",
    );
    stoa(
        &[
            "user",
            "add",
            "ann@stoa.test",
            "--password-stdin",
            "--mail-dir",
            dir,
        ],
        b"ann-secret\n",
    );
    let embedded =
        EmbeddedDirectory::open(&mail.join("directory"), stoa_directory::Options::default())
            .expect("directory");
    embedded
        .add_alias("joseph@stoa.test", &["joe@stoa.test"])
        .expect("alias");
    drop(embedded);
    let store =
        stoa_mailstore::MailStore::open(mail.join("store"), stoa_mailstore::Options::default())
            .expect("store");
    store
        .deliver(b"Subject: before the move\r\n\r\nkept\r\n", &[MailboxId(1)])
        .expect("deliver");
    drop(store);

    let ldif = stoa(
        &[
            "user",
            "export-ldif",
            "--mail-dir",
            dir,
            "--base",
            &format!("ou=people,{BASE}"),
            "--mail-host",
            "store-a.stoa.test",
        ],
        b"",
    );
    assert!(ldif.contains("userPassword: {ARGON2}$argon2id$"), "{ldif}");
    let slapd = Slapd::start(&ldif);
    let config = write_config(tmp.path(), &slapd.url());
    let server = ServerBuilder::mail(&mail)
        .args(["--config".as_ref(), config.as_os_str()])
        .args([
            "--smtp-listen",
            "127.0.0.1:0",
            "--pop3-listen",
            "127.0.0.1:0",
        ])
        .start();
    let (smtp, pop3) = (server.smtp_addrs[0], server.pop3_addrs[0]);
    // The same password, the same mailbox (its message is there), the alias too.
    assert_eq!(pop3_count(pop3, "joe@stoa.test", "joe-secret"), 1);
    assert_eq!(pop3_count(pop3, "ann@stoa.test", "ann-secret"), 0);
    let (_, reply) = pop3_pass(pop3, "joe@stoa.test", "ann-secret");
    assert!(reply.starts_with("-ERR [AUTH]"), "{reply}");
    let mut conn = smtp_transaction(smtp);
    conn.expect("RCPT TO:<joseph@stoa.test>", "250");
    conn.expect("QUIT", "221");
}
