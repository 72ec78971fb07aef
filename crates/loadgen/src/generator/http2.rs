//! `stoa bench web --http 2`: the same operations over HTTP/2 (TLS, ALPN `h2`).
//!
//! A generator keeps one HTTP/2 connection where it would keep an HTTP/1.1 one,
//! for as many requests as the kit's keep-alive pattern gives it, and sends one
//! request at a time on it, as the kit's client does: the server sees the same
//! requests, connections and pauses, framed as HTTP/2. The request is the one
//! the kit formats (`workload::format_request`), translated: its request line
//! and `Host` become the pseudo-headers, its connection-specific fields are
//! dropped, its body is one DATA frame. The response's status and fields are
//! written into the generator's buffer as an HTTP/1.1 head, followed by the
//! body's first bytes, so the checks read it as they read any response.
//!
//! Bytes are credited to the rated receive as they arrive: the body's DATA
//! frames, and the head as long as its HTTP/1.1 form (HPACK's compressed size is
//! not visible through h2), so an operation moves the same bytes as over
//! HTTP/1.1.

use std::fmt::Write as _;
use std::time::Instant;

use bytes::Bytes;
use stoa_http_proto::request::header_storage;
use stoa_http_proto::{Limits, Status, parse_request};
use stoa_web99::metrics::RatedReceive;

use super::{Clock, KEEP_BODY, Response, Reuse};
use crate::transport::Stream;

/// Fields of an HTTP/1.1 request that HTTP/2 does not carry (RFC 9113 §8.2.2),
/// and `Host`, which becomes `:authority`.
const DROPPED: &[&str] = &[
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// The request head's limits: the server's defaults, but the 32 fields the
/// translation has always allowed (the kit's requests carry five or six).
const REQUEST_LIMITS: Limits = Limits {
    max_request_line: 8 * 1024,
    max_header_line: 8 * 1024,
    max_head: 32 * 1024,
    max_headers: 32,
};

/// A generator's HTTP/2 connection.
pub(super) struct Session {
    send: ::h2::client::SendRequest<Bytes>,
    /// Drives the connection; polled while an exchange runs.
    conn: ::h2::client::Connection<Stream, Bytes>,
}

impl Session {
    /// The HTTP/2 preface and settings over a TLS connection that chose `h2`.
    pub(super) async fn start(stream: Stream) -> Result<Session, Reuse> {
        let (send, conn) = ::h2::client::Builder::new()
            // A class-3 file (up to 900 KiB) in one window: the kit's client
            // reads as fast as data comes and sleeps afterwards.
            .initial_window_size(1 << 20)
            .initial_connection_window_size(1 << 20)
            .handshake(stream)
            .await
            .map_err(|_| Reuse::Failed("HTTP/2 preface"))?;
        Ok(Session { send, conn })
    }
}

/// Sends `request` (HTTP/1.1 bytes as the kit formats them) on `session` and
/// reads the answer into `data` (see the module docs).
pub(super) async fn exchange(
    session: &mut Session,
    request: &[u8],
    data: &mut Vec<u8>,
    rated: &mut RatedReceive,
    clock: &Clock,
) -> Result<Response, Reuse> {
    let (head, body) = translate(request)?;
    let Session { send, conn } = session;
    let exchange = async {
        let mut send = send
            .clone()
            .ready()
            .await
            .map_err(|_| Reuse::ClosedBeforeAnswer)?;
        let (answer, mut stream) = send
            .send_request(head, body.is_empty())
            .map_err(|_| Reuse::ClosedBeforeAnswer)?;
        if !body.is_empty() {
            stream
                .send_data(body, true)
                .map_err(|_| Reuse::Failed("write error"))?;
        }
        let answer = answer.await.map_err(|e| match e.is_go_away() {
            true => Reuse::ClosedBeforeAnswer,
            false => Reuse::Failed("HTTP/2 stream error"),
        })?;
        receive(answer, data, rated, clock).await
    };
    tokio::select! {
        done = exchange => done,
        // The connection ended before the answer did.
        _ = conn => Err(Reuse::ClosedBeforeAnswer),
    }
}

/// An HTTP/1.1 request as an HTTP/2 one, and its body.
///
/// The request is the kit's, parsed by the server's own request parser (a head the
/// server would refuse is one the kit never sends).
fn translate(request: &[u8]) -> Result<(http::Request<()>, Bytes), Reuse> {
    let bad = || Reuse::Failed("request not translatable to HTTP/2");
    let mut storage = header_storage();
    let parsed = match parse_request(request, &mut storage, &REQUEST_LIMITS) {
        Ok(Status::Complete(head)) => head,
        _ => return Err(bad()),
    };
    let host = parsed
        .header("host")
        .and_then(|value| std::str::from_utf8(value).ok())
        .ok_or_else(bad)?;
    let path = std::str::from_utf8(parsed.target).map_err(|_| bad())?;
    let uri = format!("https://{host}{path}");
    let mut builder = http::Request::builder()
        .method(parsed.method_token)
        .uri(uri);
    let head_len = parsed.len;
    for field in parsed.headers {
        if DROPPED.iter().any(|d| field.name.eq_ignore_ascii_case(d)) {
            continue;
        }
        builder = builder.header(field.name, field.value);
    }
    let head = builder.body(()).map_err(|_| bad())?;
    Ok((head, Bytes::copy_from_slice(&request[head_len..])))
}

/// Reads the answer's body, writing its head and first bytes into `data`.
async fn receive(
    answer: http::Response<::h2::RecvStream>,
    data: &mut Vec<u8>,
    rated: &mut RatedReceive,
    clock: &Clock,
) -> Result<Response, Reuse> {
    let (parts, mut body) = answer.into_parts();
    data.clear();
    let mut head = String::with_capacity(256);
    let _ = write!(head, "HTTP/1.1 {} -\r\n", parts.status.as_u16());
    for (name, value) in &parts.headers {
        head.push_str(name.as_str());
        head.push_str(": ");
        head.push_str(&String::from_utf8_lossy(value.as_bytes()));
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    data.extend_from_slice(head.as_bytes());
    let body_start = data.len();
    rated.read(body_start, clock.ms(Instant::now()));
    let mut body_len = 0;
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|_| Reuse::Failed("HTTP/2 stream error"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        rated.read(chunk.len(), clock.ms(Instant::now()));
        let room = (body_start + KEEP_BODY).saturating_sub(data.len());
        data.extend_from_slice(&chunk[..room.min(chunk.len())]);
        body_len += chunk.len();
    }
    Ok(Response {
        status: parts.status.as_u16(),
        body_start,
        body_len,
        close: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kits_request_becomes_pseudo_headers_and_a_body() {
        let request = b"POST /web99 HTTP/1.0\r\nHost: 127.0.0.1:8080\r\n\
            Connection: Keep-Alive\r\nCookie: my_cookie=user_id=10000&last_ad=1\r\n\
            Content-Length: 5\r\n\r\nhello";
        let (head, body) = translate(request).ok().expect("translates");
        assert_eq!(head.method(), "POST");
        assert_eq!(head.uri(), "https://127.0.0.1:8080/web99");
        assert!(head.headers().get("connection").is_none());
        assert!(head.headers().get("host").is_none());
        assert_eq!(
            head.headers()["cookie"],
            "my_cookie=user_id=10000&last_ad=1"
        );
        assert_eq!(head.headers()["content-length"], "5");
        assert_eq!(body, "hello");
    }

    #[test]
    fn a_get_has_no_body() {
        let (head, body) =
            translate(b"GET /file_set/dir00000/class1_1 HTTP/1.0\r\nHost: h\r\n\r\n")
                .ok()
                .expect("translates");
        assert_eq!(head.uri().path(), "/file_set/dir00000/class1_1");
        assert!(body.is_empty());
    }
}
