//! From a parsed request head to a queued answer: each request is routed once
//! ([`route()`]), its keep-alive decided once ([`keep_alive`]), its body gathered
//! (dynamic requests) or left for the connection to discard (files), and its
//! handler called with only what that handler needs.
//!
//! The connection ([`crate::conn`]) owns the socket and the buffers and calls
//! [`answer`] for each complete head; it gets back an [`Outcome`] saying how much
//! input was used and what comes next. Nothing here reads or writes the socket:
//! answers are queued on the connection's [`Output`], and a handler that must wait
//! (the web99 state thread, a CGI script) hands back a [`Waiting`] for the
//! connection to await.
//!
//! Main types: [`Site`] (the server's side), [`Client`] (the connection's side),
//! [`Route`], [`Gathering`] (a dynamic request's body as it arrives), [`Discard`]
//! (a file request's body being skipped), [`Outcome`].

mod body;
mod route;

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::time::Instant;

use stoa_http_proto::target::Target;
use stoa_http_proto::{BodyKind, Method, RequestHead};

use body::Gathered;
pub(crate) use body::{Discard, Gathering};
pub(crate) use route::{Dynamic, Route, route};

use crate::access_log::{self, LogText};
use crate::cache::FileCache;
use crate::cgi::{self, Cgi};
use crate::config::{Config, LogFormat};
use crate::encoding::Encoder;
use crate::metrics;
use crate::output::Output;
use crate::response::{Refusal, Reply};
use crate::shared::Shared;
use crate::static_files::{self, Files};
use crate::vhost::VirtualHost;
use crate::web99::{self, Web99};

/// The interim response sent to a client waiting for `100 Continue`.
const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The server's side of answering: the parts of [`Shared`] that routing and the
/// handlers' contexts are built from, and the site the request is for. A view
/// (two pointers) rather than a copy of the fields, because one is made for
/// every batch of requests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Site<'s> {
    shared: &'s Shared,
    host: &'s VirtualHost,
}

impl<'s> Site<'s> {
    /// The view of a server's shared state, at its default site.
    pub(crate) fn of(shared: &'s Shared) -> Site<'s> {
        Site {
            shared,
            host: shared.default_site(),
        }
    }

    /// The site `head` is for, chosen once per request. A server with one site
    /// has nothing to choose (the common case costs one comparison). With
    /// several, the absolute-form target's authority or `Host` names it (the
    /// default site for none or an unknown name); a TLS connection whose SNI
    /// named another site is refused 421, as its certificate was chosen for
    /// that one.
    #[inline]
    fn select(self, head: &RequestHead<'_, '_>, client: &Client) -> Result<Site<'s>, Refusal> {
        if self.shared.sites.len() == 1 {
            return Ok(self);
        }
        self.select_among(head, client)
    }

    #[inline(never)]
    fn select_among(
        self,
        head: &RequestHead<'_, '_>,
        client: &Client,
    ) -> Result<Site<'s>, Refusal> {
        let host = stoa_http_proto::host::authority(head).map_err(|e| {
            tracing::debug!(
                "400 for the authority of {:?}: {e}",
                String::from_utf8_lossy(head.target)
            );
            Refusal::new(400, "bad host")
        })?;
        let index = self.shared.names.find(host);
        if let Some(sni) = client.sni
            && sni as usize != index
        {
            return Err(Refusal::new(421, "the TLS server name is for another site"));
        }
        Ok(Site {
            shared: self.shared,
            host: &self.shared.sites[index],
        })
    }

    pub(crate) fn config(self) -> &'s Config {
        &self.shared.config
    }

    /// The site's state: its document root, error pages, listing.
    pub(crate) fn host(self) -> &'s VirtualHost {
        self.host
    }

    /// The site's document root, opened once; every file is opened beneath it.
    pub(crate) fn docroot(self) -> &'s OwnedFd {
        &self.host.docroot
    }

    /// The site's index (its part of the file cache).
    pub(crate) fn index(self) -> usize {
        self.host.index
    }

    pub(crate) fn web99(self) -> Option<&'s Web99> {
        self.host.web99.as_ref()
    }

    /// The CGI gateway, when this site mounts scripts.
    pub(crate) fn cgi(self) -> Option<&'s Cgi> {
        if self.host.cgi.is_empty() {
            return None;
        }
        self.shared.cgi.as_ref()
    }

    /// The site's CGI mounts.
    pub(crate) fn cgi_mounts(self) -> &'s [crate::config::CgiMount] {
        &self.host.cgi
    }

    /// This site's access log is on: each request's log text is captured.
    fn logging(self) -> bool {
        self.host.log.is_some()
    }

    /// Set on shutdown and at a reload's hand-over: answers carry
    /// `Connection: close`.
    fn closing(self) -> bool {
        self.shared.closing.load(Ordering::Relaxed)
    }
}

/// The connection's side of answering: who it is with, since when, and how many
/// requests it has answered. The connection keeps it, so answering borrows it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Client {
    pub(crate) peer: SocketAddr,
    /// Requests answered so far (before the one being answered).
    pub(crate) served: u32,
    /// When the connection was accepted.
    pub(crate) born: Instant,
    /// The site a TLS client's SNI named, if it sent one.
    pub(crate) sni: Option<u32>,
    /// Requests come over HTTP/2 (the access log says `HTTP/2.0`), each
    /// translated into an HTTP/1.1 head by [`crate::h2`].
    pub(crate) http2: bool,
}

/// Everything [`answer`] works with besides the request.
#[derive(Debug)]
pub(crate) struct Cx<'a> {
    pub(crate) site: Site<'a>,
    pub(crate) client: &'a Client,
    /// This end's address, asked for only by CGI (`SERVER_PORT`): looked up on
    /// the socket when needed, or known already (HTTP/2).
    pub(crate) here: Here<'a>,
    /// The worker's open-file cache.
    pub(crate) cache: &'a mut FileCache,
    /// The worker's compression on the fly.
    pub(crate) encoder: &'a mut Encoder,
    /// The worker's cached `Date` value.
    pub(crate) date: &'a [u8],
    /// Where the answer is queued.
    pub(crate) out: &'a mut Output,
    pub(crate) now: Instant,
}

/// Where this end's address comes from.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Here<'a> {
    /// Asked of the socket (a system call) when needed.
    Socket(std::os::fd::BorrowedFd<'a>),
    /// Looked up once for the connection.
    Known(SocketAddr),
}

impl Here<'_> {
    fn addr(self) -> Option<SocketAddr> {
        match self {
            Here::Socket(socket) => rustix::net::getsockname(socket)
                .ok()
                .and_then(|addr| SocketAddr::try_from(addr).ok()),
            Here::Known(addr) => Some(addr),
        }
    }
}

/// What became of a request.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Its body is still arriving: read more, then call [`answer`] again (on the
    /// re-parsed head) with this.
    Incomplete(Box<Gathering>),
    /// Refused for its body's framing or size: answered, and the connection
    /// closes (lingering) without reading the rest.
    Refused,
    /// Answered, or handed to something to wait for: `consumed` bytes of input
    /// (its head and any gathered body) are used up.
    Answered { consumed: usize, then: Then },
}

/// What the connection does after an answered request.
#[derive(Debug)]
pub(crate) enum Then {
    /// The next request.
    Next,
    /// Skip the request's body, then the next request.
    Discard(Discard),
    /// Await this, queue its answer, then go on (or close).
    Wait { waiting: Waiting, close: bool },
    /// Close once the answer is out (lingering if input may be unread).
    Close { linger: bool },
}

/// Something a connection waits for before it can answer.
#[derive(Debug)]
pub(crate) enum Waiting {
    Web99(Box<web99::Pending>),
    Cgi(Box<cgi::Pending>),
}

/// A waited-for answer, ready to queue.
#[derive(Debug)]
pub(crate) enum Ready {
    Web99(web99::Ready),
    Cgi(cgi::Ready),
}

impl Waiting {
    /// Waits for the state thread's answer or the script's output.
    pub(crate) async fn wait(self, site: Site<'_>) -> Ready {
        match self {
            Waiting::Web99(p) => Ready::Web99(p.wait().await),
            Waiting::Cgi(p) => {
                // The server's gateway: the site waited from need not be the
                // one whose mount started the script.
                let cgi = site.shared.cgi.as_ref().expect(
                    "invariant: a CGI wait comes from a CGI route, which needs the gateway",
                );
                Ready::Cgi(p.wait(cgi).await)
            }
        }
    }
}

impl Ready {
    /// Queues the answer, dated `date` (now).
    pub(crate) fn send(self, out: &mut Output, date: &[u8]) {
        match self {
            Ready::Web99(r) => r.send(out, date),
            Ready::Cgi(r) => r.send(out, date),
        }
    }
}

/// Answers the request whose head is `head` and whose body (if any) starts
/// `input`; `resumed` is the gathering state of this same request from an earlier
/// call, when its body was incomplete then.
#[inline]
pub(crate) fn answer(
    head: &RequestHead<'_, '_>,
    input: &[u8],
    resumed: Option<Box<Gathering>>,
    cx: &mut Cx<'_>,
) -> Outcome {
    cx.site = match cx.site.select(head, cx.client) {
        Ok(site) => site,
        // No site yet: the built-in page, not the default site's.
        Err(refusal) => return answer_static(head, Err((refusal, false)), cx),
    };
    let gathering = match resumed {
        Some(g) => *g,
        None => match route(head, cx.site) {
            Route::File(target) => return answer_static(head, Ok(&target), cx),
            Route::Refused(refusal) => return answer_static(head, Err((refusal, true)), cx),
            // On the stack: most dynamic requests are complete in their first read.
            Route::Dynamic(dynamic) => Gathering::new(dynamic, head, cx.site),
        },
    };
    answer_dynamic(head, input, gathering, cx)
}

/// A file request (or one refused as such, `true` when the site's error pages
/// apply: not before a site is chosen): answered at once; its body, if any, is
/// skipped afterwards.
#[inline]
fn answer_static(
    head: &RequestHead<'_, '_>,
    route: Result<&Target<'_>, (Refusal, bool)>,
    cx: &mut Cx<'_>,
) -> Outcome {
    let limits = &cx.site.config().limits;
    // A body can be skipped if small enough, and if the client is not waiting for
    // `100 Continue` before sending it (it never comes: the connection closes).
    let skippable = match head.body {
        BodyKind::None => true,
        BodyKind::Length(n) => n <= limits.max_discard_body && !head.expect_continue,
        BodyKind::Chunked => !head.expect_continue,
    };
    let keep_alive = keep_alive(head, skippable, cx);
    let reply = reply(head, keep_alive, cx);
    let mut files = Files {
        cache: cx.cache,
        encoder: cx.encoder,
        site: cx.site.host(),
        now: cx.now,
    };
    match route {
        Ok(target) => {
            static_files::serve(head, target, &reply, cx.out, &mut files);
        }
        Err((refusal, true)) => static_files::refuse(&reply, cx.out, &mut files, &refusal),
        Err((refusal, false)) => reply.refuse(cx.out, &refusal),
    }
    let then = if !keep_alive {
        Then::Close {
            linger: head.body != BodyKind::None,
        }
    } else {
        Discard::new(head.body, cx.now).map_or(Then::Next, Then::Discard)
    };
    Outcome::Answered {
        consumed: head.len,
        then,
    }
}

/// A dynamic request: its body is gathered whole first (it stays in the input,
/// unconsumed, until all of it has arrived); then the handler answers at once or
/// hands back something to wait for.
fn answer_dynamic(
    head: &RequestHead<'_, '_>,
    input: &[u8],
    mut gathering: Gathering,
    cx: &mut Cx<'_>,
) -> Outcome {
    let (body, body_len) = match gathering.gather(head, input) {
        Gathered::Complete(body, len) => (body, len),
        Gathered::Incomplete => {
            if gathering.wants_continue(head) {
                cx.out.push_interim(CONTINUE);
            }
            return Outcome::Incomplete(Box::new(gathering));
        }
        Gathered::Refused(status, why) => {
            let mut reply = reply(head, false, cx);
            // The status page goes out whole even for HEAD: the client is told why
            // the connection closes.
            reply.head_only = false;
            reply.explained_page(cx.out, status, b"", why);
            return Outcome::Refused;
        }
    };
    let keep_alive = keep_alive(head, true, cx);
    let reply = reply(head, keep_alive, cx);
    let then = match handle(gathering.route, head, &body, reply, cx) {
        Some(waiting) => Then::Wait {
            waiting,
            close: !keep_alive,
        },
        None if keep_alive => Then::Next,
        None => Then::Close { linger: false },
    };
    Outcome::Answered {
        consumed: head.len + body_len,
        then,
    }
}

/// Calls the dynamic handler of `route` with its complete body.
fn handle(
    route: Dynamic,
    head: &RequestHead<'_, '_>,
    body: &[u8],
    reply: Reply<'_>,
    cx: &mut Cx<'_>,
) -> Option<Waiting> {
    match route {
        Dynamic::Web99(Ok(request)) => handle_web99(request, head, body, reply, cx),
        Dynamic::Web99(Err(refusal)) => {
            web99::refuse(head, &reply, cx.out, &refusal);
            None
        }
        Dynamic::Cgi { mount, rest } => handle_cgi(mount, &rest, head, body, reply, cx),
    }
}

fn handle_web99(
    request: web99::Request,
    head: &RequestHead<'_, '_>,
    body: &[u8],
    reply: Reply<'_>,
    cx: &mut Cx<'_>,
) -> Option<Waiting> {
    let mut ctx = web99::Context {
        web99: cx
            .site
            .web99()
            .expect("invariant: web99 routes exist only when web99 is on"),
        docroot: cx.site.docroot(),
        site: cx.site.index(),
        cache: cx.cache,
        peer: cx.client.peer.ip(),
        now: cx.now,
    };
    web99::handle(request, head, body, reply, cx.out, &mut ctx).map(Waiting::Web99)
}

fn handle_cgi(
    mount: usize,
    rest: &[u8],
    head: &RequestHead<'_, '_>,
    body: &[u8],
    reply: Reply<'_>,
    cx: &mut Cx<'_>,
) -> Option<Waiting> {
    let peer = cx.client.peer;
    let call = cgi::Call {
        head,
        body,
        mount,
        rest,
        local: cx.here.addr().unwrap_or(peer),
        peer,
    };
    let (mounts, docroot) = (cx.site.cgi_mounts(), &cx.site.host().docroot_path);
    match cgi::prepare(mounts, docroot, &call) {
        Ok(script) => Some(Waiting::Cgi(cgi::Pending::new(reply, script))),
        Err((status, why)) => {
            reply.explained_page(cx.out, status, b"", why);
            None
        }
    }
}

/// Whether the connection stays open after answering `head`: the client asked for
/// it, its body can be got past (`body_ok`), the connection is under its request
/// count and age limits, and the server is not closing. Decided once per
/// request, before its answer's head is written.
#[inline]
fn keep_alive(head: &RequestHead<'_, '_>, body_ok: bool, cx: &Cx<'_>) -> bool {
    let limits = &cx.site.config().limits;
    head.keep_alive
        && body_ok
        && cx.client.served + 1 < limits.keepalive_requests
        && cx.now.duration_since(cx.client.born) < limits.keepalive_max_age
        && !cx.site.closing()
}

/// The [`Reply`] to `head`, its access-log text captured.
#[inline]
fn reply<'d>(head: &RequestHead<'_, '_>, keep_alive: bool, cx: &mut Cx<'d>) -> Reply<'d> {
    // Checked here, where it inlines: the log is usually off.
    let log = if cx.site.logging() {
        capture_log(cx.out, cx.site, |text, format| {
            access_log::capture_request(text, head, format, cx.client.http2);
        })
    } else {
        None
    };
    Reply {
        date: cx.date,
        keep_alive,
        version: head.version,
        head_only: head.method == Method::Head,
        tally: metrics::Tally {
            method: metrics::Method::of(head.method),
            site: cx.site.host.metrics_site,
            started: cx.now,
        },
        log,
    }
}

/// Queues the closing error answer `status` to a head that could not be parsed,
/// `raw` (its first line is what the access log shows). Shared by HTTP/1
/// connections and HTTP/2 streams; `now` is when the head was read.
pub(crate) fn refuse_head(
    out: &mut Output,
    (site, now): (Site<'_>, Instant),
    date: &[u8],
    raw: &[u8],
    status: u16,
) {
    let log = capture_log(out, site, |text, format| {
        access_log::capture_raw(text, raw, format);
    });
    let reply = Reply {
        date,
        keep_alive: false,
        version: stoa_http_proto::Version::Http11,
        head_only: false,
        tally: metrics::Tally {
            method: metrics::Method::Other,
            site: site.host.metrics_site,
            started: now,
        },
        log,
    };
    reply.status_page(out, status, b"");
}

/// Saves the access-log text of a request, when `site`'s log is on; its line
/// goes to that log.
pub(crate) fn capture_log(
    out: &mut Output,
    site: Site<'_>,
    capture: impl FnOnce(&mut Vec<u8>, LogFormat),
) -> Option<LogText> {
    let sink = site.host.log?;
    let text = out.log_text_mut();
    let start = text.len();
    capture(text, site.config().log_format);
    Some(LogText {
        sink,
        text: start..text.len(),
    })
}

#[cfg(test)]
mod tests;
