//! Test certificates and a TLS client that trusts them.
//!
//! A server under test is given [`TestCert::cert`] and [`TestCert::key`] (PEM
//! files); the client trusts [`TestCert::der`] through [`client_config`].

use std::io;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, StreamOwned};

/// A self-signed certificate and its key, as PEM files and as the DER a client
/// trusts.
#[derive(Debug, Clone)]
pub struct TestCert {
    /// `NAME.crt`: the certificate, PEM.
    pub cert: PathBuf,
    /// `NAME.key`: its P-256 private key, PEM.
    pub key: PathBuf,
    /// The certificate, DER, for a client's trust store.
    pub der: CertificateDer<'static>,
}

impl TestCert {
    /// A certificate for `name` (subject alternative name and common name, so
    /// `openssl s_client` shows which one was sent) with a P-256 key, written as
    /// `name.crt` and `name.key` in `dir`.
    pub fn new(dir: &Path, name: &str) -> TestCert {
        let key = rcgen::KeyPair::generate().expect("generate a key");
        let mut params =
            rcgen::CertificateParams::new(vec![name.to_owned()]).expect("certificate parameters");
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("self-sign");
        let (cert_path, key_path) = (
            dir.join(format!("{name}.crt")),
            dir.join(format!("{name}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).expect("write the certificate");
        std::fs::write(&key_path, key.serialize_pem()).expect("write the key");
        TestCert {
            cert: cert_path,
            key: key_path,
            der: cert.der().clone(),
        }
    }
}

/// A rustls client (ring provider, TLS 1.2 and 1.3) trusting only `certs`, and
/// offering `alpn` (none when empty).
pub fn client_config(certs: &[&CertificateDer<'_>], alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in certs {
        roots
            .add((*cert).clone().into_owned())
            .expect("a usable trust anchor");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A TLS client session over `tcp` for server name `name`, handshake completed.
pub fn handshake(
    tcp: TcpStream,
    config: &Arc<ClientConfig>,
    name: &str,
) -> io::Result<StreamOwned<ClientConnection, TcpStream>> {
    let name = ServerName::try_from(name.to_owned()).expect("a DNS name");
    let conn = ClientConnection::new(Arc::clone(config), name).map_err(io::Error::other)?;
    let mut tls = StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}
