//! The envelope file: who sent a queued message, to whom, and how far delivery got.
//!
//! One JSON object per file (`ID.env`), small and rewritten whole on every change:
//!
//! ```json
//! {"version":1,"id":"1A2B…","sender":"joe@example.com","arrival":1767225600,
//!  "attempts":1,"next_try":1767225900,"client":"[192.0.2.1]",
//!  "recipients":[{"address":"ann@example.com","original":"ann@example.com",
//!                 "route":"local","state":"pending","status":null,"diagnostic":null}]}
//! ```
//!
//! `sender` is empty for the null sender (`<>`, bounces). Times are Unix seconds.
//! `version` is checked on load: a file written by a newer format is refused
//! (and kept) rather than misread.

use serde::{Deserialize, Serialize};

/// The envelope format written by this version.
pub const VERSION: u32 = 1;

/// A queued message's envelope.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// Format version ([`VERSION`]).
    pub version: u32,
    /// The queue id (also the file names' stem).
    pub id: String,
    /// The reverse-path without brackets; empty for the null sender.
    pub sender: String,
    /// When the message was accepted (Unix seconds).
    pub arrival: u64,
    /// Delivery attempts that left recipients pending.
    pub attempts: u32,
    /// Earliest time of the next attempt (Unix seconds).
    pub next_try: u64,
    /// Who handed the message over (`[IP]`, or `local` for bounces), for bounces and
    /// logs.
    pub client: String,
    /// The recipients, each with its own state.
    pub recipients: Vec<Recipient>,
}

/// One recipient of a queued message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipient {
    /// Where the mail goes: a local user's address or a remote mailbox.
    pub address: String,
    /// The address as the client gave it in RCPT (before alias expansion), for the
    /// bounce's `Original-Recipient`.
    pub original: String,
    /// Local mailbox or relay.
    pub route: Route,
    /// Delivery state.
    pub state: RecipientState,
    /// Enhanced status of the last attempt (`4.4.1`, `5.1.1`…), for bounces.
    pub status: Option<String>,
    /// What the last attempt said (the remote reply, or the local error).
    pub diagnostic: Option<String>,
}

/// How a recipient is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Route {
    /// A user of the directory: local delivery.
    Local,
    /// Anything else: the smart host.
    Remote,
}

/// Where a recipient's delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RecipientState {
    /// Not delivered yet.
    Pending,
    /// Delivered (stored locally, or accepted by the smart host).
    Delivered,
    /// Failed for good; a bounce has been queued (unless the sender is null).
    Bounced,
}

impl Envelope {
    /// Whether every recipient is done (delivered or bounced).
    pub fn is_done(&self) -> bool {
        self.recipients
            .iter()
            .all(|r| r.state != RecipientState::Pending)
    }

    /// Serialises to the file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(self).expect("invariant: an envelope serialises");
        bytes.push(b'\n');
        bytes
    }

    /// Parses a file's bytes, refusing other format versions.
    pub fn from_bytes(bytes: &[u8]) -> Result<Envelope, String> {
        let envelope: Envelope = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        if envelope.version != VERSION {
            return Err(format!("unsupported envelope version {}", envelope.version));
        }
        Ok(envelope)
    }
}

impl Recipient {
    /// A pending recipient.
    pub fn new(address: String, original: String, route: Route) -> Recipient {
        Recipient {
            address,
            original,
            route,
            state: RecipientState::Pending,
            status: None,
            diagnostic: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_version_check() {
        let envelope = Envelope {
            version: VERSION,
            id: "ABC".into(),
            sender: String::new(),
            arrival: 10,
            attempts: 0,
            next_try: 10,
            client: "[127.0.0.1]".into(),
            recipients: vec![Recipient::new("a@b".into(), "a@b".into(), Route::Local)],
        };
        let bytes = envelope.to_bytes();
        assert_eq!(Envelope::from_bytes(&bytes), Ok(envelope.clone()));
        assert!(!envelope.is_done());
        let newer = String::from_utf8(bytes)
            .expect("utf-8")
            .replace("\"version\":1", "\"version\":2");
        assert!(Envelope::from_bytes(newer.as_bytes()).is_err());
        assert!(Envelope::from_bytes(b"{\"version\":1").is_err());
    }
}
