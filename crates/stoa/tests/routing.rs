//! Mail on several hosts: a real slapd holding users on two store hosts, and
//! three `stoa serve` processes on loopback: an MTA (SMTP, the LDAP directory,
//! `[[mail_host]]` entries, no users of its own) and store hosts A and B (LMTP and
//! POP3 over the same directory, each its own `this_host`). Mail for a user on B
//! lands only on B and is read there over POP3 with the LDAP password; with B
//! stopped the MTA accepts 50 messages for B's users, and once B is back every one
//! arrives exactly once (a ledger of Message-IDs counted in B's mailboxes). A
//! directory that stops answering while mail waits defers it (`4.4.3`) until it
//! is back. And
//! Dovecot's LMTP (Debian `dovecot-lmtpd`, started by the test in a temporary
//! directory) as a store host behind the same MTA; skipped when not installed.
//!
//! The configurations written here are the ones "Mail on several hosts" in
//! docs/mail-guide.md shows (listen addresses are flags here, on port 0).

mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::process::Signal;
use stoa_directory::ldap::scheme::ssha;
use stoa_testkit::slapd::{ADMIN_DN, ADMIN_PASSWORD, BASE, user_entry};
use stoa_testkit::{LineConn, Slapd, wait_until};

use common::{Server, ServerBuilder};

/// How long the queue may take to deliver everything once the store host is
/// back: retries come every second here, so this is slack for a loaded machine.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// Messages accepted while store B is down.
const LEDGER: usize = 50;

const STORE_A: &str = "store-a.stoa.test";
const STORE_B: &str = "store-b.stoa.test";

/// One user: `uid@stoa.test` on `host`, mailbox `mailbox`, password `uid-pw`.
fn user(uid: &str, mailbox: u64, host: &str) -> String {
    let password = ssha(&format!("{uid}-pw"), uid.as_bytes());
    user_entry(uid, mailbox, host, &password, "")
}

/// `[directory]` for a host called `this_host`.
fn directory(url: &str, this_host: &str) -> String {
    format!(
        "[directory]\nbackend = \"ldap\"\nurls = [\"{url}\"]\nbase = \"{BASE}\"\n\
         bind_dn = \"{ADMIN_DN}\"\nbind_password_file = \"ldap.secret\"\n\
         this_host = \"{this_host}\"\n"
    )
}

/// Writes `text` as `name` in `dir`, beside the LDAP password file.
fn write_config(dir: &Path, name: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).expect("config dir");
    std::fs::write(dir.join("ldap.secret"), format!("{ADMIN_PASSWORD}\n")).expect("secret");
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write the configuration");
    path
}

/// A store host named `name`: LMTP on `lmtp` (port 0 for any), POP3, the directory.
fn store_host(dir: &Path, name: &str, url: &str, lmtp: &str) -> Server {
    let config = format!(
        "[lmtp]\nhostname = \"{name}\"\n\n[pop3]\nallow_plaintext_auth = true\n\n{}",
        directory(url, name)
    );
    let config = write_config(dir, "store.toml", &config);
    ServerBuilder::mail(&dir.join("mail"))
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--lmtp-listen", lmtp, "--pop3-listen", "127.0.0.1:0"])
        .start()
}

/// A `[[mail_host]]` entry.
fn entry(name: &str, lmtp: SocketAddr, pop3: Option<SocketAddr>) -> String {
    let pop3 = pop3
        .map(|a| format!("pop3 = \"{a}\"\n"))
        .unwrap_or_default();
    format!("[[mail_host]]\nname = \"{name}\"\nlmtp = \"{lmtp}\"\n{pop3}\n")
}

/// The MTA: SMTP, the directory, the store hosts by `[[mail_host]]` `entries`,
/// fast retries.
fn mta(dir: &Path, url: &str, entries: &str) -> Server {
    mta_with(dir, url, "", entries)
}

/// [`mta`] with `directory_keys` added to its `[directory]`.
fn mta_with(dir: &Path, url: &str, directory_keys: &str, entries: &str) -> Server {
    let config = format!(
        "[smtp]\nhostname = \"mx.stoa.test\"\nmin_backoff = \"1s\"\nmax_backoff = \"1s\"\n\n\
         {}{directory_keys}\n{entries}",
        directory(url, "mx.stoa.test"),
    );
    let config = write_config(dir, "mta.toml", &config);
    ServerBuilder::mail(&dir.join("mail"))
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--smtp-listen", "127.0.0.1:0"])
        .start()
}

/// Sends one message over SMTP; asserts it is queued.
fn send(addr: SocketAddr, to: &[&str], message: &str) {
    let mut conn = LineConn::connect(addr);
    let greeting = conn.line().expect("greeting");
    assert!(greeting.starts_with("220"), "{greeting}");
    conn.expect("HELO client.test", "250");
    conn.expect("MAIL FROM:<alice@ext.test>", "250");
    for rcpt in to {
        conn.expect(&format!("RCPT TO:<{rcpt}>"), "250");
    }
    conn.expect("DATA", "354");
    conn.send(message.as_bytes());
    conn.send(b".\r\n");
    let reply = conn.line().expect("end of data");
    assert!(reply.starts_with("250"), "{reply}");
    conn.expect("QUIT", "221");
}

/// A POP3 session after PASS, or the `-ERR` that PASS got.
fn pop3_login(addr: SocketAddr, user: &str) -> Result<LineConn, String> {
    let mut conn = LineConn::connect(addr);
    let greeting = conn.line().expect("greeting");
    assert!(greeting.starts_with("+OK"), "{greeting}");
    conn.expect(&format!("USER {user}@stoa.test"), "+OK");
    let reply = conn.cmd(&format!("PASS {user}-pw"));
    if reply.starts_with("+OK") {
        Ok(conn)
    } else {
        Err(reply)
    }
}

/// The Message-IDs in `user`'s mailbox, over POP3 (an empty list while the
/// mailbox is busy).
fn message_ids(addr: SocketAddr, user: &str) -> Vec<String> {
    let Ok(mut conn) = pop3_login(addr, user) else {
        return Vec::new();
    };
    let stat = conn.expect("STAT", "+OK");
    let n: usize = stat
        .split(' ')
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("count");
    let mut ids = Vec::new();
    for i in 1..=n {
        conn.expect(&format!("RETR {i}"), "+OK");
        loop {
            let line = conn.line().expect("message line");
            if line == "." {
                break;
            }
            if let Some(id) = line.strip_prefix("Message-ID: ") {
                ids.push(id.to_owned());
            }
        }
    }
    conn.expect("QUIT", "+OK");
    ids
}

#[test]
fn mail_goes_to_each_users_store_host_and_waits_for_a_stopped_one() {
    if !Slapd::available() {
        eprintln!("SKIPPED: /usr/sbin/slapd is not installed (scripts/test.sh installs it)");
        return;
    }
    let ldif = [
        user("ann", 1, STORE_A),
        user("bob", 2, STORE_B),
        user("carl", 3, STORE_B),
    ]
    .concat();
    let slapd = Slapd::start(&ldif);
    let tmp = tempfile::tempdir().expect("tempdir");
    let url = slapd.url();
    let a = store_host(&tmp.path().join("a"), STORE_A, &url, "127.0.0.1:0");
    let mut b = store_host(&tmp.path().join("b"), STORE_B, &url, "127.0.0.1:0");
    let entries = [(STORE_A, &a), (STORE_B, &b)]
        .map(|(name, s)| entry(name, s.lmtp_addrs[0], Some(s.pop3_addrs[0])))
        .concat();
    let mx = mta(&tmp.path().join("mx"), &url, &entries);
    let (smtp, pop3_a) = (mx.smtp_addrs[0], a.pop3_addrs[0]);

    // One message for a user on each store host: each copy only on its host.
    send(
        smtp,
        &["ann@stoa.test", "bob@stoa.test"],
        "Message-ID: <first@stoa.test>\r\nSubject: hi\r\n\r\nrouted\r\n",
    );
    let first = || vec!["<first@stoa.test>".to_owned()];
    let bob_got = wait_until(DELIVERY_TIMEOUT, || {
        message_ids(b.pop3_addrs[0], "bob") == first()
    });
    assert!(bob_got, "bob's copy on store B");
    assert!(wait_until(DELIVERY_TIMEOUT, || message_ids(pop3_a, "ann") == first()));
    let refused = pop3_login(pop3_a, "bob")
        .err()
        .expect("bob is not on store A");
    assert!(refused.starts_with("-ERR"), "{refused}");
    let refused = pop3_login(b.pop3_addrs[0], "ann")
        .err()
        .expect("ann is not on B");
    assert!(refused.starts_with("-ERR"), "{refused}");

    // Store B goes away; the MTA accepts and keeps its users' mail.
    let lmtp_b = b.lmtp_addrs[0];
    b.stop_with(Signal::KILL);
    for n in 0..LEDGER {
        let to = if n % 2 == 0 {
            "bob@stoa.test"
        } else {
            "carl@stoa.test"
        };
        send(
            smtp,
            &[to],
            &format!("Message-ID: <ledger-{n}@stoa.test>\r\nSubject: {n}\r\n\r\nx\r\n"),
        );
    }
    let b = store_host(&tmp.path().join("b"), STORE_B, &url, &lmtp_b.to_string());
    let pop3_b = b.pop3_addrs[0];
    // The ledger, and bob's first message.
    let all_in = wait_until(DELIVERY_TIMEOUT, || {
        message_ids(pop3_b, "bob").len() + message_ids(pop3_b, "carl").len() > LEDGER
    });
    assert!(all_in, "every message reached store B");
    let queue = tmp.path().join("mx/mail/queue");
    let drained = wait_until(DELIVERY_TIMEOUT, || queue_drained(&queue));
    assert!(drained, "the MTA's queue is empty");

    let mut ledger: HashMap<String, usize> = HashMap::new();
    for id in message_ids(pop3_b, "bob")
        .into_iter()
        .chain(message_ids(pop3_b, "carl"))
    {
        *ledger.entry(id).or_default() += 1;
    }
    let lost: Vec<usize> = (0..LEDGER)
        .filter(|n| !ledger.contains_key(&format!("<ledger-{n}@stoa.test>")))
        .collect();
    let duplicated: Vec<_> = ledger.iter().filter(|(_, c)| **c > 1).collect();
    assert!(lost.is_empty(), "lost: {lost:?}");
    assert!(duplicated.is_empty(), "duplicated: {duplicated:?}");
    assert_eq!(
        ledger.len(),
        LEDGER + 1,
        "the ledger and bob's first message"
    );
    assert_eq!(
        message_ids(pop3_a, "ann"),
        first(),
        "nothing more on store A"
    );
    drop(mx);
}

/// Whether no message is left in `queue` (its control files, `.runner` and
/// `.flush`, may stay).
fn queue_drained(queue: &Path) -> bool {
    std::fs::read_dir(queue).is_ok_and(|d| {
        d.flatten()
            .all(|e| e.file_name().to_string_lossy().starts_with('.'))
    })
}

/// Whether a queued envelope under `queue` mentions `text`.
fn queue_mentions(queue: &Path, text: &str) -> bool {
    let files = std::fs::read_dir(queue).into_iter().flatten().flatten();
    files
        .filter(|e| e.path().extension().is_some_and(|x| x == "env"))
        .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.contains(text)))
}

#[test]
fn a_directory_outage_at_delivery_defers_until_it_is_back() {
    if !Slapd::available() {
        eprintln!("SKIPPED: /usr/sbin/slapd is not installed (scripts/test.sh installs it)");
        return;
    }
    let mut slapd = Slapd::start(&user("bob", 2, STORE_B));
    let tmp = tempfile::tempdir().expect("tempdir");
    let url = slapd.url();
    let mut b = store_host(&tmp.path().join("b"), STORE_B, &url, "127.0.0.1:0");
    let (lmtp_b, pop3_b) = (b.lmtp_addrs[0], b.pop3_addrs[0]);
    // No cache on the MTA, so that every delivery attempt asks slapd.
    let entries = entry(STORE_B, lmtp_b, Some(pop3_b));
    let mx = mta_with(&tmp.path().join("mx"), &url, "cache_size = 0\n", &entries);
    let queue = tmp.path().join("mx/mail/queue");

    // Queued while store B is down, then the directory goes down too.
    b.stop_with(Signal::KILL);
    send(
        mx.smtp_addrs[0],
        &["bob@stoa.test"],
        "Message-ID: <outage@stoa.test>\r\nSubject: wait\r\n\r\nx\r\n",
    );
    assert!(wait_until(DELIVERY_TIMEOUT, || queue_mentions(
        &queue, "4.4.2"
    )));
    slapd.stop();
    let b = store_host(&tmp.path().join("b"), STORE_B, &url, &lmtp_b.to_string());
    // Store B is back, but the MTA cannot route: the message waits (4.4.3).
    let deferred = wait_until(DELIVERY_TIMEOUT, || queue_mentions(&queue, "4.4.3"));
    assert!(
        deferred,
        "a directory outage at delivery is a temporary failure"
    );
    slapd.restart();
    let pop3_b = b.pop3_addrs[0];
    let got = wait_until(DELIVERY_TIMEOUT, || {
        message_ids(pop3_b, "bob") == ["<outage@stoa.test>"]
    });
    assert!(got, "delivered once the directory is back");
    assert!(wait_until(DELIVERY_TIMEOUT, || queue_drained(&queue)));
}

// ---------------------------------------------------------------------------
// Dovecot's LMTP as a store host
// ---------------------------------------------------------------------------

/// Where Debian's `dovecot-core` and `dovecot-lmtpd` install the master and the
/// LMTP service.
const DOVECOT: &str = "/usr/sbin/dovecot";
const DOVECOT_LMTP: &str = "/usr/lib/dovecot/lmtp";

/// How long Dovecot may take to start or stop.
const DOVECOT_TIMEOUT: Duration = Duration::from_secs(20);

/// A Dovecot master (`dovecot -F`) in a temporary directory serving LMTP on a
/// free loopback port, every user a Maildir under `mail/LOCALPART` (a static
/// userdb: Dovecot takes every recipient). Stopped with SIGTERM when dropped,
/// its process group killed if it lingers.
struct Dovecot {
    dir: tempfile::TempDir,
    addr: SocketAddr,
    process: Option<stoa_testkit::Process>,
}

impl Dovecot {
    fn available() -> bool {
        Path::new(DOVECOT).exists() && Path::new(DOVECOT_LMTP).exists()
    }

    fn start() -> Dovecot {
        use std::os::unix::fs::PermissionsExt;
        // In /tmp, so that the sockets under base_dir stay within their length limit.
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let mail = d.join("mail");
        std::fs::create_dir_all(&mail).expect("mail dir");
        // The mail is written as the `dovecot` user.
        for (path, mode) in [(d, 0o755), (mail.as_path(), 0o777)] {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let conf = d.join("dovecot.conf");
        std::fs::write(&conf, dovecot_conf(d, port)).expect("dovecot.conf");
        let process = stoa_testkit::Process::spawn_group(
            std::process::Command::new(DOVECOT)
                .arg("-F")
                .arg("-c")
                .arg(&conf),
        );
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let up = wait_until(DOVECOT_TIMEOUT, || {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok()
        });
        let log = std::fs::read_to_string(d.join("dovecot.log")).unwrap_or_default();
        assert!(up, "dovecot did not listen on {addr}; log:\n{log}");
        Dovecot {
            dir,
            addr,
            process: Some(process),
        }
    }

    /// The Message-IDs delivered to `local@…`, from its Maildir.
    fn message_ids(&self, local: &str) -> Vec<String> {
        let maildir = self.dir.path().join("mail").join(local).join("Maildir");
        let files = ["new", "cur"]
            .iter()
            .filter_map(|sub| std::fs::read_dir(maildir.join(sub)).ok())
            .flatten()
            .flatten();
        files
            .filter_map(|e| std::fs::read_to_string(e.path()).ok())
            .filter_map(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("Message-ID: ").map(str::to_owned))
            })
            .collect()
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            process.signal(Signal::TERM);
            let _ = process.wait_exit(DOVECOT_TIMEOUT);
        }
    }
}

/// LMTP only, no TLS, a static userdb with a Maildir per local part.
fn dovecot_conf(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "base_dir = {d}/run\nstate_dir = {d}/state\nlog_path = {d}/dovecot.log\n\
         protocols = lmtp\nlisten = 127.0.0.1\nssl = no\nfirst_valid_uid = 1\n\
         mail_location = maildir:~/Maildir\n\
         passdb {{\n  driver = static\n  args = nopassword=y\n}}\n\
         userdb {{\n  driver = static\n  args = uid=dovecot gid=dovecot home={d}/mail/%n\n}}\n\
         service lmtp {{\n  inet_listener lmtp {{\n    address = 127.0.0.1\n    port = {port}\n  }}\n}}\n"
    )
}

#[test]
fn dovecot_lmtp_works_as_a_store_host() {
    if !Slapd::available() || !Dovecot::available() {
        eprintln!(
            "SKIPPED: needs /usr/sbin/slapd and Dovecot's LMTP (Debian dovecot-core, \
             dovecot-lmtpd)"
        );
        return;
    }
    const STORE_D: &str = "store-d.stoa.test";
    let slapd = Slapd::start(&[user("dave", 4, STORE_D), user("erin", 5, STORE_D)].concat());
    let dovecot = Dovecot::start();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mx = mta(
        &tmp.path().join("mx"),
        &slapd.url(),
        &entry(STORE_D, dovecot.addr, None),
    );
    // Two recipients in one LMTP transaction (a reply each), then one each.
    send(
        mx.smtp_addrs[0],
        &["dave@stoa.test", "erin@stoa.test"],
        "Message-ID: <both@stoa.test>\r\nSubject: both\r\n\r\nx\r\n",
    );
    for uid in ["dave", "erin"] {
        send(
            mx.smtp_addrs[0],
            &[&format!("{uid}@stoa.test")],
            &format!("Message-ID: <{uid}@stoa.test>\r\nSubject: one\r\n\r\nx\r\n"),
        );
    }
    let sorted = |mut ids: Vec<String>| {
        ids.sort();
        ids
    };
    for uid in ["dave", "erin"] {
        let want = sorted(vec![
            "<both@stoa.test>".into(),
            format!("<{uid}@stoa.test>"),
        ]);
        let got = wait_until(DELIVERY_TIMEOUT, || {
            sorted(dovecot.message_ids(uid)) == want
        });
        assert!(got, "{uid}: {:?}", dovecot.message_ids(uid));
    }
    let queue = tmp.path().join("mx/mail/queue");
    let drained = wait_until(DELIVERY_TIMEOUT, || queue_drained(&queue));
    assert!(drained, "the MTA's queue is empty");
}
