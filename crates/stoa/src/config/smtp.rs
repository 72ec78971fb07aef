//! The mail server's part of the configuration: the `[smtp]` table, then the mail
//! flags over it, then its checks. Errors join the same report as the web
//! server's, so one run names every mistake. It prints `[smtp]`, needs the mail
//! queue, and binds over the shared directory, store, throttle and queue runner.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use stoa_smtp::config::CertKeyFiles;
use toml::Table;

use super::auth_throttle::{self, Given};
use super::mail_limits::SMTP_LIMIT_KEYS;
use super::print::{Doc, addrs, duration, int, nets, path, strings};
use super::service::{self, Configured, Finish, Implied, Service, Settled, Shared};
use super::units::{parse_addr, parse_net};
use super::{Report, mail, mail_limits};
use crate::cli::ServeArgs;
use crate::privilege::Need;

/// SMTP's entry in the list of servers.
pub(super) static SMTP: Service = Service {
    name: "smtp",
    keys: &["smtp"],
    mail: true,
    role: true,
    implied: Implied::ByMailDir,
    flags_given,
    read: |file, cx, r| service::boxed(read_table(file, cx.base, r)),
    draft: service::default::<Draft>,
};

impl service::Draft for Draft {
    fn finish(self: Box<Self>, cx: &mut Finish<'_>, r: &mut Report) -> Option<Box<dyn Configured>> {
        let auth = self.auth.clone();
        let mut c = finish(*self, cx.args, cx.certs.clone(), r);
        c.mail_hosts = cx.mail_hosts.to_vec();
        cx.uses_store("smtp", &c.mail_dir);
        cx.shares_throttle("smtp", "SMTP AUTH", auth);
        Some(Box::new(c))
    }
}

impl Configured for stoa_smtp::Config {
    fn service(&self) -> &'static Service {
        &SMTP
    }

    /// SMTP AUTH counts failed logins in the throttle POP3 shares.
    fn settle(&mut self, settled: &Settled<'_>, _r: &mut Report) {
        self.auth_throttle = settled.auth_throttle.clone();
    }

    fn print(&self, doc: &mut Doc) {
        let c = self;
        doc.table("smtp");
        doc.set("mail_dir", path(&c.mail_dir));
        doc.set("hostname", c.hostname.as_str());
        doc.set("domains", strings(&c.domains));
        doc.set("listen", addrs(&c.listen));
        doc.set("submission_listen", addrs(&c.submission_listen));
        doc.tls(&c.tls);
        doc.set("trusted_networks", nets(&c.trusted_networks));
        doc.optional("relay_host", c.relay_host.as_deref());
        doc.set("sender_login_match", c.sender_login_match);
        doc.set("delivered_to", c.delivered_to);
        doc.set("workers", int(c.workers));
        mail_limits::print(doc, &c.limits);
        let q = &c.queue;
        doc.set("min_backoff", duration(q.min_backoff));
        doc.set("max_backoff", duration(q.max_backoff));
        doc.set("max_queue_lifetime", duration(q.max_lifetime));
        doc.set("max_deliveries", int(q.max_deliveries));
        doc.set("relay_timeout", duration(q.relay_command_timeout));
        auth_throttle::print(doc, &c.auth_throttle);
        doc.set("shutdown_grace", duration(c.shutdown_grace));
    }

    fn paths(&self, needs: &mut Vec<Need>, managed: &mut Vec<PathBuf>) {
        let queue = self.mail_dir.join("queue");
        needs.push(Need::write("the mail queue", &queue));
        managed.push(queue);
    }

    /// Binds over the shared directory and store, on the queue runner of the
    /// mail parts (opened here the first time, given the new settings on a
    /// reload).
    fn bind(
        mut self: Box<Self>,
        shared: &mut Shared<'_>,
    ) -> anyhow::Result<Box<dyn stoa_netkit::server::Service>> {
        self.sockets = shared.sockets.clone();
        let config = *self;
        let parts = shared.mail()?;
        let local = Arc::new(
            stoa_smtp::StoreDelivery::new(Arc::clone(&parts.store))
                .with_delivered_to(config.delivered_to),
        );
        let runner = match &parts.runner {
            Some(runner) => {
                runner
                    .update(&config, parts.directory.clone(), local)
                    .context("cannot start the mail server")?;
                Arc::clone(runner)
            }
            None => {
                let runner = stoa_smtp::QueueRunner::open(&config, parts.directory.clone(), local)
                    .context("cannot start the mail server")?;
                if runner.recovered() > 0 {
                    tracing::info!("{} queued messages recovered", runner.recovered());
                }
                let runner = Arc::new(runner);
                parts.runner = Some(Arc::clone(&runner));
                runner
            }
        };
        let throttle = Arc::clone(&parts.throttle);
        let server =
            stoa_smtp::Server::bind_on_runner(config, parts.directory.clone(), throttle, runner)
                .context("cannot start the mail server")?;
        Ok(Box::new(server))
    }
}

/// Whether any SMTP flag was given (`--mail-dir` is shared with POP3 and is not
/// one).
fn flags_given(args: &ServeArgs) -> bool {
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
    "sender_login_match",
    "delivered_to",
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
fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
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
    r.boolean_into(t, P, "sender_login_match", &mut c.sender_login_match);
    r.boolean_into(t, P, "delivered_to", &mut c.delivered_to);
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
struct Draft {
    mail_dir: Option<PathBuf>,
    config: stoa_smtp::Config,
    /// The failed-login throttle's keys this table gave (shared with `[pop3]`).
    auth: Given,
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
fn finish(
    mut d: Draft,
    args: &ServeArgs,
    certs: Vec<CertKeyFiles>,
    r: &mut Report,
) -> stoa_smtp::Config {
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
    d.config
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
