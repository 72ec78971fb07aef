//! Binding, the worker loops, and shutdown.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use stoa_netkit::shutdown::Shutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::access_log::{AccessLog, LogReopener, LogSink};
use crate::cgi::Cgi;
use crate::config::{Config, RuntimeModel};
use crate::idle::IdleSet;
use crate::tls::{self, Acceptor};
use crate::web99::Web99;
use crate::{conn, idle, local};

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The document root cannot be opened as a directory.
    #[error("document root {path}: {source}")]
    Docroot {
        /// The configured path.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A listen address cannot be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// An HTTPS listener's certificates or keys cannot be used (every problem,
    /// separated by semicolons).
    #[error("TLS listener {addr}: {}", join_lines(.errors))]
    Tls {
        /// The listener's address.
        addr: SocketAddr,
        /// What is wrong with its files.
        errors: Vec<stoa_netkit::tls::Error>,
    },
    /// The access log cannot be opened.
    #[error("access log: {0}")]
    AccessLog(std::io::Error),
    /// Worker threads or runtimes cannot be created.
    #[error("cannot start workers: {0}")]
    Workers(std::io::Error),
    /// The dynamic API's state directory cannot be used.
    #[error("web99 state directory {path}: {source}")]
    Web99 {
        /// The configured directory.
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
}

fn join_lines(errors: &[stoa_netkit::tls::Error]) -> String {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    lines.join("; ")
}

/// A bound listening socket, with its TLS configuration for HTTPS.
#[derive(Debug)]
struct Bound {
    listener: std::net::TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
}

/// State shared by every worker of one server. Everything mutable in it is atomic;
/// per-worker mutable state lives in [`crate::local`].
#[derive(Debug)]
pub(crate) struct Shared {
    /// Distinguishes servers in one process (tests), for the thread-local state.
    pub(crate) id: u64,
    pub(crate) config: Config,
    /// The document root, opened once; every file is opened beneath it.
    pub(crate) docroot: OwnedFd,
    pub(crate) log: Option<LogSink>,
    /// Set on shutdown: answers carry `Connection: close` and idle connections end.
    pub(crate) draining: AtomicBool,
    /// Connections in the middle of a request or response.
    pub(crate) busy: AtomicUsize,
    /// The SPECweb99 dynamic API, when enabled.
    pub(crate) web99: Option<Web99>,
    /// The CGI gateway, when directories are mounted.
    pub(crate) cgi: Option<Cgi>,
}

#[cfg(test)]
impl Shared {
    /// A server's shared state without listeners, for unit tests.
    pub(crate) fn for_tests(config: Config) -> Shared {
        Shared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            docroot: rustix::fs::open(".", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
                .expect("open the current directory"),
            log: None,
            config,
            draining: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            web99: None,
            cgi: None,
        }
    }
}

/// A bound web server, ready to [`Server::run`].
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    /// One group of listeners per worker, one listener per address in each.
    listeners: Vec<Vec<Bound>>,
    addrs: Vec<SocketAddr>,
    tls_addrs: Vec<SocketAddr>,
    log: Option<AccessLog>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Server {
    /// Opens the document root and the access log and binds every listener, so
    /// that every start-up error surfaces here.
    pub fn bind(config: Config) -> Result<Server, Error> {
        let docroot = rustix::fs::open(
            &config.docroot,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Error::Docroot {
            path: config.docroot.clone(),
            source: e.into(),
        })?;
        let workers = config.workers.max(1);
        let mut listeners: Vec<Vec<Bound>> = (0..workers).map(|_| Vec::new()).collect();
        let mut addrs = Vec::new();
        for &addr in &config.listen {
            addrs.push(bind_for_workers(addr, None, &mut listeners)?);
        }
        let mut tls_addrs = Vec::new();
        for l in &config.tls_listen {
            let tls = stoa_netkit::tls::server_config(&l.certs, tls::ALPN).map_err(|errors| {
                Error::Tls {
                    addr: l.addr,
                    errors,
                }
            })?;
            tls_addrs.push(bind_for_workers(l.addr, Some(&tls), &mut listeners)?);
        }
        let log = AccessLog::start(&config.access_log).map_err(Error::AccessLog)?;
        let web99 = match &config.web99 {
            Some(c) => Some(
                Web99::start(c, &config.docroot).map_err(|source| Error::Web99 {
                    path: c.state_dir.clone(),
                    source,
                })?,
            ),
            None => None,
        };
        let cgi = config
            .cgi
            .as_ref()
            .filter(|c| !c.mounts.is_empty())
            .map(Cgi::new);
        let shared = Arc::new(Shared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            docroot,
            log: log.as_ref().map(AccessLog::sink),
            config,
            draining: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            web99,
            cgi,
        });
        Ok(Server {
            shared,
            listeners,
            addrs,
            tls_addrs,
            log,
        })
    }

    /// The bound plain-HTTP addresses (port 0 resolved), one per configured address.
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The bound HTTPS addresses (port 0 resolved), one per configured listener.
    pub fn tls_addrs(&self) -> &[SocketAddr] {
        &self.tls_addrs
    }

    /// A handle that reopens the access log (for SIGHUP).
    pub fn log_reopener(&self) -> LogReopener {
        self.log
            .as_ref()
            .map_or_else(LogReopener::none, AccessLog::reopener)
    }

    /// Serves until `shutdown` fires, then drains: stops accepting, lets requests in
    /// flight finish (up to the configured grace), closes idle connections, and
    /// writes out the access log. Blocks the calling thread.
    pub fn run(self, shutdown: Shutdown) -> Result<(), Error> {
        let Server {
            shared,
            listeners,
            log,
            ..
        } = self;
        let result = match shared.config.runtime {
            RuntimeModel::PerCore => run_per_core(&shared, listeners, &shutdown),
            RuntimeModel::MultiThread => run_multi_thread(&shared, listeners, shutdown),
        };
        drop(shared);
        if let Some(log) = log {
            log.finish();
        }
        result
    }
}

/// Binds `addr` once per worker and adds a listener to each worker's group; returns
/// the bound address.
fn bind_for_workers(
    addr: SocketAddr,
    tls: Option<&Arc<rustls::ServerConfig>>,
    listeners: &mut [Vec<Bound>],
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
        listeners[worker].push(Bound {
            listener,
            tls: tls.cloned(),
        });
    }
    Ok(bound)
}

fn run_per_core(
    shared: &Arc<Shared>,
    listeners: Vec<Vec<Bound>>,
    shutdown: &Shutdown,
) -> Result<(), Error> {
    let groups = Arc::new(Mutex::new(
        listeners.into_iter().map(Some).collect::<Vec<_>>(),
    ));
    let (shared, shutdown) = (Arc::clone(shared), shutdown.clone());
    let handles = stoa_netkit::worker::spawn(
        groups.lock().map_or(0, |g| g.len()),
        "stoa-web",
        move |index| {
            let group = groups
                .lock()
                .ok()
                .and_then(|mut g| g.get_mut(index).and_then(Option::take))
                .unwrap_or_default();
            let (shared, shutdown) = (Arc::clone(&shared), shutdown.clone());
            async move {
                let limits = &shared.config.limits;
                let limit = Arc::new(Semaphore::new(limits.max_connections));
                let handshakes = Arc::new(Semaphore::new(limits.max_handshakes));
                let ticker = tokio::spawn(tick(Arc::clone(&shared)));
                let parking = tokio::task::spawn_local(idle::run(Arc::clone(&shared)));
                serve_until(&shared, group, (limit, handshakes), shutdown).await;
                ticker.abort();
                parking.abort();
                local::flush_log(&shared);
            }
        },
    )
    .map_err(Error::Workers)?;
    for h in handles {
        if h.join().is_err() {
            tracing::error!("a web worker panicked");
        }
    }
    Ok(())
}

fn run_multi_thread(
    shared: &Arc<Shared>,
    listeners: Vec<Vec<Bound>>,
    shutdown: Shutdown,
) -> Result<(), Error> {
    let (park, stop) = (Arc::clone(shared), Arc::clone(shared));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(shared.config.workers.max(1))
        .thread_name("stoa-web-mt")
        .enable_all()
        .on_thread_park(move || {
            local::with(&park, |l| l.flush_log_if_stale(&park, Instant::now()));
        })
        .on_thread_stop(move || local::flush_log(&stop))
        .build()
        .map_err(Error::Workers)?;
    let shared = Arc::clone(shared);
    runtime.block_on(async move {
        let (limits, workers) = (&shared.config.limits, shared.config.workers.max(1));
        let limit = Arc::new(Semaphore::new(limits.max_connections * workers));
        let handshakes = Arc::new(Semaphore::new(limits.max_handshakes * workers));
        let group = listeners.into_iter().flatten().collect();
        serve_until(&shared, group, (limit, handshakes), shutdown).await;
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    Ok(())
}

/// Accepts on `group` until shutdown, then drains. `limits` are the connection
/// slots and the TLS handshake slots.
async fn serve_until(
    shared: &Arc<Shared>,
    group: Vec<Bound>,
    limits: (Arc<Semaphore>, Arc<Semaphore>),
    mut shutdown: Shutdown,
) {
    let (limit, handshakes) = limits;
    let mut accepts = Vec::new();
    for Bound { listener, tls } in group {
        let acceptor = tls.map(|config| Acceptor {
            config,
            handshakes: Arc::clone(&handshakes),
        });
        match TcpListener::from_std(listener) {
            Ok(l) => accepts.push(tokio::spawn(accept_loop(
                l,
                Arc::clone(shared),
                Arc::clone(&limit),
                acceptor,
            ))),
            Err(e) => tracing::error!("cannot register listener: {e}"),
        }
    }
    shutdown.wait().await;
    shared.draining.store(true, Ordering::Relaxed);
    // Parked connections are idle: close them now. Those idle in their task close
    // when they would park (within a second).
    local::with(shared, |l| l.idle.as_mut().map(IdleSet::close_all));
    for a in &accepts {
        a.abort();
    }
    drain(shared).await;
}

async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    limit: Arc<Semaphore>,
    tls: Option<Acceptor>,
) {
    loop {
        // Wait for a free slot before accepting: beyond the limit, connections wait
        // in the kernel's backlog instead of costing memory here.
        let Ok(permit) = Arc::clone(&limit).acquire_owned().await else {
            return;
        };
        let (stream, peer) = stoa_netkit::accept::accept(&listener).await;
        let (origin, shared) = (conn::Origin::accepted(peer), Arc::clone(&shared));
        match &tls {
            None => tokio::spawn(conn::serve(stream, origin, shared, permit, None)),
            Some(acceptor) => {
                let acceptor = acceptor.clone();
                tokio::spawn(tls::serve(stream, origin, shared, permit, acceptor))
            }
        };
    }
}

/// Waits until no connection is mid-request, or the grace period ends.
async fn drain(shared: &Shared) {
    let deadline = Instant::now() + shared.config.shutdown_grace;
    let mut poll = tokio::time::interval(Duration::from_millis(10));
    while shared.busy.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
        poll.tick().await;
    }
    let left = shared.busy.load(Ordering::Relaxed);
    if left > 0 {
        tracing::warn!("shutdown grace over; dropping {left} connections mid-request");
    }
}

/// Once a second: move the cached dates on and hand the access-log buffer over.
async fn tick(shared: Arc<Shared>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        every.tick().await;
        local::with(&shared, |l| {
            l.tick();
            if let Some(sink) = &shared.log {
                l.log.flush(sink);
            }
        });
    }
}
