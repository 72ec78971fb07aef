use std::borrow::Cow;

use super::*;

fn file(q: &str) -> Result<(FileId, String), &'static str> {
    match parse_query(q.as_bytes())? {
        Query::File { id, path } => Ok((id, path)),
        other => panic!("not a file query: {other:?}"),
    }
}

#[test]
fn file_queries() {
    let id = |dir, class, num| FileId { dir, class, num };
    assert_eq!(
        file("/file_set/dir00004/class1_3"),
        Ok((id(4, 1, 3), "file_set/dir00004/class1_3".into()))
    );
    assert_eq!(
        file("file_set/dir00671/class3_8"),
        Ok((id(671, 3, 8), "file_set/dir00671/class3_8".into()))
    );
    assert_eq!(
        file("/specweb99/file_set/dir00000/class0_0"),
        Ok((id(0, 0, 0), "specweb99/file_set/dir00000/class0_0".into()))
    );
    for bad in [
        "/file_set/dir0004/class1_3",
        "/file_set/dir00004/class4_3",
        "/file_set/dir00004/class1_9",
        "/file_set/dir00004/class1_3x",
        "/file_set/dir00004/../../etc/passwd",
        "/../file_set/dir00004/class1_3",
        "/a/./file_set/dir00004/class1_3",
        "/a//file_set/dir00004/class1_3",
        "/a%2f/file_set/dir00004/class1_3",
        "/xfile_set/dir00004/class1_3",
        "/etc/passwd",
        "",
    ] {
        assert!(parse_query(bad.as_bytes()).is_err(), "{bad}");
    }
    assert!(parse_query(b"/file_set/dir00004/class1_\xff").is_err());
}

#[test]
fn commands() {
    let reset = parse_query(
        b"command/Reset&maxload=988&pttime=1800&maxthread=988&exp=17,117&urlroot=http://sut/",
    );
    assert_eq!(
        reset,
        Ok(Query::Reset(ResetParams {
            maxload: 988,
            pttime: 1800,
            maxthread: 988,
            expired: [17, 117],
        }))
    );
    assert_eq!(parse_query(b"command/Fetch"), Ok(Query::Fetch));
    assert_eq!(parse_query(b"command/Finish"), Ok(Query::Finish));
    for bad in [
        "command/Reboot",
        "command/Reset&maxload=1&pttime=1&maxthread=1",
        "command/Reset&maxload=x&pttime=1&maxthread=1&exp=1,2",
        "command/Reset&maxload=1&pttime=1&maxthread=1&exp=1,360",
        "command/Reset&maxload=1&pttime=1&maxthread=1&exp=1",
        "command/Reset&maxload=1&pttime=1&maxthread=1&exp=1,2&shell=rm",
        "command/Reset&maxload=999999999&pttime=1&maxthread=1&exp=1,2",
    ] {
        assert!(parse_query(bad.as_bytes()).is_err(), "{bad}");
    }
}

#[test]
fn cookies() {
    let c = |user_id, last_ad| Ok(Some(Cookie { user_id, last_ad }));
    assert_eq!(
        parse_cookie(b"my_cookie=user_id=10001&last_ad=20"),
        c(10_001, 20)
    );
    assert_eq!(
        parse_cookie(b"a=b; my_cookie=user_id=10359&last_ad=359; c=d"),
        c(10_359, 359)
    );
    assert_eq!(parse_cookie(b"other=1"), Ok(None));
    for bad in [
        &b"my_cookie=user_id=9999&last_ad=20"[..],
        b"my_cookie=user_id=10001&last_ad=360",
        b"my_cookie=user_id=10001",
        b"my_cookie=last_ad=1&user_id=x",
        b"my_cookie=garbage",
        b"my_cookie=user_id=10001&last_ad=2\x00",
        b"my_cookie=\xff",
    ] {
        assert!(
            parse_cookie(bad).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    assert_eq!(
        Cookie {
            user_id: 10_007,
            last_ad: 0
        }
        .user_index(),
        7
    );
}

#[test]
fn forms_in_any_order() {
    let want = Form {
        urlroot: "/file_set/".into(),
        id: FileId {
            dir: 4,
            class: 1,
            num: 3,
        },
        path: "file_set/dir00004/class1_3".into(),
        client: 2,
    };
    assert_eq!(
        parse_form(b"class=1&client=2&dir=00004&num=3&urlroot=/file_set/"),
        Ok(want.clone())
    );
    assert_eq!(
        parse_form(b"urlroot=/file_set/&dir=00004&class=1&num=3&client=2\r\n"),
        Ok(want)
    );
    let nested = parse_form(b"urlroot=/specweb99/file_set/&dir=00000&class=0&num=8&client=10007")
        .expect("valid");
    assert_eq!(nested.path, "specweb99/file_set/dir00000/class0_8");
    for bad in [
        &b"urlroot=/file_set/&dir=00004&class=1&num=3"[..],
        b"urlroot=/file_set/&dir=00004&class=1&num=3&client=2&extra=1",
        b"urlroot=/file_set/&dir=00004&dir=00005&class=1&num=3&client=2",
        b"urlroot=/../&dir=00004&class=1&num=3&client=2",
        b"urlroot=file_set&dir=00004&class=1&num=3&client=2",
        b"urlroot=/file_set/&dir=4&class=1&num=3&client=2",
        b"urlroot=/file_set/&dir=00004&class=7&num=3&client=2",
        b"urlroot=/file_set/&dir=00004&class=1&num=3&client=two",
        b"\xff",
    ] {
        assert!(parse_form(bad).is_err(), "{}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn wrapper_shape() {
    let head = wrapper_head(
        "stoa/0.1.0",
        "127.0.0.1",
        "/web99",
        "/file_set/dir00000/class1_0",
    );
    assert!(head.starts_with("<html>\n"));
    assert!(head.contains("\n<p>QUERY_STRING = /file_set/dir00000/class1_0\n"));
    assert!(head.ends_with("\n<pre>\n"));
    assert_eq!(TRAILER.len(), 23);
}

/// The wrapper as the spec writes it (§6.2), with no escaping at all.
fn spec_wrapper(server: &str, remote_addr: &str, script: &str, query: &str) -> String {
    format!(
        "<html>\n<head><title>SPECweb99 Dynamic GET & POST Test</title></head>\n<body>\n\
         <p>SERVER_SOFTWARE = {server}\n<p>REMOTE_ADDR = {remote_addr}\n\
         <p>SCRIPT_NAME = {script}\n<p>QUERY_STRING = {query}\n<pre>\n"
    )
}

/// Issue 21, hole 3: the query came back unescaped inside the HTML.
#[test]
fn hostile_queries_come_back_as_text() {
    for (query, escaped) in [
        (
            "command/Fetch&<script>alert(1)</script>",
            "command/Fetch&amp;&lt;script&gt;alert(1)&lt;/script&gt;",
        ),
        (
            "<img src=x onerror=\"a('b')\">",
            "&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt;",
        ),
        ("&lt;", "&amp;lt;"),
        ("é<", "é&lt;"),
    ] {
        let head = wrapper_head("stoa", "127.0.0.1", "/web99", query);
        assert!(
            head.contains(&format!("\n<p>QUERY_STRING = {escaped}\n")),
            "{query:?}: {head}"
        );
        assert!(
            !head.contains("<script") && !head.contains("<img"),
            "{head}"
        );
    }
}

/// Every page the kit checks is the spec's wrapper byte for byte: the queries of
/// its dynamic GETs and CAD GETs (with and without a prefix), of the client's POST
/// (none) and the manager's validation POST, and of Fetch and Finish.
#[test]
fn the_kits_queries_give_the_spec_wrapper_unchanged() {
    let queries = [
        "/file_set/dir00000/class0_0",
        "/file_set/dir00123/class3_8",
        "/specweb99/file_set/dir00004/class1_3",
        "prefix/sub-dir_2/file_set/dir00004/class2_7",
        "/file_set/dir00004/class1_3f",
        "",
        "command/Fetch",
        "command/Finish",
    ];
    for query in queries {
        for (peer, script) in [("127.0.0.1", "/web99"), ("::1", "/specweb99/isapi.dll")] {
            assert_eq!(
                wrapper_head("stoa/0.1.0", peer, script, query),
                spec_wrapper("stoa/0.1.0", peer, script, query),
                "{query:?}"
            );
            assert!(matches!(html_escape(query), Cow::Borrowed(_)));
        }
    }
}
