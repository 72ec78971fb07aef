//! Reading the web server's tables: `[[listener]]`, `[web]` with `[web.limits]`,
//! `[web.cache]` and `[web.compression]`, `[web99]` and `[cgi]` (`[[site]]` is
//! `site.rs`), straight into its configuration.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use stoa_web::config::{CgiConfig, CgiMount, TlsListener, Web99Config};
use toml::{Table, Value};

use super::super::Report;
use super::super::tls::read_certs;
use super::super::units::{parse_addr, parse_net};
use super::{compression, parse_access_log, parse_log_format, parse_runtime};

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
    "hide_dotfiles",
    "limits",
    "cache",
    "compression",
];

/// `[web]`.
pub(super) fn read_web(
    t: &Table,
    web: &mut stoa_web::Config,
    docroot: &mut Option<PathBuf>,
    r: &mut Report,
) {
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
    r.boolean_into(t, P, "hide_dotfiles", &mut web.hide_dotfiles);
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

pub(super) fn read_listeners(value: &Value, web: &mut stoa_web::Config, r: &mut Report) {
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

pub(super) fn read_web99(
    table: &Table,
    web: &mut stoa_web::Config,
    default_state: &Path,
    r: &mut Report,
) {
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
        config.manager_networks = r.parsed_list(t, P, "manager_networks", parse_net);
    }
    if enabled {
        web.web99 = Some(config);
    }
}

pub(super) fn read_cgi(table: &Table, web: &mut stoa_web::Config, r: &mut Report) {
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
pub(super) fn read_cgi_mounts(
    mounts: &Table,
    path: &str,
    into: &mut Vec<CgiMount>,
    r: &mut Report,
) {
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
