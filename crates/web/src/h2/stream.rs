//! One HTTP/2 stream: its body gathered, the request translated and answered by
//! the HTTP/1 handlers, the answer sent and logged.

use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use stoa_http_proto::request::header_storage;
use stoa_http_proto::{Status, parse_request};

use super::response::{self, Failed};
use super::{Link, request};
use crate::dispatch::{self, Cx, Here, Outcome, Site, Then, Waiting};
use crate::local;
use crate::output::Output;

/// Where a stream stands when the connection's task hands it to a task of its
/// own.
pub(super) enum Rest {
    /// A request with a body, to be gathered first.
    Body(http::Request<RecvStream>, SendResponse<Bytes>),
    /// Answered, or waiting for its answer (a CGI script, a dynamic request
    /// that waits), with more to send than the connection's task sends at once.
    Answer {
        respond: SendResponse<Bytes>,
        out: Output,
        waiting: Option<Waiting>,
    },
    /// Answered, its head and as much of its body sent as the client's window
    /// took at once; the rest waits for the window.
    Sending {
        send: SendStream<Bytes>,
        out: Output,
    },
}

/// The largest response body the connection's task queues at once: what h2
/// buffers for one stream anyway ([`super::SEND_BUFFER`]).
const AT_ONCE: u64 = super::SEND_BUFFER as u64;

/// Starts answering a stream on the connection's task. A request without a body
/// whose answer is ready and small (a file, a cached page, an error) is answered
/// and logged here, with no task of its own: its frames join h2's send queue and
/// leave with the next flush, together with those of the other streams read in
/// the same batch. The rest is returned, for [`serve`] to finish: among them an
/// answer the client's window does not take whole at once, whose bytes wait
/// unread (a file stays a descriptor) instead of in h2's queue.
pub(super) fn start(
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    link: &Link,
) -> Option<Rest> {
    if !request.body().is_end_stream() {
        return Some(Rest::Body(request, respond));
    }
    let shared = &link.shared;
    let (parts, _) = request.into_parts();
    let input = match request::head(&parts, None) {
        Ok(head) => head,
        Err(request::Malformed(why)) => {
            respond.send_reset(Reason::PROTOCOL_ERROR);
            tracing::debug!("{}: HTTP/2 stream: {why}", link.client.peer);
            return None;
        }
    };
    let mut out = local::with(shared, |l| l.take_output());
    let ended = match handle(&input, &mut out, link) {
        Ok(waiting @ Some(_)) => {
            return Some(Rest::Answer {
                respond,
                out,
                waiting,
            });
        }
        Ok(None) if out.queued().first().is_some_and(|q| q.body_len > AT_ONCE) => {
            return Some(Rest::Answer {
                respond,
                out,
                waiting: None,
            });
        }
        Ok(None) => match response::send_now(&mut out, &mut respond) {
            Ok(None) => Ok(()),
            Ok(Some(send)) => return Some(Rest::Sending { send, out }),
            Err(e) => Err(failed(e, |r| respond.send_reset(r))),
        },
        Err(why) => {
            respond.send_reset(Reason::INTERNAL_ERROR);
            Err(Ended::Other(why.into()))
        }
    };
    if let Err(e) = ended {
        tracing::debug!("{}: HTTP/2 stream: {e}", link.client.peer);
    }
    done(link, out);
    None
}

/// Finishes a stream [`start`] could not answer at once, then lets the
/// connection know how it ended.
pub(super) async fn serve(rest: Rest, link: Arc<Link>) {
    let busy = Busy::new(&link);
    let ended = match rest {
        Rest::Body(request, mut respond) => answer(request, &mut respond, &link).await,
        Rest::Answer {
            mut respond,
            mut out,
            waiting,
        } => {
            let ended = finish(&mut respond, &mut out, waiting, &link).await;
            done(&link, out);
            ended
        }
        Rest::Sending { mut send, mut out } => {
            let send_timeout = link.shared.config.limits.send_timeout;
            let sent = response::send_body(&mut out, &mut send, send_timeout).await;
            done(&link, out);
            sent.map_err(|e| failed(e, |r| send.send_reset(r)))
        }
    };
    if let Err(e) = &ended {
        if e.by_client() {
            link.resets.fetch_add(1, Ordering::Relaxed);
        }
        tracing::debug!("{}: HTTP/2 stream: {e}", link.client.peer);
    }
    drop(busy);
}

/// Logs the answer on `out` as far as it was sent, and gives `out` back.
fn done(link: &Link, mut out: Output) {
    crate::conn::log_written(
        &link.shared,
        &mut out,
        link.client.peer.ip(),
        Instant::now(),
    );
    local::with(&link.shared, |l| l.give_output(out));
}

/// Counts the stream as running (the connection's idle timer) and in flight (the
/// server's draining) while it lives.
struct Busy<'a>(&'a Link);

impl Busy<'_> {
    fn new(link: &Link) -> Busy<'_> {
        link.shared.busy.fetch_add(1, Ordering::Relaxed);
        Busy(link)
    }
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.shared.busy.fetch_sub(1, Ordering::Relaxed);
        self.0.open.fetch_sub(1, Ordering::Relaxed);
        self.0.ended.notify_one();
    }
}

/// What went wrong on a stream, for the connection's reset count and the log.
#[derive(Debug)]
enum Ended {
    H2(h2::Error),
    /// The client reset the stream while its answer was being made.
    Reset(Reason),
    Other(String),
}

impl Ended {
    /// The client reset the stream.
    fn by_client(&self) -> bool {
        match self {
            Ended::H2(e) => e.is_reset() && e.is_remote(),
            Ended::Reset(_) => true,
            Ended::Other(_) => false,
        }
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::H2(e) => e.fmt(f),
            Ended::Reset(reason) => write!(f, "reset by the client: {reason}"),
            Ended::Other(why) => f.write_str(why),
        }
    }
}

async fn answer(
    request: http::Request<RecvStream>,
    respond: &mut SendResponse<Bytes>,
    link: &Link,
) -> Result<(), Ended> {
    let shared = &link.shared;
    let limits = shared.config.limits;
    let (parts, mut body) = request.into_parts();
    // As much body as any handler takes, and one byte more to tell a body that
    // is too large: the handlers refuse it (413) from its length. One declared
    // too large is refused from its length without reading a byte of it.
    let most = shared
        .max_dynamic_body
        .max(usize::try_from(limits.max_discard_body).unwrap_or(usize::MAX));
    let declared = (parts.headers.get(http::header::CONTENT_LENGTH))
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let (length, gathered) = match declared {
        _ if body.is_end_stream() => (None, Vec::new()),
        Some(n) if n > most as u64 => (Some(n), Vec::new()),
        _ => {
            let deadline = Instant::now() + limits.body_timeout;
            match tokio::time::timeout_at(deadline.into(), gather(&mut body, most)).await {
                Ok(Ok(bytes)) => (Some(bytes.len() as u64), bytes),
                Ok(Err(e)) => return Err(Ended::H2(e)),
                Err(_) => {
                    respond.send_reset(Reason::CANCEL);
                    return Err(Ended::Other("request body timed out".into()));
                }
            }
        }
    };
    let mut input = match request::head(&parts, length) {
        Ok(head) => head,
        Err(request::Malformed(why)) => {
            respond.send_reset(Reason::PROTOCOL_ERROR);
            return Err(Ended::Other(why.into()));
        }
    };
    input.extend_from_slice(&gathered);
    let mut out = local::with(shared, |l| l.take_output());
    let ended = match handle(&input, &mut out, link) {
        Ok(waiting) => finish(respond, &mut out, waiting, link).await,
        Err(why) => {
            respond.send_reset(Reason::INTERNAL_ERROR);
            Err(Ended::Other(why.into()))
        }
    };
    crate::conn::log_written(shared, &mut out, link.client.peer.ip(), Instant::now());
    local::with(shared, |l| l.give_output(out));
    ended
}

/// Waits for the answer when a handler handed back something to wait for, then
/// sends it. A reset stops the wait: the answer is dropped unmade (a CGI script
/// is killed with its future).
async fn finish(
    respond: &mut SendResponse<Bytes>,
    out: &mut Output,
    waiting: Option<Waiting>,
    link: &Link,
) -> Result<(), Ended> {
    let shared = &link.shared;
    if let Some(waiting) = waiting {
        tokio::select! {
            ready = waiting.wait(Site::of(shared)) => local::with(shared, |l| {
                l.tick();
                ready.send(out, l.date.http());
            }),
            reset = poll_fn(|cx| respond.poll_reset(cx)) => {
                return Err(match reset {
                    Ok(reason) => Ended::Reset(reason),
                    Err(e) => Ended::H2(e),
                });
            }
        }
    }
    let send_timeout = shared.config.limits.send_timeout;
    match response::send(out, respond, send_timeout).await {
        Ok(()) => Ok(()),
        Err(e) => Err(failed(e, |r| respond.send_reset(r))),
    }
}

/// Resets the stream (with `reset`) as `e` requires, and says why it ended.
fn failed(e: Failed, reset: impl FnOnce(Reason)) -> Ended {
    match e {
        Failed::H2(e) => Ended::H2(e),
        Failed::Stalled => {
            reset(Reason::CANCEL);
            Ended::Other("the client's window stayed shut".into())
        }
        Failed::Local(e) => {
            reset(Reason::INTERNAL_ERROR);
            Ended::Other(e.to_string())
        }
    }
}

/// Reads the request body, `most` bytes and one more at most, giving the window
/// back as it goes.
async fn gather(body: &mut RecvStream, most: usize) -> Result<Vec<u8>, h2::Error> {
    let mut gathered = Vec::new();
    while let Some(data) = body.data().await {
        let data = data?;
        let _ = body.flow_control().release_capacity(data.len());
        let room = (most + 1).saturating_sub(gathered.len());
        gathered.extend_from_slice(&data[..data.len().min(room)]);
        if gathered.len() > most {
            // The rest is not read: the answer (413) says why.
            break;
        }
    }
    Ok(gathered)
}

/// Parses the translated request `input` (head and body) and queues its answer on
/// `out`, or hands back what the answer waits for.
fn handle(input: &[u8], out: &mut Output, link: &Link) -> Result<Option<Waiting>, &'static str> {
    let shared = &link.shared;
    let here = Here::Known(link.here.unwrap_or(link.client.peer));
    local::with(shared, |local| {
        local.tick();
        let site = Site::of(shared);
        let mut storage = header_storage();
        let head = match parse_request(input, &mut storage, &shared.config.limits.head) {
            Ok(Status::Complete(head)) => head,
            Ok(Status::Partial) => return Err("a translated head was incomplete"),
            Err(e) => {
                // Too long a target, too many fields, …: the HTTP/1 answer.
                dispatch::refuse_head(
                    out,
                    (site, Instant::now()),
                    local.date.http(),
                    input,
                    e.status(),
                );
                return Ok(None);
            }
        };
        let mut cx = Cx {
            site,
            client: &link.client,
            here,
            cache: &mut local.cache,
            encoder: &mut local.encoder,
            date: local.date.http(),
            out,
            now: Instant::now(),
        };
        match dispatch::answer(&head, &input[head.len..], None, &mut cx) {
            Outcome::Answered {
                then: Then::Wait { waiting, .. },
                ..
            } => Ok(Some(waiting)),
            // Keep-alive and what to do with the rest of the input are the
            // connection's business, and this connection is HTTP/2's.
            Outcome::Answered { .. } | Outcome::Refused => Ok(None),
            Outcome::Incomplete(_) => Err("a translated request's body was incomplete"),
        }
    })
}
