//! The IMAP proxy (issue 52) as `stoa serve` runs it: a real slapd with users on
//! two store hosts (one on a host that is down, one without `mailHost`), two
//! store hosts (IMAP + LMTP, `[imap] trusted_proxies`), and a proxy
//! (`[imap_proxy]`, the LDAP directory, `[[mail_host]] imap` addresses). Python's
//! imaplib reads, flags and expunges each user's own mail through the proxy;
//! refusals never reach a store host; a store that is down gets
//! `NO [UNAVAILABLE]` and the session can try again; the store host logs the
//! client's address from `ID`; commands pipelined behind the login reach the
//! store host. IDLE through the proxy sees deliveries, also after a silence
//! longer than the proxy's autologout; the proxy takes passwords over STARTTLS
//! and IMAPS, not in plaintext when its TLS rule says so; and it logs in over
//! STARTTLS to a store host that takes passwords only over TLS.

mod common;

use std::ffi::OsStr;
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use stoa_directory::ldap::scheme::ssha;
use stoa_testkit::slapd::user_entry;
use stoa_testkit::{LineConn, Slapd, wait_until};

use common::{Server, ServerBuilder, ldap_directory, tls_pair, write_ldap_config};

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
    store_host_with(
        dir,
        name,
        url,
        "trusted_proxies = [\"127.0.0.1/32\"]\n",
        &[],
    )
}

/// A store host with `imap` lines in its `[imap]` table and `args` (its TLS
/// certificate) on its command line.
fn store_host_with(dir: &Path, name: &str, url: &str, imap: &str, args: &[&OsStr]) -> Server {
    let config = format!(
        "[lmtp]\nhostname = \"{name}\"\n\n[imap]\n{imap}max_connections_per_client = 0\n\n{}",
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
        .args(args)
        .start()
}

/// A `[[mail_host]]` entry: `name`'s IMAP server at `imap`.
fn mail_host(name: &str, imap: SocketAddr) -> String {
    format!("[[mail_host]]\nname = \"{name}\"\nimap = \"{imap}\"\n\n")
}

/// An IMAP proxy in `dir` over the LDAP directory at `url`: `[imap_proxy]` with
/// the test's short delays and `table` lines, then `hosts` (`[[mail_host]]`
/// entries); `args` are its listener and certificate flags.
fn proxy_with(dir: &Path, url: &str, table: &str, hosts: &str, args: &[&OsStr]) -> Server {
    let config = format!(
        "[imap_proxy]\nhostname = \"mmp.stoa.test\"\nauth_failure_delay = \"50ms\"\n\
         auth_failure_max_delay = \"50ms\"\nmax_connections_per_client = 0\n\
         backend_timeout = \"10s\"\n{table}\n{}\n{hosts}",
        ldap_directory(url, None),
    );
    let config = write_ldap_config(dir, &config);
    ServerBuilder::mail(&dir.join("mail"))
        .args(["--config".as_ref(), config.as_os_str()])
        .args(args)
        .start()
}

/// `--tls-cert CERT --tls-key KEY`.
fn tls_args<'a>(cert: &'a Path, key: &'a Path) -> [&'a OsStr; 4] {
    [
        "--tls-cert".as_ref(),
        cert.as_os_str(),
        "--tls-key".as_ref(),
        key.as_os_str(),
    ]
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
    let hosts = [
        mail_host(STORE_A, a.imap_addrs[0]),
        mail_host(STORE_B, b.imap_addrs[0]),
        mail_host(STORE_DOWN, down),
    ];
    let listen = PLAIN_LISTENER.map(OsStr::new);
    let proxy = proxy_with(&tmp.path().join("mmp"), &url, "", &hosts.concat(), &listen);
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

/// Reads lines until one starts with `prefix`, within `within` (checked between
/// lines; a read also ends at the connection's own timeout); the line, or what
/// was read before the connection ended, a read failed or the time was up.
fn line_within(c: &mut LineConn, prefix: &str, within: Duration) -> Result<String, Vec<String>> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        match c.try_raw_line() {
            Ok(Some(line)) => {
                let line = String::from_utf8_lossy(&line).into_owned();
                if line.starts_with(prefix) {
                    return Ok(line);
                }
                seen.push(line);
            }
            Ok(None) => {
                seen.push("(the connection ended)".into());
                break;
            }
            Err(e) => {
                seen.push(format!("(read failed: {e})"));
                break;
            }
        }
    }
    Err(seen)
}

/// Runs the Python `script`; its output, which it must exit 0 with.
fn python(script: &str) -> String {
    let mut command = Command::new("python3");
    command.args(["-c", script]);
    let done = stoa_testkit::run(&mut command, b"", Duration::from_secs(60));
    assert!(
        done.status.success(),
        "python: {}{}",
        done.stdout,
        done.stderr
    );
    done.stdout
}

/// One user, `ann` on store A, in a fresh slapd; `None` when slapd is missing.
fn slapd_with_ann() -> Option<Slapd> {
    if !Slapd::available() {
        eprintln!("SKIPPED: /usr/sbin/slapd is not installed (scripts/test.sh installs it)");
        return None;
    }
    Some(Slapd::start(&user("ann", 1, STORE_A)))
}

/// `--imap-proxy-listen` on a free loopback port.
const PLAIN_LISTENER: [&str; 2] = ["--imap-proxy-listen", "127.0.0.1:0"];

#[test]
fn idle_through_the_imap_proxy_sees_deliveries_even_past_the_proxys_idle_timeout() {
    let Some(mut slapd) = slapd_with_ann() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let url = slapd.url();
    let a = store_host(&tmp.path().join("a"), STORE_A, &url);
    deliver(a.lmtp_addrs[0], "ann", "before IDLE");
    // The proxy's autologout is short, its IDLE limit long (as a store host's
    // may be): a session silent in IDLE for longer than `idle_timeout` lives on.
    let table = "idle_timeout = \"2s\"\nidle_command_timeout = \"5m\"\n";
    let listen = PLAIN_LISTENER.map(OsStr::new);
    let hosts = mail_host(STORE_A, a.imap_addrs[0]);
    let proxy = proxy_with(&tmp.path().join("mmp"), &url, table, &hosts, &listen);
    let mut c = connect_from(proxy.imap_proxy_addrs[0], "127.0.0.1");
    c.send_line("a1 LOGIN ann@stoa.test ann-pw");
    let login = tagged(&mut c, "a1");
    assert!(
        login.starts_with("a1 OK") && login.contains(" IDLE"),
        "{login}"
    );
    c.send_line("a2 SELECT INBOX");
    let exists = line_within(&mut c, "* 1 EXISTS", Duration::from_secs(10));
    assert!(exists.is_ok(), "{exists:?}");
    assert!(tagged(&mut c, "a2").starts_with("a2 OK"));
    // Round 2: a delivery at once; round 3: after a silence twice the proxy's
    // idle_timeout (the time passing is the test, not a synchronisation).
    for (round, silence) in [(2, Duration::ZERO), (3, Duration::from_secs(4))] {
        c.send_line(&format!("i{round} IDLE"));
        let idling = c.line().expect("IDLE's continuation");
        assert!(idling.starts_with("+ "), "{idling}");
        stoa_testkit::pause(silence);
        deliver(a.lmtp_addrs[0], "ann", &format!("during IDLE {round}"));
        let pushed = line_within(
            &mut c,
            &format!("* {round} EXISTS"),
            Duration::from_secs(10),
        );
        assert!(pushed.is_ok(), "round {round}: {pushed:?}");
        c.send_line("DONE");
        let done = tagged(&mut c, &format!("i{round}"));
        assert!(done.starts_with(&format!("i{round} OK")), "{done}");
    }
    c.send_line("z LOGOUT");
    assert!(tagged(&mut c, "z").starts_with("z OK"));
    drop((a, proxy));
    slapd.stop();
}

#[test]
fn the_imap_proxy_takes_passwords_over_starttls_and_imaps_only() {
    let Some(mut slapd) = slapd_with_ann() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let url = slapd.url();
    let a = store_host(&tmp.path().join("a"), STORE_A, &url);
    deliver(a.lmtp_addrs[0], "ann", "for ann over TLS");
    let (cert, key) = tls_pair(tmp.path(), "localhost");
    let mut args = PLAIN_LISTENER.map(OsStr::new).to_vec();
    args.extend(["--imaps-proxy-listen", "127.0.0.1:0"].map(OsStr::new));
    args.extend(tls_args(&cert, &key));
    // Loopback is no secure network here: a password needs TLS (the TLS rule as
    // configured: no allow_plaintext_auth, secure_networks empty).
    let table = "secure_networks = []\n";
    let hosts = mail_host(STORE_A, a.imap_addrs[0]);
    let proxy = proxy_with(&tmp.path().join("mmp"), &url, table, &hosts, &args);
    let (plain, tls) = (proxy.imap_proxy_addrs[0], proxy.imaps_proxy_addrs[0]);

    // In plaintext: STARTTLS and LOGINDISABLED offered, passwords refused, and
    // no store host hears of them.
    let mut c = connect_from(plain, "127.0.0.5");
    c.send_line("a1 CAPABILITY");
    let caps = line_within(&mut c, "* CAPABILITY", Duration::from_secs(10)).expect("caps");
    assert!(
        caps.contains(" STARTTLS") && caps.contains(" LOGINDISABLED") && !caps.contains("AUTH="),
        "{caps}"
    );
    assert!(tagged(&mut c, "a1").starts_with("a1 OK"));
    c.send_line("a2 LOGIN ann@stoa.test ann-pw");
    let refused = tagged(&mut c, "a2");
    assert!(refused.starts_with("a2 NO [PRIVACYREQUIRED]"), "{refused}");
    c.send_line("a3 AUTHENTICATE PLAIN AGFubkBzdG9hLnRlc3QAYW5uLXB3");
    let refused = tagged(&mut c, "a3");
    assert!(refused.starts_with("a3 NO [PRIVACYREQUIRED]"), "{refused}");
    c.send_line("a4 LOGOUT");
    assert!(tagged(&mut c, "a4").starts_with("a4 OK"));
    assert!(log_lines(&a, "logged in").is_empty());

    // imaplib: STARTTLS on the plain listener, then IMAPS; each reads ann's mail.
    let out = python(&format!(
        r#"
import imaplib, ssl
ctx = ssl.create_default_context(cafile="{cert}")
ctx.check_hostname = False
ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
def session(how, m):
    print(how, "caps", " ".join(m.capabilities))
    print(how, "login", m.login("ann@stoa.test", "ann-pw")[0])
    print(how, "exists", m.select("INBOX")[1][0].decode())
    typ, data = m.fetch("1", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")
    print(how, "subject", data[0][1].decode().strip())
    print(how, "logout", m.logout()[0])
m = imaplib.IMAP4("127.0.0.1", {plain_port}, timeout=20)
print("plain", m.starttls(ssl_context=ctx)[0])
session("starttls", m)
session("imaps", imaplib.IMAP4_SSL("127.0.0.1", {tls_port}, ssl_context=ctx, timeout=20))
"#,
        cert = cert.display(),
        plain_port = plain.port(),
        tls_port = tls.port(),
    ));
    assert!(out.contains("plain OK"), "{out}");
    for how in ["starttls", "imaps"] {
        let line = |what: &str| {
            out.lines()
                .find(|l| l.starts_with(&format!("{how} {what} ")))
                .unwrap_or_default()
                .to_owned()
        };
        let caps = line("caps");
        assert!(
            caps.contains("AUTH=PLAIN") && !caps.contains("STARTTLS"),
            "{how}: {out}"
        );
        assert!(!caps.contains("LOGINDISABLED"), "{how}: {out}");
        assert_eq!(line("login"), format!("{how} login OK"), "{out}");
        assert_eq!(line("exists"), format!("{how} exists 1"), "{out}");
        assert_eq!(
            line("subject"),
            format!("{how} subject Subject: for ann over TLS"),
            "{out}"
        );
        assert_eq!(line("logout"), format!("{how} logout BYE"), "{out}");
    }
    let logins = wait_until(Duration::from_secs(10), || {
        log_lines(&a, "ann@stoa.test logged in").len() == 2
    });
    assert!(logins, "{:?}", log_lines(&a, "logged in"));
    drop((a, proxy));
    slapd.stop();
}

#[test]
fn the_imap_proxy_logs_in_over_starttls_to_a_store_host_that_requires_tls() {
    let Some(mut slapd) = slapd_with_ann() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("tempdir");
    let url = slapd.url();
    let (cert, key) = tls_pair(tmp.path(), STORE_A);
    // Store A takes a password only over TLS: no secure network, and no trusted
    // proxy (a trusted proxy's connection counts as secure).
    let imap = "secure_networks = []\n";
    let a = store_host_with(
        &tmp.path().join("a"),
        STORE_A,
        &url,
        imap,
        &tls_args(&cert, &key),
    );
    deliver(a.lmtp_addrs[0], "ann", "over the TLS leg");
    let hosts = mail_host(STORE_A, a.imap_addrs[0]);
    let listen = PLAIN_LISTENER.map(OsStr::new);
    let starttls = format!(
        "backend_tls = \"starttls\"\nbackend_ca = [\"{}\"]\n",
        cert.display()
    );
    let tls_proxy = proxy_with(&tmp.path().join("mmp"), &url, &starttls, &hosts, &listen);
    let plain_proxy = proxy_with(&tmp.path().join("plain"), &url, "", &hosts, &listen);

    // Over a plaintext leg the store host takes no password: UNAVAILABLE.
    let mut c = connect_from(plain_proxy.imap_proxy_addrs[0], "127.0.0.1");
    c.send_line("a1 LOGIN ann@stoa.test ann-pw");
    let refused = tagged(&mut c, "a1");
    assert!(refused.starts_with("a1 NO [UNAVAILABLE]"), "{refused}");
    assert!(logged(&plain_proxy, "LOGINDISABLED"));

    // Over STARTTLS the same login gets in: the TLS leg is what lets it.
    let mut c = connect_from(tls_proxy.imap_proxy_addrs[0], "127.0.0.1");
    c.send_line("b1 LOGIN ann@stoa.test ann-pw");
    let login = tagged(&mut c, "b1");
    assert!(login.starts_with("b1 OK"), "{login}");
    c.send_line("b2 SELECT INBOX");
    assert!(tagged(&mut c, "b2").starts_with("b2 OK"));
    c.send_line("b3 FETCH 1 (BODY.PEEK[HEADER.FIELDS (SUBJECT)])");
    let subject = line_within(&mut c, "Subject:", Duration::from_secs(10));
    assert_eq!(subject, Ok("Subject: over the TLS leg".to_owned()));
    assert!(tagged(&mut c, "b3").starts_with("b3 OK"));
    c.send_line("b4 LOGOUT");
    assert!(tagged(&mut c, "b4").starts_with("b4 OK"));
    assert!(logged(&a, "ann@stoa.test logged in"));
    drop((a, tls_proxy, plain_proxy));
    slapd.stop();
}
