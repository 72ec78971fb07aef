//! The static-file handler over real sockets: validators, conditional requests,
//! ranges, the `sendfile` path, revalidation of replaced files, traversal attempts,
//! special files, directories and methods.

mod common;

use std::time::{Duration, Instant};

use stoa_testkit::http::{Client, Response, get, request};

use common::{A_TXT, B_TXT, BIG_LEN, C_HTML, DIR_INDEX, SECRET, TestServer, pattern};

fn get_with(c: &mut Client, path: &str, headers: &[(&str, &str)]) -> Response {
    c.roundtrip(&request("GET", path, headers), false)
}

/// After a response that must have had no body, the next one parses correctly.
#[track_caller]
fn still_in_sync(c: &mut Client) {
    let r = c.get("/b.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, B_TXT), "out of sync");
}

#[test]
fn files_carry_validators_and_types() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.get("/a.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.body, A_TXT);
    assert_eq!(r.content_length(), Some(A_TXT.len() as u64));
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    assert_eq!(r.header("Accept-Ranges"), Some("bytes"));
    let etag = r.header("ETag").expect("ETag");
    assert!(
        etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2,
        "{etag}"
    );
    let lm = r.header("Last-Modified").expect("Last-Modified");
    assert!(lm.ends_with(" GMT"), "{lm}");
    assert!(r.header("Date").is_some());
    assert_eq!(r.header_count("Content-Length"), 1);
    let html = c.get("/c.html");
    assert_eq!(html.header("Content-Type"), Some("text/html"));
    let bin = c.get("/big.bin");
    assert_eq!(bin.header("Content-Type"), Some("application/octet-stream"));
    // Different content, different tag.
    assert_ne!(c.get("/b.txt").header("ETag"), Some(etag));
}

#[test]
fn if_none_match_gives_304_without_a_body() {
    let s = TestServer::start();
    let mut c = s.connect();
    let etag = c.get("/a.txt").header("ETag").expect("ETag").to_owned();
    let weak = format!("W/{etag}");
    let list = format!("\"nope\", {etag}, \"other\"");
    for value in [etag.as_str(), list.as_str(), "*", weak.as_str()] {
        let r = get_with(&mut c, "/a.txt", &[("If-None-Match", value)]);
        assert_eq!(r.status, 304, "If-None-Match: {value}");
        assert_eq!(r.header("ETag"), Some(etag.as_str()));
        // Nothing may follow the head: the next response must parse.
        still_in_sync(&mut c);
    }
    let r = get_with(&mut c, "/a.txt", &[("If-None-Match", "\"nope\"")]);
    assert_eq!((r.status, r.body.as_slice()), (200, A_TXT));
    // HEAD too.
    let r = c.roundtrip(
        &request("HEAD", "/a.txt", &[("If-None-Match", &etag)]),
        true,
    );
    assert_eq!(r.status, 304);
    still_in_sync(&mut c);
}

#[test]
fn if_modified_since() {
    let s = TestServer::start();
    let mut c = s.connect();
    let lm = c
        .get("/a.txt")
        .header("Last-Modified")
        .expect("LM")
        .to_owned();
    let past = "Sun, 06 Nov 1994 08:49:37 GMT";
    let future = "Fri, 01 Jan 2100 00:00:00 GMT";
    let r = get_with(&mut c, "/a.txt", &[("If-Modified-Since", past)]);
    assert_eq!((r.status, r.body.as_slice()), (200, A_TXT));
    for when in [lm.as_str(), future] {
        let r = get_with(&mut c, "/a.txt", &[("If-Modified-Since", when)]);
        assert_eq!(r.status, 304, "If-Modified-Since: {when}");
        assert!(r.body.is_empty());
        still_in_sync(&mut c);
    }
    // An invalid date is ignored.
    let r = get_with(&mut c, "/a.txt", &[("If-Modified-Since", "yesterday")]);
    assert_eq!(r.status, 200);
    // If-None-Match takes precedence: a mismatching tag means 200 even if unmodified.
    let r = get_with(
        &mut c,
        "/a.txt",
        &[("If-None-Match", "\"nope\""), ("If-Modified-Since", &lm)],
    );
    assert_eq!(r.status, 200);
}

#[test]
fn single_ranges() {
    let s = TestServer::start();
    let mut c = s.connect();
    let len = B_TXT.len();
    let r = get_with(&mut c, "/b.txt", &[("Range", "bytes=0-0")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &B_TXT[..1]);
    assert_eq!(
        r.header("Content-Range"),
        Some(format!("bytes 0-0/{len}").as_str())
    );
    assert_eq!(r.content_length(), Some(1));

    let r = get_with(&mut c, "/b.txt", &[("Range", "bytes=-5")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &B_TXT[len - 5..]);
    assert_eq!(
        r.header("Content-Range"),
        Some(format!("bytes {}-{}/{len}", len - 5, len - 1).as_str())
    );

    let r = get_with(&mut c, "/b.txt", &[("Range", "bytes=5-")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &B_TXT[5..]);

    let r = get_with(&mut c, "/b.txt", &[("Range", "bytes=3-1000")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &B_TXT[3..]);
}

#[test]
fn multiple_ranges_get_the_whole_file() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = get_with(&mut c, "/b.txt", &[("Range", "bytes=0-1,3-4")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.body, B_TXT);
    assert!(r.header("Content-Range").is_none());
}

#[test]
fn unsatisfiable_range_is_416_with_the_length() {
    let s = TestServer::start();
    let mut c = s.connect();
    let len = B_TXT.len();
    for range in [
        format!("bytes={len}-"),
        format!("bytes={}-{}", len + 5, len + 9),
    ] {
        let r = get_with(&mut c, "/b.txt", &[("Range", &range)]);
        assert_eq!(r.status, 416, "{range}");
        assert_eq!(
            r.header("Content-Range"),
            Some(format!("bytes */{len}").as_str())
        );
        assert!(!r.closes());
        still_in_sync(&mut c);
    }
}

#[test]
fn if_range_decides_between_part_and_whole() {
    let s = TestServer::start();
    let mut c = s.connect();
    let first = c.get("/b.txt");
    let etag = first.header("ETag").expect("ETag").to_owned();
    let lm = first.header("Last-Modified").expect("LM").to_owned();
    let r = get_with(
        &mut c,
        "/b.txt",
        &[("Range", "bytes=0-4"), ("If-Range", &etag)],
    );
    assert_eq!(r.status, 206);
    assert_eq!(r.body, &B_TXT[..5]);
    let r = get_with(
        &mut c,
        "/b.txt",
        &[("Range", "bytes=0-4"), ("If-Range", "\"stale\"")],
    );
    assert_eq!((r.status, r.body.as_slice()), (200, B_TXT));
    // A weak tag never validates a range.
    let weak = format!("W/{etag}");
    let r = get_with(
        &mut c,
        "/b.txt",
        &[("Range", "bytes=0-4"), ("If-Range", &weak)],
    );
    assert_eq!(r.status, 200);
    // The Last-Modified date validates too.
    let r = get_with(
        &mut c,
        "/b.txt",
        &[("Range", "bytes=0-4"), ("If-Range", &lm)],
    );
    assert_eq!(r.status, 206);
    let r = get_with(
        &mut c,
        "/b.txt",
        &[
            ("Range", "bytes=0-4"),
            ("If-Range", "Sun, 06 Nov 1994 08:49:37 GMT"),
        ],
    );
    assert_eq!(r.status, 200);
}

#[test]
fn large_file_is_served_byte_exact_with_sendfile() {
    let s = TestServer::start();
    let mut c = s.connect();
    let want = pattern(BIG_LEN);
    let r = c.get("/big.bin");
    assert_eq!(r.status, 200);
    assert_eq!(r.content_length(), Some(BIG_LEN as u64));
    assert!(r.body == want, "big.bin differs");
    // A range from its middle, crossing page boundaries.
    let r = get_with(&mut c, "/big.bin", &[("Range", "bytes=100001-200000")]);
    assert_eq!(r.status, 206);
    assert_eq!(
        r.header("Content-Range"),
        Some(format!("bytes 100001-200000/{BIG_LEN}").as_str())
    );
    assert!(r.body == want[100_001..=200_000], "range differs");
    let r = get_with(&mut c, "/big.bin", &[("Range", "bytes=-7")]);
    assert!(r.body == want[BIG_LEN - 7..]);
    // HEAD of it: no body, the connection stays in sync.
    let r = c.roundtrip(&request("HEAD", "/big.bin", &[]), true);
    assert_eq!(r.content_length(), Some(BIG_LEN as u64));
    still_in_sync(&mut c);
    // Twice in a pipeline, with a small file between.
    c.send(&[get("/big.bin"), get("/a.txt"), get("/big.bin")].concat());
    assert!(c.response().body == want);
    assert_eq!(c.response().body, A_TXT);
    assert!(c.response().body == want);
}

#[test]
fn empty_file_is_200_with_length_0() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.get("/empty.txt");
    assert_eq!(r.status, 200);
    assert_eq!(r.content_length(), Some(0));
    assert!(r.body.is_empty());
    still_in_sync(&mut c);
    let r = get_with(&mut c, "/empty.txt", &[("Range", "bytes=0-0")]);
    assert_eq!(r.status, 416);
    assert_eq!(r.header("Content-Range"), Some("bytes */0"));
    still_in_sync(&mut c);
}

#[test]
fn replaced_file_is_served_fresh_after_revalidation() {
    let s = TestServer::with(|c| c.cache.revalidate = Duration::ZERO);
    let root = s.root();
    let mut c = s.connect();
    let old = c.get("/a.txt");
    assert_eq!(old.body, A_TXT);
    let old_big = c.get("/big.bin");
    assert_eq!(old_big.body.len(), BIG_LEN);
    // Atomic replacement: write a new file, rename it over the old one.
    std::fs::write(root.join(".a.new"), b"replaced!\n").expect("write");
    std::fs::rename(root.join(".a.new"), root.join("a.txt")).expect("rename");
    let big = pattern(BIG_LEN + 4096)
        .into_iter()
        .map(|b| b ^ 0x5a)
        .collect::<Vec<_>>();
    std::fs::write(root.join(".big.new"), &big).expect("write");
    std::fs::rename(root.join(".big.new"), root.join("big.bin")).expect("rename");
    let new = c.get("/a.txt");
    assert_eq!(new.body, b"replaced!\n");
    assert_ne!(new.header("ETag"), old.header("ETag"));
    let new_big = c.get("/big.bin");
    assert_eq!(new_big.body.len(), big.len());
    assert!(new_big.body == big, "new big.bin differs");
    // Removed: 404.
    std::fs::remove_file(root.join("a.txt")).expect("remove");
    assert_eq!(c.get("/a.txt").status, 404);
    // And a new file appears at once.
    std::fs::write(root.join("late.txt"), b"late\n").expect("write");
    assert_eq!(c.get("/late.txt").body, b"late\n");
}

/// Requests that try to leave the document root.
const TRAVERSALS: &[&str] = &[
    "/../x",
    "/%2e%2e/x",
    "/.%2e/x",
    "/%2e./x",
    "/%2E%2E/x",
    "/..%2fx",
    "/..%2Fx",
    "/..%5cx",
    "/..\\x",
    "/%252e%252e/x",
    "/%c0%ae%c0%ae/x",
    "/%00",
    "/x%00.html",
    "/%2e%2e/x%00.html",
    "//etc/passwd",
    "/../../../../../../../../../../etc/passwd",
    "/a/../../../../../../../../../../../x",
    "/../../../../../../../../../../secret.txt",
    "/cgi-bin/.%2e/.%2e/etc/passwd",
    "/cgi-bin/.%2e/.%2e/.%2e/.%2e/etc/passwd",
    "/cgi-bin/%%32%65%%32%65/%%32%65%%32%65/etc/passwd",
    "/%%32%65%%32%65/x",
    "/dir/../../x",
    "/dir/%2e%2e/%2e%2e/x",
    "/escape",
    "/escape-abs",
    "/escape-dir/x",
    "/%2e%2e%2f%2e%2e%2fx",
    "http://test/../x",
];

#[test]
fn traversal_attempts_never_reach_outside_the_root() {
    let fixture = common::Fixture::new();
    let root = fixture.root();
    std::os::unix::fs::symlink("../x", root.join("escape")).expect("symlink");
    std::os::unix::fs::symlink(fixture.outside().join("x"), root.join("escape-abs"))
        .expect("symlink");
    std::os::unix::fs::symlink("..", root.join("escape-dir")).expect("symlink");
    let config = fixture.config();
    let s = fixture.start(config);
    let mut c = s.connect();
    for target in TRAVERSALS {
        let req = format!("GET {target} HTTP/1.1\r\nHost: test\r\n\r\n");
        c.send(req.as_bytes());
        let r = match c.try_read_response(false) {
            Ok(Some(r)) => r,
            other => panic!("{target}: {other:?}"),
        };
        let body = r.body_str();
        assert!(!body.contains(SECRET), "{target} leaked the secret");
        assert!(!body.contains("root:"), "{target} leaked /etc/passwd");
        assert!(
            [400, 403, 404].contains(&r.status),
            "{target}: status {}",
            r.status
        );
        if r.closes() {
            c = s.connect();
        }
    }
}

#[test]
fn harmless_dot_segments_are_normalised() {
    let s = TestServer::start();
    let mut c = s.connect();
    for target in [
        "/./././a.txt",
        "/dir/../a.txt",
        "//a.txt",
        "/%61.txt",
        "/a%2etxt",
    ] {
        let r = c.get(target);
        assert_eq!((r.status, r.body.as_slice()), (200, A_TXT), "{target}");
    }
    // A symlink that stays inside the root is fine.
    std::os::unix::fs::symlink("a.txt", s.root().join("inside")).expect("symlink");
    assert_eq!(c.get("/inside").body, A_TXT);
}

#[test]
fn fifo_is_refused_at_once_and_does_not_block_the_worker() {
    let fixture = common::Fixture::new();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        fixture.root().join("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o644),
        0,
    )
    .expect("mkfifo");
    let mut config = fixture.config();
    // One worker: if opening the FIFO blocked it, nothing else would be served.
    config.workers = 1;
    let s = fixture.start(config);
    let mut c = s.connect();
    c.set_read_timeout(Duration::from_secs(3));
    let start = Instant::now();
    c.send(&[get("/fifo"), get("/a.txt")].concat());
    let r = c.response();
    assert_eq!(r.status, 403);
    assert_eq!(c.response().body, A_TXT);
    let mut other = s.connect();
    other.set_read_timeout(Duration::from_secs(3));
    assert_eq!(other.get("/b.txt").body, B_TXT);
    assert!(start.elapsed() < Duration::from_secs(2));
}

#[test]
fn directories_redirect_serve_their_index_or_are_forbidden() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.get("/dir");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("Location"), Some("/dir/"));
    let r = c.get("/dir?x=1&y=%20");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("Location"), Some("/dir/?x=1&y=%20"));
    let r = c.get("/dir/");
    assert_eq!((r.status, r.body.as_slice()), (200, DIR_INDEX));
    let r = c.get("/dir/index.html");
    assert_eq!(r.body, DIR_INDEX);
    let r = c.get("/noindex/");
    assert_eq!(r.status, 403);
    assert_eq!(c.get("/noindex/file.txt").body, b"in noindex\n");
    // The root has no index.html.
    assert_eq!(c.get("/").status, 403);
    assert_eq!(c.get("/missing/").status, 404);
    assert_eq!(c.get("/a.txt/").status, 404);
    // A name that needs escaping in Location.
    std::fs::create_dir(s.root().join("my dir")).expect("mkdir");
    let r = c.get("/my%20dir");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("Location"), Some("/my%20dir/"));
}

#[test]
fn directory_index_is_served_as_html() {
    let s = TestServer::start();
    let mut c = s.connect();
    let direct = c.get("/dir/index.html");
    assert_eq!(direct.header("Content-Type"), Some("text/html"));
    let r = c.get("/dir/");
    assert_eq!((r.status, r.body.as_slice()), (200, DIR_INDEX));
    // The type comes from the file served (index.html), not from the request path
    // (which has no extension).
    assert_eq!(
        r.header("Content-Type"),
        Some("text/html"),
        "GET /dir/ serving dir/index.html"
    );
}

#[test]
fn other_methods_get_405_with_allow() {
    let s = TestServer::start();
    let mut c = s.connect();
    for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "BREW"] {
        let r = c.roundtrip(&request(method, "/a.txt", &[]), false);
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(r.header("Allow"), Some("GET, HEAD"), "{method}");
        assert!(!r.closes(), "{method}");
    }
    // With a small body, discarded; the connection stays in sync.
    c.send(b"POST /a.txt HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello=world");
    assert_eq!(c.response().status, 405);
    still_in_sync(&mut c);
    assert_eq!(c.get("/c.html").body, C_HTML);
}

#[test]
fn missing_files_are_404_and_keep_the_connection() {
    let s = TestServer::start();
    let mut c = s.connect();
    let r = c.get("/nothing-here.txt");
    assert_eq!(r.status, 404);
    assert!(!r.closes());
    still_in_sync(&mut c);
    let r = c.roundtrip(&request("HEAD", "/nothing-here.txt", &[]), true);
    assert_eq!(r.status, 404);
    still_in_sync(&mut c);
}
