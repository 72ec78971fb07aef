//! The IMAP proxy's part of the configuration: the `[imap_proxy]` table (the
//! same listener, login and limit keys as `[imap]`, plus the leg to the store
//! hosts, as `[pop3_proxy]` has), then its flags, then its checks. The store
//! hosts are the file's `[[mail_host]]` entries (`imap`), the users and their
//! `mailHost` the `[directory]`. It prints `[imap_proxy]` and binds over the
//! shared directory, or opens its own when no mail store runs beside it.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use stoa_imap::ProxyConfig;
use toml::Table;

use super::imap::{COMMON_KEYS, apply_flags, print_common, read_common, validate};
use super::mail::Names;
use super::print::Doc;
use super::service::{self, Configured, Finish, Implied, Service, Settled, Shared};
use super::{Report, auth_throttle, proxy};

/// The IMAP proxy's entry in the list of servers.
pub(super) static IMAP_PROXY: Service = Service {
    name: "imap_proxy",
    keys: &["imap_proxy"],
    mail: true,
    role: true,
    implied: Implied::Never,
    flags_given: |args| !args.imap_proxy_listen.is_empty() || !args.imaps_proxy_listen.is_empty(),
    read: |file, cx, r| service::boxed(read_table(file, cx.base, r)),
    draft: service::default::<Draft>,
};

impl service::Draft for Draft {
    fn finish(self: Box<Self>, cx: &mut Finish<'_>, r: &mut Report) -> Option<Box<dyn Configured>> {
        Some(Box::new(finish(*self, cx, r)))
    }
}

impl Configured for ImapProxy {
    fn service(&self) -> &'static Service {
        &IMAP_PROXY
    }

    fn settle(&mut self, settled: &Settled<'_>, r: &mut Report) {
        proxy::settle(&mut self.mail_dir, "IMAP proxy", settled, r);
    }

    fn directory_home(&self) -> Option<&Path> {
        self.mail_dir.as_deref()
    }

    fn print(&self, doc: &mut Doc) {
        doc.table("imap_proxy");
        proxy::print_mail_dir(doc, self.mail_dir.as_deref());
        print_common(doc, &self.config);
        proxy::print(doc, &self.proxy);
    }

    fn bind(
        self: Box<Self>,
        shared: &mut Shared<'_>,
    ) -> anyhow::Result<Box<dyn stoa_netkit::server::Service>> {
        let ImapProxy {
            mail_dir,
            mut config,
            proxy,
        } = *self;
        config.sockets = shared.sockets.clone();
        let directory = proxy::directory(shared, mail_dir)?;
        let server = stoa_imap::Server::bind_proxy(config, directory, proxy, None)
            .context("cannot start the IMAP proxy")?;
        Ok(Box::new(server))
    }
}

/// The proxy as configured.
#[derive(Debug)]
pub(crate) struct ImapProxy {
    /// Its mail directory: only for the embedded directory, which lives there.
    pub(crate) mail_dir: Option<PathBuf>,
    /// The client side: listeners, login rules, limits.
    pub(crate) config: stoa_imap::Config,
    /// The store side.
    pub(crate) proxy: ProxyConfig,
}

/// The prefix of `[imap_proxy]` keys in messages.
const P: &str = "imap_proxy.";

/// How messages name the proxy.
const NAMES: Names = Names {
    p: P,
    plain: "IMAP proxy",
    tls: "IMAPS proxy",
    a: "an",
    upgrade: "STARTTLS",
    listen_flag: "--imap-proxy-listen",
    tls_flag: "--imaps-proxy-listen",
};

/// The `[imap_proxy]` table while it is being read.
#[derive(Debug, Default)]
struct Draft {
    mail_dir: Option<PathBuf>,
    config: stoa_imap::Config,
    proxy: ProxyConfig,
    auth: auth_throttle::Given,
}

/// The `[imap_proxy]` table, if present; `base` resolves relative paths.
fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    let keys = [COMMON_KEYS, proxy::BACKEND_KEYS].concat();
    let (t, mail_dir) = r.mail_table(table, "imap_proxy", &keys, base)?;
    let mut d = Draft {
        mail_dir,
        ..Draft::default()
    };
    read_common(t, P, base, &mut d.config, r);
    d.auth = auth_throttle::read(t, P, r);
    proxy::read(t, P, base, &mut d.proxy, r);
    Some(d)
}

/// Applies the proxy's flags over its table (or the defaults) and checks the
/// result; its store hosts are the file's `[[mail_host]]` entries.
fn finish(mut d: Draft, cx: &Finish<'_>, r: &mut Report) -> ImapProxy {
    let args = cx.args;
    let c = &mut d.config;
    c.auth_throttle = d.auth.settings();
    let flags = (&args.imap_proxy_listen[..], &args.imaps_proxy_listen[..]);
    apply_flags(c, &NAMES, flags, cx, r);
    validate(c, &NAMES, r);
    proxy::finish(P, &mut d.proxy, cx.mail_hosts, r);
    ImapProxy {
        mail_dir: args.mail_dir.clone().or(d.mail_dir),
        config: d.config,
        proxy: d.proxy,
    }
}
