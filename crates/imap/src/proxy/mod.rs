//! The IMAP proxy (the role of Sun's Messaging Multiplexor in the SPECmail2001
//! topology, as the POP3 proxy): it speaks IMAP to the client up to the login,
//! checks the password in the directory, finds the user's store host from
//! `mailHost`, logs in there for the user and then relays bytes both ways.
//!
//! # The login's path
//!
//! 1. The client's session runs in the same `conn.rs` loop as a store host's
//!    (greeting, CAPABILITY, STARTTLS, ID, NOOP, LOGOUT, LOGIN, AUTHENTICATE PLAIN
//!    with SASL-IR, the TLS rule, the shared throttle and the failed-login
//!    delays); every other command is refused before the login, as a store host
//!    refuses it.
//! 2. The credentials are checked here, in the directory: a wrong password or an
//!    unknown user is refused by the proxy (after its delay), and no store host
//!    ever sees the attempt.
//! 3. The user's `mailHost` names the store host; its IMAP address is its
//!    [`StoreHost`] entry (`[[mail_host]] imap`), or the name itself on port 143
//!    (993 with [`BackendTls::Tls`]), resolved at every connection
//!    ([`stoa_directory::store_hosts`], shared with the POP3 proxy).
//! 4. `backend.rs` connects (plain, STARTTLS or TLS from the first byte, through
//!    [`stoa_netkit::upstream`]), reads the greeting and the capabilities, tells
//!    the store host the client's address with Dovecot's
//!    `ID ("x-originating-ip" … "x-originating-port" …)` (a store host takes it
//!    only from its `trusted_proxies`), and logs in with `AUTHENTICATE PLAIN`
//!    (the initial response inline with SASL-IR, else after the continuation;
//!    `LOGIN` when the store host has no `AUTH=PLAIN`) as the user the directory
//!    returned, with the client's password: the store host checks it again.
//! 5. The store host's tagged `OK` (with its `[CAPABILITY …]`) goes to the client
//!    under the client's tag, and [`stoa_netkit::relay`] copies bytes both ways
//!    (commands the client pipelined behind its login first), until either side
//!    closes or nothing moves for the autologout time (or the IDLE limit, when
//!    longer: the relay cannot tell an IDLE from silence).
//!
//! A store host that cannot be reached, refuses the login or answers out of turn
//! gives the client `tag NO [UNAVAILABLE]`, and the connection to it is closed;
//! the client's session stays usable, to try again. Every store-host reply is
//! bounded in length (`backend::MAX_REPLY_LINE`), in number and in time.

mod backend;

pub use stoa_directory::store_hosts::{BackendTls, ProxyConfig, StoreHost};
/// Why the proxy cannot start: its TLS client for the store hosts.
pub use stoa_netkit::tls::ClientError as SetupError;

pub(crate) use backend::{LoggedIn, login};

/// The proxy at run time: the routes to the store hosts' IMAP servers and the
/// TLS client.
pub(crate) type Proxy = stoa_directory::store_hosts::Backends;

impl crate::conn::Conn {
    /// The proxied session: the store host's `OK` under the client's login tag,
    /// then bytes both ways (what the client pipelined behind its login first),
    /// with the longer of the autologout time and the IDLE limit as the relay's
    /// idle limit.
    pub(crate) async fn relay(&mut self) -> std::io::Result<()> {
        let Some((tag, session)) = self.proxied.take() else {
            return Ok(());
        };
        let LoggedIn {
            stream,
            reply,
            after,
        } = session;
        let out = self.io.out();
        out.extend_from_slice(tag.as_bytes());
        out.extend(stoa_netkit::relay::sanitized(&reply));
        out.extend_from_slice(&after);
        let limits = &self.shared.config.limits;
        let now = std::time::Instant::now();
        let relay_limits = stoa_netkit::relay::Limits {
            // The relay cannot tell an IDLE from silence: the longer of the
            // autologout and the IDLE limit, so that it never ends a session
            // in IDLE the store host keeps (whose own timers still apply).
            idle: limits.idle_timeout.max(limits.idle_command_timeout),
            // No cap on a session's length: an IMAP client may stay for days,
            // re-issuing IDLE; silence still ends it.
            end: now.checked_add(SESSION_CAP).unwrap_or(now),
            send: limits.send_timeout,
        };
        stoa_netkit::relay::take_over(&mut self.io, stream, relay_limits, self.peer).await
    }
}

/// A proxied session's length past which the relay ends it anyway: a year, far
/// beyond any client's session (the relay needs some end).
const SESSION_CAP: std::time::Duration = std::time::Duration::from_secs(365 * 24 * 3600);
