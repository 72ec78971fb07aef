//! `obtain` against a real ACME CA: Debian's `pebble`, started by the test in a
//! temporary directory on free loopback ports, validating HTTP-01 for real
//! against an HTTP server the test runs from `Http01` (its DNS is
//! `pebble-challtestsrv`, answering 127.0.0.1 for every name). Skipped, saying
//! so, when pebble is not installed (`apt-get install pebble`).

use std::net::{SocketAddr, TcpListener as StdTcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use stoa_acme::{Config, Http01, Store};
use stoa_testkit::wait_until;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{self, RootCertStore};

/// Every wait of this test ends by this long.
const DEADLINE: Duration = Duration::from_secs(30);

/// A child process killed (and reaped) when dropped.
struct Proc {
    child: Child,
    log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Proc {
    fn spawn(cmd: &mut Command, log: PathBuf) -> Self {
        let out = std::fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn");
        Self { child, log }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits, bounded, until `addr` accepts TCP connections; panics with the
    /// process's log if it exits or the deadline passes first.
    fn wait_listening(&mut self, addr: SocketAddr) {
        let mut exited = None;
        let up = wait_until(DEADLINE, || {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return true;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                exited = Some(status);
                return true;
            }
            false
        });
        if let Some(status) = exited {
            panic!(
                "exited ({status}) before listening on {addr}:\n{}",
                self.log()
            );
        }
        assert!(
            up,
            "not listening on {addr} after {DEADLINE:?}:\n{}",
            self.log()
        );
    }
}

fn installed(cmd: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(cmd).is_file()))
}

/// A free loopback TCP port (free when asked; the child binds it right after).
fn free_tcp() -> SocketAddr {
    StdTcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
}

fn free_udp() -> SocketAddr {
    UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("free port")
}

/// Pebble's own HTTPS certificate (pebble ships none in Debian): a CA made
/// here, and a certificate for 127.0.0.1 and localhost signed by it. Returns
/// (ca.pem, cert.pem, key.pem) written in `dir`.
fn pebble_tls(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::CrlSign,
    ];
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "stoa-acme test CA");
    let ca_cert = ca.self_signed(&ca_key).expect("ca");
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .expect("params")
        .signed_by(&key, &issuer)
        .expect("cert");
    let paths = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&paths.0, ca_cert.pem()).expect("write");
    std::fs::write(&paths.1, cert.pem()).expect("write");
    std::fs::write(&paths.2, key.serialize_pem()).expect("write");
    paths
}

/// The HTTP server pebble validates against: answers GETs from `http01`, or
/// garbage while `garbage` is set. One request per connection.
async fn serve_http01(listener: TcpListener, http01: Http01, garbage: Arc<AtomicBool>) {
    loop {
        let Ok((mut conn, _)) = listener.accept().await else {
            continue;
        };
        let http01 = http01.clone();
        let garbage = garbage.clone();
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                match tokio::time::timeout(DEADLINE, conn.read(&mut buf)).await {
                    Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                    _ => return,
                }
            }
            let path = head
                .split(|&b| b == b' ')
                .nth(1)
                .map(|p| p.split(|&b| b == b'?').next().unwrap_or(p).to_vec())
                .unwrap_or_default();
            let (status, body) = match http01.answer(&path) {
                _ if garbage.load(Ordering::SeqCst) => ("200 OK", "garbage".to_owned()),
                Some(body) => ("200 OK", body),
                None => ("404 Not Found", String::new()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = conn.write_all(response.as_bytes()).await;
            let _ = conn.shutdown().await;
        });
    }
}

/// GET `path` from pebble's management interface (HTTPS, trusted through `ca`).
async fn management_get(addr: SocketAddr, ca: &Path, path: &str) -> String {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(ca).expect("ca pem"))
        .expect("ca");
    let tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(tls));
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::IpAddress(addr.ip().into());
    let mut stream = connector.connect(name, tcp).await.expect("tls");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut response = Vec::new();
    // Go closes without close_notify sometimes: keep what arrived.
    let _ = tokio::time::timeout(DEADLINE, stream.read_to_end(&mut response)).await;
    let response = String::from_utf8(response).expect("utf-8");
    assert!(response.starts_with("HTTP/1.1 200"), "{path}: {response}");
    let (_, body) = response.split_once("\r\n\r\n").expect("a body");
    body.to_owned()
}

/// Checks `chain_pem` (leaf first) up to `root_pem` for server auth of `names`.
fn verify_chain(chain_pem: &str, root_pem: &str, names: &[&str]) {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain_pem.as_bytes())
        .collect::<Result<_, _>>()
        .expect("chain pem");
    assert!(
        chain.len() >= 2,
        "leaf and intermediate expected, got {}",
        chain.len()
    );
    let root = CertificateDer::from_pem_slice(root_pem.as_bytes()).expect("root pem");
    let anchor = webpki::anchor_from_trusted_cert(&root).expect("anchor");
    let leaf = webpki::EndEntityCert::try_from(&chain[0]).expect("leaf");
    leaf.verify_for_usage(
        webpki::ALL_VERIFICATION_ALGS,
        &[anchor],
        &chain[1..],
        UnixTime::now(),
        webpki::KeyUsage::server_auth(),
        None,
        None,
    )
    .expect("the chain verifies with pebble's root");
    for name in names {
        let server_name = ServerName::try_from(*name).expect("name");
        leaf.verify_is_valid_for_subject_name(&server_name)
            .unwrap_or_else(|e| panic!("not valid for {name}: {e}"));
    }
}

#[tokio::test]
async fn obtain_from_pebble() {
    if !installed("pebble") || !installed("pebble-challtestsrv") {
        eprintln!(
            "SKIPPED obtain_from_pebble: `pebble` / `pebble-challtestsrv` not on PATH \
             (apt-get install pebble)"
        );
        return;
    }
    let tmp = tempfile::tempdir().expect("tempdir");
    let (ca, cert, key) = pebble_tls(tmp.path());

    // The DNS: every name is 127.0.0.1 (no AAAA), its other listeners off.
    let dns = free_udp();
    let dns_management = free_tcp();
    let mut challtestsrv = Proc::spawn(
        Command::new("pebble-challtestsrv")
            .arg("-dns01")
            .arg(dns.to_string())
            .arg("-management")
            .arg(dns_management.to_string())
            .args(["-http01", "", "-https01", "", "-tlsalpn01", ""])
            .args(["-defaultIPv4", "127.0.0.1", "-defaultIPv6", ""]),
        tmp.path().join("challtestsrv.log"),
    );
    challtestsrv.wait_listening(dns_management);

    // The HTTP-01 server pebble validates against.
    let http01 = Http01::new();
    let garbage = Arc::new(AtomicBool::new(false));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let http_port = listener.local_addr().expect("addr").port();
    let server = tokio::spawn(serve_http01(listener, http01.clone(), garbage.clone()));

    let acme = free_tcp();
    let management = free_tcp();
    let config = serde_json::json!({
        "pebble": {
            "listenAddress": acme.to_string(),
            "managementListenAddress": management.to_string(),
            "certificate": cert,
            "privateKey": key,
            "httpPort": http_port,
            "tlsPort": free_tcp().port(),
            "ocspResponderURL": "",
            "externalAccountBindingRequired": false
        }
    });
    let config_path = tmp.path().join("pebble-config.json");
    std::fs::write(&config_path, config.to_string()).expect("write");
    let mut pebble = Proc::spawn(
        Command::new("pebble")
            .arg("-config")
            .arg(&config_path)
            .arg("-dnsserver")
            .arg(dns.to_string())
            .env_remove("PEBBLE_VA_ALWAYS_VALID")
            .env("PEBBLE_VA_NOSLEEP", "1")
            .env("PEBBLE_WFE_NONCEREJECT", "0")
            // Every order validates afresh (a reused authorization would let the
            // garbage case below pass without a validation).
            .env("PEBBLE_AUTHZREUSE", "0"),
        tmp.path().join("pebble.log"),
    );
    pebble.wait_listening(acme);
    pebble.wait_listening(management);

    let store = Store::open(tmp.path().join("state")).expect("store");
    let mut acme_config = Config::new(
        format!("https://{acme}/dir"),
        vec!["a.stoa.test".to_owned(), "b.stoa.test".to_owned()],
    );
    acme_config.contact = vec!["mailto:hostmaster@stoa.test".to_owned()];
    acme_config.root_pem = Some(ca.clone());
    acme_config.timeout = DEADLINE;

    let first = tokio::time::timeout(
        DEADLINE * 2,
        stoa_acme::obtain(&acme_config, &store, &http01),
    )
    .await
    .expect("obtain in time")
    .unwrap_or_else(|e| panic!("obtain: {e}\npebble:\n{}", pebble.log()));
    assert!(http01.is_empty(), "the answers are withdrawn");
    let root = management_get(management, &ca, "/roots/0").await;
    verify_chain(&first.chain_pem, &root, &["a.stoa.test", "b.stoa.test"]);
    let stored = store
        .load_cert("a.stoa.test")
        .expect("load")
        .expect("stored");
    assert_eq!(stored.chain_pem, first.chain_pem);
    assert_eq!(stored.key_pem, first.key_pem);
    assert!(first.not_before < first.not_after);
    assert!(first.renew_at() > first.not_before && first.renew_at() < first.not_after);
    let account_json = std::fs::read(tmp.path().join("state/account.json")).expect("account");
    // Pebble logs "There are now N accounts in memory" for each new account.
    let new_accounts = pebble.log().matches("accounts in memory").count();
    assert_eq!(new_accounts, 1, "pebble:\n{}", pebble.log());

    // A second order reuses the stored account: account.json is untouched and
    // pebble registers no new account; the certificate is replaced.
    let second = tokio::time::timeout(
        DEADLINE * 2,
        stoa_acme::obtain(&acme_config, &store, &http01),
    )
    .await
    .expect("obtain in time")
    .unwrap_or_else(|e| panic!("second obtain: {e}\npebble:\n{}", pebble.log()));
    verify_chain(&second.chain_pem, &root, &["a.stoa.test", "b.stoa.test"]);
    assert_ne!(second.chain_pem, first.chain_pem);
    assert_ne!(second.key_pem, first.key_pem);
    assert_eq!(
        std::fs::read(tmp.path().join("state/account.json")).expect("account"),
        account_json
    );
    assert_eq!(
        pebble.log().matches("accounts in memory").count(),
        new_accounts
    );

    // The stored account is at this pebble: another directory URL is refused,
    // not silently replaced by a new account.
    let mut elsewhere = acme_config.clone();
    elsewhere.directory_url = format!("https://{acme}/other-dir");
    let err = stoa_acme::obtain(&elsewhere, &store, &http01)
        .await
        .expect_err("an account at another CA must not be used");
    assert!(
        matches!(err, stoa_acme::Error::AccountElsewhere { .. }),
        "{err}"
    );
    assert_eq!(
        std::fs::read(tmp.path().join("state/account.json")).expect("account"),
        account_json
    );

    // A wrong answer: pebble's validation fails, obtain says so, and no
    // certificate files appear.
    garbage.store(true, Ordering::SeqCst);
    let mut bad = acme_config.clone();
    bad.domains = vec!["c.stoa.test".to_owned()];
    let err = tokio::time::timeout(DEADLINE * 2, stoa_acme::obtain(&bad, &store, &http01))
        .await
        .expect("obtain in time")
        .expect_err("a garbage answer must not give a certificate");
    eprintln!("the garbage answer's error: {err}");
    assert!(
        http01.is_empty(),
        "the answers are withdrawn after a failure too"
    );
    assert!(!tmp.path().join("state/certs/c.stoa.test").exists());
    assert!(store.load_cert("c.stoa.test").expect("load").is_none());

    server.abort();
    drop(pebble);
    drop(challtestsrv);
}
