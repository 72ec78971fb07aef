//! The manager's requests, checked on their bytes; the validation driven by a
//! scripted server.

use stoa_web99::postlog::{Record, count_line, write_record};
use stoa_web99::workload::HttpVersion;

use super::*;

fn targets(post: &str) -> Targets {
    Targets {
        host: "127.0.0.1:8080".into(),
        url_root: String::new(),
        dynamic: "/web99".into(),
        cgi: "/cgi-bin/web99".into(),
        post: post.into(),
        version: HttpVersion::Http11,
    }
}

fn text(request: &[u8]) -> String {
    String::from_utf8_lossy(request).into_owned()
}

/// Issue 18, item 9: the validation POST used the client's form (`urlroot`
/// first, the file the run asks for); the manager sends its fixed form in
/// alphabetical order, with the class-1 file and an `f` as the query.
#[test]
fn the_validation_post_is_the_managers() {
    let file = FileId {
        dir: 25,
        class: 1,
        num: 6,
    };
    let post = text(&validation_post(&targets("/web99"), file));
    let (head, body) = post.split_once("\r\n\r\n").expect("head and body");
    assert_eq!(body, "class=1&client=2&dir=00004&num=3&urlroot=/file_set/");
    let mut lines = head.lines();
    assert_eq!(
        lines.next(),
        Some("POST /web99?/file_set/dir00025/class1_6f HTTP/1.1")
    );
    assert!(head.contains("\r\nCookie: my_cookie=user_id=10001&last_ad=20\r\n"));
    assert!(head.ends_with(&format!("\r\nContent-Length: {}", body.len())));
    // A script with a ?prefix: the prefix leads the query and the urlroot.
    let post = text(&validation_post(&targets("/x.pl?/spec"), file));
    assert!(post.starts_with("POST /x.pl?/spec/file_set/dir00025/class1_6f HTTP/1.1\r\n"));
    assert!(post.ends_with("&urlroot=/spec/file_set/"));
}

/// An answer of `status` with `headers` and `body`.
fn reply(headers: &[(&str, String)], body: &[u8]) -> Reply {
    Reply {
        status: 200,
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).to_owned(), v.clone()))
            .collect(),
        body: body.to_vec(),
    }
}

/// What an honest server answers to the validation's requests (only as much
/// as the checks read).
fn answer(request: &[u8]) -> Reply {
    let request = text(request);
    let target = request.split(' ').nth(1).unwrap_or_default().to_owned();
    if target.contains("command/Reset") {
        return reply(&[], b"");
    }
    if target.contains("command/Fetch") {
        let mut log = count_line(1);
        let record = Record {
            number: 1,
            time: 0,
            pid: 7,
            dir: 4,
            class: 1,
            num: 3,
            client: 2,
            file: "/file_set/dir00004/class1_3".into(),
            cookie: 10_001,
        };
        write_record(&mut log, &record);
        return reply(&[], format!("<html>\n<pre>\n{log}</pre>\n").as_bytes());
    }
    if request.starts_with("POST") {
        return reply(&[], header_line(VALIDATION_FORM_FILE).as_bytes());
    }
    let path = target.rsplit_once('?').map_or(target.as_str(), |(_, q)| q);
    let (id, _) =
        stoa_web99::request::parse_file(path).unwrap_or_else(|e| panic!("{e}: {request}"));
    let mut body = header_line(id);
    let mut headers = vec![("Server", "scripted".to_owned())];
    if request.contains("Cookie:") {
        // Ad 54: dir 1, class 2, file 0.
        headers.push((
            "Set-Cookie",
            "found_cookie=Ad_id=54&Ad_weight=3&Expired=0".into(),
        ));
        body.push_str("<!WEB99CAD><IMG SRC=\"/file_set/dir00001/class2_0\"><!/WEB99CAD>\n");
    }
    reply(&headers, body.as_bytes())
}

/// Issue 18, item 9: validation sent `maxload=100` and always file 4
/// (class 3 of the last directory, class 1 of directory 0); the manager sends
/// the run's load and one random file number for both, in the last directory.
#[test]
fn validation_sends_what_the_manager_sent() {
    let v = Validation {
        maxload: 37,
        dirs: 36,
        static_only: false,
        file: 6,
    };
    let mut sent = Vec::new();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let server = runtime.block_on(validate_by(
        |req| {
            let reply = answer(&req);
            sent.push(text(&req));
            async { Ok(reply) }
        },
        &targets("/web99"),
        &v,
    ));
    assert_eq!(server.expect("validation passes"), "scripted");
    let lines: Vec<&str> = sent.iter().filter_map(|r| r.lines().next()).collect();
    assert_eq!(
        lines,
        [
            "GET /web99?command/Reset&maxload=37&pttime=100&maxthread=100&exp=1,100\
             &urlroot=http://127.0.0.1:8080 HTTP/1.0",
            "GET /file_set/dir00035/class3_6 HTTP/1.1",
            "GET /web99?/file_set/dir00035/class1_6 HTTP/1.1",
            "GET /cgi-bin/web99?/file_set/dir00035/class1_6 HTTP/1.1",
            "GET /web99?/file_set/dir00035/class1_6 HTTP/1.1",
            "POST /web99?/file_set/dir00035/class1_6f HTTP/1.1",
            "GET /web99?command/Fetch HTTP/1.0",
        ]
    );
    assert!(sent[4].contains("Cookie: my_cookie=user_id=10001&last_ad=20"));
}

/// Issue 56, item 18: a server without the dynamic API (nginx, `stoa serve`
/// without `--web99`) answers the Reset with its 404 page; the error must say
/// what to do instead, not show that page.
#[test]
fn a_server_without_the_dynamic_api_is_told_to_use_static_only() {
    let v = Validation {
        maxload: 10,
        dirs: 1,
        static_only: false,
        file: 0,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let err = runtime
        .block_on(validate_by(
            |_req| async {
                Ok(Reply {
                    status: 404,
                    headers: Vec::new(),
                    body: b"<html><body><h1>404 Not Found</h1></body></html>".to_vec(),
                })
            },
            &targets("/web99"),
            &v,
        ))
        .expect_err("no dynamic API");
    let text = format!("{err:#}");
    assert!(
        text.contains(
            "the server has no SPECweb99 dynamic API: use --static-only (and `stoa fileset` \
             to create the file set)"
        ),
        "{text}"
    );
    assert!(!text.contains("<html>"), "{text}");
}

/// The manager draws the file number as `int(rand(8))`: 0–7, never 8.
#[test]
fn the_validation_file_is_one_of_the_first_eight() {
    let mut seen = [false; 9];
    for _ in 0..2000 {
        seen[usize::from(Validation::new(10, 26, false).file)] = true;
    }
    assert_eq!(
        seen,
        [true, true, true, true, true, true, true, true, false]
    );
}

/// The manager reads an answer once its head and `Content-Length` bytes are in,
/// and refuses one it cannot frame.
#[test]
fn answers_are_read_by_their_length() {
    let whole = b"HTTP/1.1 200 OK\r\nServer: s\r\nContent-Length: 5\r\n\r\nhello";
    for cut in 0..whole.len() {
        assert!(parse(&whole[..cut]).expect("a prefix").is_none(), "{cut}");
    }
    let reply = parse(whole).expect("valid").expect("whole");
    assert_eq!(
        (reply.status, reply.header("server"), &reply.body[..]),
        (200, Some("s"), &b"hello"[..])
    );
    // Bytes after the body are not the reply's.
    let more = [&whole[..], b"extra"].concat();
    assert_eq!(parse(&more).expect("valid").expect("whole").body, b"hello");
    for refused in [
        &b"HTTP/1.1 200 OK\r\n\r\n"[..],
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        b"HTTP/1.1 200 OK\nContent-Length: 0\n\n",
        b"nonsense\r\n\r\n",
    ] {
        assert!(
            parse(refused).is_err(),
            "{:?}",
            String::from_utf8_lossy(refused)
        );
    }
}
