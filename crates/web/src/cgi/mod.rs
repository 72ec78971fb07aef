//! CGI/1.1 (RFC 3875): URL prefixes mapped to directories of executables, one
//! process per request.
//!
//! `GET /cgi-bin/script/extra/path?query` runs `DIR/script` with the standard
//! meta-variables (plus `DOCUMENT_ROOT` and `REQUEST_URI`, as Apache and nginx pass
//! them, and `HTTP_*` for the request's headers), the request body on its standard
//! input, in its own process group. Its output is a CGI response: header lines
//! (`Status`, `Content-Type`, `Location` and any others), a blank line, the body.
//! The server computes `Content-Length`; hop-by-hop headers from the script are
//! dropped. A `Location` without `Status` becomes a 302 (a local path is also sent
//! to the client as a redirect rather than followed inside the server).
//!
//! Bounds: at most [`CgiConfig::max_processes`] scripts run at once (others wait,
//! up to the timeout, then get 503); a script that outlives
//! [`CgiConfig::timeout`] has its whole process group killed (504); output beyond
//! [`CgiConfig::max_output`] is refused (502). Whatever the script writes to
//! standard error goes to the error log, line by line.

mod response;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use stoa_http_proto::RequestHead;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::Semaphore;

use crate::config::{CgiConfig, CgiMount};
use crate::output::Output;
use crate::response::{Reply, SERVER_SOFTWARE};

/// The CGI gateway's shared state.
#[derive(Debug)]
pub(crate) struct Cgi {
    pub(crate) config: CgiConfig,
    slots: Arc<Semaphore>,
}

impl Cgi {
    pub(crate) fn new(config: &CgiConfig) -> Cgi {
        Cgi {
            slots: Arc::new(Semaphore::new(config.max_processes.max(1))),
            config: config.clone(),
        }
    }
}

/// The mount among a site's `mounts` a decoded request path falls under, and the
/// rest of the path.
pub(crate) fn route<'p>(mounts: &[CgiMount], path: &'p [u8]) -> Option<(usize, &'p [u8])> {
    mounts
        .iter()
        .enumerate()
        .find_map(|(i, m)| path.strip_prefix(m.prefix.as_bytes()).map(|rest| (i, rest)))
}

/// A script to run, with everything it needs captured from the request.
#[derive(Debug)]
pub(crate) struct Script {
    program: PathBuf,
    dir: PathBuf,
    name: String,
    env: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

/// Why a CGI request fails before or while its script runs.
pub(crate) type Refusal = (u16, &'static str);

/// A request for a script, as routed: its mount and the path beneath it, with the
/// request and the connection's addresses.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub(crate) head: &'a RequestHead<'a, 'a>,
    /// The complete request body.
    pub(crate) body: &'a [u8],
    /// Index of the mount among the site's mounts.
    pub(crate) mount: usize,
    /// The decoded path after the mount's prefix: the script's name, then any
    /// `PATH_INFO`.
    pub(crate) rest: &'a [u8],
    pub(crate) local: SocketAddr,
    pub(crate) peer: SocketAddr,
}

/// Prepares a CGI request: finds the script under its mount and builds its
/// environment (`docroot` is the configured document root path). The script runs
/// in [`Pending::wait`].
pub(crate) fn prepare(
    mounts: &[CgiMount],
    docroot: &Path,
    call: &Call<'_>,
) -> Result<Script, Refusal> {
    let m = &mounts[call.mount];
    let rest = String::from_utf8_lossy(call.rest).into_owned();
    let (name, path_info) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest.as_str(), ""),
    };
    if name.is_empty() || name.starts_with('.') {
        return Err((404, "no script named"));
    }
    let program = m.dir.join(name);
    if !is_executable(&program) {
        return Err((404, "no such script"));
    }
    let script = Where {
        prefix: &m.prefix,
        name,
        path_info,
        docroot,
    };
    let env = environment(call, &script);
    Ok(Script {
        program,
        dir: m.dir.clone(),
        name: name.to_owned(),
        env,
        body: call.body.to_vec(),
    })
}

/// Where a script is, for its meta-variables.
struct Where<'a> {
    prefix: &'a str,
    name: &'a str,
    path_info: &'a str,
    docroot: &'a Path,
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The meta-variables of RFC 3875 §4.1, plus `DOCUMENT_ROOT`, `REQUEST_URI`,
/// `REMOTE_PORT` and the request's headers as `HTTP_*`.
fn environment(call: &Call<'_>, script: &Where<'_>) -> Vec<(String, Vec<u8>)> {
    let Where {
        prefix,
        name,
        path_info,
        docroot,
    } = *script;
    let (head, body, local, peer) = (call.head, call.body, call.local, call.peer);
    let query = head.target.splitn(2, |&b| b == b'?').nth(1).unwrap_or(b"");
    let host = head
        .header("Host")
        .map(|h| match h.iter().rposition(|&b| b == b':') {
            // host:port (but not a bare IPv6 literal's colons)
            Some(i) if !h.ends_with(b"]") => h[..i].to_vec(),
            _ => h.to_vec(),
        })
        .unwrap_or_else(|| local.ip().to_string().into_bytes());
    let docroot = docroot.as_os_str().as_encoded_bytes().to_vec();
    let mut env: Vec<(String, Vec<u8>)> = vec![
        ("GATEWAY_INTERFACE".into(), b"CGI/1.1".to_vec()),
        ("SERVER_SOFTWARE".into(), SERVER_SOFTWARE.into()),
        ("SERVER_NAME".into(), host),
        ("SERVER_PORT".into(), local.port().to_string().into_bytes()),
        ("SERVER_PROTOCOL".into(), head.version.as_str().into()),
        ("REQUEST_METHOD".into(), head.method_token.into()),
        ("REQUEST_URI".into(), head.target.to_vec()),
        ("SCRIPT_NAME".into(), format!("{prefix}{name}").into_bytes()),
        ("QUERY_STRING".into(), query.to_vec()),
        ("REMOTE_ADDR".into(), peer.ip().to_string().into_bytes()),
        ("REMOTE_PORT".into(), peer.port().to_string().into_bytes()),
        ("DOCUMENT_ROOT".into(), docroot.clone()),
        ("PATH".into(), b"/usr/local/bin:/usr/bin:/bin".to_vec()),
    ];
    if !path_info.is_empty() {
        env.push(("PATH_INFO".into(), path_info.into()));
        let translated = [docroot.as_slice(), path_info.as_bytes()].concat();
        env.push(("PATH_TRANSLATED".into(), translated));
    }
    if !body.is_empty() || head.header("Content-Length").is_some() {
        env.push(("CONTENT_LENGTH".into(), body.len().to_string().into_bytes()));
    }
    for h in head.headers {
        let upper = h.name.to_ascii_uppercase().replace('-', "_");
        match upper.as_str() {
            "CONTENT_TYPE" => env.push(("CONTENT_TYPE".into(), h.value.to_vec())),
            // Framing is the server's business; the script gets CONTENT_LENGTH.
            "CONTENT_LENGTH" | "TRANSFER_ENCODING" | "CONNECTION" | "PROXY" => {}
            _ => env.push((format!("HTTP_{upper}"), h.value.to_vec())),
        }
    }
    env
}

/// A script waiting for its turn and its output.
#[derive(Debug)]
pub(crate) struct Pending {
    reply: Reply<'static>,
    script: Script,
}

/// A script's answer, ready to queue.
#[derive(Debug)]
pub(crate) struct Ready {
    reply: Reply<'static>,
    name: String,
    result: Result<response::Parsed, Refusal>,
}

impl Pending {
    /// A script to run, answered with `reply`.
    pub(crate) fn new(reply: Reply<'_>, script: Script) -> Box<Pending> {
        Box::new(Pending {
            reply: reply.undated(),
            script,
        })
    }

    /// Runs the script (once a slot is free) and reads its response.
    pub(crate) async fn wait(self: Box<Self>, cgi: &Cgi) -> Ready {
        let Pending { reply, script } = *self;
        let Script {
            program,
            dir,
            name,
            env,
            body,
        } = script;
        let timeout = cgi.config.timeout;
        let slot = tokio::time::timeout(timeout, Arc::clone(&cgi.slots).acquire_owned()).await;
        let result = match slot {
            Ok(Ok(_slot)) => execute(&program, &dir, &name, env, body, cgi).await,
            _ => Err((503, "too many CGI scripts running")),
        };
        let result = result.and_then(|output| response::parse(&output, cgi.config.max_output));
        Ready {
            reply,
            name,
            result,
        }
    }
}

impl Ready {
    /// Queues the script's answer, or the status page of what went wrong, dated
    /// `date`.
    pub(crate) fn send(self, out: &mut Output, date: &[u8]) {
        let reply = self.reply.dated(date);
        match self.result {
            Ok(parsed) => response::send(&reply, out, parsed),
            Err((status, why)) => {
                tracing::warn!("cgi {}: {why}", self.name);
                reply.explained_page(out, status, b"", why);
            }
        }
    }
}

/// Delays before the retries of a spawn that found the script busy.
const BUSY_RETRIES: [std::time::Duration; 3] = [
    std::time::Duration::from_millis(10),
    std::time::Duration::from_millis(50),
    std::time::Duration::from_millis(200),
];

/// Starts `command`, trying again a few times while the script is "text file
/// busy" (`ETXTBSY`): some process still holds it open for writing, an
/// installer replacing it, or, for a moment, any process forked while the file
/// was being written (the descriptor lives in the child until its exec closes
/// it). Any other error is final.
async fn spawn(command: &mut tokio::process::Command) -> std::io::Result<tokio::process::Child> {
    for delay in BUSY_RETRIES {
        match command.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                tokio::time::sleep(delay).await;
            }
            done => return done,
        }
    }
    command.spawn()
}

/// Spawns the script, feeds it the body, collects its output within the timeout.
async fn execute(
    program: &Path,
    dir: &Path,
    name: &str,
    env: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    cgi: &Cgi,
) -> Result<Vec<u8>, Refusal> {
    use std::os::unix::ffi::OsStrExt;
    let mut command = tokio::process::Command::new(program);
    command
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, std::ffi::OsStr::from_bytes(v))))
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = spawn(&mut command).await.map_err(|e| {
        tracing::warn!("cgi {name}: cannot start: {e}");
        (500, "cannot start the script")
    })?;
    crate::metrics::count_cgi_run();
    let pid = child.id();
    // Until the script has ended, dropping this future (its HTTP/2 stream was
    // reset) or running out of time kills the script's whole group.
    let group = KillGroup(pid.and_then(|p| rustix::process::Pid::from_raw(p as i32)));
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let max = cgi.config.max_output;
    let name_owned = name.to_owned();
    let talk = async move {
        let feed = async {
            if let Some(mut stdin) = stdin {
                // A script that does not read its input is its own business.
                let _ = stdin.write_all(&body).await;
            }
        };
        let collect = async {
            let mut output = Vec::new();
            if let Some(stdout) = stdout {
                let _ = stdout.take(max as u64 + 1).read_to_end(&mut output).await;
            }
            output
        };
        let log = async {
            if let Some(stderr) = stderr {
                let mut lines = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::warn!("cgi {name_owned}: {line}");
                }
            }
        };
        let ((), output, ()) = tokio::join!(feed, collect, log);
        let _ = child.wait().await;
        output
    };
    match tokio::time::timeout(cgi.config.timeout, talk).await {
        Ok(output) => {
            group.disarm();
            Ok(output)
        }
        // `group` is dropped: the script and anything it started are killed.
        Err(_) => Err((504, "the script took too long")),
    }
}

/// A script's process group, killed (`SIGKILL`) when this is dropped armed.
struct KillGroup(Option<rustix::process::Pid>);

impl KillGroup {
    /// The script ended: nothing to kill.
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for KillGroup {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

#[cfg(test)]
mod tests;
