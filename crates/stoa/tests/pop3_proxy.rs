//! The POP3 proxy (issue 14) as `stoa serve` runs it: a real slapd with users on
//! two store hosts (and one on a host that is down), two store hosts (POP3 +
//! LMTP, `trusted_proxies`), and a proxy (`[pop3_proxy]`, the LDAP directory,
//! `[[mail_host]]` pop3 addresses). Python's poplib logs in through the proxy
//! over STLS and POP3S; refusals never reach a store host; the store host logs
//! the client's address; a user moved to the other store is routed there after
//! the cache TTL; 200 concurrent proxied sessions while one store restarts.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use rustix::process::Signal;
use stoa_directory::ldap::scheme::ssha;
use stoa_testkit::slapd::{ADMIN_DN, ADMIN_PASSWORD, BASE, user_entry};
use stoa_testkit::{LineConn, Slapd, wait_until};

use common::{Server, ServerBuilder, ldap_directory, tls_pair, write_ldap_config};

const STORE_A: &str = "store-a.stoa.test";
const STORE_B: &str = "store-b.stoa.test";
const STORE_DOWN: &str = "store-c.stoa.test";
/// Users per store host for the concurrent sessions.
const CROWD: usize = 100;

/// One user: `uid@stoa.test` on `host`, mailbox `mailbox`, password `uid-pw`.
fn user(uid: &str, mailbox: u64, host: &str) -> String {
    let password = ssha(&format!("{uid}-pw"), uid.as_bytes());
    user_entry(uid, mailbox, host, &password, "")
}

/// A store host: POP3 on `pop3` (port 0 for any), LMTP, the proxy trusted.
fn store_host(dir: &Path, name: &str, url: &str, pop3: &str) -> Server {
    let config = format!(
        "[lmtp]\nhostname = \"{name}\"\n\n[pop3]\ntrusted_proxies = [\"127.0.0.1/32\"]\n\
         max_connections_per_client = 0\n\n{}",
        ldap_directory(url, Some(name))
    );
    let config = write_ldap_config(dir, &config);
    ServerBuilder::mail(&dir.join("mail"))
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--lmtp-listen", "127.0.0.1:0", "--pop3-listen", pop3])
        .start()
}

/// Delivers `subject` to `users` on a store host over LMTP.
fn deliver(lmtp: SocketAddr, users: &[&str], subject: &str) {
    let mut c = LineConn::connect(lmtp);
    assert!(c.line().expect("greeting").starts_with("220"));
    c.send_line("LHLO test");
    while c.line().expect("LHLO reply").starts_with("250-") {}
    c.expect("MAIL FROM:<alice@ext.test>", "250");
    for u in users {
        c.expect(&format!("RCPT TO:<{u}@stoa.test>"), "250");
    }
    c.expect("DATA", "354");
    c.send(format!("Subject: {subject}\r\n\r\nbody\r\n.\r\n").as_bytes());
    for _ in users {
        assert!(c.line().expect("per-recipient reply").starts_with("250"));
    }
}

/// Logs in through `addr` from `from` as `uid`; `Ok(STAT reply)` or the refusal.
fn session(addr: SocketAddr, from: &str, uid: &str, password: &str) -> Result<String, String> {
    let stream = connect_from(addr, from).map_err(|e| e.to_string())?;
    let mut c = LineConn::from_stream(stream, Duration::from_secs(30));
    let greeting = c.line().ok_or("no greeting")?;
    if !greeting.starts_with("+OK") {
        return Err(greeting);
    }
    c.expect(&format!("USER {uid}@stoa.test"), "+OK");
    let reply = c.cmd(&format!("PASS {password}"));
    if !reply.starts_with("+OK") {
        return Err(reply);
    }
    let stat = c.cmd("STAT");
    let quit = c.cmd("QUIT");
    match quit.starts_with("+OK") {
        true => Ok(stat),
        false => Err(quit),
    }
}

/// A connection to `addr` from the loopback address `from`.
fn connect_from(addr: SocketAddr, from: &str) -> std::io::Result<TcpStream> {
    let source: std::net::IpAddr = from.parse().expect("source address");
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    socket.bind(&SocketAddr::new(source, 0).into())?;
    socket.connect_timeout(&addr.into(), Duration::from_secs(10))?;
    Ok(socket.into())
}

/// Sets `uid`'s mailHost with ldapmodify.
fn move_user(slapd: &Slapd, uid: &str, host: &str) {
    let ldif = format!(
        "dn: uid={uid},ou=people,{BASE}\nchangetype: modify\nreplace: mailHost\nmailHost: {host}\n"
    );
    let mut command = Command::new("ldapmodify");
    command.args([
        "-x",
        "-H",
        &slapd.url(),
        "-D",
        ADMIN_DN,
        "-w",
        ADMIN_PASSWORD,
    ]);
    let done = stoa_testkit::run(&mut command, ldif.as_bytes(), Duration::from_secs(30));
    assert!(done.status.success(), "ldapmodify: {}", done.stderr);
}

/// `login lines` of a store host's log for `uid`.
fn logins(server: &Server, uid: &str) -> Vec<String> {
    let needle = format!("{uid}@stoa.test logged in");
    (server.stderr_lines().into_iter())
        .filter(|l| l.contains(&needle))
        .collect()
}

#[test]
fn the_proxy_routes_each_user_to_the_store_host_and_only_there() {
    if !Slapd::available() {
        eprintln!("SKIPPED: /usr/sbin/slapd is not installed (scripts/test.sh installs it)");
        return;
    }
    let mut ldif = vec![
        user("ann", 1, STORE_A),
        user("bob", 2, STORE_B),
        user("carl", 3, STORE_DOWN),
    ];
    for i in 0..2 * CROWD {
        let host = [STORE_A, STORE_B][i % 2];
        ldif.push(user(&format!("u{i}"), 10 + i as u64, host));
    }
    let mut slapd = Slapd::start(&ldif.concat());
    let tmp = tempfile::tempdir().expect("tempdir");
    let url = slapd.url();
    let a = store_host(&tmp.path().join("a"), STORE_A, &url, "127.0.0.1:0");
    let mut b = store_host(&tmp.path().join("b"), STORE_B, &url, "127.0.0.1:0");
    deliver(a.lmtp_addrs[0], &["ann"], "for ann on A");
    deliver(b.lmtp_addrs[0], &["bob"], "for bob on B");
    let down = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let entry = |name: &str, pop3: SocketAddr| {
        format!("[[mail_host]]\nname = \"{name}\"\npop3 = \"{pop3}\"\n\n")
    };
    let (cert, key) = tls_pair(tmp.path(), "localhost");
    let proxy_config = format!(
        "[pop3_proxy]\nhostname = \"mmp.stoa.test\"\nauth_failure_delay = \"50ms\"\n\
         auth_failure_max_delay = \"50ms\"\nmax_connections_per_client = 0\n\n{}\n{}{}{}",
        ldap_directory(&url, None),
        entry(STORE_A, a.pop3_addrs[0]),
        entry(STORE_B, b.pop3_addrs[0]),
        entry(STORE_DOWN, down),
    );
    let config = write_ldap_config(&tmp.path().join("mmp"), &proxy_config);
    let proxy = ServerBuilder::mail(&tmp.path().join("mmp/mail"))
        .args(["--config".as_ref(), config.as_os_str()])
        .args(["--pop3-proxy-listen", "127.0.0.1:0"])
        .args(["--pop3s-proxy-listen", "127.0.0.1:0"])
        .args([
            "--tls-cert".as_ref(),
            cert.as_os_str(),
            "--tls-key".as_ref(),
            key.as_os_str(),
        ])
        .start();
    let (plain, tls) = (proxy.pop3_proxy_addrs[0], proxy.pop3s_proxy_addrs[0]);

    // poplib: ann over STLS reads A's message, bob over POP3S B's.
    let script = format!(
        r#"
import poplib, ssl
ctx = ssl.create_default_context(cafile="{cert}")
ctx.check_hostname = False
ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
p = poplib.POP3("127.0.0.1", {plain_port}, timeout=20)
p.stls(ctx)
p.user("ann@stoa.test"); print("ann", p.pass_("ann-pw").decode())
print("ann", b"|".join(p.retr(1)[1]).decode()); p.quit()
p = poplib.POP3_SSL("127.0.0.1", {tls_port}, timeout=20, context=ctx)
p.user("bob@stoa.test"); print("bob", p.pass_("bob-pw").decode())
print("bob", b"|".join(p.retr(1)[1]).decode()); p.quit()
"#,
        cert = cert.display(),
        plain_port = plain.port(),
        tls_port = tls.port(),
    );
    let mut command = Command::new("python3");
    command.args(["-c", &script]);
    let done = stoa_testkit::run(&mut command, b"", Duration::from_secs(60));
    let out = &done.stdout;
    assert!(done.status.success(), "poplib: {out}{}", done.stderr);
    assert!(out.contains("ann +OK Logged in."), "{out}");
    assert!(out.contains("Subject: for ann on A"), "{out}");
    assert!(out.contains("Subject: for bob on B"), "{out}");

    // Refusals: the proxy's own, and no store host sees a login for them.
    let refused = |from: &str, uid: &str, password: &str| {
        session(plain, from, uid, password).expect_err("refused")
    };
    assert_eq!(
        refused("127.0.0.5", "ann", "wrong"),
        "-ERR [AUTH] Authentication failed"
    );
    assert_eq!(
        refused("127.0.0.5", "nobody", "x"),
        "-ERR [AUTH] Authentication failed"
    );
    assert!(refused("127.0.0.6", "carl", "carl-pw").starts_with("-ERR [SYS/TEMP]"));
    assert_eq!(logins(&a, "ann").len(), 1, "only poplib's login reached A");
    assert!(logins(&a, "nobody").is_empty() && logins(&b, "carl").is_empty());

    // The store host logs the client's address, not the proxy's.
    session(plain, "127.0.0.7", "ann", "ann-pw").expect("ann from 127.0.0.7");
    let seen = logins(&a, "ann");
    assert!(
        seen.last().is_some_and(|l| l.contains("127.0.0.7:")),
        "{seen:?}"
    );

    // bob moves to store A: after the cache TTL the proxy sends him there.
    move_user(&slapd, "bob", STORE_A);
    let moved = wait_until(Duration::from_secs(20), || {
        session(plain, "127.0.0.8", "bob", "bob-pw").is_ok() && !logins(&a, "bob").is_empty()
    });
    assert!(moved, "bob reached store A: {:?}", logins(&a, "bob"));

    // 200 concurrent sessions while store B restarts: every one on A succeeds.
    let b_pop3 = b.pop3_addrs[0];
    let restart = std::thread::spawn(move || {
        b.stop_with(Signal::KILL);
        b
    });
    let results: Vec<(usize, Result<String, String>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2 * CROWD)
            .map(|i| {
                s.spawn(move || {
                    (
                        i,
                        session(plain, "127.0.0.9", &format!("u{i}"), &format!("u{i}-pw")),
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("session thread"))
            .collect()
    });
    drop(restart.join().expect("stop B"));
    let b = store_host(&tmp.path().join("b"), STORE_B, &url, &b_pop3.to_string());
    let failed_on_a: Vec<_> = results
        .iter()
        .filter(|(i, r)| i % 2 == 0 && r.is_err())
        .collect();
    assert!(
        failed_on_a.is_empty(),
        "sessions on A failed: {failed_on_a:?}"
    );
    for (i, r) in results.iter().filter(|(i, _)| i % 2 == 1) {
        if let Err(e) = r {
            assert!(
                e.starts_with("-ERR [SYS/TEMP]") || !e.starts_with("-ERR"),
                "u{i}: {e}"
            );
        }
    }
    // B is back: its users log in through the proxy again.
    assert!(wait_until(Duration::from_secs(20), || {
        session(plain, "127.0.0.9", "u1", "u1-pw").is_ok()
    }));
    drop(b);
    slapd.stop();
}
