//! Configuration: the TOML file, then the command-line flags over it, then one
//! validation of the result. The web server is configured unless only mail was
//! asked for (an `[smtp]` or `[pop3]` table or a mail flag, and no document root,
//! web listener or web table); the SMTP server (`smtp.rs`) and the POP3 server
//! (`pop3.rs`) each when asked for, over the same mail directory. Every problem is
//! collected and reported together; unknown keys are warnings (a typo should not go
//! unnoticed, nor stop a server).
//!
//! The file is read into `toml::Table` and walked by hand instead of derived with
//! serde, because serde stops at the first error and cannot name every bad key.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use stoa_web::config::{
    AccessLogTarget, CertKeyFiles, CgiConfig, CgiMount, LogFormat, RuntimeModel, TlsListener,
    Web99Config,
};
use toml::{Table, Value};

use crate::cli::ServeArgs;

mod pop3;
mod smtp;
mod units;

pub(crate) use pop3::Pop3;

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
    pub(crate) warnings: Vec<String>,
}

/// Collects errors and warnings while reading.
#[derive(Debug, Default)]
struct Report {
    errors: Vec<String>,
    warnings: Vec<String>,
}

/// Builds the web server's configuration from the file named by `--config` (read
/// with `read`, so tests need no files) and the flags.
pub(crate) fn load(
    args: &ServeArgs,
    read: impl Fn(&Path) -> std::io::Result<String>,
    default_web99_state: &Path,
) -> Result<Loaded, Vec<String>> {
    let mut report = Report::default();
    let mut web = stoa_web::Config::new(PathBuf::new(), Vec::new());
    let mut docroot = None;
    let (mut smtp_draft, mut pop3_draft, mut web_in_file) = (None, None, false);
    if let Some(path) = &args.config {
        match read(path) {
            Ok(text) => match text.parse::<Table>() {
                Ok(table) => {
                    web_in_file = ["web", "listener", "web99", "cgi"]
                        .iter()
                        .any(|k| table.contains_key(*k));
                    read_file(&table, &mut web, &mut docroot, &mut report);
                    read_web99(&table, &mut web, default_web99_state, &mut report);
                    read_cgi(&table, &mut web, &mut report);
                    smtp_draft = smtp::read_table(&table, path.parent(), &mut report);
                    pop3_draft = pop3::read_table(&table, path.parent(), &mut report);
                }
                Err(e) => {
                    report
                        .errors
                        .push(format!("{}: {}", path.display(), e.to_string().trim_end()))
                }
            },
            Err(e) => report.errors.push(format!("{}: {e}", path.display())),
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
    }
    // POP3 runs when asked for; SMTP when asked for, or when only the mail
    // directory is given (so `--mail-dir` alone reports the missing listener).
    let pop3_wanted = pop3_draft.is_some() || pop3::flags_given(args);
    let smtp_wanted = smtp_draft.is_some()
        || smtp::flags_given(args)
        || (args.mail_dir.is_some() && !pop3_wanted);
    let mail = smtp_wanted || pop3_wanted;
    apply_flags(args, &mut web, &mut docroot, mail, &mut report);
    let web_wanted = !mail
        || web_in_file
        || docroot.is_some()
        || !args.listen.is_empty()
        || !args.tls_listen.is_empty()
        || args.web99
        || args.web99_state.is_some()
        || args.cgi_dir.is_some();
    let web = web_wanted.then(|| finish_web(args, web, docroot, default_web99_state, &mut report));
    let certs: Vec<CertKeyFiles> = args
        .tls_cert
        .iter()
        .zip(&args.tls_key)
        .map(|(cert, key)| CertKeyFiles {
            cert: cert.clone(),
            key: key.clone(),
        })
        .collect();
    let smtp = if smtp_wanted {
        smtp::finish(smtp_draft, args, certs.clone(), &mut report)
    } else {
        None
    };
    let pop3 = if pop3_wanted {
        let smtp_dir = smtp
            .as_ref()
            .map(|c| c.mail_dir.as_path())
            .filter(|p| !p.as_os_str().is_empty());
        pop3::finish(pop3_draft, args, smtp_dir, certs, &mut report)
    } else {
        None
    };
    if report.errors.is_empty() {
        Ok(Loaded {
            web,
            smtp,
            pop3,
            warnings: report.warnings,
        })
    } else {
        Err(report.errors)
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

fn read_file(
    table: &Table,
    web: &mut stoa_web::Config,
    docroot: &mut Option<PathBuf>,
    r: &mut Report,
) {
    r.known_keys(
        table,
        "",
        &["listener", "web", "web99", "cgi", "smtp", "pop3"],
    );
    if let Some(listeners) = table.get("listener") {
        read_listeners(listeners, web, r);
    }
    let Some(section) = r.table(table, "", "web") else {
        return;
    };
    r.known_keys(
        section,
        "web.",
        &[
            "docroot",
            "workers",
            "runtime",
            "access_log",
            "log_format",
            "shutdown_grace",
            "limits",
            "cache",
        ],
    );
    if let Some(v) = r.string(section, "web.", "docroot") {
        *docroot = Some(PathBuf::from(v));
    }
    if let Some(n) = r.integer(section, "web.", "workers") {
        web.workers = n;
    }
    r.parsed(section, "web.", "runtime", parse_runtime, &mut web.runtime);
    r.parsed(
        section,
        "web.",
        "access_log",
        parse_access_log,
        &mut web.access_log,
    );
    r.parsed(
        section,
        "web.",
        "log_format",
        parse_log_format,
        &mut web.log_format,
    );
    r.duration(section, "web.", "shutdown_grace", &mut web.shutdown_grace);
    if let Some(limits) = r.table(section, "web.", "limits") {
        read_limits(limits, &mut web.limits, r);
    }
    if let Some(cache) = r.table(section, "web.", "cache") {
        read_cache(cache, &mut web.cache, r);
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
        let addr = match r
            .string(block, &path, "address")
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
        };
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

fn read_limits(t: &Table, l: &mut stoa_web::config::Limits, r: &mut Report) {
    const P: &str = "web.limits.";
    r.known_keys(
        t,
        P,
        &[
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
        ],
    );
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
}

fn read_cache(t: &Table, c: &mut stoa_web::config::CacheConfig, r: &mut Report) {
    const P: &str = "web.cache.";
    r.known_keys(
        t,
        P,
        &[
            "revalidate",
            "max_entries",
            "max_memory_file",
            "memory_budget",
        ],
    );
    r.duration(t, P, "revalidate", &mut c.revalidate);
    r.integer_into(t, P, "max_entries", &mut c.max_entries);
    r.size(t, P, "max_memory_file", &mut c.max_memory_file);
    r.size(t, P, "memory_budget", &mut c.memory_budget);
}

fn read_web99(table: &Table, web: &mut stoa_web::Config, default_state: &Path, r: &mut Report) {
    const P: &str = "web99.";
    let Some(t) = r.table(table, "", "web99") else {
        return;
    };
    r.known_keys(t, P, &["enabled", "state_dir", "path", "max_post_body"]);
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
        for (prefix, dir) in mounts {
            match dir.as_str() {
                Some(dir) if prefix.starts_with('/') && prefix.ends_with('/') => {
                    cgi.mounts.push(CgiMount {
                        prefix: prefix.clone(),
                        dir: PathBuf::from(dir),
                    })
                }
                Some(_) => r
                    .errors
                    .push(format!("{P}mounts: {prefix:?} must start and end with /")),
                None => r
                    .errors
                    .push(format!("{P}mounts.{prefix}: expected a directory path")),
            }
        }
    }
    web.cgi = Some(cgi);
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
    if !args.listen.is_empty() || !args.tls_listen.is_empty() {
        web.listen.clear();
        web.tls_listen.clear();
        for text in &args.listen {
            match parse_addr(text) {
                Ok(addr) => web.listen.push(addr),
                Err(e) => r.errors.push(format!("--listen {text}: {e}")),
            }
        }
        let certs = flag_certs(args, r);
        for text in &args.tls_listen {
            match parse_addr(text) {
                Ok(addr) => web.tls_listen.push(TlsListener {
                    addr,
                    certs: certs.clone(),
                }),
                Err(e) => r.errors.push(format!("--tls-listen {text}: {e}")),
            }
        }
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
    r.flag(
        "--head-timeout",
        args.head_timeout.as_deref(),
        parse_duration,
        &mut web.limits.head_timeout,
    );
    let keepalive = &mut web.limits.keepalive_timeout;
    r.flag(
        "--keepalive-timeout",
        args.keepalive_timeout.as_deref(),
        parse_duration,
        keepalive,
    );
    r.flag(
        "--send-timeout",
        args.send_timeout.as_deref(),
        parse_duration,
        &mut web.limits.send_timeout,
    );
    let max = &mut web.limits.max_connections;
    r.flag(
        "--max-connections",
        args.max_connections.as_deref(),
        parse_count,
        max,
    );
    r.flag(
        "--runtime",
        args.runtime.as_deref(),
        parse_runtime,
        &mut web.runtime,
    );
}

/// The `--tls-cert`/`--tls-key` pairs, in order.
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
    certs
        .iter()
        .zip(keys)
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
    for pair in web.tls_listen.iter().flat_map(|l| &l.certs) {
        if seen.contains(&pair) {
            continue;
        }
        seen.push(pair);
        if let Err(errors) = stoa_netkit::tls::load_certified_keys(std::slice::from_ref(pair)) {
            r.errors.extend(errors.iter().map(ToString::to_string));
        }
    }
}

fn validate(web: &stoa_web::Config, r: &mut Report) {
    check_certs(web, r);
    let mut check = |ok: bool, msg: &str| {
        if !ok {
            r.errors.push(msg.to_owned());
        }
    };
    if !web.docroot.as_os_str().is_empty() && !web.docroot.is_dir() {
        check(
            false,
            &format!("document root {}: not a directory", web.docroot.display()),
        );
    }
    check(
        (1..=MAX_WORKERS).contains(&web.workers),
        &format!("workers: must be 1 to {MAX_WORKERS}"),
    );
    let l = &web.limits;
    let cap = stoa_http_proto::request::MAX_HEADERS_CAP;
    check(
        (1..=cap).contains(&l.head.max_headers),
        &format!("web.limits.max_headers: must be 1 to {cap}"),
    );
    check(
        l.head.max_request_line >= 16,
        "web.limits.max_request_line: must be at least 16 bytes",
    );
    check(
        l.head.max_header_line >= 16,
        "web.limits.max_header_line: must be at least 16 bytes",
    );
    check(
        l.head.max_head >= l.head.max_request_line.max(l.head.max_header_line),
        "web.limits.max_head: must be at least max_request_line and max_header_line",
    );
    for (name, d) in [
        ("head_timeout", l.head_timeout),
        ("head_timeout_max", l.head_timeout_max),
        ("body_timeout", l.body_timeout),
        ("keepalive_timeout", l.keepalive_timeout),
        ("send_timeout", l.send_timeout),
        ("linger_idle", l.linger_idle),
    ] {
        check(
            !d.is_zero(),
            &format!("web.limits.{name}: must be more than zero"),
        );
    }
    check(
        l.head_timeout_max >= l.head_timeout,
        "web.limits.head_timeout_max: must be at least head_timeout",
    );
    check(
        l.keepalive_requests >= 1,
        "web.limits.keepalive_requests: must be at least 1",
    );
    check(
        l.max_connections >= 1,
        "web.limits.max_connections: must be at least 1",
    );
    check(
        l.max_handshakes >= 1,
        "web.limits.max_handshakes: must be at least 1",
    );
    check(
        l.max_pipeline >= 1,
        "web.limits.max_pipeline: must be at least 1",
    );
    check(
        web.cache.max_entries >= 1,
        "web.cache.max_entries: must be at least 1",
    );
    for m in web.cgi.iter().flat_map(|c| &c.mounts) {
        check(
            m.dir.is_dir(),
            &format!("CGI directory {}: not a directory", m.dir.display()),
        );
    }
    if let Some(w) = &web.web99 {
        // A lexical check (no symlinks resolved): the state must not be reachable
        // through the document root.
        let inside = std::path::absolute(&w.state_dir)
            .ok()
            .map(|p| lexically_normal(&p))
            .zip(
                std::path::absolute(&web.docroot)
                    .ok()
                    .map(|p| lexically_normal(&p)),
            )
            .is_some_and(|(state, root)| {
                !web.docroot.as_os_str().is_empty() && state.starts_with(root)
            });
        check(
            !inside,
            &format!(
                "web99 state directory {} is inside the document root: it would be served",
                w.state_dir.display()
            ),
        );
    }
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

impl Report {
    fn known_keys(&mut self, table: &Table, path: &str, known: &[&str]) {
        for key in table.keys().filter(|k| !known.contains(&k.as_str())) {
            self.warnings
                .push(format!("{path}{key}: unknown key, ignored"));
        }
    }

    fn table<'t>(&mut self, t: &'t Table, path: &str, key: &str) -> Option<&'t Table> {
        match t.get(key)? {
            Value::Table(inner) => Some(inner),
            other => {
                self.errors.push(format!(
                    "{path}{key}: expected a table, found {}",
                    other.type_str()
                ));
                None
            }
        }
    }

    fn string(&mut self, t: &Table, path: &str, key: &str) -> Option<String> {
        match t.get(key)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.errors.push(format!(
                    "{path}{key}: expected a string, found {}",
                    other.type_str()
                ));
                None
            }
        }
    }

    fn integer(&mut self, t: &Table, path: &str, key: &str) -> Option<usize> {
        match t.get(key)? {
            Value::Integer(n) if *n >= 0 => usize::try_from(*n).ok(),
            other => {
                self.errors.push(format!(
                    "{path}{key}: expected a non-negative integer, found {other}"
                ));
                None
            }
        }
    }

    fn integer_into<T: TryFrom<usize>>(&mut self, t: &Table, path: &str, key: &str, into: &mut T) {
        if let Some(n) = self.integer(t, path, key) {
            match T::try_from(n) {
                Ok(v) => *into = v,
                Err(_) => self
                    .errors
                    .push(format!("{path}{key}: {n} is out of range")),
            }
        }
    }

    /// A value given as a string and parsed with `parse`.
    fn parsed<T>(
        &mut self,
        t: &Table,
        path: &str,
        key: &str,
        parse: fn(&str) -> Result<T, String>,
        into: &mut T,
    ) {
        if let Some(text) = self.string(t, path, key) {
            match parse(&text) {
                Ok(v) => *into = v,
                Err(e) => self.errors.push(format!("{path}{key}: {e}")),
            }
        }
    }

    /// A duration: a string with a unit (`"20s"`, `"200ms"`) or whole seconds.
    fn duration(&mut self, t: &Table, path: &str, key: &str, into: &mut Duration) {
        match t.get(key) {
            None => {}
            Some(Value::Integer(n)) if *n >= 0 => *into = Duration::from_secs(n.unsigned_abs()),
            Some(Value::String(s)) => match parse_duration(s) {
                Ok(d) => *into = d,
                Err(e) => self.errors.push(format!("{path}{key}: {e}")),
            },
            Some(other) => self.errors.push(format!(
                "{path}{key}: expected a duration like \"20s\" or \"200ms\", found {other}"
            )),
        }
    }

    /// A size: bytes as an integer, or a string with a unit (`"32KiB"`).
    fn size<T: TryFrom<u64>>(&mut self, t: &Table, path: &str, key: &str, into: &mut T) {
        let bytes = match t.get(key) {
            None => return,
            Some(Value::Integer(n)) if *n >= 0 => Ok(n.unsigned_abs()),
            Some(Value::String(s)) => parse_size(s),
            Some(other) => Err(format!(
                "expected a size like 8192 or \"32KiB\", found {other}"
            )),
        };
        match bytes.and_then(|b| T::try_from(b).map_err(|_| format!("{b} is out of range"))) {
            Ok(v) => *into = v,
            Err(e) => self.errors.push(format!("{path}{key}: {e}")),
        }
    }

    fn flag<T>(
        &mut self,
        name: &str,
        text: Option<&str>,
        parse: fn(&str) -> Result<T, String>,
        into: &mut T,
    ) {
        if let Some(text) = text {
            match parse(text) {
                Ok(v) => *into = v,
                Err(e) => self.errors.push(format!("{name} {text}: {e}")),
            }
        }
    }
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
