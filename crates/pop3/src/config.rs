//! The POP3 server's plain configuration structs. Parsing files and flags into them
//! is the binary's job (`stoa::config`); this crate only consumes them.

use std::net::SocketAddr;
use std::time::Duration;

pub use ipnet::IpNet;

pub use stoa_netkit::throttle::AuthThrottle;
pub use stoa_netkit::tls::CertKeyFiles;
pub use stoa_pop3_proto::Limits as SessionLimits;

/// Everything [`crate::Server`] needs besides the directory and the mail store.
#[derive(Debug, Clone)]
pub struct Config {
    /// The server's name in the greeting and the sign-off.
    pub hostname: String,
    /// POP3 listeners (port 110 style): plain text, STLS when [`Config::tls`] is set.
    pub listen: Vec<SocketAddr>,
    /// POP3S listeners (port 995 style): TLS from the first byte. Need
    /// [`Config::tls`].
    pub tls_listen: Vec<SocketAddr>,
    /// Certificates for STLS and POP3S; without them STLS is not offered.
    pub tls: Vec<CertKeyFiles>,
    /// Accept USER/PASS and AUTH PLAIN over plain text. Default `false`: a password
    /// is only taken over TLS (after STLS, or on a POP3S listener), as RFC 2595 §4
    /// recommends; a plain listener without certificates then accepts no login.
    pub allow_plaintext_auth: bool,
    /// Clients on these networks may log in without TLS whatever
    /// [`Config::allow_plaintext_auth`] says: the password does not cross a
    /// network there. Default loopback (`127.0.0.0/8`, `::1`), as Dovecot treats
    /// local connections as secured; empty to require TLS from everyone.
    pub secure_networks: Vec<IpNet>,
    /// Proxies allowed to forward the client's address (`XCLIENT ADDR=… PORT=…`,
    /// as Dovecot's `login_trusted_networks`): the session is then counted,
    /// throttled and logged as that client's. Their connections also count as
    /// secure for logins (a proxy sends the user's password). Default none.
    pub trusted_proxies: Vec<IpNet>,
    /// Worker threads, each with its own event loop and listeners.
    pub workers: usize,
    /// Where listening sockets come from: fresh binds by default; the binary's
    /// shared [`stoa_netkit::listener::Pool`], so that a reload's server takes
    /// over the sockets of the one it replaces.
    pub sockets: stoa_netkit::listener::Pool,
    /// Per-connection limits and timeouts.
    pub limits: Limits,
    /// Delays and refusals of failed logins, per client address. Unused when the
    /// server is bound with a throttle it shares ([`crate::Server::bind_with_throttle`]):
    /// that one's settings apply.
    pub auth_throttle: AuthThrottle,
    /// How long SIGTERM waits for retrievals and QUITs in flight.
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
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
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

/// Default drain time on SIGTERM: sessions waiting for a command are told at once
/// (`-ERR [SYS/TEMP]`, nothing deleted); a retrieval or a QUIT under way gets this
/// long to finish. Longer than the longest login delay ([`AuthThrottle::max_delay`]).
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

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

/// Per-connection limits and timeouts (docs/robustness.md §3.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Line, error and failed-login limits enforced by the session codec (255-octet
    /// commands, 20 errors, 3 failed logins per connection).
    pub session: SessionLimits,
    /// Time allowed for each command before login. Default 3 minutes: a client logs
    /// in right after connecting, and an unauthenticated connection holds a slot and
    /// a descriptor, so it is owed less than a logged-in user's autologout.
    pub login_timeout: Duration,
    /// The autologout timer: time allowed for each command after login. Default 10
    /// minutes, RFC 1939 §3's minimum (docs/robustness.md §3.7). A session that runs out
    /// of it is closed without entering UPDATE: nothing is deleted.
    pub idle_timeout: Duration,
    /// Longest a session may last at all. Default 1 hour: a SPECmail2001 session
    /// lasts seconds, and a modem user downloading a large mailbox minutes; a
    /// session cut off deletes nothing, so the mail is fetched again next time.
    pub session_timeout: Duration,
    /// Longest wait for the client to accept more response bytes. Default 60 s
    /// (nginx's `send_timeout`).
    pub send_timeout: Duration,
    /// Most connections per worker; further ones wait in the listen backlog.
    /// Default 4096, as the SMTP server.
    pub max_connections: usize,
    /// Most simultaneous connections from one client address, across workers; 0
    /// for no limit. Default 50 (Postfix's per-client limit; a mail client keeps at
    /// most one or two). A benchmark driving many sessions from one address raises
    /// it.
    pub max_connections_per_client: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            session: SessionLimits::default(),
            login_timeout: Duration::from_secs(180),
            idle_timeout: Duration::from_secs(600),
            session_timeout: Duration::from_secs(3600),
            send_timeout: Duration::from_secs(60),
            max_connections: 4096,
            max_connections_per_client: 50,
        }
    }
}
