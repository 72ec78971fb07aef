//! The generators' connections: plain TCP, or TLS through rustls with a chosen
//! share of new connections resuming an earlier session (the SPECweb99_SSL-style
//! mode, `web99.md` §9).
//!
//! A [`Connector`] belongs to one load thread: its session store (where TLS 1.3
//! tickets and TLS 1.2 session ids are kept) is that thread's own, so resuming
//! takes no lock shared with other threads. Each new connection draws, from its
//! generator's own random stream, whether it may resume; one that may not uses a
//! configuration without a session store and always pays the full handshake.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// How the generators speak TLS.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TlsPlan {
    /// The name sent in SNI and checked against the certificate.
    pub server_name: String,
    /// Share (0–1) of new connections that may resume a session; the others
    /// always do a full handshake.
    pub resume_ratio: f64,
    /// Certificates to trust, PEM (the built-in target's self-signed one, or
    /// `--tls-ca`); the system's roots when absent.
    pub ca_pem: Option<String>,
    /// Accept any certificate (`--tls-insecure`): for servers with a
    /// certificate no root vouches for. Signatures are still checked.
    pub insecure: bool,
    /// Speak HTTP/2 (`--http 2`): ALPN offers `h2` only; against a server
    /// that does not choose it, every operation fails at the HTTP/2 preface.
    #[serde(default)]
    pub http2: bool,
}

/// Why a TLS client configuration cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// `server_name` is neither a DNS name nor an IP address.
    #[error("{0:?} is not a valid TLS server name")]
    ServerName(String),
    /// The CA PEM holds no usable certificate.
    #[error("no usable certificate in the CA PEM: {0}")]
    Ca(String),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// How the TLS handshake of a new connection went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handshake {
    /// A plain TCP connection.
    None,
    /// A full handshake (key exchange and certificate).
    Full,
    /// An abbreviated handshake on a resumed session.
    Resumed,
}

/// Why a connection could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The TCP connect failed.
    #[error("connect: {0}")]
    Tcp(io::Error),
    /// The TLS handshake failed.
    #[error("TLS handshake: {0}")]
    Tls(io::Error),
}

/// Opens the generators' connections (one per load thread).
pub struct Connector {
    tls: Option<Tls>,
}

struct Tls {
    name: ServerName<'static>,
    resume_ratio: f64,
    http2: bool,
    resuming: tokio_rustls::TlsConnector,
    fresh: tokio_rustls::TlsConnector,
}

impl std::fmt::Debug for Connector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connector")
            .field("tls", &self.tls.as_ref().map(|t| (&t.name, t.resume_ratio)))
            .finish()
    }
}

impl Connector {
    /// Plain TCP when `tls` is `None`.
    pub fn new(tls: Option<&TlsPlan>) -> Result<Connector, TlsSetupError> {
        let Some(plan) = tls else {
            return Ok(Connector { tls: None });
        };
        let name = ServerName::try_from(plan.server_name.clone())
            .map_err(|_| TlsSetupError::ServerName(plan.server_name.clone()))?;
        let base = client_config(plan)?;
        let mut resuming = base.clone();
        // Enough sessions for every server name a run uses many times over.
        resuming.resumption = Resumption::in_memory_sessions(1024);
        let mut fresh = base;
        fresh.resumption = Resumption::disabled();
        Ok(Connector {
            tls: Some(Tls {
                name,
                resume_ratio: plan.resume_ratio.clamp(0.0, 1.0),
                http2: plan.http2,
                resuming: tokio_rustls::TlsConnector::from(Arc::new(resuming)),
                fresh: tokio_rustls::TlsConnector::from(Arc::new(fresh)),
            }),
        })
    }

    /// Connects (and handshakes, for TLS); `rng` decides whether this
    /// connection may resume a session.
    pub async fn connect(
        &self,
        addr: std::net::SocketAddr,
        rng: &mut fastrand::Rng,
    ) -> Result<(Stream, Handshake), ConnectError> {
        let tcp = TcpStream::connect(addr).await.map_err(ConnectError::Tcp)?;
        // Plain HTTP needs no TCP_NODELAY (one system call a connection
        // saved): each request leaves in one write once everything sent
        // before it is acknowledged by the response, so Nagle never holds it.
        // A TLS handshake writes flights of records back to back.
        let Some(tls) = &self.tls else {
            return Ok((Stream::Plain(tcp), Handshake::None));
        };
        let _ = tcp.set_nodelay(true);
        let connector = if rng.f64() < tls.resume_ratio {
            &tls.resuming
        } else {
            &tls.fresh
        };
        let stream = connector
            .connect(tls.name.clone(), tcp)
            .await
            .map_err(ConnectError::Tls)?;
        let kind = match stream.get_ref().1.handshake_kind() {
            Some(rustls::HandshakeKind::Resumed) => Handshake::Resumed,
            _ => Handshake::Full,
        };
        Ok((Stream::Tls(Box::new(stream)), kind))
    }

    /// Speaks TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Speaks HTTP/2 ([`TlsPlan::http2`]).
    pub fn http2(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.http2)
    }
}

fn client_config(plan: &TlsPlan) -> Result<ClientConfig, TlsSetupError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let mut config = if plan.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        match &plan.ca_pem {
            Some(pem) => {
                let certs: Vec<CertificateDer<'static>> =
                    CertificateDer::pem_slice_iter(pem.as_bytes())
                        .collect::<Result<_, _>>()
                        .map_err(|e| TlsSetupError::Ca(e.to_string()))?;
                if certs.is_empty() {
                    return Err(TlsSetupError::Ca("no CERTIFICATE block".into()));
                }
                for cert in certs {
                    roots
                        .add(cert)
                        .map_err(|e| TlsSetupError::Ca(e.to_string()))?;
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
        }
        let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| TlsSetupError::Ca(e.to_string()))?;
        builder.with_webpki_verifier(verifier).with_no_client_auth()
    };
    config.alpn_protocols = match plan.http2 {
        true => vec![b"h2".to_vec()],
        false => vec![b"http/1.1".to_vec()],
    };
    Ok(config)
}

/// `--tls-insecure`: any certificate is accepted, but the handshake signatures
/// are still verified, so the session keys are the server's.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// What a TLS connection negotiated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsParameters {
    /// `TLSv1_3` or `TLSv1_2`.
    pub protocol: String,
    /// The cipher suite, by its IANA name.
    pub suite: String,
    /// The server certificate's key: `RSA 2048`, `ECDSA P-256`, `Ed25519`.
    pub key: String,
}

/// The public-key type of a DER certificate, found by the algorithm identifier
/// of its subject public key (the signature algorithm's identifiers differ, so
/// they cannot be mistaken for it).
fn key_type(der: &[u8]) -> String {
    const RSA: &[u8] = &[
        0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01,
    ];
    const EC: &[u8] = &[0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01];
    const P256: &[u8] = &[0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];
    const P384: &[u8] = &[0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22];
    const ED25519: &[u8] = &[0x06, 0x03, 0x2B, 0x65, 0x70];
    let find = |oid: &[u8]| der.windows(oid.len()).position(|w| w == oid);
    if let Some(at) = find(RSA) {
        return match rsa_bits(&der[at + RSA.len()..]) {
            Some(bits) => format!("RSA {bits}"),
            None => "RSA".into(),
        };
    }
    if find(EC).is_some() {
        return if find(P256).is_some() {
            "ECDSA P-256".into()
        } else if find(P384).is_some() {
            "ECDSA P-384".into()
        } else {
            "ECDSA".into()
        };
    }
    if find(ED25519).is_some() {
        return "Ed25519".into();
    }
    "unknown".into()
}

/// The modulus size after the rsaEncryption identifier: `NULL`, then a BIT
/// STRING holding `SEQUENCE { INTEGER modulus, INTEGER exponent }`.
fn rsa_bits(mut der: &[u8]) -> Option<usize> {
    fn header(der: &[u8], tag: u8) -> Option<(usize, &[u8])> {
        if *der.first()? != tag {
            return None;
        }
        let first = *der.get(1)?;
        if first < 0x80 {
            return Some((usize::from(first), der.get(2..)?));
        }
        let n = usize::from(first & 0x7F);
        let bytes = der.get(2..2 + n)?;
        let len = bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        Some((len, der.get(2 + n..)?))
    }
    der = der.strip_prefix(&[0x05, 0x00]).unwrap_or(der);
    let (_, bits) = header(der, 0x03)?;
    let (_, seq) = header(bits.get(1..)?, 0x30)?;
    let (len, modulus) = header(seq, 0x02)?;
    // A leading zero keeps the integer positive; it is not part of the size.
    let leading_zero = usize::from(modulus.first() == Some(&0));
    Some((len - leading_zero) * 8)
}

/// A generator's connection.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    /// For TLS: the protocol version, the cipher suite and the server key's
    /// type, for the report.
    pub fn tls_parameters(&self) -> Option<TlsParameters> {
        match self {
            Stream::Plain(_) => None,
            Stream::Tls(s) => {
                let conn = s.get_ref().1;
                Some(TlsParameters {
                    protocol: conn
                        .protocol_version()
                        .map_or_else(|| "?".into(), |v| format!("{v:?}")),
                    suite: conn
                        .negotiated_cipher_suite()
                        .map_or_else(|| "?".into(), |c| format!("{:?}", c.suite())),
                    key: conn
                        .peer_certificates()
                        .and_then(|c| c.first())
                        .map_or_else(|| "?".into(), |leaf| key_type(leaf)),
                })
            }
        }
    }
}

impl Stream {
    /// Reads up to `scratch.len()` bytes the caller does not keep; the count.
    /// Plain TCP drops them in the kernel (`recv` with `MSG_TRUNC`: counted,
    /// never copied); TLS decrypts them into `scratch`.
    pub(crate) fn poll_discard(
        &mut self,
        cx: &mut Context<'_>,
        scratch: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let tcp: &TcpStream = match self {
            Stream::Plain(tcp) => tcp,
            Stream::Tls(s) => {
                let mut buf = ReadBuf::new(scratch);
                return match Pin::new(s.as_mut()).poll_read(cx, &mut buf) {
                    Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.filled().len())),
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                };
            }
        };
        let want = scratch.len();
        loop {
            match tcp.poll_read_ready(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
            let mut short = None;
            let read = tcp.try_io(tokio::io::Interest::READABLE, || {
                let (_, n) =
                    rustix::net::recv(&*tcp, &mut *scratch, rustix::net::RecvFlags::TRUNC)?;
                if n > 0 && n < want {
                    // As tokio's own reads do: a short read drained the
                    // socket, so readiness is cleared now rather than by
                    // one more call that would find nothing.
                    short = Some(n);
                    return Err(io::ErrorKind::WouldBlock.into());
                }
                Ok(n)
            });
            match (read, short) {
                (_, Some(n)) => return Poll::Ready(Ok(n)),
                (Ok(n), None) => return Poll::Ready(Ok(n)),
                (Err(e), None) if e.kind() == io::ErrorKind::WouldBlock => continue,
                (Err(e), None) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `openssl req -x509 -newkey rsa:2048 -subj /CN=rsa.test`.
    const RSA_2048: &str = "-----BEGIN CERTIFICATE-----\n\
MIIDBjCCAe6gAwIBAgIURrJAGP+uldcWMTQdeD+p7lrA8ZcwDQYJKoZIhvcNAQEL\n\
BQAwEzERMA8GA1UEAwwIcnNhLnRlc3QwIBcNMjYxMTMwMTEzOTMyWhgPMjEyNjEx\n\
MDYxMTM5MzJaMBMxETAPBgNVBAMMCHJzYS50ZXN0MIIBIjANBgkqhkiG9w0BAQEF\n\
AAOCAQ8AMIIBCgKCAQEAo+s0YDMjiyUvGjuAfoT7DiaFhR5D3u78J5MKIKFxWjw0\n\
IJOvy0v6PjSSKs+SvQWmHWQPoLvwOgJ74v0cu0ic8fXtESilNqm1AOj4Kj9p8NfB\n\
8iSBY7BWxCmvSqAsM0TBXKRU0ZzfHd6RTIAi7Rpsb0Kf2XLcar66HgaU5mtJXDoo\n\
Gc5Xo1AGIcI2Co0CY06LvQTWWzuf+1GeFzNjyc1norj5w/bcZ19aHBTvKqGUguMS\n\
iOxgCT1+UqODhBCTZP18kj5Ghr4ztUsWs1vRSf7BMAd8MDE8tcDFyvFRKZ3GP6QR\n\
sxH5CsnmmNuBTS/SSVVOQaGAJWavVTWHL2OzZxu0+QIDAQABo1AwTjAdBgNVHQ4E\n\
FgQUsILE9xOKvu5tjaARhiyCX9waj6AwHwYDVR0jBBgwFoAUsILE9xOKvu5tjaAR\n\
hiyCX9waj6AwDAYDVR0TAQH/BAIwADANBgkqhkiG9w0BAQsFAAOCAQEAeNNhgyJs\n\
Z8h7vX7E7c5sCsoxvVmB1oIkrYB3Nb4dqMJ6TCFJPsDWpj1Pvvo1cUlqyqghyYWZ\n\
uNbf2g0RzZbObOHWej2jKsqQF9hnC2clmXO5wfcUJhUff0Y6XMWI4LOYEEva7WoL\n\
HVtB5gChddF292hEdjauq1qxwYPIN3G714or+O2/Vp2prSO6gKW8dPmC31f7iGPc\n\
uc5VqkrP46uDDtjiv4eTRhN/Kguf88JQp8DIzR5VQDou/4AwVfW3lOnFCU1eHYVj\n\
ci6oVaeha834FP7q9x9zyqYZVTGw6IsI9u/qroWnlnGG4FEaRj9GPwkh9QcuLmSk\n\
i2lZGMZMzJq4Tw==\n\
-----END CERTIFICATE-----\n\
";

    fn der(pem: &str) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem.as_bytes())
            .expect("PEM certificate")
            .to_vec()
    }

    #[test]
    fn key_types() {
        assert_eq!(key_type(&der(RSA_2048)), "RSA 2048");
        assert_eq!(key_type(b"no certificate at all"), "unknown");
        // Truncated after the identifier: the type without the size.
        let rsa = der(RSA_2048);
        let oid = [
            0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01,
        ];
        let at = rsa
            .windows(oid.len())
            .position(|w| w == oid)
            .expect("rsaEncryption in the certificate");
        assert_eq!(key_type(&rsa[..at + oid.len() + 4]), "RSA");
    }

    #[test]
    fn setup_errors_are_typed() {
        let plan = |name: &str, ca: Option<&str>| TlsPlan {
            server_name: name.into(),
            resume_ratio: 0.5,
            ca_pem: ca.map(str::to_owned),
            insecure: false,
            http2: false,
        };
        assert!(matches!(
            Connector::new(Some(&plan("not a name!", None))),
            Err(TlsSetupError::ServerName(_))
        ));
        assert!(matches!(
            Connector::new(Some(&plan("localhost", Some("no PEM here")))),
            Err(TlsSetupError::Ca(_))
        ));
        let ok = Connector::new(Some(&plan("localhost", Some(RSA_2048)))).expect("valid CA");
        assert!(ok.is_tls());
        assert!(!Connector::new(None).expect("plain").is_tls());
    }
}
