//! The LMTP client (RFC 2033): mail for users whose `mailHost` is another store
//! host leaves the queue over LMTP, one outcome per recipient.
//!
//! A host's LMTP address is its `[[mail_host]]` entry ([`crate::config::MailHost`])
//! or, without one, the host name itself on port 24 (the port RFC 2033 leaves to
//! local choice and IANA lists for LMTP), resolved by the system resolver at every
//! new connection: the queue has no DNS client of its own.
//!
//! The conversation is LHLO, `MAIL` (with `SIZE` when offered), one `RCPT` per
//! recipient, `DATA`, the message (normalised as for the relay), then one reply per
//! accepted recipient: each is that recipient's outcome, so a `451` for one and a
//! `550` for another are retried and bounced separately. Every step has a deadline
//! (the relay's timeouts); a connection that breaks leaves every recipient not yet
//! answered for a temporary failure.
//!
//! Connections are reused: after a transaction the connection goes back to a small
//! per-host pool ([`crate::config::QueueConfig::lmtp_max_idle`]) and is taken by
//! the next message for the same host within the idle timeout. A pooled connection
//! the server has closed meanwhile (an error or a `421` at `MAIL`, before anything
//! is committed) is replaced by a fresh one for the same message. The pool bounds
//! idle connections only; connections in use are bounded by the queue's
//! `max_deliveries`.

use std::collections::HashMap;
use std::io;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use stoa_directory::normalize_host;

use super::wire::{Client, Outcome, answer_unanswered, mail_from, normalise};
use crate::config::{MailHost, QueueConfig};

/// The LMTP port used for a host without a `[[mail_host]]` entry (RFC 2033 §4
/// leaves the port to local agreement; 24 is the IANA registration).
pub const DEFAULT_LMTP_PORT: u16 = 24;

/// The store hosts, their addresses and the pool of open connections.
#[derive(Debug)]
pub(crate) struct Lmtp {
    /// Lowercase host name (no trailing dot) to `HOST:PORT`.
    routes: HashMap<String, String>,
    helo: String,
    connect_timeout: Duration,
    command_timeout: Duration,
    data_timeout: Duration,
    idle_timeout: Duration,
    max_idle: usize,
    /// Idle connections per address, most recent last.
    pool: Mutex<HashMap<String, Vec<Idle>>>,
}

/// An open connection after LHLO.
#[derive(Debug)]
struct Session {
    client: Client,
    /// Whether the server offers `SIZE`.
    size: bool,
}

/// A pooled connection and since when it waits.
#[derive(Debug)]
struct Idle {
    session: Session,
    since: Instant,
}

impl Lmtp {
    /// The client for `hosts`, saying `helo` in LHLO, with `queue`'s timeouts.
    pub(crate) fn new(hosts: &[MailHost], helo: &str, queue: &QueueConfig) -> Lmtp {
        let routes = hosts
            .iter()
            .filter_map(|h| Some((normalize_host(&h.name), h.lmtp.clone()?)))
            .collect();
        Lmtp {
            routes,
            helo: helo.to_owned(),
            connect_timeout: queue.relay_connect_timeout,
            command_timeout: queue.relay_command_timeout,
            data_timeout: queue.relay_data_timeout,
            idle_timeout: queue.lmtp_idle_timeout,
            max_idle: queue.lmtp_max_idle,
            pool: Mutex::new(HashMap::new()),
        }
    }

    /// Where `host`'s LMTP server listens: its entry, or the name on port 24.
    pub(crate) fn address(&self, host: &str) -> String {
        let host = normalize_host(host);
        match self.routes.get(&host) {
            Some(addr) => addr.clone(),
            None => format!("{host}:{DEFAULT_LMTP_PORT}"),
        }
    }

    /// Delivers `message` from `sender` (empty for `<>`) to `recipients` on
    /// `host`; one outcome per recipient, in order.
    pub(crate) async fn send(
        &self,
        host: &str,
        sender: &str,
        recipients: &[String],
        message: &[u8],
    ) -> Vec<Outcome> {
        let addr = self.address(host);
        let mut outcomes: Vec<Option<Outcome>> = vec![None; recipients.len()];
        let result = self
            .transaction(&addr, sender, recipients, message, &mut outcomes)
            .await;
        let fallback = match result {
            Ok(()) => Outcome::Temporary("4.0.0".into(), "no reply".into()),
            Err(e) => Outcome::Temporary(
                "4.4.2".into(),
                format!("LMTP to {host} ({addr}) failed: {e}"),
            ),
        };
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| fallback.clone()))
            .collect()
    }

    /// One transaction; fills `outcomes` as replies come, and pools the
    /// connection when it ends cleanly.
    async fn transaction(
        &self,
        addr: &str,
        sender: &str,
        recipients: &[String],
        message: &[u8],
        outcomes: &mut [Option<Outcome>],
    ) -> io::Result<()> {
        let t = self.command_timeout;
        let (mut s, reply) = match self.mail(addr, sender, message).await? {
            Ok(started) => started,
            Err(refused) => {
                answer_unanswered(outcomes, &refused);
                return Ok(());
            }
        };
        if reply.code != 250 {
            answer_unanswered(outcomes, &reply.failure(&s.client.host));
            return self.reset_and_pool(addr, s).await;
        }
        let accepted = s.client.recipients(recipients, t, outcomes).await?;
        if accepted.is_empty() {
            return self.reset_and_pool(addr, s).await;
        }
        let reply = s.client.command("DATA", t).await?;
        if reply.code != 354 {
            let failure = reply.failure(&s.client.host);
            for &i in &accepted {
                outcomes[i] = Some(failure.clone());
            }
            return self.reset_and_pool(addr, s).await;
        }
        s.client
            .send(&normalise(message), self.data_timeout)
            .await?;
        // RFC 2033 §4.2: one reply per accepted recipient, in RCPT order.
        for &i in &accepted {
            let reply = s.client.reply(self.data_timeout).await?;
            outcomes[i] = Some(reply.outcome(&s.client.host));
        }
        self.put(addr, s);
        Ok(())
    }

    /// A session (pooled, or new) and the reply to `MAIL`, or the outcome for
    /// everyone when the server refuses the connection.
    async fn mail(
        &self,
        addr: &str,
        sender: &str,
        message: &[u8],
    ) -> io::Result<Result<(Session, super::wire::Reply), Outcome>> {
        let t = self.command_timeout;
        if let Some(mut s) = self.take(addr) {
            match s
                .client
                .command(&mail_from(sender, s.size, message), t)
                .await
            {
                Ok(reply) if reply.code != 421 => return Ok(Ok((s, reply))),
                // Closed while idle (a `421` is the server's goodbye, sent when
                // its session timer ran out): nothing that counts was sent, so
                // start afresh.
                Ok(reply) => tracing::debug!("LMTP {addr}: pooled connection closed: {reply}"),
                Err(e) => tracing::debug!("LMTP {addr}: pooled connection lost: {e}"),
            }
        }
        let mut s = match self.open(addr).await? {
            Ok(s) => s,
            Err(refused) => return Ok(Err(refused)),
        };
        let reply = s
            .client
            .command(&mail_from(sender, s.size, message), t)
            .await?;
        Ok(Ok((s, reply)))
    }

    /// Connects, reads the greeting and says LHLO.
    async fn open(&self, addr: &str) -> io::Result<Result<Session, Outcome>> {
        let t = self.command_timeout;
        let mut client = Client::connect(addr, self.connect_timeout).await?;
        let greeting = client.reply(t).await?;
        if greeting.code != 220 {
            // A refusing greeting is temporary whatever its code, as for the relay.
            let diagnostic = format!(
                "host {addr} refused the connection: {} {}",
                greeting.code,
                greeting.text()
            );
            return Ok(Err(Outcome::Temporary("4.4.2".into(), diagnostic)));
        }
        let lhlo = client.command(&format!("LHLO {}", self.helo), t).await?;
        if lhlo.code != 250 {
            return Ok(Err(lhlo.failure(addr)));
        }
        Ok(Ok(Session {
            size: lhlo.offers("SIZE"),
            client,
        }))
    }

    /// `RSET` after a refused transaction, then back to the pool.
    async fn reset_and_pool(&self, addr: &str, mut s: Session) -> io::Result<()> {
        let reply = s.client.command("RSET", self.command_timeout).await?;
        if reply.code == 250 {
            self.put(addr, s);
        }
        Ok(())
    }

    /// The most recent idle connection to `addr` that has not waited too long.
    fn take(&self, addr: &str) -> Option<Session> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        let idle = pool.get_mut(addr)?;
        while let Some(entry) = idle.pop() {
            if entry.since.elapsed() < self.idle_timeout {
                return Some(entry.session);
            }
        }
        None
    }

    /// Keeps `s` for the next message to `addr`, if the pool has room; drops
    /// every connection that has waited past the idle timeout.
    fn put(&self, addr: &str, s: Session) {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        for idle in pool.values_mut() {
            idle.retain(|e| e.since.elapsed() < self.idle_timeout);
        }
        let idle = pool.entry(addr.to_owned()).or_default();
        if idle.len() < self.max_idle {
            idle.push(Idle {
                session: s,
                since: Instant::now(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_hosts_then_port_24() {
        let hosts = [MailHost {
            name: "Store-B.stoa.test.".into(),
            lmtp: Some("127.0.0.1:2401".into()),
            pop3: Some("127.0.0.1:1101".into()),
            imap: None,
        }];
        let lmtp = Lmtp::new(&hosts, "mx.stoa.test", &QueueConfig::default());
        assert_eq!(lmtp.address("store-b.STOA.test"), "127.0.0.1:2401");
        assert_eq!(lmtp.address("store-c.stoa.test."), "store-c.stoa.test:24");
    }
}
