//! Virtual hosts (`[[site]]`), driven with curl, `openssl s_client` and raw
//! requests over real sockets: the site chosen by `Host` (exact, wildcard, any
//! case, with a port, absolute-form, the default for unknown names and for
//! HTTP/1.0 without `Host`), by SNI (the site's certificate, the listener's for a
//! site without one, the default site's for no or an unknown name), an SNI/Host
//! mismatch (421), error pages with their status, directory listings with
//! escaped names, per-site access logs (and their reopening on SIGHUP), `stoa
//! check-config` printing the sites, and a reload that adds a site.

mod common;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rustix::process::Signal;
use stoa_testkit::tls::TestCert;

use common::{READY_TIMEOUT, Server, ServerBuilder, curl, fetch, raw_conn, raw_request, run_stoa};

/// A loopback address nobody listens on now (the configuration names its ports).
fn free_addr() -> SocketAddr {
    let probe = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    probe.local_addr().expect("local address")
}

/// Three sites and their certificates in a temporary directory.
struct Sites {
    dir: tempfile::TempDir,
    http: SocketAddr,
    https: SocketAddr,
    a: TestCert,
    b: TestCert,
    listener: TestCert,
    config: PathBuf,
}

impl Sites {
    /// `a.test` (and `www.a.test`) with its certificate and error pages;
    /// `b.test`, the default, with its certificate and listings; `*.w.test`
    /// without a certificate (the listener's, `listener.test`).
    fn new() -> Sites {
        let dir = stoa_testkit::temp_dir();
        let d = dir.path();
        let write = |rel: &str, body: &[u8]| stoa_testkit::write_file(&d.join(rel), body);
        write("a/index.html", b"site a\n");
        write("a/errors/404.html", b"<h1>a: not here</h1>\n");
        std::fs::create_dir_all(d.join("a/dir")).expect("mkdir");
        write("b/index.html", b"site b\n");
        write("b/list/<b>&\"x", b"x");
        write("b/list/plain.txt", b"p");
        write("b/list/.hidden", b"h");
        std::fs::create_dir_all(d.join("b/list/sub")).expect("mkdir");
        write("w/index.html", b"wildcard\n");
        let sites = Sites {
            http: free_addr(),
            https: free_addr(),
            a: TestCert::new(d, "a.test"),
            b: TestCert::new(d, "b.test"),
            listener: TestCert::new(d, "listener.test"),
            config: d.join("stoa.toml"),
            dir,
        };
        sites.write_config("");
        sites
    }

    /// The configuration, `extra` appended (to the last site's table).
    fn write_config(&self, extra: &str) {
        self.write_config_with("", "", extra);
    }

    /// The configuration with `web` as the `[web]` table's lines (none when
    /// empty), `a_keys` added to site `a.test`'s table and `extra` appended.
    fn write_config_with(&self, web: &str, a_keys: &str, extra: &str) {
        let d = self.dir.path().display();
        let web = match web {
            "" => String::new(),
            lines => format!("[web]\n{lines}\n"),
        };
        let pair = |c: &TestCert| {
            format!(
                "{{ cert = \"{}\", key = \"{}\" }}",
                c.cert.display(),
                c.key.display()
            )
        };
        let toml = format!(
            "{web}[[listener]]\naddress = \"{http}\"\n\n\
             [[listener]]\naddress = \"{https}\"\ntls = {listener}\n\n\
             [[site]]\nnames = [\"a.test\", \"www.a.test\"]\ndocroot = \"{d}/a\"\ntls = {a}\n\
             error_pages = {{ 404 = \"/errors/404.html\", 403 = \"/errors/missing.html\" }}\n\
             {a_keys}\n\
             [[site]]\nnames = [\"b.test\"]\ndefault = true\ndocroot = \"{d}/b\"\ntls = {b}\n\
             autoindex = true\n\n\
             [[site]]\nnames = [\"*.w.test\"]\ndocroot = \"{d}/w\"\n\n{extra}",
            http = self.http,
            https = self.https,
            listener = pair(&self.listener),
            a = pair(&self.a),
            b = pair(&self.b),
        );
        std::fs::write(&self.config, toml).expect("write the configuration");
    }

    fn start(&self, args: &[&str]) -> Server {
        let mut server = ServerBuilder::config(&self.config).args(args).start();
        assert!(
            server.wait_for_stderr(READY_TIMEOUT, |lines| {
                lines.iter().filter(|l| l.contains("listening on")).count() >= 2
            }),
            "not every listener came up:\n{}",
            server.stderr_text()
        );
        server.tls_addrs = vec![self.https];
        server
    }

    /// `http://NAME:PORT/path`, NAME resolved to the server by curl.
    fn url(&self, name: &str, path: &str) -> (String, String) {
        (
            format!("http://{name}:{}{path}", self.http.port()),
            format!("{name}:{}:127.0.0.1", self.http.port()),
        )
    }
}

/// The body curl gets for `name` (resolved to the server) at `path`.
fn body_for(sites: &Sites, name: &str, path: &str) -> (u16, String) {
    let (url, resolve) = sites.url(name, path);
    let f = fetch(&url, &["--resolve", &resolve]);
    (f.code, String::from_utf8_lossy(&f.body).into_owned())
}

#[test]
fn the_host_header_picks_the_site() {
    let sites = Sites::new();
    let _server = sites.start(&[]);
    for (name, want) in [
        ("a.test", "site a\n"),
        ("www.a.test", "site a\n"),
        ("b.test", "site b\n"),
        ("x.w.test", "wildcard\n"),
        ("x.y.w.test", "wildcard\n"),
        // A wildcard is for subdomains only; unknown names get the default.
        ("w.test", "site b\n"),
        ("unknown.test", "site b\n"),
    ] {
        assert_eq!(
            body_for(&sites, name, "/"),
            (200, want.to_owned()),
            "{name}"
        );
    }
    // Case and port do not matter, nor one trailing dot.
    let url = format!("http://{}/", sites.http);
    for host in ["WWW.A.Test", "a.test:8080", "a.test.", "[::1]:80"] {
        let f = fetch(&url, &["-H", &format!("Host: {host}")]);
        let want = if host.starts_with('[') {
            "site b\n"
        } else {
            "site a\n"
        };
        assert_eq!(String::from_utf8_lossy(&f.body), want, "Host: {host}");
    }
    // An absolute-form target names the site over Host (RFC 9112 §3.2.2).
    let f = fetch(
        &url,
        &["--request-target", "http://a.test/", "-H", "Host: b.test"],
    );
    assert_eq!(String::from_utf8_lossy(&f.body), "site a\n");
    // HTTP/1.0 without Host: the default site.
    let r = raw_request(sites.http, b"GET / HTTP/1.0\r\n\r\n");
    assert_eq!((r.status, &r.body[..]), (200, &b"site b\n"[..]));
    // Invalid hosts are refused.
    for bad in [
        &b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: user@a.test\r\n\r\n",
        b"GET http://user@a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n",
    ] {
        let r = raw_request(sites.http, bad);
        assert_eq!(r.status, 400, "{:?}", String::from_utf8_lossy(bad));
    }
}

/// `common::s_client`'s output alone (a refused handshake is what some
/// cases look for).
fn s_client(addr: SocketAddr, args: &[&str], input: &[u8]) -> String {
    common::s_client(addr, args, input).1
}

fn subject(out: &str) -> &str {
    out.lines()
        .find_map(|l| l.strip_prefix("subject="))
        .unwrap_or_else(|| panic!("no subject line:\n{out}"))
}

#[test]
fn sni_picks_the_certificate_and_must_agree_with_host() {
    let sites = Sites::new();
    let _server = sites.start(&[]);
    let s = |args: &[&str]| s_client(sites.https, args, b"");
    assert_eq!(subject(&s(&["-servername", "a.test"])), "CN = a.test");
    assert_eq!(subject(&s(&["-servername", "WWW.A.TEST"])), "CN = a.test");
    assert_eq!(subject(&s(&["-servername", "b.test"])), "CN = b.test");
    // A site without certificates: the listener's.
    assert_eq!(
        subject(&s(&["-servername", "x.w.test"])),
        "CN = listener.test"
    );
    // No name or an unknown one: the default site's.
    assert_eq!(subject(&s(&["-noservername"])), "CN = b.test");
    assert_eq!(subject(&s(&["-servername", "unknown.test"])), "CN = b.test");

    // A verifying client, SNI and Host agreeing.
    let port = sites.https.port();
    let https = |name: &str, cert: &Path, extra: &[&str]| {
        let url = format!("https://{name}:{port}/");
        let resolve = format!("{name}:{port}:127.0.0.1");
        let cacert = cert.to_str().expect("UTF-8 path");
        let mut args = vec!["--resolve", resolve.as_str(), "--cacert", cacert];
        args.extend_from_slice(extra);
        fetch(&url, &args)
    };
    let f = https("a.test", &sites.a.cert, &[]);
    assert_eq!((f.code, &f.body[..]), (200, &b"site a\n"[..]));
    let f = https("b.test", &sites.b.cert, &[]);
    assert_eq!((f.code, &f.body[..]), (200, &b"site b\n"[..]));
    // SNI names a.test, Host names b.test: misdirected.
    let f = https("a.test", &sites.a.cert, &["-H", "Host: b.test"]);
    assert_eq!(f.code, 421, "{}", String::from_utf8_lossy(&f.body));
    // An unknown SNI name stands for the default site: Host a.test is another.
    let f = https(
        "unknown.test",
        &sites.b.cert,
        &["--insecure", "-H", "Host: a.test"],
    );
    assert_eq!(f.code, 421);
    let f = https("unknown.test", &sites.b.cert, &["--insecure"]);
    assert_eq!((f.code, &f.body[..]), (200, &b"site b\n"[..]));
    // Without SNI, Host alone decides.
    let out = s_client(
        sites.https,
        &["-noservername", "-quiet"],
        b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
    );
    assert!(
        out.contains("HTTP/1.1 200 OK") && out.contains("site a"),
        "{out}"
    );
}

#[test]
fn a_cgi_script_of_a_site_other_than_the_default_runs() {
    let sites = Sites::new();
    let cgi = sites.dir.path().join("w-cgi");
    let script = cgi.join("hello");
    stoa_testkit::write_file(
        &script,
        b"#!/bin/sh\nprintf 'Content-Type: text/plain\\r\\n\\r\\nfrom w\\n'\n",
    );
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    // The last site (*.w.test) mounts the scripts; the default (b.test) has none.
    sites.write_config(&format!(
        "cgi = {{ \"/cgi-bin/\" = \"{}\" }}\n",
        cgi.display()
    ));
    let _server = sites.start(&[]);
    assert_eq!(
        body_for(&sites, "x.w.test", "/cgi-bin/hello"),
        (200, "from w\n".to_owned())
    );
    assert_eq!(body_for(&sites, "b.test", "/cgi-bin/hello").0, 404);
}

/// How long a line may take to reach its log file (each worker hands its
/// lines over once a second).
const LOG_WAIT: Duration = Duration::from_secs(10);

/// The request targets logged in the file at `path`, sorted (none when it
/// does not exist).
fn logged_targets(path: &Path) -> Vec<String> {
    let bytes = std::fs::read(path).unwrap_or_default();
    let text = String::from_utf8(bytes).expect("the access log is ASCII");
    let mut targets: Vec<String> = text
        .lines()
        .map(|line| {
            let request = line.split('"').nth(1).unwrap_or_default();
            request.split(' ').nth(1).unwrap_or_default().to_owned()
        })
        .collect();
    targets.sort();
    targets
}

/// `targets`, sorted as [`logged_targets`] returns them.
fn sorted(targets: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = targets.iter().map(|t| (*t).to_owned()).collect();
    v.sort();
    v
}

#[test]
fn each_site_writes_its_own_access_log() {
    let sites = Sites::new();
    let d = sites.dir.path();
    std::fs::create_dir_all(d.join("logs")).expect("mkdir");
    let server_log = d.join("server.log");
    let a_log = d.join("logs/a.log");
    let w_log = d.join("logs/w.log");
    // a.test: a file relative to the configuration; b.test (the default): the
    // server's log; *.w.test: a file of its own; off.test: none, though the
    // server logs.
    sites.write_config_with(
        &format!("access_log = \"{}\"", server_log.display()),
        "access_log = \"logs/a.log\"\n",
        &format!(
            "access_log = \"{}\"\n\n[[site]]\nnames = [\"off.test\"]\ndocroot = \"{}/w\"\n\
             access_log = \"off\"\n",
            w_log.display(),
            d.display()
        ),
    );
    let mut server = sites.start(&[]);
    for (name, path) in [
        ("a.test", "/?a"),
        ("www.a.test", "/?www-a"),
        ("b.test", "/?b"),
        ("unknown.test", "/?unknown"),
        ("x.w.test", "/?w"),
        ("off.test", "/?off"),
    ] {
        assert_eq!(body_for(&sites, name, path).0, 200, "{name}");
    }
    // Two sites on one connection: each line goes to its own site's log.
    let mut conn = raw_conn(sites.http);
    conn.send(
        b"GET /?pipelined-a HTTP/1.1\r\nHost: a.test\r\n\r\n\
          GET /?pipelined-w HTTP/1.1\r\nHost: x.w.test\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(conn.read_response(false).status, 200);
    assert_eq!(conn.read_response(false).status, 200);
    drop(conn);
    // Answered before a site is chosen: the default site's log.
    let bad_host = raw_request(sites.http, b"GET /?bad-host HTTP/1.1\r\nHost: a b\r\n\r\n");
    assert_eq!(bad_host.status, 400);
    let malformed = raw_request(
        sites.http,
        b"GET /?malformed\x01 HTTP/1.1\r\nHost: a.test\r\n\r\n",
    );
    assert_eq!(malformed.status, 400);
    // HTTP/2 over TLS: the site's log as well.
    let port = sites.https.port();
    let f = fetch(
        &format!("https://a.test:{port}/?h2"),
        &[
            "--resolve",
            &format!("a.test:{port}:127.0.0.1"),
            "--cacert",
            sites.a.cert.to_str().expect("UTF-8 path"),
            "--http2",
        ],
    );
    assert_eq!((f.code, &f.body[..]), (200, &b"site a\n"[..]));

    // Shutdown writes every line of every log out.
    let status = server.stop_with(Signal::TERM);
    assert!(status.success(), "exit {status}:\n{}", server.stderr_text());
    assert_eq!(
        logged_targets(&a_log),
        sorted(&["/?a", "/?www-a", "/?pipelined-a", "/?h2"])
    );
    assert_eq!(logged_targets(&w_log), sorted(&["/?w", "/?pipelined-w"]));
    assert_eq!(
        logged_targets(&server_log),
        sorted(&["/?b", "/?unknown", "/?bad-host", "/?malformed\\x01"])
    );
    let h2 = std::fs::read_to_string(&a_log).expect("read a.log");
    assert!(h2.contains("\"GET /?h2 HTTP/2.0\" 200 7"), "{h2}");
}

#[test]
fn sighup_reopens_every_site_log() {
    let sites = Sites::new();
    let d = sites.dir.path();
    let server_log = d.join("server.log");
    let a_log = d.join("a.log");
    sites.write_config_with(
        &format!("access_log = \"{}\"", server_log.display()),
        &format!("access_log = \"{}\"\n", a_log.display()),
        "",
    );
    let mut server = sites.start(&[]);
    // Whether the file at `path` has a line of `site` with `tag` (any tag: "").
    let has = |path: &Path, site: &str, tag: &str| {
        let prefix = format!("/?{site}-{tag}");
        logged_targets(path).iter().any(|t| t.starts_with(&prefix))
    };
    // Requests `/?a-TAG-n` of a.test and `/?b-TAG-n` of b.test, n counting up,
    // until one of each is in the files now named `a_log` and `server_log` (a
    // connection accepted just before a reload's hand-over, or a line handed
    // over just before a reopen, still goes to the file the log had before).
    let logged_anew = |tag: &str| {
        let mut n = 0;
        stoa_testkit::wait_until(LOG_WAIT, || {
            n += 1;
            for site in ["a", "b"] {
                let request =
                    format!("GET /?{site}-{tag}-{n} HTTP/1.1\r\nHost: {site}.test\r\n\r\n");
                assert_eq!(raw_request(sites.http, request.as_bytes()).status, 200);
            }
            has(&a_log, "a", tag) && has(&server_log, "b", tag)
        })
    };
    let rotated = |log: &Path, suffix: &str| {
        let mut name = log.to_owned().into_os_string();
        name.push(suffix);
        PathBuf::from(name)
    };
    let rotate = |suffix: &str| {
        for log in [&a_log, &server_log] {
            std::fs::rename(log, rotated(log, suffix)).expect("rotate a log");
        }
    };
    assert!(
        logged_anew("first"),
        "the first lines never reached the logs"
    );

    // A reload opens every file anew.
    rotate(".1");
    server.signal(Signal::HUP);
    assert!(
        server.wait_for_stderr(LOG_WAIT, |lines| lines
            .iter()
            .any(|l| l.contains("reload: the new configuration is in service"))),
        "no reload:\n{}",
        server.stderr_text()
    );
    assert!(
        logged_anew("reloaded"),
        "after a reload, the lines never reached new files:\n{}",
        server.stderr_text()
    );

    // A refused reload reopens every file of the running servers.
    rotate(".2");
    let mut broken = std::fs::read_to_string(&sites.config).expect("read");
    broken.push_str("[[site]]\nnames = \"not a list\"\n");
    std::fs::write(&sites.config, broken).expect("write");
    server.signal(Signal::HUP);
    assert!(
        server.wait_for_stderr(LOG_WAIT, |lines| lines
            .iter()
            .any(|l| l.contains("reload refused"))),
        "the broken configuration was not refused:\n{}",
        server.stderr_text()
    );
    assert!(
        logged_anew("refused"),
        "after a refused reload, the lines never reached new files:\n{}",
        server.stderr_text()
    );

    let status = server.stop_with(Signal::TERM);
    assert!(status.success(), "exit {status}:\n{}", server.stderr_text());
    // Each file has its own site's lines, from its own time (lines handed
    // over around a rotation may be in either file).
    for (log, site, other) in [(&a_log, "a", "b"), (&server_log, "b", "a")] {
        let (first, second) = (rotated(log, ".1"), rotated(log, ".2"));
        assert!(has(&first, site, "first-") && !has(&first, site, "refused-"));
        assert!(has(&second, site, "reloaded-") && !has(&second, site, "first-"));
        assert!(has(log, site, "refused-") && !has(log, site, "first-"));
        for file in [&first, &second, log] {
            assert!(
                !has(file, other, ""),
                "{} has lines of {other}",
                file.display()
            );
        }
    }
}

#[test]
fn error_pages_keep_their_status() {
    let sites = Sites::new();
    let _server = sites.start(&[]);
    let (url, resolve) = sites.url("a.test", "/missing");
    let f = fetch(&url, &["--resolve", &resolve]);
    assert_eq!(f.code, 404);
    assert_eq!(f.body, b"<h1>a: not here</h1>\n");
    assert_eq!(f.header("Content-Type"), Some("text/html"));
    // HEAD: the page's length, no body.
    let f = fetch(&url, &["--resolve", &resolve, "--head"]);
    assert_eq!((f.code, f.size_download), (404, 0));
    assert_eq!(f.header("Content-Length"), Some("21"));
    // The page for 403 is missing: the built-in page, not another error page.
    assert_eq!(
        body_for(&sites, "a.test", "/dir/"),
        (403, "403 Forbidden\n".to_owned())
    );
    // Another site has no error pages.
    assert_eq!(
        body_for(&sites, "b.test", "/missing"),
        (404, "404 Not Found\n".to_owned())
    );
    // The page itself is served as a file, with 200.
    assert_eq!(
        body_for(&sites, "a.test", "/errors/404.html"),
        (200, "<h1>a: not here</h1>\n".to_owned())
    );
}

#[test]
fn directory_listings_escape_names() {
    let sites = Sites::new();
    let _server = sites.start(&[]);
    let (url, resolve) = sites.url("b.test", "/list/");
    let f = fetch(&url, &["--resolve", &resolve]);
    assert_eq!(f.code, 200);
    assert_eq!(f.header("Content-Type"), Some("text/html; charset=utf-8"));
    let page = String::from_utf8_lossy(&f.body);
    assert!(
        page.contains("<li><a href=\"%3Cb%3E%26%22x\">&lt;b&gt;&amp;&quot;x</a></li>"),
        "{page}"
    );
    assert!(
        page.contains("<a href=\"plain.txt\">plain.txt</a>"),
        "{page}"
    );
    assert!(page.contains("<a href=\"sub/\">sub/</a>"), "{page}");
    assert!(!page.contains("hidden"), "{page}");
    let escaped = page.find("%3Cb").expect("escaped entry");
    assert!(
        escaped < page.find("plain.txt").expect("plain"),
        "sorted:\n{page}"
    );
    // The link works.
    assert_eq!(
        body_for(&sites, "b.test", "/list/%3Cb%3E%26%22x"),
        (200, "x".into())
    );
    // Without the slash: the redirect as before; off by default elsewhere.
    let (url, resolve) = sites.url("b.test", "/list");
    let f = fetch(&url, &["--resolve", &resolve]);
    assert_eq!((f.code, f.header("Location")), (301, Some("/list/")));
    assert_eq!(body_for(&sites, "x.w.test", "/missing/").0, 404);
    std::fs::create_dir_all(sites.dir.path().join("w/empty")).expect("mkdir");
    assert_eq!(body_for(&sites, "x.w.test", "/empty/").0, 403);
}

#[test]
fn check_config_prints_the_sites() {
    let sites = Sites::new();
    sites.write_config_with(
        "",
        "access_log = \"logs/a.log\"\n",
        "access_log = \"off\"\n",
    );
    let config = sites.config.to_str().expect("UTF-8 path");
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command.args(["check-config", "--config", config]);
    let done = stoa_testkit::run(&mut command, b"", Duration::from_secs(30));
    assert!(done.status.success(), "{}", done.stderr);
    let out = done.stdout;
    assert_eq!(out.matches("\n[[site]]\n").count(), 3, "{out}");
    assert!(
        out.contains("names = [\"a.test\", \"www.a.test\"]"),
        "{out}"
    );
    assert!(out.contains("names = [\"*.w.test\"]"), "{out}");
    assert!(
        out.contains(
            "error_pages = { 403 = \"/errors/missing.html\", 404 = \"/errors/404.html\" }"
        ),
        "{out}"
    );
    assert!(out.contains("autoindex = true"), "{out}");
    // A site's log file is relative to the configuration file; a site without
    // one says whose it uses.
    let a_log = sites.dir.path().join("logs/a.log");
    assert!(
        out.contains(&format!("access_log = \"{}\"", a_log.display())),
        "{out}"
    );
    assert!(
        out.contains("# access_log: the server's ([web] access_log)"),
        "{out}"
    );
    let w_site = out
        .split("names = [\"*.w.test\"]")
        .nth(1)
        .expect("the site");
    assert!(w_site.contains("access_log = \"off\""), "{out}");
    // What it prints reads back to the same.
    let printed = sites.dir.path().join("printed.toml");
    std::fs::write(&printed, &out).expect("write");
    let mut again = Command::new(env!("CARGO_BIN_EXE_stoa"));
    again.args(["check-config", "--config", printed.to_str().expect("UTF-8")]);
    let done = stoa_testkit::run(&mut again, b"", Duration::from_secs(30));
    assert!(done.status.success(), "{}", done.stderr);
    // Past the header, which names the file read.
    let settings = |text: &str| text.split_once("\n\n").map(|(_, rest)| rest.to_owned());
    assert_eq!(settings(&done.stdout), settings(&out));

    // Mistakes are named.
    sites.write_config(
        "[[site]]\nnames = [\"a.test\", \"c.test:80\"]\ndocroot = \"/nonexistent\"\ndefault = true\n\
         error_pages = { 200 = \"/x.html\" }\naccess_log = \"\"\n",
    );
    let (status, stderr) = run_stoa(
        &["check-config", "--config", config],
        Duration::from_secs(30),
    );
    assert!(!status.success());
    for error in [
        "site[3].names: \"a.test\" is already a name of site[0]",
        "site[3].names: \"c.test:80\" is not a host name",
        "site: default = true on more than one site (sites [1, 3])",
        "site[3].docroot: /nonexistent is not a directory",
        "site[3].error_pages.200: not an error status (400 to 599)",
        "site[3].access_log: empty; use a file name, \"-\" or \"off\"",
    ] {
        assert!(stderr.contains(error), "missing {error:?} in:\n{stderr}");
    }
}

#[test]
fn a_reload_adds_a_site() {
    let sites = Sites::new();
    let pid_file = sites.dir.path().join("stoa.pid");
    let pid = pid_file.to_str().expect("UTF-8 path");
    let _server = sites.start(&["--pid-file", pid]);
    assert_eq!(body_for(&sites, "c.test", "/"), (200, "site b\n".into()));
    let c = sites.dir.path().join("c");
    stoa_testkit::write_file(&c.join("index.html"), b"site c\n");
    sites.write_config(&format!(
        "[[site]]\nnames = [\"c.test\"]\ndocroot = \"{}\"\n",
        c.display()
    ));
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command.args(["reload", "--pid-file", pid]);
    let done = stoa_testkit::run(&mut command, b"", Duration::from_secs(60));
    assert!(done.status.success(), "stoa reload: {}", done.stderr);
    // The new generation serves it (a fresh connection reaches it once the
    // hand-over is done).
    assert!(
        stoa_testkit::wait_until(Duration::from_secs(20), || {
            body_for(&sites, "c.test", "/") == (200, "site c\n".into())
        }),
        "c.test never served by its site"
    );
    assert_eq!(body_for(&sites, "a.test", "/"), (200, "site a\n".into()));
    let _ = curl(&["--version"]);
}

/// Issue 56: dotfiles are served on direct request by default, as nginx does;
/// `hide_dotfiles` answers them 404, server-wide or per site, `/.well-known/`
/// aside. The metrics count each site's answers under its own label.
#[test]
fn hide_dotfiles_per_site_and_responses_counted_per_site() {
    let sites = Sites::new();
    let d = sites.dir.path();
    let write = |rel: &str, body: &[u8]| stoa_testkit::write_file(&d.join(rel), body);
    write("a/.env", b"SECRET=a\n");
    write("b/.env", b"SECRET=b\n");
    write("b/.well-known/security.txt", b"Contact: mailto:x@b.test\n");
    // The default: served.
    {
        let _server = sites.start(&[]);
        assert_eq!(
            body_for(&sites, "b.test", "/.env"),
            (200, "SECRET=b\n".to_owned())
        );
    }
    let metrics = free_addr();
    sites.write_config_with(
        "hide_dotfiles = true",
        "hide_dotfiles = false",
        &format!("[metrics]\nlisten = \"{metrics}\"\n"),
    );
    let _server = sites.start(&[]);
    assert_eq!(
        body_for(&sites, "b.test", "/.env"),
        (404, "404 Not Found\n".to_owned())
    );
    assert_eq!(body_for(&sites, "b.test", "/list/.hidden").0, 404);
    assert_eq!(body_for(&sites, "b.test", "/%2eenv").0, 404);
    assert_eq!(
        body_for(&sites, "b.test", "/.well-known/security.txt"),
        (200, "Contact: mailto:x@b.test\n".to_owned())
    );
    // Site a.test keeps serving them.
    assert_eq!(
        body_for(&sites, "a.test", "/.env"),
        (200, "SECRET=a\n".to_owned())
    );
    let scrape = fetch(&format!("http://{metrics}/metrics"), &[]);
    assert_eq!(scrape.code, 200);
    let text = String::from_utf8_lossy(&scrape.body);
    for line in [
        "stoa_http_site_responses_total{site=\"a.test\",code=\"2xx\"} 1\n",
        "stoa_http_site_responses_total{site=\"b.test\",code=\"2xx\"} 1\n",
        "stoa_http_site_responses_total{site=\"b.test\",code=\"4xx\"} 3\n",
        "stoa_http_site_responses_total{site=\"*.w.test\",code=\"2xx\"} 0\n",
        "stoa_http_request_duration_seconds_count{site=\"b.test\"} 4\n",
    ] {
        assert!(text.contains(line), "no {line:?} in:\n{text}");
    }
}
