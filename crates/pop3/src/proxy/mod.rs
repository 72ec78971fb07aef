//! The POP3 proxy (the role of Sun's Messaging Multiplexor in the SPECmail2001
//! topology): it speaks POP3 to the client up to the login, checks the password in
//! the directory, finds the user's store host from `mailHost`, logs in there for
//! the user and then relays bytes both ways until either side closes.
//!
//! # The login's path
//!
//! 1. The client's session runs in the same `conn.rs` loop as a store host's
//!    (greeting, CAPA, STLS, USER/PASS, AUTH PLAIN, the per-address throttle and
//!    the failed-login delays, the timeouts), so it follows the POP3 server's rules
//!    to the letter.
//! 2. The credentials are checked here, in the directory: a wrong password or an
//!    unknown user is refused by the proxy (after its delay), and no store host
//!    ever sees the attempt.
//! 3. The user's `mailHost` names the store host; its POP3 address is its
//!    [`StoreHost`] entry (`[[mail_host]] pop3`), or the name itself on port 110
//!    (995 with [`BackendTls::Tls`]), resolved at every connection.
//! 4. `backend.rs` connects (plain, STLS or TLS from the first byte), forwards the
//!    client's address with `XCLIENT ADDR=… PORT=…` (the store host accepts it only
//!    from its `trusted_proxies`), and logs in with AUTH PLAIN as the user the
//!    directory returned, with the client's password: the store host checks it
//!    again, so a proxy cannot open a mailbox without its password.
//! 5. The store host's `+OK` goes to the client and `relay.rs` copies bytes both
//!    ways (commands the client pipelined behind its PASS first).
//!
//! A store host that cannot be reached, refuses the login or answers out of turn
//! gives the client `-ERR [SYS/TEMP]` (`[IN-USE]` and `[LOGIN-DELAY]` are passed
//! on), and the connection to it is closed: a session is relayed only after the
//! store host accepted exactly the user the directory named.

mod backend;
mod relay;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use stoa_directory::normalize_host;

pub(crate) use backend::{LoggedIn, Refusal, login};
pub(crate) use relay::{Limits as RelayLimits, relay};

/// The POP3 port of a store host without an entry (RFC 1939).
pub const DEFAULT_POP3_PORT: u16 = 110;
/// The POP3S port of a store host without an entry, with [`BackendTls::Tls`]
/// (RFC 8314).
pub const DEFAULT_POP3S_PORT: u16 = 995;

/// How the proxy's leg to a store host is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendTls {
    /// Plain text: the store hosts are on a network the operator trusts (or on
    /// this machine).
    #[default]
    None,
    /// `STLS` after the greeting; a store host that does not offer it is an error.
    Stls,
    /// TLS from the first byte (POP3S).
    Tls,
}

impl BackendTls {
    /// Every mode, in the order the documentation lists them.
    pub const ALL: [BackendTls; 3] = [BackendTls::None, BackendTls::Stls, BackendTls::Tls];

    /// The mode's name in the configuration (`none`, `stls`, `tls`).
    pub fn name(self) -> &'static str {
        match self {
            BackendTls::None => "none",
            BackendTls::Stls => "stls",
            BackendTls::Tls => "tls",
        }
    }

    /// The mode called `name`.
    pub fn from_name(name: &str) -> Option<BackendTls> {
        BackendTls::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// A store host: the `mailHost` name of its users and its POP3 address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreHost {
    /// The name, as users' `mailHost` attributes give it (compared without case
    /// and trailing dot).
    pub name: String,
    /// Its POP3 server, `HOST:PORT`; without it, the name on the default port.
    pub pop3: Option<String>,
}

/// The proxy's own settings, beside the POP3 [`crate::Config`] of its listeners.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The store hosts (`[[mail_host]]`).
    pub stores: Vec<StoreHost>,
    /// Plain, STLS or TLS to the store hosts.
    pub backend_tls: BackendTls,
    /// PEM files of the certificate authorities that sign the store hosts'
    /// certificates; empty: the system's roots. The certificate must name the
    /// store host's `mailHost`.
    pub backend_ca: Vec<PathBuf>,
    /// Longest wait for a store host's TCP connection (and TLS handshake).
    /// Default 10 s.
    pub connect_timeout: Duration,
    /// Longest wait for each of a store host's replies during the login. Default
    /// 30 s: it checks a password too.
    pub reply_timeout: Duration,
    /// Send `XCLIENT` so the store host sees the client's address. Default on; a
    /// store host that refuses it still serves the session (and sees the proxy's
    /// address).
    pub forward_client: bool,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            stores: Vec::new(),
            backend_tls: BackendTls::None,
            backend_ca: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            reply_timeout: Duration::from_secs(30),
            forward_client: true,
        }
    }
}

/// Why the proxy cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// A CA file cannot be read or holds no certificate.
    #[error("POP3 proxy backend CA {path}: {reason}")]
    Ca {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// TLS to the store hosts was asked for and no root certificate is available.
    #[error(
        "POP3 proxy: TLS to the store hosts needs backend_ca (the system has no root certificates)"
    )]
    NoRoots,
}

/// The proxy at run time: the routes and the TLS client.
pub(crate) struct Proxy {
    config: ProxyConfig,
    /// Lowercase host name (no trailing dot) to `HOST:PORT`.
    routes: HashMap<String, String>,
    tls: Option<tokio_rustls::TlsConnector>,
}

impl Proxy {
    /// The proxy of `config`, its CA files loaded.
    pub(crate) fn new(config: ProxyConfig) -> Result<Proxy, SetupError> {
        let routes = config
            .stores
            .iter()
            .filter_map(|h| Some((normalize_host(&h.name), h.pop3.clone()?)))
            .collect();
        let tls = match config.backend_tls {
            BackendTls::None => None,
            BackendTls::Stls | BackendTls::Tls => Some(connector(&config.backend_ca)?),
        };
        Ok(Proxy {
            config,
            routes,
            tls,
        })
    }

    /// Where `host`'s POP3 server listens: its entry, or the name on the default
    /// port.
    pub(crate) fn address(&self, host: &str) -> String {
        let host = normalize_host(host);
        match self.routes.get(&host) {
            Some(addr) => addr.clone(),
            None => {
                let port = match self.config.backend_tls {
                    BackendTls::Tls => DEFAULT_POP3S_PORT,
                    BackendTls::None | BackendTls::Stls => DEFAULT_POP3_PORT,
                };
                format!("{host}:{port}")
            }
        }
    }
}

/// The TLS client for the store hosts: `ca_files`, or the system's roots.
fn connector(ca_files: &[PathBuf]) -> Result<tokio_rustls::TlsConnector, SetupError> {
    let mut roots = rustls::RootCertStore::empty();
    if ca_files.is_empty() {
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(SetupError::NoRoots);
        }
    }
    for path in ca_files {
        let ca = |reason: String| SetupError::Ca {
            path: path.clone(),
            reason,
        };
        let pem = std::fs::read(path).map_err(|e| ca(e.to_string()))?;
        let mut found = 0;
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| ca(e.to_string()))?;
            roots.add(cert).map_err(|e| ca(e.to_string()))?;
            found += 1;
        }
        if found == 0 {
            return Err(ca("no certificate in the file".into()));
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("invariant: ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}
