//! The state every worker of one server shares: the configuration, the sites,
//! the access logs' writers, the CGI gateway, and the atomics that shutdown and
//! reloads set. Connections and handlers read it through an `Arc`; it depends on
//! no connection-level module, so they all depend on it rather than on the
//! server that builds it (`server.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};

use crate::access_log::LogSink;
use crate::cgi::Cgi;
use crate::config::Config;
use crate::vhost::{Names, VirtualHost};

/// The next server's [`Shared::id`].
pub(crate) static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// State shared by every worker of one server. Everything mutable in it is atomic;
/// per-worker mutable state lives in [`crate::local`].
#[derive(Debug)]
pub(crate) struct Shared {
    /// Distinguishes servers in one process (tests), for the thread-local state.
    pub(crate) id: u64,
    pub(crate) config: Config,
    /// The sites, at least one; [`Shared::names`] picks one per request.
    pub(crate) sites: Box<[VirtualHost]>,
    pub(crate) names: Names,
    /// The largest dynamic request body any site accepts (web99's POSTs, CGI's
    /// bodies).
    pub(crate) max_dynamic_body: usize,
    /// The access logs' writers, one per distinct target the sites write to;
    /// each site names its own by index ([`VirtualHost::log`]). Empty when no
    /// site logs.
    pub(crate) logs: Box<[LogSink]>,
    /// Set on shutdown: idle connections end.
    pub(crate) draining: AtomicBool,
    /// Set on shutdown and at a reload's hand-over: answers carry
    /// `Connection: close`.
    pub(crate) closing: AtomicBool,
    /// Connections in the middle of a request or response.
    pub(crate) busy: AtomicUsize,
    /// The CGI gateway (its limits, its slots), when any site mounts
    /// directories.
    pub(crate) cgi: Option<Cgi>,
}

impl Shared {
    /// The default site, always the first: for requests that name no other,
    /// and for answers given before a site is known (a malformed head).
    pub(crate) fn default_site(&self) -> &VirtualHost {
        &self.sites[0]
    }
}

#[cfg(test)]
impl Shared {
    /// A server's shared state without listeners, for unit tests.
    pub(crate) fn for_tests(config: Config) -> Shared {
        use rustix::fs::{Mode, OFlags};
        use std::path::PathBuf;
        use std::sync::atomic::Ordering;

        let site = VirtualHost {
            index: 0,
            metrics_site: crate::metrics::site_slot("_"),
            log: None,
            docroot: rustix::fs::open(".", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
                .expect("open the current directory"),
            docroot_path: PathBuf::from("."),
            web99: None,
            cgi: Vec::new(),
            error_pages: Box::new([]),
            autoindex: false,
            hide_dotfiles: false,
        };
        Shared {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            names: Names::new(&config.effective_sites()),
            sites: Box::new([site]),
            max_dynamic_body: 0,
            logs: Box::new([]),
            config,
            draining: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            cgi: None,
        }
    }
}
