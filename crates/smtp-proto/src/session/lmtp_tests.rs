//! LMTP conversations (RFC 2033): LHLO, HELO/EHLO refused, one reply per accepted
//! recipient after the message, pipelining, refused messages, capabilities.

use std::sync::Arc;

use super::*;
use crate::address::Domain;
use crate::command::{Command, Verb, parse_command, parse_command_in};

const OURS: &str = "ours.example";

/// A store host without sockets: `ann` and `bob` are users, `full` is a user whose
/// mailbox refuses the message (over quota), anyone else is unknown.
struct Store {
    session: Session,
    buffer: Vec<u8>,
    out: Vec<u8>,
    /// The accepted RCPTs of the transaction, in order.
    accepted: Vec<String>,
    current: Vec<u8>,
    delivered: Vec<(String, Vec<u8>)>,
    closed: bool,
}

fn lmtp_config() -> Config {
    Config {
        auth: AuthPolicy::Disabled,
        dialect: Dialect::Lmtp,
        ..Config::default()
    }
}

impl Store {
    fn new(config: Config) -> Store {
        let mut session = Session::new(Arc::new(config));
        let mut out = Vec::new();
        session.greeting().write_to(&mut out);
        Store {
            session,
            buffer: Vec::new(),
            out,
            accepted: Vec::new(),
            current: Vec::new(),
            delivered: Vec::new(),
            closed: false,
        }
    }

    fn receive(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
        while !self.closed {
            let buffer = std::mem::take(&mut self.buffer);
            let step = self.session.advance(&buffer);
            let done = matches!(step.event, Event::NeedMore);
            self.handle(step.event);
            self.buffer = buffer[step.consumed..].to_vec();
            if done {
                break;
            }
        }
    }

    fn handle(&mut self, event: Event<'_>) {
        let decision = match event {
            Event::NeedMore => return,
            Event::Action(action) => return self.perform(action),
            Event::MessageData(data) => return self.current.extend_from_slice(data),
            Event::MessageAborted { action, .. } => {
                self.current.clear();
                self.accepted.clear();
                return self.perform(action);
            }
            Event::Mail { .. } => {
                self.accepted.clear();
                Decision::Accept
            }
            Event::Rcpt { to } => self.rcpt(&to),
            Event::Data | Event::Auth(_) => Decision::Accept,
            Event::MessageEnd { .. } => return self.deliver(),
        };
        let action = self.session.decide(decision);
        self.perform(action);
    }

    fn rcpt(&mut self, to: &ForwardPath) -> Decision {
        let ForwardPath::Mailbox(address) = to else {
            return Decision::Reject(Reply::user_unknown(to));
        };
        if address.domain() != &Domain::Name(OURS.to_owned()) {
            return Decision::Reject(Reply::new(550, EnhancedStatus::new(5, 1, 2), "not here"));
        }
        if !["ann", "bob", "full"].contains(&address.local()) {
            return Decision::Reject(Reply::user_unknown(to));
        }
        self.accepted.push(address.local().to_owned());
        Decision::Accept
    }

    /// One decision per accepted recipient, in order, as the session asks.
    fn deliver(&mut self) {
        let message = std::mem::take(&mut self.current);
        let accepted = std::mem::take(&mut self.accepted);
        assert_eq!(self.session.pending_decisions() as usize, accepted.len());
        for user in accepted {
            let decision = if user == "full" {
                Decision::Reject(Reply::new(
                    452,
                    EnhancedStatus::new(4, 2, 2),
                    format!("<{user}> full"),
                ))
            } else {
                self.delivered.push((user.clone(), message.clone()));
                Decision::AcceptWith(Reply::new(
                    250,
                    EnhancedStatus::new(2, 0, 0),
                    format!("<{user}> delivered"),
                ))
            };
            let action = self.session.decide(decision);
            self.perform(action);
        }
        assert_eq!(self.session.pending_decisions(), 0);
    }

    fn perform(&mut self, action: Action) {
        match action {
            Action::Reply(reply) => reply.write_to(&mut self.out),
            Action::Close(reply) => {
                reply.write_to(&mut self.out);
                self.closed = true;
            }
            Action::StartTls { .. } => panic!("STARTTLS is not offered over LMTP"),
        }
    }

    /// The last line of each reply after the greeting.
    fn replies(&self) -> Vec<String> {
        String::from_utf8(self.out.clone())
            .expect("ascii")
            .split("\r\n")
            .skip(1)
            .filter(|l| l.as_bytes().get(3) == Some(&b' '))
            .map(str::to_owned)
            .collect()
    }

    /// The codes of the final reply lines after the greeting.
    fn codes(&self) -> Vec<u16> {
        self.replies()
            .iter()
            .map(|l| l[..3].parse().expect("code"))
            .collect()
    }
}

/// A conversation fed in one write.
fn converse(writes: &[&[u8]]) -> Store {
    let mut store = Store::new(lmtp_config());
    for write in writes {
        store.receive(write);
    }
    store
}

#[test]
fn greeting_and_lhlo_capabilities() {
    let store = converse(&[b"LHLO mta.example\r\n"]);
    let text = String::from_utf8(store.out.clone()).expect("ascii");
    assert_eq!(
        text,
        "220 localhost LMTP\r\n250-localhost Hello mta.example\r\n250-PIPELINING\r\n\
         250-SIZE 10240000\r\n250-ENHANCEDSTATUSCODES\r\n250 8BITMIME\r\n"
    );
    assert_eq!(store.session.helo(), Some("mta.example"));
    assert_eq!(store.session.received_protocol(), "LMTP");
}

#[test]
fn helo_and_ehlo_are_refused_and_lhlo_is_needed() {
    let store = converse(&[
        b"EHLO mta.example\r\n",
        b"HELO mta.example\r\n",
        b"MAIL FROM:<a@b.example>\r\n",
        b"LHLO\r\n",
        b"LHLO mta.example\r\n",
        b"MAIL FROM:<a@b.example>\r\n",
    ]);
    let replies = store.replies();
    assert_eq!(replies[0], "500 5.5.1 Error: this is LMTP, use LHLO");
    assert_eq!(replies[1], "500 5.5.1 Error: this is LMTP, use LHLO");
    assert_eq!(replies[2], "503 5.5.1 Error: send LHLO first");
    assert_eq!(replies[3], "501 5.5.4 Syntax: LHLO hostname");
    assert_eq!(store.codes(), [500, 500, 503, 501, 250, 250]);
    assert_eq!(store.session.error_count(), 4);
}

#[test]
fn one_reply_per_accepted_recipient_in_order() {
    let store = converse(&[
        b"LHLO mta.example\r\n",
        b"MAIL FROM:<sender@far.example>\r\n",
        b"RCPT TO:<ann@ours.example>\r\n",
        b"RCPT TO:<nobody@ours.example>\r\n",
        b"RCPT TO:<full@ours.example>\r\n",
        b"RCPT TO:<x@elsewhere.example>\r\n",
        b"RCPT TO:<ann@ours.example>\r\n",
        b"RCPT TO:<bob@ours.example>\r\n",
        b"DATA\r\n",
        b"Subject: hi\r\n\r\nbody\r\n.\r\n",
        b"QUIT\r\n",
    ]);
    let replies = store.replies();
    let after_dot: Vec<&str> = replies[9..].iter().map(String::as_str).collect();
    assert_eq!(
        after_dot,
        [
            "250 2.0.0 <ann> delivered",
            "452 4.2.2 <full> full",
            "250 2.0.0 <ann> delivered",
            "250 2.0.0 <bob> delivered",
            "221 2.0.0 Bye",
        ]
    );
    assert_eq!(
        store.codes()[..9],
        [250, 250, 250, 550, 250, 550, 250, 250, 354]
    );
    let users: Vec<&str> = store.delivered.iter().map(|(u, _)| u.as_str()).collect();
    assert_eq!(users, ["ann", "ann", "bob"]);
    assert_eq!(store.delivered[0].1, b"Subject: hi\r\n\r\nbody\r\n");
    assert!(store.closed);
}

#[test]
fn pipelined_transaction_after_lhlo() {
    let store = converse(&[
        b"LHLO mta.example\r\n",
        b"MAIL FROM:<s@far.example>\r\nRCPT TO:<ann@ours.example>\r\nRCPT TO:<bob@ours.example>\r\nDATA\r\n",
        b"one\r\n.\r\nMAIL FROM:<s@far.example>\r\nRCPT TO:<bob@ours.example>\r\nDATA\r\n",
        b"two\r\n.\r\nQUIT\r\n",
    ]);
    assert_eq!(
        store.codes(),
        [250, 250, 250, 250, 354, 250, 250, 250, 250, 354, 250, 221]
    );
    assert_eq!(store.delivered.len(), 3);
    assert_eq!(store.delivered[2], ("bob".to_owned(), b"two\r\n".to_vec()));
}

#[test]
fn pipelining_before_lhlo_closes() {
    let store = converse(&[b"LHLO mta.example\r\nMAIL FROM:<s@far.example>\r\n"]);
    assert_eq!(store.codes(), [554]);
    assert!(store.closed);
}

#[test]
fn a_refused_message_is_refused_for_every_recipient() {
    let config = Config {
        limits: Limits {
            max_message_size: 10,
            ..Limits::default()
        },
        ..lmtp_config()
    };
    let mut store = Store::new(config);
    for write in [
        &b"LHLO mta.example\r\n"[..],
        b"MAIL FROM:<s@far.example>\r\n",
        b"RCPT TO:<ann@ours.example>\r\n",
        b"RCPT TO:<bob@ours.example>\r\n",
        b"RCPT TO:<full@ours.example>\r\n",
        b"DATA\r\n",
        b"this is longer than ten bytes\r\n.\r\n",
        b"RSET\r\n",
    ] {
        store.receive(write);
    }
    let replies = store.replies();
    assert_eq!(
        &replies[6..9],
        ["552 5.3.4 Message size exceeds fixed limit"; 3]
    );
    assert_eq!(replies[9], "250 2.0.0 Ok");
    assert!(store.delivered.is_empty());
    assert!(!store.closed);
}

#[test]
fn a_bare_lf_refuses_every_recipient_then_closes() {
    let store = converse(&[
        b"LHLO mta.example\r\n",
        b"MAIL FROM:<s@far.example>\r\n",
        b"RCPT TO:<ann@ours.example>\r\n",
        b"RCPT TO:<bob@ours.example>\r\n",
        b"DATA\r\n",
        b"smuggled\nline\r\n.\r\nRSET\r\n",
    ]);
    assert_eq!(&store.codes()[5..], [550, 550]);
    assert!(store.closed);
    assert!(store.session.is_closed());
}

#[test]
fn the_same_replies_whatever_the_reads() {
    let input: &[u8] =
        b"LHLO mta.example\r\nMAIL FROM:<s@far.example>\r\nRCPT TO:<ann@ours.example>\r\n\
        RCPT TO:<full@ours.example>\r\nDATA\r\nline\r\n..dot\r\n.\r\nQUIT\r\n";
    // The same session, but without the pipelining check (its outcome depends on
    // the reads by design).
    let config = || Config {
        reject_unauth_pipelining: false,
        ..lmtp_config()
    };
    let mut whole = Store::new(config());
    whole.receive(input);
    let mut bytes = Store::new(config());
    for b in input {
        bytes.receive(std::slice::from_ref(b));
    }
    assert_eq!(whole.out, bytes.out);
    assert_eq!(whole.codes(), [250, 250, 250, 250, 354, 250, 452, 221]);
    assert_eq!(whole.delivered[0].1, b"line\r\n.dot\r\n");
}

#[test]
fn lhlo_is_only_a_command_in_lmtp() {
    assert_eq!(parse_command(b"LHLO x"), Err(Error::UnknownCommand));
    assert_eq!(parse_command(b"LHLO"), Err(Error::UnknownCommand));
    assert_eq!(
        parse_command_in(b"lhlo x", Dialect::Lmtp),
        Ok(Command::Lhlo("x"))
    );
    assert_eq!(
        parse_command_in(b"LHLO", Dialect::Lmtp),
        Err(Error::Syntax(Verb::Lhlo))
    );
    assert_eq!(
        parse_command_in(b"EHLO x", Dialect::Lmtp),
        Ok(Command::Ehlo("x"))
    );
    // An SMTP session answers LHLO as before: an unknown command.
    let mut smtp = Store::new(Config::default());
    smtp.receive(b"LHLO x\r\n");
    assert_eq!(smtp.replies(), ["500 5.5.2 Error: command not recognized"]);
    assert_eq!(
        smtp.out.get(..20).map(<[u8]>::to_vec),
        Some(b"220 localhost ESMTP\r".to_vec())
    );
}

#[test]
fn help_names_lhlo() {
    let store = converse(&[b"HELP\r\n"]);
    let help = &store.replies()[0];
    assert!(
        help.starts_with("214 2.0.0 Commands: LHLO MAIL RCPT"),
        "{help}"
    );
    assert!(!help.contains("EHLO"), "{help}");
}

#[test]
fn data_without_valid_recipients() {
    let store = converse(&[
        b"LHLO mta.example\r\n",
        b"MAIL FROM:<s@far.example>\r\n",
        b"RCPT TO:<nobody@ours.example>\r\n",
        b"DATA\r\n",
    ]);
    assert_eq!(store.codes(), [250, 250, 550, 554]);
    assert_eq!(store.session.pending_decisions(), 0);
}
