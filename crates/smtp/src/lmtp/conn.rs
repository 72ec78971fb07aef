//! LMTP's side of a connection: the transaction it builds (the accepted recipients
//! in RCPT order, the message in memory) and the [`Policy`] the shared driver
//! (`driver.rs`) calls, with SMTP's loop and deadlines. The difference is the end
//! of a message: the store is written first (`deliver.rs`), then the driver hands
//! the session one decision per accepted recipient, each giving its reply.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use stoa_directory::User;
use stoa_smtp_proto::session::{Config as SessionConfig, Credentials};
use stoa_smtp_proto::{Decision, ForwardPath, Reply, ReversePath};

use super::server::Shared;
use crate::config::Limits;
use crate::driver::{self, Policy};
use crate::metrics::Dialect;

/// One LMTP connection.
pub(super) type Conn = driver::Conn<Shared>;

/// One accepted RCPT: the address as the client gave it (for the reply) and the
/// local users it resolved to.
#[derive(Debug)]
pub(super) struct Rcpt {
    pub(super) address: String,
    pub(super) users: Vec<User>,
}

/// The mail transaction under way.
#[derive(Debug, Default)]
pub(crate) struct Txn {
    pub(super) from: Option<ReversePath>,
    /// Every accepted RCPT, duplicates included: each gets its own reply.
    pub(super) rcpts: Vec<Rcpt>,
    /// The message: the `Received:` field, then the data (at most the size limit:
    /// the decoder hands out nothing beyond it).
    pub(super) message: Vec<u8>,
}

/// LMTP stores the message, then answers once per accepted recipient.
impl Policy for Shared {
    type Kind = ();
    type Txn = Txn;
    type Decisions = std::vec::IntoIter<Decision>;

    const NAME: &'static str = "LMTP";
    const LOG_PREFIX: &'static str = "LMTP ";
    const DIALECT: Dialect = Dialect::Lmtp;

    fn session_config(&self, (): &()) -> Arc<SessionConfig> {
        Arc::clone(&self.session)
    }

    fn limits(&self) -> &Limits {
        &self.config.limits
    }

    fn grace(&self) -> Duration {
        self.config.shutdown_grace
    }

    /// STARTTLS is never offered over LMTP.
    fn tls(&self) -> Option<&tokio_rustls::TlsAcceptor> {
        None
    }

    fn message_data(txn: &mut Txn, data: &[u8]) {
        txn.message.extend_from_slice(data);
    }

    fn received(txn: &Txn) -> u64 {
        txn.message.len() as u64
    }

    fn drop_message(conn: &mut Conn) {
        conn.txn = Txn::default();
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
        conn.on_end().await.into_iter()
    }

    /// AUTH is disabled, so the session never asks; refuse if it does.
    async fn on_auth(_conn: &mut Conn, _credentials: Credentials) -> Decision {
        Decision::Reject(Reply::auth_failed())
    }
}
