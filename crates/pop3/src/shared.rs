//! The state every worker and connection of one POP3 server shares.

use std::net::IpAddr;
use std::sync::Arc;

use stoa_directory::Directory;
use stoa_mailstore::MailStore;
use stoa_netkit::server::ClientCounts;
use stoa_netkit::throttle::Throttle;
use stoa_pop3_proto::Config as SessionConfig;

use crate::config::Config;
use crate::proxy::Proxy;

/// State shared by every worker and connection.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) directory: Arc<dyn Directory>,
    /// Where logged-in sessions go: the mail store here, or a store host.
    pub(crate) backend: Backend,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// The codec's settings, shared by every session.
    pub(crate) session: Arc<SessionConfig>,
    /// Failed logins per client address, perhaps shared with other servers.
    pub(crate) throttle: Arc<Throttle>,
    /// Connections per client address (and in all), across workers.
    pub(crate) clients: Arc<ClientCounts>,
}

/// What a successful login leads to.
pub(crate) enum Backend {
    /// A store host: the mailbox is opened in this store and served here.
    Store(Arc<MailStore>),
    /// A POP3 proxy: the session is handed to the user's store host.
    Proxy(Arc<Proxy>),
}

impl Shared {
    /// Whether a client at `ip` may send a password without TLS.
    pub(crate) fn is_secure(&self, ip: IpAddr) -> bool {
        let c = &self.config;
        let ip = canonical(ip);
        c.secure_networks.iter().any(|n| n.contains(&ip)) || self.is_trusted_proxy(ip)
    }

    /// Whether `ip` may forward its clients' addresses.
    pub(crate) fn is_trusted_proxy(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.config.trusted_proxies.iter().any(|n| n.contains(&ip))
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (a dual-stack listener
/// sees `::ffff:127.0.0.1`).
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}
