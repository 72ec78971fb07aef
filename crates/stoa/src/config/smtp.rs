//! The mail server's part of the configuration: the `[smtp]` table, then the mail
//! flags over it, then its checks. Errors join the same report as the web
//! server's, so one run names every mistake.

use std::path::{Path, PathBuf};

use stoa_smtp::config::{CertKeyFiles, IpNet};
use toml::{Table, Value};

use super::{Report, parse_addr, parse_count, read_certs};
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

/// The `[smtp]` table, if present. `base` resolves relative paths (the file's
/// directory).
pub(super) fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    const P: &str = "smtp.";
    let t = r.table(table, "", "smtp")?;
    r.known_keys(
        t,
        P,
        &[
            "mail_dir",
            "hostname",
            "domains",
            "listen",
            "submission_listen",
            "tls",
            "trusted_networks",
            "relay_host",
            "workers",
            "max_message_size",
            "max_recipients",
            "max_connections",
            "max_connections_per_client",
            "command_timeout",
            "data_timeout",
            "session_timeout",
            "send_timeout",
            "min_backoff",
            "max_backoff",
            "max_queue_lifetime",
            "max_deliveries",
            "relay_timeout",
            "shutdown_grace",
        ],
    );
    let mut d = Draft::default();
    let rebase = |p: PathBuf| match base {
        Some(base) if p.is_relative() => base.join(p),
        _ => p,
    };
    d.mail_dir = r.string(t, P, "mail_dir").map(|s| rebase(PathBuf::from(s)));
    if let Some(name) = r.string(t, P, "hostname") {
        d.config.hostname = name;
    }
    d.config.domains = strings(t, P, "domains", r);
    for text in strings(t, P, "listen", r) {
        match parse_addr(&text) {
            Ok(addr) => d.config.listen.push(addr),
            Err(e) => r.errors.push(format!("{P}listen: {e}")),
        }
    }
    for text in strings(t, P, "submission_listen", r) {
        match parse_addr(&text) {
            Ok(addr) => d.config.submission_listen.push(addr),
            Err(e) => r.errors.push(format!("{P}submission_listen: {e}")),
        }
    }
    if let Some(v) = t.get("tls")
        && let Some(certs) = read_certs(v, "smtp.tls", r)
    {
        d.config.tls = certs
            .into_iter()
            .map(|c| CertKeyFiles {
                cert: rebase(c.cert),
                key: rebase(c.key),
            })
            .collect();
    }
    for text in strings(t, P, "trusted_networks", r) {
        match parse_net(&text) {
            Ok(net) => d.config.trusted_networks.push(net),
            Err(e) => r.errors.push(format!("{P}trusted_networks: {e}")),
        }
    }
    d.config.relay_host = r.string(t, P, "relay_host");
    if let Some(n) = r.integer(t, P, "workers") {
        d.config.workers = n;
    }
    read_limits(t, &mut d.config, r);
    Some(d)
}

fn read_limits(t: &Table, c: &mut stoa_smtp::Config, r: &mut Report) {
    const P: &str = "smtp.";
    let l = &mut c.limits;
    r.size(t, P, "max_message_size", &mut l.session.max_message_size);
    r.integer_into(t, P, "max_recipients", &mut l.session.max_recipients);
    r.integer_into(t, P, "max_connections", &mut l.max_connections);
    let per_client = &mut l.max_connections_per_client;
    r.integer_into(t, P, "max_connections_per_client", per_client);
    r.duration(t, P, "command_timeout", &mut l.command_timeout);
    r.duration(t, P, "data_timeout", &mut l.data_timeout);
    r.duration(t, P, "session_timeout", &mut l.session_timeout);
    r.duration(t, P, "send_timeout", &mut l.send_timeout);
    let q = &mut c.queue;
    r.duration(t, P, "min_backoff", &mut q.min_backoff);
    r.duration(t, P, "max_backoff", &mut q.max_backoff);
    r.duration(t, P, "max_queue_lifetime", &mut q.max_lifetime);
    r.integer_into(t, P, "max_deliveries", &mut q.max_deliveries);
    r.duration(t, P, "relay_timeout", &mut q.relay_command_timeout);
    r.duration(t, P, "shutdown_grace", &mut c.shutdown_grace);
}

/// An array of strings (a single string is taken as a one-element array).
pub(super) fn strings(t: &Table, path: &str, key: &str, r: &mut Report) -> Vec<String> {
    match t.get(key) {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|v| match v.as_str() {
                Some(s) => Some(s.to_owned()),
                None => {
                    r.errors
                        .push(format!("{path}{key}: expected strings, found {v}"));
                    None
                }
            })
            .collect(),
        Some(other) => {
            r.errors.push(format!(
                "{path}{key}: expected an array of strings, found {}",
                other.type_str()
            ));
            Vec::new()
        }
    }
}

/// The mail server's configuration while it is being read.
#[derive(Debug)]
pub(super) struct Draft {
    mail_dir: Option<PathBuf>,
    config: stoa_smtp::Config,
}

impl Default for Draft {
    fn default() -> Self {
        Draft {
            mail_dir: None,
            config: stoa_smtp::Config::new(PathBuf::new()),
        }
    }
}

/// Applies the mail flags over the file's `[smtp]` (or the defaults), then checks
/// the result. `certs` are the `--tls-cert`/`--tls-key` pairs, `workers` the
/// `--workers` flag.
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
    let c = &mut d.config;
    if !args.smtp_listen.is_empty() {
        c.listen = addrs("--smtp-listen", &args.smtp_listen, r);
    }
    if !args.submission_listen.is_empty() {
        c.submission_listen = addrs("--submission-listen", &args.submission_listen, r);
    }
    if !args.domain.is_empty() {
        c.domains = args.domain.clone();
    }
    if let Some(host) = &args.relay_host {
        c.relay_host = Some(host.clone());
    }
    if !args.trusted_net.is_empty() {
        c.trusted_networks = Vec::new();
        for text in &args.trusted_net {
            match parse_net(text) {
                Ok(net) => c.trusted_networks.push(net),
                Err(e) => r.errors.push(format!("--trusted-net {text}: {e}")),
            }
        }
    }
    if !certs.is_empty() {
        c.tls = certs;
    }
    if let Some(text) = &args.workers
        && let Ok(n) = parse_count(text)
    {
        c.workers = n;
    }
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

fn addrs(flag: &str, texts: &[String], r: &mut Report) -> Vec<std::net::SocketAddr> {
    let mut out = Vec::new();
    for text in texts {
        match parse_addr(text) {
            Ok(addr) => out.push(addr),
            Err(e) => r.errors.push(format!("{flag} {text}: {e}")),
        }
    }
    out
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
    let mut domains = Vec::new();
    for d in &c.domains {
        match stoa_directory::address::normalize_domain(d) {
            Ok(d) => domains.push(d),
            Err(_) => r
                .errors
                .push(format!("domain {d:?}: not a valid domain name")),
        }
    }
    c.domains = domains;
    if let Some(host) = &c.relay_host {
        let ok = host
            .rsplit_once(':')
            .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok_and(|p| p > 0));
        if !ok {
            r.errors
                .push(format!("relay host {host:?}: expected HOST:PORT"));
        }
    }
    if c.hostname.is_empty()
        || c.hostname
            .contains(|ch: char| ch.is_whitespace() || ch.is_control())
    {
        r.errors
            .push(format!("smtp.hostname {:?}: not a host name", c.hostname));
    }
    if !(1..=super::MAX_WORKERS).contains(&c.workers) {
        r.errors
            .push(format!("smtp.workers: must be 1 to {}", super::MAX_WORKERS));
    }
    let l = &c.limits;
    if l.session.max_message_size == 0 {
        r.errors
            .push("smtp.max_message_size: must be more than zero".into());
    }
    if l.session.max_recipients == 0 {
        r.errors
            .push("smtp.max_recipients: must be at least 1".into());
    }
    if l.max_connections == 0 {
        r.errors
            .push("smtp.max_connections: must be at least 1".into());
    }
    for (name, d) in [
        ("command_timeout", l.command_timeout),
        ("data_timeout", l.data_timeout),
        ("session_timeout", l.session_timeout),
        ("send_timeout", l.send_timeout),
        ("min_backoff", c.queue.min_backoff),
        ("relay_timeout", c.queue.relay_command_timeout),
    ] {
        if d.is_zero() {
            r.errors
                .push(format!("smtp.{name}: must be more than zero"));
        }
    }
    if c.queue.max_backoff < c.queue.min_backoff {
        r.errors
            .push("smtp.max_backoff: must be at least min_backoff".into());
    }
    if c.queue.max_deliveries == 0 {
        r.errors
            .push("smtp.max_deliveries: must be at least 1".into());
    }
    for pair in &c.tls {
        if let Err(errors) = stoa_netkit::tls::load_certified_keys(std::slice::from_ref(pair)) {
            r.errors.extend(errors.iter().map(ToString::to_string));
        }
    }
}

/// A CIDR block, or a single address.
fn parse_net(text: &str) -> Result<IpNet, String> {
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<std::net::IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("{text:?} is not a network like 192.0.2.0/24 or an address"))
}
