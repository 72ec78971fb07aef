//! The SPECweb99 dynamic API as a module of the server (`web99.md` §6), the way TUX
//! and Zeus loaded theirs: one entry point (`/web99` by default) that dispatches on
//! the method, the query and the cookie.
//!
//! - `GET /web99?[prefix/]file_set/dirNNNNN/classC_F`: the file in the HTML wrapper
//!   (§6.2); with `Cookie: my_cookie=user_id=U&last_ad=A` it is a custom-ad-rotation
//!   GET (§6.3): the ad search, `Set-Cookie: found_cookie=…`, and the ad tags of
//!   class 1 and 2 files rewritten in the copy sent.
//! - `POST /web99` with the form of §6.5: one durable post.log record, then the
//!   wrapped file and `Set-Cookie: my_cookie=U`.
//! - `GET /web99?command/Reset&…`, `command/Fetch`: regenerate the tables and empty
//!   the log; return the log. Only from `manager_networks` (loopback by default),
//!   403 for anyone else.
//!
//! Dynamic GETs are answered at once from the worker's file cache (the file goes out
//! from memory or with `sendfile`, between the wrapper and the trailer). POSTs and
//! commands go to the state thread ([`service`]) and the connection waits for its
//! answer before sending theirs. Malformed input gets a 400 naming the problem.

mod service;

use std::io;
use std::net::IpAddr;
use std::os::fd::OwnedFd;

use bytes::Bytes;
use stoa_http_proto::{Method, RequestHead};
use stoa_web99::ads;
use stoa_web99::request::{self, Query, TRAILER};
use tokio::sync::oneshot;

use crate::cache::{Contents, FileCache, Kind};
use crate::config::Web99Config;
use crate::output::{Body, Output};
use crate::response::{Refusal, Reply, SERVER_SOFTWARE};

pub(crate) use service::Service;
use service::{Job, PostEntry};

/// The module's state, shared by every worker.
#[derive(Debug)]
pub(crate) struct Web99 {
    pub(crate) config: Web99Config,
    /// The state thread of the state directory, shared with any other server of
    /// the process on the same directory ([`Service::for_dir`]).
    service: std::sync::Arc<Service>,
}

impl Web99 {
    /// Opens the state directory (repairing post.log) and starts the state thread.
    /// Refuses a state directory that resolves to a place beneath `docroot`.
    pub(crate) fn start(config: &Web99Config, docroot: &std::path::Path) -> io::Result<Web99> {
        std::fs::create_dir_all(&config.state_dir)?;
        #[allow(
            clippy::disallowed_methods,
            reason = "a start-up check that both existing directories are apart, not a \
                      per-request path check (those open beneath the root)"
        )]
        let (state, root) = (
            std::fs::canonicalize(&config.state_dir)?,
            std::fs::canonicalize(docroot)?,
        );
        if state.starts_with(&root) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "it is inside the document root {}: it would be served",
                    root.display()
                ),
            ));
        }
        Ok(Web99 {
            config: config.clone(),
            service: Service::for_dir(&state)?,
        })
    }

    /// Whether a request target is for this module.
    pub(crate) fn matches(&self, target: &[u8]) -> bool {
        let path = target.split(|&b| b == b'?').next().unwrap_or(target);
        path == self.config.path.as_bytes()
    }
}

/// A request for the entry point, routed from its head alone (a POST's form is
/// read from the body once it is in).
#[derive(Debug)]
pub(crate) enum Request {
    /// A dynamic GET (or HEAD): the file in its wrapper.
    Get {
        /// The file, beneath the document root.
        path: String,
    },
    /// A custom-ad-rotation GET: a dynamic GET with `my_cookie`.
    Cad {
        path: String,
        cookie: request::Cookie,
        /// The file has ad tags to rewrite (class 1 and 2).
        rewrite: bool,
    },
    /// A POST of the §6.5 form.
    Post { cookie: request::Cookie },
    /// A harness command.
    Command(Command),
}

/// `GET /web99?command/…`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Command {
    /// Regenerate the tables and empty the log.
    Reset(ads::ResetParams),
    /// Return the log.
    Fetch,
    /// Answered 200, does nothing.
    Finish,
}

impl Request {
    /// Routes a request for the entry point by its method, query and cookie.
    pub(crate) fn parse(head: &RequestHead<'_, '_>) -> Result<Request, Refusal> {
        let bad = |why| Refusal::new(400, why);
        let cookie = || head.header("Cookie").map(request::parse_cookie).transpose();
        match head.method {
            Method::Get | Method::Head => {
                Ok(match request::parse_query(query_of(head)).map_err(bad)? {
                    Query::File { id, path } => match cookie().map_err(bad)?.flatten() {
                        Some(cookie) => Request::Cad {
                            path,
                            cookie,
                            rewrite: id.tags() > 0,
                        },
                        None => Request::Get { path },
                    },
                    Query::Reset(params) => Request::Command(Command::Reset(params)),
                    Query::Fetch => Request::Command(Command::Fetch),
                    Query::Finish => Request::Command(Command::Finish),
                })
            }
            Method::Post => match cookie().map_err(bad)?.flatten() {
                Some(cookie) => Ok(Request::Post { cookie }),
                None => Err(bad("POST without my_cookie")),
            },
            _ => Err(Refusal {
                status: 405,
                why: "",
                extra: b"Allow: GET, HEAD, POST\r\n",
            }),
        }
    }
}

fn query_of<'h>(head: &RequestHead<'h, '_>) -> &'h [u8] {
    head.target.splitn(2, |&b| b == b'?').nth(1).unwrap_or(b"")
}

/// A dynamic request the state thread must handle first.
#[derive(Debug)]
pub(crate) struct Pending {
    reply: Reply<'static>,
    wait: Wait,
}

#[derive(Debug)]
enum Wait {
    Post {
        done: oneshot::Receiver<Result<u64, String>>,
        page: Page,
        user_id: u32,
    },
    Reset(oneshot::Receiver<Result<(), String>>, Page),
    Fetch(oneshot::Receiver<Result<Vec<u8>, String>>, Page),
}

/// The parts of a wrapped page: the HTML before the file, the file, its length.
#[derive(Debug)]
struct Page {
    wrapper: String,
    file: Body,
    file_len: u64,
}

/// What the handlers need besides the request.
#[derive(Debug)]
pub(crate) struct Context<'a> {
    pub(crate) web99: &'a Web99,
    /// The document root the file set lives in.
    pub(crate) docroot: &'a OwnedFd,
    /// The site's index in the file cache.
    pub(crate) site: usize,
    pub(crate) cache: &'a mut FileCache,
    pub(crate) peer: IpAddr,
    pub(crate) now: std::time::Instant,
}

/// Answers a request for the entry point, or returns what it waits for. `body`
/// is the complete request body (POST); the connection gathers it first.
pub(crate) fn handle(
    request: Request,
    head: &RequestHead<'_, '_>,
    body: &[u8],
    reply: Reply<'_>,
    out: &mut Output,
    ctx: &mut Context<'_>,
) -> Option<Box<Pending>> {
    let query = String::from_utf8_lossy(query_of(head));
    let result = match request {
        Request::Get { path } => get(&path, &query, &reply, out, ctx),
        Request::Cad {
            path,
            cookie,
            rewrite,
        } => cad(&path, cookie, rewrite, &query, &reply, out, ctx),
        Request::Post { cookie } => post(body, cookie, &query, ctx),
        Request::Command(command) => run_command(command, &query, &reply, out, ctx),
    };
    match result {
        Ok(None) => None,
        Ok(Some(wait)) => Some(Box::new(Pending {
            reply: reply.undated(),
            wait,
        })),
        Err((status, why)) => {
            refuse(head, &reply, out, &Refusal::new(status, why));
            None
        }
    }
}

/// Answers a request refused by its route or its handler.
pub(crate) fn refuse(head: &RequestHead<'_, '_>, reply: &Reply<'_>, out: &mut Output, r: &Refusal) {
    if !r.why.is_empty() {
        tracing::debug!(
            "web99: {} for {:?}: {}",
            r.status,
            String::from_utf8_lossy(head.target),
            r.why
        );
    }
    reply.refuse(out, r);
}

type Handled = Result<Option<Wait>, (u16, &'static str)>;

fn get(
    path: &str,
    query: &str,
    reply: &Reply<'_>,
    out: &mut Output,
    ctx: &mut Context<'_>,
) -> Handled {
    let page = page(ctx, path, query)?;
    send_page(reply, out, &page, b"", None);
    Ok(None)
}

fn cad(
    path: &str,
    cookie: request::Cookie,
    rewrite: bool,
    query: &str,
    reply: &Reply<'_>,
    out: &mut Output,
    ctx: &mut Context<'_>,
) -> Handled {
    let mut page = page(ctx, path, query)?;
    let found = custom_ad(ctx, cookie)?;
    let extra = format!(
        "Set-Cookie: found_cookie=Ad_id={}&Ad_weight={}&Expired={}\r\n",
        found.ad,
        found.weight,
        u8::from(found.expired)
    );
    if rewrite {
        page.file = rewritten(&page.file, found.ad).map_err(|_| (500, "cannot read the file"))?;
    }
    send_page(reply, out, &page, extra.as_bytes(), None);
    Ok(None)
}

fn run_command(
    command: Command,
    query: &str,
    reply: &Reply<'_>,
    out: &mut Output,
    ctx: &mut Context<'_>,
) -> Handled {
    // Reset empties post.log and Fetch reads it: the harness's, not the public's.
    if !matches!(command, Command::Finish) && !ctx.web99.config.is_manager(ctx.peer) {
        return Err((
            403,
            "command/Reset and Fetch are accepted from [web99] manager_networks only",
        ));
    }
    let page = empty_page(ctx, query);
    let (wait, job) = match command {
        Command::Finish => {
            send_page(reply, out, &page, b"", None);
            return Ok(None);
        }
        Command::Reset(params) => {
            let (tx, rx) = oneshot::channel();
            (Wait::Reset(rx, page), Job::Reset(params, tx))
        }
        Command::Fetch => {
            let (tx, rx) = oneshot::channel();
            (Wait::Fetch(rx, page), Job::Fetch(tx))
        }
    };
    if !ctx.web99.service.submit(job) {
        return Err((503, "state thread stopped"));
    }
    Ok(Some(wait))
}

fn post(body: &[u8], cookie: request::Cookie, query: &str, ctx: &mut Context<'_>) -> Handled {
    let form = request::parse_form(body).map_err(|e| (400, e))?;
    let page = page(ctx, &form.path, query)?;
    let (tx, rx) = oneshot::channel();
    let entry = PostEntry {
        dir: form.id.dir,
        class: form.id.class,
        num: form.id.num,
        client: form.client,
        file: format!(
            "{}dir{:05}/class{}_{}",
            form.urlroot, form.id.dir, form.id.class, form.id.num
        ),
        cookie: cookie.user_id,
    };
    if !ctx.web99.service.submit(Job::Post(entry, tx)) {
        return Err((503, "state thread stopped"));
    }
    Ok(Some(Wait::Post {
        done: rx,
        page,
        user_id: cookie.user_id,
    }))
}

/// The wrapper and the file at `path` (beneath the document root).
fn page(ctx: &mut Context<'_>, path: &str, query: &str) -> Result<Page, (u16, &'static str)> {
    let wrapper = wrapper(ctx, query);
    let entry = ctx.cache.lookup(
        ctx.site,
        ctx.docroot,
        format!("/{path}").as_bytes(),
        ctx.now,
    );
    let Kind::File(info) = &entry.kind else {
        return Err((404, "no such file in the file set"));
    };
    let file = match &info.contents {
        Contents::Memory(bytes) => Body::Bytes(bytes.clone()),
        Contents::Open(fd) => Body::File {
            fd: fd.clone(),
            offset: 0,
            len: info.len,
        },
    };
    Ok(Page {
        wrapper,
        file,
        file_len: info.len,
    })
}

fn empty_page(ctx: &Context<'_>, query: &str) -> Page {
    Page {
        wrapper: wrapper(ctx, query),
        file: Body::Empty,
        file_len: 0,
    }
}

fn wrapper(ctx: &Context<'_>, query: &str) -> String {
    request::wrapper_head(
        SERVER_SOFTWARE,
        &ctx.peer.to_string(),
        &ctx.web99.config.path,
        query,
    )
}

fn custom_ad(
    ctx: &Context<'_>,
    cookie: request::Cookie,
) -> Result<ads::Found, (u16, &'static str)> {
    let tables = ctx.web99.service.tables();
    let user = *tables
        .users
        .get(cookie.user_index() as usize)
        .ok_or((400, "unknown user_id"))?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    ads::find_ad(user, cookie.last_ad, &tables.ads, now).ok_or((500, "no ad matches"))
}

/// A copy of the file with its ad tags rewritten for `ad`.
fn rewritten(file: &Body, ad: u32) -> io::Result<Body> {
    let mut bytes = match file {
        Body::Bytes(b) => b.to_vec(),
        Body::File { fd, len, .. } => {
            let mut buf = vec![0; *len as usize];
            std::os::unix::fs::FileExt::read_exact_at(&**fd, &mut buf, 0)?;
            buf
        }
        _ => return Ok(Body::Empty),
    };
    ads::rewrite_tags(&mut bytes, ad);
    Ok(Body::Bytes(Bytes::from(bytes)))
}

/// Queues `200 text/html` with the wrapper, the file (or `contents`), the trailer.
fn send_page(
    reply: &Reply<'_>,
    out: &mut Output,
    page: &Page,
    extra: &[u8],
    contents: Option<Vec<u8>>,
) {
    let (file, file_len) = match contents {
        Some(c) => {
            let n = c.len() as u64;
            (Body::Bytes(Bytes::from(c)), n)
        }
        None => (clone_body(&page.file), page.file_len),
    };
    let len = page.wrapper.len() as u64 + file_len + TRAILER.len() as u64;
    let (start, w) = reply.begin(out, 200);
    let w = w
        .header("Content-Type", b"text/html")
        .raw(extra)
        .content_length(len);
    reply.end(w);
    let head_end = out.heads_mut().len();
    let heads = out.heads_mut();
    heads.extend_from_slice(page.wrapper.as_bytes());
    let wrapper = Body::Heads(head_end..heads.len());
    let body = Body::Parts(vec![
        wrapper,
        file,
        Body::Bytes(Bytes::from_static(TRAILER)),
    ]);
    let head = start..head_end;
    if reply.head_only {
        out.push((200, reply.tally), head, Body::Empty, reply.log.clone());
    } else {
        out.push((200, reply.tally), head, body, reply.log.clone());
    }
}

fn clone_body(body: &Body) -> Body {
    match body {
        Body::Bytes(b) => Body::Bytes(b.clone()),
        Body::File { fd, offset, len } => Body::File {
            fd: fd.clone(),
            offset: *offset,
            len: *len,
        },
        _ => Body::Empty,
    }
}

/// How long a connection waits for the state thread before giving up with 503.
const STATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A state-thread answer, ready to queue.
#[derive(Debug)]
pub(crate) struct Ready {
    reply: Reply<'static>,
    outcome: Result<Done, (u16, String)>,
}

/// What the state thread's success adds to a page.
#[derive(Debug)]
struct Done {
    page: Page,
    /// Extra header lines (`Set-Cookie`).
    extra: String,
    /// The page's contents instead of its file (Fetch: the log).
    contents: Option<Vec<u8>>,
}

impl Done {
    fn page(page: Page) -> Done {
        Done {
            page,
            extra: String::new(),
            contents: None,
        }
    }
}

impl Pending {
    /// Waits for the state thread's answer (at most [`STATE_TIMEOUT`]).
    pub(crate) async fn wait(self: Box<Self>) -> Ready {
        let Pending { reply, wait } = *self;
        let outcome = match wait {
            Wait::Post {
                done,
                page,
                user_id,
            } => wait_for(done).await.map(|_| Done {
                extra: format!("Set-Cookie: my_cookie={user_id}\r\n"),
                ..Done::page(page)
            }),
            Wait::Reset(done, page) => wait_for(done).await.map(|()| Done::page(page)),
            Wait::Fetch(done, page) => wait_for(done).await.map(|log| Done {
                contents: Some(log),
                ..Done::page(page)
            }),
        };
        Ready { reply, outcome }
    }
}

impl Ready {
    /// Queues the answer, dated `date`.
    pub(crate) fn send(self, out: &mut Output, date: &[u8]) {
        let reply = self.reply.dated(date);
        match self.outcome {
            Ok(done) => {
                let extra = done.extra.as_bytes();
                send_page(&reply, out, &done.page, extra, done.contents);
            }
            Err((status, why)) => {
                tracing::warn!("web99: {why}");
                reply.explained_page(out, status, b"", &why);
            }
        }
    }
}

async fn wait_for<T>(rx: oneshot::Receiver<Result<T, String>>) -> Result<T, (u16, String)> {
    match tokio::time::timeout(STATE_TIMEOUT, rx).await {
        Ok(Ok(Ok(v))) => Ok(v),
        // The log could not be written (disk full, I/O error): nothing was recorded.
        Ok(Ok(Err(e))) => Err((507, e)),
        Ok(Err(_)) => Err((503, "state thread stopped".into())),
        Err(_) => Err((503, "state thread did not answer in time".into())),
    }
}
