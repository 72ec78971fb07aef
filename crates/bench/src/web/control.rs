//! The manager's side of a run: one-off requests to the server (Reset, Fetch, the
//! validation of `web99.md` §7.2) and the post.log audit of §7.3.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use stoa_http_proto::request::header_storage;
use stoa_http_proto::{Method, ResponseLimits, Status, parse_response};
use stoa_loadgen::{Connector, TlsParameters, TlsPlan};
use stoa_web99::ads::ResetParams;
use stoa_web99::fileset::{FILES_PER_CLASS, FileId, header_line};
use stoa_web99::postlog;
use stoa_web99::workload::{Entry, RequestType, Targets};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where the kit's documents are silent and the harness had to choose
/// (`web99.md` §5.2, §7.2, §7.3): one line each, for the report's notes.
pub(crate) const INTERPRETATIONS: [&str; 4] = [
    "Clients: the manager checks error rates per client machine; this harness counts as one client, and \
     with --agents each agent is one, all of equal speed.",
    "POST counts: a client's per-class POST counter includes the warm-up and the ramp-down, since the \
     Reset before the warm-up empties post.log and the audit compares the two.",
    "Validation POST: the manager's query and form, sent with the client's headers (Content-type, Accept, \
     Host, the cookie); which headers the manager's HTTP library added is not recorded.",
    "Reset maxload: the validation's is the run's --connections (the kit's: the largest load of its rc \
     file); under --find-max each trial's Reset carries that trial's connections.",
];

/// The limits the manager's answers are read with: the parser's defaults, and the
/// 64 fields the harness has always allowed.
const HEAD_LIMITS: ResponseLimits = ResponseLimits {
    max_status_line: 8 * 1024,
    max_header_line: 8 * 1024,
    max_head: 32 * 1024,
    max_headers: 64,
};

/// A response read whole.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Where the manager's requests go: the server's address and how to connect
/// (plain or TLS, as the generators do).
pub(crate) struct Endpoint {
    pub(crate) addr: SocketAddr,
    pub(crate) connector: Connector,
    /// The generators' TLS settings, `None` for plain HTTP.
    pub(crate) tls: Option<TlsPlan>,
}

impl Endpoint {
    pub(crate) fn new(addr: SocketAddr, tls: Option<TlsPlan>) -> anyhow::Result<Endpoint> {
        // The manager's own requests (validation, Reset, Fetch) speak HTTP/1.1
        // even when the generators speak HTTP/2.
        let http1 = tls.clone().map(|t| TlsPlan { http2: false, ..t });
        let connector = Connector::new(http1.as_ref()).context("TLS client setup")?;
        Ok(Endpoint {
            addr,
            connector,
            tls,
        })
    }

    /// The TLS protocol and suite of a fresh connection, for the report.
    pub(crate) async fn tls_parameters(&self) -> anyhow::Result<Option<TlsParameters>> {
        if self.tls.is_none() {
            return Ok(None);
        }
        let (stream, _) = self
            .connector
            .connect(self.addr, &mut fastrand::Rng::with_seed(0))
            .await?;
        Ok(stream.tls_parameters())
    }
}

/// Sends one request on a new connection and reads the whole response.
pub(crate) async fn exchange(ep: &Endpoint, request: &[u8]) -> anyhow::Result<Reply> {
    let fut = async {
        let (mut stream, _) = ep
            .connector
            .connect(ep.addr, &mut fastrand::Rng::with_seed(0))
            .await?;
        stream.write_all(request).await?;
        stream.flush().await?;
        let mut data = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            data.extend_from_slice(&buf[..n]);
            if let Some(reply) = parse(&data)? {
                return Ok(reply);
            }
        }
        parse(&data)?.context("connection closed before a whole response")
    };
    tokio::time::timeout(Duration::from_secs(120), fut)
        .await
        .context("no answer within 120 s")?
}

/// The response at the start of `data`, once its head and its `Content-Length`
/// bytes of body are there.
fn parse(data: &[u8]) -> anyhow::Result<Option<Reply>> {
    let mut storage = header_storage();
    // GET or POST: the framing rules are the same for both.
    let head = match parse_response(data, &mut storage, &HEAD_LIMITS, Method::Get)? {
        Status::Complete(head) => head,
        Status::Partial => return Ok(None),
    };
    let length = head
        .content_length
        .and_then(|n| usize::try_from(n).ok())
        .context("response without Content-Length")?;
    let start = head.len;
    if data.len() - start < length {
        return Ok(None);
    }
    Ok(Some(Reply {
        status: head.status,
        headers: head
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_owned(),
                    String::from_utf8_lossy(h.value).into_owned(),
                )
            })
            .collect(),
        body: data[start..start + length].to_vec(),
    }))
}

/// A request the way the kit's client would send it.
pub(crate) fn request(
    targets: &Targets,
    kind: RequestType,
    file: FileId,
    user_id: u32,
    last_ad: u32,
) -> Vec<u8> {
    let mut out = Vec::new();
    stoa_web99::workload::format_request(
        &Entry { file, kind },
        targets,
        false,
        user_id,
        last_ad,
        &mut out,
    );
    out
}

fn command_request(targets: &Targets, command: &str) -> Vec<u8> {
    // The manager strips any ?prefix from DYN_CMD_SCRIPT.
    let script = targets.dynamic.split('?').next().unwrap_or_default();
    format!(
        "GET {script}?command/{command} HTTP/1.0\r\nHost: {}\r\n\r\n",
        targets.host
    )
    .into_bytes()
}

/// The `command/Reset` request, parameters in the manager's order.
fn reset_request(targets: &Targets, p: &ResetParams) -> Vec<u8> {
    let command = format!(
        "Reset&maxload={}&pttime={}&maxthread={}&exp={},{}&urlroot=http://{}{}",
        p.maxload,
        p.pttime,
        p.maxthread,
        p.expired[0],
        p.expired[1],
        targets.host,
        targets.url_root
    );
    command_request(targets, &command)
}

/// What a run against a server without the dynamic API is told: the Reset is
/// the first dynamic request, and a plain file server answers it 404 (or 405,
/// 501 for a method or script it does not know).
pub(crate) const NO_DYNAMIC_API: &str = "the server has no SPECweb99 dynamic API: use \
     --static-only (and `stoa fileset` to create the file set)";

fn check_reset(reply: &Reply) -> anyhow::Result<()> {
    if matches!(reply.status, 404 | 405 | 501) {
        bail!("command/Reset answered {}: {NO_DYNAMIC_API}", reply.status);
    }
    if reply.status != 200 {
        bail!(
            "command/Reset answered {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body).trim()
        );
    }
    Ok(())
}

/// Sends `command/Reset`.
pub(crate) async fn reset(ep: &Endpoint, targets: &Targets, p: &ResetParams) -> anyhow::Result<()> {
    check_reset(&exchange(ep, &reset_request(targets, p)).await?)
}

/// Fetches post.log and parses it as the manager does.
pub(crate) async fn fetch_log(
    ep: &Endpoint,
    targets: &Targets,
) -> anyhow::Result<Vec<postlog::Record>> {
    parse_log(&exchange(ep, &command_request(targets, "Fetch")).await?)
}

/// The records of a `command/Fetch` answer: the lines between `<pre>` and
/// `</pre>`.
fn parse_log(reply: &Reply) -> anyhow::Result<Vec<postlog::Record>> {
    if reply.status != 200 {
        bail!("command/Fetch answered {}", reply.status);
    }
    let text = String::from_utf8_lossy(&reply.body);
    let start = text.find("<pre>\n").map_or(0, |i| i + 6);
    let end = text[start..]
        .find("</pre>")
        .map_or(text.len(), |i| start + i);
    let log: String = text[start..end]
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{l}\n"))
        .collect();
    postlog::parse(&log).map_err(|e| anyhow::anyhow!("post.log: {e}"))
}

/// The §7.3 audit: numbering (checked by the parser), and per class no more
/// records than POSTs sent and at most 1.05 % missing.
pub(crate) fn audit(records: &[postlog::Record], sent: [u64; 4]) -> Vec<String> {
    let mut logged = [0u64; 4];
    for r in records {
        if let Some(n) = logged.get_mut(usize::from(r.class)) {
            *n += 1;
        }
    }
    let mut problems = Vec::new();
    for class in 0..4 {
        let (got, want) = (logged[class], sent[class]);
        if got > want {
            problems.push(format!(
                "class {class}: server has {got} POSTs, clients sent {want}"
            ));
        } else if want > 0 && (want - got) as f64 / want as f64 > 0.0105 {
            problems.push(format!(
                "class {class}: {} of {want} POSTs missing from post.log",
                want - got
            ));
        }
    }
    problems
}

/// The user id and `last_ad` of the manager's validation cookie (§7.2).
const VALIDATION_COOKIE: (u32, u32) = (10_001, 20);
/// The file of the manager's fixed validation form
/// (`class=1&client=2&dir=00004&num=3`): what the POST's answer must carry.
const VALIDATION_FORM_FILE: FileId = FileId {
    dir: 4,
    class: 1,
    num: 3,
};

/// What the manager's validation is about.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Validation {
    /// `maxload` of its Reset: the run's connections (the manager's largest
    /// load).
    pub(crate) maxload: u32,
    /// Directories of the file set; the files asked for are in the last one.
    pub(crate) dirs: u32,
    /// No dynamic requests, no Reset.
    pub(crate) static_only: bool,
    /// The file number of the static (class 3) and dynamic (class 1) GETs; the
    /// manager draws `int(rand(FILES_PER_CLASS - 1))`, 0–7.
    pub(crate) file: u8,
}

impl Validation {
    /// A validation with the manager's random file number.
    pub(crate) fn new(maxload: u32, dirs: u32, static_only: bool) -> Validation {
        Validation {
            maxload,
            dirs,
            static_only,
            file: fastrand::u8(0..FILES_PER_CLASS - 1),
        }
    }

    /// `class3_F` and `class1_F` of the last directory.
    fn files(&self) -> (FileId, FileId) {
        let dir = self.dirs.saturating_sub(1);
        let num = self.file;
        (FileId { dir, class: 3, num }, FileId { dir, class: 1, num })
    }
}

/// The manager's `verify_all_HTTP_operations` (§7.2): aborts the run on any error.
pub(crate) async fn validate(
    ep: &Endpoint,
    targets: &Targets,
    v: &Validation,
) -> anyhow::Result<String> {
    validate_by(|req| async move { exchange(ep, &req).await }, targets, v).await
}

/// [`validate`] with `send` carrying each request to the server: the Reset, a
/// static GET of a class-3 file, the three dynamic GETs of the class-1 file with
/// the same number, the manager's POST and a Fetch, each checked. Returns the
/// server's `Server` header.
async fn validate_by<F, Fut>(
    mut send: F,
    targets: &Targets,
    v: &Validation,
) -> anyhow::Result<String>
where
    F: FnMut(Vec<u8>) -> Fut,
    Fut: Future<Output = anyhow::Result<Reply>>,
{
    let (user, last_ad) = VALIDATION_COOKIE;
    if !v.static_only {
        let params = ResetParams {
            maxload: v.maxload,
            pttime: 100,
            maxthread: 100,
            expired: [1, 100],
        };
        check_reset(&send(reset_request(targets, &params)).await?)?;
    }
    let (large, small) = v.files();
    let reply = send(request(targets, RequestType::Static, large, user, last_ad)).await?;
    check_file_reply(&reply, large, "static GET")?;
    let server = reply.header("Server").unwrap_or("unknown").to_owned();
    if v.static_only {
        return Ok(server);
    }
    for kind in [RequestType::Dynamic, RequestType::Cgi, RequestType::Cad] {
        let reply = send(request(targets, kind, small, user, last_ad)).await?;
        check_file_reply(&reply, small, &format!("{kind:?} GET"))?;
        if kind == RequestType::Cad {
            check_cad_tag(&reply)?;
        }
    }
    let reply = send(validation_post(targets, small)).await?;
    check_file_reply(&reply, VALIDATION_FORM_FILE, "POST")?;
    let records = parse_log(&send(command_request(targets, "Fetch")).await?)?;
    if records.len() != 1 {
        bail!(
            "validation: post.log holds {} records after one POST",
            records.len()
        );
    }
    Ok(server)
}

/// The manager's validation POST (§7.2): to the POST script with the class-1
/// file's path and an `f` as its query, the manager's fixed form in its
/// (alphabetical) field order, and the validation cookie. The form names
/// [`VALIDATION_FORM_FILE`], so the answer carries that file.
pub(crate) fn validation_post(targets: &Targets, file: FileId) -> Vec<u8> {
    let (prefix, target) = match targets.post.split_once('?') {
        Some((_, prefix)) => (prefix, format!("{}/{file}f", targets.post)),
        None => ("", format!("{}?/{file}f", targets.post)),
    };
    let body = format!("class=1&client=2&dir=00004&num=3&urlroot={prefix}/file_set/");
    let (user, last_ad) = VALIDATION_COOKIE;
    format!(
        "POST {target} {}\r\nCookie: my_cookie=user_id={user}&last_ad={last_ad}\r\n\
         Content-type: application/x-www-form-urlencoded\r\nAccept: */*\r\nHost: {}\r\n\
         Content-Length: {}\r\n\r\n{body}",
        targets.version.as_str(),
        targets.host,
        body.len()
    )
    .into_bytes()
}

fn check_file_reply(reply: &Reply, id: FileId, what: &str) -> anyhow::Result<()> {
    if reply.status != 200 {
        bail!("validation: {what} of {id} answered {}", reply.status);
    }
    let header = header_line(id);
    if memchr::memmem::find(&reply.body, header.as_bytes()).is_none() {
        bail!(
            "validation: {what} of {id}: the file's header line {:?} is not in the answer",
            header.trim_end()
        );
    }
    Ok(())
}

/// The one place the manager checks the ad rewrite: the body carries the tag for
/// the `Ad_id` returned.
fn check_cad_tag(reply: &Reply) -> anyhow::Result<()> {
    let cookie = reply
        .headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("Set-Cookie"))
        .find_map(|(_, v)| v.strip_prefix("found_cookie="))
        .context("validation: CAD GET without found_cookie")?;
    let ad: u32 = cookie
        .split('&')
        .find_map(|f| f.strip_prefix("Ad_id="))
        .and_then(|v| v.trim().parse().ok())
        .context("validation: found_cookie without Ad_id")?;
    let tag = format!(
        "<!WEB99CAD><IMG SRC=\"/file_set/dir{:05}/class{}_{}\"><!/WEB99CAD>",
        ad / 36,
        (ad % 36) / 9,
        ad % 9
    );
    if memchr::memmem::find(&reply.body, tag.as_bytes()).is_none() {
        bail!("validation: CAD GET returned Ad_id={ad} but the body lacks {tag}");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
