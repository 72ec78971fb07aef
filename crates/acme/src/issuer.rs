//! One ACME order, from the account to the stored certificate (RFC 8555 §7).

use std::path::PathBuf;
use std::time::Duration;

use instant_acme::{
    Account, AccountBuilder, AuthorizationStatus, ChallengeType, ExternalAccountKey, Identifier,
    NewAccount, NewOrder, OrderStatus, RetryPolicy,
};
use tracing::{debug, info};

use crate::http01::Http01;
use crate::store::{Certificate, Store, StoreError};

/// What to obtain, from where, as whom.
#[derive(Clone, Debug)]
pub struct Config {
    /// The CA's directory URL (Let's Encrypt's production one, say).
    pub directory_url: String,
    /// The account's contact URIs (`mailto:hostmaster@example.org`).
    pub contact: Vec<String>,
    /// The certificate's domains; the first one names it in the [`Store`].
    pub domains: Vec<String>,
    /// External account binding, for CAs that require one (RFC 8555 §7.3.4).
    pub eab: Option<Eab>,
    /// A PEM root to trust for the CA's own HTTPS instead of the system's
    /// (a test CA such as pebble).
    pub root_pem: Option<PathBuf>,
    /// How long to wait for the CA to validate the order, and again for it to
    /// issue the certificate.
    pub timeout: Duration,
}

impl Config {
    /// A configuration for `domains` at `directory_url`: no contact, no
    /// external account binding, the system's roots, two minutes per wait.
    pub fn new(directory_url: impl Into<String>, domains: Vec<String>) -> Self {
        Self {
            directory_url: directory_url.into(),
            contact: Vec::new(),
            domains,
            eab: None,
            root_pem: None,
            timeout: Duration::from_secs(120),
        }
    }
}

/// External account binding credentials, as the CA hands them out.
#[derive(Clone)]
pub struct Eab {
    /// The key identifier.
    pub kid: String,
    /// The MAC key (decoded from the CA's base64url).
    pub hmac_key: Vec<u8>,
}

impl std::fmt::Debug for Eab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Eab")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

/// Why a certificate could not be obtained.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The CA refused or failed a request, or could not be reached.
    #[error("ACME: {0}")]
    Acme(#[from] instant_acme::Error),
    /// The state directory could not be read or written.
    #[error("ACME state: {0}")]
    Store(#[from] StoreError),
    /// The configuration names no domain.
    #[error("no domain to obtain a certificate for")]
    NoDomains,
    /// The CA offers no HTTP-01 challenge for a domain.
    #[error("the CA offers no http-01 challenge for {domain}")]
    NoHttp01 {
        /// The domain.
        domain: String,
    },
    /// An authorization is in a state no challenge can change.
    #[error("the authorization for {domain} is {status:?}")]
    Authorization {
        /// The domain.
        domain: String,
        /// Its status.
        status: AuthorizationStatus,
    },
    /// The order did not become ready (a failed validation, usually).
    #[error("the order is {status:?}: {problems}")]
    Order {
        /// Its status.
        status: OrderStatus,
        /// The problems the authorizations report, if the CA said.
        problems: String,
    },
    /// The stored account belongs to another CA than the configured one. Not
    /// replaced on its own: a new account would overwrite the old key (and an
    /// account re-created in a loop runs into the CA's rate limits). Remove
    /// `account.json` to register with the new CA.
    #[error("the stored ACME account is at {stored}, not at {configured}")]
    AccountElsewhere {
        /// The stored account's directory URL.
        stored: String,
        /// The configured directory URL.
        configured: String,
    },
    /// The certificate's key or CSR could not be made.
    #[error("certificate request: {0}")]
    Csr(#[from] rcgen::Error),
    /// The certificate was stored but cannot be read back.
    #[error("the issued certificate was not stored")]
    NotStored,
    /// A blocking task panicked or was cancelled.
    #[error("blocking task: {0}")]
    Join(#[from] tokio::task::JoinError),
}

/// Withdraws the published HTTP-01 answers when dropped, whichever way
/// `obtain` ends (success, error or cancellation).
struct Published<'a> {
    http01: &'a Http01,
    tokens: Vec<String>,
}

impl Drop for Published<'_> {
    fn drop(&mut self) {
        for token in &self.tokens {
            self.http01.remove(token);
        }
    }
}

fn builder(config: &Config) -> Result<AccountBuilder, Error> {
    Ok(match &config.root_pem {
        Some(pem) => Account::builder_with_root(pem)?,
        None => Account::builder()?,
    })
}

/// The stored account, or a new one (terms of service agreed) stored first.
async fn account(config: &Config, store: &Store) -> Result<Account, Error> {
    let stored = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || store.load_account()).await??
    };
    if let Some(credentials) = stored {
        // The credentials are opaque, but serialize their directory URL.
        let stored = serde_json::to_value(&credentials)
            .ok()
            .and_then(|v| v.get("directory")?.as_str().map(str::to_owned));
        if let Some(stored) = stored.filter(|s| *s != config.directory_url) {
            return Err(Error::AccountElsewhere {
                stored,
                configured: config.directory_url.clone(),
            });
        }
        debug!(dir = %store.dir().display(), "ACME account loaded");
        return Ok(builder(config)?.from_credentials(credentials).await?);
    }
    let contact: Vec<&str> = config.contact.iter().map(String::as_str).collect();
    let eab = config
        .eab
        .as_ref()
        .map(|eab| ExternalAccountKey::new(eab.kid.clone(), &eab.hmac_key));
    let (account, credentials) = builder(config)?
        .create(
            &NewAccount {
                contact: &contact,
                terms_of_service_agreed: true,
                only_return_existing: false,
            },
            config.directory_url.clone(),
            eab.as_ref(),
        )
        .await?;
    let store = store.clone();
    tokio::task::spawn_blocking(move || store.save_account(&credentials)).await??;
    info!(id = account.id(), "ACME account created");
    Ok(account)
}

/// Obtains a certificate for `config.domains` by HTTP-01, stores it under its
/// first domain and returns it as stored.
///
/// The account comes from `store` (created and stored when there is none).
/// Each authorization's answer is published in `http01` for the CA to fetch
/// (so the HTTP listener must answer from it on port 80) and withdrawn again
/// before this returns. The certificate's key is a new ECDSA P-256 key. Nothing
/// is stored unless the CA issues the certificate.
pub async fn obtain(config: &Config, store: &Store, http01: &Http01) -> Result<Certificate, Error> {
    let Some(name) = config.domains.first() else {
        return Err(Error::NoDomains);
    };
    let account = account(config, store).await?;
    let identifiers: Vec<Identifier> = config
        .domains
        .iter()
        .map(|d| Identifier::Dns(d.clone()))
        .collect();
    let mut order = account.new_order(&NewOrder::new(&identifiers)).await?;
    debug!(url = order.url(), "ACME order created");

    let mut published = Published {
        http01,
        tokens: Vec::new(),
    };
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let mut authz = authz?;
        let domain = authz.identifier().to_string();
        match authz.status {
            AuthorizationStatus::Pending => {}
            AuthorizationStatus::Valid => continue,
            status => return Err(Error::Authorization { domain, status }),
        }
        let Some(mut challenge) = authz.challenge(ChallengeType::Http01) else {
            return Err(Error::NoHttp01 { domain });
        };
        let token = challenge.token.clone();
        if !http01.publish(&token, challenge.key_authorization().as_str()) {
            return Err(Error::NoHttp01 { domain });
        }
        published.tokens.push(token);
        challenge.set_ready().await?;
        debug!(%domain, "ACME http-01 challenge ready");
    }

    let retry = RetryPolicy::new()
        .initial_delay(Duration::from_millis(250))
        .backoff(1.5)
        .timeout(config.timeout);
    let status = order.poll_ready(&retry).await?;
    if status != OrderStatus::Ready {
        return Err(Error::Order {
            status,
            problems: problems(&mut order).await,
        });
    }
    drop(published);

    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let mut params = rcgen::CertificateParams::new(config.domains.clone())?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    let csr = params.serialize_request(&key)?;
    order.finalize_csr(csr.der()).await?;
    let chain = order.poll_certificate(&retry).await?;

    let store = store.clone();
    let name = name.clone();
    let key_pem = key.serialize_pem();
    let cert = tokio::task::spawn_blocking(move || {
        store.save_cert(&name, &chain, &key_pem)?;
        store.load_cert(&name)
    })
    .await??
    .ok_or(Error::NotStored)?;
    info!(domains = ?config.domains, "ACME certificate obtained");
    Ok(cert)
}

/// The authorizations' error details, for an order that failed.
async fn problems(order: &mut instant_acme::Order) -> String {
    let mut out = Vec::new();
    let mut authorizations = order.authorizations();
    while let Some(authz) = authorizations.next().await {
        let Ok(authz) = authz else { continue };
        let domain = authz.identifier().to_string();
        for challenge in &authz.challenges {
            if let Some(error) = &challenge.error {
                out.push(format!("{domain}: {error}"));
            }
        }
    }
    if out.is_empty() {
        "no detail".to_owned()
    } else {
        out.join("; ")
    }
}
