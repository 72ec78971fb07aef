use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::shutdown;

/// A deadline no test reaches.
const FAR: Duration = Duration::from_secs(60);

/// A connected loopback pair: the server side as a [`LineIo`], and the client.
async fn pair(read_chunk: usize, max_buffered: usize) -> (LineIo, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let (client, accepted) = tokio::join!(TcpStream::connect(addr), listener.accept());
    let (server, _) = accepted.expect("accept");
    let io = LineIo::new(Stream::Plain(server), read_chunk, max_buffered);
    (io, client.expect("connect"))
}

fn far() -> Instant {
    Instant::now() + FAR
}

/// Reads until at least `len` bytes are unread.
async fn read_until(io: &mut LineIo, len: usize) {
    while io.unread().len() < len {
        assert_eq!(io.read(far(), None).await.expect("read"), ReadEnd::Data);
    }
}

#[tokio::test]
async fn partial_input_stays_unread_until_consumed() {
    let (mut io, mut client) = pair(64, 128).await;
    client.write_all(b"HEL").await.expect("write");
    read_until(&mut io, 3).await;
    assert_eq!(io.unread(), b"HEL");
    client.write_all(b"O x\r\nNOOP\r\n").await.expect("write");
    read_until(&mut io, 14).await;
    assert_eq!(io.unread(), b"HELO x\r\nNOOP\r\n");
    io.consume(8);
    assert_eq!(io.unread(), b"NOOP\r\n");
    client.write_all(b"QU").await.expect("write");
    read_until(&mut io, 8).await;
    assert_eq!(io.unread(), b"NOOP\r\nQU");
    io.consume(8);
    assert!(io.unread().is_empty());
}

#[tokio::test]
async fn the_buffer_never_holds_more_than_its_maximum() {
    let (mut io, mut client) = pair(4, 10).await;
    client.write_all(&[b'x'; 25]).await.expect("write");
    read_until(&mut io, 10).await;
    assert_eq!(io.unread().len(), 10, "a read takes only what fits");
    let full = io.read(far(), None).await.expect_err("no room left");
    assert_eq!(full.kind(), io::ErrorKind::InvalidData);
    // Consuming makes room again, and the rest arrives.
    io.consume(10);
    read_until(&mut io, 10).await;
    io.consume(10);
    read_until(&mut io, 5).await;
    assert_eq!(io.unread(), &[b'x'; 5]);
}

#[tokio::test]
async fn a_passed_deadline_ends_the_wait() {
    let (mut io, _client) = pair(64, 128).await;
    let deadline = Instant::now() + Duration::from_millis(30);
    assert_eq!(
        io.read(deadline, None).await.expect("read"),
        ReadEnd::Timeout
    );
    assert!(Instant::now() >= deadline);
    assert_eq!(
        io.read(Instant::now(), None).await.expect("read"),
        ReadEnd::Timeout
    );
}

#[tokio::test]
async fn shutdown_ends_the_wait_only_when_listened_for() {
    let (trigger, mut signal) = shutdown::channel();
    let (mut io, mut client) = pair(64, 128).await;
    // Shutdown during the wait.
    let (end, ()) = tokio::join!(io.read(far(), Some(&mut signal)), async {
        trigger.trigger();
    });
    assert_eq!(end.expect("read"), ReadEnd::Draining);
    // Shutdown already under way: draining at once, even with input waiting.
    client.write_all(b"NOOP\r\n").await.expect("write");
    let end = io.read(far(), Some(&mut signal)).await.expect("read");
    assert_eq!(end, ReadEnd::Draining);
    // Not listening: the input is read.
    read_until(&mut io, 6).await;
    assert_eq!(io.unread(), b"NOOP\r\n");
}

#[tokio::test]
async fn a_closed_peer_is_eof() {
    let (mut io, mut client) = pair(64, 128).await;
    client.write_all(b"QUIT").await.expect("write");
    drop(client);
    read_until(&mut io, 4).await;
    assert_eq!(io.read(far(), None).await.expect("read"), ReadEnd::Eof);
    assert_eq!(io.unread(), b"QUIT", "EOF keeps what was buffered");
}

#[tokio::test]
async fn flush_sends_the_queue_and_empties_it() {
    let (mut io, mut client) = pair(64, 128).await;
    io.flush(FAR).await.expect("nothing to flush");
    io.out().extend_from_slice(b"+OK one\r\n");
    io.out().extend_from_slice(b"+OK two\r\n");
    assert_eq!(io.queued(), 18);
    io.flush(FAR).await.expect("flush");
    assert_eq!(io.queued(), 0);
    let mut got = [0; 18];
    client.read_exact(&mut got).await.expect("read");
    assert_eq!(&got, b"+OK one\r\n+OK two\r\n");
}

#[tokio::test]
async fn flush_to_a_peer_that_does_not_read_times_out() {
    let (mut io, _client) = pair(64, 128).await;
    // Far more than loopback's socket buffers hold.
    io.out().resize(64 * 1024 * 1024, b'x');
    let err = io
        .flush(Duration::from_millis(50))
        .await
        .expect_err("stuck");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
}

#[tokio::test]
async fn start_tls_drops_the_plaintext_and_reads_through_tls() {
    let (acceptor, connector) = tls_pair();
    let (mut io, mut client) = pair(64, 128).await;
    client.write_all(b"STLS\r\nPLAIN").await.expect("write");
    read_until(&mut io, 11).await;
    io.consume(6);
    let handshake = async {
        let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
        connector
            .connect(name, client)
            .await
            .expect("client handshake")
    };
    let (upgraded, mut tls_client) = tokio::join!(io.start_tls(&acceptor, FAR), handshake);
    upgraded.expect("server handshake");
    assert!(io.unread().is_empty(), "the plaintext is gone");
    tls_client.write_all(b"CAPA\r\n").await.expect("write");
    tls_client.flush().await.expect("flush");
    read_until(&mut io, 6).await;
    assert_eq!(io.unread(), b"CAPA\r\n");
}

#[tokio::test]
async fn a_handshake_that_does_not_come_times_out() {
    let (acceptor, _connector) = tls_pair();
    let (mut io, _client) = pair(64, 128).await;
    let err = io
        .start_tls(&acceptor, Duration::from_millis(30))
        .await
        .expect_err("no client hello");
    assert_eq!(err.kind(), io::ErrorKind::TimedOut);
}

/// A server acceptor with a self-signed certificate for `localhost`, and a client
/// connector that trusts it.
fn tls_pair() -> (TlsAcceptor, tokio_rustls::TlsConnector) {
    let generated =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("certificate");
    let dir = tempfile::tempdir().expect("tempdir");
    let pair = crate::tls::CertKeyFiles {
        cert: dir.path().join("c.crt"),
        key: dir.path().join("c.key"),
    };
    std::fs::write(&pair.cert, generated.cert.pem()).expect("write the certificate");
    std::fs::write(&pair.key, generated.signing_key.serialize_pem()).expect("write the key");
    let server = crate::tls::server_config(&[pair], &[]).expect("server config");
    let mut roots = rustls::RootCertStore::empty();
    roots.add(generated.cert.der().clone()).expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    (
        TlsAcceptor::from(server),
        tokio_rustls::TlsConnector::from(Arc::new(client)),
    )
}

#[tokio::test]
async fn a_parked_wait_holds_no_buffer_and_loses_nothing() {
    let (mut io, mut client) = pair(4096, 65536).await;
    client.write_all(b"a NOOP\r\n").await.expect("write");
    read_until(&mut io, 8).await;
    io.consume(8);
    io.out().extend_from_slice(b"a OK\r\n");
    io.flush(FAR).await.expect("flush");
    let soon = Instant::now() + Duration::from_millis(20);
    assert_eq!(
        io.read_parked(soon, None).await.expect("wait"),
        ReadEnd::Timeout
    );
    assert_eq!(io.buf.capacity(), 0, "no read buffer while waiting");
    assert_eq!(io.out.capacity(), 0, "no output queue while waiting");
    client.write_all(b"DONE\r\n").await.expect("write");
    assert_eq!(
        io.read_parked(far(), None).await.expect("read"),
        ReadEnd::Data
    );
    read_until(&mut io, 6).await;
    assert_eq!(io.unread(), b"DONE\r\n");
    // With bytes unread, nothing is given back and the read appends.
    client.write_all(b"x").await.expect("write");
    assert_eq!(
        io.read_parked(far(), None).await.expect("read"),
        ReadEnd::Data
    );
    assert_eq!(io.unread(), b"DONE\r\nx");
}

#[tokio::test]
async fn a_buffer_grown_for_one_command_is_not_kept() {
    let (mut io, mut client) = pair(4096, 1 << 20).await;
    let big = vec![b'x'; 300 * 1024];
    client.write_all(&big).await.expect("write");
    read_until(&mut io, big.len()).await;
    assert!(io.buf.capacity() >= big.len());
    io.consume(big.len());
    io.out().extend_from_slice(&big);
    io.flush(FAR).await.expect("flush");
    let mut sink = vec![0u8; big.len()];
    client.read_exact(&mut sink).await.expect("read");
    let soon = Instant::now() + Duration::from_millis(20);
    assert_eq!(io.read(soon, None).await.expect("wait"), ReadEnd::Timeout);
    assert!(io.buf.capacity() <= KEPT_CAPACITY, "{}", io.buf.capacity());
    assert!(io.out.capacity() <= KEPT_CAPACITY, "{}", io.out.capacity());
}
