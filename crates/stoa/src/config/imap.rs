//! The IMAP server's part of the configuration: the `[imap]` table, then the IMAP
//! flags over it, then its checks. It prints `[imap]` (and what `[imap_proxy]`
//! reads, checks and prints alike) and binds over the shared directory, store and
//! failed-login throttle.

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

/// IMAP's entry in the list of servers.
pub(super) static IMAP: Service = Service {
    name: "imap",
    keys: &["imap"],
    mail: true,
    role: true,
    implied: Implied::Never,
    flags_given: |args| !args.imap_listen.is_empty() || !args.imaps_listen.is_empty(),
    read: |file, cx, r| service::boxed(read_table(file, cx.base, r)),
    draft: service::default::<Draft>,
};

impl service::Draft for Draft {
    fn finish(self: Box<Self>, cx: &mut Finish<'_>, r: &mut Report) -> Option<Box<dyn Configured>> {
        let auth = self.auth.clone();
        let imap = finish(*self, cx, r)?;
        cx.uses_store("imap", &imap.mail_dir);
        cx.shares_throttle("imap", "IMAP logins", auth);
        Some(Box::new(imap))
    }
}

impl Configured for Imap {
    fn service(&self) -> &'static Service {
        &IMAP
    }

    /// IMAP counts failed logins in the throttle POP3 and SMTP AUTH share.
    fn settle(&mut self, settled: &Settled<'_>, _r: &mut Report) {
        self.config.auth_throttle = settled.auth_throttle.clone();
    }

    fn print(&self, doc: &mut Doc) {
        let c = &self.config;
        doc.table("imap");
        doc.set("mail_dir", path(&self.mail_dir));
        print_common(doc, c);
        doc.set("trusted_proxies", nets(&c.trusted_proxies));
        let append_limit = usize::try_from(c.limits.command.max_literal);
        doc.set("append_limit", int(append_limit.unwrap_or(usize::MAX)));
    }

    fn bind(
        self: Box<Self>,
        shared: &mut Shared<'_>,
    ) -> anyhow::Result<Box<dyn stoa_netkit::server::Service>> {
        let mut config = self.config;
        config.sockets = shared.sockets.clone();
        let parts = shared.mail()?;
        let sessions = parts
            .imap_sessions
            .get_or_init(|| stoa_imap::Sessions::new(&parts.store))
            .clone();
        let server = stoa_imap::Server::bind(
            config,
            parts.directory.clone(),
            parts.store.clone(),
            Some(Arc::clone(&parts.throttle)),
            Some(sessions),
        )
        .context("cannot start the IMAP server")?;
        Ok(Box::new(server))
    }
}

/// RFC 9051 §5.4's minimum autologout timer after login.
const RFC_MIN_AUTOLOGOUT: Duration = Duration::from_secs(30 * 60);

/// The IMAP server as configured: its mail directory and its settings.
#[derive(Debug)]
pub(crate) struct Imap {
    /// The mail directory (the directory and the store beneath).
    pub(crate) mail_dir: PathBuf,
    /// The server's settings.
    pub(crate) config: stoa_imap::Config,
}

/// The `[imap]` table while it is being read.
#[derive(Debug, Default)]
struct Draft {
    mail_dir: Option<PathBuf>,
    config: stoa_imap::Config,
    auth: Given,
}

/// The prefix of `[imap]` keys in messages.
const P: &str = "imap.";

/// The keys `[imap]` and `[imap_proxy]` share (what [`read_common`] and the
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
    "max_sessions_per_user",
    "max_line",
    "login_timeout",
    "idle_timeout",
    "idle_command_timeout",
    "idle_check",
    "send_timeout",
    "auth_failure_delay",
    "auth_failure_max_delay",
    "auth_max_failures",
    "auth_failure_window",
    "shutdown_grace",
];

/// The keys only `[imap]` has.
const OWN_KEYS: &[&str] = &["append_limit", "trusted_proxies"];

/// The `[imap]` table, if present.
fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    let keys = [COMMON_KEYS, OWN_KEYS].concat();
    let (t, mail_dir) = r.mail_table(table, "imap", &keys, base)?;
    let mut d = Draft {
        mail_dir,
        ..Draft::default()
    };
    let c = &mut d.config;
    read_common(t, P, base, c, r);
    r.size(t, P, "append_limit", &mut c.limits.command.max_literal);
    c.trusted_proxies = r.parsed_list(t, P, "trusted_proxies", parse_net);
    d.auth = auth_throttle::read(t, P, r);
    Some(d)
}

/// What `[imap]` and `[imap_proxy]` (prefix `p`) read alike: the listeners, the
/// login rules, the workers and the limits.
pub(super) fn read_common(
    t: &Table,
    p: &str,
    base: Option<&Path>,
    c: &mut stoa_imap::Config,
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
    let l = &mut c.limits;
    r.integer_into(t, p, "max_connections", &mut l.max_connections);
    let per_client = &mut l.max_connections_per_client;
    r.integer_into(t, p, "max_connections_per_client", per_client);
    r.integer_into(t, p, "max_sessions_per_user", &mut l.max_sessions_per_user);
    r.size(t, p, "max_line", &mut l.command.max_line);
    r.duration(t, p, "login_timeout", &mut l.login_timeout);
    r.duration(t, p, "idle_timeout", &mut l.idle_timeout);
    r.duration(t, p, "idle_command_timeout", &mut l.idle_command_timeout);
    r.duration(t, p, "idle_check", &mut l.idle_check);
    r.duration(t, p, "send_timeout", &mut l.send_timeout);
    r.duration(t, p, "shutdown_grace", &mut c.shutdown_grace);
}

/// What `[imap]` and `[imap_proxy]` print alike.
pub(super) fn print_common(doc: &mut Doc, c: &stoa_imap::Config) {
    let l = &c.limits;
    doc.set("hostname", c.hostname.as_str());
    doc.set("listen", addrs(&c.listen));
    doc.set("tls_listen", addrs(&c.tls_listen));
    doc.tls(&c.tls);
    doc.set("allow_plaintext_auth", c.allow_plaintext_auth);
    doc.set("secure_networks", nets(&c.secure_networks));
    doc.set("workers", int(c.workers));
    doc.set("max_connections", int(l.max_connections));
    let per_client = int(l.max_connections_per_client);
    doc.set("max_connections_per_client", per_client);
    doc.set("max_sessions_per_user", int(l.max_sessions_per_user));
    doc.set("max_line", int(l.command.max_line));
    doc.set("login_timeout", duration(l.login_timeout));
    doc.set("idle_timeout", duration(l.idle_timeout));
    doc.set("idle_command_timeout", duration(l.idle_command_timeout));
    doc.set("idle_check", duration(l.idle_check));
    doc.set("send_timeout", duration(l.send_timeout));
    auth_throttle::print(doc, &c.auth_throttle);
    doc.set("shutdown_grace", duration(c.shutdown_grace));
}

/// Applies the IMAP flags over the file's `[imap]` (or the defaults), then checks
/// the result. The mail directory must be the one of the servers before it.
fn finish(mut d: Draft, cx: &Finish<'_>, r: &mut Report) -> Option<Imap> {
    let args = cx.args;
    let before = cx.mail_dir();
    let c = &mut d.config;
    c.auth_throttle = d.auth.settings();
    apply_flags(c, &NAMES, (&args.imap_listen, &args.imaps_listen), cx, r);
    // The command limit follows the literal limit: a whole APPEND and its line.
    let l = &mut c.limits.command;
    l.max_command = usize::try_from(l.max_literal)
        .unwrap_or(usize::MAX)
        .saturating_add(l.max_line);
    let mail_dir = match (args.mail_dir.as_deref(), d.mail_dir, before) {
        (Some(flag), _, _) => Some(flag.to_owned()),
        (None, Some(own), Some((name, other))) if own != other => {
            r.errors.push(format!(
                "imap.mail_dir {} differs from {name}.mail_dir {}: IMAP reads the store SMTP \
                 delivers into",
                own.display(),
                other.display()
            ));
            None
        }
        (None, Some(own), _) => Some(own),
        (None, None, before) => before.map(|(_, dir)| dir.to_owned()),
    };
    if mail_dir.is_none() && before.is_none() {
        r.errors.push(
            "no mail directory: give --mail-dir DIR or imap.mail_dir in the configuration file"
                .into(),
        );
    }
    validate(c, &NAMES, r);
    mail_dir.map(|mail_dir| Imap {
        mail_dir,
        config: d.config,
    })
}

/// How messages name the IMAP server.
const NAMES: Names = Names {
    p: P,
    plain: "IMAP",
    tls: "IMAPS",
    a: "an",
    upgrade: "STARTTLS",
    listen_flag: "--imap-listen",
    tls_flag: "--imaps-listen",
};

/// The listener flags (`listen`, `tls_listen`) and the shared TLS and worker flags
/// over the file's settings.
pub(super) fn apply_flags(
    c: &mut stoa_imap::Config,
    n: &Names,
    (listen, tls_listen): (&[String], &[String]),
    cx: &Finish<'_>,
    r: &mut Report,
) {
    r.flag_list(n.listen_flag, listen, parse_addr, &mut c.listen);
    r.flag_list(n.tls_flag, tls_listen, parse_addr, &mut c.tls_listen);
    mail::apply_shared_flags(cx.args, cx.certs.clone(), &mut c.tls, &mut c.workers);
}

/// The checks of `[imap]` and `[imap_proxy]`.
pub(super) fn validate(c: &stoa_imap::Config, n: &Names, r: &mut Report) {
    let p = n.p;
    let certs = (&c.tls[..], c.allow_plaintext_auth);
    mail::check_listeners(n, (&c.listen, &c.tls_listen), certs, r);
    r.check_host_and_workers(p, &c.hostname, c.workers);
    let l = &c.limits;
    r.check(
        l.max_connections != 0,
        &format!("{p}max_connections: must be at least 1"),
    );
    r.check(
        l.command.max_line >= 1024,
        &format!("{p}max_line: must be at least 1024 bytes"),
    );
    r.check(
        l.command.max_literal >= 1024,
        &format!("{p}append_limit: must be at least 1024 bytes"),
    );
    r.nonzero(
        p,
        &[
            ("login_timeout", l.login_timeout),
            ("idle_timeout", l.idle_timeout),
            ("idle_command_timeout", l.idle_command_timeout),
            ("idle_check", l.idle_check),
            ("send_timeout", l.send_timeout),
        ],
    );
    if l.idle_timeout < RFC_MIN_AUTOLOGOUT {
        r.warnings.push(format!(
            "{p}idle_timeout: {:?} is under the 30 minutes RFC 9051 asks of an autologout timer",
            l.idle_timeout
        ));
    }
    auth_throttle::validate(&c.auth_throttle, p, r);
    for e in mail::tls_errors(&c.tls) {
        if !r.errors.contains(&e) {
            r.errors.push(e);
        }
    }
}
