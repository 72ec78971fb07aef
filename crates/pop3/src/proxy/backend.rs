//! The proxy's leg to a store host: connect, read the greeting, protect the leg
//! (STLS or TLS from the first byte), forward the client's address (`XCLIENT`),
//! log in with AUTH PLAIN. Every reply has a deadline and a length limit (RFC
//! 2449 §4's 512 octets), and anything but the expected `+OK` ends the attempt.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine as _;
use stoa_netkit::tls::Stream;
use stoa_pop3_proto::response::MAX_RESPONSE_LINE;
use stoa_pop3_proto::{ResponseCode, Status, parse_status_line};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

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
    let config = &proxy.config;
    let connect = async {
        let tcp = TcpStream::connect(&addr).await?;
        let _ = tcp.set_nodelay(true);
        let mut stream = Stream::Plain(tcp);
        if config.backend_tls == BackendTls::Tls {
            start_tls(proxy, host, &mut stream).await?;
        }
        Ok(stream)
    };
    let stream = within(config.connect_timeout, connect)
        .await
        .map_err(|e| failed("connect", e))?;
    let mut leg = Leg {
        stream,
        buf: Vec::new(),
        timeout: config.reply_timeout,
    };
    leg.expect_ok("greeting")
        .await
        .map_err(|e| failed("greeting", e))?;
    if config.backend_tls == BackendTls::Stls {
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

/// The TLS handshake with `host` (its `mailHost` name is what the certificate must
/// name).
async fn start_tls(proxy: &Proxy, host: &str, stream: &mut Stream) -> io::Result<()> {
    let Some(connector) = &proxy.tls else {
        return Err(io::Error::other("TLS without a TLS client"));
    };
    let name = rustls::pki_types::ServerName::try_from(host.trim_end_matches('.').to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    stream.start_tls_client(connector, name).await
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

/// The conversation before the relay: the stream and what was read past the last
/// reply.
struct Leg {
    stream: Stream,
    buf: Vec<u8>,
    timeout: Duration,
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
            (Status::Ok, _) if self.buf.is_empty() => {}
            (Status::Ok, _) => return Err(io::Error::other("data after the STLS reply")),
            _ => return Err(io::Error::other("the store host refused STLS")),
        }
        let timeout = proxy.config.connect_timeout;
        within(timeout, start_tls(proxy, host, &mut self.stream)).await
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
            Some((Status::Ok, _)) => Ok(LoggedIn {
                stream: self.stream,
                reply,
                after: self.buf,
            }),
            Some((Status::Err, code)) => Err(LoginError::Refused(code)),
            _ => Err(LoginError::Io(unexpected("login reply", &reply))),
        }
    }

    async fn send(&mut self, line: &[u8]) -> io::Result<()> {
        self.stream.write_all_within(line, self.timeout).await
    }

    /// One reply line, CRLF included, within the timeout and 512 octets.
    async fn line(&mut self) -> io::Result<Vec<u8>> {
        let timeout = self.timeout;
        within(timeout, async {
            loop {
                if let Some(lf) = self.buf.iter().position(|&b| b == b'\n') {
                    let rest = self.buf.split_off(lf + 1);
                    return Ok(std::mem::replace(&mut self.buf, rest));
                }
                if self.buf.len() >= MAX_RESPONSE_LINE {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "reply line too long",
                    ));
                }
                let mut chunk = [0u8; MAX_RESPONSE_LINE];
                let room = MAX_RESPONSE_LINE - self.buf.len();
                let n = self.stream.read(&mut chunk[..room]).await?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the store host closed the connection",
                    ));
                }
                self.buf.extend_from_slice(&chunk[..n]);
            }
        })
        .await
    }
}

/// `line` without its line end.
fn strip_crlf(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// A reply that is not the one expected, quoted for the log (cut, printable).
fn unexpected(what: &str, line: &[u8]) -> io::Error {
    let text: String = strip_crlf(line)
        .iter()
        .take(80)
        .map(|&b| {
            if (b' '..=b'~').contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("unexpected {what}: {text:?}"),
    )
}

/// `future` within `timeout`, a `TimedOut` error after it.
async fn within<T>(
    timeout: Duration,
    future: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    match tokio::time::timeout(timeout, future).await {
        Ok(result) => result,
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "timed out")),
    }
}
