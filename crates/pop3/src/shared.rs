//! The state every worker and connection of one POP3 server shares.

use std::net::IpAddr;
use std::sync::Arc;

use stoa_directory::Verifier;
use stoa_mailstore::MailStore;
use stoa_netkit::server::ClientCounts;
use stoa_netkit::throttle::Throttle;
use stoa_pop3_proto::Config as SessionConfig;

use crate::config::Config;
use crate::proxy::Proxy;

/// State shared by every worker and connection.
pub(crate) struct Shared {
    pub(crate) config: Config,
    /// Password checks through the directory.
    pub(crate) verifier: Verifier,
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
    /// Whether a client at `ip` may send a password without TLS (an IPv4-mapped
    /// address, as a dual-stack listener sees one, counts as the IPv4 address).
    pub(crate) fn is_secure(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        let secure = &self.config.secure_networks;
        secure.iter().any(|n| n.contains(&ip)) || self.is_trusted_proxy(ip)
    }

    /// Whether `ip` may forward its clients' addresses.
    pub(crate) fn is_trusted_proxy(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.config.trusted_proxies.iter().any(|n| n.contains(&ip))
    }
}
