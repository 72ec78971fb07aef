//! The state every worker and connection of one SMTP server shares (the SMTP
//! `driver::Policy` is implemented on it, in `conn.rs`).

use std::sync::Arc;

use stoa_directory::{Directory, Verifier};
use stoa_netkit::throttle::Throttle;
use stoa_smtp_proto::session::Config as SessionConfig;

use crate::config::Config;
use crate::delivery::Notifier;
use crate::queue::Queue;

/// State shared by every worker and connection.
pub(crate) struct Shared {
    pub(crate) config: Config,
    pub(crate) directory: Arc<dyn Directory>,
    /// AUTH's password checks through `directory`.
    pub(crate) verifier: Verifier,
    pub(crate) queue: Arc<Queue>,
    pub(crate) notify: Notifier,
    pub(crate) tls: Option<tokio_rustls::TlsAcceptor>,
    /// Session settings of MX and submission listeners.
    pub(crate) mx: Arc<SessionConfig>,
    pub(crate) submission: Arc<SessionConfig>,
    /// The configured local domains, normalised.
    pub(crate) domains: Vec<String>,
    /// Failed AUTH per client address, perhaps shared with other servers (POP3).
    pub(crate) throttle: Arc<Throttle>,
}
