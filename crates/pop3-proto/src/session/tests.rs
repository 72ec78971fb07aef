//! Scripted conversations through [`Session`], driven the way a server drives it.

use std::sync::Arc;

use super::*;
use crate::listing::Entry;

/// The test mailbox: a dot-stuffing case, a multi-line body, and a message whose
/// last line has no CRLF.
pub(super) fn mailbox() -> Vec<Vec<u8>> {
    vec![
        b"Subject: one\r\n\r\nHello\r\n.dot line\r\n".to_vec(),
        b"Subject: two\r\nX: y\r\n\r\nbody 1\r\nbody 2\r\nbody 3\r\n".to_vec(),
        b"Subject: three\r\n\r\n.\r\nno final CRLF".to_vec(),
    ]
}

/// A server without sockets: it buffers input, advances the session until it needs
/// more, answers events with a fixed policy, and records everything.
#[derive(Debug)]
pub(super) struct Server {
    pub(super) session: Session,
    buffer: Vec<u8>,
    /// Everything written to the client.
    pub(super) out: Vec<u8>,
    /// The status line of every response, in order.
    pub(super) responses: Vec<String>,
    /// Events and decisions, one line each.
    pub(super) log: Vec<String>,
    /// The messages in the store (removed at a committed QUIT).
    pub(super) store: Vec<Vec<u8>>,
    /// Bytes per read when streaming a message through the encoder.
    pub(super) chunk: usize,
    /// Make the UPDATE fail.
    pub(super) fail_update: bool,
    pub(super) closed: bool,
}

impl Server {
    pub(super) fn new(config: Config) -> Server {
        let session = Session::new(Arc::new(config));
        let mut server = Server {
            buffer: Vec::new(),
            out: Vec::new(),
            responses: Vec::new(),
            log: Vec::new(),
            store: mailbox(),
            chunk: 3,
            fail_update: false,
            closed: false,
            session,
        };
        let greeting = server.session.greeting();
        server.write(&greeting);
        server
    }

    /// Receives `bytes` (one read) and processes everything it can.
    pub(super) fn receive(&mut self, bytes: &[u8]) {
        if self.closed {
            return;
        }
        self.buffer.extend_from_slice(bytes);
        while !self.closed {
            let buffer = std::mem::take(&mut self.buffer);
            let step = self.session.advance(&buffer);
            assert!(step.consumed <= buffer.len());
            let done = step.event == Event::NeedMore;
            self.handle(step.event);
            self.buffer = buffer[step.consumed..].to_vec();
            if done {
                break;
            }
        }
    }

    fn write(&mut self, response: &Response) {
        self.responses.push(response.to_string());
        response.write_to(&mut self.out);
    }

    fn handle(&mut self, event: Event) {
        let action = match event {
            Event::NeedMore => return,
            Event::Action(action) => action,
            Event::Auth(credentials) => {
                self.log.push(format!("AUTH {}", credentials.username));
                let decision = self.login(&credentials);
                self.session.decide_login(decision)
            }
            Event::Retrieve(retrieval) => return self.retrieve(retrieval),
            Event::Quit { deleted } => {
                self.log.push(format!("QUIT {deleted:?}"));
                let outcome = if self.fail_update {
                    UpdateOutcome::Failed
                } else {
                    for &index in deleted.iter().rev() {
                        self.store.remove(index);
                    }
                    UpdateOutcome::Committed
                };
                self.session.decide_update(outcome)
            }
        };
        self.perform(action);
    }

    /// joe/secret logs in; `busy`, `early`, `broken` and `banned` get the other
    /// refusals; anything else is a wrong password.
    fn login(&self, credentials: &Credentials) -> LoginDecision {
        match (credentials.username.as_str(), credentials.password.as_str()) {
            ("joe", "secret") => {
                let entries = self
                    .store
                    .iter()
                    .enumerate()
                    .map(|(i, m)| Entry {
                        size: m.len() as u64,
                        uid: format!("uid-{}", i + 1),
                    })
                    .collect();
                LoginDecision::Accept(Listing::new(entries).expect("valid uids"))
            }
            ("busy", _) => LoginDecision::InUse,
            ("early", _) => LoginDecision::LoginDelay,
            ("broken", _) => LoginDecision::TemporaryFailure,
            ("banned", _) => LoginDecision::PermanentFailure,
            _ => LoginDecision::BadCredentials,
        }
    }

    /// Streams the message through the encoder, `chunk` bytes at a time.
    fn retrieve(&mut self, retrieval: Retrieval) {
        self.log.push(match retrieval.top_lines {
            None => format!("RETR {}", retrieval.number()),
            Some(n) => format!("TOP {} {n}", retrieval.number()),
        });
        let message = self.store[retrieval.index].clone();
        assert_eq!(retrieval.size, message.len() as u64);
        self.write(&retrieval.response());
        let mut encoder = retrieval.encoder();
        for piece in message.chunks(self.chunk.max(1)) {
            if !encoder.encode(piece, &mut self.out) {
                break;
            }
        }
        encoder.finish(&mut self.out);
    }

    fn perform(&mut self, action: Action) {
        match action {
            Action::Reply(response) => self.write(&response),
            Action::Close(response) => {
                self.write(&response);
                self.log.push("CLOSE".to_owned());
                self.closed = true;
            }
            Action::StartTls {
                response,
                discarded,
            } => {
                self.write(&response);
                self.log.push(format!("STLS {discarded}"));
            }
            Action::Forward { client, response } => {
                self.log
                    .push(format!("FORWARD {} {:?}", client.addr, client.port));
                self.write(&response);
            }
            Action::LoginFailed { response, close } => {
                self.log.push("LOGIN FAILED".to_owned());
                self.write(&response);
                if close {
                    self.log.push("CLOSE".to_owned());
                    self.closed = true;
                }
            }
        }
    }

    /// `+OK`, `-ERR` or `+` of each response after the greeting.
    pub(super) fn statuses(&self) -> Vec<&str> {
        self.responses[1..]
            .iter()
            .map(|r| r.split(' ').next().unwrap_or_default())
            .collect()
    }

    /// The wire output after the greeting, as text.
    pub(super) fn transcript(&self) -> String {
        let text = String::from_utf8(self.out.clone()).expect("ascii output");
        let greeting_end = text.find("\r\n").expect("greeting") + 2;
        text[greeting_end..].to_owned()
    }
}

/// Runs `writes` (each one read on the server) and returns the server.
pub(super) fn converse(config: Config, writes: &[&[u8]]) -> Server {
    let mut server = Server::new(config);
    for write in writes {
        server.receive(write);
    }
    server
}

/// Clear-text logins allowed, STLS offered.
pub(super) fn plain_config() -> Config {
    Config {
        require_tls: false,
        stls: true,
        ..Config::default()
    }
}

const LOGIN: &[u8] = b"USER joe\r\nPASS secret\r\n";

#[test]
fn greeting_has_no_apop_timestamp() {
    let server = Server::new(Config::default());
    assert_eq!(server.out, b"+OK localhost POP3 server ready\r\n");
}

/// Conversations as (name, writes, statuses after the greeting, events).
#[test]
fn state_rules() {
    type Case<'a> = (&'a str, &'a [&'a [u8]], &'a [&'a str], &'a [&'a str]);
    let cases: &[Case<'_>] = &[
        (
            "login, STAT, QUIT",
            &[LOGIN, b"STAT\r\n", b"QUIT\r\n"],
            &["+OK", "+OK", "+OK", "+OK"],
            &["AUTH joe", "QUIT []", "CLOSE"],
        ),
        (
            "transaction commands before login",
            &[
                b"STAT\r\nLIST\r\nLIST 1\r\nUIDL\r\nRETR 1\r\nTOP 1 0\r\nDELE 1\r\nRSET\r\nNOOP\r\n",
            ],
            &["-ERR"; 9],
            &[],
        ),
        (
            "PASS without USER",
            &[b"PASS secret\r\n"],
            &["-ERR"],
            &[],
        ),
        (
            "login commands after login",
            &[
                LOGIN,
                b"USER joe\r\nPASS secret\r\nAUTH PLAIN AGpvZQBzZWNyZXQ=\r\nSTLS\r\n",
            ],
            &["+OK", "+OK", "-ERR", "-ERR", "-ERR", "-ERR"],
            &["AUTH joe"],
        ),
        (
            "QUIT in AUTHORIZATION does not enter UPDATE",
            &[b"USER joe\r\n", b"QUIT\r\n"],
            &["+OK", "+OK"],
            &["CLOSE"],
        ),
        (
            "wrong password, then the right one",
            &[b"USER joe\r\nPASS wrong\r\n", b"PASS secret\r\n", LOGIN],
            &["+OK", "-ERR", "-ERR", "+OK", "+OK"],
            &["AUTH joe", "LOGIN FAILED", "AUTH joe"],
        ),
        (
            "server refusals leave the session in AUTHORIZATION",
            &[
                b"USER busy\r\nPASS x\r\nUSER early\r\nPASS x\r\n",
                b"USER broken\r\nPASS x\r\nUSER banned\r\nPASS x\r\n",
                LOGIN,
            ],
            &[
                "+OK", "-ERR", "+OK", "-ERR", "+OK", "-ERR", "+OK", "-ERR", "+OK", "+OK",
            ],
            &[
                "AUTH busy",
                "AUTH early",
                "AUTH broken",
                "AUTH banned",
                "AUTH joe",
            ],
        ),
        (
            "DELE twice, RETR and TOP of a deleted message",
            &[LOGIN, b"DELE 1\r\nDELE 1\r\nRETR 1\r\nTOP 1 0\r\nLIST 1\r\nUIDL 1\r\n"],
            &["+OK", "+OK", "+OK", "-ERR", "-ERR", "-ERR", "-ERR", "-ERR"],
            &["AUTH joe"],
        ),
        (
            "message numbers out of range",
            &[
                LOGIN,
                b"RETR 0\r\nRETR 4\r\nDELE 99999999999999999999999\r\nLIST 4\r\nTOP 0 1\r\n",
            ],
            &["+OK", "+OK", "-ERR", "-ERR", "-ERR", "-ERR", "-ERR"],
            &["AUTH joe"],
        ),
        (
            "RETR and TOP",
            &[LOGIN, b"RETR 3\r\nTOP 2 1\r\n"],
            &["+OK", "+OK", "+OK", "+OK"],
            &["AUTH joe", "RETR 3", "TOP 2 1"],
        ),
        (
            "RSET unmarks",
            &[LOGIN, b"DELE 2\r\nRSET\r\nRETR 2\r\nQUIT\r\n"],
            &["+OK", "+OK", "+OK", "+OK", "+OK", "+OK"],
            &["AUTH joe", "RETR 2", "QUIT []", "CLOSE"],
        ),
        (
            "QUIT reports the deletions, in order",
            &[LOGIN, b"DELE 3\r\nDELE 1\r\nQUIT\r\n"],
            &["+OK", "+OK", "+OK", "+OK", "+OK"],
            &["AUTH joe", "QUIT [0, 2]", "CLOSE"],
        ),
        (
            "unknown commands",
            &[b"APOP joe 0123456789abcdef\r\nLAST\r\n"],
            &["-ERR", "-ERR"],
            &[],
        ),
    ];
    for (name, writes, statuses, log) in cases {
        let server = converse(plain_config(), writes);
        assert_eq!(
            server.statuses(),
            *statuses,
            "{name}: {:#?}",
            server.responses
        );
        assert_eq!(server.log, *log, "{name}");
    }
}

#[test]
fn stat_list_uidl_exclude_deleted_messages() {
    let server = converse(
        plain_config(),
        &[
            LOGIN,
            b"STAT\r\nDELE 2\r\nSTAT\r\nLIST\r\nUIDL\r\nLIST 3\r\nUIDL 3\r\n",
        ],
    );
    let sizes: Vec<usize> = mailbox().iter().map(Vec::len).collect();
    let (s1, s3) = (sizes[0], sizes[2]);
    let total: usize = sizes.iter().sum();
    let expected = format!(
        "+OK Send PASS\r\n+OK Logged in. Maildrop has 3 messages ({total} octets)\r\n\
         +OK 3 {total}\r\n+OK Message 2 deleted\r\n+OK 2 {}\r\n\
         +OK 2 messages ({} octets)\r\n1 {s1}\r\n3 {s3}\r\n.\r\n\
         +OK\r\n1 uid-1\r\n3 uid-3\r\n.\r\n+OK 3 {s3}\r\n+OK 3 uid-3\r\n",
        s1 + s3,
        s1 + s3,
    );
    assert_eq!(server.transcript(), expected);
}

#[test]
fn retrieved_messages_are_stuffed_and_terminated() {
    let server = converse(
        plain_config(),
        &[
            LOGIN,
            b"RETR 1\r\nRETR 3\r\nTOP 2 0\r\nTOP 2 2\r\nTOP 3 5\r\n",
        ],
    );
    let transcript = server.transcript();
    let after_login = &transcript[transcript.find("octets)\r\n").expect("login") + 9..];
    assert_eq!(
        after_login,
        "+OK 34 octets\r\nSubject: one\r\n\r\nHello\r\n..dot line\r\n.\r\n\
         +OK 34 octets\r\nSubject: three\r\n\r\n..\r\nno final CRLF\r\n.\r\n\
         +OK Top of message follows\r\nSubject: two\r\nX: y\r\n\r\n.\r\n\
         +OK Top of message follows\r\nSubject: two\r\nX: y\r\n\r\nbody 1\r\nbody 2\r\n.\r\n\
         +OK Top of message follows\r\nSubject: three\r\n\r\n..\r\nno final CRLF\r\n.\r\n"
    );
}

#[test]
fn quit_applies_deletions_and_signs_off() {
    let server = converse(plain_config(), &[LOGIN, b"DELE 1\r\nDELE 3\r\nQUIT\r\n"]);
    assert_eq!(server.store, [mailbox()[1].clone()]);
    assert_eq!(
        server.responses.last().map(String::as_str),
        Some("+OK localhost POP3 server signing off (1 message left)")
    );
    assert!(server.closed && server.session.is_closed());
    assert_eq!(server.session.phase(), Phase::Closed);
    // Everything deleted.
    let server = converse(
        plain_config(),
        &[LOGIN, b"DELE 1\r\nDELE 2\r\nDELE 3\r\nQUIT\r\n"],
    );
    assert!(server.store.is_empty());
    assert!(
        server
            .transcript()
            .ends_with("signing off (maildrop empty)\r\n")
    );
    // Before login: no UPDATE, no count.
    let server = converse(plain_config(), &[b"QUIT\r\n"]);
    assert_eq!(
        server.transcript(),
        "+OK localhost POP3 server signing off\r\n"
    );
}

#[test]
fn failed_update_is_reported() {
    let mut server = Server::new(plain_config());
    server.fail_update = true;
    server.receive(LOGIN);
    server.receive(b"DELE 1\r\nQUIT\r\n");
    assert_eq!(
        server.responses.last().map(String::as_str),
        Some("-ERR [SYS/TEMP] Some deleted messages not removed")
    );
    assert!(server.closed);
}

#[test]
fn dropped_connection_deletes_nothing() {
    let mut server = converse(plain_config(), &[LOGIN, b"DELE 1\r\nDELE 2\r\n"]);
    // The connection drops: the server never calls anything again.
    assert_eq!(server.log, ["AUTH joe"]);
    assert_eq!(server.store, mailbox());
    assert_eq!(server.session.phase(), Phase::Transaction);
    // Input after QUIT is not read.
    server.receive(b"QUIT\r\nDELE 3\r\n");
    assert_eq!(server.log, ["AUTH joe", "QUIT [0, 1]", "CLOSE"]);
}

#[test]
fn phases() {
    let mut session = Session::new(Arc::new(plain_config()));
    assert_eq!(session.phase(), Phase::Authorization);
    let step = session.advance(LOGIN);
    assert_eq!(step.consumed, 10);
    let step = session.advance(&LOGIN[10..]);
    assert!(matches!(step.event, Event::Auth(_)));
    assert_eq!(session.phase(), Phase::Authorization);
    session.decide_login(LoginDecision::Accept(Listing::empty()));
    assert_eq!(
        (session.phase(), session.user()),
        (Phase::Transaction, Some("joe"))
    );
    let step = session.advance(b"QUIT\r\n");
    assert_eq!(step.event, Event::Quit { deleted: vec![] });
    assert_eq!(session.phase(), Phase::Update);
    let action = session.decide_update(UpdateOutcome::Committed);
    assert!(matches!(action, Action::Close(r) if r.is_ok()));
    // Talking to a closed session closes again.
    let step = session.advance(b"NOOP\r\n");
    assert_eq!(step.consumed, 6);
    assert!(matches!(step.event, Event::Action(Action::Close(_))));
}

#[test]
#[should_panic(expected = "before the pending decision")]
fn advance_while_a_login_is_pending_panics() {
    let mut session = Session::new(Arc::new(plain_config()));
    session.advance(b"USER joe\r\n");
    session.advance(b"PASS x\r\n");
    session.advance(b"NOOP\r\n");
}

#[test]
#[should_panic(expected = "no login pending")]
fn decide_without_a_pending_login_panics() {
    let mut session = Session::new(Arc::new(plain_config()));
    session.decide_login(LoginDecision::BadCredentials);
}

#[test]
fn capabilities() {
    let capa = |config: Config, writes: &[&[u8]]| {
        let server = converse(config, writes);
        let text = server.transcript();
        let start = text
            .rfind("+OK Capability list follows\r\n")
            .expect("CAPA answered");
        text[start..].to_owned()
    };
    // TLS required and not on: no USER, no SASL; STLS offered.
    let required = Config {
        stls: true,
        ..Config::default()
    };
    assert_eq!(
        capa(required.clone(), &[b"CAPA\r\n"]),
        "+OK Capability list follows\r\nTOP\r\nUIDL\r\nRESP-CODES\r\nAUTH-RESP-CODE\r\n\
         PIPELINING\r\nSTLS\r\nIMPLEMENTATION Stoa\r\n.\r\n"
    );
    // After STLS: USER and SASL, no STLS.
    assert_eq!(
        capa(required, &[b"STLS\r\n", b"CAPA\r\n"]),
        "+OK Capability list follows\r\nTOP\r\nUIDL\r\nRESP-CODES\r\nAUTH-RESP-CODE\r\n\
         PIPELINING\r\nUSER\r\nSASL PLAIN\r\nIMPLEMENTATION Stoa\r\n.\r\n"
    );
    // Clear text allowed, no certificate, no SASL, a login delay; the same list after
    // login (RFC 2449 §5).
    let config = Config {
        require_tls: false,
        sasl_plain: false,
        login_delay: Some(900),
        ..Config::default()
    };
    let list = "+OK Capability list follows\r\nTOP\r\nUIDL\r\nRESP-CODES\r\nAUTH-RESP-CODE\r\n\
                PIPELINING\r\nUSER\r\nLOGIN-DELAY 900\r\nIMPLEMENTATION Stoa\r\n.\r\n";
    assert_eq!(capa(config.clone(), &[b"CAPA\r\n"]), list);
    assert_eq!(capa(config, &[LOGIN, b"CAPA\r\n"]), list);
    // POP3S: TLS from the start.
    let server = {
        let mut session = Session::new_tls(Arc::new(Config::default()));
        let step = session.advance(b"CAPA\r\n");
        match step.event {
            Event::Action(Action::Reply(response)) => response.to_string(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(server, "+OK Capability list follows (+8 lines)");
}

#[test]
fn tls_required_before_passwords() {
    let config = Config {
        stls: true,
        ..Config::default()
    };
    let server = converse(
        config.clone(),
        &[
            b"USER joe\r\n",
            b"PASS secret\r\n",
            b"AUTH PLAIN AGpvZQBzZWNyZXQ=\r\n",
            b"AUTH\r\n",
        ],
    );
    assert_eq!(
        server.responses[1..],
        [
            "-ERR [SYS/PERM] Plaintext authentication disallowed without TLS",
            "-ERR [SYS/PERM] Plaintext authentication disallowed without TLS",
            "-ERR [SYS/PERM] Plaintext authentication disallowed without TLS",
            "-ERR [SYS/PERM] Plaintext authentication disallowed without TLS",
        ]
    );
    assert!(server.log.is_empty());
    let server = converse(config.clone(), &[b"STLS\r\n", LOGIN]);
    assert_eq!(server.statuses(), ["+OK", "+OK", "+OK"]);
    assert_eq!(server.log, ["STLS 0", "AUTH joe"]);
    assert!(server.session.is_tls());
    // POP3S needs no STLS.
    let mut session = Session::new_tls(Arc::new(config));
    assert!(matches!(
        session.advance(b"USER joe\r\n").event,
        Event::Action(Action::Reply(r)) if r.is_ok()
    ));
}

#[test]
fn stls_injection() {
    // STLS and CAPA in one write: CAPA arrived in clear text and is never executed.
    let server = converse(plain_config(), &[b"STLS\r\nCAPA\r\n"]);
    assert_eq!(server.responses[1..], ["+OK Begin TLS negotiation"]);
    assert_eq!(server.log, ["STLS 6"]);
    // The next read (inside TLS) is served.
    let server = converse(plain_config(), &[b"STLS\r\nCAPA\r\n", b"CAPA\r\n"]);
    assert_eq!(server.statuses(), ["+OK", "+OK"]);
    assert!(!server.transcript().contains("STLS\r\n"));
    // Injected commands that would log in, or half a line: all dropped.
    let server = converse(
        plain_config(),
        &[b"STLS\r\nUSER joe\r\nPASS secret\r\nRET", b"STAT\r\n"],
    );
    assert_eq!(server.log, ["STLS 26"]);
    assert_eq!(server.statuses(), ["+OK", "-ERR"]);
    // A USER name given before STLS is forgotten.
    let server = converse(
        plain_config(),
        &[b"USER joe\r\n", b"STLS\r\n", b"PASS secret\r\n"],
    );
    assert_eq!(server.statuses(), ["+OK", "+OK", "-ERR"]);
    assert_eq!(server.responses[3], "-ERR No username given");
}

#[test]
fn stls_refusals() {
    let no_cert = Config {
        require_tls: false,
        ..Config::default()
    };
    let server = converse(no_cert, &[b"STLS\r\n"]);
    assert_eq!(server.responses[1..], ["-ERR STLS not available"]);
    let server = converse(plain_config(), &[b"STLS\r\n", b"STLS\r\n"]);
    assert_eq!(server.responses[2], "-ERR TLS already active");
    let server = converse(plain_config(), &[LOGIN, b"STLS\r\n"]);
    assert_eq!(server.responses[3], "-ERR Command not valid in this state");
}

#[test]
fn sasl_plain() {
    // "\0joe\0secret" and "admin\0joe\0secret".
    let joe = b"AGpvZQBzZWNyZXQ=";
    let mut initial = b"AUTH PLAIN ".to_vec();
    initial.extend_from_slice(joe);
    initial.extend_from_slice(b"\r\n");
    let server = converse(plain_config(), &[&initial, b"STAT\r\n"]);
    assert_eq!(server.statuses(), ["+OK", "+OK"]);
    assert_eq!(server.log, ["AUTH joe"]);
    // With a continuation.
    let mut response = joe.to_vec();
    response.extend_from_slice(b"\r\n");
    let server = converse(plain_config(), &[b"AUTH PLAIN\r\n", &response]);
    assert_eq!(server.transcript().lines().next(), Some("+ "));
    assert_eq!(server.statuses(), ["+", "+OK"]);
    // Cancelled, malformed, unknown, listed, empty.
    let server = converse(
        plain_config(),
        &[
            b"AUTH PLAIN\r\n*\r\n",
            b"AUTH PLAIN\r\nnot base64!\r\n",
            b"AUTH PLAIN am9l\r\n",
            b"AUTH PLAIN =\r\n",
            b"AUTH CRAM-MD5\r\n",
            b"AUTH\r\n",
        ],
    );
    assert_eq!(
        server.responses[1..],
        [
            "+",
            "-ERR Authentication aborted",
            "+",
            "-ERR Invalid SASL response",
            "-ERR Invalid SASL response",
            "-ERR Invalid SASL response",
            "-ERR Unsupported authentication mechanism",
            "+OK (+1 lines)",
        ]
    );
    assert!(server.transcript().ends_with("+OK\r\nPLAIN\r\n.\r\n"));
    // The authorization identity reaches the server.
    let mut session = Session::new(Arc::new(plain_config()));
    let step = session.advance(b"AUTH PLAIN YWRtaW4Aam9lAHNlY3JldA==\r\n");
    let Event::Auth(credentials) = step.event else {
        panic!("{:?}", step.event);
    };
    assert_eq!(credentials.authzid.as_deref(), Some("admin"));
    assert!(!format!("{credentials:?}").contains("secret"));
    // Not offered.
    let config = Config {
        sasl_plain: false,
        ..plain_config()
    };
    let server = converse(config, &[b"AUTH PLAIN\r\n"]);
    assert_eq!(server.responses[1..], ["-ERR AUTH not available"]);
}

#[test]
fn failed_logins_close_at_the_limit() {
    let writes: Vec<&[u8]> = std::iter::repeat_n(&b"USER joe\r\nPASS wrong\r\n"[..], 4).collect();
    let server = converse(plain_config(), &writes);
    assert_eq!(
        server.log,
        [
            "AUTH joe",
            "LOGIN FAILED",
            "AUTH joe",
            "LOGIN FAILED",
            "AUTH joe",
            "LOGIN FAILED",
            "CLOSE"
        ]
    );
    assert_eq!(server.session.auth_failures(), 3);
    assert!(server.session.is_closed());
    assert_eq!(
        server.responses.last().map(String::as_str),
        Some("-ERR [AUTH] Authentication failed")
    );
    // Refusals that are not about the password do not count.
    let writes: Vec<&[u8]> = std::iter::repeat_n(&b"USER busy\r\nPASS x\r\n"[..], 5).collect();
    let server = converse(plain_config(), &writes);
    assert!(!server.closed && server.session.auth_failures() == 0);
}

#[test]
fn error_limit_closes() {
    let config = Config {
        limits: Limits {
            max_errors: 3,
            ..Limits::default()
        },
        ..plain_config()
    };
    let mut server = Server::new(config);
    server.receive(b"FOO\r\nSTAT\r\n");
    assert_eq!(server.session.error_count(), 2);
    assert!(!server.closed);
    // Reaching the limit closes at the next turn, before any more input is read.
    server.receive(b"RETR 1\r\n");
    assert_eq!(
        server.responses[1..],
        [
            "-ERR Unknown command",
            "-ERR Command not valid in this state",
            "-ERR Command not valid in this state",
            "-ERR Too many bad commands",
        ]
    );
    assert!(server.closed && server.session.is_closed());
}

#[test]
fn long_lines_are_refused_without_buffering() {
    // 5000 bytes (docs/robustness.md §4.3), then a good command in the same read.
    let mut write = b"USER ".to_vec();
    write.extend(std::iter::repeat_n(b'x', 5000));
    write.extend_from_slice(b"\r\nNOOP\r\nCAPA\r\n");
    let server = converse(plain_config(), &[&write]);
    assert_eq!(server.responses[1], "-ERR Line too long");
    assert_eq!(server.statuses(), ["-ERR", "-ERR", "+OK"]);
    // Across reads: the session keeps nothing of the long line.
    let mut session = Session::new(Arc::new(plain_config()));
    let step = session.advance(&[b'x'; 400]);
    assert_eq!(step.consumed, 400);
    assert!(matches!(step.event, Event::Action(Action::Reply(_))));
    let step = session.advance(&[b'y'; 400]);
    assert_eq!((step.consumed, &step.event), (400, &Event::NeedMore));
    let step = session.advance(b"yyy\r\nCAPA\r\n");
    assert_eq!(step.consumed, 11);
    assert!(matches!(step.event, Event::Action(Action::Reply(r)) if r.is_ok()));
    // The longest command passes: 253 bytes and CRLF.
    let mut line = b"PASS ".to_vec();
    line.extend(std::iter::repeat_n(b'p', 248));
    line.extend_from_slice(b"\r\n");
    assert_eq!(line.len(), 255);
    let server = converse(plain_config(), &[b"USER joe\r\n", &line]);
    assert_eq!(server.log, ["AUTH joe", "LOGIN FAILED"]);
}

#[test]
fn sasl_responses_may_be_longer_than_commands() {
    // "\0joe\0" and a 400-byte password, base64: 540 bytes.
    let mut plain = b"\0joe\0".to_vec();
    plain.extend(std::iter::repeat_n(b'p', 400));
    let encoded = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &plain);
    let line = format!("{encoded}\r\n");
    let server = converse(plain_config(), &[b"AUTH PLAIN\r\n", line.as_bytes()]);
    assert_eq!(server.log, ["AUTH joe", "LOGIN FAILED"]);
    // Over the SASL limit: refused, and the exchange is over.
    let long = format!("{}\r\nCAPA\r\n", "A".repeat(2000));
    let server = converse(plain_config(), &[b"AUTH PLAIN\r\n", long.as_bytes()]);
    assert_eq!(server.statuses(), ["+", "-ERR", "+OK"]);
}

#[test]
fn bare_lf_closes() {
    let server = converse(plain_config(), &[b"CAPA\n", b"CAPA\r\n"]);
    assert_eq!(server.responses[1..], ["-ERR Line not ended by CRLF"]);
    assert!(server.closed);
}

#[test]
fn pipelined_session_in_one_write() {
    let session: &[u8] =
        b"CAPA\r\nUSER joe\r\nPASS secret\r\nSTAT\r\nLIST\r\nUIDL\r\nRETR 1\r\nDELE 1\r\n\
          TOP 2 1\r\nDELE 2\r\nRETR 3\r\nDELE 3\r\nQUIT\r\n";
    let whole = converse(plain_config(), &[session]);
    let lines: Vec<&[u8]> = session.split_inclusive(|&b| b == b'\n').collect();
    let one_by_one = converse(plain_config(), &lines);
    assert_eq!(whole.out, one_by_one.out);
    assert_eq!(whole.log, one_by_one.log);
    assert_eq!(whole.log.last().map(String::as_str), Some("CLOSE"));
    assert!(whole.store.is_empty());
}

#[test]
fn a_secure_channel_takes_passwords_without_tls() {
    let config = Config {
        stls: true,
        ..Config::default()
    };
    let mut server = Server::new(config.clone());
    server.session.set_secure_channel(true);
    server.receive(b"CAPA\r\n");
    assert!(server.transcript().contains("\r\nUSER\r\nSASL PLAIN\r\n"));
    server.receive(LOGIN);
    assert_eq!(server.log, ["AUTH joe"]);
    // The same session without the flag refuses, as before.
    let server = converse(config, &[LOGIN]);
    assert!(server.log.is_empty());
    assert_eq!(server.statuses(), ["-ERR", "-ERR"]);
}

#[test]
fn xclient_is_taken_once_from_a_trusted_proxy_before_login() {
    let mut server = Server::new(plain_config());
    server.session.allow_forwarding(true);
    server.receive(b"CAPA\r\n");
    assert!(server.transcript().contains("\r\nXCLIENT\r\n"));
    server.receive(b"xclient ADDR=192.0.2.7 PORT=40123 SESSION=abc TTL=4\r\n");
    server.receive(b"XCLIENT ADDR=192.0.2.8\r\n");
    server.receive(LOGIN);
    assert_eq!(server.log, ["FORWARD 192.0.2.7 Some(40123)", "AUTH joe"]);
    assert_eq!(
        server.responses[2..4],
        ["+OK Forwarded", "-ERR Command not valid in this state"]
    );
    // IPv6 in either spelling; the port may be missing or unavailable.
    for line in [
        &b"XCLIENT ADDR=IPV6:2001:db8::1 PORT=[UNAVAILABLE]\r\n"[..],
        b"XCLIENT ADDR=2001:db8::1\r\n",
    ] {
        let mut server = Server::new(plain_config());
        server.session.allow_forwarding(true);
        server.receive(line);
        assert_eq!(server.log, ["FORWARD 2001:db8::1 None"]);
    }
    // After USER it is too late.
    let mut server = Server::new(plain_config());
    server.session.allow_forwarding(true);
    server.receive(b"USER joe\r\nXCLIENT ADDR=192.0.2.7\r\n");
    assert!(server.log.is_empty());
    assert_eq!(server.statuses(), ["+OK", "-ERR"]);
}

#[test]
fn xclient_from_anyone_else_or_malformed_is_refused() {
    let server = converse(plain_config(), &[b"CAPA\r\nXCLIENT ADDR=192.0.2.7\r\n"]);
    assert!(!server.transcript().contains("XCLIENT\r\n"));
    assert!(server.log.is_empty());
    assert_eq!(
        server.responses.last().map(String::as_str),
        Some("-ERR XCLIENT not allowed from your address")
    );
    for line in [
        &b"XCLIENT\r\n"[..],
        b"XCLIENT PORT=1\r\n",
        b"XCLIENT ADDR=example.com\r\n",
        b"XCLIENT ADDR=192.0.2.7 PORT=65536\r\n",
        b"XCLIENT ADDR=192.0.2.7 ADDR=192.0.2.8\r\n",
        b"XCLIENT ADDR=192.0.2.7 junk\r\n",
        b"XCLIENT ADDR=192.0.2.7 =x\r\n",
        b"XCLIENT ADDR=192.0.2.7 A=\r\n",
    ] {
        let mut server = Server::new(plain_config());
        server.session.allow_forwarding(true);
        server.receive(line);
        assert!(server.log.is_empty(), "{line:?}");
        assert_eq!(
            server.responses.last().map(String::as_str),
            Some("-ERR Syntax: XCLIENT ADDR=address [PORT=port] [name=value ...]"),
            "{line:?}"
        );
    }
}
