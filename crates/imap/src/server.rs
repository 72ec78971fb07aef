//! Binding, the worker loops, the per-client connection count, and shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use stoa_directory::{Directory, Verifier};
use stoa_mailstore::MailStore;
use stoa_netkit::server::{
    Accepted, BoxError, ClientCounts, Endpoint, Handler, Listeners, RuntimeModel, Service,
    WorkerScope,
};
use stoa_netkit::shutdown::Shutdown;
use stoa_netkit::throttle::Throttle;

use crate::config::Config;
use crate::conn::{self, Kind};
use crate::proxy::{Proxy, ProxyConfig, SetupError};
use crate::shared::{Backend, Shared};
use crate::watch::Sessions;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A listen address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The certificates or keys cannot be used.
    #[error("IMAP TLS: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Tls(Vec<stoa_netkit::tls::Error>),
    /// An IMAPS listener was configured without certificates.
    #[error("IMAPS listener {0} without a certificate")]
    NoCertificate(SocketAddr),
    /// The proxy's leg to the store hosts cannot be set up.
    #[error("IMAP proxy: {0}")]
    Proxy(#[from] SetupError),
    /// Worker threads or runtimes cannot be created.
    #[error("cannot start workers: {0}")]
    Workers(std::io::Error),
}

/// A bound IMAP server, ready to [`Server::run`].
pub struct Server {
    shared: Arc<Shared>,
    listeners: Listeners<Kind>,
    addrs: Vec<SocketAddr>,
    tls_addrs: Vec<SocketAddr>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addrs", &self.addrs)
            .field("tls_addrs", &self.tls_addrs)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Loads the certificates and binds every listener. Passwords are checked in
    /// `directory`; mailboxes are read from `store`; failed logins are counted in
    /// `throttle`, which other servers of the process may share; sessions are
    /// registered in `sessions` (one per store, kept across reloads; without it
    /// the server makes its own).
    pub fn bind(
        config: Config,
        directory: Arc<dyn Directory>,
        store: Arc<MailStore>,
        throttle: Option<Arc<Throttle>>,
        sessions: Option<Sessions>,
    ) -> Result<Server, Error> {
        let watchers = sessions.unwrap_or_else(|| Sessions::new(&store)).0;
        let backend = Backend::Store { store, watchers };
        Server::bind_backend(config, directory, backend, throttle)
    }

    /// An IMAP proxy on `config`'s listeners: logins are checked in `directory`
    /// and handed to the user's store host (`mailHost`), found through `proxy`
    /// (see [`crate::proxy`]); failed logins are counted in `throttle` (or one of
    /// its own). The proxy parses only the commands before the login, so its
    /// literals are bounded by the line limit, not the APPEND limit.
    pub fn bind_proxy(
        mut config: Config,
        directory: Arc<dyn Directory>,
        proxy: ProxyConfig,
        throttle: Option<Arc<Throttle>>,
    ) -> Result<Server, Error> {
        let proxy = Proxy::new(proxy, stoa_directory::store_hosts::Protocol::Imap)?;
        let command = &mut config.limits.command;
        command.max_literal = command.max_literal.min(command.max_line as u64);
        command.max_command = command.max_line.saturating_mul(2);
        let backend = Backend::Proxy(Arc::new(proxy));
        Server::bind_backend(config, directory, backend, throttle)
    }

    fn bind_backend(
        config: Config,
        directory: Arc<dyn Directory>,
        backend: Backend,
        throttle: Option<Arc<Throttle>>,
    ) -> Result<Server, Error> {
        let throttle =
            throttle.unwrap_or_else(|| Arc::new(Throttle::new(config.auth_throttle.clone())));
        let tls = match config.tls.is_empty() {
            true => None,
            false => {
                let server =
                    stoa_netkit::tls::server_config(&config.tls, &[]).map_err(Error::Tls)?;
                Some(tokio_rustls::TlsAcceptor::from(server))
            }
        };
        if tls.is_none()
            && let Some(&addr) = config.tls_listen.first()
        {
            return Err(Error::NoCertificate(addr));
        }
        let mut listeners = Listeners::with_pool(config.workers, config.sockets.clone());
        let listen_error = |(addr, source)| Error::Listen { addr, source };
        let addrs = listeners
            .bind_all(&config.listen, &Kind::Plain)
            .map_err(listen_error)?;
        let tls_addrs = listeners
            .bind_all(&config.tls_listen, &Kind::Tls)
            .map_err(listen_error)?;
        let shared = Arc::new(Shared {
            throttle,
            clients: Arc::new(ClientCounts::new(config.limits.max_connections_per_client)),
            config,
            verifier: Verifier::new(directory),
            backend,
            tls,
            store_tasks: tokio::sync::Semaphore::new(crate::conn::STORE_TASKS),
        });
        Ok(Server {
            shared,
            listeners,
            addrs,
            tls_addrs,
        })
    }

    /// The bound IMAP addresses (port 0 resolved), in configuration order.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The bound IMAPS addresses (port 0 resolved), in configuration order.
    pub fn tls_addrs(&self) -> &[SocketAddr] {
        &self.tls_addrs
    }

    /// Serves until `shutdown` fires, then drains: stops accepting, tells sessions
    /// waiting for a command `* BYE`, and lets commands under way finish within the
    /// configured grace. Blocks the calling thread.
    pub fn run(self, shutdown: Shutdown) -> Result<(), Error> {
        let Server {
            shared, listeners, ..
        } = self;
        stoa_netkit::server::run(&shared, listeners, RuntimeModel::PerCore, shutdown)
            .map_err(Error::Workers)
    }
}

impl Handler for Shared {
    type Kind = Kind;
    type Worker = ();
    const NAME: &'static str = "IMAP";

    fn max_connections(&self) -> usize {
        self.config.limits.max_connections
    }

    fn grace(&self) -> Duration {
        self.config.shutdown_grace
    }

    fn in_flight(&self) -> usize {
        self.clients.open()
    }

    fn start_worker(self: &Arc<Self>, _scope: WorkerScope) {}

    fn accept(self: &Arc<Self>, _worker: &Arc<()>, conn: Accepted<Kind>) {
        let slot = self.clients.enter(conn.peer.ip());
        tokio::spawn(conn::serve(conn, Arc::clone(self), slot));
    }

    fn grace_over(&self, left: usize) {
        tracing::warn!("shutdown grace over; dropping {left} IMAP connections");
    }
}

impl Service for Server {
    fn name(&self) -> &'static str {
        match self.shared.backend {
            Backend::Store { .. } => "IMAP",
            Backend::Proxy(_) => "IMAP proxy",
        }
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        let (plain, tls) = match self.shared.backend {
            Backend::Store { .. } => ("imap", "imaps"),
            Backend::Proxy(_) => ("imap-proxy", "imaps-proxy"),
        };
        Endpoint::each(plain, &self.addrs)
            .chain(Endpoint::each(tls, &self.tls_addrs))
            .collect()
    }

    fn run(self: Box<Self>, shutdown: Shutdown) -> Result<(), BoxError> {
        Ok(Server::run(*self, shutdown)?)
    }
}
