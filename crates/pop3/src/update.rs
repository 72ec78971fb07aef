//! QUIT in the TRANSACTION state (RFC 1939 §6, the UPDATE state): the marked
//! messages are removed through the store's commit, on a blocking thread, and the
//! mailbox lock is released.
//!
//! This is the only place a message is ever deleted. The store removes each one
//! with a single `unlink` and fsyncs the directory once, so a crash during the
//! commit leaves every marked message either whole or gone, and every other one
//! untouched; mail delivered during the session is not in its listing and is never
//! touched. If the commit fails the client gets `-ERR [SYS/TEMP] Some deleted
//! messages not removed` (those removed stay removed).

use std::sync::Arc;

use stoa_pop3_proto::{Action, UpdateOutcome};

use crate::conn::Conn;

impl Conn {
    /// Removes the messages at `deleted` (0-based listing indices) and answers.
    pub(crate) async fn on_quit(&mut self, deleted: Vec<usize>) -> Action {
        let outcome = match self.mailbox.take() {
            // No marks: releasing the lock is the whole update.
            Some(_) | None if deleted.is_empty() => UpdateOutcome::Committed,
            None => {
                tracing::error!("{}: QUIT with deletions but no mailbox", self.peer);
                UpdateOutcome::Failed
            }
            Some(mailbox) => self.commit(mailbox, deleted).await,
        };
        self.session.decide_update(outcome)
    }

    async fn commit(
        &self,
        mailbox: Arc<stoa_mailstore::MailboxSession>,
        deleted: Vec<usize>,
    ) -> UpdateOutcome {
        let peer = self.peer;
        // The loop awaits every blocking read, so this is the last handle.
        let Ok(mailbox) = Arc::try_unwrap(mailbox) else {
            tracing::error!("{peer}: mailbox still shared at QUIT; nothing deleted");
            return UpdateOutcome::Failed;
        };
        let id = mailbox.id();
        let marked = deleted.len();
        let result = tokio::task::spawn_blocking(move || mailbox.commit_deletes(&deleted)).await;
        match result {
            Ok(Ok(removed)) => {
                tracing::info!(
                    "{peer}: mailbox {id}: {removed} of {marked} marked messages removed"
                );
                UpdateOutcome::Committed
            }
            Ok(Err(e)) => {
                tracing::error!("{peer}: mailbox {id}: deleting at QUIT failed: {e}");
                UpdateOutcome::Failed
            }
            Err(e) => {
                tracing::error!("{peer}: mailbox {id}: commit task failed: {e}");
                UpdateOutcome::Failed
            }
        }
    }
}
