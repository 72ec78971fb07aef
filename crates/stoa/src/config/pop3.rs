//! The POP3 server's part of the configuration: the `[pop3]` table, then the POP3
//! flags over it, then its checks. Errors join the same report as the web and SMTP
//! servers', so one run names every mistake. It prints `[pop3]` (and what
//! `[pop3_proxy]` prints alike), and binds over the shared directory, store and
//! throttle.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use toml::{Table, Value};

use super::Report;
use super::auth_throttle::{self, Given};
use super::mail::{self, Names};
use super::print::{Doc, addrs, duration, int, nets, path};
use super::service::{self, Configured, Finish, Implied, Service, Settled, Shared};
use super::units::{parse_addr, parse_net};

/// POP3's entry in the list of servers.
pub(super) static POP3: Service = Service {
    name: "pop3",
    keys: &["pop3"],
    mail: true,
    role: true,
    implied: Implied::Never,
    flags_given: |args| !args.pop3_listen.is_empty() || !args.pop3s_listen.is_empty(),
    read: |file, cx, r| service::boxed(read_table(file, cx.base, r)),
    draft: service::default::<Draft>,
};

impl service::Draft for Draft {
    fn finish(self: Box<Self>, cx: &mut Finish<'_>, r: &mut Report) -> Option<Box<dyn Configured>> {
        let auth = self.auth.clone();
        let pop3 = finish(*self, cx, r)?;
        cx.uses_store("pop3", &pop3.mail_dir);
        cx.shares_throttle("pop3", "POP3 logins", auth);
        Some(Box::new(pop3))
    }
}

impl Configured for Pop3 {
    fn service(&self) -> &'static Service {
        &POP3
    }

    /// POP3 counts failed logins in the throttle SMTP AUTH shares.
    fn settle(&mut self, settled: &Settled<'_>, _r: &mut Report) {
        self.config.auth_throttle = settled.auth_throttle.clone();
    }

    fn print(&self, doc: &mut Doc) {
        doc.table("pop3");
        doc.set("mail_dir", path(&self.mail_dir));
        print_common(doc, &self.config);
        doc.set("trusted_proxies", nets(&self.config.trusted_proxies));
        print_limits(doc, &self.config);
    }

    fn bind(
        self: Box<Self>,
        shared: &mut Shared<'_>,
    ) -> anyhow::Result<Box<dyn stoa_netkit::server::Service>> {
        let mut config = self.config;
        config.sockets = shared.sockets.clone();
        let parts = shared.mail()?;
        let server = stoa_pop3::Server::bind_with_throttle(
            config,
            parts.directory.clone(),
            parts.store.clone(),
            Arc::clone(&parts.throttle),
        )
        .context("cannot start the POP3 server")?;
        Ok(Box::new(server))
    }
}

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

/// The `[pop3]` table while it is being read.
#[derive(Debug, Default)]
struct Draft {
    mail_dir: Option<PathBuf>,
    config: stoa_pop3::Config,
    /// The failed-login throttle's keys this table gave (shared with `[smtp]`).
    auth: Given,
}

/// The prefix of `[pop3]` keys in messages.
const P: &str = "pop3.";

/// The keys `[pop3]` and `[pop3_proxy]` share (what [`read_common`] and the
/// throttle read, and `mail_dir`).
pub(super) const COMMON_KEYS: &[&str] = &[
    "mail_dir",
    "hostname",
    "listen",
    "tls_listen",
    "tls",
    "allow_plaintext_auth",
    "secure_networks",
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

/// The keys only `[pop3]` has.
const OWN_KEYS: &[&str] = &["trusted_proxies"];

/// The `[pop3]` table, if present. `base` resolves relative paths (the file's
/// directory).
fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    let keys = [COMMON_KEYS, OWN_KEYS].concat();
    let (t, mail_dir) = r.mail_table(table, "pop3", &keys, base)?;
    let mut d = Draft {
        mail_dir,
        ..Draft::default()
    };
    read_common(t, P, base, &mut d.config, r);
    d.config.trusted_proxies = r.parsed_list(t, P, "trusted_proxies", parse_net);
    d.auth = auth_throttle::read(t, P, r);
    Some(d)
}

/// What `[pop3]` and `[pop3_proxy]` (prefix `p`) read alike: the listeners, the
/// login rules, the workers and the limits.
pub(super) fn read_common(
    t: &Table,
    p: &str,
    base: Option<&Path>,
    c: &mut stoa_pop3::Config,
    r: &mut Report,
) {
    r.string_into(t, p, "hostname", &mut c.hostname);
    c.listen = r.parsed_list(t, p, "listen", parse_addr);
    c.tls_listen = r.parsed_list(t, p, "tls_listen", parse_addr);
    if let Some(certs) = r.mail_tls(t, p, base) {
        c.tls = certs;
    }
    match t.get("allow_plaintext_auth") {
        None => {}
        Some(Value::Boolean(b)) => c.allow_plaintext_auth = *b,
        Some(other) => r.errors.push(format!(
            "{p}allow_plaintext_auth: expected true or false, found {other}"
        )),
    }
    if t.contains_key("secure_networks") {
        c.secure_networks = r.parsed_list(t, p, "secure_networks", parse_net);
    }
    r.integer_into(t, p, "workers", &mut c.workers);
    read_limits(t, p, c, r);
}

fn read_limits(t: &Table, p: &str, c: &mut stoa_pop3::Config, r: &mut Report) {
    let l = &mut c.limits;
    r.integer_into(t, p, "max_connections", &mut l.max_connections);
    let per_client = &mut l.max_connections_per_client;
    r.integer_into(t, p, "max_connections_per_client", per_client);
    r.duration(t, p, "login_timeout", &mut l.login_timeout);
    r.duration(t, p, "idle_timeout", &mut l.idle_timeout);
    r.duration(t, p, "session_timeout", &mut l.session_timeout);
    r.duration(t, p, "send_timeout", &mut l.send_timeout);
    r.duration(t, p, "shutdown_grace", &mut c.shutdown_grace);
}

/// Applies the POP3 flags over the file's `[pop3]` (or the defaults), then checks
/// the result. The mail directory must be the one of the server finished before
/// it that uses the store (SMTP's: the flag, or `smtp.mail_dir`).
fn finish(mut d: Draft, cx: &Finish<'_>, r: &mut Report) -> Option<Pop3> {
    let (args, certs) = (cx.args, cx.certs.clone());
    let before = cx.mail_dir();
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
    let mail_dir = mail_dir(args.mail_dir.as_deref(), d.mail_dir, before, r);
    if mail_dir.is_none() && before.is_none() {
        r.errors.push(
            "no mail directory: give --mail-dir DIR or pop3.mail_dir in the configuration file"
                .into(),
        );
    }
    validate(c, &NAMES, r);
    mail_dir.map(|mail_dir| Pop3 {
        mail_dir,
        config: d.config,
    })
}

/// The mail directory: the flag's, else `pop3.mail_dir` (which must be SMTP's
/// when both are given: `before`, with its table's name), else SMTP's.
fn mail_dir(
    flag: Option<&Path>,
    own: Option<PathBuf>,
    before: Option<(&str, &Path)>,
    r: &mut Report,
) -> Option<PathBuf> {
    match (flag, own, before) {
        (Some(flag), _, _) => Some(flag.to_owned()),
        (None, Some(own), Some((name, smtp))) if own != smtp => {
            r.errors.push(format!(
                "pop3.mail_dir {} differs from {name}.mail_dir {}: POP3 reads the store SMTP \
                 delivers into",
                own.display(),
                smtp.display()
            ));
            None
        }
        (None, Some(own), _) => Some(own),
        (None, None, before) => before.map(|(_, dir)| dir.to_owned()),
    }
}

/// The POP3 server's.
const NAMES: Names = Names {
    p: P,
    plain: "POP3",
    tls: "POP3S",
    a: "a",
    upgrade: "STLS",
    listen_flag: "--pop3-listen",
    tls_flag: "--pop3s-listen",
};

pub(super) fn validate(c: &stoa_pop3::Config, n: &Names, r: &mut Report) {
    let certs = (&c.tls[..], c.allow_plaintext_auth);
    mail::check_listeners(n, (&c.listen, &c.tls_listen), certs, r);
    let p = n.p;
    r.check_host_and_workers(p, &c.hostname, c.workers);
    let l = &c.limits;
    r.check(
        l.max_connections != 0,
        &format!("{p}max_connections: must be at least 1"),
    );
    r.nonzero(
        p,
        &[
            ("login_timeout", l.login_timeout),
            ("idle_timeout", l.idle_timeout),
            ("session_timeout", l.session_timeout),
            ("send_timeout", l.send_timeout),
        ],
    );
    if l.idle_timeout < RFC_MIN_AUTOLOGOUT {
        r.warnings.push(format!(
            "{p}idle_timeout: {:?} is under the 10 minutes RFC 1939 asks of an autologout \
             timer",
            l.idle_timeout
        ));
    }
    auth_throttle::validate(&c.auth_throttle, p, r);
    for e in mail::tls_errors(&c.tls) {
        // The same files may serve SMTP, whose check reported them already.
        if !r.errors.contains(&e) {
            r.errors.push(e);
        }
    }
}

/// A listener at least, POP3S ones with certificates, and a warning for a
/// plain listener that could accept no login.
/// What `[pop3]` and `[pop3_proxy]` share before their own keys ([`read_common`]'s keys).
pub(super) fn print_common(doc: &mut Doc, c: &stoa_pop3::Config) {
    doc.set("hostname", c.hostname.as_str());
    doc.set("listen", addrs(&c.listen));
    doc.set("tls_listen", addrs(&c.tls_listen));
    doc.tls(&c.tls);
    doc.set("allow_plaintext_auth", c.allow_plaintext_auth);
    doc.set("secure_networks", nets(&c.secure_networks));
    doc.set("workers", int(c.workers));
}

/// `[pop3]`'s and `[pop3_proxy]`'s limits, throttle and grace.
pub(super) fn print_limits(doc: &mut Doc, c: &stoa_pop3::Config) {
    let l = &c.limits;
    doc.set("max_connections", int(l.max_connections));
    doc.set(
        "max_connections_per_client",
        int(l.max_connections_per_client),
    );
    doc.set("login_timeout", duration(l.login_timeout));
    doc.set("idle_timeout", duration(l.idle_timeout));
    doc.set("session_timeout", duration(l.session_timeout));
    doc.set("send_timeout", duration(l.send_timeout));
    auth_throttle::print(doc, &c.auth_throttle);
    doc.set("shutdown_grace", duration(c.shutdown_grace));
}
