//! The mail server's part of the configuration: the `[smtp]` table, then the mail
//! flags over it, then its checks. Errors join the same report as the web
//! server's, so one run names every mistake.

use std::path::{Path, PathBuf};

use stoa_smtp::config::{CertKeyFiles, IpNet};
use toml::Table;

use super::auth_throttle::{self, Given};
use super::mail_limits::SMTP_LIMIT_KEYS;
use super::{Report, mail, parse_addr};
use crate::cli::ServeArgs;

/// Whether any SMTP flag was given (`--mail-dir` is shared with POP3 and is not
/// one).
pub(super) fn flags_given(args: &ServeArgs) -> bool {
    !args.smtp_listen.is_empty()
        || !args.submission_listen.is_empty()
        || !args.domain.is_empty()
        || args.relay_host.is_some()
        || !args.trusted_net.is_empty()
}

/// The prefix of `[smtp]` keys in messages.
const P: &str = "smtp.";

/// The keys of `[smtp]`, besides [`SMTP_LIMIT_KEYS`].
const KEYS: &[&str] = &[
    "mail_dir",
    "hostname",
    "domains",
    "listen",
    "submission_listen",
    "tls",
    "trusted_networks",
    "relay_host",
    "workers",
    "min_backoff",
    "max_backoff",
    "max_queue_lifetime",
    "max_deliveries",
    "relay_timeout",
    "auth_failure_delay",
    "auth_failure_max_delay",
    "auth_max_failures",
    "auth_failure_window",
    "shutdown_grace",
];

/// The `[smtp]` table, if present. `base` resolves relative paths (the file's
/// directory).
pub(super) fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    let (t, mail_dir) = r.mail_table(table, "smtp", &[KEYS, SMTP_LIMIT_KEYS].concat(), base)?;
    let mut d = Draft {
        mail_dir,
        ..Draft::default()
    };
    let c = &mut d.config;
    r.string_into(t, P, "hostname", &mut c.hostname);
    c.domains = r.strings(t, P, "domains");
    c.listen = r.parsed_list(t, P, "listen", parse_addr);
    c.submission_listen = r.parsed_list(t, P, "submission_listen", parse_addr);
    if let Some(certs) = r.mail_tls(t, P, base) {
        c.tls = certs;
    }
    c.trusted_networks = r.parsed_list(t, P, "trusted_networks", parse_net);
    c.relay_host = r.string(t, P, "relay_host");
    r.integer_into(t, P, "workers", &mut c.workers);
    read_limits(t, c, r);
    d.auth = auth_throttle::read(t, P, r);
    Some(d)
}

fn read_limits(t: &Table, c: &mut stoa_smtp::Config, r: &mut Report) {
    r.smtp_limits(t, P, &mut c.limits);
    let q = &mut c.queue;
    r.duration(t, P, "min_backoff", &mut q.min_backoff);
    r.duration(t, P, "max_backoff", &mut q.max_backoff);
    r.duration(t, P, "max_queue_lifetime", &mut q.max_lifetime);
    r.integer_into(t, P, "max_deliveries", &mut q.max_deliveries);
    r.duration(t, P, "relay_timeout", &mut q.relay_command_timeout);
    r.duration(t, P, "shutdown_grace", &mut c.shutdown_grace);
}

/// The mail server's configuration while it is being read.
#[derive(Debug)]
pub(super) struct Draft {
    mail_dir: Option<PathBuf>,
    config: stoa_smtp::Config,
    /// The failed-login throttle's keys this table gave (shared with `[pop3]`).
    pub(super) auth: Given,
}

impl Default for Draft {
    fn default() -> Self {
        Draft {
            mail_dir: None,
            config: stoa_smtp::Config::new(PathBuf::new()),
            auth: Given::default(),
        }
    }
}

/// Applies the mail flags over the file's `[smtp]` (or the defaults), then checks
/// the result. `certs` are the `--tls-cert`/`--tls-key` pairs.
pub(super) fn finish(
    draft: Option<Draft>,
    args: &ServeArgs,
    certs: Vec<CertKeyFiles>,
    r: &mut Report,
) -> Option<stoa_smtp::Config> {
    let mut d = draft.unwrap_or_default();
    if let Some(dir) = &args.mail_dir {
        d.mail_dir = Some(dir.clone());
    }
    apply_flags(&mut d.config, args, certs, r);
    let c = &mut d.config;
    c.auth_throttle = d.auth.settings();
    match d.mail_dir {
        Some(dir) => c.mail_dir = dir,
        None => r.errors.push(
            "no mail directory: give --mail-dir DIR or smtp.mail_dir in the configuration file"
                .into(),
        ),
    }
    validate(c, r);
    Some(d.config)
}

fn apply_flags(
    c: &mut stoa_smtp::Config,
    args: &ServeArgs,
    certs: Vec<CertKeyFiles>,
    r: &mut Report,
) {
    r.flag_list(
        "--smtp-listen",
        &args.smtp_listen,
        parse_addr,
        &mut c.listen,
    );
    let submission = &mut c.submission_listen;
    r.flag_list(
        "--submission-listen",
        &args.submission_listen,
        parse_addr,
        submission,
    );
    if !args.domain.is_empty() {
        c.domains = args.domain.clone();
    }
    if let Some(host) = &args.relay_host {
        c.relay_host = Some(host.clone());
    }
    let trusted = &mut c.trusted_networks;
    r.flag_list("--trusted-net", &args.trusted_net, parse_net, trusted);
    mail::apply_shared_flags(args, certs, &mut c.tls, &mut c.workers);
}

fn validate(c: &mut stoa_smtp::Config, r: &mut Report) {
    if c.listen.is_empty() && c.submission_listen.is_empty() {
        r.errors.push(
            "no SMTP listener: give --smtp-listen ADDR:PORT or --submission-listen ADDR:PORT \
             (smtp.listen, smtp.submission_listen)"
                .into(),
        );
    }
    if !c.submission_listen.is_empty() && c.tls.is_empty() {
        r.warnings.push(
            "a submission listener without --tls-cert/--tls-key (smtp.tls) never offers AUTH, \
             so it accepts no mail"
                .into(),
        );
    }
    c.domains = normalize_domains(&c.domains, r);
    if let Some(host) = &c.relay_host {
        let ok = host
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        r.check(ok, &format!("relay host {host:?}: expected HOST:PORT"));
    }
    r.check_host_and_workers("smtp.", &c.hostname, c.workers);
    check_limits(c, r);
    auth_throttle::validate(&c.auth_throttle, P, r);
    r.errors.extend(mail::tls_errors(&c.tls));
}

/// The domains in their normal form; the invalid ones are reported and dropped.
fn normalize_domains(domains: &[String], r: &mut Report) -> Vec<String> {
    let mut out = Vec::new();
    for d in domains {
        match stoa_directory::address::normalize_domain(d) {
            Ok(d) => out.push(d),
            Err(_) => r
                .errors
                .push(format!("domain {d:?}: not a valid domain name")),
        }
    }
    out
}

fn check_limits(c: &stoa_smtp::Config, r: &mut Report) {
    r.check_smtp_limits(P, &c.limits);
    r.nonzero(
        P,
        &[
            ("min_backoff", c.queue.min_backoff),
            ("relay_timeout", c.queue.relay_command_timeout),
        ],
    );
    r.check(
        c.queue.max_backoff >= c.queue.min_backoff,
        "smtp.max_backoff: must be at least min_backoff",
    );
    r.check(
        c.queue.max_deliveries != 0,
        "smtp.max_deliveries: must be at least 1",
    );
}

/// A CIDR block, or a single address.
pub(super) fn parse_net(text: &str) -> Result<IpNet, String> {
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<std::net::IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("{text:?} is not a network like 192.0.2.0/24 or an address"))
}
