//! SMTP's side of a connection: the listener kinds, the transaction a connection
//! builds (sender, recipients, the message being spooled into the queue), and the
//! [`Policy`] the shared driver (`driver.rs`) calls: the answers themselves are in
//! `policy.rs`.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use stoa_smtp_proto::session::{Config as SessionConfig, Credentials};
use stoa_smtp_proto::{Decision, ForwardPath, ReversePath};

use crate::config::Limits;
use crate::driver::{self, Policy};
use crate::metrics::Dialect;
use crate::queue::{Recipient, Spool};
use crate::shared::Shared;

/// One SMTP connection.
pub(crate) type Conn = driver::Conn<Shared>;

/// What the listener is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Mail exchange: anyone may send to local users.
    Mx,
    /// Submission: MAIL only after AUTH.
    Submission,
}

/// The mail transaction under way.
#[derive(Debug, Default)]
pub(crate) struct Txn {
    pub(crate) from: Option<ReversePath>,
    /// The authenticated user owns `from` (checked at the first RCPT).
    pub(crate) sender_owned: bool,
    pub(crate) recipients: Vec<Recipient>,
    /// The accepted RCPT addresses, as given.
    pub(crate) accepted: Vec<String>,
    pub(crate) spool: Option<Spool>,
}

impl Txn {
    /// Adds a recipient unless the same one is already there.
    pub(crate) fn add(&mut self, recipient: Recipient) {
        let dup = self
            .recipients
            .iter()
            .any(|r| r.address == recipient.address && r.route == recipient.route);
        if !dup {
            self.recipients.push(recipient);
        }
    }
}

/// SMTP queues the message once and answers the final dot once.
impl Policy for Shared {
    type Kind = Kind;
    type Txn = Txn;
    type Decisions = std::iter::Once<Decision>;

    const NAME: &'static str = "SMTP";
    const LOG_PREFIX: &'static str = "";
    const DIALECT: Dialect = Dialect::Smtp;

    fn session_config(&self, kind: &Kind) -> Arc<SessionConfig> {
        match kind {
            Kind::Mx => Arc::clone(&self.mx),
            Kind::Submission => Arc::clone(&self.submission),
        }
    }

    fn limits(&self) -> &Limits {
        &self.config.limits
    }

    fn grace(&self) -> Duration {
        self.config.shutdown_grace
    }

    fn tls(&self) -> Option<&tokio_rustls::TlsAcceptor> {
        self.tls.as_ref()
    }

    fn message_data(txn: &mut Txn, data: &[u8]) {
        if let Some(spool) = &mut txn.spool {
            spool.write(data);
        }
    }

    fn received(txn: &Txn) -> u64 {
        txn.spool.as_ref().map_or(0, Spool::len)
    }

    fn drop_message(conn: &mut Conn) {
        conn.discard_spool();
    }

    fn on_mail(conn: &mut Conn, from: ReversePath) -> Decision {
        conn.on_mail(from)
    }

    fn on_rcpt(conn: &mut Conn, to: ForwardPath) -> impl Future<Output = Decision> + Send {
        conn.on_rcpt(to)
    }

    fn on_data(conn: &mut Conn) -> Decision {
        conn.on_data()
    }

    async fn on_end(conn: &mut Conn) -> Self::Decisions {
        std::iter::once(conn.on_end().await)
    }

    fn on_auth(conn: &mut Conn, credentials: Credentials) -> impl Future<Output = Decision> + Send {
        conn.on_auth(credentials)
    }
}

impl Conn {
    /// Throws away the message being spooled, if any.
    pub(crate) fn discard_spool(&mut self) {
        if let Some(spool) = self.txn.spool.take() {
            self.shared.queue.discard(spool);
        }
    }

    /// Whether the client's address is in a trusted network.
    pub(crate) fn trusted(&self) -> bool {
        let ip = self.peer.ip();
        self.shared
            .config
            .trusted_networks
            .iter()
            .any(|net| net.contains(&ip))
    }
}
