//! The web server's plain configuration structs. Parsing files and flags into them is
//! the binary's job (`stoa::config`); this crate only consumes them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

pub use ipnet::IpNet;
pub use stoa_netkit::tls::CertKeyFiles;

/// Everything [`crate::Server`] needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// Directory whose regular files are served. Nothing outside it ever is.
    pub docroot: PathBuf,
    /// Addresses to listen on for plain HTTP; each gets one `SO_REUSEPORT` listener
    /// per worker.
    pub listen: Vec<SocketAddr>,
    /// Addresses to listen on for HTTPS, each with its certificates.
    pub tls_listen: Vec<TlsListener>,
    /// Worker threads, each with its own event loop and listeners.
    pub workers: usize,
    /// Where listening sockets come from: fresh binds by default; the binary's
    /// shared [`stoa_netkit::listener::Pool`], so that a reload's server takes
    /// over the sockets of the one it replaces.
    pub sockets: stoa_netkit::listener::Pool,
    /// Event-loop model. [`RuntimeModel::PerCore`] is the default and the one Stoa is
    /// tuned for; the other exists so the choice can be re-measured (ARCHITECTURE.md).
    pub runtime: RuntimeModel,
    /// Where the access log goes: the log of every site without its own
    /// ([`SiteConfig::access_log`]).
    pub access_log: AccessLogTarget,
    /// Common Log Format or the combined format (with referer and user agent),
    /// for every site's log.
    pub log_format: LogFormat,
    /// Limits and timeouts.
    pub limits: Limits,
    /// Open-file and content cache.
    pub cache: CacheConfig,
    /// `Content-Encoding`: precompressed siblings and compression on the fly.
    pub compression: CompressionConfig,
    /// How long SIGTERM waits for in-flight requests before dropping them.
    pub shutdown_grace: Duration,
    /// HTTP/2 on the HTTPS listeners: offered by ALPN (`h2`) before HTTP/1.1.
    pub http2: bool,
    /// `TCP_DEFER_ACCEPT` on every listener: a connection is accepted once its
    /// first bytes (request or TLS hello) have arrived, so its first read never
    /// comes up empty ([`DEFER_ACCEPT_PERIOD`]).
    pub defer_accept: bool,
    /// Paths with a segment starting with a dot (`/.git/config`, `/.env`),
    /// `/.well-known/` aside, are answered 404 on every site that does not say
    /// otherwise ([`SiteConfig::hide_dotfiles`]). Off by default: they are
    /// served like any file, as nginx and Apache serve them (directory
    /// listings never show them).
    pub hide_dotfiles: bool,
    /// The SPECweb99 dynamic API, when enabled.
    pub web99: Option<Web99Config>,
    /// CGI scripts, when any directory is mounted. With [`Config::sites`], its
    /// `mounts` are unused (each site has its own) and the rest is shared: one
    /// timeout, one cap on scripts running at once for every site.
    pub cgi: Option<CgiConfig>,
    /// Virtual hosts, chosen per request by the `Host` header (or the
    /// absolute-form target's authority). Empty: one site, the default, made of
    /// [`Config::docroot`], [`Config::web99`] and [`Config::cgi`]'s mounts, exactly
    /// as before sites existed. Non-empty: `docroot` is unused, `web99` holds the
    /// dynamic API's settings for the site that enables it, `access_log` is the
    /// log of every site without its own.
    pub sites: Vec<SiteConfig>,
}

/// One virtual host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteConfig {
    /// The names it answers: exact (`www.example.com`, any case, an IP address
    /// or `[v6]` literal too) or a leading wildcard (`*.example.com`: any name
    /// ending in `.example.com`, at any depth, not `example.com` itself). An
    /// exact name wins over a wildcard, a longer wildcard over a shorter one.
    pub names: Vec<String>,
    /// The site for names no site lists, requests without a `Host` (HTTP/1.0)
    /// and TLS clients without SNI. At most one; without one, the first site.
    pub default: bool,
    /// Directory whose regular files are served for this site.
    pub docroot: PathBuf,
    /// This site's access log; `None`: the server's ([`Config::access_log`]).
    /// Sites naming the same target share one writer; [`AccessLogTarget::Off`]
    /// logs nothing for this site, whatever the server's log.
    pub access_log: Option<AccessLogTarget>,
    /// Certificates sent on every HTTPS listener to clients whose SNI names this
    /// site (chosen among them by their names, as a listener's are); empty: the
    /// listener's.
    pub tls: Vec<CertKeyFiles>,
    /// Serves the SPECweb99 dynamic API of [`Config::web99`].
    pub web99: bool,
    /// CGI mounts, with [`Config::cgi`]'s limits.
    pub cgi: Vec<CgiMount>,
    /// Status → path beneath the docroot of the page sent with that status
    /// instead of the built-in one (`404` → `/errors/404.html`).
    pub error_pages: Vec<(u16, String)>,
    /// A directory without `index.html` is answered with a listing of its
    /// entries instead of 403.
    pub autoindex: bool,
    /// This site's [`Config::hide_dotfiles`]; `None`: the server's.
    pub hide_dotfiles: Option<bool>,
}

impl SiteConfig {
    /// A site serving `docroot`, with no names and every default.
    pub fn new(docroot: PathBuf) -> SiteConfig {
        SiteConfig {
            names: Vec::new(),
            default: false,
            docroot,
            access_log: None,
            tls: Vec::new(),
            web99: false,
            cgi: Vec::new(),
            error_pages: Vec::new(),
            autoindex: false,
            hide_dotfiles: None,
        }
    }
}

/// An HTTPS listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsListener {
    /// Address to listen on; one `SO_REUSEPORT` listener per worker.
    pub addr: SocketAddr,
    /// Certificate chains and keys. The client's SNI name picks among them by the
    /// names each certificate carries; the first is the default.
    pub certs: Vec<CertKeyFiles>,
}

/// CGI/1.1: URL prefixes mapped to directories of executables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgiConfig {
    /// The mounts, tried in order.
    pub mounts: Vec<CgiMount>,
    /// A script running longer is killed with its whole process group (504).
    pub timeout: Duration,
    /// Most scripts running at once; others wait (up to `timeout`) for a slot.
    pub max_processes: usize,
    /// Most bytes of output accepted from a script (502 beyond).
    pub max_output: usize,
    /// Largest request body passed to a script (413 beyond).
    pub max_body: u64,
}

impl CgiConfig {
    /// The defaults, with no mounts.
    pub fn new() -> CgiConfig {
        CgiConfig {
            mounts: Vec::new(),
            timeout: Duration::from_secs(30),
            max_processes: 64,
            max_output: 16 * 1024 * 1024,
            max_body: 1024 * 1024,
        }
    }
}

impl Default for CgiConfig {
    fn default() -> Self {
        CgiConfig::new()
    }
}

/// One URL prefix served by the executables of a directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgiMount {
    /// URL path prefix, ending in `/` (`/cgi-bin/`).
    pub prefix: String,
    /// Directory of the scripts.
    pub dir: PathBuf,
}

/// The SPECweb99 dynamic API module (`web99.md` §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Web99Config {
    /// Where `User.Personality`, `Custom.Ads` and `post.log` live. Must be outside
    /// the document root, so they are never served as files.
    pub state_dir: PathBuf,
    /// The one entry point: dynamic GET, CAD GET, POST and commands (`/web99`).
    pub path: String,
    /// Largest POST body accepted (413 beyond).
    pub max_post_body: u64,
    /// Clients that may send the manager's `command/Reset` (which empties
    /// post.log) and `command/Fetch` (which reads it); others get 403.
    pub manager_networks: Vec<IpNet>,
}

/// Where the manager's commands are accepted by default: this host only. A
/// harness on another host must be listed in `manager_networks`.
pub const DEFAULT_MANAGER_NETWORKS: [IpNet; 2] = [
    IpNet::new_assert(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 0)), 8),
    IpNet::new_assert(IpAddr::V6(Ipv6Addr::LOCALHOST), 128),
];

impl Web99Config {
    /// The defaults, keeping state in `state_dir`.
    pub fn new(state_dir: PathBuf) -> Web99Config {
        Web99Config {
            state_dir,
            path: DEFAULT_WEB99_PATH.to_owned(),
            max_post_body: 64 * 1024,
            manager_networks: DEFAULT_MANAGER_NETWORKS.to_vec(),
        }
    }

    /// Whether `peer` may send the manager's commands. An IPv4 client of an IPv6
    /// socket (`::ffff:a.b.c.d`) is taken as its IPv4 address.
    pub fn is_manager(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.manager_networks.iter().any(|net| net.contains(&peer))
    }
}

/// The dynamic API's default entry point, the path `stoa bench web` uses.
pub const DEFAULT_WEB99_PATH: &str = "/web99";

impl Config {
    /// A configuration with every default, serving `docroot` on `listen`.
    pub fn new(docroot: PathBuf, listen: Vec<SocketAddr>) -> Config {
        Config {
            docroot,
            listen,
            tls_listen: Vec::new(),
            workers: default_workers(),
            sockets: stoa_netkit::listener::Pool::default(),
            runtime: RuntimeModel::PerCore,
            access_log: AccessLogTarget::Off,
            log_format: LogFormat::Common,
            limits: Limits::default(),
            cache: CacheConfig::default(),
            compression: CompressionConfig::default(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            http2: true,
            hide_dotfiles: false,
            defer_accept: true,
            web99: None,
            cgi: None,
            sites: Vec::new(),
        }
    }

    /// The sites served: [`Config::sites`], or the one implicit site of a
    /// configuration without them.
    pub fn effective_sites(&self) -> Vec<SiteConfig> {
        if !self.sites.is_empty() {
            return self.sites.clone();
        }
        let mut site = SiteConfig::new(self.docroot.clone());
        site.default = true;
        site.web99 = self.web99.is_some();
        site.cgi = self.cgi.iter().flat_map(|c| c.mounts.clone()).collect();
        vec![site]
    }

    /// Where `site`'s access-log lines go: its own log, else the server's
    /// ([`Config::access_log`]).
    pub fn access_log_of<'a>(&'a self, site: &'a SiteConfig) -> &'a AccessLogTarget {
        site.access_log.as_ref().unwrap_or(&self.access_log)
    }
}

/// Default drain time on SIGTERM: long enough for any response a paced SPECweb99
/// client is receiving (a 900 KiB class-3 file at 400 kbit/s takes ~18 s).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// The `TCP_DEFER_ACCEPT` period with [`Config::defer_accept`] (nginx's
/// `deferred` sets the same): the kernel waits for data through one SYN-ACK
/// retransmission, then accepts a silent client that answered it.
pub const DEFER_ACCEPT_PERIOD: Duration = Duration::from_secs(1);

/// One worker per core.
pub fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How the event loops are arranged (the server skeleton's choice, in
/// `stoa-netkit`).
pub use stoa_netkit::server::RuntimeModel;

/// Where access-log lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessLogTarget {
    /// No access log.
    Off,
    /// Standard output.
    Stdout,
    /// Appended to this file; reopened on SIGHUP.
    File(PathBuf),
}

/// Access-log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// `host ident authuser [date] "request" status bytes`
    Common,
    /// Common plus `"referer" "user-agent"` (Apache/nginx "combined").
    Combined,
}

/// Limits and timeouts; defaults from docs/robustness.md §3.7.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Request-head size limits.
    pub head: stoa_http_proto::Limits,
    /// Time allowed for a request head, from its first byte (from accept for the
    /// first request): this much plus [`Limits::head_timeout_per_500b`] for every 500
    /// bytes received, capped at [`Limits::head_timeout_max`] (Apache mod_reqtimeout).
    pub head_timeout: Duration,
    /// Extra head time granted per 500 bytes received.
    pub head_timeout_per_500b: Duration,
    /// Hard cap on the head time.
    pub head_timeout_max: Duration,
    /// Time allowed to read (and discard) a request body, plus 1 s per 500 bytes.
    pub body_timeout: Duration,
    /// Largest body the static server reads and throws away to keep a connection
    /// (a GET with a body, a POST answered 405); larger ones close it.
    pub max_discard_body: u64,
    /// Idle time allowed between requests on a kept-alive connection.
    pub keepalive_timeout: Duration,
    /// Requests per connection before it is closed.
    pub keepalive_requests: u32,
    /// Age after which a connection is closed at its next response.
    pub keepalive_max_age: Duration,
    /// Longest wait for the socket to accept more bytes of a response.
    pub send_timeout: Duration,
    /// Most connections per worker; beyond it the worker stops accepting.
    pub max_connections: usize,
    /// Most TLS handshakes per worker being answered at once: from a complete
    /// ClientHello until the server's flight has been written (the key exchange and
    /// signature). Further ones wait for a slot within the head deadline, which
    /// covers the handshake. A client still sending its ClientHello, or one that
    /// has had the server's flight and not answered, holds no slot, so stalled
    /// handshakes cannot make others wait.
    pub max_handshakes: usize,
    /// Most responses encoded ahead from one batch of pipelined requests before they
    /// are written out.
    pub max_pipeline: usize,
    /// After an error response, how long to keep reading (and discarding) what the
    /// client still sends, so the response is not lost to a TCP reset.
    pub linger_timeout: Duration,
    /// Idle limit while lingering.
    pub linger_idle: Duration,
    /// HTTP/2: most streams a client may have open at once on one connection
    /// (`SETTINGS_MAX_CONCURRENT_STREAMS`).
    pub h2_max_streams: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            head: stoa_http_proto::Limits::default(),
            head_timeout: Duration::from_secs(20),
            head_timeout_per_500b: Duration::from_secs(1),
            head_timeout_max: Duration::from_secs(40),
            body_timeout: Duration::from_secs(20),
            max_discard_body: 64 * 1024,
            keepalive_timeout: Duration::from_secs(15),
            keepalive_requests: 1000,
            keepalive_max_age: Duration::from_secs(3600),
            send_timeout: Duration::from_secs(60),
            max_connections: 20_000,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
            max_pipeline: 64,
            linger_timeout: Duration::from_secs(30),
            linger_idle: Duration::from_secs(5),
            h2_max_streams: 128,
        }
    }
}

/// Default handshakes being answered per worker: far more than a core can complete in
/// the time a client waits (a full ECDHE handshake costs a core tens to hundreds
/// of microseconds), far fewer than the connections a worker holds.
pub const DEFAULT_MAX_HANDSHAKES: usize = 256;

/// The per-worker file cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// How long a cached lookup is trusted before the file is checked again.
    pub revalidate: Duration,
    /// Most cached paths per worker (misses included).
    pub max_entries: usize,
    /// Most open descriptors the cache holds per worker: one for each cached
    /// file larger than [`CacheConfig::max_memory_file`] (a smaller one is
    /// read and closed).
    pub max_open_files: usize,
    /// Files up to this size are kept in memory and sent with `writev`; larger ones
    /// go out with `sendfile`.
    pub max_memory_file: u64,
    /// Memory for the cache per worker: file contents, and each entry's path,
    /// header lines and bookkeeping.
    pub memory_budget: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            revalidate: Duration::from_secs(1),
            max_entries: 50_000,
            max_open_files: 10_000,
            max_memory_file: 32 * 1024,
            memory_budget: 64 * 1024 * 1024,
        }
    }
}

/// How responses are compressed for clients that send `Accept-Encoding`. A
/// request without that header is answered exactly as with compression off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompressionConfig {
    /// Serve `file.br`, `file.zst` or `file.gz` beside `file` (what `stoa
    /// compress` writes), with `file`'s media type, when the client takes that
    /// coding and the sibling is a regular file no older than `file`.
    pub precompressed: bool,
    /// Compress files of [`CompressionConfig::types`] with gzip or brotli when
    /// no sibling serves, keeping the result in a per-worker cache.
    pub on_the_fly: bool,
    /// gzip level on the fly, 1 (fastest) to 9 (smallest).
    pub gzip_level: u32,
    /// brotli quality on the fly, 0 (fastest) to 11 (smallest).
    pub brotli_level: u32,
    /// Files smaller than this are sent as they are (on the fly only).
    pub min_length: u64,
    /// Files larger than this are not compressed on the fly (their siblings
    /// still serve): compressing them would hold the worker too long.
    pub max_length: u64,
    /// Memory for compressed bodies per worker.
    pub cache_size: usize,
    /// Media types compressed on the fly: exact (`text/html`) or a whole
    /// top-level type (`text/*`).
    pub types: Vec<String>,
}

/// The media types compressed on the fly by default: text formats, which
/// shrink several times; images, audio, video and archives are already
/// compressed.
pub const DEFAULT_COMPRESSIBLE_TYPES: &[&str] = &[
    "text/*",
    "application/javascript",
    "application/json",
    "application/manifest+json",
    "application/xml",
    "application/xhtml+xml",
    "application/rss+xml",
    "application/atom+xml",
    "application/wasm",
    "image/svg+xml",
    "image/x-icon",
    "font/ttf",
    "font/otf",
];

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig {
            precompressed: true,
            on_the_fly: true,
            gzip_level: 6,
            brotli_level: 5,
            min_length: 256,
            max_length: 1024 * 1024,
            cache_size: 16 * 1024 * 1024,
            types: DEFAULT_COMPRESSIBLE_TYPES
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
        }
    }
}

impl CompressionConfig {
    /// Whether any response may be encoded.
    pub fn any(&self) -> bool {
        self.precompressed || self.on_the_fly
    }

    /// Whether files of `media_type` (no parameters) are compressed on the fly.
    pub fn compressible(&self, media_type: &str) -> bool {
        self.types.iter().any(|t| match t.strip_suffix("/*") {
            Some(top) => media_type
                .strip_prefix(top)
                .is_some_and(|rest| rest.starts_with('/')),
            None => t.eq_ignore_ascii_case(media_type),
        })
    }
}
