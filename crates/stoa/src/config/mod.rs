//! Configuration: the TOML file, then the command-line flags over it, then one
//! validation of the result. The web server is configured unless only mail was
//! asked for (an `[smtp]` or `[pop3]` table or a mail flag, and no document root,
//! web listener or web table); the SMTP server (`smtp.rs`) and the POP3 server
//! (`pop3.rs`) and the LMTP server (`lmtp.rs`) each when asked for, over the same
//! mail directory. Every problem is
//! collected and reported together; unknown keys are warnings (a typo should not go
//! unnoticed, nor stop a server).
//!
//! The file is read into `toml::Table` and walked by hand instead of derived with
//! serde, because serde stops at the first error and cannot name every bad key.
//! `report.rs` holds the collector and the typed readers of tables and flags;
//! `mail.rs` what the SMTP and POP3 parts read and check alike; `print.rs` writes
//! a loaded configuration back as TOML (`stoa check-config`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use stoa_web::config::{
    AccessLogTarget, CertKeyFiles, CgiConfig, CgiMount, LogFormat, RuntimeModel, TlsListener,
    Web99Config,
};
use toml::{Table, Value};

use crate::cli::ServeArgs;

mod auth_throttle;
mod compression;
mod directory;
mod lmtp;
mod mail;
mod mail_host;
mod mail_limits;
mod metrics;
mod pop3;
mod pop3_proxy;
pub(crate) mod print;
mod process;
mod report;
mod site;
mod smtp;
mod units;

pub(crate) use directory::Directory;
pub(crate) use lmtp::Lmtp;
pub(crate) use metrics::Metrics;
pub(crate) use pop3::Pop3;
pub(crate) use pop3_proxy::Pop3Proxy;
pub(crate) use print::effective;
pub(crate) use process::Process;
use report::Report;

pub(crate) use units::{parse_duration, parse_size};

/// The default listen address when neither file nor flags name one: loopback, so a
/// first run exposes nothing.
pub(crate) const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// Most workers accepted; far above any machine Stoa runs on, low enough to catch a
/// typo before it spawns a million threads.
const MAX_WORKERS: usize = 1024;

/// The outcome of loading: a configuration and its warnings, or every error.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The web server, unless only mail was configured.
    pub(crate) web: Option<stoa_web::Config>,
    /// The SMTP server, when configured.
    pub(crate) smtp: Option<stoa_smtp::Config>,
    /// The POP3 server, when configured.
    pub(crate) pop3: Option<Pop3>,
    /// The LMTP server, when configured.
    pub(crate) lmtp: Option<Lmtp>,
    /// The POP3 proxy, when configured.
    pub(crate) pop3_proxy: Option<Pop3Proxy>,
    /// The Prometheus endpoint (`[metrics]`), when configured.
    pub(crate) metrics: Option<Metrics>,
    /// The user directory of the mail servers (`[directory]`).
    pub(crate) directory: Directory,
    /// The user to switch to and the umask (`user`, `group`, `umask`).
    pub(crate) process: Process,
    /// The file the LDAP service account's password was read from, named where
    /// the configuration is printed instead of the password.
    pub(crate) bind_password_file: Option<PathBuf>,
    pub(crate) warnings: Vec<String>,
}

/// A configuration refused: every error, and the warnings met on the way (shown
/// beside the errors: an unknown key is often why a required one is missing).
#[derive(Debug, Default)]
pub(crate) struct Rejected {
    pub(crate) errors: Vec<String>,
    pub(crate) warnings: Vec<String>,
}

/// The file `stoa serve` and `stoa check-config` read when `--config` is not
/// given, if it exists.
pub(crate) const DEFAULT_CONFIG_FILE: &str = "/etc/stoa/stoa.toml";

/// Replaces [`DEFAULT_CONFIG_FILE`], for tests (which cannot create `/etc/stoa`).
pub(crate) const DEFAULT_CONFIG_ENV: &str = "STOA_DEFAULT_CONFIG";

/// `args` with `--config` set to the default file when it was not given and the
/// file exists (`STOA_DEFAULT_CONFIG` names another default, for tests).
pub(crate) fn with_default_file(args: &ServeArgs) -> ServeArgs {
    let mut args = args.clone();
    if args.config.is_none() {
        let default = std::env::var_os(DEFAULT_CONFIG_ENV)
            .map_or_else(|| PathBuf::from(DEFAULT_CONFIG_FILE), PathBuf::from);
        args.config = default.exists().then_some(default);
    }
    args
}

/// The embedded directory's options from the configuration file at `path`
/// (read with `read`), for the `stoa user` commands: only its `[directory]`
/// table is read, the rest is not theirs to judge. An LDAP `[directory]` gives
/// the defaults (its keys are not the embedded directory's). `Err` holds every
/// problem with that table; `Ok` the warnings beside the options.
pub(crate) fn embedded_options(
    path: &Path,
    read: impl Fn(&Path) -> std::io::Result<String>,
) -> Result<(stoa_directory::Options, Vec<String>), Vec<String>> {
    let text = read(path).map_err(|e| vec![format!("{}: {e}", path.display())])?;
    let table = text
        .parse::<Table>()
        .map_err(|e| vec![format!("{}: {}", path.display(), e.to_string().trim_end())])?;
    let mut report = Report::default();
    let draft = directory::read_table(&table, path.parent(), &mut report);
    let options = match draft {
        Some(directory::Draft::Embedded(options)) => options,
        _ => stoa_directory::Options::default(),
    };
    let warnings = report
        .warnings
        .into_iter()
        .filter(|w| w.starts_with("directory."))
        .collect();
    if report.errors.is_empty() {
        Ok((options, warnings))
    } else {
        Err(report.errors)
    }
}

/// The configuration file the `stoa user` commands read for the directory's
/// settings: `--config`, else the default file when it exists.
pub(crate) fn default_file_if_any(given: Option<&Path>) -> Option<PathBuf> {
    let args = ServeArgs {
        config: given.map(Path::to_owned),
        ..ServeArgs::default()
    };
    with_default_file(&args).config
}

/// Where the dynamic API keeps its state unless told: the system's state
/// directory for root, the user's (XDG) state directory otherwise.
pub(crate) fn default_web99_state() -> PathBuf {
    if rustix::process::geteuid().is_root() {
        return "/var/lib/stoa/web99".into();
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| std::env::temp_dir().join("stoa-state"));
    base.join("stoa/web99")
}

/// [`load_all`] without the warnings of a refused configuration.
pub(crate) fn load(
    args: &ServeArgs,
    read: impl Fn(&Path) -> std::io::Result<String>,
    default_web99_state: &Path,
) -> Result<Loaded, Vec<String>> {
    load_all(args, read, default_web99_state).map_err(|rejected| rejected.errors)
}

/// Builds the servers' configuration from the file named by `--config` (read
/// with `read`, so tests need no files) and the flags.
pub(crate) fn load_all(
    args: &ServeArgs,
    read: impl Fn(&Path) -> std::io::Result<String>,
    default_web99_state: &Path,
) -> Result<Loaded, Rejected> {
    let mut report = Report::default();
    let mut web = stoa_web::Config::new(PathBuf::new(), Vec::new());
    let mut docroot = None;
    let file = match &args.config {
        Some(path) => {
            let text = read(path);
            read_config(
                path,
                text,
                &mut web,
                &mut docroot,
                default_web99_state,
                &mut report,
            )
        }
        None => FileParts::default(),
    };
    if file.unreadable {
        return Err(Rejected {
            errors: report.errors,
            warnings: Vec::new(),
        });
    }
    let wanted = mail_wanted(args, &file);
    let mail = wanted.smtp || wanted.pop3 || wanted.lmtp || wanted.pop3_proxy;
    apply_flags(args, &mut web, &mut docroot, mail, &mut report);
    let web = web_wanted(args, mail, file.web, docroot.is_some())
        .then(|| finish_web(args, web, docroot, default_web99_state, &mut report));
    let bind_password_file =
        (file.directory.as_ref()).and_then(|d| d.password_file().map(Path::to_owned));
    let directory = directory::finish(file.directory, &read, &mut report);
    let process = process::finish(file.process, args, &mut report);
    let (mut smtp, pop3) = finish_mail(args, file.smtp, file.pop3, wanted, &mut report);
    let mut pop3_proxy = wanted.pop3_proxy.then(|| {
        let certs = cert_pairs(args);
        pop3_proxy::finish(file.pop3_proxy, args, &file.mail_hosts, certs, &mut report)
    });
    if let Some(smtp) = &mut smtp {
        smtp.mail_hosts = file.mail_hosts;
    }
    let others: Vec<&Path> = (smtp.iter().map(|c| c.mail_dir.as_path()))
        .chain(pop3.iter().map(|p| p.mail_dir.as_path()))
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    let lmtp = wanted
        .lmtp
        .then(|| lmtp::finish(file.lmtp, args, &others, &mut report))
        .flatten();
    if let Some(proxy) = &mut pop3_proxy {
        let other = (others.first().map(|p| p.to_path_buf()))
            .or_else(|| lmtp.as_ref().map(|l| l.mail_dir.clone()));
        proxy.mail_dir = proxy.mail_dir.take().or(other);
        report.check(
            proxy.mail_dir.is_some() || !matches!(directory, Directory::Embedded(_)),
            "the POP3 proxy needs a directory: [directory] backend = \"ldap\" (as a proxy \
             has), or --mail-dir DIR for the embedded one",
        );
    }
    if report.errors.is_empty() {
        Ok(Loaded {
            web,
            smtp,
            pop3,
            lmtp,
            pop3_proxy,
            metrics: file.metrics,
            directory,
            process,
            bind_password_file,
            warnings: report.warnings,
        })
    } else {
        Err(Rejected {
            errors: report.errors,
            warnings: report.warnings,
        })
    }
}

/// What the file holds besides the web server's settings (which are read
/// straight into its configuration).
#[derive(Debug, Default)]
struct FileParts {
    /// The `[smtp]` table.
    smtp: Option<smtp::Draft>,
    /// The `[pop3]` table.
    pop3: Option<pop3::Draft>,
    /// The `[lmtp]` table.
    lmtp: Option<lmtp::Draft>,
    /// The `[pop3_proxy]` table.
    pop3_proxy: Option<pop3_proxy::Draft>,
    /// The `[metrics]` table.
    metrics: Option<Metrics>,
    /// The `[directory]` table, when it names a backend other than the embedded one.
    directory: Option<directory::Draft>,
    /// The `[[mail_host]]` entries, for the SMTP server's routing.
    mail_hosts: Vec<stoa_smtp::config::MailHost>,
    /// The top-level `user`, `group` and `umask`.
    process: Option<process::Process>,
    /// Whether the file configures the web server.
    web: bool,
    /// The file could not be read or is not TOML: its error is the only one
    /// worth printing (every other would only follow from it).
    unreadable: bool,
}

/// Reads the configuration file at `path` (its `text`, or why it could not be
/// read): the web server's settings into `web` and `docroot`, the mail tables
/// into the parts returned.
fn read_config(
    path: &Path,
    text: std::io::Result<String>,
    web: &mut stoa_web::Config,
    docroot: &mut Option<PathBuf>,
    default_web99_state: &Path,
    r: &mut Report,
) -> FileParts {
    let mut file = FileParts::default();
    match text {
        Ok(text) => match text.parse::<Table>() {
            Ok(table) => {
                file.web = ["web", "listener", "web99", "cgi", "site"]
                    .iter()
                    .any(|k| table.contains_key(*k));
                read_file(&table, web, docroot, r);
                read_web99(&table, web, default_web99_state, r);
                read_cgi(&table, web, r);
                web.sites = site::read(&table, path.parent(), r);
                file.smtp = smtp::read_table(&table, path.parent(), r);
                file.pop3 = pop3::read_table(&table, path.parent(), r);
                file.lmtp = lmtp::read_table(&table, path.parent(), r);
                file.pop3_proxy = pop3_proxy::read_table(&table, path.parent(), r);
                file.directory = directory::read_table(&table, path.parent(), r);
                file.metrics = metrics::read_table(&table, r);
                file.mail_hosts = mail_host::read(&table, r);
                file.process = Some(process::read_table(&table, r));
            }
            Err(e) => {
                file.unreadable = true;
                r.errors
                    .push(format!("{}: {}", path.display(), e.to_string().trim_end()));
            }
        },
        Err(e) => {
            file.unreadable = true;
            r.errors.push(format!("{}: {e}", path.display()));
        }
    }
    // Relative paths in a file are relative to the file, as in nginx's
    // prefix-relative paths.
    if let Some(base) = path.parent() {
        let files = web.tls_listen.iter_mut().flat_map(|l| &mut l.certs);
        let files = files.flat_map(|c| [&mut c.cert, &mut c.key]);
        for p in docroot.iter_mut().chain(files) {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
    }
    file
}

/// Which mail servers run.
#[derive(Debug, Clone, Copy)]
struct MailWanted {
    smtp: bool,
    pop3: bool,
    lmtp: bool,
    pop3_proxy: bool,
}

/// POP3 and LMTP run when asked for; SMTP when asked for, or when only the mail
/// directory is given (so `--mail-dir` alone reports the missing listener).
fn mail_wanted(args: &ServeArgs, file: &FileParts) -> MailWanted {
    let pop3 = file.pop3.is_some() || pop3::flags_given(args);
    let lmtp = file.lmtp.is_some() || lmtp::flags_given(args);
    let pop3_proxy = file.pop3_proxy.is_some() || pop3_proxy::flags_given(args);
    let smtp = file.smtp.is_some()
        || smtp::flags_given(args)
        || (args.mail_dir.is_some() && !pop3 && !lmtp && !pop3_proxy);
    MailWanted {
        smtp,
        pop3,
        lmtp,
        pop3_proxy,
    }
}

/// The mail servers that run, their flags applied over their tables (or the
/// defaults), checked.
fn finish_mail(
    args: &ServeArgs,
    smtp_draft: Option<smtp::Draft>,
    pop3_draft: Option<pop3::Draft>,
    wanted: MailWanted,
    r: &mut Report,
) -> (Option<stoa_smtp::Config>, Option<Pop3>) {
    let certs = cert_pairs(args);
    let given = |d: Option<&auth_throttle::Given>| d.cloned().unwrap_or_default();
    let smtp_auth = given(smtp_draft.as_ref().map(|d| &d.auth));
    let pop3_auth = given(pop3_draft.as_ref().map(|d| &d.auth));
    let mut smtp = if wanted.smtp {
        smtp::finish(smtp_draft, args, certs.clone(), r)
    } else {
        None
    };
    let mut pop3 = if wanted.pop3 {
        let smtp_dir = smtp
            .as_ref()
            .map(|c| c.mail_dir.as_path())
            .filter(|p| !p.as_os_str().is_empty());
        pop3::finish(pop3_draft, args, smtp_dir, certs, r)
    } else {
        None
    };
    // One failed-login throttle serves both (`serve.rs`): one set of settings.
    if let (Some(smtp), Some(pop3)) = (&mut smtp, &mut pop3) {
        smtp.auth_throttle = auth_throttle::share(&smtp_auth, &pop3_auth, r);
        pop3.config.auth_throttle = smtp.auth_throttle.clone();
    }
    (smtp, pop3)
}

/// Whether the web server runs: unless only mail was asked for (`mail`) and
/// neither the file (`in_file`) nor a document root (`has_docroot`, from either)
/// nor a web flag configures the web server.
fn web_wanted(args: &ServeArgs, mail: bool, in_file: bool, has_docroot: bool) -> bool {
    !mail
        || in_file
        || has_docroot
        || !args.listen.is_empty()
        || !args.tls_listen.is_empty()
        || args.web99
        || args.web99_state.is_some()
        || args.cgi_dir.is_some()
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

/// The keys of `[web]`.
const WEB_KEYS: &[&str] = &[
    "docroot",
    "workers",
    "runtime",
    "access_log",
    "log_format",
    "shutdown_grace",
    "http2",
    "defer_accept",
    "limits",
    "cache",
    "compression",
];

fn read_file(
    table: &Table,
    web: &mut stoa_web::Config,
    docroot: &mut Option<PathBuf>,
    r: &mut Report,
) {
    r.known_keys(
        table,
        "",
        &[
            "listener",
            "web",
            "web99",
            "cgi",
            "site",
            "smtp",
            "pop3",
            "pop3_proxy",
            "lmtp",
            "directory",
            "mail_host",
            "metrics",
            // process.rs
            "user",
            "group",
            "umask",
        ],
    );
    if let Some(listeners) = table.get("listener") {
        read_listeners(listeners, web, r);
    }
    if let Some(section) = r.table(table, "", "web") {
        read_web(section, web, docroot, r);
    }
}

/// `[web]`.
fn read_web(t: &Table, web: &mut stoa_web::Config, docroot: &mut Option<PathBuf>, r: &mut Report) {
    const P: &str = "web.";
    r.known_keys(t, P, WEB_KEYS);
    if let Some(v) = r.string(t, P, "docroot") {
        *docroot = Some(PathBuf::from(v));
    }
    r.integer_into(t, P, "workers", &mut web.workers);
    r.parsed(t, P, "runtime", parse_runtime, &mut web.runtime);
    r.parsed(t, P, "access_log", parse_access_log, &mut web.access_log);
    r.parsed(t, P, "log_format", parse_log_format, &mut web.log_format);
    r.duration(t, P, "shutdown_grace", &mut web.shutdown_grace);
    r.boolean_into(t, P, "http2", &mut web.http2);
    r.boolean_into(t, P, "defer_accept", &mut web.defer_accept);
    if let Some(limits) = r.table(t, P, "limits") {
        read_limits(limits, &mut web.limits, r);
    }
    if let Some(cache) = r.table(t, P, "cache") {
        read_cache(cache, &mut web.cache, r);
    }
    if let Some(c) = r.table(t, P, "compression") {
        compression::read(c, &mut web.compression, r);
    }
}

fn read_listeners(value: &Value, web: &mut stoa_web::Config, r: &mut Report) {
    let Some(items) = value.as_array() else {
        r.errors
            .push("listener: expected [[listener]] blocks".into());
        return;
    };
    for (i, item) in items.iter().enumerate() {
        let path = format!("listener[{i}].");
        let Some(block) = item.as_table() else {
            r.errors.push(format!("listener[{i}]: expected a table"));
            continue;
        };
        r.known_keys(block, &path, &["address", "protocol", "tls"]);
        let certs = block
            .get("tls")
            .map(|v| read_certs(v, &format!("{path}tls"), r));
        let https = read_protocol(block, &path, certs.is_some(), r);
        let addr = read_address(block, &path, r);
        // Anything missing here has been reported.
        match (addr, https, certs.flatten()) {
            (Some(addr), Some(false), _) => web.listen.push(addr),
            (Some(addr), Some(true), Some(certs)) => {
                web.tls_listen.push(TlsListener { addr, certs })
            }
            _ => {}
        }
    }
}

/// A listener's `address`; `None` (error reported) when it is missing or wrong.
fn read_address(block: &Table, path: &str, r: &mut Report) -> Option<SocketAddr> {
    match r
        .string(block, path, "address")
        .map(|text| parse_addr(&text))
    {
        Some(Ok(addr)) => Some(addr),
        Some(Err(e)) => {
            r.errors.push(format!("{path}address: {e}"));
            None
        }
        None => {
            r.errors.push(format!("{path}address: missing"));
            None
        }
    }
}

/// Whether a listener is HTTPS: `protocol`, which defaults to `https` when `tls`
/// is given. `None` (error reported) when the two disagree or the protocol is
/// unknown.
fn read_protocol(block: &Table, path: &str, has_tls: bool, r: &mut Report) -> Option<bool> {
    let error = match r.string(block, path, "protocol").as_deref() {
        None => return Some(has_tls),
        Some("http") if !has_tls => return Some(false),
        Some("https") if has_tls => return Some(true),
        Some("http") => {
            format!("{path}tls: an http listener takes no certificates (protocol = \"https\")")
        }
        Some("https") => format!(
            "{path}tls: missing: an https listener needs \
             tls = {{ cert = \"FILE\", key = \"FILE\" }}"
        ),
        Some(other) => format!(
            "{path}protocol: unsupported protocol {other:?} (supported: \"http\", \"https\")"
        ),
    };
    r.errors.push(error);
    None
}

/// A listener's `tls`: one `{ cert, key }` table, or an array of them (several
/// certificates chosen by SNI). `None` when it is wrong (errors reported).
fn read_certs(value: &Value, path: &str, r: &mut Report) -> Option<Vec<CertKeyFiles>> {
    let items: Vec<(String, &Value)> = match value {
        Value::Table(_) => vec![(format!("{path}."), value)],
        Value::Array(items) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("{path}[{i}]."), v))
            .collect(),
        other => {
            r.errors.push(format!(
                "{path}: expected {{ cert = \"FILE\", key = \"FILE\" }} or a non-empty array \
                 of them, found {other}"
            ));
            return None;
        }
    };
    let expected = items.len();
    let mut certs = Vec::new();
    for (p, item) in items {
        let Some(t) = item.as_table() else {
            r.errors.push(format!(
                "{p}: expected {{ cert = \"FILE\", key = \"FILE\" }}"
            ));
            continue;
        };
        r.known_keys(t, &p, &["cert", "key"]);
        let mut file = |key: &str| {
            let v = r.string(t, &p, key);
            if v.is_none() && !t.contains_key(key) {
                r.errors.push(format!("{p}{key}: missing"));
            }
            v.map(PathBuf::from)
        };
        if let (Some(cert), Some(key)) = (file("cert"), file("key")) {
            certs.push(CertKeyFiles { cert, key });
        }
    }
    (certs.len() == expected).then_some(certs)
}

/// The keys of `[web.limits]`.
const LIMITS_KEYS: &[&str] = &[
    "max_request_line",
    "max_header_line",
    "max_head",
    "max_headers",
    "head_timeout",
    "head_timeout_per_500b",
    "head_timeout_max",
    "body_timeout",
    "max_discard_body",
    "keepalive_timeout",
    "keepalive_requests",
    "keepalive_max_age",
    "send_timeout",
    "max_connections",
    "max_handshakes",
    "max_pipeline",
    "linger_timeout",
    "linger_idle",
    "h2_max_streams",
];

fn read_limits(t: &Table, l: &mut stoa_web::config::Limits, r: &mut Report) {
    const P: &str = "web.limits.";
    r.known_keys(t, P, LIMITS_KEYS);
    r.size(t, P, "max_request_line", &mut l.head.max_request_line);
    r.size(t, P, "max_header_line", &mut l.head.max_header_line);
    r.size(t, P, "max_head", &mut l.head.max_head);
    r.integer_into(t, P, "max_headers", &mut l.head.max_headers);
    r.duration(t, P, "head_timeout", &mut l.head_timeout);
    r.duration(t, P, "head_timeout_per_500b", &mut l.head_timeout_per_500b);
    r.duration(t, P, "head_timeout_max", &mut l.head_timeout_max);
    r.duration(t, P, "body_timeout", &mut l.body_timeout);
    r.size(t, P, "max_discard_body", &mut l.max_discard_body);
    r.duration(t, P, "keepalive_timeout", &mut l.keepalive_timeout);
    r.integer_into(t, P, "keepalive_requests", &mut l.keepalive_requests);
    r.duration(t, P, "keepalive_max_age", &mut l.keepalive_max_age);
    r.duration(t, P, "send_timeout", &mut l.send_timeout);
    r.integer_into(t, P, "max_connections", &mut l.max_connections);
    r.integer_into(t, P, "max_handshakes", &mut l.max_handshakes);
    r.integer_into(t, P, "max_pipeline", &mut l.max_pipeline);
    r.duration(t, P, "linger_timeout", &mut l.linger_timeout);
    r.duration(t, P, "linger_idle", &mut l.linger_idle);
    r.integer_into(t, P, "h2_max_streams", &mut l.h2_max_streams);
}

fn read_cache(t: &Table, c: &mut stoa_web::config::CacheConfig, r: &mut Report) {
    const P: &str = "web.cache.";
    r.known_keys(
        t,
        P,
        &[
            "revalidate",
            "max_entries",
            "max_open_files",
            "max_memory_file",
            "memory_budget",
        ],
    );
    r.duration(t, P, "revalidate", &mut c.revalidate);
    r.integer_into(t, P, "max_entries", &mut c.max_entries);
    r.integer_into(t, P, "max_open_files", &mut c.max_open_files);
    r.size(t, P, "max_memory_file", &mut c.max_memory_file);
    r.size(t, P, "memory_budget", &mut c.memory_budget);
}

fn read_web99(table: &Table, web: &mut stoa_web::Config, default_state: &Path, r: &mut Report) {
    const P: &str = "web99.";
    let Some(t) = r.table(table, "", "web99") else {
        return;
    };
    r.known_keys(
        t,
        P,
        &[
            "enabled",
            "state_dir",
            "path",
            "max_post_body",
            "manager_networks",
        ],
    );
    let enabled = match t.get("enabled") {
        None => true,
        Some(Value::Boolean(b)) => *b,
        Some(other) => {
            r.errors
                .push(format!("{P}enabled: expected true or false, found {other}"));
            false
        }
    };
    let mut config = Web99Config::new(default_state.to_owned());
    if let Some(dir) = r.string(t, P, "state_dir") {
        config.state_dir = PathBuf::from(dir);
    }
    if let Some(path) = r.string(t, P, "path") {
        if path.starts_with('/') && !path.contains(['?', '#', ' ']) {
            config.path = path;
        } else {
            r.errors.push(format!(
                "{P}path: {path:?} is not a URL path like \"/web99\""
            ));
        }
    }
    r.size(t, P, "max_post_body", &mut config.max_post_body);
    if t.contains_key("manager_networks") {
        // The list replaces the loopback default; an empty one refuses everyone.
        config.manager_networks = r.parsed_list(t, P, "manager_networks", smtp::parse_net);
    }
    if enabled {
        web.web99 = Some(config);
    }
}

fn read_cgi(table: &Table, web: &mut stoa_web::Config, r: &mut Report) {
    const P: &str = "cgi.";
    let Some(t) = r.table(table, "", "cgi") else {
        return;
    };
    r.known_keys(
        t,
        P,
        &[
            "timeout",
            "max_processes",
            "max_output",
            "max_body",
            "mounts",
        ],
    );
    let mut cgi = CgiConfig::new();
    r.duration(t, P, "timeout", &mut cgi.timeout);
    r.integer_into(t, P, "max_processes", &mut cgi.max_processes);
    r.size(t, P, "max_output", &mut cgi.max_output);
    r.size(t, P, "max_body", &mut cgi.max_body);
    if let Some(mounts) = r.table(t, P, "mounts") {
        read_cgi_mounts(mounts, "cgi.mounts", &mut cgi.mounts, r);
    }
    web.cgi = Some(cgi);
}

/// `[cgi.mounts]` (or a site's `cgi`, named `path`): URL prefix = directory.
fn read_cgi_mounts(mounts: &Table, path: &str, into: &mut Vec<CgiMount>, r: &mut Report) {
    for (prefix, dir) in mounts {
        match dir.as_str() {
            Some(dir) if prefix.starts_with('/') && prefix.ends_with('/') => into.push(CgiMount {
                prefix: prefix.clone(),
                dir: PathBuf::from(dir),
            }),
            Some(_) => r
                .errors
                .push(format!("{path}: {prefix:?} must start and end with /")),
            None => r
                .errors
                .push(format!("{path}.{prefix}: expected a directory path")),
        }
    }
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
    r.flag(
        "--log-format",
        args.log_format.as_deref(),
        parse_log_format,
        &mut web.log_format,
    );
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
    let runtime = &mut web.runtime;
    r.flag("--runtime", args.runtime.as_deref(), parse_runtime, runtime);
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
    cert_pairs(args)
}

/// The `--tls-cert`/`--tls-key` pairs, in order (an unpaired one is left out).
fn cert_pairs(args: &ServeArgs) -> Vec<CertKeyFiles> {
    args.tls_cert
        .iter()
        .zip(&args.tls_key)
        .map(|(cert, key)| CertKeyFiles {
            cert: cert.clone(),
            key: key.clone(),
        })
        .collect()
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
        r.errors.extend(cert_errors(pair));
    }
}

/// What is wrong with one certificate and key pair, a line each (none when it
/// loads).
fn cert_errors(pair: &CertKeyFiles) -> Vec<String> {
    match stoa_netkit::tls::load_certified_keys(std::slice::from_ref(pair)) {
        Ok(_) => Vec::new(),
        Err(errors) => errors.iter().map(ToString::to_string).collect(),
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

fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not an address like 127.0.0.1:8080 or [::1]:8080"))
}

fn parse_count(text: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not a whole number"))
}

fn parse_runtime(text: &str) -> Result<RuntimeModel, String> {
    match text {
        "per-core" => Ok(RuntimeModel::PerCore),
        "multi-thread" => Ok(RuntimeModel::MultiThread),
        _ => Err(format!(
            "{text:?} is not a runtime model (per-core, multi-thread)"
        )),
    }
}

fn parse_access_log(text: &str) -> Result<AccessLogTarget, String> {
    match text {
        "" => Err("empty; use a file name, \"-\" or \"off\"".into()),
        "off" => Ok(AccessLogTarget::Off),
        "-" => Ok(AccessLogTarget::Stdout),
        path => Ok(AccessLogTarget::File(PathBuf::from(path))),
    }
}

fn parse_log_format(text: &str) -> Result<LogFormat, String> {
    match text {
        "common" => Ok(LogFormat::Common),
        "combined" => Ok(LogFormat::Combined),
        _ => Err(format!("{text:?} is not a log format (common, combined)")),
    }
}

#[cfg(test)]
mod tests;
