//! The store hosts a proxy sends its users to (the POP3 and IMAP proxies'): the
//! `[[mail_host]]` entries ([`StoreHost`]), how the proxy's leg to them is
//! protected ([`BackendTls`]), the proxy's settings ([`ProxyConfig`]), and where
//! a user's `mailHost` listens for one protocol ([`Routes`]), and the two
//! together at run time with the TLS client ([`Backends`]): connecting, and a
//! TLS upgrade. The conversation on the connection is each proxy's own.

use std::collections::HashMap;
use std::io;
use std::path::PathBuf;
use std::time::Duration;

use stoa_netkit::tls::ClientError;
use stoa_netkit::upstream::{Dial, Upstream};

use crate::normalize_host;

/// A store host: the `mailHost` name of its users and its servers' addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreHost {
    /// The name, as users' `mailHost` attributes give it (compared without case
    /// and trailing dot).
    pub name: String,
    /// Its POP3 server, `HOST:PORT`; without it, the name on the default port.
    pub pop3: Option<String>,
    /// Its IMAP server, `HOST:PORT`; without it, the name on the default port.
    pub imap: Option<String>,
}

/// How a proxy's leg to a store host is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackendTls {
    /// Plain text: the store hosts are on a network the operator trusts (or on
    /// this machine).
    #[default]
    None,
    /// The protocol's upgrade after the greeting (POP3 `STLS`, IMAP
    /// `STARTTLS`); a store host that does not offer it is an error.
    StartTls,
    /// TLS from the first byte (POP3S, IMAPS).
    Tls,
}

impl BackendTls {
    /// Every mode, in the order the documentation lists them.
    pub const ALL: [BackendTls; 3] = [BackendTls::None, BackendTls::StartTls, BackendTls::Tls];

    /// The mode's name in the configuration (`none`, `starttls`, `tls`).
    pub fn name(self) -> &'static str {
        match self {
            BackendTls::None => "none",
            BackendTls::StartTls => "starttls",
            BackendTls::Tls => "tls",
        }
    }

    /// The mode called `name`; `stls` (POP3's word, and the POP3 proxy's first
    /// name for it) is `starttls`.
    pub fn from_name(name: &str) -> Option<BackendTls> {
        match name {
            "stls" => Some(BackendTls::StartTls),
            _ => BackendTls::ALL.into_iter().find(|m| m.name() == name),
        }
    }
}

/// A proxy's settings for its leg to the store hosts, beside the protocol
/// server's own configuration of its listeners.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// The store hosts (`[[mail_host]]`).
    pub stores: Vec<StoreHost>,
    /// Plain, STARTTLS or TLS to the store hosts.
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
    /// Tell the store host the client's address (POP3 `XCLIENT`, IMAP `ID`).
    /// Default on; a store host that refuses it still serves the session (and
    /// sees the proxy's address).
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

/// The protocols a proxy serves, with their store hosts' default ports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// POP3: 110, POP3S 995 (RFC 1939, RFC 8314).
    Pop3,
    /// IMAP: 143, IMAPS 993 (RFC 9051, RFC 8314).
    Imap,
}

impl Protocol {
    /// The port of a store host without an address for the protocol.
    pub fn default_port(self, tls: BackendTls) -> u16 {
        match (self, tls) {
            (Protocol::Pop3, BackendTls::Tls) => 995,
            (Protocol::Pop3, _) => 110,
            (Protocol::Imap, BackendTls::Tls) => 993,
            (Protocol::Imap, _) => 143,
        }
    }
}

/// Where each store host serves one protocol.
#[derive(Debug, Clone)]
pub struct Routes {
    /// Normalized host name to `HOST:PORT`.
    routes: HashMap<String, String>,
    default_port: u16,
}

impl Routes {
    /// The `protocol` addresses of `stores`; the others on the protocol's default
    /// port for `tls`.
    pub fn new(stores: &[StoreHost], protocol: Protocol, tls: BackendTls) -> Routes {
        let routes = stores
            .iter()
            .filter_map(|h| {
                let addr = match protocol {
                    Protocol::Pop3 => h.pop3.clone(),
                    Protocol::Imap => h.imap.clone(),
                }?;
                Some((normalize_host(&h.name), addr))
            })
            .collect();
        Routes {
            routes,
            default_port: protocol.default_port(tls),
        }
    }

    /// Where `host` (a `mailHost` value) listens: its entry, or the name on the
    /// default port.
    pub fn address(&self, host: &str) -> String {
        let host = normalize_host(host);
        match self.routes.get(&host) {
            Some(addr) => addr.clone(),
            None => format!("{host}:{}", self.default_port),
        }
    }
}

/// A proxy's way to its store hosts for one protocol: the settings, the routes
/// and, when the leg is protected, the TLS client (its CA files loaded once).
pub struct Backends {
    config: ProxyConfig,
    routes: Routes,
    tls: Option<tokio_rustls::TlsConnector>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends")
            .field("config", &self.config)
            .field("routes", &self.routes)
            .finish_non_exhaustive()
    }
}

impl Backends {
    /// The store hosts of `config` for `protocol`; fails when the CA files for a
    /// protected leg cannot be used.
    pub fn new(config: ProxyConfig, protocol: Protocol) -> Result<Backends, ClientError> {
        let tls = (config.backend_tls != BackendTls::None)
            .then(|| stoa_netkit::tls::connector(&config.backend_ca))
            .transpose()?;
        let routes = Routes::new(&config.stores, protocol, config.backend_tls);
        Ok(Backends {
            config,
            routes,
            tls,
        })
    }

    /// The settings.
    pub fn config(&self) -> &ProxyConfig {
        &self.config
    }

    /// Where `host` (a `mailHost` value) listens (see [`Routes::address`]).
    pub fn address(&self, host: &str) -> String {
        self.routes.address(host)
    }

    /// Connects to `addr`, `host`'s address, with TLS from the first byte when
    /// the leg is [`BackendTls::Tls`] (the certificate must name `host`); reply
    /// lines are limited to `max_line` octets.
    pub async fn connect(&self, addr: &str, host: &str, max_line: usize) -> io::Result<Upstream> {
        let tls = match (self.config.backend_tls, &self.tls) {
            (BackendTls::Tls, Some(connector)) => Some((connector, host)),
            _ => None,
        };
        Upstream::connect(Dial {
            addr,
            tls,
            connect_timeout: self.config.connect_timeout,
            reply_timeout: self.config.reply_timeout,
            max_line,
        })
        .await
    }

    /// The TLS handshake with `host` after the protocol's upgrade command
    /// (STARTTLS, STLS) was accepted.
    pub async fn start_tls(&self, upstream: &mut Upstream, host: &str) -> io::Result<()> {
        let Some(connector) = &self.tls else {
            return Err(io::Error::other("TLS without a TLS client"));
        };
        upstream
            .start_tls(connector, host, self.config.connect_timeout)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_per_protocol_with_default_ports() {
        let stores = [StoreHost {
            name: "Store-A.test.".into(),
            pop3: Some("10.0.0.1:1110".into()),
            imap: Some("10.0.0.1:1143".into()),
        }];
        let pop3 = Routes::new(&stores, Protocol::Pop3, BackendTls::None);
        let imap = Routes::new(&stores, Protocol::Imap, BackendTls::Tls);
        assert_eq!(pop3.address("store-a.TEST"), "10.0.0.1:1110");
        assert_eq!(imap.address("store-a.test."), "10.0.0.1:1143");
        assert_eq!(pop3.address("other.test"), "other.test:110");
        assert_eq!(imap.address("other.test"), "other.test:993");
        let starttls = Routes::new(&[], Protocol::Imap, BackendTls::StartTls);
        assert_eq!(starttls.address("b.test"), "b.test:143");
    }

    #[test]
    fn tls_mode_names() {
        for mode in BackendTls::ALL {
            assert_eq!(BackendTls::from_name(mode.name()), Some(mode));
        }
        assert_eq!(BackendTls::from_name("stls"), Some(BackendTls::StartTls));
        assert_eq!(BackendTls::from_name("STLS"), None);
    }
}
