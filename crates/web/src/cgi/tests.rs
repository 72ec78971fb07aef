use super::*;

#[test]
fn meta_variables() {
    let raw = b"POST /cgi-bin/env/extra/path?a=1&b=2 HTTP/1.1\r\nHost: example.org:8080\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nX-Forwarded-For: 1.2.3.4\r\nUser-Agent: t\r\n\r\n";
    let mut storage = stoa_http_proto::request::header_storage();
    let Ok(stoa_http_proto::Status::Complete(head)) =
        stoa_http_proto::parse_request(raw, &mut storage, &Default::default())
    else {
        panic!("valid head");
    };
    let call = Call {
        head: &head,
        body: b"abc",
        mount: 0,
        rest: b"env/extra/path",
        local: "127.0.0.1:8080".parse().expect("addr"),
        peer: "10.0.0.7:51000".parse().expect("addr"),
    };
    let script = Where {
        prefix: "/cgi-bin/",
        name: "env",
        path_info: "/extra/path",
        docroot: Path::new("/srv/www"),
    };
    let env = environment(&call, &script);
    let get = |k: &str| {
        env.iter()
            .find(|(name, _)| name == k)
            .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
    };
    assert_eq!(get("GATEWAY_INTERFACE").as_deref(), Some("CGI/1.1"));
    assert_eq!(get("REQUEST_METHOD").as_deref(), Some("POST"));
    assert_eq!(get("SCRIPT_NAME").as_deref(), Some("/cgi-bin/env"));
    assert_eq!(get("PATH_INFO").as_deref(), Some("/extra/path"));
    assert_eq!(
        get("PATH_TRANSLATED").as_deref(),
        Some("/srv/www/extra/path")
    );
    assert_eq!(get("QUERY_STRING").as_deref(), Some("a=1&b=2"));
    assert_eq!(get("SERVER_NAME").as_deref(), Some("example.org"));
    assert_eq!(get("SERVER_PORT").as_deref(), Some("8080"));
    assert_eq!(get("SERVER_PROTOCOL").as_deref(), Some("HTTP/1.1"));
    assert_eq!(get("REMOTE_ADDR").as_deref(), Some("10.0.0.7"));
    assert_eq!(get("CONTENT_TYPE").as_deref(), Some("text/plain"));
    assert_eq!(get("CONTENT_LENGTH").as_deref(), Some("3"));
    assert_eq!(get("DOCUMENT_ROOT").as_deref(), Some("/srv/www"));
    assert_eq!(get("HTTP_X_FORWARDED_FOR").as_deref(), Some("1.2.3.4"));
    assert_eq!(get("HTTP_USER_AGENT").as_deref(), Some("t"));
    assert_eq!(get("HTTP_CONTENT_LENGTH"), None);
    assert_eq!(get("HTTP_CONTENT_TYPE"), None);
}
