//! The client side of TLS, for the proxies' legs to their upstream servers: a
//! rustls client configuration whose roots are the operator's CA files (or the
//! system's), and the handshake that checks the certificate names the host.

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::TlsConnector;

use super::Stream;

/// Why a TLS client cannot be built.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// A CA file cannot be read or holds no usable certificate.
    Ca {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// No CA file was given and the system has no root certificate.
    NoRoots,
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Ca { path, reason } => {
                write!(f, "backend CA {}: {reason}", path.display())
            }
            ClientError::NoRoots => f.write_str(
                "TLS to the store hosts needs backend_ca (the system has no root certificates)",
            ),
        }
    }
}

impl std::error::Error for ClientError {}

/// A TLS client trusting the certificates of `ca_files` (PEM), or the system's
/// roots when there is none. TLS 1.3 and 1.2, the *ring* provider.
pub fn connector(ca_files: &[PathBuf]) -> Result<TlsConnector, ClientError> {
    let mut roots = rustls::RootCertStore::empty();
    if ca_files.is_empty() {
        for cert in rustls_native_certs::load_native_certs().certs {
            let _ = roots.add(cert);
        }
        if roots.is_empty() {
            return Err(ClientError::NoRoots);
        }
    }
    for path in ca_files {
        let ca = |reason: String| ClientError::Ca {
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
    Ok(TlsConnector::from(Arc::new(config)))
}

/// The client's handshake with `host` over the plain `stream`: the certificate
/// must name `host` (a trailing dot ignored).
pub async fn handshake(
    connector: &TlsConnector,
    host: &str,
    stream: &mut Stream,
) -> io::Result<()> {
    let name = ServerName::try_from(host.trim_end_matches('.').to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    stream.start_tls_client(connector, name).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_ca_files_are_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "nothing here\n").expect("write");
        let missing = dir.path().join("missing.pem");
        for (file, reason) in [(&empty, "no certificate"), (&missing, "")] {
            match connector(std::slice::from_ref(file)) {
                Err(e @ ClientError::Ca { .. }) => {
                    let text = e.to_string();
                    assert!(text.contains(&file.display().to_string()), "{text}");
                    assert!(text.contains(reason), "{text}");
                }
                other => panic!("{file:?}: {:?}", other.err()),
            }
        }
    }
}
