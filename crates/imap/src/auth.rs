//! LOGIN and AUTHENTICATE PLAIN: the TLS rule, the per-address throttle (shared
//! with POP3 and SMTP AUTH), the password check through the directory, then a
//! store host's login (the per-user session limit, the folder list made at first
//! login) or the proxy's (the session handed to the user's store host).
//!
//! Every way of getting the credentials wrong is the same
//! `NO [AUTHENTICATIONFAILED]`, after the throttle's delay.

use std::io;
use std::sync::Arc;
use std::time::Instant;

use stoa_imap_proto::command::auth_response;
use stoa_imap_proto::response::{self, Code, Condition};
use stoa_imap_proto::state::State;
use stoa_mail_proto::sasl;

use crate::conn::{Conn, Flow, User, blocking};
use crate::proxy;
use crate::shared::Backend;

impl Conn {
    /// `AUTHENTICATE mechanism [initial-response]`: PLAIN only.
    pub(crate) async fn authenticate(
        &mut self,
        tag: &str,
        mechanism: &str,
        initial: Option<Vec<u8>>,
    ) -> io::Result<Flow> {
        if mechanism != "PLAIN" {
            return Ok(self.no(tag, &Code::Cannot, "Unsupported mechanism"));
        }
        if !self.password_allowed() {
            return self.refuse_plaintext(tag);
        }
        let message = match initial {
            Some(message) => message,
            None => {
                response::write_continuation(self.io.out(), "");
                match self.read_line(auth_response).await? {
                    None => return Ok(Flow::Close),
                    Some(Ok(message)) => message,
                    Some(Err(e)) => {
                        response::write_tagged(self.io.out(), tag, Condition::Bad, None, e.text());
                        return Ok(Flow::Continue);
                    }
                }
            }
        };
        match sasl::plain(&message) {
            Ok(credentials) => {
                if credentials
                    .authzid
                    .as_ref()
                    .is_some_and(|z| *z != credentials.username)
                {
                    tracing::info!("{}: login for another identity refused", self.peer);
                    let delay = self
                        .shared
                        .throttle
                        .record_failure(self.peer.ip(), Instant::now());
                    return self.refuse_after(tag, delay, "AUTHENTICATE").await;
                }
                self.login(
                    tag,
                    credentials.username,
                    credentials.password,
                    Some("AUTHENTICATE"),
                )
                .await
            }
            Err(_) => {
                response::write_tagged(
                    self.io.out(),
                    tag,
                    Condition::Bad,
                    None,
                    "Invalid PLAIN message",
                );
                Ok(Flow::Continue)
            }
        }
    }

    /// `ID` from a trusted proxy naming its client (`"x-originating-ip"`,
    /// `"x-originating-port"`), once, before the login: the client's address is
    /// the session's from now on (the per-address count, the throttle, the log),
    /// and the connection counts as secure. From anyone else, or without the
    /// fields, the ID is only answered. `Some(flow)` when the session must end
    /// (the client's address has too many connections).
    pub(crate) fn forward(&mut self, fields: Option<&[(String, Option<String>)]>) -> Option<Flow> {
        if self.forwarded
            || self.state.is_authenticated()
            || !self.shared.is_trusted_proxy(self.peer.ip())
        {
            return None;
        }
        let value = |name: &str| {
            let fields = fields?;
            let (_, value) = fields.iter().find(|(k, _)| k.eq_ignore_ascii_case(name))?;
            value.as_deref()
        };
        let ip: std::net::IpAddr = value("x-originating-ip")?.parse().ok()?;
        let port = value("x-originating-port").and_then(|p| p.parse().ok());
        let client = std::net::SocketAddr::new(ip, port.unwrap_or(0));
        tracing::info!("{}: proxy for {client}", self.peer);
        let slot = self.shared.clients.enter(ip);
        self.peer = client;
        self.forwarded = true;
        if slot.over_limit() {
            tracing::info!("{client}: too many connections from this address");
            response::write_bye(
                self.io.out(),
                Some(&Code::Limit),
                "Too many connections from your address",
            );
            return Some(Flow::Close);
        }
        // The count moves from the proxy's address to the client's.
        self.slot = slot;
        None
    }

    /// `tag NO [code] text`; the session goes on.
    fn no(&mut self, tag: &str, code: &Code, text: &str) -> Flow {
        response::write_tagged(self.io.out(), tag, Condition::No, Some(code), text);
        Flow::Continue
    }

    fn refuse_plaintext(&mut self, tag: &str) -> io::Result<Flow> {
        response::write_tagged(
            self.io.out(),
            tag,
            Condition::No,
            Some(&Code::PrivacyRequired),
            "Use TLS (STARTTLS or port 993) to log in",
        );
        Ok(Flow::Continue)
    }

    /// `LOGIN user password` (and the end of AUTHENTICATE).
    pub(crate) async fn login(
        &mut self,
        tag: &str,
        username: String,
        password: String,
        command: Option<&str>,
    ) -> io::Result<Flow> {
        let command = command.unwrap_or("LOGIN");
        if !self.password_allowed() {
            return self.refuse_plaintext(tag);
        }
        let peer = self.peer;
        // Counted until the check ends, so logins sent at once cannot all be
        // checked before the first failure counts.
        let attempt = match self.shared.throttle.begin(peer.ip()).await {
            Ok(attempt) => attempt,
            Err(delay) => {
                tracing::info!(
                    "{peer}: login as {username:?} refused unchecked: too many failures"
                );
                return self.refuse_after(tag, delay, command).await;
            }
        };
        let found = match self.shared.verifier.verify(&username, &password).await {
            Ok(Some(found)) => {
                attempt.succeeded();
                found
            }
            Ok(None) => {
                tracing::info!("{peer}: login as {username:?} failed");
                let delay = attempt.failed(Instant::now());
                return self.refuse_after(tag, delay, command).await;
            }
            Err(e) => {
                tracing::error!("{peer}: password check for {username:?} failed: {e}");
                return Ok(self.no(tag, &Code::Unavailable, "Try again later"));
            }
        };
        let (store, watchers) = match &self.shared.backend {
            Backend::Store { store, watchers } => (Arc::clone(store), Arc::clone(watchers)),
            Backend::Proxy(proxy) => {
                let proxy = Arc::clone(proxy);
                return self.proxy_login(tag, &proxy, found, &password).await;
            }
        };
        if let Some(host) = &found.mail_host {
            tracing::warn!("{peer}: {username}: the mailbox is on {host}, not here");
            return Ok(self.no(tag, &Code::Unavailable, "Your mailbox is on another server"));
        }
        let limit = self.shared.config.limits.max_sessions_per_user;
        let Some(watch) = watchers.enter(found.mailbox, limit) else {
            tracing::info!("{peer}: {}: too many sessions", found.address);
            return Ok(self.no(tag, &Code::Limit, "Too many sessions for this user"));
        };
        // The first login makes the folder list (INBOX and the special-use set).
        let mailbox = found.mailbox;
        let list_store = Arc::clone(&store);
        if let Err(e) = blocking(&self.shared, move || list_store.folder_list(mailbox)).await? {
            tracing::error!(
                "{peer}: {}: cannot read the folder list: {e}",
                found.address
            );
            return Ok(self.no(tag, &Code::ServerBug, "Mailbox unavailable"));
        }
        tracing::info!("{peer}: {} logged in", found.address);
        self.user = Some(User {
            address: found.address,
            mailbox,
            store,
            watch,
        });
        self.state = State::Authenticated;
        let caps = Code::Capability(self.capabilities());
        let text = format!("{command} completed");
        response::write_tagged(self.io.out(), tag, Condition::Ok, Some(&caps), &text);
        Ok(Flow::Continue)
    }

    /// The proxy's login: the password was right; the session goes to the user's
    /// store host, or the client is told to try again later.
    async fn proxy_login(
        &mut self,
        tag: &str,
        proxy: &proxy::Proxy,
        found: stoa_directory::User,
        password: &str,
    ) -> io::Result<Flow> {
        let peer = self.peer;
        let unavailable = "Your mail server is unavailable, try again later";
        let Some(host) = found.mail_host.as_deref() else {
            tracing::warn!(
                "{peer}: {}: no mailHost, no store host to proxy to",
                found.address
            );
            return Ok(self.no(tag, &Code::Unavailable, unavailable));
        };
        match proxy::login(proxy, host, &found.address, password, peer).await {
            Ok(session) => {
                tracing::info!("{peer}: {} logged in, proxied to {host}", found.address);
                self.proxied = Some((tag.to_owned(), session));
                Ok(Flow::Relay)
            }
            Err(why) => {
                tracing::warn!("{peer}: {}: store host {host}: {why}", found.address);
                Ok(self.no(tag, &Code::Unavailable, unavailable))
            }
        }
    }

    /// A refused login, answered after `delay`; the connection closes after too
    /// many.
    async fn refuse_after(
        &mut self,
        tag: &str,
        delay: std::time::Duration,
        command: &str,
    ) -> io::Result<Flow> {
        self.flush().await?;
        let draining = tokio::select! {
            () = tokio::time::sleep(delay) => false,
            () = self.shutdown.wait() => true,
        };
        let text = format!("{command} failed: authentication failed");
        let out = self.io.out();
        response::write_tagged(
            out,
            tag,
            Condition::No,
            Some(&Code::AuthenticationFailed),
            &text,
        );
        self.failed_logins += 1;
        if draining {
            response::write_bye(
                self.io.out(),
                Some(&Code::Unavailable),
                "Server shutting down",
            );
            return Ok(Flow::Close);
        }
        if self.failed_logins >= self.shared.config.limits.max_failed_logins {
            response::write_bye(self.io.out(), None, "Too many failed logins");
            return Ok(Flow::Close);
        }
        Ok(Flow::Continue)
    }
}
