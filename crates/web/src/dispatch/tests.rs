use std::borrow::Cow;

use stoa_http_proto::request::header_storage;
use stoa_http_proto::{RequestHead, Status, parse_request};

use super::body::Gathered;
use super::*;
use crate::config::{CgiConfig, CgiMount};

/// Runs `f` on a site with one CGI mount, `/cgi-bin/`, taking bodies up to 64 bytes.
fn with_site<R>(f: impl FnOnce(Site<'_>) -> R) -> R {
    let mut shared = Shared::for_tests(Config::new(".".into(), vec![]));
    let mounts = vec![CgiMount {
        prefix: "/cgi-bin/".into(),
        dir: "/nonexistent".into(),
    }];
    shared.sites[0].cgi = mounts.clone();
    shared.cgi = Some(Cgi::new(&CgiConfig {
        mounts,
        max_body: 64,
        ..CgiConfig::default()
    }));
    f(Site::of(&shared))
}

fn with_head<R>(raw: &[u8], f: impl FnOnce(&RequestHead<'_, '_>) -> R) -> R {
    let mut storage = header_storage();
    match parse_request(raw, &mut storage, &Default::default()) {
        Ok(Status::Complete(head)) => f(&head),
        other => panic!("not a complete head: {other:?}"),
    }
}

const CHUNKED_POST: &[u8] =
    b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";

fn gathering(head: &RequestHead<'_, '_>, site: Site<'_>) -> Gathering {
    match route(head, site) {
        Route::Dynamic(d) => Gathering::new(d, head, site),
        other => panic!("not dynamic: {other:?}"),
    }
}

#[test]
fn routes_are_decided_from_the_head() {
    with_site(|site| {
        let cases: &[(&[u8], &str)] = &[
            (b"GET /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", "file /a.txt"),
            (b"GET /a/../b%20c HTTP/1.1\r\nHost: t\r\n\r\n", "file /b c"),
            (
                b"GET /cgi-bin/s/x?q HTTP/1.1\r\nHost: t\r\n\r\n",
                "cgi 0 s/x",
            ),
            (b"GET /cgi%2Dbin/s HTTP/1.1\r\nHost: t\r\n\r\n", "cgi 0 s"),
            (b"POST /a.txt HTTP/1.1\r\nHost: t\r\n\r\n", "refused 405"),
            // The method is checked before the target.
            (b"POST a.txt HTTP/1.1\r\nHost: t\r\n\r\n", "refused 405"),
            (b"GET a.txt HTTP/1.1\r\nHost: t\r\n\r\n", "refused 400"),
        ];
        for (raw, want) in cases {
            let got = with_head(raw, |head| match route(head, site) {
                Route::File(t) => format!("file {}", String::from_utf8_lossy(&t.path)),
                Route::Refused(r) => format!("refused {}", r.status),
                Route::Dynamic(Dynamic::Cgi { mount, rest }) => {
                    format!("cgi {mount} {}", String::from_utf8_lossy(&rest))
                }
                Route::Dynamic(Dynamic::Web99(_)) => "web99".into(),
            });
            assert_eq!(&got, want, "{}", String::from_utf8_lossy(raw));
        }
    });
}

#[test]
fn chunked_body_arriving_a_byte_at_a_time() {
    let body = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nGET /next";
    let framed = body.len() - b"GET /next".len();
    with_site(|site| {
        with_head(CHUNKED_POST, |head| {
            let mut g = gathering(head, site);
            for n in 0..framed {
                assert_eq!(g.gather(head, &body[..n]), Gathered::Incomplete, "{n}");
            }
            assert_eq!(
                g.gather(head, &body[..framed]),
                Gathered::Complete(Cow::Owned(b"hello world".to_vec()), framed)
            );
        });
    });
}

#[test]
fn chunked_input_is_decoded_once() {
    // Each call sees the earlier input again; a gatherer that decoded it again
    // would trip over the bytes overwritten here once they were consumed.
    let body = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    with_site(|site| {
        with_head(CHUNKED_POST, |head| {
            let mut g = gathering(head, site);
            let mut input = body[..12].to_vec();
            assert_eq!(g.gather(head, &input), Gathered::Incomplete);
            input.fill(b'!');
            input.extend_from_slice(&body[12..]);
            assert_eq!(
                g.gather(head, &input),
                Gathered::Complete(Cow::Owned(b"hello world".to_vec()), body.len())
            );
        });
    });
}

#[test]
fn bodies_over_the_limit_or_malformed_are_refused() {
    with_site(|site| {
        with_head(CHUNKED_POST, |head| {
            let mut g = gathering(head, site);
            assert_eq!(g.gather(head, b"41\r\n"), Gathered::Incomplete);
            let big = [b'x'; 65];
            assert_eq!(
                g.gather(head, &[&b"41\r\n"[..], &big].concat()),
                Gathered::Refused(413, "request body too large")
            );
            let mut g = gathering(head, site);
            assert_eq!(
                g.gather(head, b"5\r\nhelloXX"),
                Gathered::Refused(400, "malformed chunked body")
            );
        });
        let long = b"POST /cgi-bin/e HTTP/1.1\r\nHost: t\r\nContent-Length: 65\r\n\r\n";
        with_head(long, |head| {
            let mut g = gathering(head, site);
            assert_eq!(
                g.gather(head, b""),
                Gathered::Refused(413, "request body too large")
            );
        });
        let sized = b"POST /cgi-bin/e HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\n";
        with_head(sized, |head| {
            let mut g = gathering(head, site);
            assert_eq!(g.gather(head, b"ab"), Gathered::Incomplete);
            assert_eq!(
                g.gather(head, b"abcGET"),
                Gathered::Complete(Cow::Borrowed(b"abc"), 3)
            );
        });
    });
}

#[test]
fn continue_is_sent_once() {
    let raw =
        b"POST /cgi-bin/e HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n";
    with_site(|site| {
        with_head(raw, |head| {
            let mut g = gathering(head, site);
            assert!(g.wants_continue(head));
            assert!(!g.wants_continue(head));
        });
    });
}

#[test]
fn skipped_chunked_body_in_pieces() {
    let body = b"3\r\nabc\r\n0\r\n\r\nGET";
    let mut d = Discard::new(BodyKind::Chunked, Instant::now()).expect("a body");
    let mut pos = 0;
    for end in 1..body.len() - 3 {
        let (used, done) = d.skip(&body[pos..end], 10).expect("well formed");
        pos += used;
        assert!(!done);
    }
    assert_eq!(d.skip(&body[pos..], 10), Ok((body.len() - 3 - pos, true)));
    assert_eq!(d.seen, 3);
    let mut d = Discard::new(BodyKind::Length(4), Instant::now()).expect("a body");
    assert_eq!(d.skip(b"ab", 10), Ok((2, false)));
    assert_eq!(d.skip(b"cdGET", 10), Ok((2, true)));
    assert!(Discard::new(BodyKind::None, Instant::now()).is_none());
}

/// A chunked body to a CGI script, written a chunk at a time after `100 Continue`
/// (so the server reads the head alone first), comes back whole from `cat`.
#[test]
fn chunked_body_in_many_writes_reaches_the_script() {
    use std::io::{Read, Write};
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().expect("tempdir");
    let (root, scripts) = (dir.path().join("root"), dir.path().join("cgi-bin"));
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::create_dir_all(&scripts).expect("mkdir");
    let echo = scripts.join("echo");
    std::fs::write(
        &echo,
        "#!/bin/sh\nprintf 'Content-Type: text/plain\\n\\n'; cat\n",
    )
    .expect("write the script");
    std::fs::set_permissions(&echo, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let listen = "127.0.0.1:0".parse().expect("address");
    let mut config = Config::new(root, vec![listen]);
    config.workers = 1;
    let mut cgi = CgiConfig::new();
    cgi.mounts.push(CgiMount {
        prefix: "/cgi-bin/".into(),
        dir: scripts,
    });
    config.cgi = Some(cgi);
    let server = crate::Server::bind(config).expect("bind");
    let addr = server.local_addrs()[0];
    let (trigger, shutdown) = stoa_netkit::shutdown::channel();
    let thread = std::thread::spawn(move || server.run(shutdown));

    let mut c = std::net::TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    c.set_nodelay(true).expect("nodelay");
    c.write_all(
        b"POST /cgi-bin/echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\
          Expect: 100-continue\r\nConnection: close\r\n\r\n",
    )
    .expect("send the head");
    let mut interim = [0; 25];
    c.read_exact(&mut interim).expect("read 100 Continue");
    assert_eq!(&interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    let mut want = Vec::new();
    for i in 0..300usize {
        let byte = b'a' + (i % 26) as u8;
        want.push(byte);
        c.write_all(&[b'1', b'\r', b'\n', byte, b'\r', b'\n'])
            .expect("send a chunk");
    }
    c.write_all(b"0\r\n\r\n").expect("send the last chunk");
    let mut response = Vec::new();
    c.read_to_end(&mut response).expect("read the response");
    let text = String::from_utf8_lossy(&response);
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.ends_with(&format!("\r\n\r\n{}", String::from_utf8_lossy(&want))));

    trigger.trigger();
    thread.join().expect("server thread").expect("run");
}
