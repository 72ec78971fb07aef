//! The server side of one POP3 conversation as a state machine, with no I/O.
//!
//! The server owns the socket and the read buffer; it hands the unread bytes to
//! [`Session::advance`], drops the [`Step::consumed`] bytes, and acts on the
//! [`Event`]. The session frames and parses commands, keeps the state (RFC 1939 §3:
//! AUTHORIZATION → TRANSACTION → UPDATE), runs the SASL PLAIN exchange, and answers
//! STAT, LIST, UIDL, DELE, RSET, NOOP and CAPA itself from the listing the server
//! gave at login. What needs the outside world comes back as an event: credentials
//! to check ([`Event::Auth`], answered with [`Session::decide_login`]), a message to
//! send ([`Event::Retrieve`]), and the deletions to apply at QUIT ([`Event::Quit`],
//! answered with [`Session::decide_update`]).
//!
//! ```
//! use std::sync::Arc;
//! use stoa_pop3_proto::{Action, Config, Entry, Event, Listing, LoginDecision, Session};
//!
//! let config = Config { require_tls: false, ..Config::default() };
//! let mut session = Session::new(Arc::new(config));
//! let mut out = Vec::new();
//! session.greeting().write_to(&mut out);
//! let message = b"Subject: hi\r\n\r\n.dot\r\n";
//! let mut input: &[u8] = b"USER joe\r\nPASS secret\r\nRETR 1\r\nQUIT\r\n";
//! loop {
//!     let step = session.advance(input);
//!     input = &input[step.consumed..];
//!     let action = match step.event {
//!         Event::NeedMore => break, // read more from the socket
//!         Event::Action(action) => action,
//!         Event::Auth(credentials) => {
//!             // check the password, lock and list the mailbox...
//!             let entry = Entry { size: message.len() as u64, uid: "m1".into() };
//!             let listing = Listing::new(vec![entry]).expect("valid uids");
//!             session.decide_login(LoginDecision::Accept(listing))
//!         }
//!         Event::Retrieve(retrieval) => {
//!             retrieval.write_to(message, &mut out); // or stream it: `encoder()`
//!             continue;
//!         }
//!         Event::Quit { deleted } => {
//!             // remove `deleted` from the mailbox, atomically
//!             session.decide_update(stoa_pop3_proto::UpdateOutcome::Committed)
//!         }
//!     };
//!     match action {
//!         Action::Reply(response) => response.write_to(&mut out),
//!         Action::Close(response) => { response.write_to(&mut out); break }
//!         _ => { /* STLS, failed logins */ }
//!     }
//! }
//! let out = String::from_utf8(out).expect("ascii");
//! assert!(out.contains("+OK 21 octets\r\nSubject: hi\r\n\r\n..dot\r\n.\r\n"));
//! assert!(out.ends_with("+OK localhost POP3 server signing off (1 message left)\r\n"));
//! ```
//!
//! # Pipelining (RFC 2449 §6.6)
//!
//! Several commands may sit in one buffer; each `advance` takes one, and the result
//! does not depend on how the input was cut into reads. The one exception is STLS:
//! everything after `STLS\r\n` in the buffer is consumed unread and never executed
//! ([`Action::StartTls`] reports how much), because it arrived in clear text before
//! the TLS handshake (RFC 2595 §4, the STARTTLS-injection rule of docs/robustness.md
//! §4.2). The server must hand `advance` every byte it has read before that point.
//!
//! # Errors and failed logins
//!
//! Every refused command counts as an error; at [`Limits::max_errors`] the next
//! `advance` closes the session with `-ERR Too many bad commands`. Wrong credentials
//! are counted apart: each one comes back as [`Action::LoginFailed`] so the server can
//! delay the response (docs/robustness.md §3.7: 2 s doubling to 15 s, per client address),
//! and the [`Limits::max_auth_failures`]-th closes the session.
//!
//! # What the server keeps
//!
//! The clock: the autologout timer (RFC 1939 §3, at least 10 minutes; see
//! [`Session::phase`] for which timeout applies) and login throttling across
//! sessions; the mailbox lock (one session per mailbox, `-ERR [IN-USE]` for a second,
//! [`LoginDecision::InUse`]); the deletions, applied only when [`Event::Quit`] says
//! so: a session that ends any other way (dropped connection, autologout, shutdown)
//! deletes nothing.

mod handlers;
mod sasl;

use std::sync::Arc;

use crate::Error;
use crate::command::{Line, next_line};
use crate::encode::Retrieval;
use crate::listing::{Listing, Maildrop};
use crate::response::Response;

/// Limits of one session. Defaults are docs/robustness.md §3.7's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest command line, CRLF included. Default 255: RFC 2449 §4's limit, so a
    /// conforming client never reaches it. The rest of a longer line is discarded
    /// without being buffered (`-ERR Line too long`, counted as an error).
    pub max_line: usize,
    /// Longest SASL response line, CRLF included. Default 1024: a response is not a
    /// command, and a PLAIN response for a long name and password, base64-encoded,
    /// is well over 255 octets.
    pub max_sasl_line: usize,
    /// Refused commands after which the session closes. Default 20, like smtp-proto
    /// (Postfix's hard error limit): clients following the RFCs never get near it.
    pub max_errors: u32,
    /// Failed logins after which the session closes. Default 3: a user mistypes once
    /// or twice; a guesser has to reconnect, and pays the server's per-address delay
    /// again.
    pub max_auth_failures: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line: 255,
            max_sasl_line: 1024,
            max_errors: 20,
            max_auth_failures: 3,
        }
    }
}

/// Per-listener settings, shared by its sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The server's name, in the greeting and the sign-off.
    pub hostname: String,
    /// Line and error limits.
    pub limits: Limits,
    /// STLS is offered (the server has a certificate).
    pub stls: bool,
    /// USER, PASS and AUTH are refused before TLS (`-ERR [SYS/PERM]`), and CAPA does
    /// not list USER or SASL until then (RFC 2595 §4, RFC 2449 §6.2). Default `true`:
    /// passwords do not cross the network in clear unless a listener says so.
    pub require_tls: bool,
    /// AUTH PLAIN (RFC 5034, RFC 4616) is offered besides USER/PASS.
    pub sasl_plain: bool,
    /// `LOGIN-DELAY n` is advertised (RFC 2449 §6.5): the server enforces it and
    /// refuses early logins with [`LoginDecision::LoginDelay`].
    pub login_delay: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hostname: "localhost".to_owned(),
            limits: Limits::default(),
            stls: false,
            require_tls: true,
            sasl_plain: true,
            login_delay: None,
        }
    }
}

/// What the server does next with the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send the response (or queue it while more pipelined input is waiting) and go
    /// on.
    Reply(Response),
    /// Send the response, then close the connection.
    Close(Response),
    /// Send `+OK Begin TLS negotiation`, flush, then start the TLS handshake.
    /// Plaintext input after STLS has been consumed unread; `discarded` says how
    /// much (for the log). The session is already in its post-TLS state: nothing
    /// learnt in clear text (a USER name) survives.
    StartTls {
        /// `+OK Begin TLS negotiation`.
        response: Response,
        /// Bytes of plaintext dropped.
        discarded: usize,
    },
    /// A login failed on wrong credentials: wait (a fixed delay, longer for an
    /// address that keeps failing), then send the response; close the connection
    /// after it if `close`.
    LoginFailed {
        /// `-ERR [AUTH] Authentication failed`.
        response: Response,
        /// The session's limit of failed logins is reached.
        close: bool,
    },
    /// A trusted proxy named the client it speaks for (`XCLIENT`): from now on the
    /// server counts, throttles and logs this connection as `client`'s. Send the
    /// response and go on.
    Forward {
        /// The client's address and port.
        client: crate::Forwarded,
        /// `+OK Forwarded`.
        response: Response,
    },
}

/// Credentials for the server to check (`stoa-mail-proto`'s, shared with the other
/// mail protocols). `Debug` does not show the password.
pub use stoa_mail_proto::Credentials;

/// What [`Session::advance`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Nothing more can be done with the input: read more bytes.
    NeedMore,
    /// The session answered by itself.
    Action(Action),
    /// PASS or AUTH PLAIN: check the credentials, lock and list the mailbox, and
    /// answer with [`Session::decide_login`]. The same refusal must be given for an
    /// unknown user and a wrong password.
    Auth(Credentials),
    /// RETR or TOP of an existing, undeleted message: send it (see
    /// [`Retrieval`]); no decision is needed.
    Retrieve(Retrieval),
    /// QUIT in the TRANSACTION state: the session is in UPDATE. Remove the messages
    /// at these 0-based listing indices (ascending; possibly none) all together,
    /// release the mailbox, and answer with [`Session::decide_update`].
    Quit {
        /// The messages marked deleted.
        deleted: Vec<usize>,
    },
}

/// The result of one [`Session::advance`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// Input bytes used up; drop them before the next call.
    pub consumed: usize,
    /// What happened.
    pub event: Event,
}

/// The server's answer to [`Event::Auth`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LoginDecision {
    /// The credentials are right and the mailbox is locked: this is its listing, the
    /// session's numbering until QUIT.
    Accept(Listing),
    /// Unknown user or wrong password (`-ERR [AUTH]`, through
    /// [`Action::LoginFailed`]).
    BadCredentials,
    /// The mailbox is locked by another session (`-ERR [IN-USE]`).
    InUse,
    /// The user logged in too recently (`-ERR [LOGIN-DELAY]`).
    LoginDelay,
    /// The directory or the store failed; try later (`-ERR [SYS/TEMP]`).
    TemporaryFailure,
    /// The account cannot use POP3, or another failure retrying will not fix
    /// (`-ERR [SYS/PERM]`).
    PermanentFailure,
}

/// The server's answer to [`Event::Quit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateOutcome {
    /// Every marked message is gone (`+OK`).
    Committed,
    /// Removing them failed (`-ERR [SYS/TEMP] Some deleted messages not removed`,
    /// RFC 1939 §6).
    Failed,
}

/// Where the conversation is (RFC 1939 §3), for the server's timers and logs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before login (including a SASL exchange or a login being checked): the
    /// server's short pre-login timeout applies.
    Authorization,
    /// Logged in: the autologout timer of at least 10 minutes applies.
    Transaction,
    /// After QUIT, while the deletions are applied.
    Update,
    /// Closed; nothing more is read.
    Closed,
}

/// What an event waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Before login; the USER name given, if any.
    Authorization { user: Option<String> },
    /// AUTH PLAIN without an initial response: waiting for the client's response.
    Sasl,
    /// Waiting for [`Session::decide_login`].
    PendingLogin { user: String },
    /// Logged in.
    Transaction(Maildrop),
    /// QUIT received, waiting for [`Session::decide_update`]; `left` messages remain.
    Update { left: usize },
    /// Closed; nothing more is read.
    Closed,
}

/// One POP3 session.
#[derive(Debug, Clone)]
pub struct Session {
    config: Arc<Config>,
    state: State,
    tls: bool,
    user: Option<String>,
    errors: u32,
    auth_failures: u32,
    /// Dropping the rest of an overlong line.
    discarding: bool,
    /// Passwords may cross this connection without TLS (loopback, a trusted
    /// network): [`Session::set_secure_channel`].
    secure: bool,
    /// The peer may send `XCLIENT`: [`Session::allow_forwarding`].
    forwarding: bool,
    /// `XCLIENT` was accepted (once per session).
    forwarded: bool,
}

impl Session {
    /// A session for a new plaintext connection.
    pub fn new(config: Arc<Config>) -> Session {
        Session {
            config,
            state: State::Authorization { user: None },
            tls: false,
            user: None,
            errors: 0,
            auth_failures: 0,
            discarding: false,
            secure: false,
            forwarding: false,
            forwarded: false,
        }
    }

    /// Whether the connection itself keeps passwords safe without TLS: the server
    /// says so for a client on loopback or a network it trusts, and USER, PASS and
    /// AUTH are then accepted before STLS although [`Config::require_tls`] is set.
    pub fn set_secure_channel(&mut self, secure: bool) {
        self.secure = secure;
    }

    /// Whether the peer is a trusted proxy, allowed to name the client it speaks for
    /// with `XCLIENT ADDR=… PORT=…` ([`Action::Forward`]) once, before any login
    /// command. From anyone else `XCLIENT` is refused (counted as an error). CAPA
    /// lists `XCLIENT` to a trusted peer.
    pub fn allow_forwarding(&mut self, allowed: bool) {
        self.forwarding = allowed;
    }

    /// A session on a connection that is TLS from the start (POP3S, port 995).
    pub fn new_tls(config: Arc<Config>) -> Session {
        Session {
            tls: true,
            ..Session::new(config)
        }
    }

    /// The greeting. It carries no APOP timestamp: APOP is not offered.
    pub fn greeting(&self) -> Response {
        Response::ok(format!("{} POP3 server ready", self.config.hostname))
    }

    /// Processes the command (or SASL response) at the start of `input`. Call again
    /// with the rest until [`Event::NeedMore`].
    ///
    /// # Panics
    ///
    /// If an event is waiting for [`Session::decide_login`] or
    /// [`Session::decide_update`].
    pub fn advance(&mut self, input: &[u8]) -> Step {
        match &self.state {
            State::PendingLogin { .. } | State::Update { .. } => {
                panic!("Session::advance called before the pending decision")
            }
            State::Closed => {
                let response = Response::err("Session closed");
                return step(input.len(), Event::Action(Action::Close(response)));
            }
            State::Authorization { .. } | State::Sasl | State::Transaction(_) => {}
        }
        if self.errors >= self.config.limits.max_errors {
            return step(0, self.refuse_event(Error::TooManyErrors));
        }
        let mut skip = 0;
        if self.discarding {
            match memchr::memchr(b'\n', input) {
                Some(lf) => {
                    self.discarding = false;
                    skip = lf + 1;
                }
                None => return step(input.len(), Event::NeedMore),
            }
        }
        let rest = &input[skip..];
        let max = match self.state {
            State::Sasl => self.config.limits.max_sasl_line,
            _ => self.config.limits.max_line,
        };
        match next_line(rest, max.max(2)) {
            Line::Partial => step(skip, Event::NeedMore),
            Line::BareLf { consumed } => step(skip + consumed, self.refuse_event(Error::BareLf)),
            Line::TooLong { consumed, ended } => {
                self.discarding = !ended;
                if matches!(self.state, State::Sasl) {
                    self.state = State::Authorization { user: None };
                }
                step(skip + consumed, self.refuse_event(Error::LineTooLong))
            }
            Line::Complete { line, consumed } => {
                let after = rest.len() - consumed;
                let event = match self.state {
                    State::Sasl => self.sasl_line(line),
                    _ => self.command(line, after),
                };
                let used = match &event {
                    // The plaintext after STLS is dropped unread.
                    Event::Action(Action::StartTls { .. }) => input.len(),
                    _ => skip + consumed,
                };
                step(used, event)
            }
        }
    }

    /// Answers the [`Event::Auth`] that [`Session::advance`] returned last.
    ///
    /// # Panics
    ///
    /// If no login is waiting for a decision.
    pub fn decide_login(&mut self, decision: LoginDecision) -> Action {
        let State::PendingLogin { user } = std::mem::replace(&mut self.state, State::Closed) else {
            panic!("Session::decide_login called with no login pending");
        };
        self.state = State::Authorization { user: None };
        let refusal = match decision {
            LoginDecision::Accept(listing) => {
                let maildrop = Maildrop::new(listing);
                let text = format!("Logged in. {}", handlers::summary(&maildrop));
                self.state = State::Transaction(maildrop);
                self.user = Some(user);
                return Action::Reply(Response::ok(text));
            }
            LoginDecision::BadCredentials => return self.login_failed(),
            LoginDecision::InUse => Response::in_use(),
            LoginDecision::LoginDelay => Response::login_delay(),
            LoginDecision::TemporaryFailure => Response::temporary_failure(),
            LoginDecision::PermanentFailure => Response::permanent_failure(),
        };
        Action::Reply(refusal)
    }

    fn login_failed(&mut self) -> Action {
        self.auth_failures += 1;
        let close = self.auth_failures >= self.config.limits.max_auth_failures;
        if close {
            self.state = State::Closed;
        }
        Action::LoginFailed {
            response: Response::auth_failed(),
            close,
        }
    }

    /// Answers the [`Event::Quit`] that [`Session::advance`] returned last; the
    /// action is always [`Action::Close`].
    ///
    /// # Panics
    ///
    /// If no QUIT is waiting for a decision.
    pub fn decide_update(&mut self, outcome: UpdateOutcome) -> Action {
        let State::Update { left } = std::mem::replace(&mut self.state, State::Closed) else {
            panic!("Session::decide_update called with no QUIT pending");
        };
        let response = match outcome {
            UpdateOutcome::Committed => self.sign_off(Some(left)),
            UpdateOutcome::Failed => Response::err_code(
                crate::ResponseCode::SysTemp,
                "Some deleted messages not removed",
            ),
        };
        Action::Close(response)
    }

    /// `+OK host POP3 server signing off`, with what is left of the mailbox when
    /// there was one (RFC 1939 §6's example).
    fn sign_off(&self, left: Option<usize>) -> Response {
        let host = &self.config.hostname;
        Response::ok(match left {
            None => format!("{host} POP3 server signing off"),
            Some(0) => format!("{host} POP3 server signing off (maildrop empty)"),
            Some(n) => format!("{host} POP3 server signing off ({} left)", messages(n)),
        })
    }

    /// Counts an error and produces its action; closes when the error says so.
    fn refuse(&mut self, error: Error) -> Action {
        self.errors += 1;
        if error.closes() {
            self.state = State::Closed;
            Action::Close(error.response())
        } else {
            Action::Reply(error.response())
        }
    }

    fn refuse_event(&mut self, error: Error) -> Event {
        Event::Action(self.refuse(error))
    }

    /// Where the conversation is.
    pub fn phase(&self) -> Phase {
        match self.state {
            State::Authorization { .. } | State::Sasl | State::PendingLogin { .. } => {
                Phase::Authorization
            }
            State::Transaction(_) => Phase::Transaction,
            State::Update { .. } => Phase::Update,
            State::Closed => Phase::Closed,
        }
    }

    /// Whether TLS is on.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The user who logged in, if any.
    pub fn user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// Refused commands so far.
    pub fn error_count(&self) -> u32 {
        self.errors
    }

    /// Failed logins so far.
    pub fn auth_failures(&self) -> u32 {
        self.auth_failures
    }

    /// Whether the session has ended (an [`Action::Close`] was produced, or a
    /// failed login closed it).
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// The session's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }
}

/// `1 message` / `n messages`.
fn messages(n: usize) -> String {
    if n == 1 {
        "1 message".to_owned()
    } else {
        format!("{n} messages")
    }
}

fn step(consumed: usize, event: Event) -> Step {
    Step { consumed, event }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod split_tests;
