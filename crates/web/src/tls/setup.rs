//! The TLS configurations, built once when the server binds: the protocols ALPN
//! offers, each site's own certificates, each listener's configurations (which
//! pick one by SNI), and the [`Acceptor`] a worker's listener hands each
//! connection.

use std::sync::Arc;

use rustls::ServerConfig;
use tokio::sync::Semaphore;

/// The protocols offered by ALPN, in the server's order of preference: HTTP/2
/// first unless `[web] http2 = false` (HTTP/1.0 clients send no ALPN, and a
/// client offering neither gets HTTP/1.1 with no ALPN answer).
pub(crate) fn alpn(http2: bool) -> &'static [&'static [u8]] {
    const BOTH: &[&[u8]] = &[b"h2", b"http/1.1"];
    const HTTP1: &[&[u8]] = &[b"http/1.1"];
    match http2 {
        true => BOTH,
        false => HTTP1,
    }
}

/// A TLS listener in one worker: its configurations and the worker's handshake
/// slots (shared by the worker's TLS listeners).
#[derive(Debug, Clone)]
pub(crate) struct Acceptor {
    pub(crate) configs: Arc<Configs>,
    pub(crate) handshakes: Arc<Semaphore>,
}

/// An HTTPS listener's TLS configurations: one per site with certificates of
/// its own, and the listener's, for the sites without. The ClientHello's SNI
/// name picks the site ([`crate::vhost::Names`], as a `Host` would), and the
/// site its configuration; no SNI, or a name no site has, picks the default
/// site. Each configuration chooses among its own certificates by SNI again.
#[derive(Debug)]
pub(crate) struct Configs {
    /// Per site: its own configuration, or `None` for the listener's.
    by_site: Box<[Option<Arc<ServerConfig>>]>,
    /// The listener's certificates; without them, the default site's.
    listener: Arc<ServerConfig>,
}

/// Per site, its own TLS configuration (`None`: the listener's).
pub(crate) type SiteConfigs = Vec<Option<Arc<ServerConfig>>>;

/// Builds the TLS configuration of every site with certificates, once for all
/// listeners; the error names the site (its index) whose files are wrong.
pub(crate) fn site_configs(
    sites: &[crate::config::SiteConfig],
    alpn: &[&[u8]],
) -> Result<SiteConfigs, (usize, Vec<stoa_netkit::tls::Error>)> {
    sites
        .iter()
        .enumerate()
        .map(|(i, site)| {
            if site.tls.is_empty() {
                return Ok(None);
            }
            stoa_netkit::tls::server_config(&site.tls, alpn)
                .map(Some)
                .map_err(|e| (i, e))
        })
        .collect()
}

impl Configs {
    /// A listener with certificates `certs` (may be empty when the default site
    /// has its own) over the sites' configurations.
    pub(crate) fn new(
        certs: &[stoa_netkit::tls::CertKeyFiles],
        by_site: &[Option<Arc<ServerConfig>>],
        default: usize,
        alpn: &[&[u8]],
    ) -> Result<Configs, Vec<stoa_netkit::tls::Error>> {
        let listener = match by_site.get(default).cloned().flatten() {
            Some(default) if certs.is_empty() => default,
            _ => stoa_netkit::tls::server_config(certs, alpn)?,
        };
        Ok(Configs {
            by_site: by_site.into(),
            listener,
        })
    }

    /// The configuration for a client whose SNI picked `site`.
    pub(super) fn for_site(&self, site: usize) -> Arc<ServerConfig> {
        match self.by_site.get(site) {
            Some(Some(config)) => Arc::clone(config),
            _ => Arc::clone(&self.listener),
        }
    }
}
