//! One handler per command: sequence checks, then a reply or an event.

use super::sasl;
use super::{Action, AuthPolicy, Dialect, Event, Helo, Pending, Sasl, Session, State, Transaction};
use crate::Error;
use crate::address::{ForwardPath, ReversePath};
use crate::command::{Command, MailParams, Mechanism, Verb, parse_command_in};
use crate::reply::{Capabilities, EnhancedStatus, Reply};

/// The mechanisms offered, in the order advertised.
const MECHANISMS: [Mechanism; 2] = [Mechanism::Plain, Mechanism::Login];

/// LOGIN's challenges, base64 of `Username:` and `Password:`.
const LOGIN_USERNAME: &str = "VXNlcm5hbWU6";
const LOGIN_PASSWORD: &str = "UGFzc3dvcmQ6";

fn ok(detail: u16) -> Reply {
    Reply::new(250, EnhancedStatus::new(2, 0, detail), "Ok")
}

impl Session {
    /// Parses and runs one command line; `after` is how many input bytes follow it.
    pub(super) fn command(&mut self, line: &[u8], after: usize) -> Event<'static> {
        let command = match parse_command_in(line, self.config.dialect) {
            Ok(command) => command,
            Err(error) => return self.refuse_event(error),
        };
        let verb = command.verb();
        let extended = self.helo.as_ref().is_some_and(|h| h.extended);
        if self.config.reject_unauth_pipelining && after > 0 && (verb.ends_group() || !extended) {
            return self.refuse_event(Error::Pipelining);
        }
        match command {
            Command::Ehlo(name) => self.handle_helo(name, true),
            Command::Helo(name) => self.handle_helo(name, false),
            Command::Lhlo(name) => self.handle_lhlo(name),
            Command::Mail { from, params } => self.handle_mail(from, params),
            Command::Rcpt { to } => self.handle_rcpt(to),
            Command::Data => self.handle_data(),
            Command::Rset => self.handle_rset(),
            Command::Noop => self.junk(ok(0)),
            Command::Quit => self.handle_quit(),
            Command::Vrfy(_) => self.junk(Reply::new(
                252,
                EnhancedStatus::new(2, 0, 0),
                "Cannot VRFY user, but will accept message and attempt delivery",
            )),
            Command::Expn(_) => self.refuse_event(Error::NotImplemented),
            Command::Help(_) => self.junk(help(self.config.dialect)),
            Command::StartTls => self.handle_starttls(after),
            Command::Auth {
                mechanism,
                initial_response,
            } => self.handle_auth(mechanism, initial_response),
        }
    }

    /// A command that does nothing: answered, but counted as an error past the junk
    /// limit.
    fn junk(&mut self, reply: Reply) -> Event<'static> {
        self.junk += 1;
        if self.junk > self.config.limits.max_junk_commands {
            self.errors += 1;
        }
        Event::Action(Action::Reply(reply))
    }

    fn handle_helo(&mut self, name: &str, extended: bool) -> Event<'static> {
        if self.config.dialect == Dialect::Lmtp {
            return self.refuse_event(Error::UseLhlo);
        }
        self.greet(name, extended)
    }

    /// LHLO: EHLO under another name (the parser only yields it in LMTP).
    fn handle_lhlo(&mut self, name: &str) -> Event<'static> {
        self.greet(name, true)
    }

    /// The error for a command that needs HELO, EHLO or LHLO first.
    fn need_helo(&self) -> Error {
        match self.config.dialect {
            Dialect::Smtp => Error::NeedHelo,
            Dialect::Lmtp => Error::NeedLhlo,
        }
    }

    fn greet(&mut self, name: &str, extended: bool) -> Event<'static> {
        // RFC 5321 §4.1.4: HELO/EHLO ends any transaction, like RSET.
        self.state = State::Idle;
        self.helo = Some(Helo {
            name: name.to_owned(),
            extended,
        });
        let hostname = &self.config.hostname;
        let reply = if extended {
            self.capabilities().ehlo_reply(hostname, name)
        } else {
            Reply::plain(250, hostname.clone())
        };
        Event::Action(Action::Reply(reply))
    }

    /// What EHLO advertises now: STARTTLS until TLS is on, AUTH where the policy allows
    /// it and nobody has logged in yet.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            size: Some(self.config.limits.max_message_size),
            pipelining: true,
            eight_bit_mime: true,
            enhanced_status_codes: true,
            starttls: self.config.starttls && !self.tls,
            auth: if self.auth_offered() {
                MECHANISMS.to_vec()
            } else {
                Vec::new()
            },
        }
    }

    fn auth_offered(&self) -> bool {
        self.user.is_none()
            && match self.config.auth {
                AuthPolicy::Disabled => false,
                AuthPolicy::AfterTls => self.tls,
                AuthPolicy::Always => true,
            }
    }

    fn handle_mail(&mut self, from: ReversePath, params: MailParams) -> Event<'static> {
        let refusal = if self.helo.is_none() {
            Some(self.need_helo())
        } else if matches!(self.state, State::Transaction(_)) {
            Some(Error::NestedMail)
        } else if self.config.require_tls && !self.tls {
            Some(Error::TlsRequired)
        } else if self.config.require_auth && self.user.is_none() {
            Some(Error::AuthRequired)
        } else if params
            .size
            .is_some_and(|s| s > self.config.limits.max_message_size)
        {
            Some(Error::MessageTooLarge)
        } else {
            None
        };
        if let Some(error) = refusal {
            return self.refuse_event(error);
        }
        self.state = State::Pending(Pending::Mail);
        Event::Mail { from, params }
    }

    fn handle_rcpt(&mut self, to: ForwardPath) -> Event<'static> {
        let State::Transaction(transaction) = self.state else {
            return self.refuse_event(Error::NeedMail);
        };
        if transaction.accepted >= self.config.limits.max_recipients {
            return self.refuse_event(Error::TooManyRecipients);
        }
        self.state = State::Pending(Pending::Rcpt(transaction));
        Event::Rcpt { to }
    }

    fn handle_data(&mut self) -> Event<'static> {
        let transaction = match self.state {
            State::Transaction(Transaction {
                accepted: 0,
                rejected: 0,
            }) => {
                return self.refuse_event(Error::NeedRcpt);
            }
            State::Transaction(Transaction { accepted: 0, .. }) => {
                return self.refuse_event(Error::NoValidRecipients);
            }
            State::Transaction(t) => t,
            _ => return self.refuse_event(Error::NeedMail),
        };
        self.state = State::Pending(Pending::Data(transaction));
        Event::Data
    }

    fn handle_rset(&mut self) -> Event<'static> {
        self.state = State::Idle;
        self.junk(ok(0))
    }

    fn handle_quit(&mut self) -> Event<'static> {
        self.state = State::Closed;
        let reply = Reply::new(221, EnhancedStatus::new(2, 0, 0), "Bye");
        Event::Action(Action::Close(reply))
    }

    fn handle_starttls(&mut self, after: usize) -> Event<'static> {
        let refusal = if !self.config.starttls {
            Some(Error::NotImplemented)
        } else if self.tls {
            Some(Error::TlsActive)
        } else if self.helo.is_none() {
            Some(self.need_helo())
        } else if matches!(self.state, State::Transaction(_)) {
            Some(Error::InTransaction)
        } else {
            None
        };
        if let Some(error) = refusal {
            return self.refuse_event(error);
        }
        // RFC 3207 §4.2: forget everything learnt in clear text.
        self.tls = true;
        self.helo = None;
        self.user = None;
        self.state = State::Idle;
        Event::Action(Action::StartTls {
            reply: Reply::new(220, EnhancedStatus::new(2, 0, 0), "Ready to start TLS"),
            discarded: after,
        })
    }

    fn handle_auth(&mut self, mechanism: Mechanism, initial: Option<&str>) -> Event<'static> {
        let refusal = match &self.helo {
            None => Some(self.need_helo()),
            Some(helo) if !helo.extended => Some(Error::NeedEhlo),
            Some(_) if self.user.is_some() => Some(Error::AlreadyAuthenticated),
            Some(_) if matches!(self.state, State::Transaction(_)) => Some(Error::InTransaction),
            Some(_) => match self.config.auth {
                AuthPolicy::Disabled => Some(Error::AuthUnavailable),
                AuthPolicy::AfterTls if !self.tls => Some(Error::AuthNeedsTls),
                AuthPolicy::AfterTls | AuthPolicy::Always => None,
            },
        };
        if let Some(error) = refusal {
            return self.refuse_event(error);
        }
        match (mechanism, initial) {
            (Mechanism::Plain, None) => self.challenge(Sasl::Plain, ""),
            (Mechanism::Login, None) => self.challenge(Sasl::LoginUsername, LOGIN_USERNAME),
            (Mechanism::Plain, Some(response)) => {
                let decoded = sasl::decode(response.as_bytes(), true).and_then(|r| sasl::plain(&r));
                self.credentials(decoded)
            }
            (Mechanism::Login, Some(response)) => {
                match sasl::decode(response.as_bytes(), true).and_then(sasl::text) {
                    Ok(username) => {
                        self.challenge(Sasl::LoginPassword { username }, LOGIN_PASSWORD)
                    }
                    Err(error) => self.refuse_event(error),
                }
            }
        }
    }

    /// Sends a `334` challenge and waits for the client's response line.
    fn challenge(&mut self, next: Sasl, text: &'static str) -> Event<'static> {
        self.state = State::Sasl(next);
        Event::Action(Action::Reply(Reply::plain(334, text)))
    }

    /// Hands complete credentials to the server, or refuses a malformed response.
    fn credentials(&mut self, decoded: Result<super::Credentials, Error>) -> Event<'static> {
        match decoded {
            Ok(credentials) => {
                self.state = State::Pending(Pending::Auth {
                    username: credentials.username.clone(),
                });
                Event::Auth(credentials)
            }
            Err(error) => {
                self.state = State::Idle;
                self.refuse_event(error)
            }
        }
    }

    /// One client line of the SASL exchange.
    pub(super) fn sasl_line(&mut self, line: &[u8]) -> Event<'static> {
        let State::Sasl(exchange) = std::mem::replace(&mut self.state, State::Idle) else {
            return self.refuse_event(Error::AuthAborted);
        };
        if line == b"*" {
            return self.refuse_event(Error::AuthAborted);
        }
        match exchange {
            Sasl::Plain => {
                let decoded = sasl::decode(line, false).and_then(|r| sasl::plain(&r));
                self.credentials(decoded)
            }
            Sasl::LoginUsername => match sasl::decode(line, false).and_then(sasl::text) {
                Ok(username) => self.challenge(Sasl::LoginPassword { username }, LOGIN_PASSWORD),
                Err(error) => self.refuse_event(error),
            },
            Sasl::LoginPassword { username } => {
                let decoded = sasl::decode(line, false)
                    .and_then(sasl::text)
                    .map(|password| super::Credentials {
                        authzid: None,
                        username,
                        password,
                    });
                self.credentials(decoded)
            }
        }
    }
}

fn help(dialect: Dialect) -> Reply {
    let status = EnhancedStatus::new(2, 0, 0);
    let greetings: &[Verb] = match dialect {
        Dialect::Smtp => &[Verb::Ehlo, Verb::Helo],
        Dialect::Lmtp => &[Verb::Lhlo],
    };
    let verbs: Vec<&str> = greetings
        .iter()
        .chain(&[
            Verb::Mail,
            Verb::Rcpt,
            Verb::Data,
            Verb::Rset,
            Verb::Noop,
            Verb::Quit,
            Verb::Vrfy,
            Verb::StartTls,
            Verb::Auth,
        ])
        .map(|v| v.as_str())
        .collect();
    Reply::new(214, status, format!("Commands: {}", verbs.join(" ")))
}
