//! Binding, the worker loops, the per-client connection count, and shutdown.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use stoa_directory::Directory;
use stoa_mailstore::MailStore;
use stoa_netkit::shutdown::Shutdown;
use stoa_pop3_proto::Config as SessionConfig;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::config::Config;
use crate::conn::{self, Kind};
use crate::throttle::Throttle;

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
    /// Worker threads or runtimes cannot be created.
    #[error("cannot start workers: {0}")]
    Workers(std::io::Error),
}

/// State shared by every worker and connection.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) directory: Arc<dyn Directory>,
    pub(crate) store: Arc<MailStore>,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// The codec's settings, shared by every session.
    pub(crate) session: Arc<SessionConfig>,
    /// Failed logins per client address.
    pub(crate) throttle: Throttle,
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
        let mut clients = shared
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
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
            .unwrap_or_else(PoisonError::into_inner);
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

/// One worker's listeners.
type Group = Vec<(std::net::TcpListener, Kind)>;

/// A bound POP3 server, ready to [`Server::run`].
pub struct Server {
    shared: Arc<Shared>,
    /// One group of listeners per worker.
    listeners: Vec<Group>,
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
    /// opened in `store` (the same store the SMTP server delivers into).
    pub fn bind(
        config: Config,
        directory: Arc<dyn Directory>,
        store: Arc<MailStore>,
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
        let workers = config.workers.max(1);
        let mut listeners: Vec<Group> = (0..workers).map(|_| Vec::new()).collect();
        let mut addrs = Vec::new();
        for &addr in &config.listen {
            addrs.push(bind_for_workers(addr, Kind::Plain, &mut listeners)?);
        }
        let mut tls_addrs = Vec::new();
        for &addr in &config.tls_listen {
            tls_addrs.push(bind_for_workers(addr, Kind::Tls, &mut listeners)?);
        }
        let session = Arc::new(SessionConfig {
            hostname: config.hostname.clone(),
            limits: config.limits.session.clone(),
            stls: tls.is_some(),
            require_tls: !config.allow_plaintext_auth,
            sasl_plain: true,
            login_delay: None,
        });
        let shared = Arc::new(Shared {
            throttle: Throttle::new(config.auth_throttle.clone()),
            config,
            directory,
            store,
            tls,
            session,
            clients: Mutex::new(HashMap::new()),
            connections: AtomicUsize::new(0),
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
        let groups = Arc::new(Mutex::new(
            listeners.into_iter().map(Some).collect::<Vec<_>>(),
        ));
        let count = groups.lock().map_or(0, |g| g.len());
        let handles = stoa_netkit::worker::spawn(count, "stoa-pop3", move |index| {
            let group = groups
                .lock()
                .ok()
                .and_then(|mut g| g.get_mut(index).and_then(Option::take))
                .unwrap_or_default();
            let (shared, shutdown) = (Arc::clone(&shared), shutdown.clone());
            async move { serve_until(shared, group, shutdown).await }
        })
        .map_err(Error::Workers)?;
        for h in handles {
            if h.join().is_err() {
                tracing::error!("a POP3 worker panicked");
            }
        }
        Ok(())
    }
}

/// Binds `addr` once per worker; returns the bound address.
fn bind_for_workers(
    addr: SocketAddr,
    kind: Kind,
    listeners: &mut [Group],
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

/// One worker: accept until shutdown, then wait (within the grace) for the
/// connections to end.
async fn serve_until(shared: Arc<Shared>, group: Group, mut shutdown: Shutdown) {
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
            Err(e) => tracing::error!("cannot register a POP3 listener: {e}"),
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
        tracing::warn!("shutdown grace over; dropping {left} POP3 connections (nothing deleted)");
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
