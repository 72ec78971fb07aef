//! The multi-thread (work-stealing) runtime model serves the same protocol.

mod common;

use std::time::Duration;

use stoa_testkit::http::get;

use common::{A_TXT, B_TXT, BIG_LEN, C_HTML, TestServer, pattern};
use stoa_web::config::RuntimeModel;

fn multi_thread() -> TestServer {
    TestServer::with(|c| c.runtime = RuntimeModel::MultiThread)
}

#[test]
fn multi_thread_serves_files_keep_alive_and_pipelines() {
    let mut s = multi_thread();
    let mut c = s.connect();
    let r = c.get("/a.txt");
    assert_eq!((r.status, r.body.as_slice()), (200, A_TXT));
    assert!(r.header("ETag").is_some());
    c.send(&[get("/b.txt"), get("/big.bin"), get("/c.html")].concat());
    assert_eq!(c.response().body, B_TXT);
    let big = c.response();
    assert_eq!(big.body.len(), BIG_LEN);
    assert!(big.body == pattern(BIG_LEN));
    assert_eq!(c.response().body, C_HTML);
    assert_eq!(c.get("/missing").status, 404);
    // Several connections at once.
    let mut others: Vec<_> = (0..8).map(|_| s.connect()).collect();
    for o in &mut others {
        o.send(&get("/a.txt"));
    }
    for o in &mut others {
        assert_eq!(o.response().body, A_TXT);
    }
    drop(others);
    drop(c);
    let took = s.shutdown();
    assert!(
        took < Duration::from_secs(3),
        "run() returned after {took:?}"
    );
}

#[test]
fn multi_thread_refuses_bad_framing_and_closes() {
    let s = multi_thread();
    common::assert_rejected(
        &s,
        b"GET /a.txt HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        400,
    );
}

#[test]
fn multi_thread_access_log_is_flushed_at_shutdown() {
    let fixture = common::Fixture::new();
    let log = fixture.outside().join("mt.log");
    let mut config = fixture.config();
    config.runtime = RuntimeModel::MultiThread;
    common::combined_log(&mut config, log.clone());
    let mut s = fixture.start(config);
    let mut c = s.connect();
    for i in 0..20 {
        assert_eq!(c.get(&format!("/a.txt?mt={i}")).body, A_TXT);
    }
    drop(c);
    s.shutdown();
    let text = std::fs::read_to_string(&log).expect("read log");
    for i in 0..20 {
        let needle = format!("\"GET /a.txt?mt={i} HTTP/1.1\" 200 ");
        assert_eq!(text.matches(&needle).count(), 1, "{needle}\n{text}");
    }
}
