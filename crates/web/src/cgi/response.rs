//! A CGI script's output (RFC 3875 §6): header lines, a blank line, the body.

use bytes::Bytes;

use super::Refusal;
use crate::output::{Body, Output};
use crate::response::Reply;

/// A script's answer, ready to send.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    pub(crate) status: u16,
    /// Header lines to pass on, each ending in CRLF.
    pub(crate) headers: Vec<u8>,
    pub(crate) body: Vec<u8>,
}

/// Headers the server sets itself or that describe the script's connection, not
/// the response.
const DROPPED: [&str; 6] = [
    "connection",
    "content-length",
    "transfer-encoding",
    "keep-alive",
    "date",
    "server",
];

/// Parses script output of at most `max` bytes.
pub(crate) fn parse(output: &[u8], max: usize) -> Result<Parsed, Refusal> {
    if output.len() > max {
        return Err((502, "the script's output is too large"));
    }
    let (head, body) = split_head(output).ok_or((
        502,
        "malformed CGI response: no blank line after the headers",
    ))?;
    let mut status = None;
    let mut has_type = false;
    let mut has_location = false;
    let mut headers = Vec::new();
    for line in head.split(|&b| b == b'\n').filter(|_| !head.is_empty()) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let (name, value) =
            split_field(line).ok_or((502, "malformed header line in CGI response"))?;
        match name.to_ascii_lowercase().as_str() {
            "status" => status = Some(parse_status(value)?),
            "content-type" => has_type = true,
            "location" => has_location = true,
            dropped if DROPPED.contains(&dropped) => continue,
            _ => {}
        }
        if !name.eq_ignore_ascii_case("status") {
            headers.extend_from_slice(name.as_bytes());
            headers.extend_from_slice(b": ");
            headers.extend_from_slice(value);
            headers.extend_from_slice(b"\r\n");
        }
    }
    if !has_type && !has_location && !body.is_empty() {
        return Err((502, "CGI response with a body but no Content-Type"));
    }
    let status = status.unwrap_or(if has_location { 302 } else { 200 });
    Ok(Parsed {
        status,
        headers,
        body: body.to_vec(),
    })
}

/// The header section and the body; lines may end in LF or CRLF.
fn split_head(output: &[u8]) -> Option<(&[u8], &[u8])> {
    if let Some(rest) = output
        .strip_prefix(b"\r\n")
        .or_else(|| output.strip_prefix(b"\n"))
    {
        return Some((&[], rest));
    }
    let lf = memchr::memmem::find(output, b"\n\n").map(|i| (i, 2));
    let crlf = memchr::memmem::find(output, b"\r\n\r\n").map(|i| (i, 4));
    let (end, gap) = match (lf, crlf) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    Some((&output[..end], &output[end + gap..]))
}

fn split_field(line: &[u8]) -> Option<(&str, &[u8])> {
    let colon = memchr::memchr(b':', line)?;
    let name = std::str::from_utf8(&line[..colon]).ok()?;
    let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    if name.is_empty() || !name.bytes().all(token) {
        return None;
    }
    let value = trim(&line[colon + 1..]);
    if value.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0) {
        return None;
    }
    Some((name, value))
}

fn trim(value: &[u8]) -> &[u8] {
    let start = value
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(value.len());
    let end = value
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |e| e + 1);
    &value[start..end]
}

fn parse_status(value: &[u8]) -> Result<u16, Refusal> {
    let code = value
        .get(..3)
        .and_then(|d| std::str::from_utf8(d).ok())
        .and_then(|d| d.parse().ok());
    match code {
        Some(c) if (200..600).contains(&c) && value.get(3).is_none_or(|&b| b == b' ') => Ok(c),
        _ => Err((502, "malformed Status in CGI response")),
    }
}

/// Queues the script's answer.
pub(crate) fn send(reply: &Reply<'_>, out: &mut Output, parsed: Parsed) {
    let (start, w) = reply.begin(out, parsed.status);
    let w = w
        .raw(&parsed.headers)
        .content_length(parsed.body.len() as u64);
    reply.end(w);
    let body = if parsed.body.is_empty() {
        Body::Empty
    } else {
        Body::Bytes(Bytes::from(parsed.body))
    };
    reply.send(out, parsed.status, start, body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(status: u16, headers: &str, body: &str) -> Result<Parsed, Refusal> {
        Ok(Parsed {
            status,
            headers: headers.as_bytes().to_vec(),
            body: body.as_bytes().to_vec(),
        })
    }

    #[test]
    fn responses() {
        assert_eq!(
            parse(b"Content-Type: text/plain\n\nhi\n", 100),
            ok(200, "Content-Type: text/plain\r\n", "hi\n")
        );
        assert_eq!(
            parse(
                b"Status: 404 Not Found\r\nContent-Type: text/html\r\nX-A: b\r\n\r\n<p>",
                100
            ),
            ok(404, "Content-Type: text/html\r\nX-A: b\r\n", "<p>")
        );
        assert_eq!(
            parse(b"Location: /elsewhere\n\n", 100),
            ok(302, "Location: /elsewhere\r\n", "")
        );
        assert_eq!(
            parse(b"Content-Type: text/plain\nContent-Length: 99\nConnection: close\nSet-Cookie: a=b\n\nx", 100),
            ok(200, "Content-Type: text/plain\r\nSet-Cookie: a=b\r\n", "x")
        );
        assert_eq!(parse(b"Status: 204\n\n", 100), ok(204, "", ""));
        assert_eq!(
            parse(b"\nbody", 100).map(|p| p.status),
            Err((502, "CGI response with a body but no Content-Type"))
        );
    }

    #[test]
    fn malformed_responses() {
        for bad in [
            &b"Content-Type: text/plain"[..],
            b"no colon\n\n",
            b"Bad Name: x\n\n",
            b"Status: abc\nContent-Type: text/plain\n\n",
            b"Status: 99 Low\nContent-Type: text/plain\n\n",
            b"Status: 2000\nContent-Type: text/plain\n\n",
            b"X: a\x00b\nContent-Type: text/plain\n\n",
        ] {
            assert_eq!(
                parse(bad, 100).map(|_| ()).map_err(|e| e.0),
                Err(502),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            parse(&[b'x'; 101], 100).map(|_| ()),
            Err((502, "the script's output is too large"))
        );
    }
}
