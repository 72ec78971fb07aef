//! HTTPS listeners over real sockets: responses through TLS (memory bodies, files
//! read into records, pipelining, keep-alive), ALPN, the protocol versions and
//! cipher suites a raw ClientHello can get, malformed and stalled handshakes beside
//! an established connection, the head deadline over the handshake, and stalled
//! handshakes that must not make others wait.

mod common;

use std::io::{ErrorKind, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use stoa_testkit::http::{Client, Closed, get};

use common::{A_TXT, B_TXT, BIG_LEN, C_HTML, HUNDRED_K, TestServer, pattern};

/// A TLS record: `ClientHello` (handshake) with the given `legacy_version` and
/// cipher suites, and the extensions any TLS 1.2 server needs to pick an ECDHE
/// suite. No `supported_versions`: this client speaks `version` only.
fn client_hello(version: u16, suites: &[u16]) -> Vec<u8> {
    fn extension(out: &mut Vec<u8>, kind: u16, data: &[u8]) {
        out.extend(kind.to_be_bytes());
        out.extend((data.len() as u16).to_be_bytes());
        out.extend(data);
    }
    let mut body = version.to_be_bytes().to_vec();
    body.extend([7; 32]); // random
    body.push(0); // no session id
    body.extend(((suites.len() * 2) as u16).to_be_bytes());
    suites.iter().for_each(|s| body.extend(s.to_be_bytes()));
    body.extend([1, 0]); // compression: null
    let mut ext = Vec::new();
    extension(&mut ext, 10, &[0, 4, 0x00, 0x1d, 0x00, 0x17]); // x25519, P-256
    extension(&mut ext, 11, &[1, 0]); // uncompressed points
    extension(&mut ext, 13, &[0, 6, 4, 3, 8, 4, 4, 1]); // ECDSA-P256, PSS, PKCS#1
    body.extend((ext.len() as u16).to_be_bytes());
    body.extend(ext);
    let mut handshake = vec![1]; // client_hello
    handshake.extend(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend(body);
    let mut record = vec![22, 3, 1];
    record.extend((handshake.len() as u16).to_be_bytes());
    record.extend(handshake);
    record
}

/// The server's first record to `hello`: `Ok(suite)` for a ServerHello, or
/// `Err(alert description)` for a fatal alert.
fn first_answer(addr: SocketAddr, hello: &[u8]) -> Result<u16, u8> {
    let mut c = Client::connect(addr);
    c.send(hello);
    let header = c.read_exact_raw(5);
    let body = c.read_exact_raw(usize::from(u16::from_be_bytes([header[3], header[4]])));
    match header[0] {
        21 => {
            assert_eq!(body[0], 2, "a fatal alert");
            c.drain_until_closed();
            Err(body[1])
        }
        22 => {
            assert_eq!(body[0], 2, "a ServerHello");
            // type, length (3), version (2), random (32), then the session id.
            let sid = 4 + 2 + 32;
            let suite = sid + 1 + usize::from(body[sid]);
            Ok(u16::from_be_bytes([body[suite], body[suite + 1]]))
        }
        other => panic!("record type {other} in answer to a ClientHello"),
    }
}

const ECDHE_ECDSA_AES128_GCM: u16 = 0xc02b;
const ECDHE_RSA_AES128_GCM: u16 = 0xc02f;
/// RC4 and 3DES suites, with RSA and ECDHE key exchange.
const OBSOLETE: [u16; 6] = [0x0005, 0x0004, 0x000a, 0xc007, 0xc011, 0xc012];
const HANDSHAKE_FAILURE: u8 = 40;
const PROTOCOL_VERSION: u8 = 70;

#[test]
fn files_from_memory_and_from_disk_over_keep_alive_and_pipelining() {
    let server = TestServer::with_tls(|_| {});
    let mut c = server.connect_tls();
    assert_eq!(c.tls().alpn_protocol(), Some(&b"http/1.1"[..]));
    assert_eq!(
        c.tls().protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_3)
    );

    let small = c.get("/a.txt");
    assert_eq!((small.status, small.body.as_slice()), (200, A_TXT));
    // Above the in-memory size: read from the file into 16 KiB records.
    let big = c.get("/big.bin");
    assert_eq!(big.status, 200);
    assert!(big.body == pattern(BIG_LEN), "big.bin differs over TLS");
    let range = c.roundtrip(
        &stoa_testkit::http::request("GET", "/100k.bin", &[("Range", "bytes=70000-")]),
        false,
    );
    assert_eq!(range.status, 206);
    assert!(range.body == pattern(HUNDRED_K)[70_000..]);

    let mut wire = Vec::new();
    for path in ["/b.txt", "/big.bin", "/c.html"] {
        wire.extend(get(path));
    }
    c.send(&wire);
    assert_eq!(c.response().body, B_TXT);
    assert!(c.response().body == pattern(BIG_LEN));
    assert_eq!(c.response().body, C_HTML);

    let last = c.roundtrip(
        &stoa_testkit::http::request("GET", "/a.txt", &[("Connection", "close")]),
        false,
    );
    assert!(last.closes());
    // A clean end: close_notify, then EOF.
    assert_eq!(c.expect_closed(), Closed::Eof);
}

#[test]
fn the_plain_listener_is_unchanged_beside_the_tls_one() {
    let server = TestServer::with_tls(|_| {});
    let mut plain = server.connect();
    assert_eq!(plain.get("/a.txt").body, A_TXT);
    // Plain HTTP to the TLS port is not a ClientHello: closed.
    let mut wrong = Client::connect(server.tls_addr());
    wrong.send(&get("/a.txt"));
    wrong.drain_until_closed();
}

#[test]
fn only_tls_1_2_and_1_3_with_modern_suites_are_offered() {
    let server = TestServer::with_tls(|_| {});
    let addr = server.tls_addr();
    // The control: this ClientHello builder can get a TLS 1.2 handshake.
    let modern = [ECDHE_ECDSA_AES128_GCM, ECDHE_RSA_AES128_GCM];
    assert_eq!(
        first_answer(addr, &client_hello(0x0303, &modern)),
        Ok(ECDHE_ECDSA_AES128_GCM)
    );
    let mut both = OBSOLETE.to_vec();
    both.push(ECDHE_ECDSA_AES128_GCM);
    assert_eq!(
        first_answer(addr, &client_hello(0x0303, &both)),
        Ok(ECDHE_ECDSA_AES128_GCM)
    );

    assert_eq!(
        first_answer(addr, &client_hello(0x0303, &OBSOLETE)),
        Err(HANDSHAKE_FAILURE),
        "RC4 and 3DES must not be accepted"
    );
    for old in [0x0301, 0x0302] {
        assert_eq!(
            first_answer(addr, &client_hello(old, &modern)),
            Err(PROTOCOL_VERSION),
            "TLS version {old:#06x} must be refused"
        );
    }
}

/// The first bytes of a real ClientHello (from a rustls client).
fn half_a_client_hello() -> Vec<u8> {
    let config = common::client_config(&[]);
    let name = "localhost".try_into().expect("name");
    let mut conn = rustls::ClientConnection::new(config, name).expect("client");
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).expect("ClientHello");
    assert_eq!(hello[0], 22, "a handshake record");
    hello.truncate(hello.len() / 2);
    hello
}

#[test]
fn broken_handshakes_are_closed_without_disturbing_an_established_connection() {
    let server = TestServer::with_tls(|c| {
        c.workers = 1;
        c.limits.head_timeout = Duration::from_millis(500);
        c.limits.head_timeout_max = Duration::from_millis(500);
        c.limits.keepalive_timeout = Duration::from_secs(30);
    });
    let mut established = server.connect_tls();
    assert_eq!(established.get("/a.txt").body, A_TXT);

    // Garbage instead of a ClientHello.
    let mut garbage = Client::connect(server.tls_addr());
    garbage.send(&[0x16, 0x03, 0x01, 0x00, 0x05, 0xde, 0xad, 0xbe, 0xef, 0x00]);
    garbage.drain_until_closed();
    // Half a ClientHello, then the client goes away.
    let half = half_a_client_hello();
    let mut quitter = Client::connect(server.tls_addr());
    quitter.send(&half);
    quitter.shutdown_write();
    assert_eq!(quitter.drain_until_closed(), (0, Closed::Eof));
    // Half a ClientHello, then nothing: the head deadline closes it.
    let mut staller = Client::connect(server.tls_addr());
    staller.send(&half);
    let started = Instant::now();
    assert_eq!(staller.drain_until_closed(), (0, Closed::Eof));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "closed by the deadline"
    );

    // The established connection was kept and still works (on the same worker).
    assert_eq!(established.get("/b.txt").body, B_TXT);
    assert!(established.get("/big.bin").body == pattern(BIG_LEN));
}

#[test]
fn the_head_deadline_covers_the_handshake_and_the_first_request() {
    let server = TestServer::with_tls(|c| {
        c.limits.head_timeout = Duration::from_millis(300);
        c.limits.head_timeout_max = Duration::from_millis(300);
    });
    // A connection that never says anything.
    let mut silent = Client::connect(server.tls_addr());
    assert_eq!(silent.drain_until_closed(), (0, Closed::Eof));
    // A handshake, then no request: closed cleanly (close_notify) by the same clock.
    let mut idle = server.connect_tls();
    assert_eq!(idle.expect_closed(), Closed::Eof);
}

/// A whole ClientHello from a rustls client.
fn a_client_hello() -> Vec<u8> {
    let config = common::client_config(&[]);
    let name = "localhost".try_into().expect("name");
    let mut conn = rustls::ClientConnection::new(config, name).expect("client");
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).expect("ClientHello");
    hello
}

/// Issue 21, hole 1: 600 connections that sent the first 60 bytes of a
/// ClientHello held the worker's handshake slots, and a real client waited until
/// their head deadline. Neither those nor clients that stall after a complete
/// ClientHello may hold a slot: a real client's handshake and first request finish
/// at once, far within the head deadline.
#[test]
fn stalled_handshakes_do_not_make_a_complete_one_wait() {
    const MAX_HANDSHAKES: usize = 16;
    /// Connections that stall mid-ClientHello, as in the attack.
    const PARTIAL: usize = 600;
    /// Connections that send a whole ClientHello and never answer the flight.
    const WHOLE: usize = 2 * MAX_HANDSHAKES;
    /// Far below the head deadline (20 s), far above a loopback handshake.
    const BOUND: Duration = Duration::from_secs(2);
    let server = TestServer::with_tls(|c| {
        c.workers = 1;
        c.limits.max_handshakes = MAX_HANDSHAKES;
        c.limits.head_timeout = Duration::from_secs(20);
        c.limits.head_timeout_max = Duration::from_secs(20);
    });
    let mut established = server.connect_tls();
    let whole = a_client_hello();
    let mut stalled = Vec::with_capacity(PARTIAL + WHOLE);
    for i in 0..PARTIAL + WHOLE {
        let mut s = TcpStream::connect(server.tls_addr()).expect("connect");
        let bytes = if i < PARTIAL {
            &whole[..60]
        } else {
            &whole[..]
        };
        s.write_all(bytes).expect("send");
        stalled.push(s);
    }
    // The stalled connections are all in the listener's queue before this one.
    let started = Instant::now();
    let mut real = server.connect_tls();
    assert_eq!(real.get("/a.txt").body, A_TXT);
    let took = started.elapsed();
    assert!(took < BOUND, "a complete handshake waited {took:?}");
    assert_eq!(established.get("/b.txt").body, B_TXT);
    drop(stalled);
}

/// A ClientHello longer than any real one is refused before it is complete, not
/// buffered until the head deadline.
#[test]
fn an_endless_client_hello_is_cut_off() {
    let server = TestServer::with_tls(|c| {
        c.limits.head_timeout = Duration::from_secs(20);
        c.limits.head_timeout_max = Duration::from_secs(20);
    });
    let mut c = Client::connect(server.tls_addr());
    // A ClientHello announcing 60 KiB (rustls joins up to 64 KiB), of which 20 KiB
    // arrive, in 16 KiB records.
    let mut body = vec![1, 0x00, 0xf0, 0x00];
    body.resize(20 * 1024, 0);
    let mut wire = Vec::new();
    for chunk in body.chunks(16 * 1024) {
        wire.extend([22, 3, 1]);
        wire.extend((chunk.len() as u16).to_be_bytes());
        wire.extend(chunk);
    }
    let started = Instant::now();
    let _ = c.try_send(&wire);
    c.drain_until_closed();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(2), "closed after {took:?}");
    assert_eq!(server.connect_tls().get("/a.txt").body, A_TXT);
}

#[test]
fn the_multi_thread_runtime_serves_tls_too() {
    let server = TestServer::with_tls(|c| c.runtime = stoa_web::config::RuntimeModel::MultiThread);
    let mut c = server.connect_tls();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    assert!(c.get("/big.bin").body == pattern(BIG_LEN));
}

#[test]
fn the_access_log_counts_the_body_bytes_sent_over_tls() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("access.log");
    let mut server = TestServer::with_tls(|c| common::combined_log(c, log.clone()));
    let mut c = server.connect_tls();
    assert_eq!(c.get("/a.txt").body, A_TXT);
    assert!(c.get("/big.bin").body == pattern(BIG_LEN));
    drop(c);
    server.shutdown();
    let text = std::fs::read_to_string(&log).expect("read the access log");
    for (request, bytes) in [("GET /a.txt ", A_TXT.len()), ("GET /big.bin ", BIG_LEN)] {
        let line = text
            .lines()
            .find(|l| l.contains(request))
            .unwrap_or_else(|| panic!("no line for {request:?} in:\n{text}"));
        assert!(line.contains(&format!("\" 200 {bytes} ")), "{line:?}");
    }
}

#[test]
fn a_client_that_never_reads_is_cut_off_by_the_send_timeout() {
    let server = TestServer::with_tls(|c| c.limits.send_timeout = Duration::from_millis(500));
    let mut c = server.connect_tls();
    let start = Instant::now();
    // Keeps asking for 100 KiB files without reading a byte; the requests are
    // encrypted here and written raw, so the writer never reads either. Once the
    // server gives up and closes with requests unread, its kernel resets the
    // connection and our writes fail.
    let writer = std::thread::spawn(move || {
        let mut w = c.writer();
        w.set_write_timeout(Some(Duration::from_millis(200)))
            .expect("write timeout");
        let batch = get("/100k.bin").repeat(1000);
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            let wire = c.encrypt(&batch);
            let mut sent = 0;
            while sent < wire.len() && Instant::now() < deadline {
                match w.write(&wire[sent..]) {
                    Ok(n) => sent += n,
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                    Err(_) => return true,
                }
            }
        }
        false
    });
    assert!(
        writer.join().expect("writer thread"),
        "the server never gave up"
    );
    let took = start.elapsed();
    assert!(took < Duration::from_secs(10), "cut off after {took:?}");
    // The worker is free for others.
    assert_eq!(server.connect_tls().get("/a.txt").body, A_TXT);
}
