use stoa_web99::fileset;
use stoa_web99::request::wrapper_head;

use super::*;

const FILE: FileId = FileId {
    dir: 3,
    class: 1,
    num: 2,
};

fn file() -> Vec<u8> {
    let mut f = Vec::new();
    fileset::generate(FILE, 1, &mut f);
    f
}

fn page(query: &str) -> Vec<u8> {
    let mut p = wrapper_head("stoa", "127.0.0.1", "/web99", query).into_bytes();
    p.extend_from_slice(&file());
    p.extend_from_slice(TRAILER);
    p
}

fn expect<'a>(
    kind: RequestType,
    headers: &'a [stoa_http_proto::request::Header<'a>],
) -> Expect<'a> {
    Expect {
        kind,
        file: FILE,
        user_id: 10_005,
        expired: [1, 100],
        headers,
    }
}

#[test]
fn static_bodies() {
    let e = expect(RequestType::Static, &[]);
    assert_eq!(check(&e, &file()), Ok(None));
    let mut short = file();
    short.pop();
    assert_eq!(check(&e, &short), Err("bad length"));
    let mut wrong_size = file();
    wrong_size[5] = b'9';
    assert_eq!(check(&e, &wrong_size), Err("bad file size"));
    let mut wrong_name = file();
    let at = wrong_name
        .iter()
        .position(|&b| b == b'\n')
        .expect("newline")
        - 1;
    wrong_name[at] = b'7';
    assert_eq!(check(&e, &wrong_name), Err("bad url name"));
    assert_eq!(check(&e, b"garbage"), Err("bad size line"));
}

#[test]
fn dynamic_pages() {
    let e = expect(RequestType::Dynamic, &[]);
    assert_eq!(check(&e, &page("/file_set/dir00003/class1_2")), Ok(None));
    assert_eq!(
        check(&e, &page("/file_set/dir00003/class1_3")),
        Err("bad QUERY")
    );
    let mut no_html = page("/file_set/dir00003/class1_2");
    no_html[1] = b'x';
    assert_eq!(check(&e, &no_html), Err("bad html"));
    let mut long = page("/file_set/dir00003/class1_2");
    long.push(b'\n');
    assert_eq!(check(&e, &long), Err("bad length"));
    // POST wrappers are not checked for the query.
    let cookie = [stoa_http_proto::request::Header {
        name: "Set-Cookie",
        value: b"my_cookie=10005",
    }];
    let post = expect(RequestType::Post, &cookie);
    assert_eq!(check(&post, &page("class=1&num=2")), Ok(None));
    let wrong = [stoa_http_proto::request::Header {
        name: "Set-Cookie",
        value: b"my_cookie=10006",
    }];
    assert_eq!(
        check(&expect(RequestType::Post, &wrong), &page("")),
        Err("bad my_cookie")
    );
    assert_eq!(
        check(&expect(RequestType::Post, &[]), &page("")),
        Err("bad my_cookie")
    );
}

#[test]
fn cad_cookies() {
    let body = page("/file_set/dir00003/class1_2");
    let cad = |value: &'static [u8]| {
        let headers = [stoa_http_proto::request::Header {
            name: "Set-Cookie",
            value,
        }];
        check(&expect(RequestType::Cad, &headers), &body)
    };
    assert_eq!(
        cad(b"found_cookie=Ad_id=50&Ad_weight=15&Expired=0"),
        Ok(Some(50))
    );
    assert_eq!(
        cad(b"found_cookie=Ad_id=5&Ad_weight=15&Expired=1"),
        Ok(Some(5))
    );
    assert_eq!(
        cad(b"found_cookie=Ad_id=110&Ad_weight=15&Expired=1"),
        Ok(Some(110))
    );
    assert_eq!(
        cad(b"found_cookie=Ad_id=5&Ad_weight=15&Expired=0"),
        Err("Expected Expired Ad")
    );
    assert_eq!(
        cad(b"found_cookie=Ad_id=50&Ad_weight=15&Expired=1"),
        Err("Invalid Expired Ad")
    );
    assert_eq!(
        cad(b"found_cookie=Ad_id=50&Ad_weight=76&Expired=0"),
        Err("bad found_cookie")
    );
    assert_eq!(
        cad(b"found_cookie=Ad_id=-1&Ad_weight=0&Expired=1"),
        Err("bad Ad_id")
    );
    assert_eq!(cad(b"my_cookie=1"), Err("missing found_cookie"));
}

/// The generator keeps only a body's first bytes: every verdict on a class-3
/// file and its dynamic page is the same from the first `KEEP_BODY` bytes and
/// the length as from the whole body.
#[test]
fn a_prefix_and_the_length_judge_as_the_whole_body() {
    let big = FileId {
        dir: 0,
        class: 3,
        num: 4,
    };
    let mut body = Vec::new();
    fileset::generate(big, 1, &mut body);
    assert!(body.len() > 10 * crate::generator::KEEP_BODY);
    let mut e = expect(RequestType::Static, &[]);
    e.file = big;
    let keep = crate::generator::KEEP_BODY;
    for len in [body.len(), body.len() - 1, body.len() + 1] {
        let whole = if len <= body.len() {
            body[..len].to_vec()
        } else {
            let mut b = body.clone();
            b.push(b'x');
            b
        };
        assert_eq!(
            check_prefix(&e, &whole[..keep], len),
            check(&e, &whole),
            "{len} bytes"
        );
    }
    let mut page =
        wrapper_head("stoa", "127.0.0.1", "/web99", "/file_set/dir00000/class3_4").into_bytes();
    page.extend_from_slice(&body);
    page.extend_from_slice(TRAILER);
    e.kind = RequestType::Dynamic;
    assert_eq!(check(&e, &page), Ok(None));
    assert_eq!(check_prefix(&e, &page[..keep], page.len()), Ok(None));
    assert_eq!(
        check_prefix(&e, &page[..keep], page.len() - 1),
        Err("bad length")
    );
}
