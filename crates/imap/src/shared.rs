//! The state every worker and connection of one IMAP server shares.

use std::net::IpAddr;
use std::sync::Arc;

use stoa_directory::Verifier;
use stoa_mailstore::MailStore;
use stoa_netkit::server::ClientCounts;
use stoa_netkit::throttle::Throttle;

use crate::config::Config;
use crate::watch::Watchers;

/// State shared by every worker and connection.
pub(crate) struct Shared {
    pub(crate) config: Config,
    /// Password checks through the directory.
    pub(crate) verifier: Verifier,
    /// The mail store the SMTP server delivers into.
    pub(crate) store: Arc<MailStore>,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// Failed logins per client address, perhaps shared with other servers.
    pub(crate) throttle: Arc<Throttle>,
    /// Connections per client address (and in all), across workers.
    pub(crate) clients: Arc<ClientCounts>,
    /// Logged-in sessions per mailbox, woken by the store's observer.
    pub(crate) watchers: Arc<Watchers>,
    /// Permits for store work on blocking threads (`conn::blocking`).
    pub(crate) store_tasks: tokio::sync::Semaphore,
}

impl Shared {
    /// Whether a client at `ip` may send a password without TLS.
    pub(crate) fn is_secure(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.config.secure_networks.iter().any(|n| n.contains(&ip))
    }
}
