//! The manager's side of a run: one-off requests to the server (Reset, Fetch, the
//! validation of `web99.md` §7.2) and the post.log audit of §7.3.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context, bail};
use stoa_loadgen::{Connector, TlsParameters, TlsPlan};
use stoa_web99::ads::ResetParams;
use stoa_web99::fileset::{FileId, header_line};
use stoa_web99::postlog;
use stoa_web99::workload::{Entry, RequestType, Targets};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
        let connector = Connector::new(tls.as_ref()).context("TLS client setup")?;
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

fn parse(data: &[u8]) -> anyhow::Result<Option<Reply>> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut resp = httparse::Response::new(&mut headers);
    let start = match resp.parse(data)? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => return Ok(None),
    };
    let headers: Vec<(String, String)> = resp
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_owned(),
                String::from_utf8_lossy(h.value).into_owned(),
            )
        })
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("Content-Length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .context("response without Content-Length")?;
    if data.len() < start + length {
        return Ok(None);
    }
    Ok(Some(Reply {
        status: resp.code.unwrap_or(0),
        headers,
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

/// Sends `command/Reset`.
pub(crate) async fn reset(ep: &Endpoint, targets: &Targets, p: &ResetParams) -> anyhow::Result<()> {
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
    let reply = exchange(ep, &command_request(targets, &command)).await?;
    if reply.status != 200 {
        bail!(
            "command/Reset answered {}: {}",
            reply.status,
            String::from_utf8_lossy(&reply.body).trim()
        );
    }
    Ok(())
}

/// Fetches post.log and parses it as the manager does.
pub(crate) async fn fetch_log(
    ep: &Endpoint,
    targets: &Targets,
) -> anyhow::Result<Vec<postlog::Record>> {
    let reply = exchange(ep, &command_request(targets, "Fetch")).await?;
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

/// The manager's `verify_all_HTTP_operations` (§7.2): aborts the run on any error.
pub(crate) async fn validate(
    ep: &Endpoint,
    targets: &Targets,
    dirs: u32,
    static_only: bool,
) -> anyhow::Result<String> {
    let last = FileId {
        dir: dirs.saturating_sub(1),
        class: 3,
        num: 4,
    };
    let reply = exchange(ep, &request(targets, RequestType::Static, last, 10_001, 20)).await?;
    check_file_reply(&reply, last, "static GET")?;
    let server = reply.header("Server").unwrap_or("unknown").to_owned();
    if static_only {
        return Ok(server);
    }
    let params = ResetParams {
        maxload: 100,
        pttime: 100,
        maxthread: 100,
        expired: [1, 100],
    };
    reset(ep, targets, &params).await?;
    let file = FileId {
        dir: 0,
        class: 1,
        num: 4,
    };
    for kind in [RequestType::Dynamic, RequestType::Cgi, RequestType::Cad] {
        let reply = exchange(ep, &request(targets, kind, file, 10_001, 20)).await?;
        check_file_reply(&reply, file, &format!("{kind:?} GET"))?;
        if kind == RequestType::Cad {
            check_cad_tag(&reply)?;
        }
    }
    let post = FileId {
        dir: 4,
        class: 1,
        num: 3,
    };
    let reply = exchange(ep, &request(targets, RequestType::Post, post, 10_001, 20)).await?;
    check_file_reply(&reply, post, "POST")?;
    let records = fetch_log(ep, targets).await?;
    if records.len() != 1 {
        bail!(
            "validation: post.log holds {} records after one POST",
            records.len()
        );
    }
    Ok(server)
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
