//! Binding, the queue thread, and shutdown; the worker loops and connections are
//! the shared driver's (`driver.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use stoa_directory::{Directory, Verifier};
use stoa_netkit::server::{BoxError, Endpoint, Listeners, Service};
use stoa_netkit::shutdown::Shutdown;
use stoa_netkit::throttle::Throttle;
use stoa_smtp_proto::session::{AuthPolicy, Config as SessionConfig, Dialect};

use crate::config::Config;
use crate::conn::Kind;
use crate::delivery::LocalDelivery;
use crate::driver;
use crate::runner::QueueRunner;
use crate::shared::Shared;

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
    /// The STARTTLS certificates or keys cannot be used.
    #[error("STARTTLS: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Tls(Vec<stoa_netkit::tls::Error>),
    /// The queue directory cannot be opened or recovered.
    #[error("queue {path}: {source}")]
    Queue {
        /// The queue directory.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A reload named another queue directory than the running queue's.
    #[error("the queue cannot move from {} to {} without a restart", from.display(), to.display())]
    QueueMoved {
        /// The running queue's directory.
        from: PathBuf,
        /// The one the new configuration names.
        to: PathBuf,
    },
    /// Worker threads or runtimes cannot be created.
    #[error("cannot start workers: {0}")]
    Workers(std::io::Error),
}

/// A bound SMTP server with its queue recovered, ready to [`Server::run`].
pub struct Server {
    shared: Arc<Shared>,
    listeners: Listeners<Kind>,
    addrs: Vec<SocketAddr>,
    submission_addrs: Vec<SocketAddr>,
    /// The queue runner it feeds: its own, which stops when the server is
    /// dropped after its run (the last reference), or one shared with the
    /// servers a reload replaces or puts in its place.
    runner: Arc<QueueRunner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addrs", &self.addrs)
            .field("submission_addrs", &self.submission_addrs)
            .field("queued", &self.runner.recovered())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Loads the TLS certificates, recovers the queue and binds every listener, so
    /// that every start-up error surfaces here. Local mail goes to `local`;
    /// recipients and passwords are checked in `directory`. Failed AUTH is counted
    /// in a throttle of its own, built from [`Config::auth_throttle`].
    pub fn bind(
        config: Config,
        directory: Arc<dyn Directory>,
        local: Arc<dyn LocalDelivery>,
    ) -> Result<Server, Error> {
        let throttle = Arc::new(Throttle::new(config.auth_throttle.clone()));
        Server::bind_with_throttle(config, directory, local, throttle)
    }

    /// [`Server::bind`], counting failed AUTH in `throttle`, which other servers of
    /// the process (POP3 logins) share: a client address that failed on one is
    /// slowed, then refused, on all. The throttle's own settings apply, not
    /// [`Config::auth_throttle`].
    pub fn bind_with_throttle(
        config: Config,
        directory: Arc<dyn Directory>,
        local: Arc<dyn LocalDelivery>,
        throttle: Arc<Throttle>,
    ) -> Result<Server, Error> {
        let runner = QueueRunner::open(&config, Arc::clone(&directory), local)?;
        Server::bind_inner(config, directory, throttle, Arc::new(runner))
    }

    /// [`Server::bind_with_throttle`] over a queue `runner` that outlives the
    /// server (it is started if it was not, and not stopped when the server ends):
    /// a reload's new server and the one it replaces feed the same scheduler. The
    /// runner delivers with the settings it was opened or last updated with.
    pub fn bind_on_runner(
        config: Config,
        directory: Arc<dyn Directory>,
        throttle: Arc<Throttle>,
        runner: Arc<QueueRunner>,
    ) -> Result<Server, Error> {
        Server::bind_inner(config, directory, throttle, runner)
    }

    fn bind_inner(
        config: Config,
        directory: Arc<dyn Directory>,
        throttle: Arc<Throttle>,
        runner: Arc<QueueRunner>,
    ) -> Result<Server, Error> {
        let tls = starttls(&config)?;
        let (mx, submission) = session_configs(&config, tls.is_some());
        let mut listeners = Listeners::with_pool(config.workers, config.sockets.clone());
        let addrs = driver::bind(&mut listeners, &config.listen, &Kind::Mx)?;
        let submission_addrs =
            driver::bind(&mut listeners, &config.submission_listen, &Kind::Submission)?;
        let domains = config
            .domains
            .iter()
            .map(|d| d.trim_end_matches('.').to_ascii_lowercase())
            .collect();
        let shared = Arc::new(Shared {
            config,
            verifier: Verifier::new(Arc::clone(&directory)),
            directory,
            queue: Arc::clone(runner.queue()),
            notify: runner.notifier(),
            tls,
            mx,
            submission,
            domains,
            throttle,
        });
        Ok(Server {
            shared,
            listeners,
            addrs,
            submission_addrs,
            runner,
        })
    }

    /// The bound MX addresses (port 0 resolved), in configuration order.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The bound submission addresses (port 0 resolved), in configuration order.
    pub fn submission_addrs(&self) -> &[SocketAddr] {
        &self.submission_addrs
    }

    /// Messages found in the queue when its runner opened it.
    pub fn recovered(&self) -> usize {
        self.runner.recovered()
    }

    /// Serves until `shutdown` fires, then drains: stops accepting, answers
    /// connections waiting for a command with `421`, lets messages being received
    /// finish, and (its own runner) stops the queue after the deliveries in flight
    /// (each within the configured grace). After a hand-over it serves its
    /// sessions until they end. Blocks the calling thread.
    pub fn run(self, shutdown: Shutdown) -> Result<(), Error> {
        let Server {
            shared,
            listeners,
            runner,
            ..
        } = self;
        runner.start()?;
        // Its own runner stops when it is dropped here, after the workers.
        driver::run(&shared, listeners, shutdown)
    }
}

/// The STARTTLS acceptor, when certificates are configured.
fn starttls(config: &Config) -> Result<Option<tokio_rustls::TlsAcceptor>, Error> {
    if config.tls.is_empty() {
        return Ok(None);
    }
    let server = stoa_netkit::tls::server_config(&config.tls, &[]).map_err(Error::Tls)?;
    Ok(Some(tokio_rustls::TlsAcceptor::from(server)))
}

/// The session settings of MX listeners and of submission listeners (AUTH required).
fn session_configs(config: &Config, starttls: bool) -> (Arc<SessionConfig>, Arc<SessionConfig>) {
    let session = |require_auth| {
        Arc::new(SessionConfig {
            hostname: config.hostname.clone(),
            limits: config.limits.session.clone(),
            starttls,
            // Passwords never cross the network in clear text.
            auth: AuthPolicy::AfterTls,
            require_tls: false,
            require_auth,
            reject_unauth_pipelining: true,
            dialect: Dialect::Smtp,
        })
    };
    (session(false), session(true))
}

impl Service for Server {
    fn name(&self) -> &'static str {
        "mail"
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        Endpoint::each("smtp", &self.addrs)
            .chain(Endpoint::each("submission", &self.submission_addrs))
            .collect()
    }

    fn run(self: Box<Self>, shutdown: Shutdown) -> Result<(), BoxError> {
        Ok(Server::run(*self, shutdown)?)
    }
}
