//! The web server's part of the configuration: its tables (`read.rs`, with
//! `[[site]]` in `site.rs` and `[web.compression]` in `compression.rs`), read
//! straight into [`stoa_web::Config`], then the web flags over them, the
//! defaults and the checks; how it prints (`print.rs`), which paths it uses and
//! how it binds. It runs unless only mail was asked for (an `[smtp]` or `[pop3]`
//! table or a mail flag, and no document root, web listener or web table).

mod compression;
mod print;
mod read;
mod site;

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use stoa_web::config::{
    AccessLogTarget, CertKeyFiles, CgiConfig, CgiMount, LogFormat, RuntimeModel, TlsListener,
    Web99Config,
};
use toml::Table;

use super::service::{self, Configured, Finish, Implied, Read, Service, Shared};
use super::units::{MAX_WORKERS, parse_addr, parse_count, parse_duration};
use super::{Report, tls};
use crate::cli::ServeArgs;
use crate::privilege::Need;

/// The default listen address when neither file nor flags name one: loopback, so a
/// first run exposes nothing.
const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The web server's entry in the list of servers.
pub(super) static WEB: Service = Service {
    name: "web",
    keys: &["web", "listener", "web99", "cgi", "site"],
    mail: false,
    role: true,
    implied: Implied::WithoutMail,
    flags_given,
    read: read_tables,
    draft: service::default::<Draft>,
};

/// Whether any web flag was given.
fn flags_given(args: &ServeArgs) -> bool {
    args.docroot.is_some()
        || !args.listen.is_empty()
        || !args.tls_listen.is_empty()
        || args.web99
        || args.web99_state.is_some()
        || args.cgi_dir.is_some()
}

/// Reads the web server's tables: `None` when the file has none of them.
fn read_tables(file: &Table, cx: &Read<'_>, r: &mut Report) -> Option<Box<dyn service::Draft>> {
    if !WEB.keys.iter().any(|k| file.contains_key(*k)) {
        return None;
    }
    let mut d = Draft::default();
    if let Some(listeners) = file.get("listener") {
        read::read_listeners(listeners, &mut d.config, r);
    }
    if let Some(section) = r.table(file, "", "web") {
        read::read_web(section, &mut d.config, &mut d.docroot, r);
    }
    read::read_web99(file, &mut d.config, cx.default_web99_state, r);
    read::read_cgi(file, &mut d.config, r);
    d.config.sites = site::read(file, cx.base, r);
    // Relative paths in a file are relative to the file, as in nginx's
    // prefix-relative paths.
    if let Some(base) = cx.base {
        let files = d.config.tls_listen.iter_mut().flat_map(|l| &mut l.certs);
        let files = files.flat_map(|c| [&mut c.cert, &mut c.key]);
        for p in d.docroot.iter_mut().chain(files) {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }
    Some(Box::new(d))
}

/// The web server's settings while they are read: the file's, and its
/// document root (which becomes the one implicit site's, or an error beside
/// `[[site]]`).
#[derive(Debug)]
struct Draft {
    config: stoa_web::Config,
    docroot: Option<PathBuf>,
}

impl Default for Draft {
    fn default() -> Self {
        Draft {
            config: stoa_web::Config::new(PathBuf::new(), Vec::new()),
            docroot: None,
        }
    }
}

impl service::Draft for Draft {
    fn finish(self: Box<Self>, cx: &mut Finish<'_>, r: &mut Report) -> Option<Box<dyn Configured>> {
        let Draft {
            mut config,
            mut docroot,
        } = *self;
        apply_flags(cx.args, &mut config, &mut docroot, cx.mail, r);
        let web = finish_web(cx.args, config, docroot, cx.default_web99_state, r);
        Some(Box::new(web))
    }

    fn unused(self: Box<Self>, cx: &mut Finish<'_>, r: &mut Report) {
        let Draft {
            mut config,
            mut docroot,
        } = *self;
        apply_flags(cx.args, &mut config, &mut docroot, cx.mail, r);
    }
}

impl Configured for stoa_web::Config {
    fn service(&self) -> &'static Service {
        &WEB
    }

    fn print(&self, doc: &mut super::print::Doc) {
        print::sections(doc, self);
    }

    /// The document roots and CGI directories, read; the access logs and the
    /// web99 state directory, written (and created at start).
    fn paths(&self, needs: &mut Vec<Need>, managed: &mut Vec<PathBuf>) {
        for site in self.effective_sites() {
            needs.push(Need::read("the document root", &site.docroot));
            for m in &site.cgi {
                needs.push(Need::read("the CGI directory", &m.dir));
            }
            if let AccessLogTarget::File(log) = self.access_log_of(&site)
                && !managed.contains(log)
            {
                needs.push(Need::reopened("the access log (reopened on SIGHUP)", log));
                managed.push(log.clone());
            }
        }
        if let Some(w) = &self.web99 {
            needs.push(Need::write("the web99 state directory", &w.state_dir));
            managed.push(w.state_dir.clone());
        }
    }

    fn bind(
        mut self: Box<Self>,
        shared: &mut Shared<'_>,
    ) -> anyhow::Result<Box<dyn stoa_netkit::server::Service>> {
        self.sockets = shared.sockets.clone();
        let server = stoa_web::Server::bind(*self).context("cannot start the web server")?;
        let reopener = server.log_reopener();
        shared.reopen.push(Box::new(move || reopener.reopen()));
        Ok(Box::new(server))
    }
}

/// The web server's flags that come after the file, the defaults, and its checks.
fn finish_web(
    args: &ServeArgs,
    mut web: stoa_web::Config,
    docroot: Option<PathBuf>,
    default_web99_state: &Path,
    report: &mut Report,
) -> stoa_web::Config {
    if !web.sites.is_empty() {
        finish_sites(
            args,
            &mut web,
            docroot.as_deref(),
            default_web99_state,
            report,
        );
        validate(&web, report);
        return web;
    }
    if let Some(dir) = &args.cgi_dir {
        let cgi = web.cgi.get_or_insert_with(CgiConfig::new);
        cgi.mounts.retain(|m| m.prefix != "/cgi-bin/");
        cgi.mounts.push(CgiMount {
            prefix: "/cgi-bin/".into(),
            dir: dir.clone(),
        });
    }
    if args.web99 || args.web99_state.is_some() {
        let config = web
            .web99
            .get_or_insert_with(|| Web99Config::new(default_web99_state.to_owned()));
        if let Some(dir) = &args.web99_state {
            config.state_dir = dir.clone();
        }
    }
    match docroot {
        Some(d) => web.docroot = d,
        None => report.errors.push(
            "no document root: give --docroot DIR or web.docroot in the configuration file".into(),
        ),
    }
    if web.listen.is_empty() && web.tls_listen.is_empty() {
        web.listen.push(
            DEFAULT_LISTEN
                .parse()
                .expect("invariant: valid default address"),
        );
    }
    validate(&web, report);
    web
}

/// The flags and tables that name the one implicit site's settings, checked
/// against `[[site]]`s: each site has its own document root and CGI mounts, and
/// says itself whether it serves the dynamic API.
fn finish_sites(
    args: &ServeArgs,
    web: &mut stoa_web::Config,
    docroot: Option<&Path>,
    default_web99_state: &Path,
    report: &mut Report,
) {
    if docroot.is_some() {
        report.errors.push(
            "web.docroot (or --docroot) and [[site]]: give each site its docroot; \
             the site for unknown names is the one with default = true"
                .into(),
        );
    }
    if args.cgi_dir.is_some() || web.cgi.as_ref().is_some_and(|c| !c.mounts.is_empty()) {
        report.errors.push(
            "cgi.mounts (or --cgi-dir) and [[site]]: mount CGI directories in the sites \
             (cgi = { \"/cgi-bin/\" = \"DIR\" }); [cgi] keeps the limits"
                .into(),
        );
    }
    let wants_web99 = web.sites.iter().any(|s| s.web99);
    if wants_web99 || args.web99_state.is_some() {
        let config = web
            .web99
            .get_or_insert_with(|| Web99Config::new(default_web99_state.to_owned()));
        if let Some(dir) = &args.web99_state {
            config.state_dir = dir.clone();
        }
    }
    if !wants_web99 && (web.web99.is_some() || args.web99) {
        report.errors.push(
            "[web99] (or --web99) and [[site]]: set web99 = true in the site that serves \
             the dynamic API"
                .into(),
        );
    }
    if web.listen.is_empty() && web.tls_listen.is_empty() {
        web.listen.push(
            DEFAULT_LISTEN
                .parse()
                .expect("invariant: valid default address"),
        );
    }
    site::check(&web.sites, report);
}

fn apply_flags(
    args: &ServeArgs,
    web: &mut stoa_web::Config,
    docroot: &mut Option<PathBuf>,
    mail: bool,
    r: &mut Report,
) {
    if let Some(d) = &args.docroot {
        *docroot = Some(d.clone());
    }
    apply_listen_flags(args, web, mail, r);
    apply_value_flags(args, web, r);
}

/// `--listen` and `--tls-listen` replace the file's listeners; `--tls-cert` and
/// `--tls-key` go with them, or with a mail server.
fn apply_listen_flags(args: &ServeArgs, web: &mut stoa_web::Config, mail: bool, r: &mut Report) {
    if !args.listen.is_empty() || !args.tls_listen.is_empty() {
        web.listen = r.flag_values("--listen", &args.listen, parse_addr);
        let certs = flag_certs(args, r);
        let tls_addrs = r.flag_values("--tls-listen", &args.tls_listen, parse_addr);
        web.tls_listen = tls_addrs
            .into_iter()
            .map(|addr| TlsListener {
                addr,
                certs: certs.clone(),
            })
            .collect();
    } else if mail && args.tls_cert.len() != args.tls_key.len() {
        r.errors.push(format!(
            "--tls-cert and --tls-key: give them in pairs ({} certificates, {} keys)",
            args.tls_cert.len(),
            args.tls_key.len()
        ));
    } else if !mail && (!args.tls_cert.is_empty() || !args.tls_key.is_empty()) {
        r.errors.push(
            "--tls-cert and --tls-key: they need --tls-listen ADDR:PORT (or a mail listener, \
             for STARTTLS, STLS and POP3S)"
                .into(),
        );
    }
}

/// The web server's flags that each set one value.
fn apply_value_flags(args: &ServeArgs, web: &mut stoa_web::Config, r: &mut Report) {
    r.flag(
        "--workers",
        args.workers.as_deref(),
        parse_count,
        &mut web.workers,
    );
    r.flag(
        "--access-log",
        args.access_log.as_deref(),
        parse_access_log,
        &mut web.access_log,
    );
    if let Some(format) = args.log_format {
        web.log_format = format.into();
    }
    let l = &mut web.limits;
    for (name, text, into) in [
        ("--head-timeout", &args.head_timeout, &mut l.head_timeout),
        (
            "--keepalive-timeout",
            &args.keepalive_timeout,
            &mut l.keepalive_timeout,
        ),
        ("--send-timeout", &args.send_timeout, &mut l.send_timeout),
    ] {
        r.flag(name, text.as_deref(), parse_duration, into);
    }
    let max = &mut l.max_connections;
    r.flag(
        "--max-connections",
        args.max_connections.as_deref(),
        parse_count,
        max,
    );
    if let Some(runtime) = args.runtime {
        web.runtime = runtime.into();
    }
}

/// The `--tls-cert`/`--tls-key` pairs, in order, reporting a count that does
/// not pair up and `--tls-listen` without them.
fn flag_certs(args: &ServeArgs, r: &mut Report) -> Vec<CertKeyFiles> {
    let (certs, keys) = (&args.tls_cert, &args.tls_key);
    if certs.len() != keys.len() {
        r.errors.push(format!(
            "--tls-cert and --tls-key: give them in pairs ({} certificates, {} keys)",
            certs.len(),
            keys.len()
        ));
    } else if certs.is_empty() && !args.tls_listen.is_empty() {
        r.errors
            .push("--tls-listen: needs --tls-cert FILE and --tls-key FILE".into());
    }
    tls::cert_pairs(args)
}

/// Loads every certificate and key once (listeners may share them), reporting each
/// problem on its own line: which file, and what is wrong with it.
fn check_certs(web: &stoa_web::Config, r: &mut Report) {
    let mut seen: Vec<&CertKeyFiles> = Vec::new();
    let sites = web.sites.iter().flat_map(|s| &s.tls);
    for pair in web.tls_listen.iter().flat_map(|l| &l.certs).chain(sites) {
        if seen.contains(&pair) {
            continue;
        }
        seen.push(pair);
        r.errors.extend(tls::cert_errors(pair));
    }
}

fn validate(web: &stoa_web::Config, r: &mut Report) {
    check_certs(web, r);
    if !web.docroot.as_os_str().is_empty() && !web.docroot.is_dir() {
        r.errors.push(format!(
            "document root {}: not a directory",
            web.docroot.display()
        ));
    }
    r.check(
        (1..=MAX_WORKERS).contains(&web.workers),
        &format!("workers: must be 1 to {MAX_WORKERS}"),
    );
    check_head_limits(&web.limits.head, r);
    check_limits(&web.limits, r);
    r.check(
        web.cache.max_entries >= 1,
        "web.cache.max_entries: must be at least 1",
    );
    r.check(
        web.cache.max_open_files >= 1,
        "web.cache.max_open_files: must be at least 1",
    );
    for m in web.cgi.iter().flat_map(|c| &c.mounts) {
        r.check(
            m.dir.is_dir(),
            &format!("CGI directory {}: not a directory", m.dir.display()),
        );
    }
    let web99_root = match web.sites.iter().find(|s| s.web99) {
        Some(site) => &site.docroot,
        None => &web.docroot,
    };
    if let Some(w) = &web.web99 {
        r.check(
            !state_in_docroot(&w.state_dir, web99_root),
            &format!(
                "web99 state directory {} is inside the document root: it would be served",
                w.state_dir.display()
            ),
        );
    }
}

fn check_head_limits(head: &stoa_http_proto::Limits, r: &mut Report) {
    let cap = stoa_http_proto::request::MAX_HEADERS_CAP;
    r.check(
        (1..=cap).contains(&head.max_headers),
        &format!("web.limits.max_headers: must be 1 to {cap}"),
    );
    r.check(
        head.max_request_line >= 16,
        "web.limits.max_request_line: must be at least 16 bytes",
    );
    r.check(
        head.max_header_line >= 16,
        "web.limits.max_header_line: must be at least 16 bytes",
    );
    r.check(
        head.max_head >= head.max_request_line.max(head.max_header_line),
        "web.limits.max_head: must be at least max_request_line and max_header_line",
    );
}

/// The limits other than the head's.
fn check_limits(l: &stoa_web::config::Limits, r: &mut Report) {
    r.nonzero(
        "web.limits.",
        &[
            ("head_timeout", l.head_timeout),
            ("head_timeout_max", l.head_timeout_max),
            ("body_timeout", l.body_timeout),
            ("keepalive_timeout", l.keepalive_timeout),
            ("send_timeout", l.send_timeout),
            ("linger_idle", l.linger_idle),
        ],
    );
    r.check(
        l.head_timeout_max >= l.head_timeout,
        "web.limits.head_timeout_max: must be at least head_timeout",
    );
    for (ok, error) in [
        (
            l.keepalive_requests >= 1,
            "web.limits.keepalive_requests: must be at least 1",
        ),
        (
            l.max_connections >= 1,
            "web.limits.max_connections: must be at least 1",
        ),
        (
            l.max_handshakes >= 1,
            "web.limits.max_handshakes: must be at least 1",
        ),
        (
            l.max_pipeline >= 1,
            "web.limits.max_pipeline: must be at least 1",
        ),
        (
            l.h2_max_streams >= 1,
            "web.limits.h2_max_streams: must be at least 1",
        ),
    ] {
        r.check(ok, error);
    }
}

/// Whether the web99 state directory is reachable through the document root: a
/// lexical check (no symlinks resolved).
fn state_in_docroot(state_dir: &Path, docroot: &Path) -> bool {
    let state = std::path::absolute(state_dir)
        .ok()
        .map(|p| lexically_normal(&p));
    let root = std::path::absolute(docroot)
        .ok()
        .map(|p| lexically_normal(&p));
    state
        .zip(root)
        .is_some_and(|(state, root)| !docroot.as_os_str().is_empty() && state.starts_with(root))
}

/// `path` with `.` and `..` components resolved without touching the file system
/// (symlinks are checked again at start, on the real directories).
fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

pub(super) fn parse_runtime(text: &str) -> Result<RuntimeModel, String> {
    match text {
        "per-core" => Ok(RuntimeModel::PerCore),
        "multi-thread" => Ok(RuntimeModel::MultiThread),
        _ => Err(format!(
            "{text:?} is not a runtime model (per-core, multi-thread)"
        )),
    }
}

pub(super) fn parse_access_log(text: &str) -> Result<AccessLogTarget, String> {
    match text {
        "" => Err("empty; use a file name, \"-\" or \"off\"".into()),
        "off" => Ok(AccessLogTarget::Off),
        "-" => Ok(AccessLogTarget::Stdout),
        path => Ok(AccessLogTarget::File(PathBuf::from(path))),
    }
}

pub(super) fn parse_log_format(text: &str) -> Result<LogFormat, String> {
    match text {
        "common" => Ok(LogFormat::Common),
        "combined" => Ok(LogFormat::Combined),
        _ => Err(format!("{text:?} is not a log format (common, combined)")),
    }
}
