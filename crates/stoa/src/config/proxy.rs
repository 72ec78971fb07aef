//! What `[pop3_proxy]` and `[imap_proxy]` share: the leg to the store hosts
//! (`backend_tls`, `backend_ca`, `backend_connect_timeout`, `backend_timeout`,
//! `forward_client`, read, checked and printed alike), the store hosts from the
//! file's `[[mail_host]]` entries, the directory a proxy reads (the mail store's
//! beside it, else its own under `mail_dir`, or LDAP), and the check that it has
//! one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use stoa_directory::store_hosts::{BackendTls, ProxyConfig, StoreHost};
use toml::{Table, Value};

use super::print::{Doc, duration, path};
use super::service::{Settled, Shared};
use super::{Directory, Report};

/// The keys of the leg to the store hosts, in every proxy's table.
pub(super) const BACKEND_KEYS: &[&str] = &[
    "backend_tls",
    "backend_ca",
    "backend_connect_timeout",
    "backend_timeout",
    "forward_client",
];

/// Reads the leg's keys of the table `t` (prefix `p`); `base` resolves relative
/// CA paths.
pub(super) fn read(t: &Table, p: &str, base: Option<&Path>, c: &mut ProxyConfig, r: &mut Report) {
    if let Some(text) = r.string(t, p, "backend_tls") {
        match BackendTls::from_name(&text) {
            Some(mode) => c.backend_tls = mode,
            None => r.errors.push(format!(
                "{p}backend_tls {text:?}: expected \"none\", \"starttls\" (or \"stls\") or \"tls\""
            )),
        }
    }
    c.backend_ca = r
        .strings(t, p, "backend_ca")
        .into_iter()
        .map(|f| match base {
            Some(base) if Path::new(&f).is_relative() => base.join(f),
            _ => PathBuf::from(f),
        })
        .collect();
    r.duration(t, p, "backend_connect_timeout", &mut c.connect_timeout);
    r.duration(t, p, "backend_timeout", &mut c.reply_timeout);
    match t.get("forward_client") {
        None => {}
        Some(Value::Boolean(b)) => c.forward_client = *b,
        Some(other) => r.errors.push(format!(
            "{p}forward_client: expected true or false, found {other}"
        )),
    }
}

/// Checks the leg's settings and takes the store hosts of `[[mail_host]]`.
pub(super) fn finish(
    p: &str,
    c: &mut ProxyConfig,
    hosts: &[stoa_smtp::config::MailHost],
    r: &mut Report,
) {
    r.nonzero(
        p,
        &[
            ("backend_connect_timeout", c.connect_timeout),
            ("backend_timeout", c.reply_timeout),
        ],
    );
    for file in &c.backend_ca {
        r.check(
            file.is_file(),
            &format!("{p}backend_ca {}: no such file", file.display()),
        );
    }
    c.stores = hosts
        .iter()
        .map(|h| StoreHost {
            name: h.name.clone(),
            pop3: h.pop3.clone(),
            imap: h.imap.clone(),
        })
        .collect();
}

/// Prints the leg's keys.
pub(super) fn print(doc: &mut Doc, c: &ProxyConfig) {
    doc.set("backend_tls", c.backend_tls.name());
    let cas: Vec<Value> = c.backend_ca.iter().map(|f| path(f)).collect();
    doc.set("backend_ca", Value::Array(cas));
    doc.set("backend_connect_timeout", duration(c.connect_timeout));
    doc.set("backend_timeout", duration(c.reply_timeout));
    doc.set("forward_client", c.forward_client);
}

/// Prints a proxy's `mail_dir`, set or not.
pub(super) fn print_mail_dir(doc: &mut Doc, mail_dir: Option<&Path>) {
    match mail_dir {
        Some(dir) => doc.set("mail_dir", path(dir)),
        None => doc.comment("mail_dir: not set"),
    }
}

/// A proxy's mail directory, for the embedded directory: its own, else the mail
/// store's; one of them, or the LDAP directory, it must have (`what` names it).
pub(super) fn settle(
    mail_dir: &mut Option<PathBuf>,
    what: &str,
    settled: &Settled<'_>,
    r: &mut Report,
) {
    let other = settled.mail_dir.map(Path::to_path_buf);
    *mail_dir = mail_dir.take().or(other);
    r.check(
        mail_dir.is_some() || !matches!(settled.directory, Directory::Embedded(_)),
        &format!(
            "the {what} needs a directory: [directory] backend = \"ldap\" (as a proxy \
             has), or --mail-dir DIR for the embedded one"
        ),
    );
}

/// The directory a proxy reads: beside a store host the shared one, alone its
/// own (LDAP, or the embedded one under its mail directory).
pub(super) fn directory(
    shared: &Shared<'_>,
    mail_dir: Option<PathBuf>,
) -> anyhow::Result<Arc<dyn stoa_directory::Directory>> {
    Ok(match shared.mail.as_deref() {
        Some(parts) => parts.directory.clone(),
        None => {
            shared
                .directory
                .clone()
                .open(&mail_dir.unwrap_or_default())?
                .0
        }
    })
}
