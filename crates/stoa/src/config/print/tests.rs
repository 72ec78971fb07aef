use std::path::{Path, PathBuf};

use super::super::{Loaded, load_all};
use super::*;
use crate::cli::ServeArgs;

/// Loads `text` as the file `dir/stoa.toml` with `args`, reading real files (the
/// certificates and the password file must load).
fn load_text(dir: &Path, text: &str, args: ServeArgs) -> Loaded {
    let file = dir.join("stoa.toml");
    let text = text.replace("DIR", &dir.display().to_string());
    std::fs::write(&file, &text).expect("write the configuration");
    let args = ServeArgs {
        config: Some(file),
        ..args
    };
    match load_all(&args, |p| std::fs::read_to_string(p), &dir.join("state")) {
        Ok(loaded) => loaded,
        Err(rejected) => panic!("refused: {rejected:?}\n{text}"),
    }
}

/// Everything [`Loaded`] holds but the warnings, to compare two loads.
fn settings(l: &Loaded) -> String {
    format!(
        "{:#?}",
        (
            &l.services,
            &l.mail_hosts,
            &l.directory,
            &l.bind_password_file,
            &l.process
        )
    )
}

/// A directory with a document root, a CGI directory, a certificate pair and an
/// LDAP password file.
fn fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for sub in ["www", "cgi", "mail"] {
        std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
    }
    let c = rcgen::generate_simple_self_signed(vec!["mx.test".into()]).expect("certificate");
    std::fs::write(dir.path().join("mx.crt"), c.cert.pem()).expect("write");
    std::fs::write(dir.path().join("mx.key"), c.signing_key.serialize_pem()).expect("write");
    std::fs::write(dir.path().join("ldap.secret"), "s3cret-Pw\n").expect("write");
    dir
}

/// Every role, with values off their defaults, relative paths and flags (`DIR`
/// is the fixture's directory: CGI directories are relative to the working
/// directory, not to the file, and so are the access log and the web99 state).
const EVERY_ROLE: &str = r#"
user = "stoa"
umask = 0o027

[web]
docroot = "www"
workers = 3
access_log = "DIR/access.log"
log_format = "combined"
shutdown_grace = "7s"
[web.limits]
max_head = "64KiB"
head_timeout = "200ms"
keepalive_requests = 5
max_handshakes = 9
[web.cache]
memory_budget = "1GiB"
max_entries = 12
max_open_files = 7

[[listener]]
address = "127.0.0.1:8081"
[[listener]]
address = "[::1]:8443"
tls = { cert = "mx.crt", key = "mx.key" }

[web99]
state_dir = "DIR/state99"
manager_networks = ["10.0.0.2"]

[cgi]
timeout = "2m"
[cgi.mounts]
"/scripts/" = "DIR/cgi"

[smtp]
mail_dir = "mail"
hostname = "mx.example.test"
domains = ["Example.TEST"]
listen = ["127.0.0.1:2525"]
submission_listen = ["127.0.0.1:5870"]
tls = { cert = "mx.crt", key = "mx.key" }
trusted_networks = ["192.0.2.7/24"]
relay_host = "smart.test:25"
max_message_size = 10240000
min_backoff = "90s"
max_queue_lifetime = 172800
auth_max_failures = 4

[pop3]
listen = ["127.0.0.1:1100"]
tls = [{ cert = "mx.crt", key = "mx.key" }]
tls_listen = ["127.0.0.1:9950"]
secure_networks = []
trusted_proxies = ["10.1.0.0/16"]
idle_timeout = "1h"
auth_failure_delay = "50ms"

[pop3_proxy]
listen = ["127.0.0.1:1101"]
tls = { cert = "mx.crt", key = "mx.key" }
backend_tls = "stls"
backend_ca = ["mx.crt"]
forward_client = false
auth_max_failures = 0

[lmtp]
listen = ["127.0.0.1:2424"]
max_connections_per_client = 3

[imap]
listen = ["127.0.0.1:1430"]
tls_listen = ["127.0.0.1:9930"]
tls = { cert = "mx.crt", key = "mx.key" }
max_sessions_per_user = 5
append_limit = "10MiB"
idle_check = "10s"

[directory]
backend = "ldap"
urls = ["ldap://127.0.0.1:3890"]
base = "dc=stoa,dc=test"
bind_dn = "cn=stoa,dc=stoa,dc=test"
bind_password_file = "ldap.secret"
this_host = "store-a.test"
auth = "bind"
cache_ttl = "90m"

[metrics]
listen = "127.0.0.1:9100"

[[mail_host]]
name = "store-b.test"
lmtp = "10.0.0.3:24"
pop3 = "10.0.0.3:110"
"#;

#[test]
fn the_printed_configuration_reads_back_the_same() {
    let dir = fixture();
    let args = ServeArgs {
        smtp_listen: vec!["127.0.0.1:2526".into()],
        keepalive_timeout: Some("3s".into()),
        ..ServeArgs::default()
    };
    let first = load_text(dir.path(), EVERY_ROLE, args);
    assert!(first.warnings.is_empty(), "{:?}", first.warnings);
    assert_eq!(roles(&first), "web, smtp, pop3, pop3_proxy, lmtp, imap");
    let printed = effective(&first);
    // Fed back alone (no flags), in another directory: relative paths must not
    // have stayed relative.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let second = load_text(elsewhere.path(), &printed, ServeArgs::default());
    assert!(second.warnings.is_empty(), "{:?}", second.warnings);
    assert_eq!(settings(&first), settings(&second), "{printed}");
    assert_eq!(effective(&second), printed);
    // The flags are in it, and the file's relative paths resolved.
    assert!(
        printed.contains("listen = [\"127.0.0.1:2526\"]"),
        "{printed}"
    );
    assert!(printed.contains("keepalive_timeout = \"3s\""), "{printed}");
    let www = dir.path().join("www");
    assert!(
        printed.contains(&format!("docroot = \"{}\"", www.display())),
        "{printed}"
    );
}

#[test]
fn no_secret_is_printed() {
    let dir = fixture();
    let loaded = load_text(dir.path(), EVERY_ROLE, ServeArgs::default());
    let Directory::Ldap(o) = &loaded.directory else {
        panic!("LDAP expected");
    };
    assert_eq!(o.bind_password, "s3cret-Pw");
    let printed = effective(&loaded);
    assert!(!printed.contains("s3cret"), "{printed}");
    let secret = dir.path().join("ldap.secret");
    assert!(
        printed.contains(&format!("bind_password_file = \"{}\"", secret.display())),
        "{printed}"
    );
}

#[test]
fn defaults_are_filled_in() {
    let dir = fixture();
    let loaded = load_text(
        dir.path(),
        "[web]\ndocroot = \"www\"\n",
        ServeArgs::default(),
    );
    let printed = effective(&loaded);
    for line in [
        "[web.limits]",
        "max_request_line = \"8KiB\"",
        "head_timeout = \"20s\"",
        "keepalive_max_age = \"1h\"",
        "memory_budget = \"64MiB\"",
        "[[listener]]\naddress = \"127.0.0.1:8080\"\nprotocol = \"http\"",
        "runtime = \"per-core\"",
        "access_log = \"off\"",
    ] {
        assert!(printed.contains(line), "{line:?} missing in:\n{printed}");
    }
    assert!(!printed.contains("[smtp]") && !printed.contains("[directory]"));
}

#[test]
fn a_mail_only_configuration_prints_no_web_server() {
    let dir = fixture();
    let args = ServeArgs {
        mail_dir: Some(dir.path().join("mail")),
        smtp_listen: vec!["127.0.0.1:0".into()],
        ..ServeArgs::default()
    };
    let first = load_text(dir.path(), "", args);
    let printed = effective(&first);
    assert!(!printed.contains("[web"), "{printed}");
    assert!(printed.contains("# relay_host: not set"), "{printed}");
    assert!(printed.contains("[directory]\nbackend = \"embedded\""));
    let second = load_text(dir.path(), &printed, ServeArgs::default());
    assert_eq!(settings(&first), settings(&second), "{printed}");
}

/// Every key docs/configuration.md lists in a table's reference is printed
/// (set, or a comment saying it is not), so the printer cannot fall behind the
/// reader and its documentation unnoticed.
#[test]
fn every_documented_key_is_printed() {
    let dir = fixture();
    let loaded = load_text(dir.path(), EVERY_ROLE, ServeArgs::default());
    // A newline first, so the first header is found like the others.
    let printed = format!("\n{}", effective(&loaded));
    // `[[site]]` replaces `[web] docroot`: its keys are printed from a
    // configuration of their own.
    let site = format!(
        "[[site]]\nnames = [\"a.test\"]\ndocroot = \"{}\"\n",
        dir.path().join("www").display()
    );
    let sites = load_text(dir.path(), &site, ServeArgs::default());
    let sites_printed = format!("\n{}", effective(&sites));
    let docs = include_str!("../../../../../docs/configuration.md");
    let mut section = None;
    let mut checked = 0;
    for line in docs.lines() {
        if let Some(heading) = line.strip_prefix("## `") {
            let name = heading.trim_end_matches('`').trim_matches(['[', ']']);
            section = Some(name.to_owned());
            continue;
        }
        if line.starts_with("## Top-level keys") {
            section = Some(String::new());
            continue;
        }
        if line.starts_with("## ") {
            section = None;
        }
        let (Some(section), Some(row)) = (&section, line.strip_prefix("| `")) else {
            continue;
        };
        let Some((key, _)) = row.split_once('`') else {
            continue;
        };
        if key.contains('.') || key == "mounts" {
            continue; // tls.cert and tls.key, and [cgi.mounts], are inside tables
        }
        let doc = if section == "site" {
            &sites_printed
        } else {
            &printed
        };
        let bodies = table_bodies(doc, section);
        let found = bodies
            .iter()
            .flat_map(|b| b.lines())
            .any(|l| l.starts_with(&format!("{key} = ")) || l.starts_with(&format!("# {key}: ")));
        assert!(found, "[{section}] {key} is not printed:\n{bodies:?}");
        checked += 1;
    }
    assert!(
        checked >= 120,
        "only {checked} keys found in the documentation"
    );
}

/// The lines of each `[name]` or `[[name]]` table of `doc`; for `""`, those
/// before the first table.
fn table_bodies<'d>(doc: &'d str, name: &str) -> Vec<&'d str> {
    if name.is_empty() {
        return vec![&doc[..doc.find("\n[").unwrap_or(doc.len())]];
    }
    let headers = [format!("\n[{name}]\n"), format!("\n[[{name}]]\n")];
    let bodies: Vec<&str> = (headers.iter())
        .flat_map(|h| doc.match_indices(h.as_str()).map(|(i, _)| i + h.len()))
        .map(|start| {
            let rest = &doc[start..];
            &rest[..rest.find("\n[").unwrap_or(rest.len())]
        })
        .collect();
    assert!(!bodies.is_empty(), "no [{name}] in:\n{doc}");
    bodies
}

#[test]
fn units_are_the_largest_exact_ones() {
    let d = |ms| duration(Duration::from_millis(ms)).to_string();
    assert_eq!(d(200), "\"200ms\"");
    assert_eq!(d(1500), "\"1500ms\"");
    assert_eq!(d(0), "\"0s\"");
    assert_eq!(d(90_000), "\"90s\"");
    assert_eq!(d(300_000), "\"5m\"");
    assert_eq!(d(4_000_000), "\"4000s\"");
    assert_eq!(d(432_000_000), "\"5d\"");
    assert_eq!(size(8192_u64).to_string(), "\"8KiB\"");
    assert_eq!(size(10_240_000_u64).to_string(), "10240000");
    assert_eq!(size(1_u64 << 30).to_string(), "\"1GiB\"");
    assert_eq!(size(0_u64).to_string(), "0");
    for text in ["200ms", "1500ms", "0s", "5m", "4000s", "5d"] {
        let v = super::super::units::parse_duration(text).expect("reads back");
        assert_eq!(duration(v).as_str(), Some(text));
    }
}

#[test]
fn paths_are_absolute() {
    let p = path(&PathBuf::from("relative/dir"));
    let text = p.as_str().expect("a string");
    assert!(Path::new(text).is_absolute(), "{text}");
    assert!(text.ends_with("relative/dir"));
}
