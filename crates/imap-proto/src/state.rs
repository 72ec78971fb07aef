//! Connection states (RFC 9051 §3) and which commands each allows (§6).
//!
//! The server keeps the [`State`] and moves it; [`check`] only says whether a command
//! may run now, and with what BAD text to refuse it.

use crate::command::CommandKind;

/// The state of an IMAP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Before LOGIN or AUTHENTICATE (or PREAUTH).
    NotAuthenticated,
    /// Logged in, no mailbox selected.
    Authenticated,
    /// A mailbox is selected (EXAMINE, or a read-only SELECT, makes it read-only).
    Selected {
        /// Whether the mailbox was opened read-only.
        read_only: bool,
    },
    /// LOGOUT was accepted; the connection is closing.
    Logout,
}

impl State {
    /// Whether the client is logged in (authenticated or selected).
    pub fn is_authenticated(self) -> bool {
        matches!(self, State::Authenticated | State::Selected { .. })
    }
}

/// Whether `kind` may run in `state`: `Err` holds the text of the tagged BAD.
///
/// Any state: CAPABILITY, NOOP, LOGOUT, ID. Not authenticated: STARTTLS, LOGIN,
/// AUTHENTICATE. Authenticated or selected: ENABLE (RFC 5161 §3.1 allows it only
/// before a mailbox is selected), COMPRESS, NAMESPACE, SELECT, EXAMINE, CREATE,
/// DELETE, RENAME, SUBSCRIBE, UNSUBSCRIBE, LIST, LSUB, STATUS, APPEND, IDLE.
/// Selected: CHECK, CLOSE, UNSELECT, EXPUNGE, UID EXPUNGE, SEARCH, FETCH, STORE,
/// COPY, MOVE. Nothing after LOGOUT. Whether a read-only mailbox allows STORE,
/// EXPUNGE or MOVE is a NO for the server to give, not a BAD, so it is not checked
/// here.
pub fn check(kind: &CommandKind, state: State) -> Result<(), &'static str> {
    use CommandKind as K;
    match (kind, state) {
        (_, State::Logout) => Err("Logging out"),
        (K::Capability | K::Noop | K::Logout | K::Id(_), _) => Ok(()),
        (K::StartTls | K::Login { .. } | K::Authenticate { .. }, State::NotAuthenticated) => Ok(()),
        (K::StartTls | K::Login { .. } | K::Authenticate { .. }, _) => Err("Already authenticated"),
        (_, State::NotAuthenticated) => Err("Not authenticated"),
        (K::Enable(_), State::Selected { .. }) => Err("ENABLE not allowed with a mailbox selected"),
        (
            K::Enable(_)
            | K::Compress(_)
            | K::Namespace
            | K::Select(_)
            | K::Examine(_)
            | K::Create { .. }
            | K::Delete(_)
            | K::Rename { .. }
            | K::Subscribe(_)
            | K::Unsubscribe(_)
            | K::List(_)
            | K::Lsub { .. }
            | K::Status { .. }
            | K::Append(_)
            | K::Idle,
            _,
        ) => Ok(()),
        (_, State::Selected { .. }) => Ok(()),
        (_, State::Authenticated) => Err("No mailbox selected"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legality() {
        let not_auth = State::NotAuthenticated;
        let auth = State::Authenticated;
        let sel = State::Selected { read_only: true };
        assert!(check(&CommandKind::Capability, not_auth).is_ok());
        assert!(check(&CommandKind::Noop, State::Logout).is_err());
        assert!(check(&CommandKind::StartTls, not_auth).is_ok());
        assert_eq!(
            check(&CommandKind::StartTls, auth),
            Err("Already authenticated")
        );
        assert_eq!(
            check(&CommandKind::Namespace, not_auth),
            Err("Not authenticated")
        );
        assert!(check(&CommandKind::Enable(vec![]), auth).is_ok());
        assert!(check(&CommandKind::Enable(vec![]), sel).is_err());
        assert!(check(&CommandKind::Idle, sel).is_ok());
        assert_eq!(
            check(&CommandKind::Expunge, auth),
            Err("No mailbox selected")
        );
        assert!(check(&CommandKind::Expunge, sel).is_ok());
        assert!(check(&CommandKind::Close, not_auth).is_err());
        assert!(sel.is_authenticated() && !not_auth.is_authenticated());
    }
}
