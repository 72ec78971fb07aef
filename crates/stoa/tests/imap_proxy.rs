//! The IMAP proxy (issue 52) as `stoa serve` runs it: a real slapd with users on
//! two store hosts (one on a host that is down, one without `mailHost`), two
//! store hosts (IMAP + LMTP, `[imap] trusted_proxies`), and a proxy
//! (`[imap_proxy]`, the LDAP directory, `[[mail_host]] imap` addresses). Python's
//! imaplib reads, flags and expunges each user's own mail through the proxy;
//! refusals never reach a store host; a store that is down gets
//! `NO [UNAVAILABLE]` and the session can try again; the store host logs the
//! client's address from `ID`; commands pipelined behind the login reach the
//! store host.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use stoa_directory::ldap::scheme::ssha;
use stoa_testkit::slapd::user_entry;
use stoa_testkit::{LineConn, Slapd, wait_until};

use common::{Server, ServerBuilder, ldap_directory, write_ldap_config};

const STORE_A: &str = "store-a.stoa.test";
const STORE_B: &str = "store-b.stoa.test";
const STORE_DOWN: &str = "store-c.stoa.test";

/// One user: `uid@stoa.test` on `host` (none when empty), mailbox `mailbox`,
/// password `uid-pw`.
fn user(uid: &str, mailbox: u64, host: &str) -> String {
    let password = ssha(&format!("{uid}-pw"), uid.as_bytes());
    user_entry(uid, mailbox, host, &password, "").replace("mailHost: \n", "")
}

/// A store host: IMAP and LMTP on free ports, the proxy (loopback) trusted.
fn store_host(dir: &Path, name: &str, url: &str) -> Server {
    let config = format!(
        "[lmtp]\nhostname = \"{name}\"\n\n[imap]\ntrusted_proxies = [\"127.0.0.1/32\"]\n\
         max_connections_per_client = 0\n\n{}",
        ldap_directory(url, Some(name))
    );
    let config = write_ldap_config(dir, &config);
    ServerBuilder::mail(&dir.join("mail"))
        .args(["--config".as_ref(), config.as_os_str()])
        .args([
            "--lmtp-listen",
            "127.0.0.1:0",
            "--imap-listen",
            "127.0.0.1:0",
        ])
        .start()
}

/// Delivers `subject` to `uid` on a store host over LMTP.
fn deliver(lmtp: SocketAddr, uid: &str, subject: &str) {
    let mut c = LineConn::connect(lmtp);
    assert!(c.line().expect("greeting").starts_with("220"));
    c.send_line("LHLO test");
    while c.line().expect("LHLO reply").starts_with("250-") {}
    c.expect("MAIL FROM:<alice@ext.test>", "250");
    c.expect(&format!("RCPT TO:<{uid}@stoa.test>"), "250");
    c.expect("DATA", "354");
    c.send(format!("Subject: {subject}\r\n\r\nbody\r\n.\r\n").as_bytes());
    assert!(c.line().expect("the delivery's reply").starts_with("250"));
}

/// A connection to `addr` from the loopback address `from`, its greeting read.
fn connect_from(addr: SocketAddr, from: &str) -> LineConn {
    let source: std::net::IpAddr = from.parse().expect("source address");
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    socket
        .bind(&SocketAddr::new(source, 0).into())
        .expect("bind");
    socket
        .connect_timeout(&addr.into(), Duration::from_secs(10))
        .expect("connect");
    let mut c = LineConn::from_stream(TcpStream::from(socket), Duration::from_secs(30));
    let greeting = c.line().expect("greeting");
    assert!(greeting.starts_with("* OK"), "{greeting}");
    c
}

/// Reads lines up to the one tagged `tag`, which it returns.
fn tagged(c: &mut LineConn, tag: &str) -> String {
    let prefix = format!("{tag} ");
    loop {
        let line = c.line().expect("a reply");
        if line.starts_with(&prefix) {
            return line;
        }
    }
}

/// Whether `server`'s log gets a line containing `needle` within 10 s (the log
/// is read by another thread, perhaps after the reply that followed the line).
fn logged(server: &Server, needle: &str) -> bool {
    wait_until(Duration::from_secs(10), || {
        !log_lines(server, needle).is_empty()
    })
}

/// The lines of `server`'s log that contain `needle`.
fn log_lines(server: &Server, needle: &str) -> Vec<String> {
    (server.stderr_lines().into_iter())
        .filter(|l| l.contains(needle))
        .collect()
}

/// imaplib through the proxy as `uid`: SELECT, FETCH of every message, STORE
/// `\Deleted` of the first, EXPUNGE, LOGOUT; prints what it saw.
fn imaplib(proxy: SocketAddr, uid: &str) -> String {
    let script = format!(
        r#"
import imaplib
m = imaplib.IMAP4("127.0.0.1", {port}, timeout=20)
print("caps", " ".join(m.capabilities))
typ, data = m.login("{uid}@stoa.test", "{uid}-pw")
print("login", typ, data[0].decode())
typ, data = m.select("INBOX")
print("exists", data[0].decode())
typ, data = m.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
for item in data:
    if isinstance(item, tuple):
        print("subject", item[1].decode().strip())
print("store", m.store("1", "+FLAGS", "\\Deleted")[0])
print("expunge", m.expunge()[1])
typ, data = m.select("INBOX")
print("after", data[0].decode())
print("logout", m.logout()[0])
"#,
        port = proxy.port(),
    );
    let mut command = Command::new("python3");
    command.args(["-c", &script]);
    let done = stoa_testkit::run(&mut command, b"", Duration::from_secs(60));
    assert!(
        done.status.success(),
        "imaplib: {}{}",
        done.stdout,
        done.stderr
    );
    done.stdout
}

#[test]
fn the_imap_proxy_routes_each_user_to_the_store_host_and_only_there() {
    if !Slapd::available() {
        eprintln!("SKIPPED: /usr/sbin/slapd is not installed (scripts/test.sh installs it)");
        return;
    }
    let ldif = [
        user("ann", 1, STORE_A),
        user("bob", 2, STORE_B),
        user("carl", 3, STORE_DOWN),
        user("dora", 4, ""),
    ];
    let mut slapd = Slapd::start(&ldif.concat());
    let tmp = tempfile::tempdir().expect("tempdir");
    let url = slapd.url();
    let a = store_host(&tmp.path().join("a"), STORE_A, &url);
    let b = store_host(&tmp.path().join("b"), STORE_B, &url);
    deliver(a.lmtp_addrs[0], "ann", "for ann on A");
    deliver(a.lmtp_addrs[0], "ann", "second for ann");
    deliver(b.lmtp_addrs[0], "bob", "for bob on B");
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let entry = |name: &str, imap: SocketAddr| {
        format!("[[mail_host]]\nname = \"{name}\"\nimap = \"{imap}\"\n\n")
    };
    let proxy_config = format!(
        "[imap_proxy]\nhostname = \"mmp.stoa.test\"\nauth_failure_delay = \"50ms\"\n\
         auth_failure_max_delay = \"50ms\"\nmax_connections_per_client = 0\n\
         backend_timeout = \"10s\"\n\n{}\n{}{}{}",
        ldap_directory(&url, None),
        entry(STORE_A, a.imap_addrs[0]),
        entry(STORE_B, b.imap_addrs[0]),
        entry(STORE_DOWN, down),
    );
    let config = write_ldap_config(&tmp.path().join("mmp"), &proxy_config);
    let proxy = ServerBuilder::mail(&tmp.path().join("mmp/mail"))
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--imap-proxy-listen", "127.0.0.1:0"])
        .start();
    let addr = proxy.imap_proxy_addrs[0];

    // imaplib: each user reads, flags and expunges the mail of its own store.
    let out = imaplib(addr, "ann");
    assert!(
        out.contains("caps IMAP4REV1 IMAP4REV2 AUTH=PLAIN SASL-IR LITERAL+ ID"),
        "{out}"
    );
    assert!(out.contains("login OK"), "{out}");
    assert!(out.contains("exists 2"), "{out}");
    assert!(out.contains("subject Subject: for ann on A"), "{out}");
    assert!(!out.contains("for bob"), "{out}");
    assert!(out.contains("expunge [b'1']"), "{out}");
    assert!(
        out.contains("after 1") && out.contains("logout BYE"),
        "{out}"
    );
    let out = imaplib(addr, "bob");
    assert!(out.contains("subject Subject: for bob on B"), "{out}");
    assert!(
        out.contains("exists 1") && !out.contains("for ann"),
        "{out}"
    );
    assert_eq!(log_lines(&a, "bob@stoa.test").len(), 0);

    // Refusals: the proxy's own; no store host hears of them (each has had one
    // proxied session so far).
    let seen = |s: &Server| log_lines(s, "proxy for").len();
    let settled = wait_until(Duration::from_secs(10), || (seen(&a), seen(&b)) == (1, 1));
    assert!(settled, "{:?}", (seen(&a), seen(&b)));
    let mut c = connect_from(addr, "127.0.0.5");
    c.send_line("a1 LOGIN ann@stoa.test wrong");
    assert!(tagged(&mut c, "a1").starts_with("a1 NO [AUTHENTICATIONFAILED]"));
    c.send_line("a2 LOGIN nobody@stoa.test x");
    assert!(tagged(&mut c, "a2").starts_with("a2 NO [AUTHENTICATIONFAILED]"));
    // The store host that is down, and the user without one: UNAVAILABLE, and
    // the session is still there for another try.
    let mut c = connect_from(addr, "127.0.0.6");
    c.send_line("b1 LOGIN carl@stoa.test carl-pw");
    assert!(tagged(&mut c, "b1").starts_with("b1 NO [UNAVAILABLE]"));
    c.send_line("b2 LOGIN dora@stoa.test dora-pw");
    assert!(tagged(&mut c, "b2").starts_with("b2 NO [UNAVAILABLE]"));
    assert!(logged(&proxy, "no mailHost"));
    assert!(logged(&proxy, "store host store-c.stoa.test"));
    assert_eq!((seen(&a), seen(&b)), (1, 1), "a refusal reached a store");

    // The retry, with commands pipelined behind the login in the same write.
    c.send(
        b"b3 LOGIN ann@stoa.test ann-pw\r\nb4 SELECT INBOX\r\n\
          b5 FETCH 1 (BODY.PEEK[HEADER.FIELDS (SUBJECT)])\r\nb6 LOGOUT\r\n",
    );
    let login = tagged(&mut c, "b3");
    assert!(login.starts_with("b3 OK [CAPABILITY IMAP4rev1"), "{login}");
    assert!(tagged(&mut c, "b4").starts_with("b4 OK"));
    let mut subject = String::new();
    let fetched = loop {
        let line = c.line().expect("FETCH reply");
        if line.starts_with("Subject:") {
            subject = line.clone();
        }
        if line.starts_with("b5 ") {
            break line;
        }
    };
    assert!(fetched.starts_with("b5 OK"), "{fetched}");
    assert_eq!(subject, "Subject: second for ann");
    assert!(tagged(&mut c, "b6").starts_with("b6 OK"));
    // The store host logs the client's address, not the proxy's.
    assert!(logged(&a, "proxy for 127.0.0.6:"));
    let from_client = wait_until(Duration::from_secs(10), || {
        let logins = log_lines(&a, "ann@stoa.test logged in");
        logins.len() == 2 && logins[1].contains("127.0.0.6:")
    });
    assert!(from_client, "{:?}", log_lines(&a, "logged in"));
    drop((a, b, proxy));
    slapd.stop();
}
