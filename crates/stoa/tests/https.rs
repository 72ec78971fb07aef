//! `stoa serve` over HTTPS, driven with curl and `openssl s_client`: files and
//! keep-alive, ALPN, session resumption (server-side cache and tickets), TLS 1.0
//! and 1.1 refused, the certificate chosen by SNI, and the start-up errors for bad
//! certificate and key files. (Cipher suites, malformed handshakes and the
//! handshake bound are tested with raw ClientHellos in `crates/web/tests/tls.rs`.)

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{HELLO, Server, Site, curl, fetch, run_stoa, tls_pair};

/// A server with one HTTPS listener (certificate for `localhost`) and no plain one.
fn start_https(site: &Site) -> (Server, PathBuf) {
    let (cert, key) = tls_pair(site.dir.path(), "localhost");
    let server = Server::start(
        site.root(),
        &[
            "--tls-listen",
            "127.0.0.1:0",
            "--tls-cert",
            path_str(&cert),
            "--tls-key",
            path_str(&key),
        ],
    );
    assert!(server.addrs.is_empty(), "no plain listener was asked for");
    (server, cert)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// curl's options to reach `name` at the server's HTTPS port on loopback,
/// trusting `cert`.
fn curl_tls(server: &Server, name: &str, cert: &Path) -> Vec<String> {
    let port = server.tls_addrs[0].port();
    vec![
        "--resolve".into(),
        format!("{name}:{port}:127.0.0.1"),
        "--cacert".into(),
        path_str(cert).into(),
    ]
}

fn https_url(server: &Server, name: &str, path: &str) -> String {
    format!("https://{name}:{}{path}", server.tls_addrs[0].port())
}

/// `common::s_client` at the server's first TLS address.
fn s_client(server: &Server, args: &[&str], input: &[u8]) -> (bool, String) {
    common::s_client(server.tls_addrs[0], args, input)
}

const REQUEST_AND_CLOSE: &[u8] =
    b"GET /hello.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

#[test]
fn curl_fetches_files_and_keeps_the_connection_alive() {
    let site = Site::new();
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    site.write("big.bin", &big);
    let (server, cert) = start_https(&site);
    let tls = curl_tls(&server, "localhost", &cert);
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();

    let hello = fetch(&https_url(&server, "localhost", "/hello.txt"), &tls);
    assert_eq!((hello.code, hello.body.as_slice()), (200, HELLO));
    let file = fetch(&https_url(&server, "localhost", "/big.bin"), &tls);
    assert_eq!(file.code, 200);
    assert!(file.body == big, "big.bin differs over HTTPS");

    let (first, second) = (
        https_url(&server, "localhost", "/hello.txt"),
        https_url(&server, "localhost", "/big.bin"),
    );
    let mut args = tls.clone();
    // HTTP/1.1's keep-alive (HTTP/2, which curl would pick, is crates/stoa/tests/http2.rs).
    args.extend([
        "--http1.1",
        "--verbose",
        "--output",
        "/dev/null",
        "--output",
        "/dev/null",
        "--write-out",
        "%{http_code} %{num_connects} %{http_version}\n",
        &first,
        &second,
    ]);
    let run = curl(&args);
    assert_eq!(
        run.stdout, "200 1 1.1\n200 0 1.1\n",
        "the second transfer should reuse the connection; curl stderr:\n{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("Re-using existing connection"),
        "no connection reuse:\n{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("ALPN: server accepted http/1.1"),
        "no ALPN agreement:\n{}",
        run.stderr
    );
}

/// The `New, ...` / `Reused, ...` lines of `s_client -reconnect`.
fn session_lines(output: &str) -> Vec<&str> {
    output
        .lines()
        .filter(|l| l.starts_with("New, ") || l.starts_with("Reused, "))
        .collect()
}

#[test]
fn sessions_resume_from_the_cache_and_from_tickets() {
    let site = Site::new();
    let (server, _) = start_https(&site);
    // TLS 1.2 without tickets: the server-side session cache; with them: tickets.
    for tickets in [false, true] {
        let mut args = vec!["-tls1_2", "-reconnect"];
        if !tickets {
            args.push("-no_ticket");
        }
        let (ok, out) = s_client(&server, &args, b"");
        let lines = session_lines(&out);
        assert!(ok, "s_client {args:?} failed:\n{out}");
        assert_eq!(
            out.contains("TLS session ticket:"),
            tickets,
            "{args:?}: a ticket was (not) issued:\n{out}"
        );
        assert_eq!(lines.len(), 6, "one new and five reconnections:\n{out}");
        assert!(lines[0].starts_with("New, TLSv1.2"), "{lines:?}");
        assert!(
            lines[1..].iter().all(|l| l.starts_with("Reused, TLSv1.2")),
            "{args:?}: sessions not resumed: {lines:?}"
        );
    }
    // TLS 1.3: tickets arrive after the handshake, which `-reconnect` does not
    // wait for; save the session after a request and offer it again.
    let session = site.outside("tls13.session");
    let (ok, out) = s_client(
        &server,
        &["-tls1_3", "-ign_eof", "-sess_out", path_str(&session)],
        REQUEST_AND_CLOSE,
    );
    assert!(
        ok && out.contains("hello, world"),
        "first TLS 1.3 session:\n{out}"
    );
    assert_eq!(
        session_lines(&out),
        ["New, TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384"]
    );
    let (ok, out) = s_client(
        &server,
        &["-tls1_3", "-ign_eof", "-sess_in", path_str(&session)],
        REQUEST_AND_CLOSE,
    );
    assert!(
        ok && out.contains("hello, world"),
        "resumed TLS 1.3 session:\n{out}"
    );
    assert_eq!(
        session_lines(&out),
        ["Reused, TLSv1.3, Cipher is TLS_AES_256_GCM_SHA384"]
    );
}

#[test]
fn tls_1_0_and_1_1_are_refused_by_the_server() {
    let site = Site::new();
    let (server, _) = start_https(&site);
    // The control: this client does TLS 1.2 and 1.3 with this server.
    for version in ["-tls1_2", "-tls1_3"] {
        let (ok, out) = s_client(&server, &[version], b"");
        assert!(ok && out.contains(", Cipher is "), "{version}:\n{out}");
    }
    // The security level is lowered so that the client offers the old versions
    // at all: the refusal must be the server's (its alert).
    for version in ["-tls1", "-tls1_1"] {
        let (ok, out) = s_client(&server, &[version, "-cipher", "DEFAULT@SECLEVEL=0"], b"");
        assert!(!ok, "{version} was accepted:\n{out}");
        assert!(
            out.contains("SSL alert number"),
            "{version}: no alert from the server:\n{out}"
        );
        assert!(!out.contains("New, TLSv1"), "{version}:\n{out}");
    }
}

#[test]
fn sni_chooses_among_several_certificates() {
    let site = Site::new();
    let dir = site.dir.path();
    let ((alpha_crt, alpha_key), (beta_crt, beta_key)) =
        (tls_pair(dir, "alpha.test"), tls_pair(dir, "beta.test"));
    let server = Server::start(
        site.root(),
        &[
            "--tls-listen",
            "127.0.0.1:0",
            "--tls-cert",
            path_str(&alpha_crt),
            "--tls-key",
            path_str(&alpha_key),
            "--tls-cert",
            path_str(&beta_crt),
            "--tls-key",
            path_str(&beta_key),
        ],
    );
    let subject = |args: &[&str]| {
        let (ok, out) = s_client(&server, args, b"");
        assert!(ok, "s_client {args:?}:\n{out}");
        out.lines()
            .find_map(|l| l.strip_prefix("subject="))
            .unwrap_or_else(|| panic!("no subject line:\n{out}"))
            .to_owned()
    };
    assert_eq!(subject(&["-servername", "beta.test"]), "CN = beta.test");
    assert_eq!(subject(&["-servername", "alpha.test"]), "CN = alpha.test");
    // No name, or one no certificate carries: the first certificate.
    assert_eq!(subject(&["-noservername"]), "CN = alpha.test");
    assert_eq!(subject(&["-servername", "gamma.test"]), "CN = alpha.test");

    // And a verifying client gets a certificate valid for the name it asked.
    let tls = curl_tls(&server, "beta.test", &beta_crt);
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
    let hello = fetch(&https_url(&server, "beta.test", "/hello.txt"), &tls);
    assert_eq!((hello.code, hello.body.as_slice()), (200, HELLO));
}

/// The `stoa: error: ` lines of a run that must fail with status 2 and never
/// start listening.
fn config_errors(args: &[&str]) -> Vec<String> {
    let (status, stderr) = run_stoa(args, Duration::from_secs(10));
    assert_eq!(status.code(), Some(2), "stderr:\n{stderr}");
    assert!(
        !stderr.contains("listening on"),
        "started anyway:\n{stderr}"
    );
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("stoa: error: "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn bad_certificate_and_key_files_stop_the_start_with_one_line_each() {
    let site = Site::new();
    let dir = site.dir.path();
    let root = path_str(site.root());
    let (alpha_crt, alpha_key) = tls_pair(dir, "alpha.test");
    let (_, beta_key) = tls_pair(dir, "beta.test");
    let junk = site.outside("junk.pem");
    std::fs::write(&junk, b"not a PEM file\n").expect("write");
    let (missing_crt, missing_key) = (dir.join("missing.crt"), dir.join("missing.key"));
    let serve = |cert: &Path, key: &Path| {
        config_errors(&[
            "serve",
            "--docroot",
            root,
            "--tls-listen",
            "127.0.0.1:0",
            "--tls-cert",
            path_str(cert),
            "--tls-key",
            path_str(key),
        ])
    };
    let cases: [(&Path, &Path, &[String]); 5] = [
        (
            &missing_crt,
            &missing_key,
            &[
                format!("certificate {}: no such file", missing_crt.display()),
                format!("key {}: no such file", missing_key.display()),
            ],
        ),
        (
            dir,
            &alpha_key,
            &[format!("certificate {}: cannot read: ", dir.display())],
        ),
        (
            &junk,
            &alpha_key,
            &[format!(
                "certificate {}: no PEM certificate (BEGIN CERTIFICATE) in the file",
                junk.display()
            )],
        ),
        (
            &alpha_crt,
            &alpha_crt,
            &[format!("key {}: no PEM private key ", alpha_crt.display())],
        ),
        (
            &alpha_crt,
            &beta_key,
            &[format!(
                "key {} does not match certificate {}",
                beta_key.display(),
                alpha_crt.display()
            )],
        ),
    ];
    for (cert, key, expected) in cases {
        let errors = serve(cert, key);
        assert_eq!(errors.len(), expected.len(), "{errors:#?}");
        for (error, want) in errors.iter().zip(expected) {
            assert!(
                error.starts_with(want.as_str()),
                "{error:?} is not {want:?}"
            );
        }
    }

    // In a configuration file, with its other mistakes, all at once; relative
    // paths are relative to the file.
    let config = site.outside("stoa.toml");
    std::fs::write(
        &config,
        format!(
            "[[listener]]\naddress = \"127.0.0.1:0\"\ntls = {{ cert = \"nope.crt\", key = \"{}\" }}\n\
             [web]\ndocroot = \"{root}\"\nworkers = 0\n",
            beta_key.display()
        ),
    )
    .expect("write the configuration");
    let errors = config_errors(&["serve", "--config", path_str(&config)]);
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(errors.contains(&format!(
        "certificate {}: no such file",
        dir.join("nope.crt").display()
    )));
    assert!(
        errors.iter().any(|e| e.starts_with("workers: ")),
        "{errors:#?}"
    );
}

/// sslscan (Debian) probes the server the way an auditor would: every protocol
/// version, renegotiation and every cipher suite it can offer.
#[test]
fn sslscan_finds_only_modern_protocols_and_suites_and_no_renegotiation() {
    let site = Site::new();
    let (server, _) = start_https(&site);
    let addr = server.tls_addrs[0].to_string();
    let out = Command::new("timeout")
        .args(["120", "sslscan", "--no-colour", &addr])
        .stdin(Stdio::null())
        .output()
        .expect("run sslscan (scripts/test.sh installs it)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "sslscan failed:\n{text}");
    let state = |proto: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(proto))
            .and_then(|l| l.split_whitespace().nth(1))
            .unwrap_or_else(|| panic!("no {proto} line in:\n{text}"))
            .to_owned()
    };
    for old in ["SSLv2", "SSLv3", "TLSv1.0", "TLSv1.1"] {
        assert_eq!(state(old), "disabled", "{old}:\n{text}");
    }
    for modern in ["TLSv1.2", "TLSv1.3"] {
        assert_eq!(state(modern), "enabled", "{modern}:\n{text}");
    }
    assert!(
        text.contains("Session renegotiation not supported"),
        "renegotiation must be refused:\n{text}"
    );
    let suites: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("Preferred") || l.starts_with("Accepted"))
        .collect();
    assert!(!suites.is_empty(), "no accepted suite listed:\n{text}");
    for line in &suites {
        for weak in ["RC4", "DES", "NULL", "EXP", "MD5", "CBC", "SHA "] {
            assert!(
                !line.contains(weak),
                "weak suite ({weak}) accepted: {line}\n{text}"
            );
        }
    }
}
