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
//! The printer writes the top-level keys, then each server that runs in the
//! order of the list of servers (each its own tables: `Configured::print`, in
//! its file), then the tables the mail servers share (`[directory]`,
//! `[[mail_host]]`); a new key is a new line in its table's function, and a new
//! top-level key goes in [`top_level`], before the first table.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use stoa_netkit::tls::CertKeyFiles;
use stoa_smtp::config::IpNet;
use toml::Value;

use super::{Directory, Loaded};

/// The effective configuration of `loaded` as a TOML document.
pub(crate) fn effective(loaded: &Loaded) -> String {
    let mut doc = Doc::default();
    top_level(&mut doc, loaded);
    for service in &loaded.services {
        service.print(&mut doc);
    }
    if loaded.services.iter().any(|s| s.service().mail) {
        directory_section(&mut doc, &loaded.directory, loaded);
        mail_hosts(&mut doc, loaded);
    }
    doc.out
}

/// The roles that run, in words: `web, smtp, pop3`.
pub(crate) fn roles(loaded: &Loaded) -> String {
    let on: Vec<&str> = (loaded.services.iter())
        .map(|s| s.service())
        .filter(|s| s.role)
        .map(|s| s.name)
        .collect();
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

/// `[[mail_host]]`: the store hosts of the SMTP server's routing and the POP3
/// and IMAP proxies.
fn mail_hosts(doc: &mut Doc, loaded: &Loaded) {
    for h in &loaded.mail_hosts {
        doc.array_table("mail_host");
        doc.set("name", h.name.as_str());
        doc.optional("lmtp", h.lmtp.as_deref());
        doc.optional("pop3", h.pop3.as_deref());
        doc.optional("imap", h.imap.as_deref());
    }
}

/// The document being written.
#[derive(Debug, Default)]
pub(crate) struct Doc {
    out: String,
}

impl Doc {
    /// `[name]`, after a blank line.
    pub(crate) fn table(&mut self, name: &str) {
        self.blank_line();
        let _ = writeln!(self.out, "[{name}]");
    }

    /// `[[name]]`, after a blank line.
    pub(crate) fn array_table(&mut self, name: &str) {
        self.blank_line();
        let _ = writeln!(self.out, "[[{name}]]");
    }

    fn blank_line(&mut self) {
        if !self.out.is_empty() {
            self.out.push('\n');
        }
    }

    /// `key = value`; `key` is written as given (quote it when it needs to be).
    pub(crate) fn set(&mut self, key: &str, value: impl Into<Value>) {
        let _ = writeln!(self.out, "{key} = {}", value.into());
    }

    /// `key = "value"`, or a comment saying it is not set.
    pub(crate) fn optional(&mut self, key: &str, value: Option<&str>) {
        match value {
            Some(v) => self.set(key, v),
            None => self.comment(&format!("{key}: not set")),
        }
    }

    /// A mail server's `tls`: an empty array is not accepted back, so none is a
    /// comment.
    pub(crate) fn tls(&mut self, pairs: &[CertKeyFiles]) {
        if pairs.is_empty() {
            self.comment("tls: none (no STARTTLS, STLS or TLS listener)");
        } else {
            self.set("tls", certs(pairs));
        }
    }

    pub(crate) fn comment(&mut self, text: &str) {
        let _ = writeln!(self.out, "# {text}");
    }
}

/// An absolute path (relative ones are taken from the working directory, as
/// everything relative in [`Loaded`] already is).
pub(super) fn path(p: &Path) -> Value {
    let p = std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    Value::from(p.to_string_lossy().into_owned())
}

/// A count: integers in TOML are `i64`.
pub(super) fn int<T: TryInto<i64>>(n: T) -> Value {
    Value::Integer(n.try_into().unwrap_or(i64::MAX))
}

/// `"20s"`, `"5m"`, `"200ms"`: the largest unit `parse_duration` reads that
/// states `d` exactly (milliseconds at the finest, the finest it reads).
pub(super) fn duration(d: Duration) -> Value {
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
pub(super) fn size<T: TryInto<u64>>(n: T) -> Value {
    let n = n.try_into().unwrap_or(u64::MAX);
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n != 0 && n.is_multiple_of(1 << shift) && (n >> shift) < 1024 {
            return Value::from(format!("{}{unit}", n >> shift));
        }
    }
    int(n)
}

pub(super) fn strings(items: &[String]) -> Value {
    Value::Array(items.iter().map(|s| Value::from(s.as_str())).collect())
}

pub(super) fn addrs(items: &[SocketAddr]) -> Value {
    Value::Array(items.iter().map(|a| Value::from(a.to_string())).collect())
}

pub(super) fn nets(items: &[IpNet]) -> Value {
    Value::Array(items.iter().map(|n| Value::from(n.to_string())).collect())
}

/// `[{ cert = "…", key = "…" }, …]`.
pub(super) fn certs(pairs: &[CertKeyFiles]) -> Value {
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
