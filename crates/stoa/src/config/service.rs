//! What one server of `stoa serve` is, described once: an entry of
//! [`super::SERVICES`] is a [`Service`], plain data (its name and keys, whether
//! it is a mail server and a role, when it is implied, and the functions that
//! tell whether its flags ask for it and read its table), declared as one
//! `static` in the server's file. What it reads is its [`Draft`], which becomes,
//! with the flags over it and its checks, its [`Configured`] settings, which say
//! how they are printed, which paths they use, and how the server binds from
//! them and the parts every server shares ([`Shared`]: the socket pool, the mail
//! store, the directory, the failed-login throttle). `Draft` and `Configured`
//! are traits: they carry each server's own state.
//!
//! The orchestration (`mod.rs`) reads, finishes and settles every entry in the
//! list's order, `stoa check-config` prints them in it, and `stoa serve` binds
//! and announces them in it. A new server is a file beside the others that
//! declares its `Service` and implements the two traits, and a line in the
//! list.

use std::any::Any;
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use stoa_directory::EmbeddedDirectory;
use stoa_netkit::listener::Pool;
use stoa_netkit::throttle::{AuthThrottle, Throttle};
use stoa_netkit::tls::CertKeyFiles;
use toml::Table;

use super::auth_throttle::{self, Given};
use super::print::Doc;
use super::{Directory, Report};
use crate::cli::ServeArgs;
use crate::privilege::Need;

/// One kind of server: how the configuration asks for it, and its table. Each
/// server's file declares its entry as a `static` of this.
pub(crate) struct Service {
    /// Its name: its table, and its role in `stoa check-config`.
    pub(crate) name: &'static str,
    /// The file's top-level keys it reads (its table; the web server has several).
    pub(crate) keys: &'static [&'static str],
    /// A mail server: asked for, it runs without the web server, which then
    /// runs only when configured too.
    pub(crate) mail: bool,
    /// A role of `stoa check-config`'s roles line (every server but the metrics
    /// endpoint).
    pub(crate) role: bool,
    /// When it runs though neither its table nor a flag of its own asks for it.
    pub(crate) implied: Implied,
    /// Whether a flag of its own asks for it.
    pub(crate) flags_given: fn(&ServeArgs) -> bool,
    /// Reads its part of the file: `None` when the file has none of its keys.
    pub(crate) read: fn(&Table, &Read<'_>, &mut Report) -> Option<Box<dyn Draft>>,
    /// Its part when the file has none: the defaults.
    pub(crate) draft: fn(&Read<'_>) -> Box<dyn Draft>,
}

/// A server's part of the file as [`Service::read`] gives it: `draft`, boxed.
pub(crate) fn boxed<D: Draft + 'static>(draft: Option<D>) -> Option<Box<dyn Draft>> {
    draft.map(|d| Box::new(d) as Box<dyn Draft>)
}

/// A [`Service::draft`] for a server whose defaults are its draft's `Default`.
pub(crate) fn default<D: Draft + Default + 'static>(_cx: &Read<'_>) -> Box<dyn Draft> {
    Box::new(D::default())
}

/// When a server runs that neither its table nor its flags ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Implied {
    /// Never.
    Never,
    /// When no mail server is asked for (the web server: `stoa serve --docroot`).
    WithoutMail,
    /// When `--mail-dir` is given and no mail server is asked for (SMTP, so
    /// that `--mail-dir` alone reports the missing listener).
    ByMailDir,
}

/// What reading the file needs besides the file.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Read<'a> {
    /// The file's directory: relative paths in the file are relative to it.
    pub(crate) base: Option<&'a Path>,
    /// Where the dynamic API keeps its state unless told.
    pub(crate) default_web99_state: &'a Path,
}

/// A server's settings while they are read: its table, before the flags.
pub(crate) trait Draft: Debug {
    /// Applies its flags over the table (or the defaults) and checks the result;
    /// `None` when it cannot run (the errors are reported).
    fn finish(self: Box<Self>, cx: &mut Finish<'_>, r: &mut Report) -> Option<Box<dyn Configured>>;
    /// Checks its flags when it does not run (the web server's value flags are
    /// checked whatever runs).
    fn unused(self: Box<Self>, _cx: &mut Finish<'_>, _r: &mut Report) {}
}

/// What finishing a server sees of the others: the command line, what every
/// server takes alike, and what the servers finished before it have claimed.
#[derive(Debug)]
pub(crate) struct Finish<'a> {
    /// The flags.
    pub(crate) args: &'a ServeArgs,
    /// The `--tls-cert`/`--tls-key` pairs, in order (an unpaired one left out).
    pub(crate) certs: Vec<CertKeyFiles>,
    /// Whether a mail server runs.
    pub(crate) mail: bool,
    /// The file's `[[mail_host]]` entries.
    pub(crate) mail_hosts: &'a [stoa_smtp::config::MailHost],
    /// Where the dynamic API keeps its state unless told.
    pub(crate) default_web99_state: &'a Path,
    /// The mail directories of the servers finished so far that use the mail
    /// store, with their names, in order.
    mail_dirs: Vec<(&'static str, PathBuf)>,
    /// The failed-login throttle's keys each server that shares it gave.
    throttles: Vec<auth_throttle::Sharer>,
}

impl<'a> Finish<'a> {
    pub(super) fn new(
        args: &'a ServeArgs,
        mail: bool,
        mail_hosts: &'a [stoa_smtp::config::MailHost],
        default_web99_state: &'a Path,
    ) -> Finish<'a> {
        Finish {
            args,
            certs: super::tls::cert_pairs(args),
            mail,
            mail_hosts,
            default_web99_state,
            mail_dirs: Vec::new(),
            throttles: Vec::new(),
        }
    }

    /// The mail directory of the first server that uses the store, and its
    /// name: the one the servers after it must agree with.
    pub(crate) fn mail_dir(&self) -> Option<(&'static str, &Path)> {
        self.mail_dirs.first().map(|(n, d)| (*n, d.as_path()))
    }

    /// Server `name` uses the mail store of `dir` (an empty path, already
    /// reported missing, is no claim).
    pub(crate) fn uses_store(&mut self, name: &'static str, dir: &Path) {
        if !dir.as_os_str().is_empty() {
            self.mail_dirs.push((name, dir.to_owned()));
        }
    }

    /// Table `table` counts failed logins (`logins`, in words: "SMTP AUTH") in
    /// the process's one throttle, with the keys it `given`.
    pub(crate) fn shares_throttle(
        &mut self,
        table: &'static str,
        logins: &'static str,
        given: Given,
    ) {
        self.throttles.push(auth_throttle::Sharer {
            table,
            logins,
            given,
        });
    }

    /// Once every server is finished: the one throttle's settings (a key
    /// given differently by two tables is an error), and the mail directory.
    pub(super) fn settle(self, r: &mut Report) -> (AuthThrottle, Option<PathBuf>) {
        let throttle = auth_throttle::share(&self.throttles, r);
        (throttle, self.mail_dirs.into_iter().next().map(|(_, d)| d))
    }
}

/// What the servers share, known once every one is finished.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settled<'a> {
    /// The mail directory of the servers that use the store.
    pub(crate) mail_dir: Option<&'a Path>,
    /// The failed-login throttle's settings.
    pub(crate) auth_throttle: &'a AuthThrottle,
    /// The user directory.
    pub(crate) directory: &'a Directory,
}

/// A server's finished settings.
pub(crate) trait Configured: Debug + Send + Any {
    /// Its entry of the list.
    fn service(&self) -> &'static Service;
    /// Takes what the servers share (`settled`), with its checks.
    fn settle(&mut self, _settled: &Settled<'_>, _r: &mut Report) {}
    /// Where the embedded user directory it reads is, when it uses no mail
    /// store (the POP3 proxy alone).
    fn directory_home(&self) -> Option<&Path> {
        None
    }
    /// Writes its tables (`stoa check-config`).
    fn print(&self, doc: &mut Doc);
    /// The paths it uses after the switch of user beside the mail directory's,
    /// and those of them it may create (`crate::privilege`).
    fn paths(&self, _needs: &mut Vec<Need>, _managed: &mut Vec<PathBuf>) {}
    /// Binds its listeners (and opens its files) with the parts the servers
    /// share.
    fn bind(
        self: Box<Self>,
        shared: &mut Shared<'_>,
    ) -> anyhow::Result<Box<dyn stoa_netkit::server::Service>>;
}

/// What a server binds with besides its settings: what `stoa serve` keeps from
/// one generation of servers to the next.
pub(crate) struct Shared<'a> {
    /// The listening sockets.
    pub(crate) sockets: &'a Pool,
    /// The mail directory's parts, open when a server uses the mail store.
    pub(crate) mail: Option<&'a mut MailParts>,
    /// The user directory's settings, for a server that opens its own (the
    /// POP3 proxy without a mail store beside it).
    pub(crate) directory: &'a Directory,
    /// What a SIGHUP reopens when the reload is refused (the access logs).
    pub(crate) reopen: &'a mut Vec<Box<dyn Fn() + Send>>,
}

impl Shared<'_> {
    /// The mail directory's parts: open whenever a server that uses the store
    /// runs.
    pub(crate) fn mail(&mut self) -> anyhow::Result<&mut MailParts> {
        self.mail
            .as_deref_mut()
            .context("invariant: the mail store is open for the servers that use it")
    }
}

/// What the mail servers share: the user directory and the mail store of one
/// mail directory, each opened once, the failed-login throttle and the queue's
/// delivery thread; `stoa serve` keeps each that a reload's configuration still
/// names the same way.
pub(crate) struct MailParts {
    /// The user directory.
    pub(crate) directory: Arc<dyn stoa_directory::Directory>,
    /// The directory again when it is the embedded one, to reload its file.
    pub(crate) embedded: Option<Arc<EmbeddedDirectory>>,
    /// What the directory was opened from.
    pub(crate) directory_config: Directory,
    /// The mail store.
    pub(crate) store: Arc<stoa_mailstore::MailStore>,
    /// Failed logins per client address, counted alike by every server that
    /// shares it (the configuration gave them the same settings).
    pub(crate) throttle: Arc<Throttle>,
    /// The IMAP sessions of the store, made at IMAP's first bind and kept across
    /// reloads (the replaced server's sessions stay counted and woken).
    pub(crate) imap_sessions: std::sync::OnceLock<stoa_imap::Sessions>,
    /// The queue and its delivery thread, once SMTP has been configured: it
    /// outlives the SMTP servers (and stays when a reload leaves SMTP out, for
    /// the mail still queued).
    pub(crate) runner: Option<Arc<stoa_smtp::QueueRunner>>,
}
