//! The IMAP proxy's leg to a store host: connect, read the greeting, protect the
//! leg (STARTTLS or TLS from the first byte), learn the capabilities, forward the
//! client's address (`ID`), log in (AUTHENTICATE PLAIN, or LOGIN). Every reply
//! has a deadline and a length limit, a command's untagged replies are counted,
//! a literal is refused, and anything but the expected answer ends the attempt.

use std::io;
use std::net::SocketAddr;

use base64::Engine as _;
use stoa_imap_proto::reply::{self, Reply, Status, has_capability};
use stoa_netkit::tls::Stream;
use stoa_netkit::upstream::{Upstream, printable, strip_crlf, unexpected};

use super::{BackendTls, Proxy};

/// The longest reply line taken from a store host: a greeting or an `OK` with a
/// long `[CAPABILITY …]` is a few hundred octets; 8 KiB leaves room and bounds a
/// hostile one.
pub(crate) const MAX_REPLY_LINE: usize = 8 * 1024;

/// Most untagged replies before a login command's tagged one: a store host sends
/// one or two (`* CAPABILITY`, `* ID`); more is a peer out of turn.
const MAX_UNTAGGED: usize = 32;

/// A session the store host accepted.
pub(crate) struct LoggedIn {
    /// The connection, logged in as the user.
    pub(crate) stream: Stream,
    /// The store host's tagged `OK` after its tag (`OK [CAPABILITY …] text`), CRLF
    /// included, for the client under its own tag.
    pub(crate) reply: Vec<u8>,
    /// Bytes the store host sent after it (none from a well-behaved one).
    pub(crate) after: Vec<u8>,
}

/// Logs in to the store host `host` (a `mailHost` value) as `user` with
/// `password`, for the client at `client`; the error says why not, for the log.
pub(crate) async fn login(
    proxy: &Proxy,
    host: &str,
    user: &str,
    password: &str,
    client: SocketAddr,
) -> Result<LoggedIn, String> {
    let addr = proxy.address(host);
    let failed = |what: &str, e: io::Error| format!("{addr}: {what}: {e}");
    let config = proxy.config();
    let upstream = proxy
        .connect(&addr, host, MAX_REPLY_LINE)
        .await
        .map_err(|e| failed("connect", e))?;
    let mut leg = Leg { upstream, next: 0 };
    let mut caps = leg.greeting().await.map_err(|e| failed("greeting", e))?;
    if config.backend_tls == BackendTls::StartTls {
        leg.starttls(proxy, host, &caps)
            .await
            .map_err(|e| failed("STARTTLS", e))?;
        caps = None;
    }
    let caps = match caps {
        Some(caps) => caps,
        None => leg
            .capability()
            .await
            .map_err(|e| failed("CAPABILITY", e))?,
    };
    if config.forward_client {
        let id = format!(
            "ID (\"x-originating-ip\" \"{}\" \"x-originating-port\" \"{}\")",
            client.ip().to_canonical(),
            client.port()
        );
        let (status, line) = leg.command(&id).await.map_err(|e| failed("ID", e))?;
        if status != Status::Ok {
            tracing::info!("{addr}: the store host refused ID: {}", printable(&line));
        }
    }
    leg.authenticate(&caps, user, password)
        .await
        .map_err(|e| failed("login", e))
}

/// The IMAP conversation before the relay.
struct Leg {
    upstream: Upstream,
    /// The number of the next command's tag (`p1`, `p2`...).
    next: u32,
}

impl Leg {
    /// The greeting, which must be `* OK`; its capabilities when it lists them.
    async fn greeting(&mut self) -> io::Result<Option<Vec<String>>> {
        let line = self.upstream.line().await?;
        match reply::parse_line(strip_crlf(&line)) {
            Ok(Reply::Status {
                tag: None,
                status: Status::Ok,
                code,
                ..
            }) => Ok(code.and_then(|c| c.capabilities()).map(owned)),
            _ => Err(unexpected("greeting", &line)),
        }
    }

    /// `STARTTLS`, which the store host must offer, and the handshake.
    async fn starttls(
        &mut self,
        proxy: &Proxy,
        host: &str,
        caps: &Option<Vec<String>>,
    ) -> io::Result<()> {
        let caps = match caps {
            Some(caps) => caps.clone(),
            None => self.capability().await?,
        };
        if !caps.iter().any(|c| c.eq_ignore_ascii_case("STARTTLS")) {
            return Err(io::Error::other("the store host does not offer STARTTLS"));
        }
        match self.command("STARTTLS").await? {
            (Status::Ok, _) => {}
            (_, line) => return Err(unexpected("STARTTLS reply", &line)),
        }
        proxy.start_tls(&mut self.upstream, host).await
    }

    /// `CAPABILITY`: the list of its untagged reply.
    async fn capability(&mut self) -> io::Result<Vec<String>> {
        let tag = self.send("CAPABILITY").await?;
        let mut caps = None;
        let (status, line) = self
            .finish(&tag, |data| {
                if let Some(list) = reply::capability_data(data) {
                    caps = Some(owned(list));
                }
            })
            .await?;
        match (status, caps) {
            (Status::Ok, Some(caps)) => Ok(caps),
            _ => Err(unexpected("CAPABILITY reply", &line)),
        }
    }

    /// Logs in: `AUTHENTICATE PLAIN` (inline with SASL-IR), else `LOGIN`.
    async fn authenticate(
        mut self,
        caps: &[String],
        user: &str,
        password: &str,
    ) -> io::Result<LoggedIn> {
        let caps: Vec<&str> = caps.iter().map(String::as_str).collect();
        let tag = if has_capability(&caps, "AUTH=PLAIN") {
            let response = base64::engine::general_purpose::STANDARD
                .encode(format!("\0{user}\0{password}").as_bytes());
            if has_capability(&caps, "SASL-IR") {
                self.send(&format!("AUTHENTICATE PLAIN {response}")).await?
            } else {
                let tag = self.send("AUTHENTICATE PLAIN").await?;
                let line = self.upstream.line().await?;
                if !matches!(
                    reply::parse_line(strip_crlf(&line)),
                    Ok(Reply::Continuation(_))
                ) {
                    return Err(unexpected("AUTHENTICATE reply", &line));
                }
                self.upstream
                    .send(format!("{response}\r\n").as_bytes())
                    .await?;
                tag
            }
        } else if has_capability(&caps, "LOGINDISABLED") {
            return Err(io::Error::other(
                "the store host takes no login (LOGINDISABLED)",
            ));
        } else {
            let (user, password) = (quoted(user)?, quoted(password)?);
            self.send(&format!("LOGIN {user} {password}")).await?
        };
        let (status, line) = self.finish(&tag, |_| {}).await?;
        if status != Status::Ok {
            return Err(io::Error::other(format!(
                "refused the login the directory accepted: {:?}",
                printable(&line)
            )));
        }
        let reply = line[tag.len()..].to_vec();
        let (stream, after) = self.upstream.into_parts();
        Ok(LoggedIn {
            stream,
            reply,
            after,
        })
    }

    /// Sends `command` and reads its replies up to its tagged status, which it
    /// returns with the line.
    async fn command(&mut self, command: &str) -> io::Result<(Status, Vec<u8>)> {
        let tag = self.send(command).await?;
        self.finish(&tag, |_| {}).await
    }

    /// Sends `command` under a fresh tag; returns the tag.
    async fn send(&mut self, command: &str) -> io::Result<String> {
        self.next += 1;
        let tag = format!("p{}", self.next);
        let line = format!("{tag} {command}\r\n");
        self.upstream.send(line.as_bytes()).await?;
        Ok(tag)
    }

    /// Reads up to `tag`'s status, each untagged data line to `data`; a `BYE`, a
    /// literal, another tag, a continuation or too many untagged lines is an
    /// error.
    async fn finish(
        &mut self,
        tag: &str,
        mut data: impl FnMut(&[u8]),
    ) -> io::Result<(Status, Vec<u8>)> {
        for _ in 0..=MAX_UNTAGGED {
            let line = self.upstream.line().await?;
            let text = strip_crlf(&line);
            if reply::literal_at_end(text).is_some() {
                return Err(unexpected("literal", &line));
            }
            match reply::parse_line(text) {
                Ok(Reply::Status {
                    tag: Some(t),
                    status,
                    ..
                }) if t == tag => return Ok((status, line)),
                Ok(Reply::Data(d)) => data(d),
                Ok(Reply::Status {
                    tag: None,
                    status: Status::Ok | Status::No | Status::Bad,
                    ..
                }) => {}
                _ => return Err(unexpected("reply", &line)),
            }
        }
        Err(io::Error::other("too many untagged replies"))
    }
}

/// Capabilities as owned strings.
fn owned(caps: Vec<&str>) -> Vec<String> {
    caps.into_iter().map(str::to_owned).collect()
}

/// `text` as an IMAP quoted string; one only a literal can carry is an error
/// (such a password goes through AUTHENTICATE PLAIN).
fn quoted(text: &str) -> io::Result<String> {
    stoa_imap_proto::string::quoted(text.as_bytes())
        .and_then(|q| String::from_utf8(q).ok())
        .ok_or_else(|| {
            io::Error::other("a user name or password LOGIN cannot quote, and no AUTH=PLAIN")
        })
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead, BufReader, Write};

    use super::*;
    use crate::proxy::{ProxyConfig, StoreHost};

    #[test]
    fn quoting() {
        assert_eq!(
            quoted("ann@stoa.test").ok(),
            Some("\"ann@stoa.test\"".into())
        );
        assert_eq!(quoted("a\"b\\c").ok(), Some("\"a\\\"b\\\\c\"".into()));
        assert!(quoted("a\r\nb").is_err() && quoted("pässword").is_err());
    }

    /// A store host that plays `script`: each `(expected line prefix, reply)` in
    /// turn, the greeting first (its expected prefix empty). Returns the lines it
    /// read.
    fn fake_store(
        script: Vec<(&'static str, &'static str)>,
    ) -> (String, std::thread::JoinHandle<Vec<String>>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let handle = std::thread::spawn(move || {
            let (stream, _) = listener.accept().expect("accept");
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut out = stream;
            let mut seen = Vec::new();
            for (expected, reply) in script {
                if !expected.is_empty() {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    assert!(line.starts_with(expected), "{line:?} is not {expected:?}");
                    seen.push(line);
                }
                out.write_all(reply.as_bytes()).expect("reply");
            }
            seen
        });
        (addr, handle)
    }

    fn login_at(addr: &str) -> Result<LoggedIn, String> {
        let config = ProxyConfig {
            stores: vec![StoreHost {
                name: "s.test".into(),
                pop3: None,
                imap: Some(addr.into()),
            }],
            reply_timeout: std::time::Duration::from_secs(5),
            ..ProxyConfig::default()
        };
        let proxy = Proxy::new(config, stoa_directory::store_hosts::Protocol::Imap).expect("proxy");
        let client: SocketAddr = "192.0.2.7:4321".parse().expect("addr");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(login(&proxy, "s.test", "ann@s.test", "pw", client))
    }

    #[test]
    fn sasl_ir_when_offered_and_the_ok_for_the_client() {
        let (addr, store) = fake_store(vec![
            ("", "* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN SASL-IR] hi\r\n"),
            (
                "p1 ID (\"x-originating-ip\" \"192.0.2.7\" \"x-originating-port\" \"4321\")",
                "* ID NIL\r\np1 OK ID done\r\n",
            ),
            (
                "p2 AUTHENTICATE PLAIN AGFubkBzLnRlc3QAcHc=",
                "p2 OK [CAPABILITY IMAP4rev2 IDLE] in\r\n* 1 EXISTS\r\n",
            ),
        ]);
        let done = login_at(&addr).expect("logged in");
        assert_eq!(done.reply, b" OK [CAPABILITY IMAP4rev2 IDLE] in\r\n");
        assert_eq!(done.after, b"* 1 EXISTS\r\n");
        assert_eq!(store.join().expect("store").len(), 2);
    }

    #[test]
    fn a_continuation_without_sasl_ir_and_login_without_auth_plain() {
        let (addr, store) = fake_store(vec![
            ("", "* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] hi\r\n"),
            ("p1 ID", "p1 OK\r\n"),
            ("p2 AUTHENTICATE PLAIN\r\n", "+ \r\n"),
            ("AGFubkBzLnRlc3QAcHc=\r\n", "p2 OK in\r\n"),
        ]);
        assert_eq!(login_at(&addr).expect("logged in").reply, b" OK in\r\n");
        store.join().expect("store");
        // No capabilities in the greeting: CAPABILITY, then LOGIN.
        let (addr, store) = fake_store(vec![
            ("", "* OK hi\r\n"),
            ("p1 CAPABILITY", "* CAPABILITY IMAP4rev1\r\np1 OK\r\n"),
            ("p2 ID", "p2 NO not for you\r\n"),
            (
                "p3 LOGIN \"ann@s.test\" \"pw\"",
                "p3 OK [CAPABILITY IMAP4rev1] in\r\n",
            ),
        ]);
        assert!(login_at(&addr).is_ok());
        store.join().expect("store");
    }

    #[test]
    fn refusals_and_replies_out_of_turn() {
        for (script, why) in [
            (vec![("", "* BYE busy\r\n")], "greeting"),
            (vec![("", "* PREAUTH hi\r\n")], "greeting"),
            (
                vec![
                    ("", "* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN SASL-IR] hi\r\n"),
                    ("p1 ID", "p1 OK\r\n"),
                    ("p2 AUTHENTICATE", "p2 NO [AUTHENTICATIONFAILED] no\r\n"),
                ],
                "refused the login",
            ),
            (
                vec![
                    ("", "* OK [CAPABILITY IMAP4rev1 LOGINDISABLED] hi\r\n"),
                    ("p1 ID", "p1 OK\r\n"),
                ],
                "LOGINDISABLED",
            ),
            (
                vec![
                    ("", "* OK [CAPABILITY IMAP4rev1] hi\r\n"),
                    ("p1 ID", "p9 OK\r\n"),
                ],
                "unexpected reply",
            ),
            (
                vec![
                    ("", "* OK [CAPABILITY IMAP4rev1] hi\r\n"),
                    ("p1 ID", "* ID {5}\r\n"),
                ],
                "literal",
            ),
        ] {
            let (addr, store) = fake_store(script);
            let error = login_at(&addr).err().expect("refused");
            assert!(error.contains(why), "{why}: {error}");
            let _ = store.join();
        }
    }
}
