//! The POP3 server's part of the configuration: the `[pop3]` table, then the POP3
//! flags over it, then its checks. Errors join the same report as the web and SMTP
//! servers', so one run names every mistake.

use std::path::{Path, PathBuf};
use std::time::Duration;

use stoa_pop3::config::CertKeyFiles;
use toml::{Table, Value};

use super::{Report, parse_addr, parse_count, read_certs, smtp::strings};
use crate::cli::ServeArgs;

/// The autologout minimum of RFC 1939 §3.
const RFC_MIN_AUTOLOGOUT: Duration = Duration::from_secs(600);

/// The POP3 server as configured: its mail directory and its settings.
#[derive(Debug)]
pub(crate) struct Pop3 {
    /// The mail directory (the directory and the store beneath).
    pub(crate) mail_dir: PathBuf,
    /// The server's settings.
    pub(crate) config: stoa_pop3::Config,
}

/// Whether any POP3 flag was given.
pub(super) fn flags_given(args: &ServeArgs) -> bool {
    !args.pop3_listen.is_empty() || !args.pop3s_listen.is_empty()
}

/// The `[pop3]` table while it is being read.
#[derive(Debug, Default)]
pub(super) struct Draft {
    mail_dir: Option<PathBuf>,
    config: stoa_pop3::Config,
}

/// The `[pop3]` table, if present. `base` resolves relative paths (the file's
/// directory).
pub(super) fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    const P: &str = "pop3.";
    let t = r.table(table, "", "pop3")?;
    r.known_keys(
        t,
        P,
        &[
            "mail_dir",
            "hostname",
            "listen",
            "tls_listen",
            "tls",
            "allow_plaintext_auth",
            "workers",
            "max_connections",
            "max_connections_per_client",
            "login_timeout",
            "idle_timeout",
            "session_timeout",
            "send_timeout",
            "auth_failure_delay",
            "auth_failure_max_delay",
            "auth_max_failures",
            "auth_failure_window",
            "shutdown_grace",
        ],
    );
    let rebase = |p: PathBuf| match base {
        Some(base) if p.is_relative() => base.join(p),
        _ => p,
    };
    let mut d = Draft {
        mail_dir: r.string(t, P, "mail_dir").map(|s| rebase(PathBuf::from(s))),
        ..Draft::default()
    };
    let c = &mut d.config;
    if let Some(name) = r.string(t, P, "hostname") {
        c.hostname = name;
    }
    c.listen = addrs_in(t, "listen", r);
    c.tls_listen = addrs_in(t, "tls_listen", r);
    if let Some(v) = t.get("tls")
        && let Some(certs) = read_certs(v, "pop3.tls", r)
    {
        c.tls = certs
            .into_iter()
            .map(|c| CertKeyFiles {
                cert: rebase(c.cert),
                key: rebase(c.key),
            })
            .collect();
    }
    match t.get("allow_plaintext_auth") {
        None => {}
        Some(Value::Boolean(b)) => c.allow_plaintext_auth = *b,
        Some(other) => r.errors.push(format!(
            "{P}allow_plaintext_auth: expected true or false, found {other}"
        )),
    }
    if let Some(n) = r.integer(t, P, "workers") {
        c.workers = n;
    }
    read_limits(t, c, r);
    Some(d)
}

fn addrs_in(t: &Table, key: &str, r: &mut Report) -> Vec<std::net::SocketAddr> {
    let mut out = Vec::new();
    for text in strings(t, "pop3.", key, r) {
        match parse_addr(&text) {
            Ok(addr) => out.push(addr),
            Err(e) => r.errors.push(format!("pop3.{key}: {e}")),
        }
    }
    out
}

fn read_limits(t: &Table, c: &mut stoa_pop3::Config, r: &mut Report) {
    const P: &str = "pop3.";
    let l = &mut c.limits;
    r.integer_into(t, P, "max_connections", &mut l.max_connections);
    let per_client = &mut l.max_connections_per_client;
    r.integer_into(t, P, "max_connections_per_client", per_client);
    r.duration(t, P, "login_timeout", &mut l.login_timeout);
    r.duration(t, P, "idle_timeout", &mut l.idle_timeout);
    r.duration(t, P, "session_timeout", &mut l.session_timeout);
    r.duration(t, P, "send_timeout", &mut l.send_timeout);
    let a = &mut c.auth_throttle;
    r.duration(t, P, "auth_failure_delay", &mut a.delay);
    r.duration(t, P, "auth_failure_max_delay", &mut a.max_delay);
    r.integer_into(t, P, "auth_max_failures", &mut a.max_failures);
    r.duration(t, P, "auth_failure_window", &mut a.window);
    r.duration(t, P, "shutdown_grace", &mut c.shutdown_grace);
}

/// Applies the POP3 flags over the file's `[pop3]` (or the defaults), then checks
/// the result. `mail_dir` is the SMTP side's (the flag, or `smtp.mail_dir`), `certs`
/// the `--tls-cert`/`--tls-key` pairs.
pub(super) fn finish(
    draft: Option<Draft>,
    args: &ServeArgs,
    smtp_mail_dir: Option<&Path>,
    certs: Vec<CertKeyFiles>,
    r: &mut Report,
) -> Option<Pop3> {
    let mut d = draft.unwrap_or_default();
    let c = &mut d.config;
    if !args.pop3_listen.is_empty() {
        c.listen = flag_addrs("--pop3-listen", &args.pop3_listen, r);
    }
    if !args.pop3s_listen.is_empty() {
        c.tls_listen = flag_addrs("--pop3s-listen", &args.pop3s_listen, r);
    }
    if !certs.is_empty() {
        c.tls = certs;
    }
    if let Some(text) = &args.workers
        && let Ok(n) = parse_count(text)
    {
        c.workers = n;
    }
    let mail_dir = match (&args.mail_dir, d.mail_dir, smtp_mail_dir) {
        (Some(flag), _, _) => Some(flag.clone()),
        (None, Some(own), Some(smtp)) if own != smtp => {
            r.errors.push(format!(
                "pop3.mail_dir {} differs from smtp.mail_dir {}: POP3 reads the store SMTP \
                 delivers into",
                own.display(),
                smtp.display()
            ));
            None
        }
        (None, Some(own), _) => Some(own),
        (None, None, smtp) => smtp.map(Path::to_owned),
    };
    if mail_dir.is_none() && smtp_mail_dir.is_none() {
        r.errors.push(
            "no mail directory: give --mail-dir DIR or pop3.mail_dir in the configuration file"
                .into(),
        );
    }
    validate(c, r);
    mail_dir.map(|mail_dir| Pop3 {
        mail_dir,
        config: d.config,
    })
}

fn flag_addrs(flag: &str, texts: &[String], r: &mut Report) -> Vec<std::net::SocketAddr> {
    let mut out = Vec::new();
    for text in texts {
        match parse_addr(text) {
            Ok(addr) => out.push(addr),
            Err(e) => r.errors.push(format!("{flag} {text}: {e}")),
        }
    }
    out
}

fn validate(c: &stoa_pop3::Config, r: &mut Report) {
    if c.listen.is_empty() && c.tls_listen.is_empty() {
        r.errors.push(
            "no POP3 listener: give --pop3-listen ADDR:PORT or --pop3s-listen ADDR:PORT \
             (pop3.listen, pop3.tls_listen)"
                .into(),
        );
    }
    if !c.tls_listen.is_empty() && c.tls.is_empty() {
        r.errors.push(
            "a POP3S listener needs certificates: give --tls-cert FILE --tls-key FILE (pop3.tls)"
                .into(),
        );
    }
    if !c.listen.is_empty() && c.tls.is_empty() && !c.allow_plaintext_auth {
        r.warnings.push(
            "a POP3 listener without --tls-cert/--tls-key (pop3.tls) offers no STLS, and \
             without pop3.allow_plaintext_auth it accepts no login"
                .into(),
        );
    }
    if c.hostname.is_empty()
        || c.hostname
            .contains(|ch: char| ch.is_whitespace() || ch.is_control())
    {
        r.errors
            .push(format!("pop3.hostname {:?}: not a host name", c.hostname));
    }
    if !(1..=super::MAX_WORKERS).contains(&c.workers) {
        r.errors
            .push(format!("pop3.workers: must be 1 to {}", super::MAX_WORKERS));
    }
    let l = &c.limits;
    if l.max_connections == 0 {
        r.errors
            .push("pop3.max_connections: must be at least 1".into());
    }
    for (name, d) in [
        ("login_timeout", l.login_timeout),
        ("idle_timeout", l.idle_timeout),
        ("session_timeout", l.session_timeout),
        ("send_timeout", l.send_timeout),
        ("auth_failure_window", c.auth_throttle.window),
    ] {
        if d.is_zero() {
            r.errors
                .push(format!("pop3.{name}: must be more than zero"));
        }
    }
    if l.idle_timeout < RFC_MIN_AUTOLOGOUT {
        r.warnings.push(format!(
            "pop3.idle_timeout: {:?} is under the 10 minutes RFC 1939 asks of an autologout \
             timer",
            l.idle_timeout
        ));
    }
    if c.auth_throttle.max_delay < c.auth_throttle.delay {
        r.errors
            .push("pop3.auth_failure_max_delay: must be at least auth_failure_delay".into());
    }
    for pair in &c.tls {
        if let Err(errors) = stoa_netkit::tls::load_certified_keys(std::slice::from_ref(pair)) {
            for e in errors.iter().map(ToString::to_string) {
                // The same files may serve SMTP, whose check reported them already.
                if !r.errors.contains(&e) {
                    r.errors.push(e);
                }
            }
        }
    }
}
