//! Who is logged in to which mailbox: the per-user session limit, and the wake-up
//! of a user's sessions when the store reports a change (a delivery, another
//! session's flags or expunge), so that IDLE pushes it at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use stoa_mailstore::MailboxId;
use tokio::sync::Notify;

/// The logged-in sessions per mailbox, shared by every worker.
#[derive(Debug, Default)]
pub(crate) struct Watchers {
    users: Mutex<HashMap<MailboxId, User>>,
}

/// The IMAP sessions of a process, per mailbox: the per-user limit and IDLE's
/// wake-up. One per mail store, kept across reloads, so that the sessions of the
/// server a reload replaces are still woken and still counted.
#[derive(Debug, Clone)]
pub struct Sessions(pub(crate) Arc<Watchers>);

impl Sessions {
    /// The registry of `store`'s sessions, told of its changes (the store's
    /// observer).
    pub fn new(store: &stoa_mailstore::MailStore) -> Sessions {
        let watchers = Arc::new(Watchers::default());
        let woken = Arc::clone(&watchers);
        store.set_observer(Arc::new(move |mailbox| woken.changed(mailbox)));
        Sessions(watchers)
    }
}

#[derive(Debug)]
struct User {
    sessions: usize,
    changed: Arc<Notify>,
}

/// A session's place among its user's sessions; leaving drops it.
#[derive(Debug)]
pub(crate) struct Watch {
    watchers: Arc<Watchers>,
    mailbox: MailboxId,
    /// Fires when the store reports a change to the mailbox.
    pub(crate) changed: Arc<Notify>,
}

impl Watchers {
    /// Registers a session of `mailbox`, unless the user already has `limit`
    /// sessions (0: no limit).
    pub(crate) fn enter(self: &Arc<Self>, mailbox: MailboxId, limit: usize) -> Option<Watch> {
        let mut users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        let user = users.entry(mailbox).or_insert_with(|| User {
            sessions: 0,
            changed: Arc::new(Notify::new()),
        });
        if limit > 0 && user.sessions >= limit {
            return None;
        }
        user.sessions += 1;
        Some(Watch {
            watchers: Arc::clone(self),
            mailbox,
            changed: Arc::clone(&user.changed),
        })
    }

    /// Wakes the sessions of `mailbox` waiting for a change (the store's observer).
    pub(crate) fn changed(&self, mailbox: MailboxId) {
        let users = self.users.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(user) = users.get(&mailbox) {
            user.changed.notify_waiters();
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut users = self
            .watchers
            .users
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(user) = users.get_mut(&self.mailbox) {
            user.sessions -= 1;
            if user.sessions == 0 {
                users.remove(&self.mailbox);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_counted_and_woken() {
        let watchers = Arc::new(Watchers::default());
        let a = watchers.enter(MailboxId(1), 2).expect("first");
        let b = watchers.enter(MailboxId(1), 2).expect("second");
        assert!(watchers.enter(MailboxId(1), 2).is_none(), "over the limit");
        assert!(watchers.enter(MailboxId(2), 2).is_some());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let waiting = a.changed.notified();
            tokio::pin!(waiting);
            waiting.as_mut().enable();
            watchers.changed(MailboxId(1));
            waiting.await;
        });
        drop(b);
        let _c = watchers.enter(MailboxId(1), 2).expect("a slot freed");
        drop(a);
        drop(_c);
        assert!(watchers.users.lock().expect("lock").is_empty());
    }
}
