//! Binding, the queue thread, and shutdown; the worker loops and connections are
//! the shared driver's (`driver.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use stoa_directory::Directory;
use stoa_netkit::server::{BoxError, Endpoint, Listeners, Service};
use stoa_netkit::shutdown::Shutdown;
use stoa_netkit::throttle::Throttle;
use stoa_smtp_proto::session::{AuthPolicy, Config as SessionConfig, Dialect};
use tokio::sync::mpsc;

use crate::config::Config;
use crate::conn::Kind;
use crate::delivery::{self, Deliverer, LocalDelivery, Relay};
use crate::driver;
use crate::queue::{Envelope, Queue};
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
    deliverer: Arc<Deliverer>,
    incoming: mpsc::UnboundedReceiver<String>,
    recovered: Vec<Envelope>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("addrs", &self.addrs)
            .field("submission_addrs", &self.submission_addrs)
            .field("queued", &self.recovered.len())
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
        let tls = starttls(&config)?;
        let (mx, submission) = session_configs(&config, tls.is_some());
        let (queue, recovered) = open_queue(&config)?;
        let mut listeners = Listeners::new(config.workers);
        let addrs = driver::bind(&mut listeners, &config.listen, &Kind::Mx)?;
        let submission_addrs =
            driver::bind(&mut listeners, &config.submission_listen, &Kind::Submission)?;
        let (notify, incoming) = mpsc::unbounded_channel();
        let deliverer = Arc::new(Deliverer {
            queue: Arc::clone(&queue),
            directory: Arc::clone(&directory),
            local,
            relay: relay(&config),
            lmtp: delivery::lmtp::Lmtp::new(&config.mail_hosts, &config.hostname, &config.queue),
            config: config.queue.clone(),
            hostname: config.hostname.clone(),
        });
        let domains = config
            .domains
            .iter()
            .map(|d| d.trim_end_matches('.').to_ascii_lowercase())
            .collect();
        let shared = Arc::new(Shared {
            config,
            directory,
            queue,
            notify,
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
            deliverer,
            incoming,
            recovered,
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

    /// Messages found in the queue at start.
    pub fn recovered(&self) -> usize {
        self.recovered.len()
    }

    /// Serves until `shutdown` fires, then drains: stops accepting, answers
    /// connections waiting for a command with `421`, lets messages being received
    /// finish, and stops the queue after the deliveries in flight (each within the
    /// configured grace). Blocks the calling thread.
    pub fn run(self, shutdown: Shutdown) -> Result<(), Error> {
        let Server {
            shared,
            listeners,
            deliverer,
            incoming,
            recovered,
            ..
        } = self;
        let grace = shared.config.shutdown_grace;
        let (notify, queue_shutdown) = (shared.notify.clone(), shutdown.clone());
        let queue = std::thread::Builder::new()
            .name("stoa-queue".into())
            .spawn(move || {
                stoa_netkit::worker::run_current_thread(delivery::run(
                    deliverer,
                    notify,
                    incoming,
                    recovered,
                    queue_shutdown,
                    grace,
                ))
            })
            .map_err(Error::Workers)?;
        let served = driver::run(&shared, listeners, shutdown);
        // Without workers nothing triggers the queue's end: leave it to the process.
        if served.is_ok() && queue.join().is_err() {
            tracing::error!("the queue thread panicked");
        }
        served
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

/// Opens the queue directory and recovers what a previous run left in it.
fn open_queue(config: &Config) -> Result<(Arc<Queue>, Vec<Envelope>), Error> {
    let path = config.queue_dir();
    let queue_error = |source| Error::Queue {
        path: path.clone(),
        source,
    };
    let queue = Queue::open(&path).map_err(queue_error)?;
    let recovered = queue.recover().map_err(queue_error)?;
    if !recovered.is_empty() {
        tracing::info!("queue: {} messages recovered", recovered.len());
    }
    Ok((Arc::new(queue), recovered))
}

/// The smart host's client settings, when one is configured.
fn relay(config: &Config) -> Option<Relay> {
    config.relay_host.as_ref().map(|host| Relay {
        host: host.clone(),
        helo: config.hostname.clone(),
        connect_timeout: config.queue.relay_connect_timeout,
        command_timeout: config.queue.relay_command_timeout,
        data_timeout: config.queue.relay_data_timeout,
    })
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
