//! The POP3 proxy's part of the configuration: the `[pop3_proxy]` table (the
//! same listener, login and limit keys as `[pop3]`, plus the leg to the store
//! hosts), then its flags, then its checks. The store hosts are the file's
//! `[[mail_host]]` entries (`pop3`), the users and their `mailHost` the
//! `[directory]`.

use std::path::{Path, PathBuf};

use stoa_pop3::config::CertKeyFiles;
use stoa_pop3::{BackendTls, ProxyConfig, StoreHost};
use toml::{Table, Value};

use super::auth_throttle;
use super::pop3::{COMMON_KEYS, Names, read_common, validate};
use super::{Report, mail, parse_addr};
use crate::cli::ServeArgs;

/// The proxy as configured.
#[derive(Debug)]
pub(crate) struct Pop3Proxy {
    /// Its mail directory: only for the embedded directory, which lives there.
    pub(crate) mail_dir: Option<PathBuf>,
    /// The client side: listeners, login rules, limits.
    pub(crate) config: stoa_pop3::Config,
    /// The store side.
    pub(crate) proxy: ProxyConfig,
}

/// The prefix of `[pop3_proxy]` keys in messages.
const P: &str = "pop3_proxy.";

/// How messages name the proxy.
const NAMES: Names = Names {
    p: P,
    plain: "POP3 proxy",
    tls: "POP3S proxy",
    listen_flag: "--pop3-proxy-listen",
    tls_flag: "--pop3s-proxy-listen",
};

/// The keys only `[pop3_proxy]` has, besides `[pop3]`'s common ones.
const OWN_KEYS: &[&str] = &[
    "backend_tls",
    "backend_ca",
    "backend_connect_timeout",
    "backend_timeout",
    "forward_client",
];

/// Whether a proxy flag was given.
pub(super) fn flags_given(args: &ServeArgs) -> bool {
    !args.pop3_proxy_listen.is_empty() || !args.pop3s_proxy_listen.is_empty()
}

/// The `[pop3_proxy]` table while it is being read.
#[derive(Debug, Default)]
pub(super) struct Draft {
    mail_dir: Option<PathBuf>,
    config: stoa_pop3::Config,
    proxy: ProxyConfig,
    auth: auth_throttle::Given,
}

/// The `[pop3_proxy]` table, if present; `base` resolves relative paths.
pub(super) fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    let keys = [COMMON_KEYS, OWN_KEYS].concat();
    let (t, mail_dir) = r.mail_table(table, "pop3_proxy", &keys, base)?;
    let mut d = Draft {
        mail_dir,
        ..Draft::default()
    };
    read_common(t, P, base, &mut d.config, r);
    d.auth = auth_throttle::read(t, P, r);
    let p = &mut d.proxy;
    if let Some(text) = r.string(t, P, "backend_tls") {
        match BackendTls::from_name(&text) {
            Some(mode) => p.backend_tls = mode,
            None => r.errors.push(format!(
                "{P}backend_tls {text:?}: expected \"none\", \"stls\" or \"tls\""
            )),
        }
    }
    p.backend_ca = r
        .strings(t, P, "backend_ca")
        .into_iter()
        .map(|f| match base {
            Some(base) if Path::new(&f).is_relative() => base.join(f),
            _ => PathBuf::from(f),
        })
        .collect();
    r.duration(t, P, "backend_connect_timeout", &mut p.connect_timeout);
    r.duration(t, P, "backend_timeout", &mut p.reply_timeout);
    match t.get("forward_client") {
        None => {}
        Some(Value::Boolean(b)) => p.forward_client = *b,
        Some(other) => r.errors.push(format!(
            "{P}forward_client: expected true or false, found {other}"
        )),
    }
    Some(d)
}

/// Applies the proxy's flags over its table (or the defaults) and checks the
/// result; `stores` are the `[[mail_host]]` entries, `certs` the
/// `--tls-cert`/`--tls-key` pairs.
pub(super) fn finish(
    draft: Option<Draft>,
    args: &ServeArgs,
    stores: &[stoa_smtp::config::MailHost],
    certs: Vec<CertKeyFiles>,
    r: &mut Report,
) -> Pop3Proxy {
    let mut d = draft.unwrap_or_default();
    let c = &mut d.config;
    c.auth_throttle = d.auth.settings();
    r.flag_list(
        "--pop3-proxy-listen",
        &args.pop3_proxy_listen,
        parse_addr,
        &mut c.listen,
    );
    r.flag_list(
        "--pop3s-proxy-listen",
        &args.pop3s_proxy_listen,
        parse_addr,
        &mut c.tls_listen,
    );
    mail::apply_shared_flags(args, certs, &mut c.tls, &mut c.workers);
    validate(c, &NAMES, r);
    let p = &mut d.proxy;
    r.nonzero(
        P,
        &[
            ("backend_connect_timeout", p.connect_timeout),
            ("backend_timeout", p.reply_timeout),
        ],
    );
    for file in &p.backend_ca {
        r.check(
            file.is_file(),
            &format!("{P}backend_ca {}: no such file", file.display()),
        );
    }
    p.stores = stores
        .iter()
        .map(|h| StoreHost {
            name: h.name.clone(),
            pop3: h.pop3.clone(),
        })
        .collect();
    Pop3Proxy {
        mail_dir: args.mail_dir.clone().or(d.mail_dir),
        config: d.config,
        proxy: d.proxy,
    }
}
