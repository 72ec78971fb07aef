//! The IMAP server's plain configuration structs. Parsing files and flags into them
//! is the binary's job (`stoa::config`); this crate only consumes them.

use std::net::SocketAddr;
use std::time::Duration;

pub use ipnet::IpNet;

pub use stoa_imap_proto::Limits as CommandLimits;
pub use stoa_netkit::throttle::AuthThrottle;
pub use stoa_netkit::tls::CertKeyFiles;

/// Everything [`crate::Server`] needs besides the directory and the mail store.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server's name in the greeting.
    pub hostname: String,
    /// IMAP listeners (port 143 style): plain text, STARTTLS when [`Config::tls`]
    /// is set.
    pub listen: Vec<SocketAddr>,
    /// IMAPS listeners (port 993 style): TLS from the first byte. Need
    /// [`Config::tls`].
    pub tls_listen: Vec<SocketAddr>,
    /// Certificates for STARTTLS and IMAPS; without them STARTTLS is not offered.
    pub tls: Vec<CertKeyFiles>,
    /// Accept LOGIN and AUTHENTICATE over plain text. Default `false`: a password
    /// is only taken over TLS (RFC 9051 §11.1 `LOGINDISABLED` otherwise).
    pub allow_plaintext_auth: bool,
    /// Clients on these networks may log in without TLS. Default loopback.
    pub secure_networks: Vec<IpNet>,
    /// Proxies allowed to name their client (`ID ("x-originating-ip" …
    /// "x-originating-port" …)`, Dovecot's convention) before the login: the
    /// per-address count, the throttle and the log then use that address, and the
    /// connection counts as secure for logins (a proxy sends the user's
    /// password). Default none.
    pub trusted_proxies: Vec<IpNet>,
    /// Worker threads, each with its own event loop and listeners.
    pub workers: usize,
    /// Where listening sockets come from (fresh binds, or the binary's pool).
    pub sockets: stoa_netkit::listener::Pool,
    /// Per-connection limits and timeouts.
    pub limits: Limits,
    /// Delays and refusals of failed logins, per client address (unused when the
    /// server is bound with a shared throttle).
    pub auth_throttle: AuthThrottle,
    /// How long SIGTERM waits for commands under way.
    pub shutdown_grace: Duration,
}

impl Config {
    /// A configuration with every default and no listener.
    pub fn new() -> Config {
        Config {
            hostname: default_hostname(),
            listen: Vec::new(),
            tls_listen: Vec::new(),
            tls: Vec::new(),
            allow_plaintext_auth: false,
            secure_networks: loopback(),
            trusted_proxies: Vec::new(),
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            sockets: stoa_netkit::listener::Pool::default(),
            limits: Limits::default(),
            auth_throttle: AuthThrottle::default(),
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config::new()
    }
}

/// The loopback networks, [`Config::secure_networks`]'s default.
pub fn loopback() -> Vec<IpNet> {
    ["127.0.0.0/8", "::1/128"]
        .iter()
        .map(|n| n.parse().expect("invariant: a valid network literal"))
        .collect()
}

/// The host's name (`uname -n`), or `localhost`.
pub fn default_hostname() -> String {
    let uname = rustix::system::uname();
    let name = uname.nodename().to_string_lossy().into_owned();
    if name.is_empty() {
        "localhost".to_owned()
    } else {
        name
    }
}

/// Per-connection limits and timeouts. Every limit, when hit, is told to the
/// client (a tagged NO or BAD, or `* BYE` with the reason), never a silent close.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Line, literal and command sizes (64 KiB lines, 64 MiB literals: the APPEND
    /// limit, advertised as `APPENDLIMIT`).
    pub command: CommandLimits,
    /// Time allowed for each command before login. Default 1 minute, as Dovecot.
    pub login_timeout: Duration,
    /// The autologout timer after login. Default 30 minutes, RFC 9051 §5.4's
    /// minimum.
    pub idle_timeout: Duration,
    /// Longest one IDLE command may last before the server ends the session
    /// (clients re-issue IDLE every 29 minutes, RFC 2177). Default 31 minutes.
    pub idle_command_timeout: Duration,
    /// How often an IDLE session looks at its folder for changes made by other
    /// processes (changes made through this server wake it at once). Default 30 s.
    pub idle_check: Duration,
    /// Longest wait for the client to accept more response bytes. Default 60 s.
    pub send_timeout: Duration,
    /// Most connections per worker. Default 4096.
    pub max_connections: usize,
    /// Most simultaneous connections from one client address, across workers; 0
    /// for no limit. Default 50.
    pub max_connections_per_client: usize,
    /// Most simultaneous sessions of one user; 0 for no limit. Default 20
    /// (Dovecot's `mail_max_userip_connections` is 10 per address).
    pub max_sessions_per_user: usize,
    /// Most commands in one session; 0 for no limit. Default 1,000,000.
    pub max_commands: u64,
    /// Malformed commands after which the session is closed. Default 20.
    pub max_bad_commands: u32,
    /// Failed logins after which the connection is closed. Default 3.
    pub max_failed_logins: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            command: CommandLimits::default(),
            login_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30 * 60),
            idle_command_timeout: Duration::from_secs(31 * 60),
            idle_check: Duration::from_secs(30),
            send_timeout: Duration::from_secs(60),
            max_connections: 4096,
            max_connections_per_client: 50,
            max_sessions_per_user: 20,
            max_commands: 1_000_000,
            max_bad_commands: 20,
            max_failed_logins: 3,
        }
    }
}
