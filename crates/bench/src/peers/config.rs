//! The peers' generated configurations and content: nginx's `nginx.conf`,
//! `stoa serve`'s flags, the static comparison's three files, and for the
//! imap workload Dovecot's `dovecot.conf` and passwd-file and stoa's
//! configuration file.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;

/// The static comparison's files: name and size (random bytes).
pub(crate) const STATIC_FILES: [(&str, usize); 3] =
    [("1k.bin", 1024), ("10k.bin", 10_240), ("100k.bin", 102_400)];

/// The keep-alive timeout both servers get: nginx's default, long enough that
/// no connection of a run is closed for being idle.
pub(crate) const KEEPALIVE_SECS: u32 = 75;

/// nginx's `open_file_cache max=`: the size the committed comparisons used, as
/// many descriptors as stoa's own open-file cache holds by default.
const NGINX_OPEN_FILE_CACHE: u32 = 10_000;

/// What a peer's configuration is generated from.
#[derive(Debug, Clone)]
pub(crate) struct Setup<'a> {
    /// The server's own directory (pid file, logs, temp paths).
    pub(crate) dir: &'a Path,
    /// Its loopback port.
    pub(crate) port: u16,
    /// The document root both servers serve.
    pub(crate) docroot: &'a Path,
    /// Simultaneous connections it must hold (and open files).
    pub(crate) max_connections: u32,
    /// The access log file (combined format), or `None` for none.
    pub(crate) access_log: Option<&'a Path>,
    /// Whether it runs as root (nginx then needs `user root;` to read the
    /// temp directory).
    pub(crate) root: bool,
    /// TLS with HTTP/2 by ALPN (the h2 workload): the certificate and key
    /// files (PEM); `None` for plain HTTP/1.1.
    pub(crate) tls: Option<(&'a Path, &'a Path)>,
    /// The imap workload: the server serves IMAP only, to [`IMAP_USER`], and
    /// `max_connections` is imaptest's largest client count.
    pub(crate) imap: bool,
}

/// The imap workload's one user, on both servers, and its password (a PLAIN
/// scheme on both: a login costs no hashing on either).
pub(crate) const IMAP_USER: &str = "testuser@example.com";
pub(crate) const IMAP_PASSWORD: &str = "pw";

/// The uid and gid Dovecot's mail belongs to when it runs as root (nobody,
/// nogroup), as in imaptest's reference run.
pub(crate) const DOVECOT_MAIL_ID: u32 = 65_534;

/// stoa's configuration file for the imap workload: plain passwords verify,
/// and neither the per-user sessions nor the per-address connections are
/// capped (imaptest's clients are one user from one address).
pub(crate) const STOA_IMAP_TOML: &str = "[directory]\nallow_plain_passwords = true\n\n\
[imap]\nmax_sessions_per_user = 0\nmax_connections_per_client = 0\n";

/// `stoa serve`'s flags for the imap workload: `toml` (a
/// [`STOA_IMAP_TOML`]), the mail directory `mail`, one IMAP listener on a
/// free loopback port; `extra` last, a default it names again left out.
pub(crate) fn stoa_imap_args(toml: &Path, mail: &Path, extra: &[String]) -> Vec<String> {
    let defaults = [
        ("--config", toml.display().to_string()),
        ("--mail-dir", mail.display().to_string()),
        ("--imap-listen", "127.0.0.1:0".to_owned()),
    ];
    let mut args = vec!["serve".to_owned()];
    for (flag, value) in defaults {
        if !named(extra, flag) {
            args.extend([flag.to_owned(), value]);
        }
    }
    args.extend(extra.iter().cloned());
    args
}

/// Whether `extra` names `flag` (`--flag V` or `--flag=V`).
fn named(extra: &[String], flag: &str) -> bool {
    extra
        .iter()
        .any(|e| e == flag || e.starts_with(&format!("{flag}=")))
}

/// Dovecot's imapd alone, every path inside `setup.dir`, on
/// `127.0.0.1:setup.port`, plaintext logins (PLAIN and LOGIN) without TLS,
/// the passwd-file `setup.dir/passwd` for both databases, Maildir under each
/// home with its default fsync. As root its internal and login users are
/// Debian's `dovecot` and `dovenull`; as another user everything runs as that
/// user (`users`: its name and group), without chroots.
pub(crate) fn dovecot_conf(setup: &Setup<'_>, users: Option<(&str, &str)>) -> String {
    let dir = setup.dir.display();
    let mut conf = String::new();
    let _ = writeln!(conf, "instance_name = stoa-peers-{}", setup.port);
    let _ = writeln!(conf, "base_dir = {dir}/run\nstate_dir = {dir}/state");
    let _ = writeln!(conf, "log_path = {dir}/log/dovecot.log");
    conf.push_str(
        "protocols = imap\nlisten = 127.0.0.1\nssl = no\ndisable_plaintext_auth = no\n\
         auth_mechanisms = plain login\n",
    );
    match users {
        None => conf.push_str("default_internal_user = dovecot\ndefault_login_user = dovenull\n"),
        Some((user, group)) => {
            let _ = writeln!(
                conf,
                "default_internal_user = {user}\ndefault_internal_group = {group}\n\
                 default_login_user = {user}"
            );
        }
    }
    // Every client is the one user from one address; more than Dovecot's 100
    // processes of a service when the clients need them.
    let _ = writeln!(
        conf,
        "mail_max_userip_connections = {}",
        (setup.max_connections + 10).max(500)
    );
    if setup.max_connections + 10 > 100 {
        let _ = writeln!(
            conf,
            "default_process_limit = {}",
            setup.max_connections + 10
        );
    }
    for db in ["passdb", "userdb"] {
        let _ = writeln!(
            conf,
            "{db} {{\n  driver = passwd-file\n  args = {dir}/passwd\n}}"
        );
    }
    conf.push_str("mail_location = maildir:~/Maildir\nnamespace inbox {\n  inbox = yes\n}\n");
    let _ = writeln!(
        conf,
        "service imap-login {{\n  inet_listener imap {{\n    address = 127.0.0.1\n    \
         port = {}\n  }}\n  inet_listener imaps {{\n    port = 0\n  }}",
        setup.port
    );
    if users.is_some() {
        conf.push_str("  chroot =\n}\nservice anvil {\n  chroot =\n}\n");
    } else {
        conf.push_str("}\n");
    }
    conf
}

/// Dovecot's passwd-file: [`IMAP_USER`] with a `{PLAIN}` password, owned by
/// `uid`:`gid`, its home `dir/mail/USER`.
pub(crate) fn dovecot_passwd(dir: &Path, uid: u32, gid: u32) -> String {
    format!(
        "{IMAP_USER}:{{PLAIN}}{IMAP_PASSWORD}:{uid}:{gid}::{}/mail/{IMAP_USER}::\n",
        dir.display()
    )
}

/// nginx's `keepalive_requests` with TLS and HTTP/2: it also ends an HTTP/2
/// connection after that many streams, and h2load does not reconnect in a
/// timed run, so nginx's 1000 would stop each connection early; stoa has no
/// such bound.
const NGINX_H2_KEEPALIVE_REQUESTS: u32 = 1_000_000;

/// nginx with one worker in the foreground, every path inside `setup.dir`,
/// `sendfile`, `tcp_nopush` and `open_file_cache` on, and TCP_DEFER_ACCEPT
/// (`deferred`), which stoa sets by default, so both accept the same way.
pub(crate) fn nginx_conf(setup: &Setup<'_>) -> String {
    let dir = setup.dir.display();
    let mut conf = String::new();
    conf.push_str("worker_processes 1;\ndaemon off;\nmaster_process on;\n");
    if setup.root {
        conf.push_str("user root;\n");
    }
    let _ = writeln!(conf, "pid {dir}/nginx.pid;");
    let _ = writeln!(conf, "error_log {dir}/error.log warn;");
    let _ = writeln!(
        conf,
        "worker_rlimit_nofile {};",
        // Every connection and every descriptor open_file_cache may hold.
        setup.max_connections + 100 + NGINX_OPEN_FILE_CACHE
    );
    let _ = writeln!(
        conf,
        "\nevents {{\n    worker_connections {};\n}}\n",
        setup.max_connections + 100
    );
    conf.push_str("http {\n    types {\n        application/octet-stream bin;\n        text/html html;\n    }\n");
    conf.push_str("    default_type application/octet-stream;\n");
    for temp in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let _ = writeln!(conf, "    {temp}_temp_path {dir}/{temp};");
    }
    conf.push_str("    sendfile on;\n    tcp_nopush on;\n");
    let _ = writeln!(
        conf,
        "    open_file_cache max={NGINX_OPEN_FILE_CACHE} inactive=60s;\n    open_file_cache_valid 1s;"
    );
    match setup.access_log {
        Some(log) => {
            let _ = writeln!(conf, "    access_log {};", log.display());
        }
        None => conf.push_str("    access_log off;\n"),
    }
    let _ = writeln!(conf, "    keepalive_timeout {KEEPALIVE_SECS}s;");
    let requests = if setup.tls.is_some() {
        NGINX_H2_KEEPALIVE_REQUESTS
    } else {
        1000
    };
    let _ = writeln!(conf, "    keepalive_requests {requests};\n\n    server {{");
    // `listen ... ssl http2` rather than `http2 on`, which nginx has only since
    // 1.25.1 (Debian 12 ships 1.22); newer ones accept it with a warning. Its
    // HTTP/2 defaults are kept (128 streams, as stoa's h2_max_streams).
    let flags = if setup.tls.is_some() {
        " ssl http2"
    } else {
        ""
    };
    let _ = writeln!(
        conf,
        "        listen 127.0.0.1:{}{flags} reuseport deferred;",
        setup.port
    );
    if let Some((cert, key)) = setup.tls {
        let _ = writeln!(conf, "        ssl_certificate {};", cert.display());
        let _ = writeln!(conf, "        ssl_certificate_key {};", key.display());
        conf.push_str("        ssl_protocols TLSv1.2 TLSv1.3;\n");
        conf.push_str("        ssl_session_cache shared:SSL:20m;\n");
    }
    let _ = writeln!(conf, "        root {};", setup.docroot.display());
    conf.push_str("        location / { }\n    }\n}\n");
    conf
}

/// The temp directories nginx's configuration names; they must exist.
pub(crate) fn nginx_dirs(dir: &Path) -> anyhow::Result<()> {
    for temp in ["client_body", "proxy", "fastcgi", "uwsgi", "scgi"] {
        let path = dir.join(temp);
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
    }
    Ok(())
}

/// `stoa serve`'s flags for a comparison (the address comes from its
/// "listening on" line): one worker, the access log in the combined format,
/// nginx's keep-alive timeout; with `web99`, the dynamic API's state and CGI
/// directory too (a static request does not touch them). `extra` comes last,
/// and a default flag it names again (`--workers 2`) is left out.
pub(crate) fn stoa_args(
    setup: &Setup<'_>,
    web99: Option<(&Path, &Path)>,
    extra: &[String],
) -> Vec<String> {
    let log = setup
        .access_log
        .map_or_else(|| "off".to_owned(), |l| l.display().to_string());
    let mut defaults: Vec<(&str, Option<String>)> = vec![
        ("--listen", Some("127.0.0.1:0".to_owned())),
        ("--workers", Some("1".to_owned())),
        ("--docroot", Some(setup.docroot.display().to_string())),
        ("--access-log", Some(log)),
        ("--log-format", Some("combined".to_owned())),
        ("--keepalive-timeout", Some(format!("{KEEPALIVE_SECS}s"))),
        (
            "--max-connections",
            Some((setup.max_connections + 100).to_string()),
        ),
    ];
    if setup.access_log.is_none() {
        defaults.retain(|(flag, _)| *flag != "--log-format");
    }
    if let Some((cert, key)) = setup.tls {
        defaults.push(("--tls-listen", Some("127.0.0.1:0".to_owned())));
        defaults.push(("--tls-cert", Some(cert.display().to_string())));
        defaults.push(("--tls-key", Some(key.display().to_string())));
    }
    if let Some((state, cgi)) = web99 {
        defaults.push(("--web99", None));
        defaults.push(("--web99-state", Some(state.display().to_string())));
        defaults.push(("--cgi-dir", Some(cgi.display().to_string())));
    }
    let mut args = vec!["serve".to_owned()];
    for (flag, value) in defaults {
        if named(extra, flag) {
            continue;
        }
        args.push(flag.to_owned());
        args.extend(value);
    }
    args.extend(extra.iter().cloned());
    args
}

/// Writes [`STATIC_FILES`] of random bytes into `docroot`.
pub(crate) fn write_static_files(docroot: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(docroot)
        .with_context(|| format!("cannot create {}", docroot.display()))?;
    let mut rng = fastrand::Rng::new();
    for (name, size) in STATIC_FILES {
        let bytes: Vec<u8> = std::iter::repeat_with(|| rng.u8(..)).take(size).collect();
        let path = docroot.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// A fresh self-signed certificate for `localhost` and 127.0.0.1 (ECDSA
/// P-256, as the old script's) written to `dir` as `cert.pem` and `key.pem`;
/// returns their paths. Both servers get the same pair.
pub(crate) fn write_tls_pair(dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let pair = rcgen::generate_simple_self_signed(["localhost", "127.0.0.1"].map(String::from))
        .context("cannot generate a certificate")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    for (path, pem) in [
        (&cert, pair.cert.pem()),
        (&key, pair.signing_key.serialize_pem()),
    ] {
        std::fs::write(path, pem).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok((cert, key))
}

/// `text` with every occurrence of the temporary directory `tmp` written as
/// `$TMP`, as a result directory keeps a generated configuration.
pub(crate) fn with_tmp_named(text: &str, tmp: &Path) -> String {
    text.replace(&tmp.display().to_string(), "$TMP")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup<'a>(dir: &'a Path, docroot: &'a Path, log: Option<&'a Path>) -> Setup<'a> {
        Setup {
            dir,
            port: 40123,
            docroot,
            max_connections: 64,
            access_log: log,
            root: false,
            tls: None,
            imap: false,
        }
    }

    #[test]
    fn dovecot_serves_imap_alone_on_loopback_from_its_passwd_file() {
        let (dir, www) = (Path::new("/t/dovecot"), Path::new("/t/www"));
        let conf = dovecot_conf(&setup(dir, www, None), None);
        for line in [
            "base_dir = /t/dovecot/run",
            "log_path = /t/dovecot/log/dovecot.log",
            "protocols = imap",
            "disable_plaintext_auth = no",
            "default_login_user = dovenull",
            "mail_max_userip_connections = 500",
            "args = /t/dovecot/passwd",
            "mail_location = maildir:~/Maildir",
            "port = 40123",
        ] {
            assert!(conf.contains(line), "{line} missing from:\n{conf}");
        }
        assert!(!conf.contains("chroot") && !conf.contains("process_limit"));
        assert_eq!(conf.matches('{').count(), conf.matches('}').count());
        let mut many = setup(dir, www, None);
        many.max_connections = 200;
        let rootless = dovecot_conf(&many, Some(("me", "us")));
        assert!(
            rootless.contains("default_internal_group = us"),
            "{rootless}"
        );
        assert!(
            rootless.contains("default_process_limit = 210"),
            "{rootless}"
        );
        assert!(
            rootless.contains("service anvil {\n  chroot =\n}"),
            "{rootless}"
        );
        assert_eq!(rootless.matches('{').count(), rootless.matches('}').count());
        assert_eq!(
            dovecot_passwd(dir, 65534, 65534),
            "testuser@example.com:{PLAIN}pw:65534:65534::/t/dovecot/mail/testuser@example.com::\n"
        );
    }

    #[test]
    fn stoa_serves_imap_from_its_mail_dir() {
        let line = stoa_imap_args(Path::new("/t/s.toml"), Path::new("/t/mail"), &[]).join(" ");
        assert_eq!(
            line,
            "serve --config /t/s.toml --mail-dir /t/mail --imap-listen 127.0.0.1:0"
        );
        assert!(STOA_IMAP_TOML.contains("allow_plain_passwords = true"));
        assert!(STOA_IMAP_TOML.contains("max_sessions_per_user = 0"));
    }

    #[test]
    fn nginx_listens_on_loopback_with_one_worker_and_paths_inside_its_dir() {
        let (dir, www) = (Path::new("/tmp/x/nginx"), Path::new("/tmp/x/www"));
        let conf = nginx_conf(&setup(dir, www, Some(Path::new("/tmp/x/a.log"))));
        for line in [
            "worker_processes 1;",
            "daemon off;",
            "pid /tmp/x/nginx/nginx.pid;",
            "worker_connections 164;",
            "worker_rlimit_nofile 10164;",
            "open_file_cache max=10000 inactive=60s;",
            "client_body_temp_path /tmp/x/nginx/client_body;",
            "access_log /tmp/x/a.log;",
            "keepalive_timeout 75s;",
            "listen 127.0.0.1:40123 reuseport deferred;",
            "root /tmp/x/www;",
        ] {
            assert!(conf.contains(line), "{line} missing from:\n{conf}");
        }
        assert!(!conf.contains("user root;"));
        assert_eq!(conf.matches('{').count(), conf.matches('}').count());
        let off = nginx_conf(&setup(dir, www, None));
        assert!(off.contains("access_log off;"));
    }

    #[test]
    fn stoa_gets_the_same_docroot_log_and_keepalive() {
        let (dir, www) = (Path::new("/t/stoa"), Path::new("/t/www"));
        let args = stoa_args(&setup(dir, www, Some(Path::new("/t/s.log"))), None, &[]);
        let line = args.join(" ");
        assert_eq!(
            line,
            "serve --listen 127.0.0.1:0 --workers 1 --docroot /t/www --access-log /t/s.log \
             --log-format combined --keepalive-timeout 75s --max-connections 164"
        );
        let web99 = stoa_args(
            &setup(dir, www, None),
            Some((Path::new("/t/state"), Path::new("/t/cgi"))),
            &[],
        )
        .join(" ");
        assert!(web99.contains("--access-log off"), "{web99}");
        assert!(
            web99.ends_with("--web99 --web99-state /t/state --cgi-dir /t/cgi"),
            "{web99}"
        );
    }

    #[test]
    fn extra_flags_replace_the_defaults_they_name() {
        let (dir, www) = (Path::new("/t/stoa"), Path::new("/t/www"));
        let extra: Vec<String> = [
            "--workers",
            "2",
            "--runtime",
            "per-core",
            "--access-log=off",
        ]
        .map(String::from)
        .into();
        let line = stoa_args(&setup(dir, www, Some(Path::new("/t/s.log"))), None, &extra).join(" ");
        assert_eq!(
            line,
            "serve --listen 127.0.0.1:0 --docroot /t/www --log-format combined \
             --keepalive-timeout 75s --max-connections 164 --workers 2 --runtime per-core \
             --access-log=off"
        );
    }

    #[test]
    fn with_tls_both_serve_http2_over_the_same_pair() {
        let (dir, www) = (Path::new("/t/nginx"), Path::new("/t/www"));
        let (cert, key) = (Path::new("/t/tls/cert.pem"), Path::new("/t/tls/key.pem"));
        let tls = Setup {
            tls: Some((cert, key)),
            ..setup(dir, www, None)
        };
        let conf = nginx_conf(&tls);
        for line in [
            "listen 127.0.0.1:40123 ssl http2 reuseport deferred;",
            "ssl_certificate /t/tls/cert.pem;",
            "ssl_certificate_key /t/tls/key.pem;",
            "ssl_protocols TLSv1.2 TLSv1.3;",
            "ssl_session_cache shared:SSL:20m;",
            "keepalive_requests 1000000;",
            "access_log off;",
        ] {
            assert!(conf.contains(line), "{line} missing from:\n{conf}");
        }
        assert_eq!(conf.matches('{').count(), conf.matches('}').count());
        let plain = nginx_conf(&setup(dir, www, None));
        assert!(plain.contains("keepalive_requests 1000;") && !plain.contains("ssl"));
        let line = stoa_args(&tls, None, &[]).join(" ");
        assert!(
            line.ends_with(
                "--tls-listen 127.0.0.1:0 --tls-cert /t/tls/cert.pem --tls-key /t/tls/key.pem"
            ),
            "{line}"
        );
    }

    #[test]
    fn the_tls_pair_is_written_as_pem() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let (cert, key) = write_tls_pair(dir.path()).expect("the pair");
        let cert = std::fs::read_to_string(cert).expect("the certificate");
        assert!(cert.starts_with("-----BEGIN CERTIFICATE-----"), "{cert}");
        assert!(
            std::fs::read_to_string(key)
                .expect("the key")
                .contains("PRIVATE KEY")
        );
    }

    #[test]
    fn the_temp_dir_is_written_as_tmp() {
        assert_eq!(
            with_tmp_named("root /tmp/abc/www;", Path::new("/tmp/abc")),
            "root $TMP/www;"
        );
    }
}
