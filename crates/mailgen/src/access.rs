//! How the harness reads the mailboxes: over POP3, as the kit did
//! (`mail2001.md` §1.5), or over IMAP (`stoa bench mail --access imap`, a
//! non-compliant run). Each IMAP check is the POP3 check's equivalent, step for
//! step where one exists, so the QoS arithmetic stays the same; only the rows'
//! names change ([`Function::label`]).
//!
//! The tally keeps one set of functions for both: an IMAP step is recorded as
//! the POP3 function it replaces (`LOGIN` as [`Function::PopPassword`],
//! `SELECT` as [`Function::PopStatus`], `FETCH` as [`Function::PopRetrieve`],
//! `STORE \Deleted` as [`Function::PopDelete`], `LOGOUT` as
//! [`Function::PopQuit`]), plus [`Function::Expunge`], which POP3 has no command
//! for (its `QUIT` commits the deletions).

use serde::{Deserialize, Serialize};

use crate::message::Tag;
use crate::pop_client::{PopPlan, ProbeResult};
use crate::tally::{Failure, Function, SessionRecord};
use crate::{imap_client, pop_client};

/// The protocol the mailboxes are read with.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// POP3, the kit's.
    #[default]
    Pop3,
    /// IMAP4rev1/IMAP4rev2.
    Imap,
}

/// The rows of a POP3 run, in report order: every function but IMAP's EXPUNGE.
const POP3_FUNCTIONS: [Function; 13] = [
    Function::SmtpConnect,
    Function::SmtpHello,
    Function::SmtpMailFrom,
    Function::SmtpRcptTo,
    Function::SmtpData,
    Function::SmtpQuit,
    Function::PopConnect,
    Function::PopUserId,
    Function::PopPassword,
    Function::PopStatus,
    Function::PopRetrieve,
    Function::PopDelete,
    Function::PopQuit,
];

/// The rows of an IMAP run, in report order: `LOGIN` carries the user and the
/// password in one command, so there is no User ID row.
const IMAP_FUNCTIONS: [Function; 13] = [
    Function::SmtpConnect,
    Function::SmtpHello,
    Function::SmtpMailFrom,
    Function::SmtpRcptTo,
    Function::SmtpData,
    Function::SmtpQuit,
    Function::PopConnect,
    Function::PopPassword,
    Function::PopStatus,
    Function::PopRetrieve,
    Function::PopDelete,
    Function::Expunge,
    Function::PopQuit,
];

impl Access {
    /// The protocol's name: "POP3" or "IMAP".
    pub fn name(self) -> &'static str {
        match self {
            Access::Pop3 => "POP3",
            Access::Imap => "IMAP",
        }
    }

    /// What the row names of the reading side start with: "POP" or "IMAP".
    pub fn prefix(self) -> &'static str {
        match self {
            Access::Pop3 => "POP",
            Access::Imap => "IMAP",
        }
    }

    /// The functions of the detailed tables, in their order.
    pub fn functions(self) -> &'static [Function] {
        match self {
            Access::Pop3 => &POP3_FUNCTIONS,
            Access::Imap => &IMAP_FUNCTIONS,
        }
    }

    /// The name of the size-adjusted retrieval row.
    pub fn retrieve_response(self) -> &'static str {
        match self {
            Access::Pop3 => "POP Retrieve Response Time",
            Access::Imap => "IMAP Fetch Response Time",
        }
    }

    /// One mailbox check ([`pop_client::pop_session`] or
    /// [`imap_client::imap_session`]).
    pub async fn session(self, plan: &PopPlan) -> SessionRecord {
        match self {
            Access::Pop3 => pop_client::pop_session(plan).await,
            Access::Imap => imap_client::imap_session(plan).await,
        }
    }

    /// A delivery probe's poll ([`pop_client::probe_poll`] or
    /// [`imap_client::imap_probe_poll`]).
    pub async fn probe_poll(self, plan: &PopPlan, tag: &Tag) -> ProbeResult {
        match self {
            Access::Pop3 => pop_client::probe_poll(plan, tag).await,
            Access::Imap => imap_client::imap_probe_poll(plan, tag).await,
        }
    }

    /// The store check's count of one mailbox: messages and octets
    /// ([`pop_client::pop_stat`] or [`imap_client::imap_stat`]).
    pub async fn stat(self, plan: &PopPlan) -> Result<(u32, u64), (Failure, String)> {
        match self {
            Access::Pop3 => pop_client::pop_stat(plan).await,
            Access::Imap => imap_client::imap_stat(plan).await,
        }
    }
}
