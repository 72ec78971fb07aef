//! The SPECweb99 dynamic API of `stoa serve` (`web99.md` §6, §7) against a file set
//! written by `stoa fileset`: golden answers for every request type, the ad search
//! and tag rewrite, the POST log (order, concurrency, durability across SIGKILL),
//! Reset and Fetch, the manager's validation sequence, and every kind of malformed
//! input (400/404/411/413 with a reason, never a 500, never a hang).
//!
//! Expected values are computed from the spec's formats written out here and from
//! `stoa-web99` (file bytes, ad tables, the ad search), never by asking the server.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustix::process::Signal;
use stoa_testkit::http::{Client, Response};
use stoa_testkit::{Process, Tmpfs, wait_until};
use stoa_web99::ads::{self, Ad, ResetParams};
use stoa_web99::fileset::{self, FileId};
use stoa_web99::postlog::{self, Record};

use common::{
    EXIT_TIMEOUT, IO_TIMEOUT, READY_TIMEOUT, Server, ServerBuilder, curl, fetch, find, raw_conn,
    raw_request, run_stoa,
};

// ---------------------------------------------------------------------------
// The spec's formats, written out independently of the server's code
// ---------------------------------------------------------------------------

/// §6.2: the 23 bytes after the file.
const TRAILER: &[u8] = b"\n</pre>\n</body></html>\n";
/// §2.4: the custom-ad tag as stored in the file set.
const CAD_TAG: &str = "<!WEB99CAD><IMG SRC=\"/file_set/dirNNNNN/classX_Y\"><!/WEB99CAD>";
/// §2.1: directories of `stoa fileset --connections 1`.
const DIRS: u32 = 25;
/// `stoa fileset`'s default seed.
const SEED: u64 = 1999;
/// The entry point.
const SCRIPT: &str = "/web99";
/// `cadgen99` dates expired ads 366 days back (§6.4).
const YEAR_366: i64 = 31_622_400;
/// The manager's validation POST body (§7.2), in its field order.
const MANAGER_FORM: &str = "class=1&client=2&dir=00004&num=3&urlroot=/file_set/";

/// §6.2: the wrapper before the file, with the free-text software name.
fn expected_wrapper(software: &str, query: &str) -> String {
    format!(
        "<html>\n<head><title>SPECweb99 Dynamic GET & POST Test</title></head>\n<body>\n\
         <p>SERVER_SOFTWARE = {software}\n<p>REMOTE_ADDR = 127.0.0.1\n\
         <p>SCRIPT_NAME = {SCRIPT}\n<p>QUERY_STRING = {query}\n<pre>\n"
    )
}

/// §6.3: the tag as rewritten for `ad`.
fn tag_for(ad: u32) -> String {
    format!(
        "<!WEB99CAD><IMG SRC=\"/file_set/dir{:05}/class{}_{}\"><!/WEB99CAD>",
        ad / 36,
        (ad % 36) / 9,
        ad % 9
    )
}

/// Whether `ad` lies in one of the two 24-ad expired ranges of a Reset (§6.4, §7.1).
fn in_expired_ranges(ad: u32, exp: [u32; 2]) -> bool {
    exp.iter().any(|&e| (ad + 360 - e) % 360 < 24)
}

fn file_id(dir: u32, class: u8, num: u8) -> FileId {
    FileId { dir, class, num }
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .expect("clock after 1970")
}

fn lossy(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(400)];
    String::from_utf8_lossy(cut).into_owned()
}

// ---------------------------------------------------------------------------
// Fixture: a file set, a state directory, a server
// ---------------------------------------------------------------------------

/// A temporary directory with `docroot/` (a 25-directory file set written by
/// `stoa fileset`) and `state/` beside it.
struct Web99Site {
    dir: tempfile::TempDir,
    docroot: PathBuf,
    state: PathBuf,
}

impl Web99Site {
    fn new() -> Web99Site {
        let dir = tempfile::tempdir().expect("create a temporary directory");
        let docroot = dir.path().join("docroot");
        let state = dir.path().join("state");
        let root = docroot.to_str().expect("UTF-8 path");
        let (status, stderr) = run_stoa(
            &["fileset", "--connections", "1", "--dir", root],
            Duration::from_secs(60),
        );
        assert!(status.success(), "stoa fileset failed: {stderr}");
        Web99Site {
            dir,
            docroot,
            state,
        }
    }

    /// `stoa serve --docroot docroot --web99-state state --workers 2`.
    fn start(&self) -> Server {
        ServerBuilder::new(&self.docroot)
            .args(["--web99-state".as_ref(), self.state.as_os_str()])
            .start()
    }

    /// The bytes of `id` on disk, checked against the generator.
    fn file(&self, id: FileId) -> Vec<u8> {
        let path = self
            .docroot
            .join("file_set")
            .join(id.dir_name())
            .join(id.file_name());
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let mut generated = Vec::new();
        fileset::generate(id, SEED, &mut generated);
        assert!(data == generated, "{} differs from the generator", id);
        assert_eq!(data.len() as u64, id.size());
        data
    }

    /// Writes a file set's file beneath the prefix `specweb99/` (a DYNAMIC_ROOT
    /// with `?prefix`, §6.1), with other random bytes than the main set; returns
    /// the bytes of `specweb99/file_set/dir00000/class1_2`.
    fn write_prefixed(&self) -> Vec<u8> {
        let mut data = Vec::new();
        fileset::generate(file_id(0, 1, 2), 7, &mut data);
        let path = self.docroot.join("specweb99/file_set/dir00000/class1_2");
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, &data).expect("write prefixed file");
        data
    }

    fn post_log_path(&self) -> PathBuf {
        self.state.join("post.log")
    }
}

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

fn get_request(query: &str, cookie: Option<&str>) -> Vec<u8> {
    let mut r = format!("GET {SCRIPT}?{query} HTTP/1.1\r\nHost: sut\r\n");
    if let Some(c) = cookie {
        r.push_str(&format!("Cookie: {c}\r\n"));
    }
    r.push_str("\r\n");
    r.into_bytes()
}

fn head_request(query: &str, cookie: Option<&str>) -> Vec<u8> {
    let get = get_request(query, cookie);
    [b"HEAD".as_slice(), &get[3..]].concat()
}

fn post_request(target: &str, cookie: Option<&str>, body: &str) -> Vec<u8> {
    let mut r = format!(
        "POST {target} HTTP/1.1\r\nHost: sut\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(c) = cookie {
        r.push_str(&format!("Cookie: {c}\r\n"));
    }
    r.push_str("\r\n");
    r.push_str(body);
    r.into_bytes()
}

fn my_cookie(user_id: u32, last_ad: u32) -> String {
    format!("my_cookie=user_id={user_id}&last_ad={last_ad}")
}

fn form(urlroot: &str, id: FileId, client: u32) -> String {
    format!(
        "urlroot={urlroot}&dir={:05}&class={}&num={}&client={client}",
        id.dir, id.class, id.num
    )
}

fn query_for(id: FileId) -> String {
    format!("/{id}")
}

fn exchange(conn: &mut Client, request: &[u8]) -> Response {
    conn.send(request);
    conn.read_response(request.starts_with(b"HEAD "))
}

fn set_cookies(r: &Response) -> Vec<&str> {
    r.headers
        .iter()
        .filter(|(n, _)| n.eq_ignore_ascii_case("Set-Cookie"))
        .map(|(_, v)| v.as_str())
        .collect()
}

/// Checks a 200 dynamic answer against §6.2 (status, type, length, the wrapper
/// byte for byte, the 23-byte trailer) and returns what lies between wrapper
/// and trailer. `query`: the expected QUERY_STRING value, if it matters.
fn page_contents<'a>(r: &'a Response, query: Option<&str>) -> &'a [u8] {
    assert_eq!(r.status, 200, "body: {:?}", lossy(&r.body));
    let ctype = r.header("Content-Type").unwrap_or_default();
    assert!(ctype.starts_with("text/html"), "Content-Type {ctype:?}");
    let length: usize = r
        .header("Content-Length")
        .expect("Content-Length")
        .parse()
        .expect("numeric Content-Length");
    assert_eq!(length, r.body.len());
    let end = find(&r.body, b"\n<pre>\n").expect("the wrapper ends with a <pre> line") + 7;
    let head = std::str::from_utf8(&r.body[..end]).expect("ASCII wrapper");
    let software = head
        .lines()
        .find_map(|l| l.strip_prefix("<p>SERVER_SOFTWARE = "))
        .expect("a SERVER_SOFTWARE line");
    let got_query = head
        .lines()
        .find_map(|l| l.strip_prefix("<p>QUERY_STRING = "))
        .expect("a QUERY_STRING line");
    if let Some(q) = query {
        assert_eq!(got_query, q, "QUERY_STRING");
    }
    assert_eq!(head, expected_wrapper(software, got_query), "wrapper");
    assert!(
        r.body.len() >= end + TRAILER.len() && r.body.ends_with(TRAILER),
        "no 23-byte trailer: {:?}",
        lossy(&r.body[r.body.len().saturating_sub(40)..])
    );
    &r.body[end..r.body.len() - TRAILER.len()]
}

/// Checks a refusal: `status`, `text/plain`, one line `"<status> <reason>: <why>"`.
fn assert_refused(r: &Response, status: u16, what: &str) {
    assert_eq!(
        r.status,
        status,
        "{what}: expected {status}, got {} with {:?}",
        r.status,
        lossy(&r.body)
    );
    let ctype = r.header("Content-Type").unwrap_or_default();
    assert!(
        ctype.starts_with("text/plain"),
        "{what}: Content-Type {ctype:?}"
    );
    let text = std::str::from_utf8(&r.body).expect("ASCII reason");
    let line = text
        .strip_suffix('\n')
        .unwrap_or_else(|| panic!("{what}: reason {text:?} is not one line"));
    assert!(
        !line.contains('\n'),
        "{what}: reason {text:?} is not one line"
    );
    let (code, why) = line
        .split_once(": ")
        .unwrap_or_else(|| panic!("{what}: reason {line:?} does not say why"));
    assert!(code.starts_with(&status.to_string()), "{what}: {line:?}");
    assert!(!why.trim().is_empty(), "{what}: empty reason");
}

/// Parses `found_cookie=Ad_id=N&Ad_weight=W&Expired=E` (§6.3 step 4; the client
/// reads it with `Ad_id=%d&Ad_weight=%2d&Expired=%1d`).
fn found_cookie(r: &Response) -> (u32, u32, bool) {
    let cookies = set_cookies(r);
    assert_eq!(cookies.len(), 1, "one Set-Cookie: {:?}", r.headers);
    let value = cookies[0];
    let rest = value
        .strip_prefix("found_cookie=Ad_id=")
        .unwrap_or_else(|| panic!("bad found_cookie {value:?}"));
    let (ad, rest) = rest.split_once("&Ad_weight=").expect("Ad_weight");
    let (weight, expired) = rest.split_once("&Expired=").expect("Expired");
    let number = |s: &str| -> u32 {
        assert!(
            !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()),
            "bad number {s:?} in {value:?}"
        );
        s.parse().expect("number")
    };
    let expired = match expired {
        "0" => false,
        "1" => true,
        other => panic!("Expired={other:?} in {value:?}"),
    };
    (number(ad), number(weight), expired)
}

// ---------------------------------------------------------------------------
// Commands and the tables
// ---------------------------------------------------------------------------

fn reset_query(p: &ResetParams, addr: SocketAddr) -> String {
    format!(
        "command/Reset&maxload={}&pttime={}&maxthread={}&exp={},{}&urlroot=http://{addr}/",
        p.maxload, p.pttime, p.maxthread, p.expired[0], p.expired[1]
    )
}

/// Sends a Reset and returns the Unix-time window it ran in.
fn reset(addr: SocketAddr, p: &ResetParams) -> (i64, i64) {
    let before = unix_now();
    let r = raw_request(addr, &get_request(&reset_query(p, addr), None));
    assert_eq!(r.status, 200, "Reset: {:?}", lossy(&r.body));
    (before, unix_now())
}

/// The post log as Fetch returns it (between the wrapper and the trailer).
fn fetch_log(addr: SocketAddr) -> String {
    let r = raw_request(addr, &get_request("command/Fetch", None));
    let log = page_contents(&r, Some("command/Fetch"));
    String::from_utf8(log.to_vec()).expect("ASCII post log")
}

fn fetch_records(addr: SocketAddr) -> Vec<Record> {
    let log = fetch_log(addr);
    postlog::parse(&log).unwrap_or_else(|e| panic!("fetched post log is invalid: {e}\n{log}"))
}

/// The tables of the last Reset, read from the state directory.
struct Tables {
    users: Vec<u32>,
    ads: Vec<Ad>,
}

/// Checks `User.Personality` and `Custom.Ads` in `state` against upfgen99 and
/// cadgen99 for `p`, run at some time within `window`; returns the tables.
fn check_tables(state: &Path, p: &ResetParams, window: (i64, i64)) -> Tables {
    let users_text = std::fs::read_to_string(state.join("User.Personality")).expect("read users");
    let users_wanted = p.maxload.max(p.maxthread) as usize;
    assert_eq!(users_text.lines().count(), users_wanted, "user records");
    assert!(users_text.lines().all(|l| l.len() == 14), "15-byte records");
    assert!(
        users_text == ads::user_personality(p),
        "User.Personality is not upfgen99's for {p:?}"
    );
    let ads_text = std::fs::read_to_string(state.join("Custom.Ads")).expect("read ads");
    assert_eq!(ads_text.lines().count(), 360, "ad records");
    assert!(ads_text.lines().all(|l| l.len() == 38), "39-byte records");
    let ads_read = ads::parse_ads(&ads_text).expect("Custom.Ads parses");
    let pttime = i64::from(if p.pttime == 0 { 1800 } else { p.pttime });
    let fresh = (0..360u32)
        .find(|&j| !in_expired_ranges(j, p.expired))
        .expect("an ad outside the expired ranges");
    let now = ads_read[fresh as usize].expiration - 2 * pttime;
    assert!(
        window.0 <= now && now <= window.1,
        "Reset's time {now} is outside {window:?}"
    );
    for (j, ad) in ads_read.iter().enumerate() {
        let expected = if in_expired_ranges(j as u32, p.expired) {
            now + 2 * pttime - YEAR_366
        } else {
            now + 2 * pttime
        };
        assert_eq!(ad.expiration, expected, "expiration of ad {j}");
    }
    assert!(
        ads_text == ads::custom_ads(&ads::generate_ads(p, now)),
        "Custom.Ads is not cadgen99's for {p:?} at {now}"
    );
    if p.maxthread % 24 != 54 % 24 {
        // The one published cadgen99 record (§6.4).
        let line = ads_text.lines().nth(54).expect("ad 54");
        assert!(line.starts_with("   54 24808100    97F61  75 "), "{line:?}");
    }
    Tables {
        users: ads::parse_users(&users_text).expect("User.Personality parses"),
        ads: ads_read,
    }
}

// ---------------------------------------------------------------------------
// A client that reports errors instead of panicking (for the crash test)
// ---------------------------------------------------------------------------

/// Sends `request` and reads one response's status, consuming its body.
fn try_exchange(stream: &mut TcpStream, buf: &mut Vec<u8>, request: &[u8]) -> io::Result<u16> {
    stream.write_all(request)?;
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i + 4;
        }
        match stream.read(&mut chunk)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::other(format!("bad status line in {head:?}")))?;
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case("Content-Length")
                .then(|| v.trim().parse().ok())?
        })
        .ok_or_else(|| io::Error::other("no Content-Length"))?;
    while buf.len() < head_end + length {
        match stream.read(&mut chunk)? {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
    buf.drain(..head_end + length);
    Ok(status)
}

// ---------------------------------------------------------------------------
// Standard dynamic GET and HEAD (§6.2)
// ---------------------------------------------------------------------------

#[test]
fn dynamic_get_wraps_each_file_byte_for_byte() {
    let site = Web99Site::new();
    let server = site.start();
    let mut conn = raw_conn(server.addr);
    // Class 1 (from memory), class 3 (> 32 KiB: sendfile), the smallest and a
    // large class 2 file, first and last directory.
    for id in [
        file_id(4, 1, 3),
        file_id(24, 3, 8),
        file_id(0, 0, 0),
        file_id(12, 2, 8),
        file_id(7, 3, 0),
    ] {
        let query = query_for(id);
        let r = exchange(&mut conn, &get_request(&query, None));
        let contents = page_contents(&r, Some(&query));
        let file = site.file(id);
        assert_eq!(contents.len(), file.len(), "{id}: file length");
        assert!(contents == file, "{id}: the file is not sent byte for byte");
        assert!(
            set_cookies(&r).is_empty(),
            "{id}: Set-Cookie without a cookie"
        );
        // Without a cookie the tags keep their placeholders.
        let tags = contents
            .windows(CAD_TAG.len())
            .filter(|w| *w == CAD_TAG.as_bytes())
            .count();
        assert_eq!(tags, id.tags(), "{id}: untouched tags");
    }

    // The query without its leading slash, and HTTP/1.0 without keep-alive.
    let id = file_id(3, 1, 0);
    let r = raw_request(
        server.addr,
        format!("GET {SCRIPT}?{id} HTTP/1.0\r\n\r\n").as_bytes(),
    );
    assert!(page_contents(&r, Some(&id.to_string())) == site.file(id));
    assert_eq!(
        r.header("Connection"),
        Some("close"),
        "HTTP/1.0 is not kept alive"
    );

    // A cookie that is not my_cookie makes no CAD GET.
    let r = exchange(
        &mut conn,
        &get_request(&query_for(id), Some("session=abc; theme=dark")),
    );
    assert!(page_contents(&r, None) == site.file(id));
    assert!(set_cookies(&r).is_empty());

    // A DYNAMIC_ROOT prefix before file_set (§6.1, §4.4): the file beneath it,
    // whether the client's query starts with `/` or not.
    let data = site.write_prefixed();
    for query in [
        "/specweb99/file_set/dir00000/class1_2",
        "specweb99/file_set/dir00000/class1_2",
    ] {
        let r = exchange(&mut conn, &get_request(query, None));
        assert!(page_contents(&r, Some(query)) == data.as_slice(), "{query}");
    }
}

#[test]
fn head_has_the_get_length_and_no_body() {
    let site = Web99Site::new();
    let server = site.start();
    let mut conn = raw_conn(server.addr);
    let cookie = my_cookie(10_001, 20);
    for (id, cookie) in [
        (file_id(4, 1, 3), None),
        (file_id(24, 3, 8), None),
        (file_id(5, 2, 4), Some(cookie.as_str())),
    ] {
        let query = query_for(id);
        let get = exchange(&mut conn, &get_request(&query, cookie));
        assert_eq!(get.status, 200);
        // HEAD then GET pipelined: a body leaked by HEAD would break the GET.
        let mut both = head_request(&query, cookie);
        both.extend_from_slice(&get_request(&query, cookie));
        conn.send(&both);
        let head = conn.read_response(true);
        assert_eq!(head.status, 200, "HEAD {id}");
        assert_eq!(
            head.header("Content-Length"),
            get.header("Content-Length"),
            "HEAD {id}"
        );
        assert_eq!(head.header("Content-Type"), get.header("Content-Type"));
        assert_eq!(set_cookies(&head), set_cookies(&get), "HEAD {id} cookies");
        let again = conn.read_response(false);
        assert!(again.body == get.body, "GET after HEAD {id}");
    }
}

// ---------------------------------------------------------------------------
// Custom ad rotation (§6.3, §6.4, §7.1)
// ---------------------------------------------------------------------------

/// One CAD GET of `id` checked in full: the cookie against the ad search over the
/// server's tables, the Expired flag against the Reset's ranges, and the body
/// against the file with its tags rewritten. Returns (ad, expired).
fn check_cad(
    conn: &mut Client,
    site: &Web99Site,
    tables: &Tables,
    exp: [u32; 2],
    (user_id, last_ad): (u32, u32),
    id: FileId,
    cookie_header: &str,
) -> (u32, bool) {
    let query = query_for(id);
    let r = exchange(conn, &get_request(&query, Some(cookie_header)));
    let what = format!("CAD {id} user {user_id} last_ad {last_ad}");
    let contents = page_contents(&r, Some(&query));
    let (ad, weight, expired) = found_cookie(&r);
    assert!(ad < 360, "{what}: Ad_id {ad}");
    assert!(weight <= 75, "{what}: Ad_weight {weight}");
    assert_eq!(
        expired,
        in_expired_ranges(ad, exp),
        "{what}: Expired={} for ad {ad} with exp={exp:?}",
        u8::from(expired)
    );
    let user = tables.users[(user_id - 10_000) as usize];
    let found = ads::find_ad(user, last_ad, &tables.ads, unix_now()).expect("an ad matches");
    assert_eq!(
        (ad, weight, expired),
        (found.ad, found.weight, found.expired),
        "{what}: not the ad the tables choose"
    );
    let file = String::from_utf8(site.file(id)).expect("ASCII file");
    assert_eq!(
        file.matches(CAD_TAG).count(),
        id.tags(),
        "{id} tags on disk"
    );
    let expected = file.replace(CAD_TAG, &tag_for(ad));
    assert_eq!(contents.len(), file.len(), "{what}: length changed");
    assert!(
        contents == expected.as_bytes(),
        "{what}: body is not the file with its tags rewritten for ad {ad}"
    );
    (ad, expired)
}

#[test]
fn cad_get_returns_the_ad_the_tables_choose() {
    let site = Web99Site::new();
    let server = site.start();
    let mut conn = raw_conn(server.addr);

    let p = ResetParams {
        maxload: 100,
        pttime: 100,
        maxthread: 100,
        expired: [1, 100],
    };
    let window = reset(server.addr, &p);
    let tables = check_tables(&site.state, &p, window);
    let mut seen = BTreeSet::new();
    // Every last_ad, users spread over the table, class 1 files (one tag).
    for last_ad in 0..360 {
        let user_id = 10_000 + (last_ad * 7) % 100;
        let id = file_id(last_ad % DIRS, 1, (last_ad % 9) as u8);
        let cookie = my_cookie(user_id, last_ad);
        seen.insert(check_cad(
            &mut conn,
            &site,
            &tables,
            p.expired,
            (user_id, last_ad),
            id,
            &cookie,
        ));
    }
    assert!(
        seen.iter().any(|&(_, e)| e) && seen.iter().any(|&(_, e)| !e),
        "the sweep should meet expired and live ads: {seen:?}"
    );
    // Class 2 (two tags; class2_8 is read from disk), class 0 and 3 untouched,
    // my_cookie among other cookies.
    for (i, id) in [
        file_id(9, 2, 0),
        file_id(10, 2, 8),
        file_id(11, 0, 8),
        file_id(12, 3, 2),
    ]
    .into_iter()
    .enumerate()
    {
        let (user_id, last_ad) = (10_050 + i as u32, 300 + i as u32);
        let cookie = format!("lang=en; {}; theme=x", my_cookie(user_id, last_ad));
        check_cad(
            &mut conn,
            &site,
            &tables,
            p.expired,
            (user_id, last_ad),
            id,
            &cookie,
        );
    }

    // A new Reset (other universal ads, expired ranges wrapping past 359) is
    // seen by the next CAD GET.
    let p2 = ResetParams {
        maxload: 30,
        pttime: 0,
        maxthread: 40,
        expired: [350, 10],
    };
    let window = reset(server.addr, &p2);
    let tables2 = check_tables(&site.state, &p2, window);
    let mut expired_seen = BTreeSet::new();
    for last_ad in 0..360 {
        let user_id = 10_000 + last_ad % 40;
        let cookie = my_cookie(user_id, last_ad);
        let (ad, expired) = check_cad(
            &mut conn,
            &site,
            &tables2,
            p2.expired,
            (user_id, last_ad),
            file_id(1, 0, 0),
            &cookie,
        );
        if expired {
            expired_seen.insert(ad);
        }
    }
    assert!(
        expired_seen.iter().any(|&a| a >= 350) || expired_seen.iter().any(|&a| a < 34),
        "wrapping expired ranges never met: {expired_seen:?}"
    );
    // Users beyond the new (smaller) table are refused, not answered from the
    // old one.
    let r = exchange(
        &mut conn,
        &get_request(&query_for(file_id(1, 1, 0)), Some(&my_cookie(10_050, 5))),
    );
    assert_refused(&r, 400, "user beyond the table after Reset");
}

// ---------------------------------------------------------------------------
// POST (§6.5) and Fetch
// ---------------------------------------------------------------------------

fn check_record(r: &Record, number: u64, id: FileId, client: u32, cookie: u32, pid: u32) {
    assert_eq!(r.number, number, "{r:?}");
    assert_eq!((r.dir, r.class, r.num), (id.dir, id.class, id.num), "{r:?}");
    assert_eq!(r.client, client, "{r:?}");
    assert_eq!(r.file, format!("/{id}"), "{r:?}");
    assert_eq!(r.cookie, cookie, "{r:?}");
    assert_eq!(r.pid, pid, "{r:?}: the pid fields are the server's");
}

#[test]
fn post_answers_with_the_file_and_logs_one_record() {
    let site = Web99Site::new();
    let server = site.start();
    let p = ResetParams {
        maxload: 10,
        pttime: 100,
        maxthread: 100,
        expired: [1, 100],
    };
    reset(server.addr, &p);
    let id = file_id(4, 1, 3);
    let file = site.file(id);
    let before = unix_now();

    let r = raw_request(
        server.addr,
        &post_request(SCRIPT, Some(&my_cookie(10_001, 20)), MANAGER_FORM),
    );
    assert_eq!(set_cookies(&r), ["my_cookie=10001"], "{:?}", r.headers);
    assert!(page_contents(&r, Some("")) == file, "POST body");

    let log = fetch_log(server.addr);
    assert!(log.starts_with("         1\n"), "{log:?}");
    assert_eq!(log.len(), 11 + 139, "{log:?}");
    let records = postlog::parse(&log).expect("valid log");
    check_record(&records[0], 1, id, 2, 10_001, server.pid());
    assert!(before <= records[0].time && records[0].time <= unix_now());
    assert!(log[11..].starts_with("         1 "), "{log:?}");
    assert!(
        log.contains(&format!(" {:<60} ", "/file_set/dir00004/class1_3")),
        "file name field: {log:?}"
    );

    // The fields in other orders; keep-alive; each the form's file.
    let mut conn = raw_conn(server.addr);
    let orders = [
        "urlroot=/file_set/&dir=00004&class=1&num=3&client=2",
        "num=3&dir=00004&urlroot=/file_set/&client=2&class=1",
        "client=2&num=3&class=1&dir=00004&urlroot=/file_set/",
        "dir=00004&client=2&urlroot=/file_set/&num=3&class=1",
        "class=1&urlroot=/file_set/&client=2&num=3&dir=00004",
    ];
    for (i, body) in orders.iter().enumerate() {
        let user = 10_010 + i as u32;
        let r = exchange(
            &mut conn,
            &post_request(SCRIPT, Some(&my_cookie(user, 7)), body),
        );
        assert_eq!(set_cookies(&r), [format!("my_cookie={user}")], "{body}");
        assert!(page_contents(&r, None) == file, "{body}");
    }
    // The manager's own form of the URL (§6.1): a query naming another file; the
    // answer is the form's file.
    let other = file_id(9, 2, 1);
    let target = format!("{SCRIPT}?{}", query_for(file_id(24, 1, 5)));
    let r = exchange(
        &mut conn,
        &post_request(
            &target,
            Some(&my_cookie(10_099, 0)),
            &form("/file_set/", other, 77),
        ),
    );
    assert_eq!(set_cookies(&r), ["my_cookie=10099"]);
    assert!(page_contents(&r, None) == site.file(other));

    // A class 3 file (> 32 KiB: sendfile) as a POST's answer.
    let big = file_id(20, 3, 8);
    let r = exchange(
        &mut conn,
        &post_request(
            SCRIPT,
            Some(&my_cookie(10_097, 0)),
            &form("/file_set/", big, 3),
        ),
    );
    assert_eq!(set_cookies(&r), ["my_cookie=10097"]);
    assert!(page_contents(&r, None) == site.file(big), "POST of {big}");

    // A urlroot with a prefix (§4.4): the file beneath it, named so in the log.
    let prefixed = site.write_prefixed();
    let r = exchange(
        &mut conn,
        &post_request(
            SCRIPT,
            Some(&my_cookie(10_098, 0)),
            "urlroot=/specweb99/file_set/&dir=00000&class=1&num=2&client=10098",
        ),
    );
    assert_eq!(set_cookies(&r), ["my_cookie=10098"]);
    assert!(page_contents(&r, None) == prefixed.as_slice());

    let records = fetch_records(server.addr);
    assert_eq!(records.len(), 1 + orders.len() + 3);
    for (i, rec) in records[1..=orders.len()].iter().enumerate() {
        check_record(rec, 2 + i as u64, id, 2, 10_010 + i as u32, server.pid());
    }
    check_record(&records[6], 7, other, 77, 10_099, server.pid());
    check_record(&records[7], 8, big, 3, 10_097, server.pid());
    let last = &records[8];
    assert_eq!(last.number, 9);
    assert_eq!(last.file, "/specweb99/file_set/dir00000/class1_2");
    assert_eq!(
        (last.dir, last.class, last.num, last.client),
        (0, 1, 2, 10_098)
    );
}

/// Issue 21, hole 3: a query after `command/Fetch&` or on a POST came back
/// unescaped inside the HTML wrapper.
#[test]
fn reflected_queries_are_html_escaped() {
    let site = Web99Site::new();
    let server = site.start();
    let script = "<script>alert('x')</script>";
    let escaped = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;";
    let r = raw_request(
        server.addr,
        &get_request(&format!("command/Fetch&{script}"), None),
    );
    page_contents(&r, Some(&format!("command/Fetch&amp;{escaped}")));
    let post = post_request(
        &format!("{SCRIPT}?\"{script}"),
        Some(&my_cookie(10_001, 20)),
        MANAGER_FORM,
    );
    let r = raw_request(server.addr, &post);
    let file = page_contents(&r, Some(&format!("&quot;{escaped}")));
    assert!(file == site.file(file_id(4, 1, 3)), "POST body");
    assert!(find(&r.body, b"<script").is_none(), "{:?}", lossy(&r.body));
}

/// A connection to `addr` from source address `from` (any of 127.0.0.0/8).
fn conn_from(addr: SocketAddr, from: std::net::IpAddr) -> Client {
    use rustix::net::{AddressFamily, SocketType};
    let fd = rustix::net::socket(AddressFamily::INET, SocketType::STREAM, None).expect("socket");
    rustix::net::bind(&fd, &SocketAddr::new(from, 0)).expect("bind the source address");
    rustix::net::connect(&fd, &addr).expect("connect");
    Client::from_stream(TcpStream::from(fd)).require_content_length()
}

/// Issue 21, hole 6: anyone who could reach `/web99` could send `command/Reset`
/// (emptying post.log) or `command/Fetch`.
#[test]
fn reset_and_fetch_are_for_manager_networks_only() {
    let site = Web99Site::new();
    let config = site.dir.path().join("stoa.toml");
    std::fs::write(&config, "[web99]\nmanager_networks = [\"127.0.0.2/32\"]\n")
        .expect("write the configuration");
    let server = ServerBuilder::new(&site.docroot)
        .args([
            "--web99-state".as_ref(),
            site.state.as_os_str(),
            "--config".as_ref(),
            config.as_os_str(),
        ])
        .start();
    let (manager, other) = ([127, 0, 0, 2].into(), [127, 0, 0, 1].into());
    let send = |from, request: &[u8]| exchange(&mut conn_from(server.addr, from), request);
    let p = ResetParams {
        maxload: 10,
        pttime: 100,
        maxthread: 10,
        expired: [1, 100],
    };
    let reset = get_request(&reset_query(&p, server.addr), None);
    assert_eq!(send(manager, &reset).status, 200);
    // Anyone may POST; the record is what a stray Reset would destroy.
    let post = post_request(SCRIPT, Some(&my_cookie(10_001, 20)), MANAGER_FORM);
    assert_eq!(send(other, &post).status, 200);
    let fetch = get_request("command/Fetch", None);
    for request in [&reset, &fetch] {
        let r = send(other, request);
        assert_refused(&r, 403, "a command from outside manager_networks");
        assert!(
            find(&r.body, b"manager_networks").is_some(),
            "{:?}",
            lossy(&r.body)
        );
    }
    assert_eq!(
        send(other, &get_request("command/Finish", None)).status,
        200
    );
    let id = file_id(4, 1, 3);
    let r = send(other, &get_request(&query_for(id), None));
    assert!(page_contents(&r, Some(&query_for(id))) == site.file(id));
    // The refused Reset emptied nothing.
    let r = send(manager, &fetch);
    assert_eq!(r.status, 200);
    let (count, records) = manager_parse(&r.body);
    assert_eq!((count, records.len()), (1, 1), "{records:?}");
}

#[test]
fn pipelined_posts_and_fetch_are_answered_in_order() {
    let site = Web99Site::new();
    let server = site.start();
    let ids = [file_id(1, 1, 1), file_id(2, 0, 5), file_id(3, 2, 2)];
    let mut batch = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let cookie = my_cookie(10_000 + i as u32, 1);
        batch.extend(post_request(
            SCRIPT,
            Some(&cookie),
            &form("/file_set/", *id, 5),
        ));
        batch.extend(get_request(&query_for(*id), None));
    }
    batch.extend(get_request("command/Fetch", None));
    let mut conn = raw_conn(server.addr);
    conn.send(&batch);
    for (i, id) in ids.iter().enumerate() {
        let post = conn.read_response(false);
        assert_eq!(set_cookies(&post), [format!("my_cookie={}", 10_000 + i)]);
        assert!(page_contents(&post, None) == site.file(*id), "POST {id}");
        let get = conn.read_response(false);
        assert!(page_contents(&get, None) == site.file(*id), "GET {id}");
    }
    let fetched = conn.read_response(false);
    let log = std::str::from_utf8(page_contents(&fetched, Some("command/Fetch"))).expect("ASCII");
    let records = postlog::parse(log).expect("valid log");
    assert_eq!(
        records.len(),
        3,
        "the Fetch sees the POSTs before it: {log}"
    );
    for (i, (rec, id)) in records.iter().zip(ids).enumerate() {
        check_record(rec, i as u64 + 1, id, 5, 10_000 + i as u32, server.pid());
    }
}

// ---------------------------------------------------------------------------
// Reset and Fetch (§6.6)
// ---------------------------------------------------------------------------

#[test]
fn reset_regenerates_both_tables_and_empties_the_log() {
    let site = Web99Site::new();
    let server = site.start();
    let cookie = my_cookie(10_003, 3);
    for n in 0..3 {
        let r = raw_request(
            server.addr,
            &post_request(
                SCRIPT,
                Some(&cookie),
                &form("/file_set/", file_id(n, 1, 0), 1),
            ),
        );
        assert_eq!(r.status, 200);
    }
    assert_eq!(fetch_records(server.addr).len(), 3);

    let p = ResetParams {
        maxload: 700,
        pttime: 1320,
        maxthread: 240,
        expired: [42, 142],
    };
    let window = reset(server.addr, &p);
    assert_eq!(fetch_log(server.addr), "         0\n");
    assert_eq!(
        std::fs::read(site.post_log_path()).expect("post.log"),
        b"         0\n"
    );
    let tables = check_tables(&site.state, &p, window);
    assert_eq!(tables.users.len(), 700);

    // maxthread larger than maxload; pttime 0 means 1800 s.
    let p2 = ResetParams {
        maxload: 10,
        pttime: 0,
        maxthread: 130,
        expired: [359, 0],
    };
    let window = reset(server.addr, &p2);
    check_tables(&site.state, &p2, window);

    // POSTs after a Reset are numbered from 1 again.
    let r = raw_request(
        server.addr,
        &post_request(SCRIPT, Some(&cookie), MANAGER_FORM),
    );
    assert_eq!(r.status, 200);
    let records = fetch_records(server.addr);
    assert_eq!(records.len(), 1);
    check_record(&records[0], 1, file_id(4, 1, 3), 2, 10_003, server.pid());

    // Finish (a modified manager's command) is answered and changes nothing.
    let r = raw_request(server.addr, &get_request("command/Finish", None));
    assert!(page_contents(&r, Some("command/Finish")).is_empty());
    assert_eq!(fetch_records(server.addr).len(), 1);

    // A malformed Reset changes nothing.
    let users_before = std::fs::read(site.state.join("User.Personality")).expect("users");
    let ads_before = std::fs::read(site.state.join("Custom.Ads")).expect("ads");
    for query in [
        "command/Reset&maxload=10&pttime=100&maxthread=100",
        "command/Reset&maxload=ten&pttime=100&maxthread=100&exp=1,100&urlroot=x",
        "command/Reset&maxload=10&pttime=100&maxthread=100&exp=1,360&urlroot=x",
        "command/Reset&maxload=10&pttime=100&maxthread=100&exp=1&urlroot=x",
        "command/Reset&maxload=10&pttime=100&maxthread=100&exp=1,2&bogus=1",
        "command/Reset&maxload=99999999&pttime=100&maxthread=100&exp=1,2&urlroot=x",
    ] {
        let r = raw_request(server.addr, &get_request(query, None));
        assert_refused(&r, 400, query);
    }
    assert_eq!(fetch_records(server.addr).len(), 1);
    assert!(std::fs::read(site.state.join("User.Personality")).expect("users") == users_before);
    assert!(std::fs::read(site.state.join("Custom.Ads")).expect("ads") == ads_before);
}

/// The manager's reading of a fetched log (§6.6): skip to a line beginning
/// `<pre>`, stop at `</pre>`, a digits-only line is the count, every other
/// non-empty line a 10-field record.
fn manager_parse(body: &[u8]) -> (u64, Vec<Vec<String>>) {
    let text = std::str::from_utf8(body).expect("ASCII");
    let mut lines = text.lines().skip_while(|l| !l.starts_with("<pre>"));
    lines.next().expect("a <pre> line");
    let (mut count, mut records) = (None, Vec::new());
    for line in lines.take_while(|l| !l.starts_with("</pre>")) {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if t.bytes().all(|b| b.is_ascii_digit()) {
            assert!(count.is_none(), "two count lines");
            count = Some(t.parse().expect("count"));
        } else {
            let fields: Vec<String> = t.split_whitespace().map(str::to_owned).collect();
            assert_eq!(fields.len(), 10, "record {line:?}");
            records.push(fields);
        }
    }
    (count.expect("a count line"), records)
}

#[test]
fn the_managers_validation_sequence_passes() {
    let site = Web99Site::new();
    let server = site.start();
    let addr = server.addr;
    // The manager speaks HTTP/1.0.
    let get10 = |query: &str, cookie: Option<&str>| {
        let mut r = format!("GET {SCRIPT}?{query} HTTP/1.0\r\n");
        if let Some(c) = cookie {
            r.push_str(&format!("Cookie: {c}\r\n"));
        }
        r.push_str("\r\n");
        raw_request(addr, r.as_bytes())
    };

    // 1. Reset.
    let query = format!(
        "command/Reset&maxload=10&pttime=100&maxthread=100&exp=1,100&urlroot=http://{addr}/"
    );
    assert_eq!(get10(&query, None).status, 200);
    // 2. Static GET of class3_r from the last directory.
    let r = 5;
    let last = DIRS - 1;
    let static_id = file_id(last, 3, r);
    let s = raw_request(
        addr,
        format!("GET /{static_id} HTTP/1.0\r\n\r\n").as_bytes(),
    );
    assert_eq!(s.status, 200);
    assert!(s.body == site.file(static_id), "static {static_id}");
    // 3. Standard dynamic GET of class1_r: the file's header line is there.
    let id = file_id(last, 1, r);
    let header_line = format!("{:>9} {id}", id.size());
    let d = get10(&query_for(id), None);
    let contents = page_contents(&d, Some(&query_for(id)));
    assert!(contents.starts_with(format!("{header_line}\n").as_bytes()));
    // 4. CAD with the manager's cookie: the body holds the tag for the Ad_id.
    let c = get10(&query_for(id), Some("my_cookie=user_id=10001&last_ad=20"));
    let (ad, _, _) = found_cookie(&c);
    assert!(
        set_cookies(&c)[0].contains(&format!("Ad_id={ad}")),
        "{:?}",
        c.headers
    );
    let body = page_contents(&c, Some(&query_for(id)));
    assert!(body.starts_with(format!("{header_line}\n").as_bytes()));
    assert!(
        find(body, tag_for(ad).as_bytes()).is_some(),
        "the CAD body lacks {}",
        tag_for(ad)
    );
    // 5. POST, then Fetch: exactly one record.
    let post = raw_request(
        addr,
        format!(
            "POST {SCRIPT} HTTP/1.0\r\nCookie: my_cookie=user_id=10001&last_ad={ad}\r\n\
             Content-Length: {}\r\n\r\n{MANAGER_FORM}",
            MANAGER_FORM.len()
        )
        .as_bytes(),
    );
    assert_eq!(set_cookies(&post), ["my_cookie=10001"]);
    let fetched = get10("command/Fetch", None);
    assert_eq!(fetched.status, 200);
    let (count, records) = manager_parse(&fetched.body);
    assert_eq!((count, records.len()), (1, 1), "{records:?}");
    let f = &records[0];
    assert_eq!(f[0], "1");
    assert_eq!(f[2], f[8], "pid fields");
    assert_eq!(
        (&f[3][..], &f[4][..], &f[5][..], &f[6][..]),
        ("4", "1", "3", "2")
    );
    assert_eq!(f[7], "/file_set/dir00004/class1_3");
    assert_eq!(f[9], "10001");
}

/// The load generator's requests exactly as §4.4 builds them, on one persistent
/// connection per protocol version: static, dynamic, a chain of CAD GETs (each
/// `last_ad` the previous `Ad_id`), a POST, and a static GET again.
#[test]
fn the_clients_exact_requests_share_a_keep_alive_connection() {
    let site = Web99Site::new();
    let server = site.start();
    let p = ResetParams {
        maxload: 40,
        pttime: 100,
        maxthread: 40,
        expired: [17, 117],
    };
    let window = reset(server.addr, &p);
    let tables = check_tables(&site.state, &p, window);
    for (version, keep_alive) in [("HTTP/1.0", "Connection: Keep-Alive\r\n"), ("HTTP/1.1", "")] {
        let user = 10_000 + 23;
        // The first last_ad is the user index mod 360 (§4.4).
        let mut last_ad = (user - 10_000) % 360;
        let mut conn = raw_conn(server.addr);
        let dynamic = "Pragma: no-cache\r\nCache-Control: no-cache\r\n";
        let expect_open = |r: &Response, what: &str| {
            let connection = r.header("Connection").map(str::to_ascii_lowercase);
            match version {
                "HTTP/1.0" => assert_eq!(connection.as_deref(), Some("keep-alive"), "{what}"),
                _ => assert_eq!(connection, None, "{what}"),
            }
        };
        let static_id = file_id(6, 2, 4);
        let static_get =
            format!("GET /{static_id} {version}\r\n{keep_alive}Accept: */*\r\nHost: sut\r\n\r\n");
        let r = exchange(&mut conn, static_get.as_bytes());
        assert!(r.body == site.file(static_id), "{version} static");
        expect_open(&r, "static");

        let id = file_id(8, 1, 4);
        let get = format!(
            "GET {SCRIPT}?/{id} {version}\r\n{keep_alive}{dynamic}Accept: */*\r\nHost: sut\r\n\r\n"
        );
        let r = exchange(&mut conn, get.as_bytes());
        assert!(page_contents(&r, Some(&query_for(id))) == site.file(id));
        expect_open(&r, "dynamic");

        for step in 0..6 {
            let id = file_id(10 + step, 1 + (step % 2) as u8, step as u8);
            let cad = format!(
                "GET {SCRIPT}?/{id} {version}\r\n{keep_alive}{dynamic}\
                 Cookie: my_cookie=user_id={user}&last_ad={last_ad}\r\nAccept: */*\r\nHost: sut\r\n\r\n"
            );
            let r = exchange(&mut conn, cad.as_bytes());
            let (ad, weight, expired) = found_cookie(&r);
            let found =
                ads::find_ad(tables.users[23], last_ad, &tables.ads, unix_now()).expect("an ad");
            assert_eq!(
                (ad, weight, expired),
                (found.ad, found.weight, found.expired)
            );
            assert_eq!(expired, in_expired_ranges(ad, p.expired));
            let file = String::from_utf8(site.file(id)).expect("ASCII");
            assert!(page_contents(&r, None) == file.replace(CAD_TAG, &tag_for(ad)).as_bytes());
            expect_open(&r, "CAD");
            last_ad = ad;
        }

        let id = file_id(11, 0, 7);
        let body = form("/file_set/", id, user);
        let post = format!(
            "POST {SCRIPT} {version}\r\n{keep_alive}{dynamic}\
             Cookie: my_cookie=user_id={user}&last_ad={last_ad}\r\n\
             Content-type: application/x-www-form-urlencoded\r\nAccept: */*\r\nHost: sut\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let r = exchange(&mut conn, post.as_bytes());
        assert_eq!(set_cookies(&r), [format!("my_cookie={user}")]);
        assert!(page_contents(&r, None) == site.file(id));
        expect_open(&r, "POST");

        let r = exchange(&mut conn, static_get.as_bytes());
        assert!(r.body == site.file(static_id), "{version} static again");
    }
    let records = fetch_records(server.addr);
    assert_eq!(records.len(), 2);
    for (i, r) in records.iter().enumerate() {
        check_record(
            r,
            i as u64 + 1,
            file_id(11, 0, 7),
            10_023,
            10_023,
            server.pid(),
        );
    }
}

// ---------------------------------------------------------------------------
// Concurrency and durability
// ---------------------------------------------------------------------------

/// The file a connection's `seq`-th POST names: distinct for seq < 100.
fn seq_file(seq: u32) -> FileId {
    file_id(seq % 25, ((seq / 25) % 3) as u8, (seq / 75) as u8)
}

fn seq_of(r: &Record) -> u32 {
    r.dir + 25 * (u32::from(r.class) + 3 * u32::from(r.num))
}

#[test]
fn two_clients_post_2000_times_concurrently() {
    const CLIENTS: u32 = 2;
    const CONNS: u32 = 10;
    const PER_CONN: u32 = 100;
    let site = Arc::new(Web99Site::new());
    let server = site.start();
    let addr = server.addr;
    let files: Arc<HashMap<(u32, u8, u8), Vec<u8>>> = Arc::new(
        (0..PER_CONN)
            .map(seq_file)
            .map(|id| ((id.dir, id.class, id.num), site.file(id)))
            .collect(),
    );
    let start = Arc::new(Barrier::new((CLIENTS * CONNS) as usize));
    let threads: Vec<_> = (0..CLIENTS)
        .flat_map(|c| (0..CONNS).map(move |k| (c + 1, k)))
        .map(|(client, k)| {
            let (start, files) = (Arc::clone(&start), Arc::clone(&files));
            std::thread::spawn(move || {
                let user = 10_000 + 100 * client + k;
                let cookie = my_cookie(user, 0);
                let mut conn = raw_conn(addr);
                start.wait();
                for seq in 0..PER_CONN {
                    let id = seq_file(seq);
                    let r = exchange(
                        &mut conn,
                        &post_request(SCRIPT, Some(&cookie), &form("/file_set/", id, client)),
                    );
                    assert_eq!(r.status, 200, "client {client} conn {k} POST {seq}");
                    assert_eq!(set_cookies(&r), [format!("my_cookie={user}")]);
                    let file = &files[&(id.dir, id.class, id.num)];
                    assert!(page_contents(&r, None) == file.as_slice(), "POST {seq}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a posting thread failed");
    }

    let records = fetch_records(addr);
    let total = (CLIENTS * CONNS * PER_CONN) as usize;
    assert_eq!(records.len(), total);
    // Every POST exactly once, each connection's in the order it sent them.
    let mut by_user: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.number, i as u64 + 1);
        assert_eq!(r.pid, server.pid());
        let k = r.cookie - 10_000;
        assert_eq!(r.client, k / 100, "{r:?}");
        let id = seq_file(seq_of(r));
        assert_eq!(r.file, format!("/{id}"), "{r:?}");
        by_user.entry(r.cookie).or_default().push(seq_of(r));
    }
    assert_eq!(by_user.len(), (CLIENTS * CONNS) as usize);
    for (user, seqs) in by_user {
        assert_eq!(
            seqs,
            (0..PER_CONN).collect::<Vec<_>>(),
            "user {user}: POSTs lost, doubled or reordered"
        );
    }
}

#[test]
fn acknowledged_posts_survive_sigkill() {
    const THREADS: usize = 6;
    let site = Web99Site::new();
    let mut server = site.start();
    let addr = server.addr;
    let sent = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (sent, acked, stop) = (Arc::clone(&sent), Arc::clone(&acked), Arc::clone(&stop));
            std::thread::spawn(move || -> Option<io::Error> {
                let request = post_request(
                    SCRIPT,
                    Some(&my_cookie(10_000 + t as u32, 0)),
                    &form("/file_set/", file_id(t as u32, 1, 0), t as u32),
                );
                let mut stream = match TcpStream::connect_timeout(&addr, IO_TIMEOUT) {
                    Ok(s) => s,
                    Err(e) => return Some(e),
                };
                let _ = stream.set_read_timeout(Some(IO_TIMEOUT));
                let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
                let mut buf = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    sent.fetch_add(1, Ordering::SeqCst);
                    match try_exchange(&mut stream, &mut buf, &request) {
                        Ok(200) => {
                            acked.fetch_add(1, Ordering::SeqCst);
                        }
                        Ok(status) => return Some(io::Error::other(format!("status {status}"))),
                        Err(e) => return Some(e),
                    }
                }
                None
            })
        })
        .collect();
    let storming = wait_until(Duration::from_secs(10), || {
        acked.load(Ordering::SeqCst) >= 300
    });
    server.signal(Signal::KILL);
    let status = server.wait_exit(EXIT_TIMEOUT);
    stop.store(true, Ordering::Relaxed);
    let mut errors = Vec::new();
    for t in threads {
        errors.extend(t.join().expect("a posting thread panicked"));
    }
    assert!(storming, "the storm never reached 300 acknowledged POSTs");
    assert!(status.is_some(), "stoa survived SIGKILL");
    let (sent, acked) = (sent.load(Ordering::SeqCst), acked.load(Ordering::SeqCst));
    assert!(
        errors.iter().all(|e| !e.to_string().starts_with("status")),
        "a POST got a non-200 answer: {errors:?}"
    );
    assert!(!errors.is_empty(), "the kill did not interrupt the storm");

    let on_disk = std::fs::read(site.post_log_path()).expect("post.log");
    let server = site.start();
    let records = fetch_records(server.addr);
    let n = records.len() as u64;
    assert!(
        acked <= n && n <= sent,
        "{n} records after the crash; {acked} POSTs were acknowledged, {sent} sent \
         ({} bytes on disk at the kill)",
        on_disk.len()
    );
    for r in &records {
        assert_eq!(r.cookie - 10_000, r.client, "{r:?}");
        assert_eq!(r.file, format!("/{}", file_id(r.client, 1, 0)), "{r:?}");
    }
    // The log continues where it stopped.
    let r = raw_request(
        server.addr,
        &post_request(SCRIPT, Some(&my_cookie(10_001, 1)), MANAGER_FORM),
    );
    assert_eq!(r.status, 200);
    let after = fetch_records(server.addr);
    assert_eq!(after.len() as u64, n + 1);
    check_record(
        &after[n as usize],
        n + 1,
        file_id(4, 1, 3),
        2,
        10_001,
        server.pid(),
    );
}

#[test]
fn a_torn_post_log_is_repaired_at_start() {
    let site = Web99Site::new();
    let mut server = site.start();
    for n in 0..3 {
        let r = raw_request(
            server.addr,
            &post_request(SCRIPT, Some(&my_cookie(10_000 + n, 0)), MANAGER_FORM),
        );
        assert_eq!(r.status, 200);
    }
    server.signal(Signal::KILL);
    assert!(
        server.wait_exit(EXIT_TIMEOUT).is_some(),
        "stoa survived SIGKILL"
    );
    drop(server);
    // Killed: the records, then the zeros written ahead of them.
    let path = site.post_log_path();
    let mut log = std::fs::read(&path).expect("post.log");
    let end = 11 + 3 * 139;
    assert!(log.len() > end, "zeros ahead of the records");
    assert!(log[11..end].iter().all(|&b| b != 0));
    assert!(log[end..].iter().all(|&b| b == 0));
    // A crash in the middle of a record, with a stale count line.
    log[..11].copy_from_slice(b"         4\n");
    let torn = log[11..11 + 70].to_vec();
    log[end..end + 70].copy_from_slice(&torn);
    std::fs::write(&path, &log).expect("tear post.log");

    let server = site.start();
    let records = fetch_records(server.addr);
    assert_eq!(
        records.len(),
        3,
        "the torn record is cut off, the count fixed"
    );
    let r = raw_request(
        server.addr,
        &post_request(SCRIPT, Some(&my_cookie(10_009, 0)), MANAGER_FORM),
    );
    assert_eq!(r.status, 200);
    let records = fetch_records(server.addr);
    assert_eq!(records.len(), 4);
    check_record(&records[3], 4, file_id(4, 1, 3), 2, 10_009, server.pid());
}

// ---------------------------------------------------------------------------
// Malformed input
// ---------------------------------------------------------------------------

#[test]
fn malformed_queries_cookies_and_forms_get_400_with_a_reason() {
    let site = Web99Site::new();
    let server = site.start();
    let p = ResetParams {
        maxload: 100,
        pttime: 100,
        maxthread: 100,
        expired: [1, 100],
    };
    reset(server.addr, &p);
    let good_query = query_for(file_id(4, 1, 3));
    let good = get_request(&good_query, None);
    let cookie = my_cookie(10_001, 20);
    let mut cases: Vec<(String, Vec<u8>, u16)> = Vec::new();
    let mut add = |what: &str, request: Vec<u8>, status: u16| {
        cases.push((what.to_owned(), request, status));
    };
    for query in [
        "",
        "/etc/passwd",
        "/file_set/dir00004/../../x",
        "/file_set/dir00004/class1_3/../../../etc/passwd",
        "command/Reboot",
        "command/",
        "/file_set/dir0004/class1_3",
        "/file_set/dir00004/class4_0",
        "/file_set/dir00004/class1_9",
        "/file_set/dir00004/class1_",
        "/file_set/dir00004/class1_33",
        "/file_set/dirABCDE/class1_3",
        "/file_set/dir00004/",
    ] {
        add(&format!("query {query:?}"), get_request(query, None), 400);
    }
    add(
        "a directory the set lacks",
        get_request("/file_set/dir99999/class1_3", None),
        404,
    );
    for bad in [
        "my_cookie=user_id=9999&last_ad=20",
        "my_cookie=user_id=10001&last_ad=999",
        "my_cookie=user_id=10001&last_ad=360",
        "my_cookie=user_id=10001&last_ad=-1",
        "my_cookie=garbage",
        "my_cookie=",
        "my_cookie=user_id=10001",
        "my_cookie=last_ad=20",
        "my_cookie=user_id=abc&last_ad=20",
        "my_cookie=user_id=99999999999&last_ad=20",
        "my_cookie=user_id=10001&last_ad=20&color=red",
        "my_cookie=user_id=20000&last_ad=20",
    ] {
        add(
            &format!("cookie {bad:?}"),
            get_request(&good_query, Some(bad)),
            400,
        );
    }
    for body in [
        "urlroot=/file_set/&dir=00004&class=1&num=3",
        "urlroot=/file_set/&dir=00004&class=1&client=2",
        "dir=00004&class=1&num=3&client=2",
        "urlroot=/file_set/&dir=00004&class=1&num=3&client=2&extra=1",
        "urlroot=/file_set/&dir=00004&class=7&num=3&client=2",
        "urlroot=/file_set/&dir=00004&class=1&num=9&client=2",
        "urlroot=/../&dir=00004&class=1&num=3&client=2",
        "urlroot=/file_set/../../&dir=00004&class=1&num=3&client=2",
        "urlroot=file_set/&dir=00004&class=1&num=3&client=2",
        "urlroot=/file_set/&dir=4&class=1&num=3&client=2",
        "urlroot=/file_set/&dir=00004&class=1&num=3&client=two",
        "urlroot=/file_set/&dir=00004&dir=00005&class=1&num=3&client=2",
        "urlroot&dir=00004&class=1&num=3&client=2",
        "garbage",
    ] {
        add(
            &format!("form {body:?}"),
            post_request(SCRIPT, Some(&cookie), body),
            400,
        );
    }
    add(
        "POST without a cookie",
        post_request(SCRIPT, None, MANAGER_FORM),
        400,
    );
    add(
        "POST without my_cookie",
        post_request(SCRIPT, Some("session=1"), MANAGER_FORM),
        400,
    );
    add(
        "POST with a bad my_cookie",
        post_request(SCRIPT, Some("my_cookie=user_id=1&last_ad=1"), MANAGER_FORM),
        400,
    );
    add(
        "POST of a file the set lacks",
        post_request(
            SCRIPT,
            Some(&cookie),
            &form("/file_set/", file_id(99_999, 1, 3), 2),
        ),
        404,
    );
    add(
        "PUT",
        format!("PUT {SCRIPT} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n").into_bytes(),
        405,
    );

    // Each on a fresh connection, then a good request on the same one: 400s
    // for the request's content keep the connection.
    for (what, request, status) in &cases {
        let mut conn = raw_conn(server.addr);
        let r = exchange(&mut conn, request);
        if *status == 405 {
            assert_eq!(r.status, 405, "{what}");
            assert!(r.header("Allow").is_some(), "{what}: no Allow header");
        } else {
            assert_refused(&r, *status, what);
        }
        if r.header("Connection") != Some("close") {
            let next = exchange(&mut conn, &good);
            assert_eq!(next.status, 200, "after {what}");
        }
        let fresh = raw_request(server.addr, &good);
        assert_eq!(fresh.status, 200, "the server stopped serving after {what}");
    }
    assert!(
        fetch_records(server.addr).is_empty(),
        "a refused POST was logged"
    );
}

#[test]
fn post_bodies_by_length_chunks_and_expect_continue() {
    let site = Web99Site::new();
    let server = site.start();
    let cookie = my_cookie(10_001, 20);
    let id = file_id(4, 1, 3);
    let file = site.file(id);

    // No Content-Length: 411.
    let mut conn = raw_conn(server.addr);
    conn.send(format!("POST {SCRIPT} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\n\r\n").as_bytes());
    assert_refused(&conn.read_response(false), 411, "POST without a length");

    // An empty chunked body is an empty form.
    let r = raw_request(
        server.addr,
        format!(
            "POST {SCRIPT} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\n\
             Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_refused(&r, 400, "an empty chunked body");

    // 64 KiB is the limit: one byte more is 413 at once (no body sent); exactly
    // 64 KiB is read and judged as a form (400).
    let mut conn = raw_conn(server.addr);
    conn.send(
        format!(
            "POST {SCRIPT} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\nContent-Length: 65537\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_refused(&conn.read_response(false), 413, "a 64 KiB + 1 body");
    let big = "x".repeat(65_536);
    let r = raw_request(server.addr, &post_request(SCRIPT, Some(&cookie), &big));
    assert_refused(&r, 400, "a 64 KiB body that is no form");

    // A chunked body above the limit: 413.
    let mut chunked = format!(
        "POST {SCRIPT} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    .into_bytes();
    for _ in 0..5 {
        chunked.extend_from_slice(format!("{:x}\r\n{}\r\n", 16_000, "y".repeat(16_000)).as_bytes());
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    let r = raw_request(server.addr, &chunked);
    assert_refused(&r, 413, "a chunked body above 64 KiB");

    // A chunked form works, split anywhere.
    let body = MANAGER_FORM;
    let (a, b) = body.split_at(17);
    let request = format!(
        "POST {SCRIPT} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\nTransfer-Encoding: chunked\r\n\r\n\
         {:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    let mut conn = raw_conn(server.addr);
    let r = exchange(&mut conn, request.as_bytes());
    assert_eq!(set_cookies(&r), ["my_cookie=10001"]);
    assert!(page_contents(&r, None) == file, "chunked POST");
    // Sent in pieces, the head first.
    let split = request.find("\r\n\r\n").expect("head end") + 4;
    conn.send(&request.as_bytes()[..split]);
    conn.send(&request.as_bytes()[split..split + 5]);
    conn.send(&request.as_bytes()[split + 5..]);
    assert!(page_contents(&conn.read_response(false), None) == file);

    // Expect: 100-continue: the interim answer comes before the body is sent.
    let mut conn = raw_conn(server.addr);
    conn.send(
        format!(
            "POST {SCRIPT} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\nExpect: 100-continue\r\n\
             Content-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    let interim = conn.read_response(false);
    assert_eq!(interim.status, 100, "no 100 Continue before the body");
    conn.send(body.as_bytes());
    let r = conn.read_response(false);
    assert_eq!(set_cookies(&r), ["my_cookie=10001"]);
    assert!(page_contents(&r, None) == file, "POST after 100 Continue");
    // Too large with Expect: refused without a 100.
    conn.send(
        format!(
            "POST {SCRIPT} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\nExpect: 100-continue\r\n\
             Content-Length: 100000\r\n\r\n"
        )
        .as_bytes(),
    );
    assert_refused(&conn.read_response(false), 413, "Expect with a large body");

    let records = fetch_records(server.addr);
    assert_eq!(
        records.len(),
        3,
        "chunked ×2 and Expect POSTs logged, no other"
    );
    for (i, r) in records.iter().enumerate() {
        check_record(r, i as u64 + 1, id, 2, 10_001, server.pid());
    }
    assert_eq!(
        raw_request(server.addr, &get_request(&query_for(id), None)).status,
        200
    );
}

/// `Content-Length: 0` is a length: the empty form is malformed (400), the
/// length is not missing (411 would tell the client to add one it already sent).
#[test]
fn post_with_content_length_zero_is_400_not_411() {
    let site = Web99Site::new();
    let server = site.start();
    let request = post_request(SCRIPT, Some(&my_cookie(10_001, 20)), "");
    assert!(find(&request, b"Content-Length: 0\r\n").is_some());
    let r = raw_request(server.addr, &request);
    assert_refused(&r, 400, "a POST with Content-Length: 0");
    assert_eq!(
        raw_request(
            server.addr,
            &get_request("/file_set/dir00004/class1_3", None)
        )
        .status,
        200
    );
    assert!(fetch_records(server.addr).is_empty());
}

#[test]
fn query_paths_never_leave_the_file_set() {
    let site = Web99Site::new();
    // A look-alike file set outside the document root, reachable through a
    // relative and an absolute symlink inside it.
    let outside = site.dir.path().join("outside");
    let secret_path = outside.join("file_set/dir00000/class0_0");
    std::fs::create_dir_all(secret_path.parent().expect("parent")).expect("mkdir");
    let secret = "TOP SECRET outside the document root\n";
    std::fs::write(&secret_path, secret).expect("write secret");
    std::os::unix::fs::symlink("../outside", site.docroot.join("escape")).expect("symlink");
    std::os::unix::fs::symlink("/", site.docroot.join("abs")).expect("symlink");
    let server = site.start();
    let abs_outside = outside.to_str().expect("UTF-8").trim_start_matches('/');
    let cookie = my_cookie(10_001, 20);

    let queries = [
        "/etc/passwd".to_owned(),
        "/../../../../etc/passwd".to_owned(),
        "/file_set/dir00004/../../x".to_owned(),
        "/file_set/dir00004/../../../outside/file_set/dir00000/class0_0".to_owned(),
        "../outside/file_set/dir00000/class0_0".to_owned(),
        "/../outside/file_set/dir00000/class0_0".to_owned(),
        "./../outside/file_set/dir00000/class0_0".to_owned(),
        "%2e%2e/outside/file_set/dir00000/class0_0".to_owned(),
        "..%2foutside/file_set/dir00000/class0_0".to_owned(),
        "escape/file_set/dir00000/class0_0".to_owned(),
        format!("abs/{abs_outside}/file_set/dir00000/class0_0"),
        "abs/etc/passwd/file_set/dir00000/class0_0".to_owned(),
        "file_set/dir00000/class0_0%00".to_owned(),
        "file_set/dir00000/class0_0/../../../../outside/file_set/dir00000/class0_0".to_owned(),
        "//outside/file_set/dir00000/class0_0".to_owned(),
    ];
    let mut requests: Vec<(String, Vec<u8>)> = Vec::new();
    for q in &queries {
        requests.push((format!("GET {q:?}"), get_request(q, None)));
        requests.push((format!("CAD {q:?}"), get_request(q, Some(&cookie))));
    }
    for urlroot in [
        "/../outside/file_set/",
        "/escape/file_set/",
        &format!("/abs/{abs_outside}/file_set/"),
        "/file_set/../../outside/file_set/",
        "/%2e%2e/outside/file_set/",
    ] {
        requests.push((
            format!("POST urlroot {urlroot:?}"),
            post_request(SCRIPT, Some(&cookie), &form(urlroot, file_id(0, 0, 0), 1)),
        ));
    }
    for (what, request) in &requests {
        let r = raw_request(server.addr, request);
        let text = String::from_utf8_lossy(&r.body);
        assert!(
            !text.contains("TOP SECRET") && !text.contains("root:x:0:0"),
            "{what} leaked a file outside the file set: {}",
            lossy(&r.body)
        );
        assert!(
            matches!(r.status, 400 | 403 | 404),
            "{what}: status {} ({})",
            r.status,
            lossy(&r.body)
        );
        assert_refused(&r, r.status, what);
    }
    assert!(
        fetch_records(server.addr).is_empty(),
        "a refused POST was logged"
    );
}

/// Runs `stoa serve --web99-state state` expecting it to refuse to start. If it
/// listens instead, reports what it then serves from the state directory.
fn expect_refused_state(docroot: &Path, state: &Path) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command
        .arg("serve")
        .arg("--docroot")
        .arg(docroot)
        .args(["--listen", "127.0.0.1:0", "--workers", "1", "--web99-state"])
        .arg(state)
        .env_remove("RUST_LOG");
    let mut child = Process::spawn(&mut command);
    let listening = |l: &String| {
        l.strip_prefix("stoa: listening on http://")
            .map(str::to_owned)
    };
    // Returns at the readiness line, or when standard error ends (the refusal).
    child.wait_for_stderr(READY_TIMEOUT, |lines| {
        lines.iter().any(|l| listening(l).is_some())
    });
    if let Some(addr) = child.stderr_lines().iter().find_map(listening) {
        let addr: SocketAddr = addr.trim().parse().expect("address");
        let leaked: Vec<String> = ["/state/User.Personality", "/state/post.log"]
            .iter()
            .map(|path| {
                let r = raw_request(
                    addr,
                    format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes(),
                );
                format!("GET {path} -> {}", r.status)
            })
            .collect();
        panic!(
            "stoa accepted --web99-state {} inside --docroot {} and serves it: {leaked:?}",
            state.display(),
            docroot.display()
        );
    }
    let Some(status) = child.wait_exit(EXIT_TIMEOUT) else {
        panic!(
            "stoa neither refused nor listened within {READY_TIMEOUT:?}: {}",
            child.stderr_text()
        );
    };
    let text = child.stderr_text();
    assert!(!status.success(), "{text}");
    assert!(text.contains("inside the document root"), "{text}");
}

#[test]
fn state_directory_inside_the_docroot_is_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let docroot = tmp.path().join("docroot");
    std::fs::create_dir_all(docroot.join("file_set")).expect("mkdir");
    std::fs::create_dir(tmp.path().join("sibling")).expect("mkdir");
    expect_refused_state(&docroot, &docroot.join("state"));
    expect_refused_state(&docroot, &docroot.join("file_set/state"));
    // Lexically outside, really inside: `..` must not hide the document root.
    expect_refused_state(&docroot, &tmp.path().join("sibling/../docroot/state"));
}

// ---------------------------------------------------------------------------
// A real client
// ---------------------------------------------------------------------------

#[test]
fn curl_drives_dynamic_get_cad_and_post() {
    let site = Web99Site::new();
    let server = site.start();
    let p = ResetParams {
        maxload: 100,
        pttime: 100,
        maxthread: 100,
        expired: [1, 100],
    };
    let window = reset(server.addr, &p);
    let tables = check_tables(&site.state, &p, window);
    let as_response = |f: &common::Fetched| Response {
        version: "HTTP/1.1".into(),
        status: f.code,
        headers: f
            .head
            .lines()
            .skip(1)
            .filter_map(|l| {
                let (n, v) = l.split_once(':')?;
                Some((n.to_owned(), v.trim().to_owned()))
            })
            .collect(),
        body: f.body.clone(),
    };

    // Dynamic GET of a class 3 file (sendfile).
    let id = file_id(20, 3, 6);
    let url = server.url(&format!("{SCRIPT}?{}", query_for(id)));
    let f = fetch(&url, &[]);
    assert_eq!(f.size_download, f.body.len() as u64);
    assert!(page_contents(&as_response(&f), Some(&query_for(id))) == site.file(id));

    // CAD GET of a class 2 file.
    let id = file_id(2, 2, 3);
    let url = server.url(&format!("{SCRIPT}?{}", query_for(id)));
    let f = fetch(&url, &["--cookie", "my_cookie=user_id=10042&last_ad=77"]);
    let r = as_response(&f);
    let (ad, weight, expired) = found_cookie(&r);
    let found = ads::find_ad(tables.users[42], 77, &tables.ads, unix_now()).expect("an ad");
    assert_eq!(
        (ad, weight, expired),
        (found.ad, found.weight, found.expired)
    );
    let file = String::from_utf8(site.file(id)).expect("ASCII");
    assert!(page_contents(&r, None) == file.replace(CAD_TAG, &tag_for(ad)).as_bytes());

    // POST, plain and with Expect: 100-continue (curl waits for the 100).
    let url = server.url(SCRIPT);
    let f = fetch(
        &url,
        &[
            "--cookie",
            "my_cookie=user_id=10007&last_ad=3",
            "--data",
            MANAGER_FORM,
        ],
    );
    let r = as_response(&f);
    assert_eq!(set_cookies(&r), ["my_cookie=10007"]);
    assert!(page_contents(&r, None) == site.file(file_id(4, 1, 3)));

    let tmp = tempfile::tempdir().expect("tempdir");
    let body_path = tmp.path().join("body");
    let run = curl(&[
        "--verbose",
        "--expect100-timeout",
        "8",
        "--header",
        "Expect: 100-continue",
        "--cookie",
        "my_cookie=user_id=10008&last_ad=3",
        "--data",
        MANAGER_FORM,
        "--output",
        body_path.to_str().expect("UTF-8"),
        &url,
    ]);
    assert!(
        run.stderr.contains("< HTTP/1.1 100 Continue"),
        "no 100 Continue:\n{}",
        run.stderr
    );
    assert!(run.stderr.contains("< HTTP/1.1 200 OK"), "{}", run.stderr);
    assert!(
        run.stderr.contains("Set-Cookie: my_cookie=10008"),
        "{}",
        run.stderr
    );
    let body = std::fs::read(&body_path).expect("body");
    assert!(body.ends_with(TRAILER));

    let records = fetch_records(server.addr);
    assert_eq!(records.len(), 2);
    check_record(&records[0], 1, file_id(4, 1, 3), 2, 10_007, server.pid());
    check_record(&records[1], 2, file_id(4, 1, 3), 2, 10_008, server.pid());
}

// ---------------------------------------------------------------------------
// Disk full
// ---------------------------------------------------------------------------

#[test]
fn a_full_disk_fails_posts_with_507_and_keeps_whole_records() {
    let site = Web99Site::new();
    let Ok(_fs) = Tmpfs::mount(&site.state, "512k") else {
        eprintln!("skipped: cannot mount a tmpfs (needs root; CI runs as root)");
        return;
    };
    let server = site.start();
    // Fill what the tables left free.
    let filler = site.state.join("filler");
    let mut f = std::fs::File::create(&filler).expect("filler");
    let block = vec![0u8; 4096];
    while io::Write::write_all(&mut f, &block).is_ok() {}
    drop(f);
    let (mut ok, mut full) = (0u64, 0);
    for n in 0..200 {
        let r = raw_request(
            server.addr,
            &post_request(SCRIPT, Some(&my_cookie(10_000 + n, 0)), MANAGER_FORM),
        );
        match r.status {
            200 => ok += 1,
            507 => {
                full += 1;
                break;
            }
            other => panic!("unexpected status {other}: {}", lossy(&r.body)),
        }
    }
    assert_eq!(full, 1, "a POST on a full disk must fail with 507");
    let records = fetch_records(server.addr);
    assert_eq!(
        records.len() as u64,
        ok,
        "exactly the acknowledged POSTs are logged"
    );
    let len = std::fs::metadata(site.post_log_path())
        .expect("post.log")
        .len();
    assert_eq!(len, 11 + 139 * ok, "only whole records");
    // Space comes back: the next POST works without a restart.
    std::fs::remove_file(&filler).expect("remove filler");
    let r = raw_request(
        server.addr,
        &post_request(SCRIPT, Some(&my_cookie(10_500, 0)), MANAGER_FORM),
    );
    assert_eq!(r.status, 200, "{}", lossy(&r.body));
    assert_eq!(fetch_records(server.addr).len() as u64, ok + 1);
    drop(server);
}
