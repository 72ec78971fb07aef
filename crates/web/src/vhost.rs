//! Virtual hosts: the sites of one server and how a request's host name picks one.
//!
//! [`Names`] is the lookup from a host name (the `Host` header, an absolute-form
//! target's authority, or a TLS client's SNI name) to a site's index: exact
//! names in a hash map, then wildcards (`*.example.com`) longest suffix first,
//! then the default site. Names are compared ASCII case-insensitively, without
//! the port and without one trailing dot (`Example.COM.:8080` is
//! `example.com`). [`VirtualHost`] is one site's running state: its document
//! root opened once, its access log, its dynamic API, its CGI mounts, its error
//! pages.
//!
//! A server with one site (every configuration without `[[site]]`) never looks
//! a name up: dispatch checks the site count first, one comparison per request.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use crate::config::{CgiMount, SiteConfig};
use crate::web99::Web99;

/// Most bytes of a host name compared; longer ones match no name (a valid
/// `Host` value is at most [`stoa_http_proto::host::MAX_HOST`]).
const MAX_NAME: usize = stoa_http_proto::host::MAX_HOST;

/// The host-name lookup of a server's sites.
#[derive(Debug, Default)]
pub(crate) struct Names {
    exact: HashMap<Box<[u8]>, usize>,
    /// `(".example.com", site)`, longest suffix first.
    wildcards: Vec<(Box<[u8]>, usize)>,
    default: usize,
}

impl Names {
    /// The lookup over `sites`: each site's names, and the default (the site
    /// marked `default`, else the first). A name listed twice goes to the first
    /// site listing it (the binary refuses such configurations).
    pub(crate) fn new(sites: &[SiteConfig]) -> Names {
        let mut names = Names {
            default: sites.iter().position(|s| s.default).unwrap_or(0),
            ..Names::default()
        };
        for (i, site) in sites.iter().enumerate() {
            for name in &site.names {
                let name = normalise(name.as_bytes());
                match name.strip_prefix(b"*") {
                    Some(suffix) if suffix.starts_with(b".") => {
                        if !names.wildcards.iter().any(|(s, _)| **s == *suffix) {
                            names.wildcards.push((suffix.into(), i));
                        }
                    }
                    _ => {
                        names.exact.entry(name.into()).or_insert(i);
                    }
                }
            }
        }
        names
            .wildcards
            .sort_by_key(|(suffix, _)| std::cmp::Reverse(suffix.len()));
        names
    }

    pub(crate) fn default_site(&self) -> usize {
        self.default
    }

    /// The site for `host` (without its port): the default for `None`, an
    /// unknown name or one too long to be a name.
    pub(crate) fn find(&self, host: Option<&[u8]>) -> usize {
        let Some(host) = host else {
            return self.default;
        };
        let host = host.strip_suffix(b".").unwrap_or(host);
        if host.len() > MAX_NAME {
            return self.default;
        }
        let mut buf = [0u8; MAX_NAME];
        let lower = &mut buf[..host.len()];
        lower.copy_from_slice(host);
        lower.make_ascii_lowercase();
        if let Some(&site) = self.exact.get(&*lower) {
            return site;
        }
        self.wildcards
            .iter()
            .find(|(suffix, _)| lower.len() > suffix.len() && lower.ends_with(suffix))
            .map_or(self.default, |&(_, site)| site)
    }
}

/// A configured name as it is compared: lower case, without a trailing dot.
fn normalise(name: &[u8]) -> Vec<u8> {
    let name = name.strip_suffix(b".").unwrap_or(name);
    name.to_ascii_lowercase()
}

/// One site's running state.
#[derive(Debug)]
pub(crate) struct VirtualHost {
    /// The site's index: its share of the file cache.
    pub(crate) index: usize,
    /// The site's counting slot ([`crate::metrics::site_slot`]).
    pub(crate) metrics_site: u16,
    /// Which of the server's access logs this site's lines go to, an index into
    /// `Shared::logs`; `None`: the site does not log.
    pub(crate) log: Option<usize>,
    /// The document root, opened once; every file is opened beneath it.
    pub(crate) docroot: OwnedFd,
    /// The document root's path (CGI's `DOCUMENT_ROOT`).
    pub(crate) docroot_path: PathBuf,
    /// The SPECweb99 dynamic API, when this site serves it.
    pub(crate) web99: Option<Web99>,
    /// CGI mounts (the gateway and its limits are the server's).
    pub(crate) cgi: Vec<CgiMount>,
    /// Status → page path, sorted by status.
    pub(crate) error_pages: Box<[(u16, Box<[u8]>)]>,
    pub(crate) autoindex: bool,
    /// Paths with a dot segment (`/.git/…`) but `/.well-known/` are 404.
    pub(crate) hide_dotfiles: bool,
}

impl VirtualHost {
    /// The path of the page configured for `status`.
    pub(crate) fn error_page(&self, status: u16) -> Option<&[u8]> {
        if self.error_pages.is_empty() {
            return None;
        }
        self.error_pages
            .iter()
            .find(|(s, _)| *s == status)
            .map(|(_, p)| &**p)
    }
}

#[cfg(test)]
mod tests {
    use super::Names;
    use crate::config::SiteConfig;

    fn site(names: &[&str], default: bool) -> SiteConfig {
        let mut s = SiteConfig::new("/srv".into());
        s.names = names.iter().map(|n| (*n).to_owned()).collect();
        s.default = default;
        s
    }

    #[test]
    fn exact_wildcard_and_default() {
        let names = Names::new(&[
            site(&["a.example", "www.A.example"], false),
            site(&["*.example", "b.example"], false),
            site(&["*.deep.example", "[::1]", "127.0.0.1"], true),
        ]);
        let find = |h: &str| names.find(Some(h.as_bytes()));
        assert_eq!(find("a.example"), 0);
        assert_eq!(find("A.EXAMPLE"), 0);
        assert_eq!(find("a.example."), 0);
        assert_eq!(find("WWW.a.example"), 0);
        assert_eq!(find("b.example"), 1);
        assert_eq!(find("x.example"), 1);
        assert_eq!(find("x.y.example"), 1);
        assert_eq!(find("x.deep.example"), 2, "the longer wildcard wins");
        assert_eq!(find("deep.example"), 1);
        assert_eq!(
            find("example"),
            2,
            "a wildcard does not match its own suffix"
        );
        assert_eq!(find("[::1]"), 2);
        assert_eq!(find("127.0.0.1"), 2);
        assert_eq!(find("other.test"), 2);
        assert_eq!(find(""), 2);
        assert_eq!(names.find(None), 2);
        assert_eq!(find(&"a".repeat(300)), 2);
    }

    #[test]
    fn the_first_site_is_the_default_without_one() {
        let names = Names::new(&[site(&["a.example"], false), site(&["b.example"], false)]);
        assert_eq!(names.default_site(), 0);
        assert_eq!(names.find(Some(b"c.example")), 0);
        assert_eq!(names.find(Some(b"b.example")), 1);
    }
}
