//! Binding the LMTP listeners and running them on the shared driver (`driver.rs`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use stoa_directory::Directory;
use stoa_netkit::server::{BoxError, Endpoint, Listeners, Service};
use stoa_netkit::shutdown::Shutdown;
use stoa_smtp_proto::session::{AuthPolicy, Config as SessionConfig, Dialect};

use super::Config;
use crate::delivery::LocalDelivery;
use crate::driver;
use crate::server::Error;

/// State shared by every worker and connection of one LMTP server.
pub(super) struct Shared {
    pub(super) config: Config,
    pub(super) directory: Arc<dyn Directory>,
    pub(super) local: Arc<dyn LocalDelivery>,
    pub(super) session: Arc<SessionConfig>,
    /// Numbers the messages, for the id in their `Received:` field.
    pub(super) messages: AtomicU64,
}

/// A bound LMTP server, ready to [`Server::run`].
pub struct Server {
    shared: Arc<Shared>,
    listeners: Listeners<()>,
    addrs: Vec<SocketAddr>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("lmtp::Server")
            .field("addrs", &self.addrs)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Binds every listener. Recipients are looked up in `directory`; messages are
    /// stored through `local` (the store the SMTP queue and POP3 use).
    pub fn bind(
        config: Config,
        directory: Arc<dyn Directory>,
        local: Arc<dyn LocalDelivery>,
    ) -> Result<Server, Error> {
        let mut listeners = Listeners::with_pool(config.workers, config.sockets.clone());
        let addrs = driver::bind(&mut listeners, &config.listen, &())?;
        let session = Arc::new(SessionConfig {
            hostname: config.hostname.clone(),
            limits: config.limits.session.clone(),
            starttls: false,
            // LMTP runs on a trusted network, and an MTA has nobody to log in as.
            auth: AuthPolicy::Disabled,
            require_tls: false,
            require_auth: false,
            reject_unauth_pipelining: true,
            dialect: Dialect::Lmtp,
        });
        let shared = Arc::new(Shared {
            config,
            directory,
            local,
            session,
            messages: AtomicU64::new(0),
        });
        Ok(Server {
            shared,
            listeners,
            addrs,
        })
    }

    /// The bound addresses (port 0 resolved), in configuration order.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Serves until `shutdown` fires, then drains: connections waiting for a
    /// command get `421 4.3.2`, messages being received are finished and
    /// delivered within the configured grace. Blocks the calling thread.
    pub fn run(self, shutdown: Shutdown) -> Result<(), Error> {
        driver::run(&self.shared, self.listeners, shutdown)
    }
}

impl Service for Server {
    fn name(&self) -> &'static str {
        "LMTP"
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        Endpoint::each("lmtp", &self.addrs).collect()
    }

    fn run(self: Box<Self>, shutdown: Shutdown) -> Result<(), BoxError> {
        Ok(Server::run(*self, shutdown)?)
    }
}
