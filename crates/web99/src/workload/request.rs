//! The exact requests the SPECweb99 client sends (`web99.md` §4.4).

use std::fmt::Write as _;

use super::{Entry, RequestType};

/// The protocol version of a whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum HttpVersion {
    /// `HTTP/1.0`; keep-alive connections send `Connection: Keep-Alive`.
    Http10,
    /// `HTTP/1.1`; persistence is the default.
    Http11,
}

impl HttpVersion {
    /// `HTTP/1.0` or `HTTP/1.1`, as in a request line.
    pub fn as_str(self) -> &'static str {
        match self {
            HttpVersion::Http10 => "HTTP/1.0",
            HttpVersion::Http11 => "HTTP/1.1",
        }
    }
}

/// Where the requests go.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Targets {
    /// The `Host` header value.
    pub host: String,
    /// Path of the directory holding `file_set` (`""` for the document root).
    pub url_root: String,
    /// The dynamic GET and CAD script, possibly with a `?prefix` (`/web99`).
    pub dynamic: String,
    /// The CGI program (`/cgi-bin/web99`).
    pub cgi: String,
    /// The POST script (`/web99`); a `?prefix` becomes the form's `urlroot`.
    pub post: String,
    /// HTTP version of the run.
    pub version: HttpVersion,
}

/// Appends the request for `entry`. `keep_alive` marks a connection that carries
/// more than one request; `user_id` and `last_ad` fill the cookie of CAD GETs and
/// POSTs.
pub fn format_request(
    entry: &Entry,
    t: &Targets,
    keep_alive: bool,
    user_id: u32,
    last_ad: u32,
    out: &mut Vec<u8>,
) {
    let file = entry.file.to_string();
    let mut text = String::with_capacity(256);
    let (method, target) = match entry.kind {
        RequestType::Static => ("GET", format!("{}/{file}", t.url_root)),
        RequestType::Dynamic | RequestType::Cad => ("GET", script_target(&t.dynamic, &file)),
        RequestType::Cgi => ("GET", script_target(&t.cgi, &file)),
        RequestType::Post => (
            "POST",
            t.post.split('?').next().unwrap_or_default().to_owned(),
        ),
    };
    let _ = write!(text, "{method} {target} {}\r\n", t.version.as_str());
    if keep_alive && t.version == HttpVersion::Http10 {
        text.push_str("Connection: Keep-Alive\r\n");
    }
    if entry.kind.is_dynamic() {
        text.push_str("Pragma: no-cache\r\nCache-Control: no-cache\r\n");
    }
    if matches!(entry.kind, RequestType::Cad | RequestType::Post) {
        let _ = write!(
            text,
            "Cookie: my_cookie=user_id={user_id}&last_ad={last_ad}\r\n"
        );
    }
    if entry.kind == RequestType::Post {
        let prefix = t.post.split_once('?').map_or("", |(_, p)| p);
        let f = entry.file;
        let body = format!(
            "urlroot={prefix}/file_set/&dir={:05}&class={}&num={}&client={user_id}",
            f.dir, f.class, f.num
        );
        text.push_str("Content-type: application/x-www-form-urlencoded\r\n");
        let _ = write!(
            text,
            "Accept: */*\r\nHost: {}\r\nContent-Length: {}\r\n\r\n{body}",
            t.host,
            body.len()
        );
    } else {
        let _ = write!(text, "Accept: */*\r\nHost: {}\r\n\r\n", t.host);
    }
    out.extend_from_slice(text.as_bytes());
}

/// `script?/file_set/…`, or `script?prefix/file_set/…` when the script carries a
/// prefix already.
fn script_target(script: &str, file: &str) -> String {
    if script.contains('?') {
        format!("{script}/{file}")
    } else {
        format!("{script}?/{file}")
    }
}
