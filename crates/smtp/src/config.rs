//! The SMTP server's plain configuration structs. Parsing files and flags into them is
//! the binary's job (`stoa::config`); this crate only consumes them.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use ipnet::IpNet;
pub use stoa_netkit::throttle::AuthThrottle;
pub use stoa_netkit::tls::CertKeyFiles;
pub use stoa_smtp_proto::session::Limits as SessionLimits;

/// Everything [`crate::Server`] needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// The mail directory: the queue is `MAIL_DIR/queue`, the mail store
    /// `MAIL_DIR/store`, the embedded directory `MAIL_DIR/directory`.
    pub mail_dir: PathBuf,
    /// The server's name in the greeting, EHLO reply, `Received:` headers and bounces.
    pub hostname: String,
    /// Local domains in addition to those of the directory.
    pub domains: Vec<String>,
    /// MX listeners (port 25 style): mail for local users from anyone, relay only for
    /// trusted networks and authenticated clients.
    pub listen: Vec<SocketAddr>,
    /// Submission listeners (port 587 style): MAIL only after AUTH.
    pub submission_listen: Vec<SocketAddr>,
    /// Certificates for STARTTLS; without them STARTTLS is not offered (and so
    /// neither is AUTH).
    pub tls: Vec<CertKeyFiles>,
    /// Client networks allowed to relay without AUTH. None by default: loopback is
    /// not trusted unless listed.
    pub trusted_networks: Vec<IpNet>,
    /// Smart host for non-local recipients, `HOST:PORT`. Without it non-local
    /// recipients are refused even for authenticated clients (there is no MX
    /// lookup).
    pub relay_host: Option<String>,
    /// The store hosts users' `mailHost` values name (`[[mail_host]]`): mail for
    /// a user on one of them goes there over LMTP. A host not listed is reached
    /// by its name on port 24.
    pub mail_hosts: Vec<MailHost>,
    /// Worker threads, each with its own event loop and listeners.
    pub workers: usize,
    /// Where listening sockets come from: fresh binds by default; the binary's
    /// shared [`stoa_netkit::listener::Pool`], so that a reload's server takes
    /// over the sockets of the one it replaces.
    pub sockets: stoa_netkit::listener::Pool,
    /// Per-connection limits and timeouts.
    pub limits: Limits,
    /// Queue and delivery settings.
    pub queue: QueueConfig,
    /// Refuse a MAIL FROM the authenticated user does not own: an address (or
    /// alias, or `+detail` form) that does not resolve to the login's own mailbox
    /// (Postfix's `reject_sender_login_mismatch`). Default `true`. The null sender
    /// is allowed.
    pub sender_login_match: bool,
    /// Local deliveries write `Delivered-To:` with each recipient's address;
    /// a message for several users is then stored once per user.
    pub delivered_to: bool,
    /// Delays and refusals of failed AUTH, per client address. Unused when the
    /// server is bound with a throttle it shares ([`crate::Server::bind_with_throttle`]):
    /// that one's settings apply.
    pub auth_throttle: AuthThrottle,
    /// How long SIGTERM waits for transactions and deliveries in flight.
    pub shutdown_grace: Duration,
}

impl Config {
    /// A configuration with every default, keeping mail under `mail_dir`.
    pub fn new(mail_dir: PathBuf) -> Config {
        Config {
            mail_dir,
            hostname: default_hostname(),
            domains: Vec::new(),
            listen: Vec::new(),
            submission_listen: Vec::new(),
            tls: Vec::new(),
            trusted_networks: Vec::new(),
            relay_host: None,
            mail_hosts: Vec::new(),
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            sockets: stoa_netkit::listener::Pool::default(),
            limits: Limits::default(),
            queue: QueueConfig::default(),
            sender_login_match: true,
            delivered_to: false,
            auth_throttle: AuthThrottle::default(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
        }
    }

    /// `MAIL_DIR/queue`.
    pub fn queue_dir(&self) -> PathBuf {
        self.mail_dir.join("queue")
    }

    /// `MAIL_DIR/directory`, where the embedded directory lives.
    pub fn directory_dir(&self) -> PathBuf {
        self.mail_dir.join("directory")
    }

    /// `MAIL_DIR/store`, the mail store ([`crate::StoreDelivery`]).
    pub fn store_dir(&self) -> PathBuf {
        self.mail_dir.join("store")
    }
}

/// A store host: the `mailHost` name of its users and where its servers listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MailHost {
    /// The name, as users' `mailHost` attributes give it (compared without case
    /// and trailing dot).
    pub name: String,
    /// Its LMTP server, `HOST:PORT`; without it, the name on port 24.
    pub lmtp: Option<String>,
    /// Its POP3 server, `HOST:PORT`: kept for the POP3 proxy, unused by SMTP.
    pub pop3: Option<String>,
    /// Its IMAP server, `HOST:PORT`: kept for the IMAP proxy, unused by SMTP.
    pub imap: Option<String>,
}

/// Default drain time on SIGTERM: enough for a message being received at modem speed
/// to finish its last seconds, and for deliveries in flight to end; anything not done
/// stays in the queue and is retried after the restart. An AUTH waiting out its
/// failure delay ([`AuthThrottle::max_delay`], 15 s) is cut short by shutdown.
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
    /// Line, size, recipient and error limits enforced by the session codec.
    pub session: SessionLimits,
    /// Time allowed for each command line (Postfix's `smtpd_timeout`, 300 s).
    pub command_timeout: Duration,
    /// Base time allowed for a whole message after `354`; it grows by one second per
    /// [`Limits::data_min_rate`] bytes received, so a client sending at least that
    /// rate is never cut off and a trickle is (Postfix's per-request deadline).
    pub data_timeout: Duration,
    /// Bytes per second a DATA sender must sustain beyond `data_timeout`. Default 500.
    pub data_min_rate: u64,
    /// Longest a session may last at all. Default 10 minutes (docs/robustness.md §3.7).
    pub session_timeout: Duration,
    /// Longest wait for the client to accept more reply bytes. Default 60 s.
    pub send_timeout: Duration,
    /// Most connections per worker; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// Most simultaneous connections from one client address, across workers
    /// (Postfix's `smtpd_client_connection_count_limit`, 50); 0 for no limit.
    pub max_connections_per_client: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            session: SessionLimits::default(),
            command_timeout: Duration::from_secs(300),
            data_timeout: Duration::from_secs(180),
            data_min_rate: 500,
            session_timeout: Duration::from_secs(600),
            send_timeout: Duration::from_secs(60),
            // SPECmail2001 at 7,500 msgs/min holds ~1,500–3,000 client connections
            // (mail2001.md §1.9), most of them SMTP at modem speed.
            max_connections: 4096,
            max_connections_per_client: 50,
        }
    }
}

/// The queue and its delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueConfig {
    /// First retry delay after a temporary failure (Postfix's `minimal_backoff_time`,
    /// 300 s). Each further failure doubles it.
    pub min_backoff: Duration,
    /// Longest retry delay (Postfix's `maximal_backoff_time`, 4000 s).
    pub max_backoff: Duration,
    /// How long a message may stay in the queue before its undelivered recipients
    /// are bounced (Postfix's `maximal_queue_lifetime`, 5 days; RFC 5321 §4.5.4.1
    /// asks for at least 4–5 days).
    pub max_lifetime: Duration,
    /// Messages delivered at once.
    pub max_deliveries: usize,
    /// Time to connect to the smart host (Postfix's `smtp_connect_timeout`, 30 s).
    pub relay_connect_timeout: Duration,
    /// Time for each reply of the smart host (Postfix's `smtp_*_timeout`, 300 s).
    pub relay_command_timeout: Duration,
    /// Time for the reply to the end of the message (`smtp_data_done_timeout`,
    /// 600 s).
    pub relay_data_timeout: Duration,
    /// Idle LMTP connections kept per store host for the next messages.
    pub lmtp_max_idle: usize,
    /// How long an idle LMTP connection is kept.
    pub lmtp_idle_timeout: Duration,
    /// Most `Received:` headers a message may carry before it is refused as a mail
    /// loop (Postfix's `hopcount_limit`, 50).
    pub max_hops: usize,
}

impl Default for QueueConfig {
    fn default() -> Self {
        QueueConfig {
            min_backoff: Duration::from_secs(300),
            max_backoff: Duration::from_secs(4000),
            max_lifetime: Duration::from_secs(5 * 24 * 3600),
            // Postfix's default_destination_concurrency_limit is 20 per destination;
            // local deliveries are fsync-bound, so more would mostly queue on the disk.
            max_deliveries: 20,
            relay_connect_timeout: Duration::from_secs(30),
            relay_command_timeout: Duration::from_secs(300),
            relay_data_timeout: Duration::from_secs(600),
            lmtp_max_idle: DEFAULT_LMTP_MAX_IDLE,
            lmtp_idle_timeout: DEFAULT_LMTP_IDLE_TIMEOUT,
            max_hops: 50,
        }
    }
}

/// Idle LMTP connections kept per store host: as many as deliveries to one host
/// usually overlap on a busy MTA, few enough that a store host with many MTAs in
/// front of it is not held open by idle sessions.
pub const DEFAULT_LMTP_MAX_IDLE: usize = 4;

/// How long an idle LMTP connection is kept: long enough to carry the next messages
/// of a steady flow, well below the store host's command timeout (300 s by default)
/// so that the server never closes a connection the pool still counts on.
pub const DEFAULT_LMTP_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
