//! Binding, the worker loops, and shutdown: the top of the crate. Each accepted
//! connection is handed to its protocol here: plain HTTP to `conn/`, HTTPS to
//! `tls/`'s handshake, then to `h2/` or `conn/` as ALPN chose. The state the
//! workers share is [`Shared`] (`shared.rs`), which implements the worker
//! loops' [`Handler`] here; a listener's [`Scheme`] and a worker's [`Worker`]
//! stay here, as only the accept loop uses them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rustix::fs::{Mode, OFlags};
use stoa_netkit::accept::register;
use stoa_netkit::server::{Accepted, BoxError, Endpoint, Handler, Listeners, Service, WorkerScope};
use stoa_netkit::shutdown::Shutdown;
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::AbortHandle;

use crate::access_log::{AccessLog, LogReopener};
use crate::cgi::Cgi;
use crate::config::{AccessLogTarget, Config, SiteConfig};
use crate::shared::{NEXT_ID, Shared};
use crate::tls::{self, Acceptor};
use crate::vhost::{Names, VirtualHost};
use crate::web99::Web99;
use crate::{conn, h2, local};

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
    /// A site's certificates or keys cannot be used.
    #[error("TLS certificates of site {site}: {}", join_lines(.errors))]
    SiteTls {
        /// The site's first name (or its place, `site[1]`).
        site: String,
        /// What is wrong with its files.
        errors: Vec<stoa_netkit::tls::Error>,
    },
    /// An access log (the server's or a site's) cannot be opened.
    #[error("access log {}: {source}", path.display())]
    AccessLog {
        /// The configured file (`-` for standard output).
        path: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
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

/// What a listener speaks.
#[derive(Debug, Clone)]
pub(crate) enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTPS with these TLS configurations.
    Https(Arc<tls::Configs>),
}

/// One worker's own state: its TLS handshake slots and, per core, the tasks that
/// keep its caches and log moving.
#[derive(Debug)]
pub(crate) struct Worker {
    handshakes: Arc<Semaphore>,
    /// A per-core worker's own tasks; `None` on the multi-thread runtime, whose
    /// hooks flush the log instead.
    own: Option<OwnTasks>,
}

/// What a per-core worker runs beside its connections, stopped when it ends.
#[derive(Debug)]
struct OwnTasks {
    /// The once-a-second tick (dates, log hand-over).
    tick: AbortHandle,
    /// The parking loop of idle connections.
    parking: AbortHandle,
}

/// A bound web server, ready to [`Server::run`].
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    listeners: Listeners<Scheme>,
    addrs: Vec<SocketAddr>,
    tls_addrs: Vec<SocketAddr>,
    /// The access logs' writer threads, in the order of [`Shared::logs`].
    logs: Vec<AccessLog>,
}

impl Server {
    /// Opens the document roots and the access logs and binds every listener,
    /// so that every start-up error surfaces here.
    pub fn bind(config: Config) -> Result<Server, Error> {
        // The default site first: it is the one a request starts from
        // (`Site::of`), and site 0 has the file cache's plain keys.
        let mut site_configs = config.effective_sites();
        let default = Names::new(&site_configs).default_site();
        let mut default_site = site_configs.remove(default);
        default_site.default = true;
        site_configs.insert(0, default_site);
        let (logs, site_logs) = start_logs(&config, &site_configs)?;
        let mut sites = Vec::with_capacity(site_configs.len());
        for (index, (site, log)) in site_configs.iter().zip(site_logs).enumerate() {
            sites.push(open_site(index, site, log, &config)?);
        }
        let names = Names::new(&site_configs);
        let mut listeners = Listeners::with_pool(config.workers, config.sockets.clone());
        // Set or cleared on every bind: a socket kept over a reload follows the
        // new configuration.
        let defer = if config.defer_accept {
            crate::config::DEFER_ACCEPT_PERIOD
        } else {
            std::time::Duration::ZERO
        };
        let configure = |l: &std::net::TcpListener| configure_listener(l, defer);
        let addrs = listeners
            .bind_all_with(&config.listen, &Scheme::Http, configure)
            .map_err(|(addr, source)| Error::Listen { addr, source })?;
        let mut tls_addrs = Vec::new();
        if !config.tls_listen.is_empty() {
            let alpn = tls::alpn(config.http2);
            let by_site = tls::site_configs(&site_configs, alpn).map_err(|(site, errors)| {
                Error::SiteTls {
                    site: site_name(&site_configs[site], site),
                    errors,
                }
            })?;
            for l in &config.tls_listen {
                let configs = tls::Configs::new(&l.certs, &by_site, names.default_site(), alpn)
                    .map_err(|errors| Error::Tls {
                        addr: l.addr,
                        errors,
                    })?;
                let bound = listeners
                    .bind_with(l.addr, Scheme::Https(Arc::new(configs)), configure)
                    .map_err(|source| Error::Listen {
                        addr: l.addr,
                        source,
                    })?;
                tls_addrs.push(bound);
            }
        }
        let cgi = sites
            .iter()
            .any(|s| !s.cgi.is_empty())
            .then(|| Cgi::new(&config.cgi.clone().unwrap_or_default()));
        // A dynamic request's body is gathered whole in the read buffer: room
        // for the largest a web99 POST or a CGI script may take.
        let max_dynamic_body = sites
            .iter()
            .filter_map(|s| s.web99.as_ref())
            .map(|w| w.config.max_post_body)
            .chain(cgi.as_ref().map(|c| c.config.max_body))
            .max()
            .map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX));
        let shared = Arc::new(Shared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            sites: sites.into_boxed_slice(),
            names,
            max_dynamic_body,
            logs: logs.iter().map(AccessLog::sink).collect(),
            config,
            draining: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            cgi,
        });
        Ok(Server {
            shared,
            listeners,
            addrs,
            tls_addrs,
            logs,
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

    /// A handle that reopens every access-log file, the server's and the
    /// sites' (for SIGHUP).
    pub fn log_reopener(&self) -> LogReopener {
        LogReopener::of(&self.logs)
    }

    /// Serves until `shutdown` fires, then drains: stops accepting, lets requests in
    /// flight finish (up to the configured grace), closes idle connections, and
    /// writes out the access logs. Blocks the calling thread.
    pub fn run(self, shutdown: Shutdown) -> Result<(), Error> {
        let Server {
            shared,
            listeners,
            logs,
            ..
        } = self;
        let model = shared.config.runtime;
        let result =
            stoa_netkit::server::run(&shared, listeners, model, shutdown).map_err(Error::Workers);
        drop(shared);
        for log in logs {
            log.finish();
        }
        result
    }
}

impl Handler for Shared {
    type Kind = Scheme;
    type Worker = Worker;
    const NAME: &'static str = "web";

    fn max_connections(&self) -> usize {
        self.config.limits.max_connections
    }

    fn grace(&self) -> Duration {
        self.config.shutdown_grace
    }

    /// Connections mid-request: idle ones are closed, not waited for.
    fn in_flight(&self) -> usize {
        self.busy.load(Ordering::Relaxed)
    }

    fn start_worker(self: &Arc<Self>, scope: WorkerScope) -> Worker {
        let handshakes = self.config.limits.max_handshakes * scope.scale();
        let own = match scope {
            WorkerScope::PerCore { .. } => Some(OwnTasks {
                tick: tokio::spawn(tick(Arc::clone(self))).abort_handle(),
                parking: tokio::task::spawn_local(conn::run_parking(Arc::clone(self)))
                    .abort_handle(),
            }),
            WorkerScope::Shared { .. } => None,
        };
        Worker {
            handshakes: Arc::new(Semaphore::new(handshakes)),
            own,
        }
    }

    fn accept(self: &Arc<Self>, worker: &Arc<Worker>, conn: Accepted<Scheme>) {
        let Accepted {
            stream,
            peer,
            kind,
            permit,
            ..
        } = conn;
        let (origin, shared) = (conn::Origin::accepted(peer), Arc::clone(self));
        match kind {
            // The request is usually there already (deferred accept): answer it
            // without a task, and without registering the socket unless it must
            // wait (see `conn::start_now`).
            Scheme::Http if conn::can_start_now(&shared) => {
                conn::start_now(conn::Sock::Raw(stream), origin, shared, permit);
            }
            Scheme::Http => {
                if let Some(stream) = register(stream, peer) {
                    tokio::spawn(conn::serve(stream, origin, shared, permit, None));
                }
            }
            Scheme::Https(config) => {
                if let Some(stream) = register(stream, peer) {
                    let acceptor = Acceptor {
                        configs: config,
                        handshakes: Arc::clone(&worker.handshakes),
                    };
                    tokio::spawn(serve_https(stream, origin, shared, permit, acceptor));
                }
            }
        }
    }

    /// A reload's servers took over: each connection closes after its next
    /// answer (`Connection: close`), or at its idle timeout, so none is cut off
    /// between a request and its answer.
    fn begin_hand_over(&self, _worker: &Worker) {
        self.closing.store(true, Ordering::Relaxed);
    }

    fn begin_drain(&self, _worker: &Worker) {
        self.closing.store(true, Ordering::Relaxed);
        self.draining.store(true, Ordering::Relaxed);
        // Parked connections are idle: close them now. Those idle in their task
        // close when they would park (within 50 ms), those mid-request after
        // their answer.
        conn::close_parked(self);
    }

    fn stop_worker(&self, worker: &Worker) {
        if let Some(own) = &worker.own {
            own.tick.abort();
            own.parking.abort();
            local::flush_logs(self);
        }
    }

    fn grace_over(&self, left: usize) {
        tracing::warn!("shutdown grace over; dropping {left} connections mid-request");
    }

    fn on_thread_park(&self) {
        local::with(self, |l| l.flush_logs_if_stale(self, Instant::now()));
    }

    fn on_thread_stop(&self) {
        local::flush_logs(self);
    }
}

impl Service for Server {
    fn name(&self) -> &'static str {
        "web"
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        Endpoint::each("http", &self.addrs)
            .chain(Endpoint::each("https", &self.tls_addrs))
            .collect()
    }

    fn run(self: Box<Self>, shutdown: Shutdown) -> Result<(), BoxError> {
        Ok(Server::run(*self, shutdown)?)
    }
}

/// What every web listener gets on each bind: `TCP_DEFER_ACCEPT` as configured
/// (`period` zero: off), and `TCP_NODELAY`, which Linux copies into each
/// connection it accepts, so that no connection sets it itself (one
/// `setsockopt` less for every connection kept alive). Nothing is lost by
/// having it from the first byte: a response leaves in one `sendmsg`, and where
/// its parts should share packets they are corked (`MSG_MORE`, `TCP_CORK`),
/// which holds a partial segment whatever `TCP_NODELAY` says.
fn configure_listener(listener: &std::net::TcpListener, period: Duration) -> std::io::Result<()> {
    stoa_sockopt::set_defer_accept(listener, period)?;
    rustix::net::sockopt::set_tcp_nodelay(listener, true)?;
    Ok(())
}

/// How a site is named in errors: its first name, or its place.
fn site_name(site: &SiteConfig, index: usize) -> String {
    site.names
        .first()
        .cloned()
        .unwrap_or_else(|| format!("site[{index}]"))
}

/// Starts one access-log writer per distinct target of `sites` (a site without
/// its own log writes to the server's); returns the writers and each site's
/// index among them (`None`: the site does not log). Sites naming the same file
/// share its writer; the server's log is started only when a site uses it.
fn start_logs(
    config: &Config,
    sites: &[SiteConfig],
) -> Result<(Vec<AccessLog>, Vec<Option<usize>>), Error> {
    let mut targets: Vec<&AccessLogTarget> = Vec::new();
    let mut logs = Vec::new();
    let mut of_site = Vec::with_capacity(sites.len());
    for site in sites {
        let target = config.access_log_of(site);
        if let Some(i) = targets.iter().position(|t| *t == target) {
            of_site.push(Some(i));
            continue;
        }
        let started = AccessLog::start(target).map_err(|source| Error::AccessLog {
            path: match target {
                AccessLogTarget::File(path) => path.clone(),
                AccessLogTarget::Stdout | AccessLogTarget::Off => PathBuf::from("-"),
            },
            source,
        })?;
        // `None`: the target is off, and nothing is started for it.
        of_site.push(started.map(|log| {
            targets.push(target);
            logs.push(log);
            logs.len() - 1
        }));
    }
    Ok((logs, of_site))
}

/// Opens a site's document root and starts its dynamic API; its lines go to
/// the access log of index `log` ([`Shared::logs`]).
fn open_site(
    index: usize,
    site: &SiteConfig,
    log: Option<usize>,
    config: &Config,
) -> Result<VirtualHost, Error> {
    let docroot = rustix::fs::open(
        &site.docroot,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Error::Docroot {
        path: site.docroot.clone(),
        source: e.into(),
    })?;
    let web99 = match (&config.web99, site.web99) {
        (Some(c), true) => Some(
            Web99::start(c, &site.docroot).map_err(|source| Error::Web99 {
                path: c.state_dir.clone(),
                source,
            })?,
        ),
        _ => None,
    };
    let mut error_pages: Vec<(u16, Box<[u8]>)> = (site.error_pages.iter())
        .map(|(status, path)| (*status, path.as_bytes().into()))
        .collect();
    error_pages.sort();
    Ok(VirtualHost {
        index,
        metrics_site: crate::metrics::site_slot(site.names.first().map_or("_", String::as_str)),
        log,
        docroot,
        docroot_path: site.docroot.clone(),
        web99,
        cgi: site.cgi.clone(),
        error_pages: error_pages.into_boxed_slice(),
        autoindex: site.autoindex,
        hide_dotfiles: site.hide_dotfiles.unwrap_or(config.hide_dotfiles),
    })
}

/// Serves an HTTPS connection: its handshake ([`tls::accept`]), then HTTP/2 or
/// HTTP/1.1, as ALPN chose. Nothing is answered to a client whose handshake
/// fails or times out: the connection just closes.
async fn serve_https(
    stream: TcpStream,
    origin: conn::Origin,
    shared: Arc<Shared>,
    permit: OwnedSemaphorePermit,
    acceptor: Acceptor,
) {
    let Some((session, sni)) =
        tls::accept(&stream, origin.peer, origin.born, &shared, acceptor).await
    else {
        return;
    };
    let origin = conn::Origin { sni, ..origin };
    if session.chose_h2() {
        let io = tls::Io::new(stream, session);
        h2::serve(io, origin, shared, permit).await;
    } else {
        conn::serve(stream, origin, shared, permit, Some(session)).await;
    }
}

/// Once a second: move the cached dates on and hand the access-log buffers over.
async fn tick(shared: Arc<Shared>) {
    let mut every = tokio::time::interval(Duration::from_secs(1));
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        every.tick().await;
        local::with(&shared, |l| {
            l.tick();
            l.flush_logs(&shared);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepted_connections_inherit_the_listeners_nodelay() {
        // `Conn` never sets TCP_NODELAY: it relies on this.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        configure_listener(&listener, Duration::ZERO).expect("configure");
        let addr = listener.local_addr().expect("address");
        let client = std::net::TcpStream::connect(addr).expect("connect");
        let (accepted, _) = listener.accept().expect("accept");
        assert!(rustix::net::sockopt::tcp_nodelay(&accepted).expect("read the option"));
        // The option is the listener's doing, not a default.
        assert!(!rustix::net::sockopt::tcp_nodelay(&client).expect("read the option"));
    }

    #[test]
    fn one_writer_per_distinct_log() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let (shared, own) = (dir.path().join("shared.log"), dir.path().join("own.log"));
        let mut config = Config::new(".".into(), Vec::new());
        config.access_log = AccessLogTarget::File(shared.clone());
        let site = |log: Option<AccessLogTarget>| {
            let mut s = SiteConfig::new(".".into());
            s.access_log = log;
            s
        };
        let sites = [
            site(Some(AccessLogTarget::File(own.clone()))),
            site(None),
            site(Some(AccessLogTarget::Off)),
            // The same file, named otherwise: the same writer.
            site(Some(AccessLogTarget::File(dir.path().join("./own.log")))),
            site(Some(AccessLogTarget::File(shared))),
        ];
        let (logs, of_site) = start_logs(&config, &sites).expect("start the logs");
        assert_eq!(logs.len(), 2);
        assert_eq!(of_site, [Some(0), Some(1), None, Some(0), Some(1)]);
        for log in logs {
            log.finish();
        }
        // Nothing is started when every site is off.
        config.access_log = AccessLogTarget::Off;
        let (logs, of_site) = start_logs(&config, &[site(None)]).expect("no logs");
        assert!(logs.is_empty() && of_site == [None]);
    }
}
