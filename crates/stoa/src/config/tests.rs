use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use stoa_web::config::{AccessLogTarget, CertKeyFiles, LogFormat, TlsListener, Web99Config};

use super::*;

/// The web server's listen address when neither file nor flags name one.
const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// A web configuration and its warnings.
#[derive(Debug)]
struct WebLoaded {
    web: stoa_web::Config,
    warnings: Vec<String>,
}

/// Loads a configuration that must include the web server.
fn load_with(file: Option<&str>, args: ServeArgs) -> Result<WebLoaded, Vec<String>> {
    load_all(file, args).map(|mut l| WebLoaded {
        web: (l.take::<stoa_web::Config>()).expect("the web server is configured"),
        warnings: l.warnings,
    })
}

fn load_all(file: Option<&str>, args: ServeArgs) -> Result<Loaded, Vec<String>> {
    let files: HashMap<PathBuf, String> = file
        .map(|text| (PathBuf::from("/etc/stoa/stoa.toml"), text.to_owned()))
        .into_iter()
        .collect();
    let args = ServeArgs {
        config: file.map(|_| PathBuf::from("/etc/stoa/stoa.toml")),
        ..args
    };
    load(
        &args,
        |p| {
            files
                .get(p)
                .cloned()
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        },
        Path::new("/var/lib/stoa/web99"),
    )
}

fn tmp_docroot() -> String {
    std::env::temp_dir().display().to_string()
}

#[test]
fn flags_alone_are_enough() {
    let args = ServeArgs {
        docroot: Some(std::env::temp_dir()),
        listen: vec!["127.0.0.1:0".into(), "[::1]:0".into()],
        workers: Some("3".into()),
        access_log: Some("-".into()),
        head_timeout: Some("200ms".into()),
        ..ServeArgs::default()
    };
    let loaded = load_with(None, args).expect("valid");
    assert_eq!(loaded.web.listen.len(), 2);
    assert_eq!(loaded.web.workers, 3);
    assert_eq!(loaded.web.access_log, AccessLogTarget::Stdout);
    assert_eq!(loaded.web.limits.head_timeout, Duration::from_millis(200));
}

#[test]
fn defaults_to_loopback_8080() {
    let args = ServeArgs {
        docroot: Some(std::env::temp_dir()),
        ..ServeArgs::default()
    };
    let loaded = load_with(None, args).expect("valid");
    assert_eq!(
        loaded.web.listen,
        vec![DEFAULT_LISTEN.parse::<SocketAddr>().expect("addr")]
    );
}

#[test]
fn file_is_read_and_flags_override_it() {
    let file = format!(
        r#"
[[listener]]
address = "127.0.0.1:9000"

[web]
docroot = "{}"
workers = 2
access_log = "/var/log/stoa/access.log"
log_format = "combined"

[web.limits]
head_timeout = "5s"
max_head = "16KiB"
keepalive_requests = 50

[web.cache]
max_memory_file = 4096
"#,
        tmp_docroot()
    );
    let loaded = load_with(Some(&file), ServeArgs::default()).expect("valid");
    assert_eq!(
        loaded.web.listen,
        vec!["127.0.0.1:9000".parse::<SocketAddr>().expect("addr")]
    );
    assert_eq!(loaded.web.workers, 2);
    assert_eq!(loaded.web.log_format, LogFormat::Combined);
    assert_eq!(loaded.web.limits.head_timeout, Duration::from_secs(5));
    assert_eq!(loaded.web.limits.head.max_head, 16 * 1024);
    assert_eq!(loaded.web.limits.keepalive_requests, 50);
    assert_eq!(loaded.web.cache.max_memory_file, 4096);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

    let flags = ServeArgs {
        listen: vec!["127.0.0.1:9001".into()],
        workers: Some("1".into()),
        access_log: Some("off".into()),
        ..ServeArgs::default()
    };
    let loaded = load_with(Some(&file), flags).expect("valid");
    assert_eq!(
        loaded.web.listen,
        vec!["127.0.0.1:9001".parse::<SocketAddr>().expect("addr")]
    );
    assert_eq!(loaded.web.workers, 1);
    assert_eq!(loaded.web.access_log, AccessLogTarget::Off);
}

#[test]
fn every_error_is_reported_at_once() {
    let file = r#"
[[listener]]
address = "localhost"
protocol = "gopher"

[web]
docroot = "/nonexistent/stoa-docroot"
workers = "many"
runtime = "green-threads"
log_format = "fancy"
colour = "blue"

[web.limits]
head_timeout = "soon"
max_headers = 1000
max_head = "lots"
send_timeout = 0
"#;
    let flags = ServeArgs {
        listen: vec!["nowhere".into()],
        max_connections: Some("-1".into()),
        ..ServeArgs::default()
    };
    let errors = load_with(Some(file), flags).expect_err("invalid");
    let all = errors.join("\n");
    for needle in [
        "listener[0].address",
        "listener[0].protocol",
        "web.workers",
        "web.runtime",
        "web.log_format",
        "web.limits.head_timeout",
        "web.limits.max_head",
        "web.limits.max_headers",
        "web.limits.send_timeout",
        "--listen nowhere",
        "--max-connections -1",
        "/nonexistent/stoa-docroot: not a directory",
    ] {
        assert!(all.contains(needle), "missing {needle:?} in:\n{all}");
    }
}

#[test]
fn unknown_keys_are_errors_with_what_they_likely_meant() {
    // Issue 56: `[smpt]` ran no mail server and `acces_log` wrote no log, both with
    // a warning and exit 0.
    let file = format!(
        "[web]\ndocroot = \"{}\"\ncolour = \"blue\"\nacces_log = \"a.log\"\n[nntp]\n[smpt]\n",
        tmp_docroot()
    );
    let errors = load_with(Some(&file), ServeArgs::default()).expect_err("invalid");
    for expected in [
        "web.colour: unknown key",
        "web.acces_log: unknown key (did you mean web.access_log?)",
        "nntp: unknown key",
        "smpt: unknown key (did you mean smtp?)",
    ] {
        assert!(
            errors.iter().any(|e| e.starts_with(expected)),
            "{expected}: {errors:?}"
        );
    }
    assert!(
        !errors
            .iter()
            .any(|e| e.starts_with("nntp") && e.contains("mean")),
        "{errors:?}"
    );
}

/// Issue 21: a syntax error or a missing file was followed by errors that only
/// follow from it ("no document root"), as if the file had been read. Each
/// stands alone now.
#[test]
fn syntax_errors_and_missing_files_are_errors() {
    let errors = load_all(Some("[web\ndocroot = \"/srv/www\"\n"), ServeArgs::default())
        .expect_err("invalid");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("/etc/stoa/stoa.toml:1:5: unclosed table"),
        "{errors:?}"
    );
    let args = ServeArgs {
        config: Some(PathBuf::from("/missing.toml")),
        ..ServeArgs::default()
    };
    let errors = load(
        &args,
        |_| Err(io::Error::from(io::ErrorKind::NotFound)),
        Path::new("/var/lib/stoa/web99"),
    )
    .expect_err("missing");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with("/missing.toml: "), "{errors:?}");
}

#[test]
fn relative_docroot_is_relative_to_the_file() {
    let file = "[web]\ndocroot = \"www\"\n";
    let errors = load_with(Some(file), ServeArgs::default()).expect_err("no such dir");
    assert!(
        errors.iter().any(|e| e.contains("/etc/stoa/www")),
        "{errors:?}"
    );
}

#[test]
fn web99_by_flag_or_file() {
    let off = load_with(
        None,
        ServeArgs {
            docroot: Some(std::env::temp_dir()),
            ..ServeArgs::default()
        },
    )
    .expect("valid");
    assert_eq!(off.web.web99, None);

    let on = ServeArgs {
        docroot: Some(std::env::temp_dir()),
        web99: true,
        ..ServeArgs::default()
    };
    let loaded = load_with(None, on).expect("valid");
    let w = loaded.web.web99.expect("enabled");
    assert_eq!(w.state_dir, PathBuf::from("/var/lib/stoa/web99"));
    assert_eq!(w.path, "/web99");
    assert_eq!(w.max_post_body, 64 * 1024);

    let file = format!(
        "[web]\ndocroot = \"{}\"\n[web99]\nstate_dir = \"/srv/state\"\npath = \"/specweb99\"\nmax_post_body = \"8KiB\"\n",
        tmp_docroot()
    );
    let w = load_with(Some(&file), ServeArgs::default())
        .expect("valid")
        .web
        .web99
        .expect("enabled");
    assert_eq!(
        (w.state_dir, w.path, w.max_post_body),
        (PathBuf::from("/srv/state"), "/specweb99".into(), 8192)
    );

    let flag_state = ServeArgs {
        web99_state: Some(PathBuf::from("/elsewhere")),
        ..ServeArgs::default()
    };
    let w = load_with(Some(&file), flag_state)
        .expect("valid")
        .web
        .web99
        .expect("enabled");
    assert_eq!(w.state_dir, PathBuf::from("/elsewhere"));

    let disabled = format!(
        "[web]\ndocroot = \"{}\"\n[web99]\nenabled = false\n",
        tmp_docroot()
    );
    assert_eq!(
        load_with(Some(&disabled), ServeArgs::default())
            .expect("valid")
            .web
            .web99,
        None
    );
}

#[test]
fn web99_state_inside_the_docroot_is_refused() {
    let root = std::env::temp_dir();
    let args = ServeArgs {
        docroot: Some(root.clone()),
        web99_state: Some(root.join("state")),
        ..ServeArgs::default()
    };
    let errors = load_with(None, args).expect_err("inside");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("inside the document root")),
        "{errors:?}"
    );
    let bad_path = format!(
        "[web]\ndocroot = \"{}\"\n[web99]\npath = \"web99\"\n",
        tmp_docroot()
    );
    let errors = load_with(Some(&bad_path), ServeArgs::default()).expect_err("bad path");
    assert!(
        errors.iter().any(|e| e.contains("web99.path")),
        "{errors:?}"
    );
}

#[test]
fn web99_manager_networks() {
    let web99 = |extra: &str| {
        let file = format!("[web]\ndocroot = \"{}\"\n[web99]\n{extra}", tmp_docroot());
        load_with(Some(&file), ServeArgs::default()).map(|l| l.web.web99.expect("enabled"))
    };
    let nets = |w: &Web99Config| -> Vec<String> {
        w.manager_networks.iter().map(ToString::to_string).collect()
    };
    let default = web99("").expect("valid");
    assert_eq!(nets(&default), ["127.0.0.0/8", "::1/128"]);
    let listed = web99("manager_networks = [\"192.0.2.0/24\", \"2001:db8::7\", \"10.1.2.3/8\"]\n")
        .expect("valid");
    assert_eq!(
        nets(&listed),
        ["192.0.2.0/24", "2001:db8::7/128", "10.0.0.0/8"]
    );
    assert!(listed.is_manager("192.0.2.9".parse().expect("address")));
    assert!(!listed.is_manager("127.0.0.1".parse().expect("address")));
    let none = web99("manager_networks = []\n").expect("valid");
    assert!(!none.is_manager("127.0.0.1".parse().expect("address")));
    let errors = web99("manager_networks = [\"localhost\"]\n").expect_err("not a network");
    assert!(
        errors.iter().any(|e| e.contains("web99.manager_networks")),
        "{errors:?}"
    );
}

/// Self-signed pairs `alpha` (for `alpha.test`) and `beta` (`beta.test`) in a
/// temporary directory.
fn cert_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["alpha", "beta"] {
        let c = rcgen::generate_simple_self_signed(vec![format!("{name}.test")])
            .expect("generate a certificate");
        std::fs::write(dir.path().join(format!("{name}.crt")), c.cert.pem()).expect("write");
        std::fs::write(
            dir.path().join(format!("{name}.key")),
            c.signing_key.serialize_pem(),
        )
        .expect("write");
    }
    dir
}

fn pair(dir: &Path, name: &str) -> CertKeyFiles {
    CertKeyFiles {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    }
}

#[test]
fn https_listeners_in_every_form() {
    let certs = cert_dir();
    let d = certs.path().display();
    let file = format!(
        r#"
[[listener]]
address = "127.0.0.1:8080"

[[listener]]
address = "127.0.0.1:8443"
tls = {{ cert = "{d}/alpha.crt", key = "{d}/alpha.key" }}

[[listener]]
address = "127.0.0.1:9443"
protocol = "https"
[[listener.tls]]
cert = "{d}/beta.crt"
key = "{d}/beta.key"
[[listener.tls]]
cert = "{d}/alpha.crt"
key = "{d}/alpha.key"

[web]
docroot = "{}"

[web.limits]
max_handshakes = 64
"#,
        tmp_docroot()
    );
    let loaded = load_with(Some(&file), ServeArgs::default()).expect("valid");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let web = loaded.web;
    assert_eq!(web.listen, vec!["127.0.0.1:8080".parse().expect("addr")]);
    let (alpha, beta) = (pair(certs.path(), "alpha"), pair(certs.path(), "beta"));
    assert_eq!(
        web.tls_listen,
        vec![
            TlsListener {
                addr: "127.0.0.1:8443".parse().expect("addr"),
                certs: vec![alpha.clone()],
            },
            TlsListener {
                addr: "127.0.0.1:9443".parse().expect("addr"),
                certs: vec![beta, alpha],
            },
        ]
    );
    assert_eq!(web.limits.max_handshakes, 64);
}

#[test]
fn https_listener_mistakes_are_all_reported() {
    let file = r#"
[[listener]]
address = "127.0.0.1:8443"
protocol = "https"

[[listener]]
address = "127.0.0.1:8444"
protocol = "http"
tls = { cert = "a.crt", key = "a.key" }

[[listener]]
address = "127.0.0.1:8445"
tls = "site.pem"

[[listener]]
address = "127.0.0.1:8446"
tls = []

[[listener]]
address = "127.0.0.1:8447"
tls = { cert = "site.crt", colour = "blue" }

[[listener]]
address = "127.0.0.1:8448"
tls = { cert = "site.crt", key = "/nonexistent/site.key" }

[web.limits]
max_handshakes = 0
"#;
    let args = ServeArgs {
        docroot: Some(std::env::temp_dir()),
        ..ServeArgs::default()
    };
    let errors = load_with(Some(file), args).expect_err("invalid");
    let all = errors.join("\n");
    for needle in [
        "listener[0].tls: missing: an https listener needs",
        "listener[1].tls: an http listener takes no certificates",
        "listener[2].tls: expected { cert = \"FILE\", key = \"FILE\" }",
        "listener[3].tls: expected",
        "listener[4].tls.key: missing",
        // Relative to the configuration file, and each file on its own line.
        "certificate /etc/stoa/site.crt: no such file",
        "key /nonexistent/site.key: no such file",
        "web.limits.max_handshakes: must be at least 1",
    ] {
        assert!(all.contains(needle), "missing {needle:?} in:\n{all}");
    }
    assert_eq!(
        errors.iter().filter(|e| e.contains("site.crt")).count(),
        1,
        "a file shared by listeners is reported once:\n{all}"
    );
}

#[test]
fn tls_flags_replace_the_file_listeners() {
    let certs = cert_dir();
    let file = format!(
        "[[listener]]\naddress = \"127.0.0.1:9000\"\n[web]\ndocroot = \"{}\"\n",
        tmp_docroot()
    );
    let (alpha, beta) = (pair(certs.path(), "alpha"), pair(certs.path(), "beta"));
    let flags = ServeArgs {
        tls_listen: vec!["127.0.0.1:0".into(), "[::1]:0".into()],
        tls_cert: vec![alpha.cert.clone(), beta.cert.clone()],
        tls_key: vec![alpha.key.clone(), beta.key.clone()],
        ..ServeArgs::default()
    };
    let web = load_with(Some(&file), flags).expect("valid").web;
    assert!(web.listen.is_empty(), "no plain listener: {:?}", web.listen);
    assert_eq!(web.tls_listen.len(), 2);
    assert!(
        web.tls_listen
            .iter()
            .all(|l| l.certs == [alpha.clone(), beta.clone()])
    );

    let mistakes = [
        (
            vec![],
            vec![alpha.cert.clone()],
            vec![],
            "need --tls-listen",
        ),
        (
            vec!["127.0.0.1:0".into()],
            vec![alpha.cert.clone()],
            vec![],
            "in pairs (1 certificates, 0 keys)",
        ),
        (
            vec!["127.0.0.1:0".into()],
            vec![],
            vec![],
            "--tls-listen: needs --tls-cert",
        ),
        (
            vec!["nowhere".into()],
            vec![alpha.cert.clone()],
            vec![alpha.key.clone()],
            "--tls-listen nowhere",
        ),
        (
            vec!["127.0.0.1:0".into()],
            vec![alpha.cert.clone()],
            vec![beta.key.clone()],
            "beta.key does not match certificate",
        ),
    ];
    for (tls_listen, tls_cert, tls_key, needle) in mistakes {
        let args = ServeArgs {
            docroot: Some(std::env::temp_dir()),
            tls_listen,
            tls_cert,
            tls_key,
            ..ServeArgs::default()
        };
        let errors = load_with(None, args).expect_err(needle);
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "missing {needle:?} in {errors:?}"
        );
    }
}

#[test]
fn mail_only_flags_configure_no_web_server() {
    let args = ServeArgs {
        mail_dir: Some(PathBuf::from("/var/mail/stoa")),
        smtp_listen: vec!["127.0.0.1:2525".into()],
        submission_listen: vec!["[::1]:587".into()],
        domain: vec!["Example.COM.".into()],
        relay_host: Some("smarthost.test:25".into()),
        trusted_net: vec!["192.0.2.7/24".into(), "2001:db8::1".into()],
        workers: Some("3".into()),
        ..ServeArgs::default()
    };
    let mut loaded = load_all(None, args).expect("valid");
    assert!(!loaded.runs::<stoa_web::Config>());
    let smtp = loaded.take::<stoa_smtp::Config>().expect("mail configured");
    assert_eq!(smtp.mail_dir, PathBuf::from("/var/mail/stoa"));
    assert_eq!(
        smtp.listen,
        ["127.0.0.1:2525".parse::<SocketAddr>().expect("addr")]
    );
    assert_eq!(
        smtp.submission_listen,
        ["[::1]:587".parse::<SocketAddr>().expect("addr")]
    );
    assert_eq!(smtp.domains, ["example.com"]);
    assert_eq!(smtp.relay_host.as_deref(), Some("smarthost.test:25"));
    let nets: Vec<String> = smtp
        .trusted_networks
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(nets, ["192.0.2.0/24", "2001:db8::1/128"]);
    assert_eq!(smtp.workers, 3);
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("never offers AUTH")),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn smtp_table_and_flags_over_it() {
    let file = "[smtp]\nmail_dir = \"mail\"\nhostname = \"mx.test\"\ndomains = [\"a.test\", \"b.test\"]\n\
                listen = [\"127.0.0.1:25\"]\nmax_message_size = \"20MiB\"\nmax_recipients = 50\n\
                command_timeout = \"2m\"\nmin_backoff = \"1m\"\nmax_backoff = \"1h\"\n\
                max_queue_lifetime = \"2d\"\n";
    let mut loaded = load_all(Some(file), ServeArgs::default()).expect("valid");
    assert!(!loaded.runs::<stoa_web::Config>());
    let smtp = loaded.take::<stoa_smtp::Config>().expect("mail configured");
    assert_eq!(smtp.mail_dir, PathBuf::from("/etc/stoa/mail"));
    assert_eq!(smtp.hostname, "mx.test");
    assert_eq!(smtp.domains, ["a.test", "b.test"]);
    assert_eq!(smtp.limits.session.max_message_size, 20 * 1024 * 1024);
    assert_eq!(smtp.limits.session.max_recipients, 50);
    assert_eq!(smtp.limits.command_timeout, Duration::from_secs(120));
    assert_eq!(smtp.queue.min_backoff, Duration::from_secs(60));
    assert_eq!(smtp.queue.max_lifetime, Duration::from_secs(2 * 86_400));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let flags = ServeArgs {
        smtp_listen: vec!["127.0.0.1:2525".into()],
        domain: vec!["c.test".into()],
        ..ServeArgs::default()
    };
    let smtp = load_all(Some(file), flags)
        .expect("valid")
        .take::<stoa_smtp::Config>()
        .expect("mail");
    assert_eq!(
        smtp.listen,
        ["127.0.0.1:2525".parse::<SocketAddr>().expect("addr")]
    );
    assert_eq!(smtp.domains, ["c.test"]);
}

#[test]
fn mail_errors_join_the_web_errors() {
    let args = ServeArgs {
        listen: vec!["127.0.0.1:8080".into()],
        smtp_listen: vec!["nowhere".into()],
        ..ServeArgs::default()
    };
    let errors = load_all(None, args).expect_err("invalid");
    assert!(
        errors.iter().any(|e| e.contains("no document root")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("--smtp-listen nowhere")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("no mail directory")),
        "{errors:?}"
    );
    let file = "[smtp]\nmail_dir = \"/m\"\nlisten = [\"127.0.0.1:25\"]\nmin_backoff = \"10m\"\nmax_backoff = \"1m\"\nmax_recipients = 0\n";
    let errors = load_all(Some(file), ServeArgs::default()).expect_err("invalid");
    assert!(
        errors.iter().any(|e| e.contains("smtp.max_backoff")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("smtp.max_recipients")),
        "{errors:?}"
    );
}

#[test]
fn pop3_flags_alone_configure_pop3_only() {
    let args = ServeArgs {
        mail_dir: Some(PathBuf::from("/var/mail/stoa")),
        pop3_listen: vec!["127.0.0.1:1100".into()],
        workers: Some("2".into()),
        ..ServeArgs::default()
    };
    let mut loaded = load_all(None, args).expect("valid");
    assert!(!loaded.runs::<stoa_web::Config>() && !loaded.runs::<stoa_smtp::Config>());
    let pop3 = loaded.take::<Pop3>().expect("POP3 configured");
    assert_eq!(pop3.mail_dir, PathBuf::from("/var/mail/stoa"));
    assert_eq!(
        pop3.config.listen,
        ["127.0.0.1:1100".parse::<SocketAddr>().expect("addr")]
    );
    assert_eq!(pop3.config.workers, 2);
    assert!(!pop3.config.allow_plaintext_auth, "TLS required by default");
    assert!(
        loaded
            .warnings
            .iter()
            .any(|w| w.contains("accepts no login")),
        "{:?}",
        loaded.warnings
    );
}

#[test]
fn pop3_table_beside_smtp_shares_the_mail_dir() {
    let file = "[smtp]\nmail_dir = \"mail\"\nlisten = [\"127.0.0.1:25\"]\n\
                [pop3]\nlisten = [\"127.0.0.1:110\"]\nallow_plaintext_auth = true\n\
                hostname = \"pop.test\"\nidle_timeout = \"15m\"\nlogin_timeout = \"30s\"\n\
                auth_failure_delay = \"1s\"\nauth_failure_max_delay = \"8s\"\n\
                auth_max_failures = 5\nmax_connections_per_client = 0\n";
    let mut loaded = load_all(Some(file), ServeArgs::default()).expect("valid");
    let (smtp, pop3) = (
        loaded.take::<stoa_smtp::Config>().expect("smtp"),
        loaded.take::<Pop3>().expect("pop3"),
    );
    assert_eq!(pop3.mail_dir, smtp.mail_dir);
    assert_eq!(pop3.mail_dir, PathBuf::from("/etc/stoa/mail"));
    let c = &pop3.config;
    assert!(c.allow_plaintext_auth);
    assert_eq!(c.hostname, "pop.test");
    assert_eq!(c.limits.idle_timeout, Duration::from_secs(900));
    assert_eq!(c.limits.login_timeout, Duration::from_secs(30));
    assert_eq!(c.limits.max_connections_per_client, 0);
    assert_eq!(c.auth_throttle.delay, Duration::from_secs(1));
    assert_eq!(c.auth_throttle.max_delay, Duration::from_secs(8));
    assert_eq!(c.auth_throttle.max_failures, 5);
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    // The flags replace the file's listeners.
    let flags = ServeArgs {
        pop3_listen: vec!["127.0.0.1:1110".into()],
        ..ServeArgs::default()
    };
    let pop3 = load_all(Some(file), flags)
        .expect("valid")
        .take::<Pop3>()
        .expect("pop3");
    assert_eq!(
        pop3.config.listen,
        ["127.0.0.1:1110".parse::<SocketAddr>().expect("addr")]
    );
}

#[test]
fn pop3_errors_are_reported_with_the_rest() {
    let file = "[smtp]\nmail_dir = \"/a\"\nlisten = [\"127.0.0.1:25\"]\n\
                [pop3]\nmail_dir = \"/b\"\ntls_listen = [\"127.0.0.1:995\"]\n\
                allow_plaintext_auth = 1\nsession_timeout = 0\n\
                auth_failure_delay = \"5s\"\nauth_failure_max_delay = \"1s\"\n";
    let errors = load_all(Some(file), ServeArgs::default()).expect_err("invalid");
    for needle in [
        "pop3.mail_dir /b differs from smtp.mail_dir /a",
        "a POP3S listener needs certificates",
        "pop3.allow_plaintext_auth: expected true or false",
        "pop3.session_timeout: must be more than zero",
        "pop3.auth_failure_max_delay: must be at least auth_failure_delay",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "{needle}: {errors:?}"
        );
    }
    let args = ServeArgs {
        pop3_listen: vec!["nowhere".into()],
        ..ServeArgs::default()
    };
    let errors = load_all(None, args).expect_err("invalid");
    assert!(
        errors.iter().any(|e| e.contains("--pop3-listen nowhere")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("no mail directory")),
        "{errors:?}"
    );
}

#[test]
fn pop3_proxy_table_flags_and_mistakes() {
    let file = "[pop3_proxy]\nlisten = [\"127.0.0.1:1110\"]\nbackend_tls = \"stls\"\n\
                forward_client = false\nbackend_timeout = \"5s\"\nsecure_networks = []\n\n\
                [pop3]\nmail_dir = \"/m\"\nlisten = [\"127.0.0.1:110\"]\n\
                trusted_proxies = [\"10.0.0.0/8\", \"192.0.2.1\"]\n\n\
                [[mail_host]]\nname = \"store1.test\"\npop3 = \"127.0.0.2:110\"\n";
    let mut loaded = load_all(Some(file), ServeArgs::default()).expect("valid");
    let proxy = loaded.take::<Pop3Proxy>().expect("the proxy");
    assert_eq!(
        proxy.config.listen,
        ["127.0.0.1:1110".parse().expect("addr")]
    );
    assert!(proxy.config.secure_networks.is_empty());
    assert_eq!(proxy.proxy.backend_tls, stoa_pop3::BackendTls::StartTls);
    assert!(!proxy.proxy.forward_client);
    assert_eq!(proxy.proxy.reply_timeout, std::time::Duration::from_secs(5));
    assert_eq!(proxy.proxy.stores[0].pop3.as_deref(), Some("127.0.0.2:110"));
    assert_eq!(
        proxy.mail_dir.as_deref(),
        Some(Path::new("/m")),
        "beside the store"
    );
    let pop3 = loaded.take::<Pop3>().expect("pop3");
    assert_eq!(pop3.config.trusted_proxies.len(), 2);
    assert_eq!(pop3.config.secure_networks, stoa_pop3::config::loopback());

    // Alone with the embedded directory it has none; a bad key value; no listener.
    let file = "[pop3_proxy]\nbackend_tls = \"maybe\"\nforward_client = 1\n";
    let errors = load_all(Some(file), ServeArgs::default()).expect_err("invalid");
    for needle in [
        "pop3_proxy.backend_tls \"maybe\": expected",
        "pop3_proxy.forward_client: expected true or false",
        "no POP3 proxy listener: give --pop3-proxy-listen ADDR:PORT",
        "the POP3 proxy needs a directory",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "{needle}: {errors:?}"
        );
    }
    let args = ServeArgs {
        pop3_proxy_listen: vec!["127.0.0.1:0".into()],
        mail_dir: Some("/m".into()),
        ..ServeArgs::default()
    };
    let loaded = load_all(None, args).expect("the flag alone, the embedded directory");
    assert!(!loaded.runs::<stoa_web::Config>() && !loaded.runs::<stoa_smtp::Config>());
    assert!(loaded.runs::<Pop3Proxy>());
}

#[test]
fn imap_proxy_table_flags_and_mistakes() {
    let file = "[imap_proxy]\nlisten = [\"127.0.0.1:1143\"]\nbackend_tls = \"starttls\"\n\
                forward_client = false\nbackend_timeout = \"5s\"\nidle_timeout = \"45m\"\n\n\
                [imap]\nmail_dir = \"/m\"\nlisten = [\"127.0.0.1:143\"]\n\
                trusted_proxies = [\"10.0.0.0/8\", \"192.0.2.1\"]\n\n\
                [[mail_host]]\nname = \"store1.test\"\nimap = \"127.0.0.2:143\"\n";
    let mut loaded = load_all(Some(file), ServeArgs::default()).expect("valid");
    let printed = effective(&loaded);
    for line in [
        "[imap_proxy]\nmail_dir = \"/m\"\n",
        "backend_tls = \"starttls\"\n",
        "forward_client = false\n",
        "trusted_proxies = [\"10.0.0.0/8\", \"192.0.2.1/32\"]\n",
        "imap = \"127.0.0.2:143\"\n",
    ] {
        assert!(printed.contains(line), "{line}: {printed}");
    }
    let proxy = loaded.take::<ImapProxy>().expect("the proxy");
    let listen: SocketAddr = "127.0.0.1:1143".parse().expect("addr");
    assert_eq!(proxy.config.listen, [listen]);
    assert_eq!(proxy.proxy.backend_tls, stoa_imap::BackendTls::StartTls);
    assert!(!proxy.proxy.forward_client);
    assert_eq!(proxy.proxy.reply_timeout, Duration::from_secs(5));
    assert_eq!(
        proxy.config.limits.idle_timeout,
        Duration::from_secs(45 * 60)
    );
    assert_eq!(proxy.proxy.stores[0].imap.as_deref(), Some("127.0.0.2:143"));
    assert_eq!(proxy.mail_dir.as_deref(), Some(Path::new("/m")));
    let imap = loaded.take::<Imap>().expect("imap");
    assert_eq!(imap.config.trusted_proxies.len(), 2);

    // Alone with the embedded directory it has none; bad values; no listener; a
    // key only [imap] has.
    let file = "[imap_proxy]\nbackend_tls = \"maybe\"\nforward_client = 1\nappend_limit = 1\n";
    let errors = load_all(Some(file), ServeArgs::default()).expect_err("invalid");
    for needle in [
        "imap_proxy.backend_tls \"maybe\": expected",
        "imap_proxy.forward_client: expected true or false",
        "no IMAP proxy listener: give --imap-proxy-listen ADDR:PORT",
        "the IMAP proxy needs a directory",
        "imap_proxy.append_limit",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "{needle}: {errors:?}"
        );
    }
    let args = ServeArgs {
        imaps_proxy_listen: vec!["127.0.0.1:0".into()],
        mail_dir: Some("/m".into()),
        ..ServeArgs::default()
    };
    let errors = load_all(None, args).expect_err("IMAPS without a certificate");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("an IMAPS proxy listener needs certificates")),
        "{errors:?}"
    );
    let args = ServeArgs {
        imap_proxy_listen: vec!["127.0.0.1:0".into()],
        mail_dir: Some("/m".into()),
        ..ServeArgs::default()
    };
    let loaded = load_all(None, args).expect("the flag alone, the embedded directory");
    assert!(!loaded.runs::<stoa_web::Config>() && !loaded.runs::<Imap>());
    assert!(loaded.runs::<ImapProxy>());
}

#[test]
fn metrics_listen_is_read_and_printed() {
    let file = format!(
        "[web]\ndocroot = \"{}\"\n[metrics]\nlisten = \"127.0.0.1:9100\"\n",
        tmp_docroot()
    );
    let loaded = load_all(Some(&file), ServeArgs::default()).expect("valid");
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let metrics = loaded.get::<Metrics>().expect("[metrics] read");
    assert_eq!(metrics.listen, "127.0.0.1:9100".parse().expect("addr"));
    let printed = effective(&loaded);
    assert!(
        printed.contains("[metrics]\nlisten = \"127.0.0.1:9100\"\n"),
        "{printed}"
    );
    // Without the table, no listener.
    let file = format!("[web]\ndocroot = \"{}\"\n", tmp_docroot());
    let loaded = load_all(Some(&file), ServeArgs::default()).expect("valid");
    assert!(!loaded.runs::<Metrics>());
}

#[test]
fn metrics_listen_must_be_an_address() {
    let docroot = tmp_docroot();
    for (table, expected) in [
        (
            "listen = \"localhost\"",
            "metrics.listen: \"localhost\" is not an address",
        ),
        ("listen = 9100", "metrics.listen: expected a string"),
        ("", "metrics.listen: missing"),
    ] {
        let file = format!("[web]\ndocroot = \"{docroot}\"\n[metrics]\n{table}\n");
        let errors = load_all(Some(&file), ServeArgs::default()).expect_err("invalid");
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "{expected}: {errors:?}"
        );
    }
}

#[test]
fn metrics_unknown_keys_are_errors_and_public_addresses_are_warned_of() {
    let file = format!(
        "[web]\ndocroot = \"{}\"\n[metrics]\nlisten = \"0.0.0.0:9100\"\npath = \"/m\"\n",
        tmp_docroot()
    );
    let errors = load_all(Some(&file), ServeArgs::default()).expect_err("invalid");
    assert!(
        errors
            .iter()
            .any(|e| e.contains("metrics.path: unknown key")),
        "{errors:?}"
    );
    let file = format!(
        "[web]\ndocroot = \"{}\"\n[metrics]\nlisten = \"0.0.0.0:9100\"\n",
        tmp_docroot()
    );
    let loaded = load_all(Some(&file), ServeArgs::default()).expect("valid");
    let expected = "metrics.listen 0.0.0.0:9100: /metrics has no authentication";
    assert!(
        loaded.warnings.iter().any(|w| w.contains(expected)),
        "{expected}: {:?}",
        loaded.warnings
    );
}

#[test]
fn sites_are_read_with_their_keys() {
    let root = tmp_docroot();
    let file = format!(
        "[[site]]\nnames = [\"A.example\", \"*.b.example\"]\ndocroot = \"{root}\"\n\
         error_pages = {{ 404 = \"/errors/404.html\", 503 = \"/e/503.html\" }}\n\
         autoindex = true\ncgi = {{ \"/cgi-bin/\" = \"{root}\" }}\naccess_log = \"logs/a.log\"\n\n\
         [[site]]\nnames = [\"127.0.0.1\", \"[::1]\"]\ndocroot = \"{root}\"\ndefault = true\n\
         web99 = true\naccess_log = \"off\"\n\n\
         [[site]]\nnames = [\"c.example\"]\ndocroot = \"{root}\"\naccess_log = \"-\"\n\n\
         [[site]]\nnames = [\"d.example\"]\ndocroot = \"{root}\"\n"
    );
    let web = load_with(Some(&file), ServeArgs::default())
        .expect("valid")
        .web;
    assert_eq!(web.sites.len(), 4);
    let (a, b) = (&web.sites[0], &web.sites[1]);
    assert_eq!(a.names, ["a.example", "*.b.example"]);
    assert_eq!(
        a.error_pages,
        [
            (404, "/errors/404.html".into()),
            (503, "/e/503.html".into())
        ]
    );
    assert!(a.autoindex && !a.default && !a.web99);
    assert_eq!(a.cgi.len(), 1);
    assert!(b.default && b.web99 && !b.autoindex);
    // A log file is relative to the configuration file; without the key, the
    // server's log.
    assert_eq!(
        a.access_log,
        Some(AccessLogTarget::File("/etc/stoa/logs/a.log".into()))
    );
    assert_eq!(b.access_log, Some(AccessLogTarget::Off));
    assert_eq!(web.sites[2].access_log, Some(AccessLogTarget::Stdout));
    assert_eq!(web.sites[3].access_log, None);
    // The dynamic API's settings are the defaults, for the site that serves it.
    assert!(web.web99.is_some());
    assert_eq!(web.listen.len(), 1, "the default listener");
}

#[test]
fn site_mistakes_are_named() {
    let root = tmp_docroot();
    let file = format!(
        "[web]\ndocroot = \"{root}\"\n[cgi.mounts]\n\"/cgi-bin/\" = \"{root}\"\n[web99]\n\n\
         [[site]]\nnames = [\"a.example:8080\", \"a.*.example\", \"*\", \"x y\"]\n\
         error_pages = {{ 301 = \"/x\", 404 = \"errors/404.html\", 500 = 5 }}\nautoindex = \"yes\"\n\n\
         [[site]]\nnames = [\"b.example\"]\ndocroot = \"{root}\"\naccess_log = \"\"\n\n\
         [[site]]\nnames = [\"B.example.\"]\ndocroot = \"{root}\"\nbogus = 1\naccess_log = false\n"
    );
    let errors = load_with(Some(&file), ServeArgs::default()).expect_err("invalid");
    for want in [
        "site[0].docroot: missing",
        "site[0].names: \"a.example:8080\" is not a host name",
        "site[0].names: \"a.*.example\" is not a host name",
        "site[0].names: \"*\" is not a host name",
        "site[0].names: \"x y\" is not a host name",
        "site[0].error_pages.301: not an error status (400 to 599)",
        "site[0].error_pages.404: \"errors/404.html\" is not a path",
        "site[0].error_pages.500: expected a path, found 5",
        "site[0].autoindex: expected true or false, found \"yes\"",
        "site[2].names: \"b.example\" is already a name of site[1]",
        "site[1].access_log: empty; use a file name, \"-\" or \"off\"",
        "site[2].access_log: expected a string, found boolean",
        "web.docroot (or --docroot) and [[site]]",
        "cgi.mounts (or --cgi-dir) and [[site]]",
        "[web99] (or --web99) and [[site]]",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(want)),
            "missing {want:?} in {errors:#?}"
        );
    }
}

#[test]
fn web_compression_keys() {
    let file = format!(
        "[web]\ndocroot = \"{}\"\n\n[web.compression]\non_the_fly = false\ngzip_level = 9\n\
         brotli_level = 0\nmin_length = \"1KiB\"\nmax_length = \"64KiB\"\ncache_size = \"1MiB\"\n\
         types = [\"Text/HTML\", \"application/*\"]\n",
        tmp_docroot()
    );
    let loaded = load_with(Some(&file), ServeArgs::default()).expect("valid");
    let c = &loaded.web.compression;
    assert!(c.precompressed, "the default stays");
    assert!(!c.on_the_fly);
    assert_eq!((c.gzip_level, c.brotli_level), (9, 0));
    assert_eq!(
        (c.min_length, c.max_length, c.cache_size),
        (1024, 65536, 1 << 20)
    );
    assert_eq!(c.types, ["text/html", "application/*"]);
    assert!(c.compressible("application/json"));
    assert!(!c.compressible("text/css"));
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

    let file = format!(
        "[web]\ndocroot = \"{}\"\n\n[web.compression]\ngzip_level = 0\nbrotli_level = 12\n\
         min_length = 100\nmax_length = 10\ntypes = [\"*/*\"]\nprecompressed = \"yes\"\n",
        tmp_docroot()
    );
    let errors = load_with(Some(&file), ServeArgs::default()).expect_err("invalid");
    let all = errors.join("\n");
    for needle in [
        "web.compression.gzip_level: 0",
        "web.compression.brotli_level: 12",
        "web.compression.min_length (100) is above max_length (10)",
        "web.compression.types: \"*/*\"",
        "web.compression.precompressed: expected true or false",
    ] {
        assert!(all.contains(needle), "{needle} missing from:\n{all}");
    }
}
