//! `[[site]]`: the web server's virtual hosts.
//!
//! `[web]` keeps what the server shares (listeners, workers, limits, cache, the
//! log format, and the access log of sites without their own); each site
//! carries what differs per host name: `names`, `default`, `docroot`,
//! `access_log`, `tls`, `web99`, `cgi`, `error_pages`, `autoindex`,
//! `hide_dotfiles`.
//! Without `[[site]]`, `[web] docroot` (or `--docroot`) is the one implicit
//! site, exactly as before sites existed. Both at once is an error rather than
//! a guess: a `[web] docroot` beside sites could be a forgotten line or meant as
//! a catch-all, and the two read alike.

use std::path::{Path, PathBuf};

use stoa_web::config::{AccessLogTarget, CgiMount, SiteConfig};
use toml::Table;

use super::super::Report;

/// The keys of a `[[site]]`.
const SITE_KEYS: &[&str] = &[
    "names",
    "default",
    "docroot",
    "access_log",
    "tls",
    "web99",
    "cgi",
    "error_pages",
    "autoindex",
    "hide_dotfiles",
];

/// Reads every `[[site]]`, its relative paths taken from `base` (the
/// configuration file's directory).
pub(super) fn read(table: &Table, base: Option<&Path>, r: &mut Report) -> Vec<SiteConfig> {
    let Some(value) = table.get("site") else {
        return Vec::new();
    };
    let Some(items) = value.as_array() else {
        r.errors.push("site: expected [[site]] blocks".into());
        return Vec::new();
    };
    let mut sites = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = format!("site[{i}].");
        let Some(t) = item.as_table() else {
            r.errors.push(format!("site[{i}]: expected a table"));
            continue;
        };
        if let Some(site) = read_site(t, &p, base, r) {
            sites.push(site);
        }
    }
    sites
}

fn read_site(t: &Table, p: &str, base: Option<&Path>, r: &mut Report) -> Option<SiteConfig> {
    r.known_keys(t, p, SITE_KEYS);
    let rebase = |path: PathBuf| match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path,
    };
    let docroot = r.string(t, p, "docroot");
    if docroot.is_none() && !t.contains_key("docroot") {
        r.errors.push(format!("{p}docroot: missing"));
    }
    let mut site = SiteConfig::new(rebase(PathBuf::from(docroot.unwrap_or_default())));
    site.names = r.parsed_list(t, p, "names", parse_name);
    r.boolean_into(t, p, "default", &mut site.default);
    r.boolean_into(t, p, "web99", &mut site.web99);
    r.boolean_into(t, p, "autoindex", &mut site.autoindex);
    if t.contains_key("hide_dotfiles") {
        let mut hide = false;
        r.boolean_into(t, p, "hide_dotfiles", &mut hide);
        site.hide_dotfiles = Some(hide);
    }
    // As `[web] access_log`; a file is relative to the configuration file, as
    // the docroot is.
    r.parsed(
        t,
        p,
        "access_log",
        |text| super::parse_access_log(text).map(Some),
        &mut site.access_log,
    );
    if let Some(AccessLogTarget::File(path)) = &mut site.access_log {
        *path = rebase(std::mem::take(path));
    }
    if let Some(v) = t.get("tls")
        && let Some(certs) = super::super::tls::read_certs(v, &format!("{p}tls"), r)
    {
        site.tls = certs
            .into_iter()
            .map(|mut c| {
                c.cert = rebase(c.cert);
                c.key = rebase(c.key);
                c
            })
            .collect();
    }
    if let Some(cgi) = r.table(t, p, "cgi") {
        let mut mounts = Vec::new();
        super::read::read_cgi_mounts(cgi, &format!("{p}cgi"), &mut mounts, r);
        site.cgi = mounts
            .into_iter()
            .map(|m| CgiMount {
                dir: rebase(m.dir),
                ..m
            })
            .collect();
    }
    if let Some(pages) = r.table(t, p, "error_pages") {
        site.error_pages = read_error_pages(pages, &format!("{p}error_pages."), r);
    }
    Some(site)
}

/// `{ 404 = "/errors/404.html", … }`: a status from 400 to 599 → a path
/// beneath the site's document root.
fn read_error_pages(t: &Table, p: &str, r: &mut Report) -> Vec<(u16, String)> {
    let mut pages = Vec::new();
    for (status, page) in t {
        let code = status
            .parse::<u16>()
            .ok()
            .filter(|c| (400..=599).contains(c));
        let Some(code) = code else {
            r.errors
                .push(format!("{p}{status}: not an error status (400 to 599)"));
            continue;
        };
        match page.as_str() {
            Some(path) if is_page_path(path) => pages.push((code, path.to_owned())),
            Some(path) => r.errors.push(format!(
                "{p}{status}: {path:?} is not a path like \"/errors/404.html\" \
                 (absolute, no \"..\", \"?\" or \"#\")"
            )),
            None => r
                .errors
                .push(format!("{p}{status}: expected a path, found {page}")),
        }
    }
    pages.sort();
    pages
}

/// A page path as file lookups take it: absolute, normalised, no query.
fn is_page_path(path: &str) -> bool {
    path.starts_with('/')
        && !path.ends_with('/')
        && !path.contains(['?', '#', '%', '\\'])
        && !path.split('/').any(|seg| seg == "." || seg == "..")
        && !path.contains("//")
}

/// A site name: a host name or IP address (`www.example.com`, `127.0.0.1`,
/// `[::1]`), or a wildcard for a whole domain (`*.example.com`); no port.
pub(super) fn parse_name(text: &str) -> Result<String, String> {
    let host = text.strip_prefix("*.").unwrap_or(text);
    let bytes = host.as_bytes();
    let valid = !host.is_empty()
        && stoa_http_proto::host::is_valid_host(bytes)
        && stoa_http_proto::host::without_port(bytes) == bytes
        && !host.contains(['*', '%'])
        && !host.starts_with('.')
        && !host.contains("..");
    if valid {
        Ok(text.to_ascii_lowercase())
    } else {
        Err(format!(
            "{text:?} is not a host name like \"www.example.com\", an address, or a \
             wildcard like \"*.example.com\" (no port)"
        ))
    }
}

/// The checks across sites: one default at most, no name twice, one site with
/// the dynamic API, and each document root and CGI directory there.
pub(super) fn check(sites: &[SiteConfig], r: &mut Report) {
    let defaults: Vec<usize> = (sites.iter().enumerate())
        .filter(|(_, s)| s.default)
        .map(|(i, _)| i)
        .collect();
    r.check(
        defaults.len() <= 1,
        &format!("site: default = true on more than one site (sites {defaults:?})"),
    );
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for (i, site) in sites.iter().enumerate() {
        for name in &site.names {
            let name = name.strip_suffix('.').unwrap_or(name);
            match seen.iter().find(|(n, _)| *n == name) {
                Some((_, first)) if *first != i => r.errors.push(format!(
                    "site[{i}].names: {name:?} is already a name of site[{first}]"
                )),
                Some(_) => {}
                None => seen.push((name, i)),
            }
        }
        if !site.docroot.as_os_str().is_empty() && !site.docroot.is_dir() {
            r.errors.push(format!(
                "site[{i}].docroot: {} is not a directory",
                site.docroot.display()
            ));
        }
        for m in &site.cgi {
            r.check(
                m.dir.is_dir(),
                &format!(
                    "site[{i}].cgi: CGI directory {} is not a directory",
                    m.dir.display()
                ),
            );
        }
    }
    let web99: Vec<usize> = (sites.iter().enumerate())
        .filter(|(_, s)| s.web99)
        .map(|(i, _)| i)
        .collect();
    r.check(
        web99.len() <= 1,
        &format!(
            "site: web99 = true on more than one site (sites {web99:?}); the dynamic API \
             has one state directory"
        ),
    );
}
