//! TLS server configuration from PEM files, for any protocol.
//!
//! [`server_config`] turns certificate/key file pairs into a rustls
//! [`ServerConfig`]: TLS 1.3 and 1.2 only, the *ring* provider's cipher suites
//! (AES-GCM and ChaCha20-Poly1305 with ECDHE; nothing older exists in rustls), the
//! certificate chosen by SNI among the pairs ([`SniResolver`]), the caller's ALPN
//! protocols, and session resumption both ways: a bounded server-side session
//! cache (TLS 1.2 session IDs) and stateless tickets whose keys rotate (TLS 1.3 and
//! TLS 1.2 clients that ask for them).
//!
//! Loading reports every problem at once, one [`Error`] per problem, each naming the
//! file and what is wrong with it, so a configuration check can print them all.
//!
//! [`client`] is the other side: [`connector`] builds the proxies' TLS client from
//! CA files, [`client::handshake`] checks the upstream server's name.
//!
//! [`Stream`] is the mail servers' connection stream (plain, or TLS after an
//! upgrade or from the start, through tokio-rustls); the web server drives
//! `rustls::ServerConnection` on its socket itself.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, ResolvesServerCert, ServerSessionMemoryCache};
use rustls::sign::CertifiedKey;

pub mod client;
mod stream;

pub use client::{ClientError, connector};
pub use stream::Stream;

/// Sessions kept by each listener's server-side cache (TLS 1.2 session IDs). An
/// entry is a few hundred bytes, so this is a few megabytes at most, shared by
/// every worker; nginx's `ssl_session_cache shared:SSL:10m` holds about 40,000.
pub const DEFAULT_SESSION_CACHE: usize = 20_000;

/// A certificate chain and its private key, as PEM file paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertKeyFiles {
    /// PEM file with the certificate, then any intermediates.
    pub cert: PathBuf,
    /// PEM file with the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// One problem with a certificate or key file.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The file does not exist.
    Missing {
        /// `"certificate"` or `"key"`.
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// The file exists but cannot be read.
    Unreadable {
        /// `"certificate"` or `"key"`.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The system's reason.
        source: io::Error,
    },
    /// No `CERTIFICATE` PEM block in the certificate file.
    NoCertificate(PathBuf),
    /// A certificate PEM block that does not hold an X.509 certificate.
    BadCertificate {
        /// The path.
        path: PathBuf,
        /// What the parser found.
        reason: String,
    },
    /// No private key PEM block in the key file.
    NoKey(PathBuf),
    /// A private key the provider cannot use.
    BadKey {
        /// The path.
        path: PathBuf,
        /// What the provider said.
        reason: String,
    },
    /// The private key is not the one of the certificate.
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
    },
    /// No certificate at all was configured.
    NoPairs,
    /// The rest of the configuration failed (the ticket keys' random source).
    Setup(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Missing { what, path } => write!(f, "{what} {}: no such file", path.display()),
            Error::Unreadable { what, path, source } => {
                write!(f, "{what} {}: cannot read: {source}", path.display())
            }
            Error::NoCertificate(path) => write!(
                f,
                "certificate {}: no PEM certificate (BEGIN CERTIFICATE) in the file",
                path.display()
            ),
            Error::BadCertificate { path, reason } => write!(
                f,
                "certificate {}: not a valid X.509 certificate: {reason}",
                path.display()
            ),
            Error::NoKey(path) => write!(
                f,
                "key {}: no PEM private key (BEGIN PRIVATE KEY, RSA or EC PRIVATE KEY) in the file",
                path.display()
            ),
            Error::BadKey { path, reason } => {
                write!(f, "key {}: unusable private key: {reason}", path.display())
            }
            Error::Mismatch { cert, key } => write!(
                f,
                "key {} does not match certificate {}",
                key.display(),
                cert.display()
            ),
            Error::NoPairs => write!(f, "no certificate and key given"),
            Error::Setup(reason) => write!(f, "TLS set-up failed: {reason}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Unreadable { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The crypto provider every Stoa TLS listener uses.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Loads every pair, in order. Returns every problem found, not just the first.
pub fn load_certified_keys(pairs: &[CertKeyFiles]) -> Result<Vec<Arc<CertifiedKey>>, Vec<Error>> {
    if pairs.is_empty() {
        return Err(vec![Error::NoPairs]);
    }
    let provider = provider();
    let mut keys = Vec::with_capacity(pairs.len());
    let mut errors = Vec::new();
    for pair in pairs {
        match load_pair(pair, &provider) {
            Ok(key) => keys.push(Arc::new(key)),
            Err(mut e) => errors.append(&mut e),
        }
    }
    if errors.is_empty() {
        Ok(keys)
    } else {
        Err(errors)
    }
}

fn load_pair(pair: &CertKeyFiles, provider: &CryptoProvider) -> Result<CertifiedKey, Vec<Error>> {
    // Both files are checked before giving up, so one run names both problems.
    let chain = read_file("certificate", &pair.cert).and_then(|b| parse_chain(&pair.cert, &b));
    let key = read_file("key", &pair.key).and_then(|b| parse_key(&pair.key, &b));
    let (chain, key) = match (chain, key) {
        (Ok(chain), Ok(key)) => (chain, key),
        (chain, key) => return Err(chain.err().into_iter().chain(key.err()).collect()),
    };
    let signing = provider.key_provider.load_private_key(key).map_err(|e| {
        vec![Error::BadKey {
            path: pair.key.clone(),
            reason: e.to_string(),
        }]
    })?;
    let certified = CertifiedKey::new(chain, signing);
    match certified.keys_match() {
        // A key type whose public half the provider cannot derive is given the
        // benefit of the doubt, as rustls itself does.
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {
            Ok(certified)
        }
        Err(_) => Err(vec![Error::Mismatch {
            cert: pair.cert.clone(),
            key: pair.key.clone(),
        }]),
    }
}

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| match source.kind() {
        io::ErrorKind::NotFound => Error::Missing {
            what,
            path: path.to_owned(),
        },
        _ => Error::Unreadable {
            what,
            path: path.to_owned(),
            source,
        },
    })
}

fn parse_chain(path: &Path, pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, Error> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::BadCertificate {
            path: path.to_owned(),
            reason: e.to_string(),
        })?;
    let Some(leaf) = chain.first() else {
        return Err(Error::NoCertificate(path.to_owned()));
    };
    webpki::EndEntityCert::try_from(leaf).map_err(|e| Error::BadCertificate {
        path: path.to_owned(),
        reason: e.to_string(),
    })?;
    Ok(chain)
}

fn parse_key(path: &Path, pem: &[u8]) -> Result<PrivateKeyDer<'static>, Error> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => Error::NoKey(path.to_owned()),
        other => Error::BadKey {
            path: path.to_owned(),
            reason: other.to_string(),
        },
    })
}

/// A TLS server configuration for `pairs` (the first is the default certificate),
/// offering `alpn` (in order of preference; empty for none).
pub fn server_config(
    pairs: &[CertKeyFiles],
    alpn: &[&[u8]],
) -> Result<Arc<ServerConfig>, Vec<Error>> {
    let keys = load_certified_keys(pairs)?;
    let setup = |e: rustls::Error| vec![Error::Setup(e.to_string())];
    let mut config = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(setup)?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(SniResolver { keys }));
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config.session_storage = ServerSessionMemoryCache::new(DEFAULT_SESSION_CACHE);
    // Rotates its key every 6 hours, accepting the previous one for as long again.
    config.ticketer = rustls::crypto::ring::Ticketer::new().map_err(setup)?;
    Ok(Arc::new(config))
}

/// Chooses the certificate by the client's SNI name among the configured ones, by
/// the names in each certificate's subject alternative names (wildcards included);
/// without a name, or with a name no certificate carries, the first one.
#[derive(Debug)]
pub struct SniResolver {
    keys: Vec<Arc<CertifiedKey>>,
}

impl SniResolver {
    /// The index of the certificate for `name` (DNS name, any case).
    fn choose(&self, name: Option<&str>) -> usize {
        let Some(name) = name.filter(|_| self.keys.len() > 1) else {
            return 0;
        };
        let Ok(name) = ServerName::try_from(name) else {
            return 0;
        };
        self.keys
            .iter()
            .position(|key| {
                key.end_entity_cert()
                    .ok()
                    .and_then(|der| webpki::EndEntityCert::try_from(der).ok())
                    .is_some_and(|cert| cert.verify_is_valid_for_subject_name(&name).is_ok())
            })
            .unwrap_or(0)
    }
}

impl ResolvesServerCert for SniResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.keys.get(self.choose(hello.server_name())).cloned()
    }
}

#[cfg(test)]
mod tests;
