//! HTTP/2 over TLS (ALPN `h2`), driven with curl `--http2` and, frame by frame,
//! with Python's hyperframe and hpack (`h2_attacks.py`): files, conditional and
//! range requests, compression, HEAD, error pages, CGI with a request body, the
//! size limit on bodies, the site chosen by `:authority` and the SNI/authority
//! mismatch, the access log's `HTTP/2.0`, `[web] http2 = false`; and one test per
//! known attack (rapid reset, CONTINUATION flood, HPACK bomb, the stream limit,
//! PING and SETTINGS floods), each followed by a request on a new connection; and
//! h2load (nghttp2-client) with many streams in flight at once.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{HELLO, Server, Site, curl, fetch, tls_pair};

/// A server with one HTTPS listener (certificate for `localhost`), the access log
/// in `access.log` beside the docroot, and `args`.
fn start(site: &Site, args: &[&str]) -> (Server, PathBuf, PathBuf) {
    let (cert, key) = tls_pair(site.dir.path(), "localhost");
    let log = site.dir.path().join("access.log");
    let mut all = vec![
        "--tls-listen",
        "127.0.0.1:0",
        "--tls-cert",
        path_str(&cert),
        "--tls-key",
        path_str(&key),
        "--access-log",
        path_str(&log),
    ];
    all.extend_from_slice(args);
    let server = Server::start(site.root(), &all);
    (server, cert, log)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// curl's options for HTTP/2 to `localhost` at the server, trusting `cert`.
fn h2_args(server: &Server, cert: &Path) -> Vec<String> {
    let port = server.tls_addrs[0].port();
    vec![
        "--http2".into(),
        "--resolve".into(),
        format!("localhost:{port}:127.0.0.1"),
        "--cacert".into(),
        path_str(cert).into(),
    ]
}

fn url(server: &Server, path: &str) -> String {
    format!("https://localhost:{}{path}", server.tls_addrs[0].port())
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `%{http_version}` of one transfer.
fn version(server: &Server, cert: &Path, extra: &[&str]) -> String {
    let mut args = h2_args(server, cert);
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend([
        "--output".into(),
        "/dev/null".into(),
        "--write-out".into(),
        "%{http_version}".into(),
        url(server, "/hello.txt"),
    ]);
    curl(&strs(&args)).stdout
}

#[test]
fn curl_gets_files_ranges_conditionals_and_encodings_over_h2() {
    let site = Site::new();
    let big: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    site.write("big.bin", &big);
    let text = "a line of text that compresses well\n".repeat(200);
    site.write("page.html", text.as_bytes());
    let (server, cert, log) = start(&site, &[]);
    let h2 = h2_args(&server, &cert);
    let h2 = strs(&h2);
    assert_eq!(version(&server, &cert, &[]), "2");

    let hello = fetch(&url(&server, "/hello.txt"), &h2);
    assert_eq!((hello.code, hello.body.as_slice()), (200, HELLO));
    assert!(hello.head.starts_with("HTTP/2 200"), "{}", hello.head);
    for gone in ["connection", "keep-alive", "transfer-encoding"] {
        assert!(
            hello.header(gone).is_none(),
            "{gone} over HTTP/2:\n{}",
            hello.head
        );
    }
    let file = fetch(&url(&server, "/big.bin"), &h2);
    assert_eq!(file.code, 200);
    assert!(file.body == big, "big.bin differs over HTTP/2");

    let mut range = h2.clone();
    range.extend(["--range", "1000-1999"]);
    let part = fetch(&url(&server, "/big.bin"), &range);
    assert_eq!(part.code, 206);
    assert_eq!(part.body, &big[1000..2000]);

    let etag = hello.header("etag").expect("an ETag").to_owned();
    let header = format!("If-None-Match: {etag}");
    let mut conditional = h2.clone();
    conditional.extend(["--header", &header]);
    let same = fetch(&url(&server, "/hello.txt"), &conditional);
    assert_eq!((same.code, same.body.len()), (304, 0));

    let mut head = h2.clone();
    head.push("--head");
    let only = fetch(&url(&server, "/big.bin"), &head);
    assert_eq!(only.code, 200);
    assert_eq!(only.header("content-length"), Some("300000"));
    assert_eq!(only.size_download, 0);

    let mut compressed = h2.clone();
    compressed.push("--compressed");
    let page = fetch(&url(&server, "/page.html"), &compressed);
    assert_eq!(page.code, 200);
    assert!(page.header("content-encoding").is_some(), "{}", page.head);
    assert_eq!(page.header("vary"), Some("Accept-Encoding"));
    assert_eq!(page.body, text.as_bytes(), "curl decodes what it asked for");

    let missing = fetch(&url(&server, "/nope"), &h2);
    assert_eq!(missing.code, 404);

    // The access log names the protocol the client spoke.
    let mut server = server;
    server.stop_with(rustix::process::Signal::TERM);
    let lines = std::fs::read_to_string(&log).expect("the access log");
    assert!(
        lines.contains("\"GET /hello.txt HTTP/2.0\" 200 13"),
        "no HTTP/2.0 line:\n{lines}"
    );
    assert!(
        lines.contains("\"GET /big.bin HTTP/2.0\" 206 1000"),
        "{lines}"
    );
}

/// h2load (nghttp2-client) with 16 streams in flight on each connection, over
/// answers sent in one flush with those of other streams (a small file, an
/// error page) and answers with a task of their own (a file over 64 KiB): every
/// stream completes, and the body bytes h2load received are exactly those the
/// access log counts, each file whole.
#[test]
fn h2load_gets_every_stream_whole_whether_answered_at_once_or_on_its_own_task() {
    let site = Site::new();
    let mid: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8).collect();
    let big: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
    site.write("mid.bin", &mid);
    site.write("big.bin", &big);
    let (server, _cert, log) = start(&site, &["--workers", "1"]);
    let base = format!("https://127.0.0.1:{}", server.tls_addrs[0].port());
    let urls: Vec<String> = ["/hello.txt", "/mid.bin", "/big.bin", "/nope"]
        .iter()
        .map(|p| format!("{base}{p}"))
        .collect();
    let run = stoa_testkit::run(
        Command::new("h2load")
            .args(["-n", "800", "-c", "2", "-m", "16", "-t", "1"])
            .args(&urls),
        b"",
        Duration::from_secs(60),
    );
    assert!(
        run.status.success(),
        "h2load (nghttp2-client; scripts/test.sh installs it) failed:\n{}{}",
        run.stdout,
        run.stderr
    );
    let out = &run.stdout;
    assert!(out.contains("Application protocol: h2"), "{out}");
    // h2load asks for the URLs in turn and counts the 404s as failed.
    assert!(
        out.contains(
            "800 total, 800 started, 800 done, 600 succeeded, 200 failed, 0 errored, 0 timeout"
        ),
        "{out}"
    );
    assert!(out.contains("600 2xx, 0 3xx, 200 4xx, 0 5xx"), "{out}");
    let received: u64 = out
        .lines()
        .find(|l| l.starts_with("traffic:"))
        .and_then(|l| {
            let data = l.rsplit_once(" data")?.0;
            data.rsplit_once('(')?.1.strip_suffix(')')?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no data bytes in h2load's traffic line:\n{out}"));

    let mut server = server;
    server.stop_with(rustix::process::Signal::TERM);
    let lines = std::fs::read_to_string(&log).expect("the access log");
    let (mut logged, mut count) = (0u64, 0);
    for line in lines.lines() {
        let (path, status, size) = line
            .split_once("\"GET ")
            .and_then(|(_, rest)| {
                let (path, rest) = rest.split_once(" HTTP/2.0\" ")?;
                let mut fields = rest.split(' ');
                Some((path, fields.next()?, fields.next()?.parse::<u64>().ok()?))
            })
            .unwrap_or_else(|| panic!("not an HTTP/2.0 GET line: {line}"));
        let want = match path {
            "/hello.txt" => ("200", HELLO.len() as u64),
            "/mid.bin" => ("200", mid.len() as u64),
            "/big.bin" => ("200", big.len() as u64),
            "/nope" => ("404", size),
            other => panic!("a request for {other}"),
        };
        assert_eq!((status, size), want, "{line}");
        logged += size;
        count += 1;
    }
    assert_eq!(count, 800, "one log line per stream");
    assert_eq!(received, logged, "h2load's body bytes against the log's");
}

#[test]
fn a_cgi_script_gets_the_body_and_too_large_a_body_is_refused() {
    let site = Site::new();
    let cgi = site.dir.path().join("cgi");
    std::fs::create_dir(&cgi).expect("mkdir cgi");
    let script = cgi.join("echo");
    std::fs::write(
        &script,
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\n'\n\
         echo \"$REQUEST_METHOD $CONTENT_LENGTH $SERVER_PROTOCOL\"\ncat\n",
    )
    .expect("write the script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let (server, cert, _log) = start(&site, &["--cgi-dir", path_str(&cgi)]);
    let h2 = h2_args(&server, &cert);
    let mut post = strs(&h2);
    post.extend(["--data-binary", "one two three"]);
    let echoed = fetch(&url(&server, "/cgi-bin/echo"), &post);
    assert_eq!(
        echoed.code,
        200,
        "{}",
        String::from_utf8_lossy(&echoed.body)
    );
    assert_eq!(
        String::from_utf8_lossy(&echoed.body),
        "POST 13 HTTP/1.1\none two three"
    );

    // A body over the CGI's 1 MiB is refused from its length, the script not
    // run: frame by frame, since curl 7.88 reports the RST_STREAM(NO_ERROR)
    // that ends its upload as an error before it shows the response.
    let port = server.tls_addrs[0].port().to_string();
    let run = stoa_testkit::run(
        Command::new(python_with_h2()).arg(attacks_script()).args([
            "oversize_body",
            "127.0.0.1",
            &port,
        ]),
        b"",
        Duration::from_secs(30),
    );
    assert!(run.status.success(), "{}{}", run.stdout, run.stderr);
}

#[test]
fn the_site_is_chosen_by_authority_and_a_mismatch_with_sni_is_refused() {
    let dir = stoa_testkit::temp_dir();
    let d = dir.path();
    stoa_testkit::write_file(&d.join("a/index.html"), b"site a\n");
    stoa_testkit::write_file(&d.join("b/index.html"), b"site b\n");
    let (a_cert, a_key) = tls_pair(d, "a.test");
    let (b_cert, b_key) = tls_pair(d, "b.test");
    let https = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port");
    let config = d.join("stoa.toml");
    let pair = |c: &Path, k: &Path| {
        format!(
            "{{ cert = \"{}\", key = \"{}\" }}",
            c.display(),
            k.display()
        )
    };
    std::fs::write(
        &config,
        format!(
            "[[listener]]\naddress = \"{https}\"\ntls = {a}\n\n\
             [[site]]\nnames = [\"a.test\"]\ndefault = true\ndocroot = \"{d}/a\"\ntls = {a}\n\n\
             [[site]]\nnames = [\"b.test\"]\ndocroot = \"{d}/b\"\ntls = {b}\n",
            a = pair(&a_cert, &a_key),
            b = pair(&b_cert, &b_key),
            d = d.display(),
        ),
    )
    .expect("write the configuration");
    let server = common::ServerBuilder::config(&config).start();
    assert!(
        server.wait_for_stderr(common::READY_TIMEOUT, |lines| lines
            .iter()
            .any(|l| l.contains("listening on"))),
        "{}",
        server.stderr_text()
    );
    let port = https.port();
    let get = |name: &str, cert: &Path, extra: &[&str]| {
        let resolve = format!("{name}:{port}:127.0.0.1");
        let mut args = vec!["--http2", "--resolve", &resolve, "--cacert", path_str(cert)];
        args.extend_from_slice(extra);
        let f = fetch(&format!("https://{name}:{port}/"), &args);
        (f.code, String::from_utf8_lossy(&f.body).into_owned())
    };
    assert_eq!(get("a.test", &a_cert, &[]), (200, "site a\n".into()));
    assert_eq!(get("b.test", &b_cert, &[]), (200, "site b\n".into()));
    // SNI a.test, :authority b.test (curl sends its Host header as :authority).
    let (code, _) = get("a.test", &a_cert, &["--header", "Host: b.test"]);
    assert_eq!(code, 421);
}

#[test]
fn http2_off_leaves_alpn_at_http_1_1() {
    let site = Site::new();
    let config = site.dir.path().join("stoa.toml");
    std::fs::write(&config, "[web]\nhttp2 = false\n").expect("write the configuration");
    let (server, cert, _log) = start(&site, &["--config", path_str(&config)]);
    assert_eq!(version(&server, &cert, &[]), "1.1");
}

/// Runs one vector of `h2_attacks.py` against a server started with `args`;
/// then a new connection must still be served.
fn attack(vector: &str) {
    let site = Site::new();
    attack_with(vector, &site, &[], &[]);
}

fn attack_with(vector: &str, site: &Site, args: &[&str], extra: &[&str]) {
    let python = python_with_h2();
    let mut all = vec!["--workers", "1"];
    all.extend_from_slice(args);
    let (server, cert, _log) = start(site, &all);
    let port = server.tls_addrs[0].port().to_string();
    let pid = server.pid().to_string();
    let run = stoa_testkit::run(
        Command::new(&python)
            .arg(attacks_script())
            .args([vector, "127.0.0.1", &port, &pid])
            .args(extra),
        b"",
        Duration::from_secs(60),
    );
    assert!(
        run.status.success(),
        "{vector}: the server's answer was not the expected defence:\n{}{}",
        run.stdout,
        run.stderr
    );
    let after = fetch(&url(&server, "/hello.txt"), &strs(&h2_args(&server, &cert)));
    assert_eq!((after.code, after.body.as_slice()), (200, HELLO));
}

fn attacks_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/h2_attacks.py")
}

/// A Python with hyperframe and hpack: Debian's `/usr/bin/python3` (with
/// python3-h2, which scripts/test.sh installs) or the one on `PATH`.
fn python_with_h2() -> String {
    for python in ["/usr/bin/python3", "python3"] {
        let ok = Command::new(python)
            .args(["-c", "import hpack, hyperframe"])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return python.into();
        }
    }
    panic!("no python3 with hpack and hyperframe: install python3-h2 (scripts/test.sh does)");
}

/// Answers queued whole on the connection's task keep the connection past the
/// keep-alive timeout while their bytes keep leaving under a window the client
/// opens slowly.
#[test]
fn a_slow_window_gets_every_answer_past_the_keepalive_timeout() {
    let site = Site::new();
    let body: Vec<u8> = (0..40_000u32).map(|i| (i % 199) as u8).collect();
    site.write("slow.bin", &body);
    attack_with("slow_window", &site, &["--keepalive-timeout", "1s"], &[]);
}

#[test]
fn rapid_reset_gets_goaway() {
    attack("rapid_reset");
}

#[test]
fn a_reset_stream_kills_its_script_and_what_it_started() {
    let site = Site::new();
    let cgi = site.dir.path().join("cgi");
    let marks = site.dir.path().join("marks");
    std::fs::create_dir(&cgi).expect("mkdir cgi");
    std::fs::create_dir(&marks).expect("mkdir marks");
    let script = cgi.join("slow");
    // A duration no other test uses, to find the shell's child by.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n: > {}/started.$$\nsleep 41.25\necho late\n",
            marks.display()
        ),
    )
    .expect("write the script");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    attack_with(
        "reset_running",
        &site,
        &["--cgi-dir", path_str(&cgi)],
        &[path_str(&marks)],
    );
    let sleeping = || {
        Command::new("pgrep")
            .args(["-f", "sleep 41.25"])
            .status()
            .is_ok_and(|s| s.success())
    };
    assert!(
        stoa_testkit::wait::wait_until(Duration::from_secs(10), || !sleeping()),
        "the scripts of reset streams (or their children) are still running"
    );
}

#[test]
fn a_continuation_flood_gets_goaway() {
    attack("continuation_flood");
}

#[test]
fn an_hpack_bomb_is_refused_and_the_connection_goes_on() {
    attack("hpack_bomb");
}

#[test]
fn streams_beyond_the_limit_are_refused() {
    attack("stream_limit");
}

#[test]
fn a_ping_flood_stalls_only_its_connection() {
    attack("ping_flood");
}

#[test]
fn a_settings_flood_stalls_only_its_connection() {
    attack("settings_flood");
}

/// Clients that never open their window (SETTINGS_INITIAL_WINDOW_SIZE 0) get
/// no file read into memory for them: eight connections of 128 streams each for
/// a 60 KiB file (above the file cache's in-memory size) grow the server by
/// less than 16 MiB (they grew it by 64 MB when each answer was read whole
/// ahead of the window), and once the windows open every body comes whole.
#[test]
fn clients_that_never_open_their_window_pin_no_bodies() {
    let site = Site::new();
    let body: Vec<u8> = (0..60 * 1024u32).map(|i| (i % 251) as u8).collect();
    site.write("big.bin", &body);
    let file = site.root().join("big.bin");
    attack_with("zero_window", &site, &[], &[path_str(&file)]);
}
