//! One handler per command: state checks, then a response or an event.

use std::borrow::Cow;

use super::sasl;
use super::{Action, Credentials, Event, Session, State, messages};
use crate::Error;
use crate::command::{Command, Mechanism, Verb, parse_command};
use crate::encode::Retrieval;
use crate::listing::Maildrop;
use crate::response::Response;

/// The mechanisms offered, in the order advertised.
const MECHANISMS: [Mechanism; 1] = [Mechanism::Plain];

fn reply(response: Response) -> Event {
    Event::Action(Action::Reply(response))
}

/// `Maildrop has n messages (m octets)`, as RSET and a login answer.
pub(super) fn summary(maildrop: &Maildrop) -> String {
    let (count, size) = maildrop.stat();
    format!("Maildrop has {} ({size} octets)", messages(count))
}

impl Session {
    /// Parses and runs one command line; `after` is how many input bytes follow it.
    pub(super) fn command(&mut self, line: &[u8], after: usize) -> Event {
        let command = match parse_command(line) {
            Ok(command) => command,
            Err(error) => return self.refuse_event(error),
        };
        match command {
            Command::Capa => reply(self.capabilities()),
            Command::Quit => self.handle_quit(),
            Command::Stls => self.handle_stls(after),
            Command::Xclient(client) => self.handle_xclient(client),
            Command::User(name) => self.handle_user(name),
            Command::Pass(password) => self.handle_pass(password),
            Command::Auth {
                mechanism,
                initial_response,
            } => self.handle_auth(mechanism, initial_response),
            Command::Stat => self.transaction(Verb::Stat, handle_stat),
            Command::List(number) => self.transaction(Verb::List, |m| handle_list(m, number)),
            Command::Uidl(number) => self.transaction(Verb::Uidl, |m| handle_uidl(m, number)),
            Command::Retr(number) => self.transaction(Verb::Retr, |m| handle_retr(m, number, None)),
            Command::Top { number, lines } => {
                self.transaction(Verb::Top, |m| handle_retr(m, number, Some(lines)))
            }
            Command::Dele(number) => self.transaction(Verb::Dele, |m| handle_dele(m, number)),
            Command::Rset => self.transaction(Verb::Rset, handle_rset),
            Command::Noop => self.transaction(Verb::Noop, |_| Ok(reply(Response::ok("")))),
        }
    }

    /// Runs a TRANSACTION-state command on the maildrop, or refuses it.
    fn transaction(
        &mut self,
        verb: Verb,
        handle: impl FnOnce(&mut Maildrop) -> Result<Event, Error>,
    ) -> Event {
        let result = match &mut self.state {
            State::Transaction(maildrop) => handle(maildrop),
            _ => Err(Error::WrongState(verb)),
        };
        result.unwrap_or_else(|error| self.refuse_event(error))
    }

    /// Whether a password may be sent now: over TLS, or where clear text is allowed.
    fn login_allowed(&self) -> bool {
        self.tls || self.secure || !self.config.require_tls
    }

    /// The CAPA list (RFC 2449 §5). It does not depend on the state: what the
    /// AUTHORIZATION state offers must also be announced in TRANSACTION.
    fn capabilities(&self) -> Response {
        let mut lines: Vec<Cow<'static, str>> = vec![
            "TOP".into(),
            "UIDL".into(),
            "RESP-CODES".into(),
            "AUTH-RESP-CODE".into(),
            "PIPELINING".into(),
        ];
        if self.login_allowed() {
            lines.push("USER".into());
            if self.config.sasl_plain {
                let names: Vec<&str> = MECHANISMS.iter().map(|m| m.as_str()).collect();
                lines.push(format!("SASL {}", names.join(" ")).into());
            }
        }
        if self.config.stls && !self.tls {
            lines.push("STLS".into());
        }
        if let Some(delay) = self.config.login_delay {
            lines.push(format!("LOGIN-DELAY {delay}").into());
        }
        if self.forwarding {
            lines.push("XCLIENT".into());
        }
        lines.push("IMPLEMENTATION Stoa".into());
        Response::ok("Capability list follows").with_lines(lines)
    }

    fn handle_quit(&mut self) -> Event {
        match &self.state {
            State::Transaction(maildrop) => {
                let deleted = maildrop.deleted();
                let (left, _) = maildrop.stat();
                self.state = State::Update { left };
                Event::Quit { deleted }
            }
            // QUIT before login does not enter UPDATE: there is nothing to update.
            _ => {
                self.state = State::Closed;
                Event::Action(Action::Close(self.sign_off(None)))
            }
        }
    }

    fn handle_stls(&mut self, after: usize) -> Event {
        let refusal = if !self.config.stls {
            Some(Error::StlsUnavailable)
        } else if self.tls {
            Some(Error::TlsActive)
        } else if !matches!(self.state, State::Authorization { .. }) {
            Some(Error::WrongState(Verb::Stls))
        } else {
            None
        };
        if let Some(error) = refusal {
            return self.refuse_event(error);
        }
        // RFC 2595 §4: forget what was said in clear text.
        self.tls = true;
        self.state = State::Authorization { user: None };
        Event::Action(Action::StartTls {
            response: Response::ok("Begin TLS negotiation"),
            discarded: after,
        })
    }

    /// `XCLIENT`: only from a trusted proxy, once, before USER or AUTH.
    fn handle_xclient(&mut self, client: crate::Forwarded) -> Event {
        let refusal = if !self.forwarding {
            Error::ForwardingRefused
        } else if self.forwarded || !matches!(self.state, State::Authorization { user: None }) {
            Error::WrongState(Verb::Xclient)
        } else {
            self.forwarded = true;
            return Event::Action(Action::Forward {
                client,
                response: Response::ok("Forwarded"),
            });
        };
        self.refuse_event(refusal)
    }

    fn handle_user(&mut self, name: &str) -> Event {
        let refusal = if !matches!(self.state, State::Authorization { .. }) {
            Error::WrongState(Verb::User)
        } else if !self.login_allowed() {
            Error::TlsRequired
        } else {
            // Same answer whether the user exists or not.
            self.state = State::Authorization {
                user: Some(name.to_owned()),
            };
            return reply(Response::ok("Send PASS"));
        };
        self.refuse_event(refusal)
    }

    fn handle_pass(&mut self, password: &str) -> Event {
        let allowed = self.login_allowed();
        let refusal = match &mut self.state {
            State::Authorization { .. } if !allowed => Error::TlsRequired,
            State::Authorization { user } => match user.take() {
                Some(user) => {
                    return self.credentials(Ok(Credentials {
                        authzid: None,
                        username: user,
                        password: password.to_owned(),
                    }));
                }
                None => Error::NeedUser,
            },
            _ => Error::WrongState(Verb::Pass),
        };
        self.refuse_event(refusal)
    }

    fn handle_auth(&mut self, mechanism: Option<Mechanism>, initial: Option<&str>) -> Event {
        let refusal = if !matches!(self.state, State::Authorization { .. }) {
            Some(Error::WrongState(Verb::Auth))
        } else if !self.config.sasl_plain {
            Some(Error::AuthUnavailable)
        } else if !self.login_allowed() {
            Some(Error::TlsRequired)
        } else {
            None
        };
        if let Some(error) = refusal {
            return self.refuse_event(error);
        }
        match (mechanism, initial) {
            // A bare AUTH lists the mechanisms (RFC 1734's form, still sent by
            // clients that predate CAPA).
            (None, _) => {
                let names = MECHANISMS.iter().map(|m| m.as_str().into()).collect();
                reply(Response::ok("").with_lines(names))
            }
            (Some(Mechanism::Plain), None) => {
                self.state = State::Sasl;
                reply(Response::continuation(""))
            }
            (Some(Mechanism::Plain), Some(response)) => {
                let decoded = sasl::decode(response.as_bytes(), true).and_then(|r| sasl::plain(&r));
                self.credentials(decoded)
            }
        }
    }

    /// The client's response line to AUTH PLAIN's challenge.
    pub(super) fn sasl_line(&mut self, line: &[u8]) -> Event {
        self.state = State::Authorization { user: None };
        if line == b"*" {
            return self.refuse_event(Error::AuthAborted);
        }
        let decoded = sasl::decode(line, false).and_then(|r| sasl::plain(&r));
        self.credentials(decoded)
    }

    /// Hands complete credentials to the server, or refuses a malformed response.
    fn credentials(&mut self, decoded: Result<Credentials, Error>) -> Event {
        match decoded {
            Ok(credentials) => {
                self.state = State::PendingLogin {
                    user: credentials.username.clone(),
                };
                Event::Auth(credentials)
            }
            Err(error) => {
                self.state = State::Authorization { user: None };
                self.refuse_event(error)
            }
        }
    }
}

/// `+OK n messages-size`: what is not marked deleted.
fn handle_stat(maildrop: &mut Maildrop) -> Result<Event, Error> {
    let (count, size) = maildrop.stat();
    Ok(reply(Response::ok(format!("{count} {size}"))))
}

fn handle_list(maildrop: &mut Maildrop, number: Option<usize>) -> Result<Event, Error> {
    let response = match number {
        Some(number) => {
            let index = maildrop.index(number)?;
            Response::ok(format!("{number} {}", maildrop.entry(index).size))
        }
        None => {
            let (count, size) = maildrop.stat();
            let lines = maildrop
                .live()
                .map(|(i, entry)| format!("{} {}", i + 1, entry.size).into())
                .collect();
            Response::ok(format!("{} ({size} octets)", messages(count))).with_lines(lines)
        }
    };
    Ok(reply(response))
}

fn handle_uidl(maildrop: &mut Maildrop, number: Option<usize>) -> Result<Event, Error> {
    let response = match number {
        Some(number) => {
            let index = maildrop.index(number)?;
            Response::ok(format!("{number} {}", maildrop.entry(index).uid))
        }
        None => {
            let lines = maildrop
                .live()
                .map(|(i, entry)| format!("{} {}", i + 1, entry.uid).into())
                .collect();
            Response::ok("").with_lines(lines)
        }
    };
    Ok(reply(response))
}

fn handle_retr(
    maildrop: &mut Maildrop,
    number: usize,
    top_lines: Option<u32>,
) -> Result<Event, Error> {
    let index = maildrop.index(number)?;
    Ok(Event::Retrieve(Retrieval {
        index,
        size: maildrop.entry(index).size,
        top_lines,
    }))
}

fn handle_dele(maildrop: &mut Maildrop, number: usize) -> Result<Event, Error> {
    maildrop.delete(number)?;
    Ok(reply(Response::ok(format!("Message {number} deleted"))))
}

fn handle_rset(maildrop: &mut Maildrop) -> Result<Event, Error> {
    maildrop.reset();
    Ok(reply(Response::ok(summary(maildrop))))
}
