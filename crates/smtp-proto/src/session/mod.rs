//! The server side of one SMTP conversation as a state machine, with no I/O.
//!
//! The server owns the socket and the read buffer; it hands the unread bytes to
//! [`Session::advance`], drops the [`Step::consumed`] bytes, and acts on the
//! [`Event`]. The session validates command order (MAIL before RCPT before DATA),
//! counts recipients and errors, runs the SASL exchange, decodes DATA, and detects
//! unauthorised pipelining; everything that needs the outside world (is this domain
//! ours? may this client relay? is the password right? is the message on disk?) comes
//! back to the server as an event, and the server answers with
//! [`Session::decide`]. Replies are always produced here or chosen by the server
//! from [`Reply`]'s stock replies, so what the client sees is decided in one place.
//!
//! ```
//! use std::sync::Arc;
//! use stoa_smtp_proto::session::{Action, Config, Decision, Event, Session};
//!
//! let mut session = Session::new(Arc::new(Config::default()));
//! let mut out = Vec::new();
//! session.greeting().write_to(&mut out);
//! let mut input: &[u8] = b"EHLO client.example\r\n";
//! loop {
//!     let step = session.advance(input);
//!     input = &input[step.consumed..];
//!     match step.event {
//!         Event::NeedMore => break, // read more from the socket
//!         Event::Action(Action::Reply(reply)) => reply.write_to(&mut out),
//!         Event::Mail { .. } | Event::Rcpt { .. } => {
//!             let action = session.decide(Decision::Accept);
//!             // ... write action's reply
//! #           let _ = action;
//!         }
//!         _ => { /* data, AUTH, close, STARTTLS ... */ }
//!     }
//! }
//! assert!(out.starts_with(b"220 localhost ESMTP\r\n250-localhost Hello client.example\r\n"));
//! ```
//!
//! # Pipelining (RFC 2920)
//!
//! Several commands may sit in one buffer; each `advance` takes one. A command that
//! must end a group (EHLO, HELO, DATA, VRFY, EXPN, NOOP, QUIT, STARTTLS), or any
//! command before the client has seen an EHLO reply, must not be followed by more
//! input in the same buffer. With [`Config::reject_unauth_pipelining`] (the default,
//! like Postfix 3.9) such input closes the session with `554 5.5.0`; bytes before the
//! greeting do the same. This relies on the server calling `advance` with every byte
//! it has read and writing out queued replies before it reads again, which is what
//! RFC 2920 asks of a server anyway. Input after STARTTLS is discarded unread
//! (RFC 3207 §4.2, CVE-2011-0411) when it is not refused.
//!
//! # Errors
//!
//! Bad commands, unknown commands, bad sequences, and the server's refusals of RCPT
//! and AUTH count as errors (Postfix counts the same). RCPT beyond the recipient limit
//! does not, so that a client with too many recipients still delivers to the ones
//! accepted; refusals of MAIL, DATA and of a message do not either, being most often
//! the server's own trouble (disk space, a failed write). Beyond
//! [`Limits::soft_error_limit`] the server should delay each error reply
//! ([`Session::delay_errors`]); at [`Limits::hard_error_limit`] the next `advance`
//! closes the session with `421 4.7.0`. NOOP, RSET, VRFY and HELP beyond
//! [`Limits::max_junk_commands`] count as errors too.

mod handlers;
mod sasl;

use std::sync::Arc;

use crate::Error;
use crate::address::{ForwardPath, ReversePath};
use crate::command::{Line, MailParams, next_line};
use crate::data::DataDecoder;
use crate::reply::{EnhancedStatus, Reply};

/// [`Limits::max_text_line`] for no limit of its own: a message's lines are
/// bounded by [`Limits::max_message_size`] alone.
pub const NO_TEXT_LINE_LIMIT: usize = usize::MAX;

/// Limits of one session. Defaults are docs/robustness.md §3.7's (Postfix's values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest command line, CRLF included: RFC 5321 asks for 512, ESMTP parameters
    /// and SASL responses need more. Default 2048 (Postfix's `line_length_limit`).
    /// The server's read buffer must hold at least this many bytes.
    pub max_line: usize,
    /// Longest message text line, CRLF excluded (`554 5.3.4` beyond). Default: no
    /// limit but the message size ([`NO_TEXT_LINE_LIMIT`]), as Postfix, which takes
    /// longer lines and only splits them into records when it stores them; clients
    /// send them (HTML mail, unfolded base64), and the decoder buffers nothing, so a
    /// long line costs no memory.
    pub max_text_line: usize,
    /// Largest message, advertised as `SIZE` (`552 5.3.4` beyond). Default 10,240,000
    /// bytes (Postfix's `message_size_limit`).
    pub max_message_size: u64,
    /// Most accepted recipients per message (`452 4.5.3` beyond). Default 1000
    /// (Postfix's `smtpd_recipient_limit`; RFC 5321 §4.5.3.1.8 asks for at least 100).
    pub max_recipients: u32,
    /// Errors after which each error reply should be delayed. Default 10.
    pub soft_error_limit: u32,
    /// Errors after which the session closes with `421 4.7.0`. Default 20.
    pub hard_error_limit: u32,
    /// NOOP/RSET/VRFY/HELP commands allowed before each one counts as an error.
    /// Default 100 (Postfix's `smtpd_junk_command_limit`).
    pub max_junk_commands: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_line: 2048,
            max_text_line: NO_TEXT_LINE_LIMIT,
            max_message_size: 10_240_000,
            max_recipients: 1000,
            soft_error_limit: 10,
            hard_error_limit: 20,
            max_junk_commands: 100,
        }
    }
}

/// Which protocol a session speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Dialect {
    /// SMTP (RFC 5321): HELO or EHLO, one reply at the end of a message.
    #[default]
    Smtp,
    /// LMTP (RFC 2033): LHLO instead of HELO and EHLO (which get `500 5.5.1`), and
    /// after the end of a message one reply per accepted recipient, in RCPT order:
    /// the server answers [`Event::MessageEnd`] with one [`Session::decide`] each
    /// ([`Session::pending_decisions`] says how many are still due).
    Lmtp,
}

/// When AUTH is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthPolicy {
    /// Never (a port-25 MX without submission).
    Disabled,
    /// Only over TLS, so passwords never cross the network in clear (`538 5.7.11`
    /// before STARTTLS). The default.
    AfterTls,
    /// Also in clear text (tests, or a listener on a trusted local network).
    Always,
}

/// Per-listener settings, shared by its sessions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The server's name in the greeting and the EHLO reply.
    pub hostname: String,
    /// Size and count limits.
    pub limits: Limits,
    /// STARTTLS is offered (the server has a certificate).
    pub starttls: bool,
    /// When AUTH PLAIN/LOGIN is offered.
    pub auth: AuthPolicy,
    /// MAIL is refused before STARTTLS (`530 5.7.0`).
    pub require_tls: bool,
    /// MAIL is refused before AUTH (`530 5.7.0`): the submission port.
    pub require_auth: bool,
    /// Close the session on unauthorised pipelining (`554 5.5.0`).
    pub reject_unauth_pipelining: bool,
    /// SMTP or LMTP.
    pub dialect: Dialect,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            hostname: "localhost".to_owned(),
            limits: Limits::default(),
            starttls: false,
            auth: AuthPolicy::AfterTls,
            require_tls: false,
            require_auth: false,
            reject_unauth_pipelining: true,
            dialect: Dialect::Smtp,
        }
    }
}

/// What the server does next with the connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send the reply (or queue it while more pipelined input is waiting) and go on.
    Reply(Reply),
    /// Send the reply, then close the connection.
    Close(Reply),
    /// Send the reply, flush, then start the TLS handshake. Plaintext input after
    /// STARTTLS has been consumed unread; `discarded` says how much (for the log).
    /// The session is already in its post-TLS state: the client must EHLO again.
    StartTls {
        /// `220 2.0.0 Ready to start TLS`.
        reply: Reply,
        /// Bytes of plaintext dropped.
        discarded: usize,
    },
}

/// Credentials for the server to check (`stoa-mail-proto`'s, shared with the other
/// mail protocols). `Debug` does not show the password.
pub use stoa_mail_proto::Credentials;

/// What [`Session::advance`] found.
#[derive(Debug)]
pub enum Event<'b> {
    /// Nothing more can be done with the input: read more bytes.
    NeedMore,
    /// The session answered by itself.
    Action(Action),
    /// MAIL FROM, syntax and sequence checked: decide (`250 2.1.0` on accept).
    Mail {
        /// The sender.
        from: ReversePath,
        /// Its parameters.
        params: MailParams,
    },
    /// RCPT TO, syntax, sequence and the recipient limit checked: decide whether the
    /// domain is local, the user exists, relaying is allowed (`250 2.1.5` on accept;
    /// see [`Reply::relay_denied`], [`Reply::user_unknown`]).
    Rcpt {
        /// The recipient.
        to: ForwardPath,
    },
    /// DATA with at least one accepted recipient: decide (`354` on accept; refuse,
    /// for instance, when the queue cannot take a message).
    Data,
    /// A piece of the message, dot-unstuffing done: store it.
    MessageData(&'b [u8]),
    /// The end of a message within every limit: make it durable, then decide
    /// (accept with [`Reply::queued`]; refuse with [`Reply::local_error`] on failure).
    /// In LMTP, decide once per accepted recipient, in RCPT order.
    MessageEnd {
        /// Message size in bytes.
        size: u64,
    },
    /// The message was refused (too large, bare LF, long line); the end marker has been
    /// read. Throw away what was stored, and perform the action. In LMTP with several
    /// recipients the next `advance` calls repeat the reply, one per recipient,
    /// without consuming input.
    MessageAborted {
        /// Why.
        error: Error,
        /// The reply, and whether to close.
        action: Action,
    },
    /// AUTH credentials: check them and decide (`235 2.7.0` on accept; refuse with
    /// [`Reply::auth_failed`], the same reply for an unknown user and a wrong
    /// password).
    Auth(Credentials),
}

/// The result of one [`Session::advance`].
#[derive(Debug)]
pub struct Step<'b> {
    /// Input bytes used up; drop them before the next call.
    pub consumed: usize,
    /// What happened.
    pub event: Event<'b>,
}

/// The server's answer to an event that needs one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Accept, with the standard reply.
    Accept,
    /// Accept, with this reply (2xx; for instance [`Reply::queued`]).
    AcceptWith(Reply),
    /// Refuse with this reply (4xx or 5xx); the session goes on.
    Reject(Reply),
    /// Refuse with this reply and close the connection.
    Close(Reply),
}

/// The recipients of the transaction under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Transaction {
    accepted: u32,
    rejected: u32,
}

/// The SASL exchange under way.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sasl {
    /// Waiting for PLAIN's response.
    Plain,
    /// Waiting for LOGIN's user name.
    LoginUsername,
    /// Waiting for LOGIN's password.
    LoginPassword { username: String },
}

/// What an event waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    Mail,
    Rcpt(Transaction),
    Data(Transaction),
    /// The end of a message: `replies` decisions still due (one in SMTP, one per
    /// accepted recipient in LMTP).
    Message {
        replies: u32,
    },
    Auth {
        username: String,
    },
}

#[derive(Debug, Clone)]
enum State {
    /// Before the greeting.
    Connected,
    /// Between transactions (HELO/EHLO may or may not have been sent).
    Idle,
    /// After an accepted MAIL.
    Transaction(Transaction),
    /// Reading a message for the transaction's recipients.
    Data(DataDecoder, Transaction),
    /// Repeating the refusal of an LMTP message for the recipients after the first;
    /// `close` once the last is sent.
    Repeat {
        reply: Reply,
        remaining: u32,
        close: bool,
    },
    /// In a SASL exchange.
    Sasl(Sasl),
    /// Waiting for [`Session::decide`].
    Pending(Pending),
    /// Closed; nothing more is read.
    Closed,
}

/// The client's HELO/EHLO.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Helo {
    name: String,
    extended: bool,
}

/// One SMTP session.
#[derive(Debug, Clone)]
pub struct Session {
    config: Arc<Config>,
    state: State,
    helo: Option<Helo>,
    tls: bool,
    user: Option<String>,
    errors: u32,
    junk: u32,
    /// Dropping the rest of an overlong command line.
    discarding: bool,
}

impl Session {
    /// A session for a new connection, before the greeting.
    pub fn new(config: Arc<Config>) -> Session {
        Session {
            config,
            state: State::Connected,
            helo: None,
            tls: false,
            user: None,
            errors: 0,
            junk: 0,
            discarding: false,
        }
    }

    /// A session on a connection that is TLS from the start (implicit TLS, port 465).
    pub fn new_tls(config: Arc<Config>) -> Session {
        Session {
            tls: true,
            ..Session::new(config)
        }
    }

    /// The `220` greeting; from now on input is expected. A server that wants to catch
    /// clients talking first (Postfix's pregreet test) waits a moment and calls
    /// [`Session::advance`] with what arrived before calling this.
    pub fn greeting(&mut self) -> Reply {
        if matches!(self.state, State::Connected) {
            self.state = State::Idle;
        }
        let protocol = match self.config.dialect {
            Dialect::Smtp => "ESMTP",
            Dialect::Lmtp => "LMTP",
        };
        Reply::plain(220, format!("{} {protocol}", self.config.hostname))
    }

    /// Processes the input at the start of `input`: one command, one SASL response,
    /// or one piece of message data. Call again with the rest until
    /// [`Event::NeedMore`].
    ///
    /// # Panics
    ///
    /// If an event is waiting for [`Session::decide`].
    pub fn advance<'b>(&mut self, input: &'b [u8]) -> Step<'b> {
        match &self.state {
            State::Pending(_) => panic!("Session::advance called before Session::decide"),
            State::Closed => {
                let reply = Reply::new(421, EnhancedStatus::new(4, 7, 0), "Error: session closed");
                return step(input.len(), Event::Action(Action::Close(reply)));
            }
            State::Connected if input.is_empty() => return step(0, Event::NeedMore),
            State::Connected => return step(input.len(), self.refuse_event(Error::Pipelining)),
            State::Repeat { .. } => return step(0, Event::Action(self.repeat())),
            State::Data(..) | State::Idle | State::Transaction(_) | State::Sasl(_) => {}
        }
        if let State::Data(decoder, transaction) = &mut self.state {
            let replies = match self.config.dialect {
                Dialect::Smtp => 1,
                Dialect::Lmtp => transaction.accepted.max(1),
            };
            let (consumed, piece) = read_message(decoder, input);
            return self.message_step(consumed, piece, replies);
        }
        if self.errors >= self.config.limits.hard_error_limit {
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
        match next_line(rest, self.config.limits.max_line) {
            Line::Partial => step(skip, Event::NeedMore),
            Line::BareLf { consumed } => step(skip + consumed, self.refuse_event(Error::BareLf)),
            Line::TooLong { consumed, ended } => {
                self.discarding = !ended;
                step(skip + consumed, self.refuse_event(Error::LineTooLong))
            }
            Line::Complete { line, consumed } => {
                let after = rest.len() - consumed;
                let event = match &self.state {
                    State::Sasl(_) => self.sasl_line(line),
                    _ => self.command(line, after),
                };
                let used = match &event {
                    // The plaintext after STARTTLS is dropped unread.
                    Event::Action(Action::StartTls { .. }) => input.len(),
                    _ => skip + consumed,
                };
                step(used, event)
            }
        }
    }

    /// Answers the event [`Session::advance`] returned last.
    ///
    /// # Panics
    ///
    /// If no event is waiting for a decision.
    pub fn decide(&mut self, decision: Decision) -> Action {
        let State::Pending(pending) = std::mem::replace(&mut self.state, State::Closed) else {
            panic!("Session::decide called with no decision pending");
        };
        // LMTP: the end of a message waits for one decision per recipient.
        let more = match pending {
            Pending::Message { replies } if replies > 1 => Some(replies - 1),
            _ => None,
        };
        let action = self.conclude(pending, decision);
        if let (Some(replies), Action::Reply(_)) = (more, &action) {
            self.state = State::Pending(Pending::Message { replies });
        }
        action
    }

    /// How many [`Session::decide`] calls the session waits for: none, one after an
    /// event that needs a decision, or in LMTP the recipients not yet answered at
    /// the end of a message.
    pub fn pending_decisions(&self) -> u32 {
        match &self.state {
            State::Pending(Pending::Message { replies }) => *replies,
            State::Pending(_) => 1,
            _ => 0,
        }
    }

    /// Applies one decision about `pending`.
    fn conclude(&mut self, pending: Pending, decision: Decision) -> Action {
        match decision {
            Decision::Close(reply) => Action::Close(reply),
            Decision::Reject(reply) => {
                debug_assert!(!reply.is_positive(), "Decision::Reject with {reply}");
                self.reject(&pending);
                Action::Reply(reply)
            }
            Decision::Accept => {
                let reply = standard_acceptance(&pending);
                self.accept(pending);
                Action::Reply(reply)
            }
            Decision::AcceptWith(reply) => {
                debug_assert!(reply.is_positive(), "Decision::AcceptWith with {reply}");
                self.accept(pending);
                Action::Reply(reply)
            }
        }
    }

    fn accept(&mut self, pending: Pending) {
        self.state = match pending {
            Pending::Mail => State::Transaction(Transaction::default()),
            Pending::Rcpt(t) => State::Transaction(Transaction {
                accepted: t.accepted + 1,
                ..t
            }),
            Pending::Data(t) => State::Data(
                DataDecoder::new(
                    self.config.limits.max_message_size,
                    self.config.limits.max_text_line,
                ),
                t,
            ),
            Pending::Message { .. } => State::Idle,
            Pending::Auth { username } => {
                self.user = Some(username);
                State::Idle
            }
        };
    }

    fn reject(&mut self, pending: &Pending) {
        self.state = match *pending {
            Pending::Mail | Pending::Message { .. } => State::Idle,
            Pending::Rcpt(t) => {
                self.errors += 1;
                State::Transaction(Transaction {
                    rejected: t.rejected + 1,
                    ..t
                })
            }
            Pending::Data(t) => State::Transaction(t),
            Pending::Auth { .. } => {
                self.errors += 1;
                State::Idle
            }
        };
    }

    /// Turns what [`read_message`] found into a step; the end of the message gets
    /// `replies` replies.
    fn message_step<'b>(&mut self, consumed: usize, piece: Piece<'b>, replies: u32) -> Step<'b> {
        match piece {
            Piece::Data(data) => step(consumed, Event::MessageData(data)),
            Piece::More => step(consumed, Event::NeedMore),
            Piece::End(Ok(size)) => {
                self.state = State::Pending(Pending::Message { replies });
                step(consumed, Event::MessageEnd { size })
            }
            Piece::End(Err(error)) => {
                self.state = State::Idle;
                let mut action = self.refuse(error);
                if replies > 1 {
                    // LMTP: every recipient gets the refusal; the connection closes,
                    // if it must, after the last.
                    let (reply, close) = match action {
                        Action::Close(reply) => (reply, true),
                        Action::Reply(reply) | Action::StartTls { reply, .. } => (reply, false),
                    };
                    action = Action::Reply(reply.clone());
                    self.state = State::Repeat {
                        reply,
                        remaining: replies - 1,
                        close,
                    };
                }
                step(consumed, Event::MessageAborted { error, action })
            }
        }
    }

    /// The next repetition of an LMTP message's refusal.
    fn repeat(&mut self) -> Action {
        let State::Repeat {
            reply,
            remaining,
            close,
        } = std::mem::replace(&mut self.state, State::Idle)
        else {
            unreachable!("invariant: repeat is only called in State::Repeat");
        };
        if remaining > 1 {
            self.state = State::Repeat {
                reply: reply.clone(),
                remaining: remaining - 1,
                close,
            };
            Action::Reply(reply)
        } else if close {
            self.state = State::Closed;
            Action::Close(reply)
        } else {
            Action::Reply(reply)
        }
    }

    /// Counts an error and produces its reply; closes when the error says so.
    fn refuse(&mut self, error: Error) -> Action {
        if error != Error::TooManyRecipients {
            // Postfix tolerates going over the recipient limit without penalty, so
            // that the accepted recipients still get their mail.
            self.errors += 1;
        }
        if error.closes() {
            self.state = State::Closed;
            Action::Close(error.reply())
        } else {
            Action::Reply(error.reply())
        }
    }

    fn refuse_event(&mut self, error: Error) -> Event<'static> {
        Event::Action(self.refuse(error))
    }

    /// The HELO/EHLO name the client gave, if any (for `Received:`).
    pub fn helo(&self) -> Option<&str> {
        self.helo.as_ref().map(|h| h.name.as_str())
    }

    /// Whether TLS is on.
    pub fn is_tls(&self) -> bool {
        self.tls
    }

    /// The user who authenticated, if any.
    pub fn authenticated_user(&self) -> Option<&str> {
        self.user.as_deref()
    }

    /// Errors so far.
    pub fn error_count(&self) -> u32 {
        self.errors
    }

    /// Whether error replies should now be delayed (Postfix sleeps a second), having
    /// passed the soft error limit.
    pub fn delay_errors(&self) -> bool {
        self.errors > self.config.limits.soft_error_limit
    }

    /// Whether the session has ended (a [`Action::Close`] was produced).
    pub fn is_closed(&self) -> bool {
        matches!(self.state, State::Closed)
    }

    /// Whether a message is being read (for the server's DATA deadline).
    pub fn in_data(&self) -> bool {
        matches!(self.state, State::Data(..))
    }

    /// The `with` protocol of a `Received:` header (RFC 3848): `SMTP`, `ESMTP` or
    /// `LMTP`, plus `S` for TLS and `A` for AUTH.
    pub fn received_protocol(&self) -> &'static str {
        let extended = self.helo.as_ref().is_some_and(|h| h.extended);
        if self.config.dialect == Dialect::Lmtp {
            return match (self.tls, self.user.is_some()) {
                (false, false) => "LMTP",
                (true, false) => "LMTPS",
                (false, true) => "LMTPA",
                (true, true) => "LMTPSA",
            };
        }
        match (extended, self.tls, self.user.is_some()) {
            (false, _, _) => "SMTP",
            (true, false, false) => "ESMTP",
            (true, true, false) => "ESMTPS",
            (true, false, true) => "ESMTPA",
            (true, true, true) => "ESMTPSA",
        }
    }

    /// The session's configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }
}

/// What the DATA decoder found in one call.
#[derive(Clone, Copy)]
enum Piece<'b> {
    Data(&'b [u8]),
    More,
    End(Result<u64, Error>),
}

/// Decodes until some message data, the end of the input, or the end of the message.
fn read_message<'b>(decoder: &mut DataDecoder, input: &'b [u8]) -> (usize, Piece<'b>) {
    let mut consumed = 0;
    loop {
        let piece = decoder.decode(&input[consumed..]);
        consumed += piece.consumed;
        if piece.done {
            return (consumed, Piece::End(decoder.outcome()));
        }
        if !piece.data.is_empty() {
            return (consumed, Piece::Data(piece.data));
        }
        if piece.consumed == 0 {
            return (consumed, Piece::More);
        }
    }
}

fn step(consumed: usize, event: Event<'_>) -> Step<'_> {
    Step { consumed, event }
}

fn standard_acceptance(pending: &Pending) -> Reply {
    let ok = |detail| Reply::new(250, EnhancedStatus::new(2, 1, detail), "Ok");
    match pending {
        Pending::Mail => ok(0),
        Pending::Rcpt(_) => ok(5),
        Pending::Data(_) => Reply::plain(354, "End data with <CR><LF>.<CR><LF>"),
        Pending::Message { .. } => Reply::new(250, EnhancedStatus::new(2, 0, 0), "Ok"),
        Pending::Auth { .. } => Reply::new(
            235,
            EnhancedStatus::new(2, 7, 0),
            "Authentication successful",
        ),
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod split_tests;

#[cfg(test)]
mod lmtp_tests;
