//! Binding, the worker loops, the queue thread, and shutdown.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use stoa_directory::Directory;
use stoa_netkit::shutdown::Shutdown;
use stoa_smtp_proto::session::{AuthPolicy, Config as SessionConfig};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc};

use crate::config::Config;
use crate::conn::{self, Kind};
use crate::delivery::{self, Deliverer, LocalDelivery, Notifier, Relay};
use crate::queue::{Envelope, Queue};

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

/// State shared by every worker and connection.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) directory: Arc<dyn Directory>,
    pub(crate) queue: Arc<Queue>,
    pub(crate) notify: Notifier,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// Session settings of MX and submission listeners.
    pub(crate) mx: Arc<SessionConfig>,
    pub(crate) submission: Arc<SessionConfig>,
    /// The configured local domains, normalised.
    pub(crate) domains: Vec<String>,
    /// Connections per client address, across workers.
    clients: Mutex<HashMap<IpAddr, usize>>,
    /// Open connections, across workers.
    connections: AtomicUsize,
}

/// A connection's place in the per-client count; released on drop.
pub(crate) struct ClientSlot {
    shared: Arc<Shared>,
    ip: IpAddr,
    over: bool,
}

impl ClientSlot {
    fn enter(shared: &Arc<Shared>, ip: IpAddr) -> ClientSlot {
        let limit = shared.config.limits.max_connections_per_client;
        let mut clients = shared.clients.lock().unwrap_or_else(|e| e.into_inner());
        let count = clients.entry(ip).or_insert(0);
        *count += 1;
        let over = limit > 0 && *count > limit;
        drop(clients);
        shared.connections.fetch_add(1, Ordering::Relaxed);
        ClientSlot {
            shared: Arc::clone(shared),
            ip,
            over,
        }
    }

    /// Whether this connection is one too many for its client.
    pub(crate) fn over_limit(&self) -> bool {
        self.over
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut clients = self
            .shared
            .clients
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(count) = clients.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                clients.remove(&self.ip);
            }
        }
        drop(clients);
        self.shared.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A bound SMTP server with its queue recovered, ready to [`Server::run`].
pub struct Server {
    shared: Arc<Shared>,
    /// One group of listeners per worker.
    listeners: Vec<Vec<(std::net::TcpListener, Kind)>>,
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
    /// recipients and passwords are checked in `directory`.
    pub fn bind(
        config: Config,
        directory: Arc<dyn Directory>,
        local: Arc<dyn LocalDelivery>,
    ) -> Result<Server, Error> {
        let tls = match config.tls.is_empty() {
            true => None,
            false => {
                let server =
                    stoa_netkit::tls::server_config(&config.tls, &[]).map_err(Error::Tls)?;
                Some(tokio_rustls::TlsAcceptor::from(server))
            }
        };
        let (mx, submission) = session_configs(&config, tls.is_some());
        let queue_dir = config.queue_dir();
        let queue_error = |source| Error::Queue {
            path: queue_dir.clone(),
            source,
        };
        let queue = Arc::new(Queue::open(&queue_dir).map_err(queue_error)?);
        let recovered = queue.recover().map_err(queue_error)?;
        if !recovered.is_empty() {
            tracing::info!("queue: {} messages recovered", recovered.len());
        }
        let workers = config.workers.max(1);
        let mut listeners: Vec<Vec<_>> = (0..workers).map(|_| Vec::new()).collect();
        let mut addrs = Vec::new();
        for &addr in &config.listen {
            addrs.push(bind_for_workers(addr, Kind::Mx, &mut listeners)?);
        }
        let mut submission_addrs = Vec::new();
        for &addr in &config.submission_listen {
            submission_addrs.push(bind_for_workers(addr, Kind::Submission, &mut listeners)?);
        }
        let relay = config.relay_host.as_ref().map(|host| Relay {
            host: host.clone(),
            helo: config.hostname.clone(),
            connect_timeout: config.queue.relay_connect_timeout,
            command_timeout: config.queue.relay_command_timeout,
            data_timeout: config.queue.relay_data_timeout,
        });
        let (notify, incoming) = mpsc::unbounded_channel();
        let deliverer = Arc::new(Deliverer {
            queue: Arc::clone(&queue),
            directory: Arc::clone(&directory),
            local,
            relay,
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
            clients: Mutex::new(HashMap::new()),
            connections: AtomicUsize::new(0),
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
        let groups = Arc::new(Mutex::new(
            listeners.into_iter().map(Some).collect::<Vec<_>>(),
        ));
        let count = groups.lock().map_or(0, |g| g.len());
        let worker_shared = Arc::clone(&shared);
        let handles = stoa_netkit::worker::spawn(count, "stoa-smtp", move |index| {
            let group = groups
                .lock()
                .ok()
                .and_then(|mut g| g.get_mut(index).and_then(Option::take))
                .unwrap_or_default();
            let (shared, shutdown) = (Arc::clone(&worker_shared), shutdown.clone());
            async move { serve_until(shared, group, shutdown).await }
        })
        .map_err(Error::Workers)?;
        for h in handles {
            if h.join().is_err() {
                tracing::error!("an SMTP worker panicked");
            }
        }
        if queue.join().is_err() {
            tracing::error!("the queue thread panicked");
        }
        Ok(())
    }
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
        })
    };
    (session(false), session(true))
}

/// Binds `addr` once per worker; returns the bound address.
fn bind_for_workers(
    addr: SocketAddr,
    kind: Kind,
    listeners: &mut [Vec<(std::net::TcpListener, Kind)>],
) -> Result<SocketAddr, Error> {
    let group = stoa_netkit::listener::bind_group(
        addr,
        listeners.len(),
        stoa_netkit::listener::DEFAULT_BACKLOG,
    )
    .map_err(|source| Error::Listen { addr, source })?;
    let bound = group
        .first()
        .and_then(|l| l.local_addr().ok())
        .unwrap_or(addr);
    for (worker, listener) in group.into_iter().enumerate() {
        listeners[worker].push((listener, kind));
    }
    Ok(bound)
}

/// One worker: accept until shutdown, then wait for the connections to end.
async fn serve_until(
    shared: Arc<Shared>,
    group: Vec<(std::net::TcpListener, Kind)>,
    mut shutdown: Shutdown,
) {
    let limit = Arc::new(Semaphore::new(shared.config.limits.max_connections.max(1)));
    let mut accepts = Vec::new();
    for (listener, kind) in group {
        match TcpListener::from_std(listener) {
            Ok(l) => accepts.push(tokio::spawn(accept_loop(
                l,
                kind,
                Arc::clone(&shared),
                Arc::clone(&limit),
                shutdown.clone(),
            ))),
            Err(e) => tracing::error!("cannot register an SMTP listener: {e}"),
        }
    }
    shutdown.wait().await;
    for a in &accepts {
        a.abort();
    }
    let deadline = Instant::now() + shared.config.shutdown_grace;
    let mut poll = tokio::time::interval(Duration::from_millis(10));
    while shared.connections.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
        poll.tick().await;
    }
    let left = shared.connections.load(Ordering::Relaxed);
    if left > 0 {
        tracing::warn!("shutdown grace over; dropping {left} SMTP connections");
    }
}

async fn accept_loop(
    listener: TcpListener,
    kind: Kind,
    shared: Arc<Shared>,
    limit: Arc<Semaphore>,
    shutdown: Shutdown,
) {
    loop {
        // Beyond the limit, connections wait in the kernel's backlog.
        let Ok(permit) = Arc::clone(&limit).acquire_owned().await else {
            return;
        };
        let (stream, peer) = stoa_netkit::accept::accept(&listener).await;
        let slot = ClientSlot::enter(&shared, peer.ip());
        tokio::spawn(conn::serve(
            stream,
            peer,
            kind,
            Arc::clone(&shared),
            slot,
            permit,
            shutdown.clone(),
        ));
    }
}
