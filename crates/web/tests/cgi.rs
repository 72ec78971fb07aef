//! CGI/1.1 over real sockets: meta-variables, the body on stdin, Status, Location,
//! stderr, malformed output, timeouts that kill the process group, missing and
//! non-executable scripts.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use stoa_testkit::http::request;

use common::{Fixture, TestServer};
use stoa_web::config::{CgiConfig, CgiMount};

/// Writes an executable shell script.
fn script(dir: &Path, name: &str, body: &str) {
    std::fs::create_dir_all(dir).expect("mkdir");
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}")).expect("write script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

fn server_with_scripts(timeout: Duration) -> (TestServer, PathBuf) {
    let fixture = Fixture::new();
    let dir = fixture.outside().join("cgi-bin");
    script(
        &dir,
        "env",
        "printf 'Content-Type: text/plain\\n\\n'; env | sort\n",
    );
    script(
        &dir,
        "echo",
        "printf 'Content-Type: application/octet-stream\\r\\n\\r\\n'; cat\n",
    );
    script(
        &dir,
        "teapot",
        "printf 'Status: 418 I am a teapot\\nContent-Type: text/plain\\nX-Extra: yes\\n\\nshort'\n",
    );
    script(&dir, "moved", "printf 'Location: /elsewhere\\n\\n'\n");
    script(
        &dir,
        "noisy",
        "echo 'something odd' >&2; printf 'Content-Type: text/plain\\n\\nok'\n",
    );
    script(&dir, "broken", "echo 'no header at all'\n");
    script(
        &dir,
        "slow",
        "sleep 60 & echo $! > \"$DOCUMENT_ROOT/../child.pid\"; printf 'Content-Type: text/plain\\n\\n'; sleep 60\n",
    );
    std::fs::write(dir.join("plain"), "#!/bin/sh\necho hi\n").expect("write");
    let mut config = fixture.config();
    let mut cgi = CgiConfig::new();
    cgi.mounts.push(CgiMount {
        prefix: "/cgi-bin/".into(),
        dir: dir.clone(),
    });
    cgi.timeout = timeout;
    config.cgi = Some(cgi);
    let outside = fixture.outside().to_owned();
    (fixture.start(config), outside)
}

#[test]
fn environment_follows_rfc_3875() {
    let (server, _) = server_with_scripts(Duration::from_secs(10));
    let mut c = server.connect();
    let req = request(
        "GET",
        "/cgi-bin/env/more/path?x=1&y=%20",
        &[("User-Agent", "cgi-test"), ("Cookie", "a=b")],
    );
    let r = c.roundtrip(&req, false);
    assert_eq!(r.status, 200, "{}", r.body_str());
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    let body = r.body_str();
    for line in [
        "GATEWAY_INTERFACE=CGI/1.1",
        "REQUEST_METHOD=GET",
        "SCRIPT_NAME=/cgi-bin/env",
        "PATH_INFO=/more/path",
        "QUERY_STRING=x=1&y=%20",
        "SERVER_PROTOCOL=HTTP/1.1",
        "REMOTE_ADDR=127.0.0.1",
        "HTTP_USER_AGENT=cgi-test",
        "HTTP_COOKIE=a=b",
        "SERVER_SOFTWARE=stoa/",
        "DOCUMENT_ROOT=/",
        "SERVER_PORT=",
    ] {
        assert!(
            body.lines().any(|l| l.starts_with(line)),
            "missing {line} in\n{body}"
        );
    }
    // The environment is the CGI one, not the server's.
    assert!(
        !body.contains("CARGO"),
        "server environment leaked:\n{body}"
    );
    // Kept alive: a second request on the same connection works.
    assert_eq!(c.get("/a.txt").status, 200);
}

#[test]
fn request_body_goes_to_stdin() {
    let (server, _) = server_with_scripts(Duration::from_secs(10));
    let mut c = server.connect();
    let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    let mut req = format!(
        "POST /cgi-bin/echo HTTP/1.1\r\nHost: test\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
        payload.len()
    )
    .into_bytes();
    req.extend_from_slice(&payload);
    let r = c.roundtrip(&req, false);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, payload);
    let chunked = b"POST /cgi-bin/echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    let r = c.roundtrip(chunked, false);
    assert_eq!((r.status, r.body_str()), (200, "hello world".to_owned()));
}

#[test]
fn a_chunked_body_with_a_bad_trailer_is_refused_with_400() {
    let (server, _) = server_with_scripts(Duration::from_secs(10));
    for trailer in [
        &b"X: a\r\n folded\r\n"[..],
        b"NoColon\r\n",
        b"X : y\r\n",
        b"GET /c.html HTTP/1.1\r\n",
    ] {
        let req = [
            &b"POST /cgi-bin/echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n"[..],
            trailer,
            b"\r\n",
        ]
        .concat();
        common::assert_rejected(&server, &req, 400);
    }
}

#[test]
fn status_location_and_headers_are_passed_on() {
    let (server, _) = server_with_scripts(Duration::from_secs(10));
    let mut c = server.connect();
    let r = c.get("/cgi-bin/teapot");
    assert_eq!((r.status, r.body_str()), (418, "short".to_owned()));
    assert_eq!(r.header("X-Extra"), Some("yes"));
    assert_eq!(r.header_count("Status"), 0);
    let r = c.get("/cgi-bin/moved");
    assert_eq!(r.status, 302);
    assert_eq!(r.header("Location"), Some("/elsewhere"));
    let r = c.get("/cgi-bin/noisy");
    assert_eq!((r.status, r.body_str()), (200, "ok".to_owned()));
}

#[test]
fn bad_scripts_and_missing_ones() {
    let (server, _) = server_with_scripts(Duration::from_secs(10));
    let mut c = server.connect();
    assert_eq!(c.get("/cgi-bin/broken").status, 502);
    assert_eq!(c.get("/cgi-bin/plain").status, 404, "not executable");
    assert_eq!(c.get("/cgi-bin/nothing-here").status, 404);
    assert_eq!(c.get("/cgi-bin/").status, 404);
    assert_eq!(c.get("/cgi-bin/.hidden").status, 404);
    // Dot-segments are resolved before routing: this is the static file.
    let r = c.get("/cgi-bin/../a.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    for escape in [
        "/cgi-bin/%2e%2e/%2e%2e/bin/sh",
        "/cgi-bin/..%2f..%2fbin/sh",
        "/cgi-bin/env%2f..%2f..%2f..%2fbin/sh",
    ] {
        let r = c.get(escape);
        assert!(r.status == 400 || r.status == 404, "{escape}: {}", r.status);
        c = server.connect();
    }
    assert_eq!(c.get("/a.txt").status, 200, "still serving");
}

#[test]
fn timeout_kills_the_whole_process_group() {
    let (server, outside) = server_with_scripts(Duration::from_millis(800));
    let mut c = server.connect();
    let started = Instant::now();
    let r = c.get("/cgi-bin/slow");
    assert_eq!(r.status, 504);
    assert!(started.elapsed() < Duration::from_secs(10));
    let pid: u32 = std::fs::read_to_string(outside.join("child.pid"))
        .expect("the script wrote its child's pid")
        .trim()
        .parse()
        .expect("pid");
    // The grandchild `sleep 60` is gone too (it may linger a moment as a zombie
    // of its dead parent before init reaps it).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let alive = !state.is_empty() && !state.contains(") Z ");
        if !alive {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} survived the timeout: {state}"
        );
        stoa_testkit::pause(Duration::from_millis(50));
    }
    assert_eq!(c.get("/a.txt").status, 200, "the connection survives");
}
