//! The proxy's leg to a store host: connect, read the greeting, protect the leg
//! (STLS or TLS from the first byte), forward the client's address (`XCLIENT`),
//! log in with AUTH PLAIN. Every reply has a deadline and a length limit (RFC
//! 2449 §4's 512 octets), and anything but the expected `+OK` ends the attempt.

use std::io;
use std::net::SocketAddr;

use base64::Engine as _;
use stoa_netkit::tls::Stream;
use stoa_netkit::upstream::{Upstream, strip_crlf, unexpected};
use stoa_pop3_proto::response::MAX_RESPONSE_LINE;
use stoa_pop3_proto::{ResponseCode, Status, parse_status_line};

use super::{BackendTls, Proxy};

/// The longest command line a POP3 server must take (RFC 2449 §4): a longer
/// AUTH PLAIN initial response is sent as a continuation line instead.
const MAX_COMMAND_LINE: usize = 255;

/// A session the store host accepted.
pub(crate) struct LoggedIn {
    /// The connection, logged in as the user.
    pub(crate) stream: Stream,
    /// The store host's `+OK` to the login, CRLF included, for the client.
    pub(crate) reply: Vec<u8>,
    /// Bytes the store host sent after it (none from a well-behaved one).
    pub(crate) after: Vec<u8>,
}

/// Why the store host did not take the session.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// `-ERR [IN-USE]`: another session holds the mailbox.
    InUse,
    /// `-ERR [LOGIN-DELAY]`.
    LoginDelay,
    /// Anything else: unreachable, a refusal, a reply out of turn. The text is for
    /// the log.
    Temporary(String),
}

/// Logs in to the store host `host` (a `mailHost` value) as `user` with
/// `password`, for the client at `client`.
pub(crate) async fn login(
    proxy: &Proxy,
    host: &str,
    user: &str,
    password: &str,
    client: SocketAddr,
) -> Result<LoggedIn, Refusal> {
    let addr = proxy.address(host);
    let failed = |what: &str, e: io::Error| Refusal::Temporary(format!("{addr}: {what}: {e}"));
    let config = proxy.config();
    let upstream = proxy
        .connect(&addr, host, MAX_RESPONSE_LINE)
        .await
        .map_err(|e| failed("connect", e))?;
    let mut leg = Leg { upstream };
    leg.expect_ok("greeting")
        .await
        .map_err(|e| failed("greeting", e))?;
    if config.backend_tls == BackendTls::StartTls {
        leg.upgrade(proxy, host)
            .await
            .map_err(|e| failed("STLS", e))?;
    }
    if config.forward_client {
        let line = format!("XCLIENT ADDR={} PORT={}\r\n", client.ip(), client.port());
        let reply = leg.command(line.as_bytes()).await;
        match reply.map_err(|e| failed("XCLIENT", e))? {
            (Status::Ok, _) => {}
            _ => tracing::info!("{addr}: the store host does not take XCLIENT from this proxy"),
        }
    }
    leg.authenticate(user, password).await.map_err(|e| match e {
        LoginError::Io(e) => failed("login", e),
        LoginError::Refused(Some(ResponseCode::InUse)) => Refusal::InUse,
        LoginError::Refused(Some(ResponseCode::LoginDelay)) => Refusal::LoginDelay,
        LoginError::Refused(code) => Refusal::Temporary(format!(
            "{addr}: refused the login the directory accepted ({})",
            code.map_or("no response code", ResponseCode::as_str)
        )),
    })
}

/// How a login failed.
enum LoginError {
    Io(io::Error),
    /// `-ERR`, with its response code.
    Refused(Option<ResponseCode>),
}

impl From<io::Error> for LoginError {
    fn from(e: io::Error) -> Self {
        LoginError::Io(e)
    }
}

/// The POP3 conversation before the relay.
struct Leg {
    upstream: Upstream,
}

impl Leg {
    /// Reads one reply and requires `+OK`.
    async fn expect_ok(&mut self, what: &str) -> io::Result<Vec<u8>> {
        let line = self.line().await?;
        match parse_status_line(strip_crlf(&line)) {
            Some((Status::Ok, _)) => Ok(line),
            _ => Err(unexpected(what, &line)),
        }
    }

    /// Sends `line` and reads the reply's status.
    async fn command(&mut self, line: &[u8]) -> io::Result<(Status, Option<ResponseCode>)> {
        self.send(line).await?;
        let reply = self.line().await?;
        parse_status_line(strip_crlf(&reply)).ok_or_else(|| unexpected("reply", &reply))
    }

    /// STLS and the handshake; nothing may follow the `+OK` in clear text.
    async fn upgrade(&mut self, proxy: &Proxy, host: &str) -> io::Result<()> {
        match self.command(b"STLS\r\n").await? {
            (Status::Ok, _) => {}
            _ => return Err(io::Error::other("the store host refused STLS")),
        }
        proxy.start_tls(&mut self.upstream, host).await
    }

    /// AUTH PLAIN as `user`: the initial response on the command line when it fits
    /// in 255 octets, else after the server's `+` continuation.
    async fn authenticate(mut self, user: &str, password: &str) -> Result<LoggedIn, LoginError> {
        let response = base64::engine::general_purpose::STANDARD
            .encode(format!("\0{user}\0{password}").as_bytes());
        let inline = format!("AUTH PLAIN {response}\r\n");
        let reply = if inline.len() <= MAX_COMMAND_LINE {
            self.send(inline.as_bytes()).await?;
            self.line().await?
        } else {
            match self.command(b"AUTH PLAIN\r\n").await? {
                (Status::Continue, _) => {}
                (_, code) => return Err(LoginError::Refused(code)),
            }
            self.send(format!("{response}\r\n").as_bytes()).await?;
            self.line().await?
        };
        match parse_status_line(strip_crlf(&reply)) {
            Some((Status::Ok, _)) => {
                let (stream, after) = self.upstream.into_parts();
                Ok(LoggedIn {
                    stream,
                    reply,
                    after,
                })
            }
            Some((Status::Err, code)) => Err(LoginError::Refused(code)),
            _ => Err(LoginError::Io(unexpected("login reply", &reply))),
        }
    }

    async fn send(&mut self, line: &[u8]) -> io::Result<()> {
        self.upstream.send(line).await
    }

    /// One reply line, CRLF included, within the timeout and 512 octets.
    async fn line(&mut self) -> io::Result<Vec<u8>> {
        self.upstream.line().await
    }
}
