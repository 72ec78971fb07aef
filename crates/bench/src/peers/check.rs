//! The static workload's byte-for-byte check: each file a server serves comes
//! back `200` with exactly the bytes on disk. A server that sends other bytes
//! (a truncated sendfile, a stale cache) would be measured doing less work,
//! so a run after which the check fails is an error, not a figure.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};

/// Longest one fetch may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// The largest response read (the files are at most 100 KiB).
const MAX_RESPONSE: u64 = 1 << 20;

/// `GET /NAME` of each of `files` from `addr` compared with `docroot/NAME`.
pub(crate) fn served_files_match(
    addr: SocketAddr,
    docroot: &Path,
    files: &[&str],
) -> anyhow::Result<()> {
    for name in files {
        let want = std::fs::read(docroot.join(name))
            .with_context(|| format!("cannot read {name} from the document root"))?;
        let response = fetch(addr, name).with_context(|| format!("GET /{name}"))?;
        body_matches(&response, &want).with_context(|| format!("GET /{name}"))?;
    }
    Ok(())
}

/// The whole response to `GET /NAME` on a connection of its own, closed by
/// the server.
fn fetch(addr: SocketAddr, name: &str) -> anyhow::Result<Vec<u8>> {
    let mut s = TcpStream::connect_timeout(&addr, TIMEOUT)?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    // One write: a server that reads the request in one go sees all of it.
    let request = format!("GET /{name} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes())?;
    let mut out = Vec::new();
    s.take(MAX_RESPONSE).read_to_end(&mut out)?;
    Ok(out)
}

/// Whether `response` is a `200` whose body is `want`, byte for byte.
fn body_matches(response: &[u8], want: &[u8]) -> anyhow::Result<()> {
    let Some(end) = response.windows(4).position(|w| w == b"\r\n\r\n") else {
        bail!("no complete response head ({} bytes)", response.len());
    };
    let head = String::from_utf8_lossy(&response[..end]);
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        bail!("status line {status:?}, want 200");
    }
    let body = &response[end + 4..];
    if body != want {
        let at = body.iter().zip(want).position(|(a, b)| a != b);
        bail!(
            "{} bytes served, {} on disk; they differ {}",
            body.len(),
            want.len(),
            at.map_or("in length".to_owned(), |i| format!("from byte {i}"))
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_200_with_the_bytes_on_disk_matches() {
        let ok = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
        assert!(body_matches(ok, b"abc").is_ok());
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nab";
        let e = body_matches(short, b"abc").expect_err("short");
        assert!(e.to_string().contains("in length"), "{e}");
        let other = b"HTTP/1.1 200 OK\r\n\r\nabd";
        let e = body_matches(other, b"abc").expect_err("other bytes");
        assert!(e.to_string().contains("from byte 2"), "{e}");
        let missing = b"HTTP/1.1 404 Not Found\r\n\r\nabc";
        assert!(body_matches(missing, b"abc").is_err());
        assert!(body_matches(b"HTTP/1.1 200 OK\r\n", b"").is_err());
    }

    #[test]
    fn a_server_is_fetched_from_and_compared() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("1k.bin"), b"right").expect("file");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("listener");
        let addr = listener.local_addr().expect("addr");
        let server = std::thread::spawn(move || {
            for body in ["right", "wrong"] {
                let (mut c, _) = listener.accept().expect("accept");
                // The whole request read, so closing sends no reset.
                let mut request = Vec::new();
                let mut byte = [0u8; 1];
                while !request.ends_with(b"\r\n\r\n") && c.read(&mut byte).expect("request") == 1 {
                    request.push(byte[0]);
                }
                let response = format!("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{body}");
                c.write_all(response.as_bytes()).expect("response");
            }
        });
        assert!(served_files_match(addr, dir.path(), &["1k.bin"]).is_ok());
        assert!(served_files_match(addr, dir.path(), &["1k.bin"]).is_err());
        server.join().expect("server thread");
    }
}
