//! Response heads and generated responses, shared by every handler.
//!
//! All responses go through [`Reply`]: it writes the status line, `Server` and the
//! cached `Date`, closes the head with the right `Connection` header, and queues the
//! response on the connection's [`Output`] together with its access-log text. An
//! answer that waits (for the web99 state thread, a CGI script) keeps its `Reply`
//! [`Reply::undated`] across the wait and dates it when it is sent.

use stoa_http_proto::Version;
use stoa_http_proto::response::HeadWriter;

use crate::access_log::LogText;
use crate::metrics::Tally;
use crate::output::{Body, Output};

/// The server's name and version, as in `Server` and the dynamic API's
/// `SERVER_SOFTWARE`.
pub(crate) const SERVER_SOFTWARE: &str = concat!("stoa/", env!("CARGO_PKG_VERSION"));

/// The `Server` header line.
pub(crate) const SERVER_LINE: &[u8] =
    concat!("Server: stoa/", env!("CARGO_PKG_VERSION"), "\r\n").as_bytes();

/// What every response to one request shares.
#[derive(Debug)]
pub(crate) struct Reply<'a> {
    /// The cached `Date` value (empty in an undated reply).
    pub(crate) date: &'a [u8],
    /// Whether the connection stays open after this response.
    pub(crate) keep_alive: bool,
    /// The request's version (HTTP/1.0 needs an explicit `keep-alive`).
    pub(crate) version: Version,
    /// HEAD: send the head only.
    pub(crate) head_only: bool,
    /// The request's method and site, and when its answer began, as counted.
    pub(crate) tally: Tally,
    /// The request's access-log text and the log it goes to.
    pub(crate) log: Option<LogText>,
}

impl Reply<'_> {
    /// The reply without its date, to keep across a wait: the `Date` sent is that
    /// of the moment the answer is ready ([`Reply::dated`]).
    pub(crate) fn undated(self) -> Reply<'static> {
        Reply {
            date: b"",
            keep_alive: self.keep_alive,
            version: self.version,
            head_only: self.head_only,
            tally: self.tally,
            log: self.log,
        }
    }

    /// The reply with `date` as its `Date`.
    pub(crate) fn dated(self, date: &[u8]) -> Reply<'_> {
        Reply {
            date,
            keep_alive: self.keep_alive,
            version: self.version,
            head_only: self.head_only,
            tally: self.tally,
            log: self.log,
        }
    }

    /// Starts a head in `out`; returns where it starts and the writer.
    pub(crate) fn begin<'o>(&self, out: &'o mut Output, status: u16) -> (usize, HeadWriter<'o>) {
        let buf = out.heads_mut();
        let start = buf.len();
        let w = HeadWriter::new(buf, status)
            .raw(SERVER_LINE)
            .header("Date", self.date);
        (start, w)
    }

    /// Ends a head started with [`Reply::begin`].
    pub(crate) fn end(&self, w: HeadWriter<'_>) {
        let w = match (self.keep_alive, self.version) {
            (false, _) => w.raw(b"Connection: close\r\n"),
            (true, Version::Http10) => w.raw(b"Connection: keep-alive\r\n"),
            (true, Version::Http11) => w,
        };
        w.finish();
    }

    /// Queues a finished head and its body (dropped for HEAD).
    pub(crate) fn send(&self, out: &mut Output, status: u16, head_start: usize, body: Body) {
        let body = if self.head_only { Body::Empty } else { body };
        let head = head_start..out.heads_mut().len();
        out.push((status, self.tally), head, body, self.log.clone());
    }

    /// Queues a small generated response: `status`, extra header lines (CRLF-ended),
    /// and a one-line text body naming the status.
    pub(crate) fn status_page(&self, out: &mut Output, status: u16, extra: &[u8]) {
        self.explained_page(out, status, extra, "");
    }

    /// Like [`Reply::status_page`], with a reason after the status in the body
    /// (`400 Bad Request: bad user_id in my_cookie`).
    pub(crate) fn explained_page(&self, out: &mut Output, status: u16, extra: &[u8], why: &str) {
        let reason = stoa_http_proto::response::reason(status);
        let mut text = format!("{status} {reason}");
        if !why.is_empty() {
            text.push_str(": ");
            text.push_str(why);
        }
        text.push('\n');
        let (start, w) = self.begin(out, status);
        let mut w = w.raw(extra);
        if status != 304 {
            w = w
                .header("Content-Type", b"text/plain")
                .content_length(text.len() as u64);
        }
        self.end(w);
        if status == 304 || self.head_only {
            return self.send(out, status, start, Body::Empty);
        }
        let heads = out.heads_mut();
        let body_start = heads.len();
        let head = start..body_start;
        heads.extend_from_slice(text.as_bytes());
        let body = Body::Heads(body_start..heads.len());
        out.push((status, self.tally), head, body, self.log.clone());
    }
}

/// A request answered with a generated status page instead of a handler's
/// response (a method the resource does not allow, a malformed target or query).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) status: u16,
    /// Why, after the status in the page's text; may be empty.
    pub(crate) why: &'static str,
    /// Extra header lines, CRLF-ended (`Allow: …`).
    pub(crate) extra: &'static [u8],
}

impl Refusal {
    /// A refusal with a reason and no extra header.
    pub(crate) fn new(status: u16, why: &'static str) -> Refusal {
        Refusal {
            status,
            why,
            extra: b"",
        }
    }
}

impl Reply<'_> {
    /// Queues the status page of `refusal`.
    pub(crate) fn refuse(&self, out: &mut Output, refusal: &Refusal) {
        self.explained_page(out, refusal.status, refusal.extra, refusal.why);
    }
}
