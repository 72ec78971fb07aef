//! Request bodies: gathered whole for a dynamic handler, or skipped after a file
//! request was answered. Both keep their state between reads, so each input byte
//! is looked at once however the body arrives.

use std::borrow::Cow;
use std::time::Instant;

use stoa_http_proto::chunked::ChunkedDecoder;
use stoa_http_proto::{BodyKind, Method, RequestHead};

use super::{Dynamic, Site};

/// A dynamic request whose body is being gathered. The raw body stays in the
/// connection's read buffer, after the head, until all of it is there (the head is
/// parsed again from that buffer on every call); a chunked body is decoded as it
/// arrives, the decoder and the body so far kept here.
#[derive(Debug)]
pub(crate) struct Gathering {
    /// The request's route, decided when its head first arrived.
    pub(crate) route: Dynamic,
    /// Largest body accepted (the handler's limit).
    max: u64,
    /// A bodiless POST must say `Content-Length: 0` (411 otherwise): the dynamic
    /// API needs its form, while a CGI script may take a bodiless POST.
    length_required: bool,
    /// `100 Continue` was sent for this request.
    continue_sent: bool,
    /// The chunked decoding so far (on the first chunked call; boxed so that the
    /// common bodiless request moves less).
    chunked: Option<Box<Dechunked>>,
}

#[derive(Debug)]
struct Dechunked {
    decoder: ChunkedDecoder,
    /// The body bytes decoded so far.
    body: Vec<u8>,
    /// Input bytes (after the head) the decoder has consumed.
    used: usize,
}

/// How far a body has been gathered.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Gathered<'a> {
    /// The body and how many input bytes it took (with chunked framing).
    Complete(Cow<'a, [u8]>, usize),
    /// More bytes are needed.
    Incomplete,
    /// Refused: the status and why.
    Refused(u16, &'static str),
}

impl Gathering {
    /// Starts gathering the body of `head`, routed to `route`.
    pub(crate) fn new(route: Dynamic, head: &RequestHead<'_, '_>, site: Site<'_>) -> Gathering {
        let (max, web99) = match &route {
            Dynamic::Web99(_) => (site.web99().map_or(0, |w| w.config.max_post_body), true),
            Dynamic::Cgi { .. } => (site.cgi().map_or(0, |c| c.config.max_body), false),
        };
        Gathering {
            route,
            max,
            // `Content-Length: 0` is a length, and an empty form (400 later on).
            length_required: web99
                && head.method == Method::Post
                && head.header("Content-Length").is_none(),
            continue_sent: false,
            chunked: None,
        }
    }

    /// Gathers the body of `head` from `input` (the bytes after the head; each
    /// call with the input of the previous call plus what arrived since).
    pub(crate) fn gather<'a>(
        &mut self,
        head: &RequestHead<'_, '_>,
        input: &'a [u8],
    ) -> Gathered<'a> {
        match head.body {
            BodyKind::None if self.length_required => {
                Gathered::Refused(411, "POST without Content-Length")
            }
            BodyKind::None => Gathered::Complete(Cow::Borrowed(&[]), 0),
            BodyKind::Length(n) if n > self.max => Gathered::Refused(413, "request body too large"),
            BodyKind::Length(n) => match input.get(..n as usize) {
                Some(body) => Gathered::Complete(Cow::Borrowed(body), n as usize),
                None => Gathered::Incomplete,
            },
            BodyKind::Chunked => self.dechunk(input),
        }
    }

    /// Decodes the chunked input that arrived since the last call.
    fn dechunk<'a>(&mut self, input: &'a [u8]) -> Gathered<'a> {
        let max = self.max;
        let d = self.chunked.get_or_insert_with(|| {
            Box::new(Dechunked {
                decoder: ChunkedDecoder::new(),
                body: Vec::new(),
                used: 0,
            })
        });
        loop {
            let Some(rest) = input.get(d.used..) else {
                debug_assert!(false, "the input shrank between calls");
                return Gathered::Incomplete;
            };
            let Ok(step) = d.decoder.decode(rest) else {
                return Gathered::Refused(400, "malformed chunked body");
            };
            d.used += step.consumed;
            d.body.extend_from_slice(step.data);
            if d.body.len() as u64 > max {
                return Gathered::Refused(413, "request body too large");
            }
            if step.done {
                return Gathered::Complete(Cow::Owned(std::mem::take(&mut d.body)), d.used);
            }
            if step.consumed == 0 {
                return Gathered::Incomplete;
            }
        }
    }

    /// Whether to send `100 Continue` now: the client asked and has not had it.
    pub(crate) fn wants_continue(&mut self, head: &RequestHead<'_, '_>) -> bool {
        let send = head.expect_continue && !self.continue_sent;
        self.continue_sent |= send;
        send
    }
}

/// The body of an answered file request, read and thrown away.
#[derive(Debug)]
pub(crate) struct Discard {
    framing: Framing,
    /// When its skipping began (the body's deadline runs from here).
    pub(crate) started: Instant,
    /// Body bytes skipped so far.
    pub(crate) seen: u64,
}

#[derive(Debug)]
enum Framing {
    /// Bytes still to skip.
    Length(u64),
    Chunked(ChunkedDecoder),
}

impl Discard {
    /// The skipping of a body framed as `body`, if there is one.
    pub(crate) fn new(body: BodyKind, now: Instant) -> Option<Discard> {
        let framing = match body {
            BodyKind::None => return None,
            BodyKind::Length(n) => Framing::Length(n),
            BodyKind::Chunked => Framing::Chunked(ChunkedDecoder::new()),
        };
        Some(Discard {
            framing,
            started: now,
            seen: 0,
        })
    }

    /// Skips what `input` holds of the body: the bytes used and whether the body
    /// is complete; `Err` when it is malformed or longer than `max`.
    pub(crate) fn skip(&mut self, input: &[u8], max: u64) -> Result<(usize, bool), ()> {
        match &mut self.framing {
            Framing::Length(left) => {
                let n = (*left).min(input.len() as u64);
                *left -= n;
                self.seen += n;
                Ok((n as usize, *left == 0))
            }
            Framing::Chunked(decoder) => {
                let mut used = 0;
                loop {
                    let step = decoder.decode(&input[used..]).map_err(|_| ())?;
                    used += step.consumed;
                    self.seen += step.data.len() as u64;
                    if self.seen > max {
                        return Err(());
                    }
                    if step.done || step.consumed == 0 {
                        return Ok((used, step.done));
                    }
                }
            }
        }
    }
}
