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
    /// A submitted message's header section, held back until it is whole so
    /// that a missing `Date:` or `Message-ID:` can be added in front of it.
    pub(crate) held: Option<Held>,
}

/// The start of a message from an authenticated client (a submission, RFC 6409
/// §8), not yet spooled: its header section, up to [`MAX_HELD`] bytes.
#[derive(Debug)]
pub(crate) struct Held {
    bytes: Vec<u8>,
    /// The server's name, for the `Message-ID:` it adds.
    hostname: String,
}

/// The most of a header section held back: past it (a header section that
/// long is not a client's), the message is spooled as it came.
const MAX_HELD: usize = 64 * 1024;

impl Held {
    pub(crate) fn new(hostname: &str) -> Held {
        Held {
            bytes: Vec::new(),
            hostname: hostname.to_owned(),
        }
    }
}

impl Txn {
    /// Spools the held header section, after the `Date:` and `Message-ID:`
    /// fields it lacks when it is `whole` (a longer one is spooled as it came:
    /// its fields past the held part are unknown).
    pub(crate) fn release_header(&mut self, whole: bool) {
        let (Some(held), Some(spool)) = (self.held.take(), &mut self.spool) else {
            return;
        };
        if whole {
            let header = crate::headers::header_section(&held.bytes);
            if !crate::headers::has_field(header, b"date") {
                let date = crate::headers::rfc5322_date(std::time::SystemTime::now());
                spool.write(format!("Date: {date}\r\n").as_bytes());
            }
            if !crate::headers::has_field(header, b"message-id") {
                let id = format!("Message-ID: <{}@{}>\r\n", spool.id(), held.hostname);
                spool.write(id.as_bytes());
            }
        }
        spool.write(&held.bytes);
    }

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
        if let Some(held) = &mut txn.held {
            let from = held.bytes.len().saturating_sub(3);
            held.bytes.extend_from_slice(data);
            let whole = held.bytes.starts_with(b"\r\n")
                || memchr::memmem::find(&held.bytes[from..], b"\r\n\r\n").is_some();
            if whole || held.bytes.len() >= MAX_HELD {
                txn.release_header(whole);
            }
            return;
        }
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
