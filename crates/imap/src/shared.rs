//! The state every worker and connection of one IMAP server shares.

use std::net::IpAddr;
use std::sync::Arc;

use stoa_directory::Verifier;
use stoa_mailstore::MailStore;
use stoa_netkit::server::ClientCounts;
use stoa_netkit::throttle::Throttle;

use crate::config::Config;
use crate::proxy::Proxy;
use crate::watch::Watchers;

/// State shared by every worker and connection.
pub(crate) struct Shared {
    pub(crate) config: Config,
    /// Password checks through the directory.
    pub(crate) verifier: Verifier,
    /// Where logged-in sessions go: the mail store here, or a store host.
    pub(crate) backend: Backend,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// Failed logins per client address, perhaps shared with other servers.
    pub(crate) throttle: Arc<Throttle>,
    /// Connections per client address (and in all), across workers.
    pub(crate) clients: Arc<ClientCounts>,
    /// Permits for store work on blocking threads (`conn::blocking`).
    pub(crate) store_tasks: tokio::sync::Semaphore,
}

/// What a successful login leads to.
pub(crate) enum Backend {
    /// A store host: the mailboxes are in this store and served here.
    Store {
        /// The mail store the SMTP server delivers into.
        store: Arc<MailStore>,
        /// Logged-in sessions per mailbox, woken by the store's observer.
        watchers: Arc<Watchers>,
    },
    /// An IMAP proxy: the session is handed to the user's store host.
    Proxy(Arc<Proxy>),
}

impl Shared {
    /// Whether a client at `ip` may send a password without TLS: a secure
    /// network, or a trusted proxy (it sends its clients' passwords).
    pub(crate) fn is_secure(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.config.secure_networks.iter().any(|n| n.contains(&ip)) || self.is_trusted_proxy(ip)
    }

    /// Whether `ip` may name its clients' addresses (`ID x-originating-ip`).
    pub(crate) fn is_trusted_proxy(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.config.trusted_proxies.iter().any(|n| n.contains(&ip))
    }
}
