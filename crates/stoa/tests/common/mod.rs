//! Helpers shared by the integration tests that drive the built `stoa` binary:
//! a document-root fixture, a server process guard, a raw HTTP/1.x client that
//! reads responses by `Content-Length`, and a curl runner.
//!
//! Every wait here is bounded; servers are killed when their guard drops, so a
//! failing test leaves no process behind.

// Each test binary includes this module and uses only part of it.
#![allow(dead_code)]

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How long a server gets to print its readiness lines.
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Cap on any single read from a raw socket, and on waiting for EOF.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a signalled server gets to exit.
pub(crate) const EXIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Contents of `/hello.txt` in every [`Site`].
pub(crate) const HELLO: &[u8] = b"hello, world\n";
/// Contents of `/index.html`.
pub(crate) const ROOT_INDEX: &[u8] = b"<h1>root index</h1>\n";
/// Contents of `/sub/index.html`.
pub(crate) const SUB_INDEX: &[u8] = b"<p>sub index</p>\n";
/// Three files of different lengths, for pipelining.
pub(crate) const PIPELINED: [(&str, &[u8]); 3] = [
    ("/a.txt", b"first\n"),
    (
        "/b.txt",
        b"the second file, somewhat longer than the others\n",
    ),
    ("/c.txt", b"3rd"),
];

// ---------------------------------------------------------------------------
// Polling
// ---------------------------------------------------------------------------

/// Polls `cond` until it holds or `timeout` passes; returns whether it held.
/// The short pause between polls is not synchronisation, only a poll interval.
pub(crate) fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        #[allow(
            clippy::disallowed_methods,
            reason = "a poll interval while checking a condition against a deadline"
        )]
        std::thread::sleep(Duration::from_millis(20));
    }
}

// ---------------------------------------------------------------------------
// Document root fixture
// ---------------------------------------------------------------------------

/// A temporary directory holding `docroot/` (the served tree) and room beside it
/// for files that must stay outside the root (secrets, logs, configs).
pub(crate) struct Site {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) root: PathBuf,
}

impl Site {
    /// `docroot/` with `hello.txt`, `index.html`, `sub/index.html`, `empty/`, and
    /// the [`PIPELINED`] files; `secret.txt` next to (outside) the docroot.
    pub(crate) fn new() -> Site {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let root = dir.path().join("docroot");
        std::fs::create_dir(&root).expect("create docroot");
        let site = Site { dir, root };
        site.write("hello.txt", HELLO);
        site.write("index.html", ROOT_INDEX);
        site.write("sub/index.html", SUB_INDEX);
        std::fs::create_dir(site.root.join("empty")).expect("create empty dir");
        for (path, body) in PIPELINED {
            site.write(path.trim_start_matches('/'), body);
        }
        std::fs::write(site.outside("secret.txt"), b"TOP SECRET outside the root\n")
            .expect("write secret");
        site
    }

    /// The document root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// A path in the temporary directory, outside the document root.
    pub(crate) fn outside(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes `body` to `rel` beneath the document root, creating directories.
    pub(crate) fn write(&self, rel: &str, body: &[u8]) -> PathBuf {
        let path = self.root.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent directories");
        }
        std::fs::write(&path, body).expect("write docroot file");
        path
    }
}

// ---------------------------------------------------------------------------
// Server process
// ---------------------------------------------------------------------------

/// Standard-error lines of a server, collected by a reader thread.
#[derive(Default)]
struct StderrLog {
    lines: Mutex<(Vec<String>, bool)>,
    changed: Condvar,
}

/// A running `stoa serve`, killed (SIGKILL) when dropped if still running.
pub(crate) struct Server {
    child: Child,
    /// The first bound address (port 0 resolved): plain HTTP if any, else HTTPS.
    pub(crate) addr: SocketAddr,
    /// Every bound plain-HTTP address, in `--listen` order.
    pub(crate) addrs: Vec<SocketAddr>,
    /// Every bound HTTPS address, in `--tls-listen` order.
    pub(crate) tls_addrs: Vec<SocketAddr>,
    /// Every bound SMTP address, in `--smtp-listen` order.
    pub(crate) smtp_addrs: Vec<SocketAddr>,
    /// Every bound submission address, in `--submission-listen` order.
    pub(crate) submission_addrs: Vec<SocketAddr>,
    /// Every bound POP3 address, in `--pop3-listen` order.
    pub(crate) pop3_addrs: Vec<SocketAddr>,
    /// Every bound POP3S address, in `--pop3s-listen` order.
    pub(crate) pop3s_addrs: Vec<SocketAddr>,
    stderr: Arc<StderrLog>,
    exited: Option<ExitStatus>,
}

/// How to start a server.
pub(crate) struct ServerBuilder {
    /// Add `--listen 127.0.0.1:0` when no listener flag is given (web servers).
    default_listen: bool,
    prefix: Vec<OsString>,
    binary: PathBuf,
    args: Vec<OsString>,
    envs: Vec<(OsString, OsString)>,
}

impl ServerBuilder {
    /// `stoa serve --docroot <docroot>` plus whatever is added (`--workers 2`
    /// unless given).
    pub(crate) fn new(docroot: &Path) -> ServerBuilder {
        ServerBuilder {
            default_listen: true,
            prefix: Vec::new(),
            binary: PathBuf::from(env!("CARGO_BIN_EXE_stoa")),
            args: vec!["serve".into(), "--docroot".into(), docroot.into()],
            envs: Vec::new(),
        }
    }

    /// `stoa serve --mail-dir <mail_dir>` with no web server; add
    /// `--smtp-listen`/`--submission-listen`/`--pop3-listen`/`--pop3s-listen`
    /// flags (or a `--config` naming listeners: then one readiness line is
    /// awaited).
    pub(crate) fn mail(mail_dir: &Path) -> ServerBuilder {
        ServerBuilder {
            default_listen: false,
            prefix: Vec::new(),
            binary: PathBuf::from(env!("CARGO_BIN_EXE_stoa")),
            args: vec!["serve".into(), "--mail-dir".into(), mail_dir.into()],
            envs: Vec::new(),
        }
    }

    /// Appends command-line arguments.
    pub(crate) fn args<I, S>(mut self, args: I) -> ServerBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable of the server process (e.g. `FAILPOINTS`, which
    /// is otherwise removed).
    pub(crate) fn env(
        mut self,
        key: impl Into<OsString>,
        value: impl Into<OsString>,
    ) -> ServerBuilder {
        self.envs.push((key.into(), value.into()));
        self
    }

    /// Runs the binary through a wrapper (e.g. `setpriv ...`), which must `exec` it
    /// so that the process id stays the server's.
    pub(crate) fn wrapper<I, S>(mut self, prefix: I) -> ServerBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.prefix = prefix.into_iter().map(Into::into).collect();
        self
    }

    /// Runs a copy of the binary (for a wrapper that drops privileges: the
    /// build directory may not be reachable by an unprivileged user).
    pub(crate) fn binary(mut self, path: &Path) -> ServerBuilder {
        self.binary = path.to_owned();
        self
    }

    /// Starts the server and waits (bounded) for one readiness line per
    /// `--listen` and `--tls-listen` (one `--listen 127.0.0.1:0` is added when
    /// neither was given).
    pub(crate) fn start(mut self) -> Server {
        if !self.args.iter().any(|a| a == "--workers") {
            self.args.push("--workers".into());
            self.args.push("2".into());
        }
        let listens = self
            .args
            .iter()
            .filter(|a| {
                [
                    "--listen",
                    "--tls-listen",
                    "--smtp-listen",
                    "--submission-listen",
                    "--pop3-listen",
                    "--pop3s-listen",
                ]
                .iter()
                .any(|f| *a == *f)
            })
            .count();
        let listens = if listens == 0 && !self.default_listen {
            // Listeners come from a configuration file: wait for one.
            1
        } else if listens == 0 {
            self.args.push("--listen".into());
            self.args.push("127.0.0.1:0".into());
            1
        } else {
            listens
        };
        let mut command = match self.prefix.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(&self.binary);
                c
            }
            None => Command::new(&self.binary),
        };
        command
            .args(&self.args)
            .args(["--log-level", "info"])
            .env_remove("RUST_LOG")
            .env_remove("FAILPOINTS")
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("spawn the stoa binary");
        let stderr = Arc::new(StderrLog::default());
        spawn_stderr_reader(
            child.stderr.take().expect("stderr is piped"),
            Arc::clone(&stderr),
        );
        let mut server = Server {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            addrs: Vec::new(),
            tls_addrs: Vec::new(),
            smtp_addrs: Vec::new(),
            submission_addrs: Vec::new(),
            pop3_addrs: Vec::new(),
            pop3s_addrs: Vec::new(),
            stderr,
            exited: None,
        };
        let ready = server.wait_for_stderr(READY_TIMEOUT, |lines| {
            lines.iter().filter(|l| parse_ready(l).is_some()).count() >= listens
        });
        if !ready {
            let status = server.child.try_wait().ok().flatten();
            panic!(
                "stoa did not print {listens} readiness line(s) within {READY_TIMEOUT:?} \
                 (exit status so far: {status:?}); stderr:\n{}",
                server.stderr_text()
            );
        }
        let ready: Vec<(&'static str, SocketAddr)> = server
            .stderr_lines()
            .iter()
            .filter_map(|l| parse_ready(l))
            .collect();
        let of = |scheme: &'static str| {
            ready
                .iter()
                .filter(move |r| r.0 == scheme)
                .map(|r| r.1)
                .collect::<Vec<_>>()
        };
        server.addrs = of("http");
        server.tls_addrs = of("https");
        server.smtp_addrs = of("smtp");
        server.submission_addrs = of("submission");
        server.pop3_addrs = of("pop3");
        server.pop3s_addrs = of("pop3s");
        server.addr = *server
            .addrs
            .iter()
            .chain(&server.tls_addrs)
            .chain(&server.smtp_addrs)
            .chain(&server.submission_addrs)
            .chain(&server.pop3_addrs)
            .chain(&server.pop3s_addrs)
            .next()
            .expect("a readiness line was counted");
        server
    }
}

/// `(scheme, address)` of a readiness line (`stoa: listening on SCHEME://ADDR`).
fn parse_ready(line: &str) -> Option<(&'static str, SocketAddr)> {
    let rest = line.strip_prefix("stoa: listening on ")?;
    let (scheme, addr) = rest.split_once("://")?;
    let scheme = ["http", "https", "smtp", "submission", "pop3", "pop3s"]
        .into_iter()
        .find(|s| *s == scheme)?;
    addr.trim().parse().ok().map(|a| (scheme, a))
}

fn spawn_stderr_reader(stderr: ChildStderr, log: Arc<StderrLog>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).unwrap_or(0);
            let mut guard = log.lines.lock().expect("stderr log lock");
            if n == 0 {
                guard.1 = true;
                log.changed.notify_all();
                return;
            }
            let text = String::from_utf8_lossy(&line);
            guard.0.push(text.trim_end_matches(['\r', '\n']).to_owned());
            log.changed.notify_all();
        }
    });
}

impl Server {
    /// `stoa serve --docroot <docroot> <args>`, with `--listen 127.0.0.1:0` and
    /// `--workers 2` unless `args` name them.
    pub(crate) fn start(docroot: &Path, args: &[&str]) -> Server {
        ServerBuilder::new(docroot).args(args).start()
    }

    /// `http://ADDR` of the first listener, no trailing slash.
    pub(crate) fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://ADDR/path`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `sig` to the server process.
    pub(crate) fn signal(&self, sig: rustix::process::Signal) {
        let raw = i32::try_from(self.child.id()).expect("pid fits in i32");
        let pid = rustix::process::Pid::from_raw(raw).expect("pid is positive");
        rustix::process::kill_process(pid, sig).expect("send a signal to the server");
    }

    /// Waits (bounded) for the process to exit; `None` on timeout.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.exited {
            return Some(status);
        }
        let mut status = None;
        wait_until(timeout, || {
            status = self.child.try_wait().expect("poll the server process");
            status.is_some()
        });
        if status.is_some() {
            self.exited = status;
            // The exit closes stderr; let the reader thread catch up so the
            // last lines are visible to the test.
            self.wait_for_stderr_eof(Duration::from_secs(5));
        }
        status
    }

    /// Sends `sig` and waits for the exit status; panics (after killing the
    /// process) if it does not exit within [`EXIT_TIMEOUT`].
    pub(crate) fn stop_with(&mut self, sig: rustix::process::Signal) -> ExitStatus {
        self.signal(sig);
        match self.wait_exit(EXIT_TIMEOUT) {
            Some(status) => status,
            None => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "stoa did not exit within {EXIT_TIMEOUT:?} of {sig:?}; stderr:\n{}",
                    self.stderr_text()
                );
            }
        }
    }

    /// A copy of the standard-error lines so far.
    pub(crate) fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lines.lock().expect("stderr log lock").0.clone()
    }

    /// Standard error so far, one string.
    pub(crate) fn stderr_text(&self) -> String {
        self.stderr_lines().join("\n")
    }

    /// Waits (bounded) until `pred` holds for the standard-error lines.
    pub(crate) fn wait_for_stderr(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&[String]) -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        let mut guard = self.stderr.lines.lock().expect("stderr log lock");
        loop {
            if pred(&guard.0) {
                return true;
            }
            let now = Instant::now();
            if guard.1 || now >= deadline {
                return false;
            }
            guard = self
                .stderr
                .changed
                .wait_timeout(guard, deadline - now)
                .expect("stderr log lock")
                .0;
        }
    }

    fn wait_for_stderr_eof(&self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let mut guard = self.stderr.lines.lock().expect("stderr log lock");
        while !guard.1 {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            guard = self
                .stderr
                .changed
                .wait_timeout(guard, deadline - now)
                .expect("stderr log lock")
                .0;
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.exited.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs the binary with `args` to completion (bounded by `timeout`, killed
/// after it) and returns its exit status and standard error.
pub(crate) fn run_stoa(args: &[&str], timeout: Duration) -> (ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stoa"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the stoa binary");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let mut status = None;
    wait_until(timeout, || {
        status = child.try_wait().expect("poll the stoa process");
        status.is_some()
    });
    let Some(status) = status else {
        let _ = child.kill();
        let _ = child.wait();
        let text = reader.join().unwrap_or_default();
        panic!("stoa {args:?} still running after {timeout:?}; stderr:\n{text}");
    };
    (status, reader.join().expect("stderr reader thread"))
}

// ---------------------------------------------------------------------------
// Certificates
// ---------------------------------------------------------------------------

/// A self-signed certificate for `name` (subject alternative name and common
/// name, so `openssl s_client` shows which one was sent) with a P-256 key,
/// written as `name.crt` and `name.key` in `dir`; returns the two paths.
pub(crate) fn tls_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let key = rcgen::KeyPair::generate().expect("generate a key");
    let mut params =
        rcgen::CertificateParams::new(vec![name.to_owned()]).expect("certificate parameters");
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let cert = params.self_signed(&key).expect("self-sign");
    let (cert_path, key_path) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&cert_path, cert.pem()).expect("write the certificate");
    std::fs::write(&key_path, key.serialize_pem()).expect("write the key");
    (cert_path, key_path)
}

// ---------------------------------------------------------------------------
// Raw HTTP client
// ---------------------------------------------------------------------------

/// One parsed response.
#[derive(Debug, Clone)]
pub(crate) struct Response {
    /// `HTTP/1.1` or `HTTP/1.0`.
    pub(crate) version: String,
    pub(crate) status: u16,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (ASCII case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A client connection that keeps unread bytes between responses, so pipelined
/// answers can be read one after another.
pub(crate) struct RawConn {
    pub(crate) stream: TcpStream,
    buf: Vec<u8>,
}

impl RawConn {
    /// Connects with [`IO_TIMEOUT`] on reads and writes.
    pub(crate) fn connect(addr: SocketAddr) -> RawConn {
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect to stoa");
        stream
            .set_read_timeout(Some(IO_TIMEOUT))
            .expect("set read timeout");
        stream
            .set_write_timeout(Some(IO_TIMEOUT))
            .expect("set write timeout");
        RawConn {
            stream,
            buf: Vec::new(),
        }
    }

    /// Writes `bytes` in one `write_all`.
    pub(crate) fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("send request bytes");
    }

    /// Reads one response. The body is read by `Content-Length`; pass
    /// `head_only` for a response to HEAD. 304 responses have no body.
    pub(crate) fn read_response(&mut self, head_only: bool) -> Response {
        let deadline = Instant::now() + IO_TIMEOUT;
        let head_end = loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                break i + 4;
            }
            self.fill(deadline, "a response head");
        };
        let head = String::from_utf8(self.buf[..head_end].to_vec()).expect("ASCII response head");
        let mut lines = head.split("\r\n");
        let status_line = lines.next().expect("status line");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().expect("version").to_owned();
        let status = parts
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l
                    .split_once(':')
                    .unwrap_or_else(|| panic!("bad header line {l:?}"));
                (n.to_owned(), v.trim().to_owned())
            })
            .collect();
        self.buf.drain(..head_end);
        let mut response = Response {
            version,
            status,
            headers,
            body: Vec::new(),
        };
        if head_only || status == 304 || status == 204 || (100..200).contains(&status) {
            return response;
        }
        let len: usize = response
            .header("Content-Length")
            .unwrap_or_else(|| panic!("response without Content-Length: {head:?}"))
            .parse()
            .expect("numeric Content-Length");
        while self.buf.len() < len {
            self.fill(deadline, "a response body");
        }
        response.body = self.buf.drain(..len).collect();
        response
    }

    /// Asserts the server closes the connection with nothing more to say: the
    /// next read is EOF (within [`IO_TIMEOUT`]), not data, a timeout or a reset.
    pub(crate) fn expect_eof(&mut self) {
        assert!(
            self.buf.is_empty(),
            "unexpected bytes after the response: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk) {
            Ok(0) => {}
            Ok(n) => panic!(
                "expected EOF, got {n} more bytes: {:?}",
                String::from_utf8_lossy(&chunk[..n])
            ),
            Err(e) if is_timeout(&e) => {
                panic!("expected EOF, but the connection stayed open for {IO_TIMEOUT:?}")
            }
            Err(e) => panic!("expected an orderly close (EOF), got {e}"),
        }
    }

    fn fill(&mut self, deadline: Instant, what: &str) {
        assert!(
            Instant::now() < deadline,
            "timed out after {IO_TIMEOUT:?} waiting for {what}; have {:?}",
            String::from_utf8_lossy(&self.buf)
        );
        let mut chunk = [0u8; 64 * 1024];
        match self.stream.read(&mut chunk) {
            Ok(0) => panic!(
                "connection closed while waiting for {what}; have {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
            Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
            Err(e) if is_timeout(&e) => panic!(
                "timed out after {IO_TIMEOUT:?} waiting for {what}; have {:?}",
                String::from_utf8_lossy(&self.buf)
            ),
            Err(e) => panic!("read failed while waiting for {what}: {e}"),
        }
    }
}

/// Sends `request` on a new connection and reads one response.
pub(crate) fn raw_request(addr: SocketAddr, request: &[u8]) -> Response {
    let mut conn = RawConn::connect(addr);
    conn.send(request);
    conn.read_response(request.starts_with(b"HEAD "))
}

/// A timeout from a socket with `SO_RCVTIMEO` set.
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// Position of `needle` in `haystack`.
pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

// ---------------------------------------------------------------------------
// curl
// ---------------------------------------------------------------------------

/// What one curl run produced.
#[derive(Debug)]
pub(crate) struct CurlRun {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

/// Runs `curl --silent --show-error --noproxy '*' --max-time 10 <args>` and
/// asserts that it exits 0. Panics with a clear message if curl is missing.
pub(crate) fn curl(args: &[&str]) -> CurlRun {
    let output = Command::new("curl")
        .args(["--silent", "--show-error", "--noproxy", "*"])
        .args(["--connect-timeout", "5", "--max-time", "10"])
        .args(args)
        .stdin(Stdio::null())
        .output();
    let output = match output {
        Ok(o) => o,
        Err(e) if e.kind() == io::ErrorKind::NotFound => panic!(
            "curl is not installed; these tests drive the server with curl \
             (scripts/test.sh installs the Debian package `curl`)"
        ),
        Err(e) => panic!("cannot run curl: {e}"),
    };
    let run = CurlRun {
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    assert!(
        output.status.success(),
        "curl {args:?} failed with {}; stderr:\n{}",
        output.status,
        run.stderr
    );
    run
}

/// One response fetched with curl.
#[derive(Debug)]
pub(crate) struct Fetched {
    /// `%{http_code}`.
    pub(crate) code: u16,
    /// `%{size_download}`: body bytes received.
    pub(crate) size_download: u64,
    /// The response head as dumped by `-D`.
    pub(crate) head: String,
    pub(crate) body: Vec<u8>,
}

impl Fetched {
    /// The first header named `name` (ASCII case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }
}

/// Fetches `url` with curl plus `extra` arguments; the status comes from
/// `--write-out '%{http_code}'`, the head from `-D`, the body from `-o`.
pub(crate) fn fetch(url: &str, extra: &[&str]) -> Fetched {
    let dir = tempfile::tempdir().expect("temporary directory for curl output");
    let head_path = dir.path().join("head");
    let body_path = dir.path().join("body");
    let head_arg = head_path.to_str().expect("UTF-8 temp path");
    let body_arg = body_path.to_str().expect("UTF-8 temp path");
    let mut args = vec![
        "--dump-header",
        head_arg,
        "--output",
        body_arg,
        "--write-out",
        "%{http_code} %{size_download}",
    ];
    args.extend_from_slice(extra);
    args.push(url);
    let run = curl(&args);
    let (code, size) = run
        .stdout
        .trim()
        .split_once(' ')
        .unwrap_or_else(|| panic!("unexpected --write-out output {:?}", run.stdout));
    Fetched {
        code: code.parse().expect("numeric %{http_code}"),
        size_download: size.parse().expect("numeric %{size_download}"),
        head: std::fs::read_to_string(&head_path).unwrap_or_default(),
        body: std::fs::read(&body_path).unwrap_or_default(),
    }
}
