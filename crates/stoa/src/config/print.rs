//! The effective configuration as TOML (`stoa check-config`, in the manner of
//! `doveconf -n`): every setting of every role that runs, the file's values, the
//! flags over them and the defaults filled in, in a file `stoa serve --config`
//! reads back to the same configuration.
//!
//! Paths are printed absolute (a relative one meant the file's directory or the
//! working directory, which the printed file does not share); durations and sizes
//! in the largest unit that states them exactly. Secrets are never printed: the
//! LDAP service account's password is named by its file. A setting that is not
//! set (no relay host, no certificates) is a comment, as TOML has no null.
//!
//! The printer walks [`Loaded`] section by section in the order of
//! docs/configuration.md; a new key is a new line in its section's function,
//! and a new top-level key goes in [`top_level`], before the first table.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use stoa_netkit::tls::CertKeyFiles;
use stoa_smtp::config::IpNet;
use stoa_web::config::{AccessLogTarget, LogFormat, RuntimeModel};
use toml::Value;

use super::{Directory, Lmtp, Loaded, Pop3, Pop3Proxy};

/// The effective configuration of `loaded` as a TOML document.
pub(crate) fn effective(loaded: &Loaded) -> String {
    let mut doc = Doc::default();
    top_level(&mut doc, loaded);
    if let Some(web) = &loaded.web {
        web_sections(&mut doc, web);
    }
    if let Some(smtp) = &loaded.smtp {
        smtp_section(&mut doc, smtp);
    }
    if let Some(pop3) = &loaded.pop3 {
        pop3_section(&mut doc, pop3);
    }
    if let Some(proxy) = &loaded.pop3_proxy {
        pop3_proxy_section(&mut doc, proxy);
    }
    if let Some(lmtp) = &loaded.lmtp {
        lmtp_section(&mut doc, lmtp);
    }
    let mail = loaded.smtp.is_some()
        || loaded.pop3.is_some()
        || loaded.lmtp.is_some()
        || loaded.pop3_proxy.is_some();
    if mail {
        directory_section(&mut doc, &loaded.directory, loaded);
    }
    mail_hosts(&mut doc, loaded);
    if let Some(metrics) = &loaded.metrics {
        doc.table("metrics");
        doc.set("listen", metrics.listen.to_string());
    }
    doc.out
}

/// The roles that run, in words: `web, smtp, pop3`.
pub(crate) fn roles(loaded: &Loaded) -> String {
    let roles = [
        ("web", loaded.web.is_some()),
        ("smtp", loaded.smtp.is_some()),
        ("pop3", loaded.pop3.is_some()),
        ("pop3_proxy", loaded.pop3_proxy.is_some()),
        ("lmtp", loaded.lmtp.is_some()),
    ];
    let on: Vec<&str> = roles.iter().filter(|r| r.1).map(|r| r.0).collect();
    on.join(", ")
}

/// Keys outside any table (`process.rs`'s); they must come before the first
/// header.
fn top_level(doc: &mut Doc, loaded: &Loaded) {
    let p = &loaded.process;
    doc.optional("user", p.user.as_deref());
    doc.optional("group", p.group.as_deref());
    doc.set("umask", format!("{:03o}", p.umask));
}

fn web_sections(doc: &mut Doc, web: &stoa_web::Config) {
    doc.table("web");
    if web.sites.is_empty() {
        doc.set("docroot", path(&web.docroot));
    } else {
        doc.comment("docroot: in each [[site]]");
    }
    doc.set("workers", int(web.workers));
    doc.set(
        "runtime",
        match web.runtime {
            RuntimeModel::PerCore => "per-core",
            RuntimeModel::MultiThread => "multi-thread",
        },
    );
    doc.set("access_log", access_log(&web.access_log));
    doc.set(
        "log_format",
        match web.log_format {
            LogFormat::Common => "common",
            LogFormat::Combined => "combined",
        },
    );
    doc.set("shutdown_grace", duration(web.shutdown_grace));
    doc.set("http2", web.http2);
    doc.set("defer_accept", web.defer_accept);

    let l = &web.limits;
    doc.table("web.limits");
    doc.set("max_request_line", size(l.head.max_request_line));
    doc.set("max_header_line", size(l.head.max_header_line));
    doc.set("max_head", size(l.head.max_head));
    doc.set("max_headers", int(l.head.max_headers));
    doc.set("head_timeout", duration(l.head_timeout));
    doc.set("head_timeout_per_500b", duration(l.head_timeout_per_500b));
    doc.set("head_timeout_max", duration(l.head_timeout_max));
    doc.set("body_timeout", duration(l.body_timeout));
    doc.set("max_discard_body", size(l.max_discard_body));
    doc.set("keepalive_timeout", duration(l.keepalive_timeout));
    doc.set("keepalive_requests", int(l.keepalive_requests));
    doc.set("keepalive_max_age", duration(l.keepalive_max_age));
    doc.set("send_timeout", duration(l.send_timeout));
    doc.set("max_connections", int(l.max_connections));
    doc.set("max_handshakes", int(l.max_handshakes));
    doc.set("max_pipeline", int(l.max_pipeline));
    doc.set("linger_timeout", duration(l.linger_timeout));
    doc.set("linger_idle", duration(l.linger_idle));
    doc.set("h2_max_streams", int(l.h2_max_streams));

    let c = &web.cache;
    doc.table("web.cache");
    doc.set("revalidate", duration(c.revalidate));
    doc.set("max_entries", int(c.max_entries));
    doc.set("max_open_files", int(c.max_open_files));
    doc.set("max_memory_file", size(c.max_memory_file));
    doc.set("memory_budget", size(c.memory_budget));

    let c = &web.compression;
    doc.table("web.compression");
    doc.set("precompressed", c.precompressed);
    doc.set("on_the_fly", c.on_the_fly);
    doc.set("gzip_level", int(c.gzip_level));
    doc.set("brotli_level", int(c.brotli_level));
    doc.set("min_length", size(c.min_length));
    doc.set("max_length", size(c.max_length));
    doc.set("cache_size", size(c.cache_size));
    doc.set("types", strings(&c.types));

    for addr in &web.listen {
        doc.array_table("listener");
        doc.set("address", addr.to_string());
        doc.set("protocol", "http");
    }
    for l in &web.tls_listen {
        doc.array_table("listener");
        doc.set("address", l.addr.to_string());
        doc.set("protocol", "https");
        doc.set("tls", certs(&l.certs));
    }

    if let Some(w) = &web.web99 {
        doc.table("web99");
        doc.set("enabled", true);
        doc.set("state_dir", path(&w.state_dir));
        doc.set("path", w.path.as_str());
        doc.set("max_post_body", size(w.max_post_body));
        doc.set("manager_networks", nets(&w.manager_networks));
    }
    if let Some(cgi) = &web.cgi {
        doc.table("cgi");
        doc.set("timeout", duration(cgi.timeout));
        doc.set("max_processes", int(cgi.max_processes));
        doc.set("max_output", size(cgi.max_output));
        doc.set("max_body", size(cgi.max_body));
        if web.sites.is_empty() {
            doc.table("cgi.mounts");
            if cgi.mounts.is_empty() {
                doc.comment("none");
            }
            for m in &cgi.mounts {
                doc.set(&Value::from(m.prefix.as_str()).to_string(), path(&m.dir));
            }
        }
    }
    for site in &web.sites {
        site_section(doc, site);
    }
}

/// One `[[site]]`.
fn site_section(doc: &mut Doc, site: &stoa_web::config::SiteConfig) {
    doc.array_table("site");
    doc.set("names", strings(&site.names));
    doc.set("default", site.default);
    doc.set("docroot", path(&site.docroot));
    match &site.access_log {
        Some(target) => doc.set("access_log", access_log(target)),
        None => doc.comment("access_log: the server's ([web] access_log)"),
    }
    if site.tls.is_empty() {
        doc.comment("tls: none (the HTTPS listeners' certificates)");
    } else {
        doc.set("tls", certs(&site.tls));
    }
    doc.set("web99", site.web99);
    let mut cgi = toml::Table::new();
    for m in &site.cgi {
        cgi.insert(m.prefix.clone(), path(&m.dir));
    }
    doc.set("cgi", Value::Table(cgi));
    let mut pages = toml::Table::new();
    for (status, page) in &site.error_pages {
        pages.insert(status.to_string(), Value::from(page.as_str()));
    }
    doc.set("error_pages", Value::Table(pages));
    doc.set("autoindex", site.autoindex);
}

fn smtp_section(doc: &mut Doc, c: &stoa_smtp::Config) {
    doc.table("smtp");
    doc.set("mail_dir", path(&c.mail_dir));
    doc.set("hostname", c.hostname.as_str());
    doc.set("domains", strings(&c.domains));
    doc.set("listen", addrs(&c.listen));
    doc.set("submission_listen", addrs(&c.submission_listen));
    doc.tls(&c.tls);
    doc.set("trusted_networks", nets(&c.trusted_networks));
    doc.optional("relay_host", c.relay_host.as_deref());
    doc.set("workers", int(c.workers));
    smtp_limits(doc, &c.limits);
    let q = &c.queue;
    doc.set("min_backoff", duration(q.min_backoff));
    doc.set("max_backoff", duration(q.max_backoff));
    doc.set("max_queue_lifetime", duration(q.max_lifetime));
    doc.set("max_deliveries", int(q.max_deliveries));
    doc.set("relay_timeout", duration(q.relay_command_timeout));
    auth_throttle(doc, &c.auth_throttle);
    doc.set("shutdown_grace", duration(c.shutdown_grace));
}

/// The keys of `mail_limits::SMTP_LIMIT_KEYS`, shared by `[smtp]` and `[lmtp]`.
fn smtp_limits(doc: &mut Doc, l: &stoa_smtp::config::Limits) {
    doc.set("max_message_size", size(l.session.max_message_size));
    doc.set("max_recipients", int(l.session.max_recipients));
    doc.set("max_connections", int(l.max_connections));
    doc.set(
        "max_connections_per_client",
        int(l.max_connections_per_client),
    );
    doc.set("command_timeout", duration(l.command_timeout));
    doc.set("data_timeout", duration(l.data_timeout));
    doc.set("session_timeout", duration(l.session_timeout));
    doc.set("send_timeout", duration(l.send_timeout));
}

/// The failed-login throttle's four keys (`auth_throttle.rs`).
fn auth_throttle(doc: &mut Doc, a: &stoa_netkit::throttle::AuthThrottle) {
    doc.set("auth_failure_delay", duration(a.delay));
    doc.set("auth_failure_max_delay", duration(a.max_delay));
    doc.set("auth_max_failures", int(a.max_failures));
    doc.set("auth_failure_window", duration(a.window));
}

fn pop3_section(doc: &mut Doc, pop3: &Pop3) {
    doc.table("pop3");
    doc.set("mail_dir", path(&pop3.mail_dir));
    pop3_common(doc, &pop3.config);
    doc.set("trusted_proxies", nets(&pop3.config.trusted_proxies));
    pop3_limits(doc, &pop3.config);
}

fn pop3_proxy_section(doc: &mut Doc, proxy: &Pop3Proxy) {
    doc.table("pop3_proxy");
    match &proxy.mail_dir {
        Some(dir) => doc.set("mail_dir", path(dir)),
        None => doc.comment("mail_dir: not set"),
    }
    pop3_common(doc, &proxy.config);
    pop3_limits(doc, &proxy.config);
    let p = &proxy.proxy;
    doc.set("backend_tls", p.backend_tls.name());
    let cas: Vec<Value> = p.backend_ca.iter().map(|f| path(f)).collect();
    doc.set("backend_ca", Value::Array(cas));
    doc.set("backend_connect_timeout", duration(p.connect_timeout));
    doc.set("backend_timeout", duration(p.reply_timeout));
    doc.set("forward_client", p.forward_client);
}

/// What `[pop3]` and `[pop3_proxy]` share before their own keys (`pop3.rs`'s
/// `read_common`).
fn pop3_common(doc: &mut Doc, c: &stoa_pop3::Config) {
    doc.set("hostname", c.hostname.as_str());
    doc.set("listen", addrs(&c.listen));
    doc.set("tls_listen", addrs(&c.tls_listen));
    doc.tls(&c.tls);
    doc.set("allow_plaintext_auth", c.allow_plaintext_auth);
    doc.set("secure_networks", nets(&c.secure_networks));
    doc.set("workers", int(c.workers));
}

/// `[pop3]`'s and `[pop3_proxy]`'s limits, throttle and grace.
fn pop3_limits(doc: &mut Doc, c: &stoa_pop3::Config) {
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
    auth_throttle(doc, &c.auth_throttle);
    doc.set("shutdown_grace", duration(c.shutdown_grace));
}

fn lmtp_section(doc: &mut Doc, lmtp: &Lmtp) {
    let c = &lmtp.config;
    doc.table("lmtp");
    doc.set("mail_dir", path(&lmtp.mail_dir));
    doc.set("listen", addrs(&c.listen));
    doc.set("hostname", c.hostname.as_str());
    doc.set("workers", int(c.workers));
    smtp_limits(doc, &c.limits);
    doc.set("shutdown_grace", duration(c.shutdown_grace));
}

fn directory_section(doc: &mut Doc, directory: &Directory, loaded: &Loaded) {
    doc.table("directory");
    let o = match directory {
        Directory::Embedded(o) => {
            doc.set("backend", "embedded");
            doc.set("password_scheme", o.scheme.name());
            doc.set("argon2_memory", size(u64::from(o.cost.memory_kib) * 1024));
            doc.set("argon2_iterations", int(o.cost.iterations));
            doc.set("argon2_parallelism", int(o.cost.parallelism));
            doc.set("bcrypt_cost", int(o.bcrypt_cost));
            doc.set("allow_plain_passwords", o.allow_plain);
            return;
        }
        Directory::Ldap(o) => o,
    };
    doc.set("backend", "ldap");
    doc.set("urls", strings(&o.urls));
    doc.set("base", o.base.as_str());
    doc.optional("bind_dn", o.bind_dn.as_deref());
    // The password itself never: its file.
    match &loaded.bind_password_file {
        Some(file) => doc.set("bind_password_file", path(file)),
        None => doc.comment("bind_password_file: not set"),
    }
    doc.optional("this_host", o.this_host.as_deref());
    doc.set("filter", o.filter.as_str());
    doc.set(
        "auth",
        match o.auth {
            stoa_directory::ldap::AuthMode::Local => "local",
            stoa_directory::ldap::AuthMode::Bind => "bind",
        },
    );
    doc.set("domains", strings(&o.domains));
    doc.set("mailbox_attribute", o.mailbox_attribute.as_str());
    doc.set("timeout", duration(o.timeout));
    doc.set("pool_size", int(o.pool_size));
    doc.set("cache_size", int(o.cache_capacity));
    doc.set("cache_ttl", duration(o.cache_ttl));
    doc.set("negative_cache_ttl", duration(o.negative_cache_ttl));
    for key in super::directory::EMBEDDED_KEYS {
        doc.comment(&format!(
            "{key}: the embedded directory's; not used with LDAP"
        ));
    }
}

/// `[[mail_host]]`: the SMTP server's copy (with `lmtp`), else the proxy's.
fn mail_hosts(doc: &mut Doc, loaded: &Loaded) {
    let hosts: Vec<(&str, Option<&str>, Option<&str>)> = match (&loaded.smtp, &loaded.pop3_proxy) {
        (Some(smtp), _) => (smtp.mail_hosts.iter())
            .map(|h| (h.name.as_str(), h.lmtp.as_deref(), h.pop3.as_deref()))
            .collect(),
        (None, Some(proxy)) => (proxy.proxy.stores.iter())
            .map(|h| (h.name.as_str(), None, h.pop3.as_deref()))
            .collect(),
        (None, None) => Vec::new(),
    };
    for (name, lmtp, pop3) in hosts {
        doc.array_table("mail_host");
        doc.set("name", name);
        doc.optional("lmtp", lmtp);
        doc.optional("pop3", pop3);
    }
}

/// The document being written.
#[derive(Debug, Default)]
struct Doc {
    out: String,
}

impl Doc {
    /// `[name]`, after a blank line.
    fn table(&mut self, name: &str) {
        self.blank_line();
        let _ = writeln!(self.out, "[{name}]");
    }

    /// `[[name]]`, after a blank line.
    fn array_table(&mut self, name: &str) {
        self.blank_line();
        let _ = writeln!(self.out, "[[{name}]]");
    }

    fn blank_line(&mut self) {
        if !self.out.is_empty() {
            self.out.push('\n');
        }
    }

    /// `key = value`; `key` is written as given (quote it when it needs to be).
    fn set(&mut self, key: &str, value: impl Into<Value>) {
        let _ = writeln!(self.out, "{key} = {}", value.into());
    }

    /// `key = "value"`, or a comment saying it is not set.
    fn optional(&mut self, key: &str, value: Option<&str>) {
        match value {
            Some(v) => self.set(key, v),
            None => self.comment(&format!("{key}: not set")),
        }
    }

    /// A mail server's `tls`: an empty array is not accepted back, so none is a
    /// comment.
    fn tls(&mut self, pairs: &[CertKeyFiles]) {
        if pairs.is_empty() {
            self.comment("tls: none (no STARTTLS, STLS or TLS listener)");
        } else {
            self.set("tls", certs(pairs));
        }
    }

    fn comment(&mut self, text: &str) {
        let _ = writeln!(self.out, "# {text}");
    }
}

/// An absolute path (relative ones are taken from the working directory, as
/// everything relative in [`Loaded`] already is).
fn path(p: &Path) -> Value {
    let p = std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    Value::from(p.to_string_lossy().into_owned())
}

/// An access log as its key takes it: a file, `-` or `off`.
fn access_log(target: &AccessLogTarget) -> Value {
    match target {
        AccessLogTarget::Off => Value::from("off"),
        AccessLogTarget::Stdout => Value::from("-"),
        AccessLogTarget::File(file) => path(file),
    }
}

/// A count: integers in TOML are `i64`.
fn int<T: TryInto<i64>>(n: T) -> Value {
    Value::Integer(n.try_into().unwrap_or(i64::MAX))
}

/// `"20s"`, `"5m"`, `"200ms"`: the largest unit `parse_duration` reads that
/// states `d` exactly (milliseconds at the finest, the finest it reads).
fn duration(d: Duration) -> Value {
    let ms = d.as_millis();
    let text = if !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else {
        let s = ms / 1000;
        match [(86_400, "d"), (3600, "h"), (60, "m")]
            .into_iter()
            .find(|(unit, _)| s != 0 && s.is_multiple_of(*unit))
        {
            Some((unit, name)) => format!("{}{name}", s / unit),
            None => format!("{s}s"),
        }
    };
    Value::from(text)
}

/// `"32KiB"`, `"16MiB"` when a binary unit states `n` exactly in fewer than
/// 1024 of it; else bytes (`10240000`).
fn size<T: TryInto<u64>>(n: T) -> Value {
    let n = n.try_into().unwrap_or(u64::MAX);
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n != 0 && n.is_multiple_of(1 << shift) && (n >> shift) < 1024 {
            return Value::from(format!("{}{unit}", n >> shift));
        }
    }
    int(n)
}

fn strings(items: &[String]) -> Value {
    Value::Array(items.iter().map(|s| Value::from(s.as_str())).collect())
}

fn addrs(items: &[SocketAddr]) -> Value {
    Value::Array(items.iter().map(|a| Value::from(a.to_string())).collect())
}

fn nets(items: &[IpNet]) -> Value {
    Value::Array(items.iter().map(|n| Value::from(n.to_string())).collect())
}

/// `[{ cert = "…", key = "…" }, …]`.
fn certs(pairs: &[CertKeyFiles]) -> Value {
    let tables = pairs.iter().map(|pair| {
        let mut t = toml::Table::new();
        t.insert("cert".into(), path(&pair.cert));
        t.insert("key".into(), path(&pair.key));
        Value::Table(t)
    });
    Value::Array(tables.collect())
}

#[cfg(test)]
mod tests;
