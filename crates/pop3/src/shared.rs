//! The state every worker and connection of one POP3 server shares.

use std::sync::Arc;

use stoa_directory::Directory;
use stoa_mailstore::MailStore;
use stoa_netkit::server::ClientCounts;
use stoa_netkit::throttle::Throttle;
use stoa_pop3_proto::Config as SessionConfig;

use crate::config::Config;

/// State shared by every worker and connection.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) directory: Arc<dyn Directory>,
    pub(crate) store: Arc<MailStore>,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// The codec's settings, shared by every session.
    pub(crate) session: Arc<SessionConfig>,
    /// Failed logins per client address, perhaps shared with other servers.
    pub(crate) throttle: Arc<Throttle>,
    /// Connections per client address (and in all), across workers.
    pub(crate) clients: Arc<ClientCounts>,
}
