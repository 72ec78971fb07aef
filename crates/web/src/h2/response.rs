//! The answer queued on an [`Output`] as an HTTP/2 response: the status and
//! fields of its HTTP/1.1 head, without the connection-specific ones, then its
//! body as DATA frames, as fast as the client's flow-control window and the
//! socket allow.

use std::future::poll_fn;
use std::io;
use std::os::unix::fs::FileExt;
use std::time::Duration;

use bytes::Bytes;
use h2::SendStream;
use h2::server::SendResponse;
use stoa_http_proto::request::header_storage;
use stoa_http_proto::{Method, ResponseLimits, Status, parse_response};

use crate::output::{Chunk, Output};

/// Most bytes handed to h2 at once: one read of a file, a few DATA frames.
const MAX_CHUNK: usize = crate::local::TLS_BATCH;

/// Most fields in a response head we wrote (a static file's has about ten).
const MAX_FIELDS: usize = 64;

/// The limits a head we wrote is read back with: [`MAX_FIELDS`], and no size
/// limit (the head is whole in memory already, and a CGI script's fields may be
/// long; the limits are for heads from other servers).
const HEAD_LIMITS: ResponseLimits = ResponseLimits {
    max_status_line: usize::MAX,
    max_header_line: usize::MAX,
    max_head: usize::MAX,
    max_headers: MAX_FIELDS,
};

/// Fields that belong to an HTTP/1 connection, never sent over HTTP/2
/// (RFC 9113 §8.2.2).
const CONNECTION_FIELDS: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Why a response could not be sent.
#[derive(Debug)]
pub(super) enum Failed {
    /// The stream or the connection failed (the client's reset among others).
    H2(h2::Error),
    /// The client's window stayed shut for the send timeout.
    Stalled,
    /// A file could not be read, or the queued head was not one we can send.
    Local(io::Error),
}

impl From<h2::Error> for Failed {
    fn from(e: h2::Error) -> Self {
        Failed::H2(e)
    }
}

/// Sends the single response queued on `out`, advancing its cursor as bytes go
/// (so the access log counts what was sent).
pub(super) async fn send(
    out: &mut Output,
    respond: &mut SendResponse<Bytes>,
    send_timeout: Duration,
) -> Result<(), Failed> {
    let (response, body_len) = take_head(out)?;
    let mut send = respond.send_response(response, body_len == 0)?;
    if body_len > 0 {
        send_body(out, &mut send, send_timeout).await?;
    }
    Ok(())
}

/// Queues the single response on `out` with h2 as far as the client's window
/// has room for it now, without waiting. Returns the stream when some of the
/// body is left: the caller sends the rest under flow control ([`send_body`]).
/// Nothing is read or copied ahead of the window, so a client that never opens
/// it holds no body in the server's memory (a file stays an open descriptor).
pub(super) fn send_now(
    out: &mut Output,
    respond: &mut SendResponse<Bytes>,
) -> Result<Option<SendStream<Bytes>>, Failed> {
    let (response, body_len) = take_head(out)?;
    let mut send = respond.send_response(response, body_len == 0)?;
    while let Some(chunk) = out.peek(MAX_CHUNK) {
        let want = chunk.len();
        send.reserve_capacity(want);
        let room = send.capacity().min(want);
        if room == 0 {
            return Ok(Some(send));
        }
        let data = read(chunk, room)?;
        out.advance(room as u64);
        send.send_data(data, out.is_done())?;
    }
    Ok(None)
}

/// The response of the head at `out`'s cursor, which is advanced past it, and
/// the length of the body that follows.
fn take_head(out: &mut Output) -> Result<(http::Response<()>, u64), Failed> {
    let Some(queued) = out.queued().first() else {
        return Err(Failed::Local(io::Error::other("no response was queued")));
    };
    let (head_len, body_len) = (queued.head_len as usize, queued.body_len);
    // A head is one range of the head buffer (`Output::push` joins adjacent
    // ranges, never splits one), so it comes out whole in one chunk.
    let head = match out.peek(head_len) {
        Some(Chunk::Bytes(head)) if head.len() == head_len => head,
        _ => return Err(Failed::Local(io::Error::other("a response head was cut"))),
    };
    out.advance(head_len as u64);
    Ok((translate(&head).map_err(Failed::Local)?, body_len))
}

/// The first `len` bytes of `chunk` (a file's read from it).
fn read(chunk: Chunk, len: usize) -> Result<Bytes, Failed> {
    match chunk {
        Chunk::Bytes(b) => Ok(b.slice(..len)),
        Chunk::File { fd, offset, .. } => {
            let mut buf = vec![0; len];
            fd.read_exact_at(&mut buf, offset).map_err(Failed::Local)?;
            Ok(Bytes::from(buf))
        }
    }
}

/// The response of an HTTP/1.1 head. Field values are slices of `head`, not
/// copies.
fn translate(head: &Bytes) -> io::Result<http::Response<()>> {
    let mut storage = header_storage();
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    // The framing is not read (h2 frames the body), so any method does.
    let parsed = match parse_response(head, &mut storage, &HEAD_LIMITS, Method::Get) {
        Ok(Status::Complete(parsed)) => parsed,
        _ => return Err(bad("a response head we cannot parse")),
    };
    let status = parsed.status;
    let mut response = http::Response::new(());
    *response.status_mut() =
        http::StatusCode::from_u16(status).map_err(|_| bad("a status out of range"))?;
    let headers = response.headers_mut();
    for field in parsed.headers {
        if CONNECTION_FIELDS
            .iter()
            .any(|c| field.name.eq_ignore_ascii_case(c))
        {
            continue;
        }
        let name = http::HeaderName::from_bytes(field.name.as_bytes())
            .map_err(|_| bad("a field name we cannot send"))?;
        let value = http::HeaderValue::from_maybe_shared(head.slice_ref(field.value))
            .map_err(|_| bad("a field value we cannot send"))?;
        headers.append(name, value);
    }
    Ok(response)
}

/// Sends the body at `out`'s cursor: each chunk once the client's window has
/// room for it, the last one ending the stream.
pub(super) async fn send_body(
    out: &mut Output,
    send: &mut SendStream<Bytes>,
    send_timeout: Duration,
) -> Result<(), Failed> {
    while let Some(chunk) = out.peek(MAX_CHUNK) {
        let want = chunk.len();
        send.reserve_capacity(want);
        let room = loop {
            let capacity = poll_fn(|cx| send.poll_capacity(cx));
            match tokio::time::timeout(send_timeout, capacity).await {
                Err(_) => return Err(Failed::Stalled),
                Ok(None) => return Err(Failed::Local(io::ErrorKind::BrokenPipe.into())),
                Ok(Some(Err(e))) => return Err(Failed::H2(e)),
                Ok(Some(Ok(0))) => continue,
                Ok(Some(Ok(n))) => break n.min(want),
            }
        };
        let data = read(chunk, room)?;
        out.advance(room as u64);
        send.send_data(data, out.is_done())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_fields_stay_behind() {
        let head = b"HTTP/1.1 200 OK\r\nDate: x\r\nConnection: keep-alive\r\n\
                     Keep-Alive: timeout=15\r\nContent-Length: 5\r\nETag: \"a\"\r\n\r\n";
        let response = translate(&Bytes::from_static(head)).expect("translate");
        assert_eq!(response.status(), 200);
        let names: Vec<_> = response.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["date", "content-length", "etag"]);
    }

    #[test]
    fn a_broken_head_is_an_error() {
        assert!(translate(&Bytes::from_static(b"HTTP/1.1 200 OK\r\nDate: x\r\n")).is_err());
        assert!(translate(&Bytes::from_static(b"nonsense\r\n\r\n")).is_err());
    }
}
