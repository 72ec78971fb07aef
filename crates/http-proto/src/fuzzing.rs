//! Fuzz targets, shared by the `cargo fuzz` harness in `fuzz/` and by the corpus
//! replay in `tests/fuzz_corpus.rs`.
//!
//! Each function takes arbitrary bytes and panics (through `assert!`) only when an
//! invariant of the codec is broken; refusing malformed input is not a failure. This
//! module is not part of the crate's API.

use crate::chunked::{ChunkedDecoder, ChunkedError};
use crate::precondition::{ByteRange, if_none_match, parse_range};
use crate::request::{BodyKind, Limits, Method, Status, Version, header_storage, parse_request};
use crate::response::{Framing, ResponseHead, ResponseLimits, parse_response};
use crate::target;

/// Small limits, so that short fuzz inputs reach every limit check too.
const TIGHT: Limits = Limits {
    max_request_line: 64,
    max_header_line: 64,
    max_head: 256,
    max_headers: 4,
};

/// Parses `data` as a connection's worth of pipelined requests, with the default
/// limits and with tight ones, and checks every complete head it finds.
pub fn request(data: &[u8]) {
    for limits in [Limits::default(), TIGHT] {
        let mut rest = data;
        while let Some(next) = request_step(rest, &limits) {
            rest = next;
        }
    }
}

/// Parses one head at the start of `data`, checks it, skips its body and returns
/// what follows; `None` when there is no complete head or body.
fn request_step<'d>(data: &'d [u8], limits: &Limits) -> Option<&'d [u8]> {
    let mut storage = header_storage();
    let head = match parse_request(data, &mut storage, limits) {
        Ok(Status::Complete(head)) => head,
        Ok(Status::Partial) => return None,
        Err(e) => {
            assert!(matches!(e.status(), 400 | 414 | 417 | 431 | 501), "{e}");
            return None;
        }
    };
    let len = head.len;
    assert!(
        len > 0 && len <= data.len(),
        "head length {len} out of bounds"
    );
    assert!(len <= limits.max_head, "head of {len} bytes over max_head");
    assert!(head.headers.len() <= limits.max_headers, "too many headers");
    assert!(
        data[..len].ends_with(b"\r\n\r\n"),
        "head not ended by CRLFCRLF"
    );
    check_prefixes(data, len, limits);
    check_target(head.target);
    for h in head.headers {
        if h.name.eq_ignore_ascii_case("range") {
            check_range(h.value);
        } else if h.name.eq_ignore_ascii_case("if-none-match") {
            if_none_match(h.value, b"\"etag\"");
        }
    }
    let body = &data[len..];
    match head.body {
        BodyKind::None => Some(body),
        BodyKind::Length(n) => body.get(usize::try_from(n).ok()?..),
        BodyKind::Chunked => match chunked_outcome(body) {
            (_, Ok((true, used))) => Some(&body[used..]),
            _ => None,
        },
    }
}

/// The head alone parses to the same length, and a few of its proper prefixes ask
/// for more bytes: a valid head split across reads is never refused. (This is
/// stricter than "not complete": a refused prefix would be a bug too.)
fn check_prefixes(data: &[u8], len: usize, limits: &Limits) {
    let mut storage = header_storage();
    match parse_request(&data[..len], &mut storage, limits) {
        Ok(Status::Complete(alone)) => assert_eq!(alone.len, len, "head alone parses differently"),
        other => panic!("head alone is not complete: {other:?}"),
    }
    for cut in [0, 1, len / 2, len.saturating_sub(2), len - 1] {
        let cut = cut.min(len - 1);
        let prefix = parse_request(&data[..cut], &mut storage, limits);
        assert!(
            matches!(prefix, Ok(Status::Partial)),
            "prefix of {cut} bytes of a {len}-byte head gave {prefix:?}"
        );
    }
}

/// A target that decodes gives an absolute, normalised path without NUL, and
/// decoding that path again (when it has no `%`, `?` or `#`) changes nothing.
fn check_target(raw: &[u8]) {
    let Ok(t) = target::decode(raw) else { return };
    let path: &[u8] = &t.path;
    assert_eq!(path.first(), Some(&b'/'), "decoded path is not absolute");
    assert!(!path.contains(&0), "NUL in decoded path");
    assert!(
        !path.split(|&b| b == b'/').any(|s| s == b"." || s == b".."),
        "dot segment in decoded path {:?}",
        String::from_utf8_lossy(path)
    );
    if !path.iter().any(|b| b"%?#".contains(b)) {
        let again = target::decode(path).expect("a decoded path decodes again");
        assert_eq!(&*again.path, path, "normalisation is not idempotent");
    }
}

/// A satisfiable range lies inside the representation, for a few lengths.
fn check_range(value: &[u8]) {
    for len in [0, 1, 10, u64::MAX] {
        if let ByteRange::Partial { start, end } = parse_range(value, len) {
            assert!(
                start <= end && end < len,
                "range {start}-{end} outside {len}"
            );
        }
    }
}

/// Decodes `data` as a chunked body, fed byte by byte, in 7-byte pieces and whole,
/// and checks that every way gives the same body, end and error.
pub fn chunked(data: &[u8]) {
    let _outcome = chunked_outcome(data);
}

/// What decoding a chunked body gave: the data, then the error or whether the body
/// ended and how many bytes it took.
type Outcome = (Vec<u8>, Result<(bool, usize), ChunkedError>);

/// Decodes `data` in several piece sizes, asserts that all agree, and returns the
/// outcome.
fn chunked_outcome(data: &[u8]) -> Outcome {
    let whole = decode_in_pieces(data, usize::MAX);
    for piece in [1, 7] {
        assert_eq!(decode_in_pieces(data, piece), whole, "piece size {piece}");
    }
    if let (_, Ok((false, used))) = whole {
        assert_eq!(used, data.len(), "unfinished body left input unconsumed");
    }
    whole
}

/// Feeds `data` to a fresh decoder `piece` bytes at a time, as a connection would.
fn decode_in_pieces(data: &[u8], piece: usize) -> Outcome {
    let mut dec = ChunkedDecoder::new();
    let mut body = Vec::new();
    let (mut pos, mut fed) = (0, 0);
    while !dec.is_done() {
        if pos == fed {
            if fed == data.len() {
                break;
            }
            fed = fed.saturating_add(piece).min(data.len());
        }
        let d = match dec.decode(&data[pos..fed]) {
            Ok(d) => d,
            Err(e) => return (body, Err(e)),
        };
        assert!(d.consumed > 0, "no progress on non-empty input");
        assert!(d.data.len() <= d.consumed && d.consumed <= fed - pos);
        assert_eq!(d.done, dec.is_done(), "done flag disagrees with state");
        body.extend_from_slice(d.data);
        pos += d.consumed;
    }
    (body, Ok((dec.is_done(), pos)))
}

/// Small response limits, so that short fuzz inputs reach every limit check too.
const TIGHT_RESPONSE: ResponseLimits = ResponseLimits {
    max_status_line: 64,
    max_header_line: 64,
    max_head: 256,
    max_headers: 4,
};

/// Parses `data` as a connection's worth of responses, as the answers to GETs and
/// to HEADs, with the default limits and with tight ones, and checks every complete
/// head it finds.
pub fn response(data: &[u8]) {
    for method in [Method::Get, Method::Head] {
        for limits in [ResponseLimits::default(), TIGHT_RESPONSE] {
            let mut rest = data;
            while let Some(next) = response_step(rest, &limits, method) {
                rest = next;
            }
        }
    }
}

/// Parses one response head at the start of `data`, checks it, skips its body and
/// returns what follows; `None` when there is no complete head or body, or the body
/// runs until the connection closes.
fn response_step<'d>(data: &'d [u8], limits: &ResponseLimits, method: Method) -> Option<&'d [u8]> {
    let mut storage = header_storage();
    let head = match parse_response(data, &mut storage, limits, method) {
        Ok(Status::Complete(head)) => head,
        Ok(Status::Partial) => return None,
        Err(e) => {
            assert_eq!(e.status(), 502, "{e}");
            return None;
        }
    };
    let len = head.len;
    assert!(
        len > 0 && len <= data.len(),
        "head length {len} out of bounds"
    );
    assert!(len <= limits.max_head, "head of {len} bytes over max_head");
    assert!(head.headers.len() <= limits.max_headers, "too many headers");
    assert!(
        data[..len].ends_with(b"\r\n\r\n"),
        "head not ended by CRLFCRLF"
    );
    check_framing(&head, method);
    check_response_prefixes(data, len, limits, method);
    let body = &data[len..];
    match head.framing {
        Framing::None => Some(body),
        Framing::Length(n) => body.get(usize::try_from(n).ok()?..),
        Framing::Chunked => match chunked_outcome(body) {
            (_, Ok((true, used))) => Some(&body[used..]),
            _ => None,
        },
        Framing::UntilClose => None,
    }
}

/// The framing agrees with the status, the method and the fields.
fn check_framing(head: &ResponseHead<'_, '_>, method: Method) {
    let status = head.status;
    assert!((100..=599).contains(&status), "status {status}");
    let bodiless = method == Method::Head || status < 200 || status == 204 || status == 304;
    if bodiless {
        assert_eq!(
            head.framing,
            Framing::None,
            "{status} to {method:?} has a body"
        );
    }
    let te = head.header("transfer-encoding").is_some();
    match head.framing {
        Framing::Chunked => {
            assert!(
                te && head.content_length.is_none(),
                "chunked without TE or with CL"
            );
            assert_eq!(head.version, Version::Http11, "chunked in HTTP/1.0");
        }
        Framing::Length(n) => assert_eq!(head.content_length, Some(n), "length {n}"),
        Framing::UntilClose => {
            assert!(
                !te && head.content_length.is_none(),
                "until close with a length"
            );
            assert!(!head.keep_alive, "until close, yet kept alive");
        }
        Framing::None => assert!(
            bodiless || head.content_length == Some(0),
            "no body without a reason"
        ),
    }
    if te {
        assert!(head.content_length.is_none(), "both TE and CL accepted");
    }
}

/// The head alone parses to the same length, and a few of its proper prefixes ask
/// for more bytes.
fn check_response_prefixes(data: &[u8], len: usize, limits: &ResponseLimits, method: Method) {
    let mut storage = header_storage();
    match parse_response(&data[..len], &mut storage, limits, method) {
        Ok(Status::Complete(alone)) => assert_eq!(alone.len, len, "head alone parses differently"),
        other => panic!("head alone is not complete: {other:?}"),
    }
    for cut in [0, 1, len / 2, len.saturating_sub(2), len - 1] {
        let cut = cut.min(len - 1);
        let prefix = parse_response(&data[..cut], &mut storage, limits, method);
        assert!(
            matches!(prefix, Ok(Status::Partial)),
            "prefix of {cut} bytes of a {len}-byte head gave {prefix:?}"
        );
    }
}
