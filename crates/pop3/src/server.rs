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
use stoa_pop3_proto::Config as SessionConfig;

use crate::config::Config;
use crate::conn::{self, Kind};
use crate::proxy::{Proxy, ProxyConfig, SetupError};
use crate::shared::{Backend, Shared};

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
    #[error("POP3 TLS: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Tls(Vec<stoa_netkit::tls::Error>),
    /// A POP3S listener was configured without certificates.
    #[error("POP3S listener {0} without a certificate")]
    NoCertificate(SocketAddr),
    /// The proxy's leg to the store hosts cannot be set up.
    #[error("POP3 proxy: {0}")]
    Proxy(#[from] SetupError),
    /// Worker threads or runtimes cannot be created.
    #[error("cannot start workers: {0}")]
    Workers(std::io::Error),
}

/// A bound POP3 server, ready to [`Server::run`].
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
    /// Loads the certificates and binds every listener, so that every start-up
    /// error surfaces here. Passwords are checked in `directory`; mailboxes are
    /// opened in `store` (the same store the SMTP server delivers into). Failed
    /// logins are counted in a throttle of its own, built from
    /// [`Config::auth_throttle`].
    pub fn bind(
        config: Config,
        directory: Arc<dyn Directory>,
        store: Arc<MailStore>,
    ) -> Result<Server, Error> {
        let throttle = Arc::new(Throttle::new(config.auth_throttle.clone()));
        Server::bind_with_throttle(config, directory, store, throttle)
    }

    /// [`Server::bind`], counting failed logins in `throttle`, which other servers
    /// of the process (SMTP AUTH) share: a client address that failed on one is
    /// slowed, then refused, on all. The throttle's own settings apply, not
    /// [`Config::auth_throttle`].
    pub fn bind_with_throttle(
        config: Config,
        directory: Arc<dyn Directory>,
        store: Arc<MailStore>,
        throttle: Arc<Throttle>,
    ) -> Result<Server, Error> {
        Server::bind_backend(config, directory, Backend::Store(store), throttle)
    }

    /// A POP3 proxy on `config`'s listeners: logins are checked in `directory`
    /// and handed to the user's store host (`mailHost`), found through `proxy`
    /// (see [`crate::proxy`]). Failed logins are counted in a throttle of its own.
    pub fn bind_proxy(
        config: Config,
        proxy: ProxyConfig,
        directory: Arc<dyn Directory>,
    ) -> Result<Server, Error> {
        let throttle = Arc::new(Throttle::new(config.auth_throttle.clone()));
        let proxy = Proxy::new(proxy, stoa_directory::store_hosts::Protocol::Pop3)?;
        Server::bind_backend(config, directory, Backend::Proxy(Arc::new(proxy)), throttle)
    }

    fn bind_backend(
        config: Config,
        directory: Arc<dyn Directory>,
        backend: Backend,
        throttle: Arc<Throttle>,
    ) -> Result<Server, Error> {
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
        let session = Arc::new(SessionConfig {
            hostname: config.hostname.clone(),
            limits: config.limits.session.clone(),
            stls: tls.is_some(),
            require_tls: !config.allow_plaintext_auth,
            sasl_plain: true,
            login_delay: None,
        });
        let shared = Arc::new(Shared {
            throttle,
            clients: Arc::new(ClientCounts::new(config.limits.max_connections_per_client)),
            config,
            verifier: Verifier::new(directory),
            backend,
            tls,
            session,
        });
        Ok(Server {
            shared,
            listeners,
            addrs,
            tls_addrs,
        })
    }

    /// The bound POP3 addresses (port 0 resolved), in configuration order.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The bound POP3S addresses (port 0 resolved), in configuration order.
    pub fn tls_addrs(&self) -> &[SocketAddr] {
        &self.tls_addrs
    }

    /// Serves until `shutdown` fires, then drains: stops accepting, tells sessions
    /// waiting for a command `-ERR [SYS/TEMP] Server shutting down` (nothing is
    /// deleted), and lets retrievals and QUITs under way finish within the
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
    const NAME: &'static str = "POP3";

    fn max_connections(&self) -> usize {
        self.config.limits.max_connections
    }

    fn grace(&self) -> Duration {
        self.config.shutdown_grace
    }

    /// Every open connection: on shutdown those waiting for a command are told and
    /// close, retrievals and QUITs under way finish.
    fn in_flight(&self) -> usize {
        self.clients.open()
    }

    fn start_worker(self: &Arc<Self>, _scope: WorkerScope) {}

    fn accept(self: &Arc<Self>, _worker: &Arc<()>, conn: Accepted<Kind>) {
        let slot = self.clients.enter(conn.peer.ip());
        tokio::spawn(conn::serve(conn, Arc::clone(self), slot));
    }

    fn grace_over(&self, left: usize) {
        tracing::warn!("shutdown grace over; dropping {left} POP3 connections (nothing deleted)");
    }
}

impl Service for Server {
    fn name(&self) -> &'static str {
        match self.shared.backend {
            Backend::Store(_) => "POP3",
            Backend::Proxy(_) => "POP3 proxy",
        }
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        let (plain, tls) = match self.shared.backend {
            Backend::Store(_) => ("pop3", "pop3s"),
            Backend::Proxy(_) => ("pop3-proxy", "pop3s-proxy"),
        };
        Endpoint::each(plain, &self.addrs)
            .chain(Endpoint::each(tls, &self.tls_addrs))
            .collect()
    }

    fn run(self: Box<Self>, shutdown: Shutdown) -> Result<(), BoxError> {
        Ok(Server::run(*self, shutdown)?)
    }
}
