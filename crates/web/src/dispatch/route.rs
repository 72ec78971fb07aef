//! Routing: which handler a request is for, decided once from its head.

use stoa_http_proto::target::{self, Target};
use stoa_http_proto::{Method, RequestHead};

use super::Site;
use crate::response::Refusal;
use crate::web99;

/// Where a request goes.
#[derive(Debug)]
pub(crate) enum Route<'h> {
    /// A GET or HEAD of a path beneath the document root.
    File(Target<'h>),
    /// Refused from its head (a method other than GET or HEAD, a malformed
    /// target); its body, if any, is skipped like a file request's.
    Refused(Refusal),
    /// A dynamic request: its body is gathered first.
    Dynamic(Dynamic),
}

/// A dynamic request, routed. It owns what it holds, so it can wait in a
/// [`super::Gathering`] while the request's body arrives.
#[derive(Debug)]
pub(crate) enum Dynamic {
    /// The SPECweb99 entry point: a dynamic or custom-ad GET, a POST, a command;
    /// or why it is refused (answered once its body is in, the connection kept).
    Web99(Result<web99::Request, Refusal>),
    /// A CGI script under mount `mount` (its index); `rest` is the decoded path
    /// after the mount's prefix.
    Cgi { mount: usize, rest: Vec<u8> },
}

/// Routes a request: the web99 entry point, a CGI mount, or a file. The target
/// is decoded once, here.
#[inline]
pub(crate) fn route<'h>(head: &RequestHead<'h, '_>, site: Site<'_>) -> Route<'h> {
    if site.web99().is_some_and(|w| w.matches(head.target)) {
        return Route::Dynamic(Dynamic::Web99(web99::Request::parse(head)));
    }
    let target = target::decode(head.target);
    if let (Some(_), Ok(t)) = (site.cgi(), &target)
        && let Some((mount, rest)) = crate::cgi::route(site.cgi_mounts(), &t.path)
    {
        return Route::Dynamic(Dynamic::Cgi {
            mount,
            rest: rest.to_vec(),
        });
    }
    // The method first: a POST of a malformed target is a 405, as for any file.
    if !matches!(head.method, Method::Get | Method::Head) {
        return Route::Refused(Refusal {
            status: 405,
            why: "",
            extra: b"Allow: GET, HEAD\r\n",
        });
    }
    match target {
        Ok(target) => Route::File(target),
        Err(e) => {
            tracing::debug!("400 for {:?}: {e}", String::from_utf8_lossy(head.target));
            Route::Refused(Refusal::new(400, ""))
        }
    }
}
