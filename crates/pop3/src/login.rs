//! The answer to a login ([`stoa_pop3_proto::Event::Auth`]): the per-address
//! throttle, the password check through the directory's [`stoa_directory::Verifier`]
//! (a remembered success on the spot, other checks in line for a bounded number of
//! blocking threads), the mailbox lock in the store on a blocking thread, and the
//! listing the session numbers from.
//!
//! Every way of getting the credentials wrong (unknown user, wrong password, a PLAIN
//! authorization identity that is not the user, an address past the throttle's
//! limit) is the same [`LoginDecision::BadCredentials`]: the client sees one
//! `-ERR [AUTH] Authentication failed`, after the throttle's delay, and cannot tell
//! which it was.

use std::sync::Arc;
use std::time::Instant;

use stoa_directory::User;
use stoa_mailstore::{MailStore, MailboxSession, StoreError};
use stoa_pop3_proto::{Credentials, Entry, Listing, LoginDecision};

use crate::conn::Conn;
use crate::proxy::{self, LoggedIn, Proxy, Refusal};
use crate::shared::Backend;

/// The outcome of credentials.
pub(crate) enum Auth {
    /// The session's answer (a store host's login, or any refusal).
    Decided(LoginDecision),
    /// The proxy logged the user in at the store host: relay from now on.
    Proxied(LoggedIn),
}

impl Conn {
    /// Checks `credentials` and, when they are right, locks and lists the mailbox
    /// (a store host) or logs in at the user's store host (the proxy).
    pub(crate) async fn on_auth(&mut self, credentials: Credentials) -> Auth {
        if let Some(refusal) = self.precheck(&credentials).await {
            return Auth::Decided(refusal);
        }
        let auth = match &self.shared.backend {
            Backend::Store(store) => {
                let store = Arc::clone(store);
                Auth::Decided(self.store_login(store, credentials).await)
            }
            Backend::Proxy(proxy) => {
                let proxy = Arc::clone(proxy);
                self.proxy_login(&proxy, credentials).await
            }
        };
        // The check is over; a failure has counted itself already.
        self.attempt = None;
        auth
    }

    /// The refusal when `credentials` cannot be checked at all: a PLAIN identity
    /// acting for another, an address past the throttle's limit.
    async fn precheck(&mut self, credentials: &Credentials) -> Option<LoginDecision> {
        let Credentials {
            authzid,
            username: user,
            ..
        } = credentials;
        let peer = self.peer;
        if authzid.as_ref().is_some_and(|z| z != user) {
            tracing::info!("{peer}: login as {user:?} for {authzid:?} refused (no proxy logins)");
            return Some(self.failed());
        }
        // Counted until the check ends (`failed`, or dropped on success), so
        // logins sent at once cannot all be checked before the first failure counts.
        match self.shared.throttle.begin(peer.ip()).await {
            Ok(attempt) => {
                self.attempt = Some(attempt);
                None
            }
            Err(delay) => {
                tracing::info!("{peer}: login as {user:?} refused unchecked: too many failures");
                self.login_delay = Some(delay);
                Some(LoginDecision::BadCredentials)
            }
        }
    }

    /// The proxy's login: the password checked in the directory, then the session
    /// opened at the user's store host.
    async fn proxy_login(&mut self, proxy: &Proxy, credentials: Credentials) -> Auth {
        let peer = self.peer;
        let Credentials {
            username: user,
            password,
            ..
        } = credentials;
        let found = match self.shared.verifier.verify(&user, &password).await {
            Ok(Some(found)) => found,
            Ok(None) => {
                tracing::info!("{peer}: login as {user:?} failed");
                return Auth::Decided(self.failed());
            }
            Err(e) => {
                tracing::error!("{peer}: password check for {user:?} failed: {e}");
                return Auth::Decided(LoginDecision::TemporaryFailure);
            }
        };
        let Some(host) = found.mail_host.as_deref() else {
            tracing::warn!(
                "{peer}: {}: no mailHost, no store host to proxy to",
                found.address
            );
            return Auth::Decided(LoginDecision::PermanentFailure);
        };
        match proxy::login(proxy, host, &found.address, &password, peer).await {
            Ok(session) => {
                tracing::info!("{peer}: {} logged in, proxied to {host}", found.address);
                Auth::Proxied(session)
            }
            Err(Refusal::InUse) => {
                tracing::info!("{peer}: {}: mailbox in use on {host}", found.address);
                Auth::Decided(LoginDecision::InUse)
            }
            Err(Refusal::LoginDelay) => Auth::Decided(LoginDecision::LoginDelay),
            Err(Refusal::Temporary(why)) => {
                tracing::warn!("{peer}: {}: store host {host}: {why}", found.address);
                Auth::Decided(LoginDecision::TemporaryFailure)
            }
        }
    }

    /// A store host's login: the password, then the mailbox locked and listed.
    async fn store_login(
        &mut self,
        store: Arc<MailStore>,
        credentials: Credentials,
    ) -> LoginDecision {
        let Credentials {
            username: user,
            password,
            ..
        } = credentials;
        let peer = self.peer;
        let found = match self.shared.verifier.verify(&user, &password).await {
            Ok(Some(found)) => found,
            Ok(None) => {
                tracing::info!("{peer}: login as {user:?} failed");
                return self.failed();
            }
            Err(e) => {
                tracing::error!("{peer}: password check for {user:?} failed: {e}");
                return LoginDecision::TemporaryFailure;
            }
        };
        if let Some(host) = &found.mail_host {
            tracing::warn!("{peer}: {user}: the mailbox is on {host}, not here");
            return LoginDecision::PermanentFailure;
        }
        let mailbox = found.mailbox;
        match tokio::task::spawn_blocking(move || store.open_mailbox(mailbox)).await {
            Ok(Ok(mailbox)) => self.opened(&found, mailbox),
            Ok(Err(StoreError::Locked(_))) => {
                tracing::info!("{peer}: {user}: mailbox in use by another session");
                LoginDecision::InUse
            }
            Ok(Err(e)) => {
                tracing::error!("{peer}: {user}: cannot open the mailbox: {e}");
                LoginDecision::TemporaryFailure
            }
            Err(e) => {
                tracing::error!("{peer}: login task failed: {e}");
                LoginDecision::TemporaryFailure
            }
        }
    }

    /// Counts a failure against the client's address and sets the delay of the
    /// `-ERR [AUTH]` that follows.
    fn failed(&mut self) -> LoginDecision {
        let now = Instant::now();
        let delay = match self.attempt.take() {
            Some(attempt) => attempt.failed(now),
            None => self.shared.throttle.record_failure(self.peer.ip(), now),
        };
        self.login_delay = Some(delay);
        LoginDecision::BadCredentials
    }

    /// The listing of a freshly locked mailbox; the session keeps the mailbox.
    fn opened(&mut self, user: &User, mailbox: MailboxSession) -> LoginDecision {
        let entries = mailbox
            .messages()
            .iter()
            .map(|m| Entry {
                size: m.size,
                uid: m.uid.as_str().to_owned(),
            })
            .collect();
        match Listing::new(entries) {
            Ok(listing) => {
                tracing::info!(
                    "{}: {} logged in ({} messages)",
                    self.peer,
                    user.address,
                    listing.len()
                );
                self.mailbox = Some(Arc::new(mailbox));
                LoginDecision::Accept(listing)
            }
            Err(e) => {
                tracing::error!("{}: {}: unusable listing: {e}", self.peer, user.address);
                LoginDecision::TemporaryFailure
            }
        }
    }
}
