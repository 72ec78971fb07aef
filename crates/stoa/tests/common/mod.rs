//! What the integration tests that drive the built `stoa` binary share beyond
//! `stoa-testkit`: a document-root fixture, `stoa serve` started with its flags and
//! its readiness lines read per scheme (on the kit's [`Process`]), the kit's raw
//! HTTP/1.x client framing responses strictly by `Content-Length`, and a curl
//! runner.
//!
//! Every wait here is bounded; servers are killed when their guard drops, so a
//! failing test leaves no process behind.

// Each test binary includes this module and uses only part of it.
#![allow(dead_code)]

use std::ffi::OsString;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use stoa_testkit::http::{Client, Response};
use stoa_testkit::{Process, TestCert, listening_on};

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
        let dir = stoa_testkit::temp_dir();
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
        stoa_testkit::write_file(&path, body);
        path
    }
}

// ---------------------------------------------------------------------------
// Server process
// ---------------------------------------------------------------------------

/// A running `stoa serve`, killed (SIGKILL) when dropped if still running.
pub(crate) struct Server {
    process: Process,
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
    /// Every bound LMTP address, in `--lmtp-listen` order.
    pub(crate) lmtp_addrs: Vec<SocketAddr>,
    /// Every bound POP3 proxy address, in `--pop3-proxy-listen` order.
    pub(crate) pop3_proxy_addrs: Vec<SocketAddr>,
    /// Every bound POP3S proxy address, in `--pop3s-proxy-listen` order.
    pub(crate) pop3s_proxy_addrs: Vec<SocketAddr>,
    /// Every bound IMAP address, in `--imap-listen` order.
    pub(crate) imap_addrs: Vec<SocketAddr>,
    /// Every bound IMAPS address, in `--imaps-listen` order.
    pub(crate) imaps_addrs: Vec<SocketAddr>,
    /// Every bound IMAP proxy address, in `--imap-proxy-listen` order.
    pub(crate) imap_proxy_addrs: Vec<SocketAddr>,
    /// Every bound IMAPS proxy address, in `--imaps-proxy-listen` order.
    pub(crate) imaps_proxy_addrs: Vec<SocketAddr>,
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

    /// `stoa serve --config <config>`: the listeners (and sites) come from the
    /// file; one readiness line is awaited.
    pub(crate) fn config(config: &Path) -> ServerBuilder {
        ServerBuilder {
            default_listen: false,
            prefix: Vec::new(),
            binary: PathBuf::from(env!("CARGO_BIN_EXE_stoa")),
            args: vec!["serve".into(), "--config".into(), config.into()],
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
                    "--lmtp-listen",
                    "--pop3-proxy-listen",
                    "--pop3s-proxy-listen",
                    "--imap-listen",
                    "--imaps-listen",
                    "--imap-proxy-listen",
                    "--imaps-proxy-listen",
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
            .envs(self.envs.iter().map(|(k, v)| (k, v)));
        let mut server = Server {
            process: Process::spawn(&mut command),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            addrs: Vec::new(),
            tls_addrs: Vec::new(),
            smtp_addrs: Vec::new(),
            submission_addrs: Vec::new(),
            pop3_addrs: Vec::new(),
            pop3s_addrs: Vec::new(),
            lmtp_addrs: Vec::new(),
            pop3_proxy_addrs: Vec::new(),
            pop3s_proxy_addrs: Vec::new(),
            imap_addrs: Vec::new(),
            imaps_addrs: Vec::new(),
            imap_proxy_addrs: Vec::new(),
            imaps_proxy_addrs: Vec::new(),
        };
        let ready = server.wait_for_stderr(READY_TIMEOUT, |lines| {
            lines.iter().filter(|l| parse_ready(l).is_some()).count() >= listens
        });
        if !ready {
            let status = server.process.wait_exit(Duration::ZERO);
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
        server.lmtp_addrs = of("lmtp");
        server.pop3_proxy_addrs = of("pop3-proxy");
        server.pop3s_proxy_addrs = of("pop3s-proxy");
        server.imap_addrs = of("imap");
        server.imaps_addrs = of("imaps");
        server.imap_proxy_addrs = of("imap-proxy");
        server.imaps_proxy_addrs = of("imaps-proxy");
        server.addr = *server
            .addrs
            .iter()
            .chain(&server.tls_addrs)
            .chain(&server.smtp_addrs)
            .chain(&server.submission_addrs)
            .chain(&server.pop3_addrs)
            .chain(&server.pop3s_addrs)
            .chain(&server.lmtp_addrs)
            .chain(&server.pop3_proxy_addrs)
            .chain(&server.pop3s_proxy_addrs)
            .chain(&server.imap_addrs)
            .chain(&server.imaps_addrs)
            .chain(&server.imap_proxy_addrs)
            .chain(&server.imaps_proxy_addrs)
            .next()
            .expect("a readiness line was counted");
        server
    }
}

/// `(scheme, address)` of a readiness line (`stoa: listening on SCHEME://ADDR`).
fn parse_ready(line: &str) -> Option<(&'static str, SocketAddr)> {
    let (scheme, addr) = listening_on(line.strip_prefix("stoa: ")?)?;
    let scheme = [
        "http",
        "https",
        "smtp",
        "submission",
        "pop3",
        "pop3s",
        "lmtp",
        "pop3-proxy",
        "pop3s-proxy",
        "imap",
        "imaps",
        "imap-proxy",
        "imaps-proxy",
    ]
    .into_iter()
    .find(|s| *s == scheme)?;
    Some((scheme, addr))
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
        self.process.pid()
    }

    /// Sends `sig` to the server process.
    pub(crate) fn signal(&self, sig: rustix::process::Signal) {
        self.process.signal(sig);
    }

    /// Waits (bounded) for the process to exit; `None` on timeout.
    pub(crate) fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.process.wait_exit(timeout)
    }

    /// Sends `sig` and waits for the exit status; panics (after killing the
    /// process) if it does not exit within [`EXIT_TIMEOUT`].
    pub(crate) fn stop_with(&mut self, sig: rustix::process::Signal) -> ExitStatus {
        self.signal(sig);
        match self.wait_exit(EXIT_TIMEOUT) {
            Some(status) => status,
            None => {
                self.process.kill();
                panic!(
                    "stoa did not exit within {EXIT_TIMEOUT:?} of {sig:?}; stderr:\n{}",
                    self.stderr_text()
                );
            }
        }
    }

    /// A copy of the standard-error lines so far.
    pub(crate) fn stderr_lines(&self) -> Vec<String> {
        self.process.stderr_lines()
    }

    /// Standard error so far, one string.
    pub(crate) fn stderr_text(&self) -> String {
        self.process.stderr_text()
    }

    /// Waits (bounded) until `pred` holds for the standard-error lines.
    pub(crate) fn wait_for_stderr(
        &self,
        timeout: Duration,
        pred: impl FnMut(&[String]) -> bool,
    ) -> bool {
        self.process.wait_for_stderr(timeout, pred)
    }
}

/// Runs the binary with `args` to completion (bounded by `timeout`, killed
/// after it) and returns its exit status and standard error.
pub(crate) fn run_stoa(args: &[&str], timeout: Duration) -> (ExitStatus, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command.args(args).env_remove("RUST_LOG");
    let done = stoa_testkit::run(&mut command, b"", timeout);
    (done.status, done.stderr)
}

/// `stoa user add ADDRESS --password-stdin --mail-dir DIR` (which creates the
/// mail directory); panics if it fails.
pub(crate) fn add_user(dir: &Path, address: &str, password: &str) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command
        .args(["user", "add", address, "--password-stdin", "--mail-dir"])
        .arg(dir)
        .env_remove("RUST_LOG");
    let password = format!("{password}\n");
    let done = stoa_testkit::run(&mut command, password.as_bytes(), Duration::from_secs(60));
    assert!(done.status.success(), "stoa user add: {}", done.stderr);
}

/// A self-signed certificate for `name` with its key, written as `name.crt` and
/// `name.key` in `dir`; returns the two paths (what `stoa serve` is given).
pub(crate) fn tls_pair(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let TestCert { cert, key, .. } = TestCert::new(dir, name);
    (cert, key)
}

// ---------------------------------------------------------------------------
// Raw HTTP client
// ---------------------------------------------------------------------------

/// A raw HTTP/1.x connection to the server: the kit's client, insisting on
/// `Content-Length` for every response with a body (the server always sends one).
pub(crate) fn raw_conn(addr: SocketAddr) -> Client {
    Client::connect(addr).require_content_length()
}

/// Sends `request` on a new connection and reads one response.
pub(crate) fn raw_request(addr: SocketAddr, request: &[u8]) -> Response {
    let mut conn = raw_conn(addr);
    conn.send(request);
    conn.read_response(request.starts_with(b"HEAD "))
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
    let dir = stoa_testkit::temp_dir();
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

/// Runs `openssl s_client -connect ADDR <args>` with `input` on its standard
/// input (then EOF), bounded in time; returns whether it succeeded and its
/// standard output and error together.
pub(crate) fn s_client(addr: SocketAddr, args: &[&str], input: &[u8]) -> (bool, String) {
    let mut child = Command::new("openssl")
        .arg("s_client")
        .arg("-connect")
        .arg(addr.to_string())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run openssl (Debian package `openssl`)");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let _ = std::io::Write::write_all(&mut stdin, input);
    drop(stdin);
    let readers = [
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn std::io::Read + Send>),
        child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn std::io::Read + Send>),
    ]
    .map(|r| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    });
    let mut status = None;
    stoa_testkit::wait_until(Duration::from_secs(20), || {
        status = child.try_wait().expect("poll openssl");
        status.is_some()
    });
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let output: String = readers
        .into_iter()
        .map(|r| r.join().expect("reader thread"))
        .collect::<Vec<_>>()
        .join("\n");
    let status = status.unwrap_or_else(|| panic!("openssl s_client {args:?} hung:\n{output}"));
    (status.success(), output)
}

/// `[directory]` over a test slapd at `url` (the admin's password in
/// `ldap.secret` beside the configuration, see [`write_ldap_config`]), with
/// `this_host` for a store host.
pub(crate) fn ldap_directory(url: &str, this_host: Option<&str>) -> String {
    use stoa_testkit::slapd::{ADMIN_DN, BASE};
    let this = this_host
        .map(|h| format!("this_host = \"{h}\"\n"))
        .unwrap_or_default();
    format!(
        "[directory]\nbackend = \"ldap\"\nurls = [\"{url}\"]\nbase = \"{BASE}\"\n\
         bind_dn = \"{ADMIN_DN}\"\nbind_password_file = \"ldap.secret\"\n\
         cache_ttl = \"1s\"\n{this}"
    )
}

/// Writes `text` as `dir/stoa.toml`, with the test slapd's admin password in
/// `dir/ldap.secret`; returns the configuration's path.
pub(crate) fn write_ldap_config(dir: &Path, text: &str) -> PathBuf {
    let secret = format!("{}\n", stoa_testkit::slapd::ADMIN_PASSWORD);
    std::fs::create_dir_all(dir).expect("config dir");
    std::fs::write(dir.join("ldap.secret"), secret).expect("secret");
    let path = dir.join("stoa.toml");
    std::fs::write(&path, text).expect("write the configuration");
    path
}
