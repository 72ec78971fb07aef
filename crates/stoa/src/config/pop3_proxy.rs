//! The POP3 proxy's part of the configuration: the `[pop3_proxy]` table (the
//! same listener, login and limit keys as `[pop3]`, plus the leg to the store
//! hosts), then its flags, then its checks. The store hosts are the file's
//! `[[mail_host]]` entries (`pop3`), the users and their `mailHost` the
//! `[directory]`. It prints `[pop3_proxy]` and binds over the shared directory,
//! or opens its own when no mail store runs beside it.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use stoa_pop3::ProxyConfig;
use toml::Table;

use super::mail::Names;
use super::pop3::{COMMON_KEYS, print_common, print_limits, read_common, validate};
use super::print::Doc;
use super::service::{self, Configured, Finish, Implied, Service, Settled, Shared};
use super::units::parse_addr;
use super::{Report, auth_throttle, mail, proxy};

/// The POP3 proxy's entry in the list of servers.
pub(super) static POP3_PROXY: Service = Service {
    name: "pop3_proxy",
    keys: &["pop3_proxy"],
    mail: true,
    role: true,
    implied: Implied::Never,
    flags_given: |args| !args.pop3_proxy_listen.is_empty() || !args.pop3s_proxy_listen.is_empty(),
    read: |file, cx, r| service::boxed(read_table(file, cx.base, r)),
    draft: service::default::<Draft>,
};

impl service::Draft for Draft {
    fn finish(self: Box<Self>, cx: &mut Finish<'_>, r: &mut Report) -> Option<Box<dyn Configured>> {
        Some(Box::new(finish(*self, cx, r)))
    }
}

impl Configured for Pop3Proxy {
    fn service(&self) -> &'static Service {
        &POP3_PROXY
    }

    fn settle(&mut self, settled: &Settled<'_>, r: &mut Report) {
        proxy::settle(&mut self.mail_dir, "POP3 proxy", settled, r);
    }

    fn directory_home(&self) -> Option<&Path> {
        self.mail_dir.as_deref()
    }

    fn print(&self, doc: &mut Doc) {
        doc.table("pop3_proxy");
        proxy::print_mail_dir(doc, self.mail_dir.as_deref());
        print_common(doc, &self.config);
        print_limits(doc, &self.config);
        proxy::print(doc, &self.proxy);
    }

    /// Beside a store host the proxy shares its directory; alone it opens its
    /// own (LDAP, or the embedded one under its mail directory).
    fn bind(
        self: Box<Self>,
        shared: &mut Shared<'_>,
    ) -> anyhow::Result<Box<dyn stoa_netkit::server::Service>> {
        let Pop3Proxy {
            mail_dir,
            mut config,
            proxy,
        } = *self;
        config.sockets = shared.sockets.clone();
        let directory = proxy::directory(shared, mail_dir)?;
        let server = stoa_pop3::Server::bind_proxy(config, proxy, directory)
            .context("cannot start the POP3 proxy")?;
        Ok(Box::new(server))
    }
}

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
    a: "a",
    upgrade: "STLS",
    listen_flag: "--pop3-proxy-listen",
    tls_flag: "--pop3s-proxy-listen",
};

/// The `[pop3_proxy]` table while it is being read.
#[derive(Debug, Default)]
struct Draft {
    mail_dir: Option<PathBuf>,
    config: stoa_pop3::Config,
    proxy: ProxyConfig,
    auth: auth_throttle::Given,
}

/// The `[pop3_proxy]` table, if present; `base` resolves relative paths.
fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    let keys = [COMMON_KEYS, proxy::BACKEND_KEYS].concat();
    let (t, mail_dir) = r.mail_table(table, "pop3_proxy", &keys, base)?;
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
fn finish(mut d: Draft, cx: &Finish<'_>, r: &mut Report) -> Pop3Proxy {
    let (args, stores, certs) = (cx.args, cx.mail_hosts, cx.certs.clone());
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
    proxy::finish(P, &mut d.proxy, stores, r);
    Pop3Proxy {
        mail_dir: args.mail_dir.clone().or(d.mail_dir),
        config: d.config,
        proxy: d.proxy,
    }
}
