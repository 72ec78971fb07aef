//! The POP3 server's part of the configuration: the `[pop3]` table, then the POP3
//! flags over it, then its checks. Errors join the same report as the web and SMTP
//! servers', so one run names every mistake.

use std::path::{Path, PathBuf};
use std::time::Duration;

use stoa_pop3::config::CertKeyFiles;
use toml::{Table, Value};

use super::auth_throttle::{self, Given};
use super::{Report, mail, parse_addr};
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
    /// The failed-login throttle's keys this table gave (shared with `[smtp]`).
    pub(super) auth: Given,
}

/// The prefix of `[pop3]` keys in messages.
const P: &str = "pop3.";

/// The keys of `[pop3]`.
const KEYS: &[&str] = &[
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
];

/// The `[pop3]` table, if present. `base` resolves relative paths (the file's
/// directory).
pub(super) fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    let (t, mail_dir) = r.mail_table(table, "pop3", KEYS, base)?;
    let mut d = Draft {
        mail_dir,
        ..Draft::default()
    };
    let c = &mut d.config;
    r.string_into(t, P, "hostname", &mut c.hostname);
    c.listen = r.parsed_list(t, P, "listen", parse_addr);
    c.tls_listen = r.parsed_list(t, P, "tls_listen", parse_addr);
    if let Some(certs) = r.mail_tls(t, P, base) {
        c.tls = certs;
    }
    match t.get("allow_plaintext_auth") {
        None => {}
        Some(Value::Boolean(b)) => c.allow_plaintext_auth = *b,
        Some(other) => r.errors.push(format!(
            "{P}allow_plaintext_auth: expected true or false, found {other}"
        )),
    }
    r.integer_into(t, P, "workers", &mut c.workers);
    read_limits(t, c, r);
    d.auth = auth_throttle::read(t, P, r);
    Some(d)
}

fn read_limits(t: &Table, c: &mut stoa_pop3::Config, r: &mut Report) {
    let l = &mut c.limits;
    r.integer_into(t, P, "max_connections", &mut l.max_connections);
    let per_client = &mut l.max_connections_per_client;
    r.integer_into(t, P, "max_connections_per_client", per_client);
    r.duration(t, P, "login_timeout", &mut l.login_timeout);
    r.duration(t, P, "idle_timeout", &mut l.idle_timeout);
    r.duration(t, P, "session_timeout", &mut l.session_timeout);
    r.duration(t, P, "send_timeout", &mut l.send_timeout);
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
    c.auth_throttle = d.auth.settings();
    r.flag_list(
        "--pop3-listen",
        &args.pop3_listen,
        parse_addr,
        &mut c.listen,
    );
    r.flag_list(
        "--pop3s-listen",
        &args.pop3s_listen,
        parse_addr,
        &mut c.tls_listen,
    );
    mail::apply_shared_flags(args, certs, &mut c.tls, &mut c.workers);
    let mail_dir = mail_dir(args.mail_dir.as_deref(), d.mail_dir, smtp_mail_dir, r);
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

/// The mail directory: the flag's, else `pop3.mail_dir` (which must be SMTP's
/// when both are given), else SMTP's.
fn mail_dir(
    flag: Option<&Path>,
    own: Option<PathBuf>,
    smtp: Option<&Path>,
    r: &mut Report,
) -> Option<PathBuf> {
    match (flag, own, smtp) {
        (Some(flag), _, _) => Some(flag.to_owned()),
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
    }
}

fn validate(c: &stoa_pop3::Config, r: &mut Report) {
    check_listeners(c, r);
    r.check_host_and_workers("pop3.", &c.hostname, c.workers);
    let l = &c.limits;
    r.check(
        l.max_connections != 0,
        "pop3.max_connections: must be at least 1",
    );
    r.nonzero(
        "pop3.",
        &[
            ("login_timeout", l.login_timeout),
            ("idle_timeout", l.idle_timeout),
            ("session_timeout", l.session_timeout),
            ("send_timeout", l.send_timeout),
        ],
    );
    if l.idle_timeout < RFC_MIN_AUTOLOGOUT {
        r.warnings.push(format!(
            "pop3.idle_timeout: {:?} is under the 10 minutes RFC 1939 asks of an autologout \
             timer",
            l.idle_timeout
        ));
    }
    auth_throttle::validate(&c.auth_throttle, P, r);
    for e in mail::tls_errors(&c.tls) {
        // The same files may serve SMTP, whose check reported them already.
        if !r.errors.contains(&e) {
            r.errors.push(e);
        }
    }
}

/// A listener at least, POP3S ones with certificates, and a warning for a
/// plain listener that could accept no login.
fn check_listeners(c: &stoa_pop3::Config, r: &mut Report) {
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
}
