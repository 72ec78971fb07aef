//! The web server's tables as `stoa check-config` prints them.

use stoa_web::config::{AccessLogTarget, LogFormat, RuntimeModel};
use toml::Value;

use super::super::print::{Doc, certs, duration, int, nets, path, size, strings};

pub(super) fn sections(doc: &mut Doc, web: &stoa_web::Config) {
    doc.table("web");
    if web.sites.is_empty() {
        doc.set("docroot", path(&web.docroot));
    } else {
        doc.comment("docroot: in each [[site]]");
    }
    doc.set("workers", int(web.workers));
    doc.set(
        "runtime",
        match web.runtime {
            RuntimeModel::PerCore => "per-core",
            RuntimeModel::MultiThread => "multi-thread",
        },
    );
    doc.set("access_log", access_log(&web.access_log));
    doc.set(
        "log_format",
        match web.log_format {
            LogFormat::Common => "common",
            LogFormat::Combined => "combined",
        },
    );
    doc.set("shutdown_grace", duration(web.shutdown_grace));
    doc.set("http2", web.http2);
    doc.set("defer_accept", web.defer_accept);
    doc.set("hide_dotfiles", web.hide_dotfiles);

    let l = &web.limits;
    doc.table("web.limits");
    doc.set("max_request_line", size(l.head.max_request_line));
    doc.set("max_header_line", size(l.head.max_header_line));
    doc.set("max_head", size(l.head.max_head));
    doc.set("max_headers", int(l.head.max_headers));
    doc.set("head_timeout", duration(l.head_timeout));
    doc.set("head_timeout_per_500b", duration(l.head_timeout_per_500b));
    doc.set("head_timeout_max", duration(l.head_timeout_max));
    doc.set("body_timeout", duration(l.body_timeout));
    doc.set("max_discard_body", size(l.max_discard_body));
    doc.set("keepalive_timeout", duration(l.keepalive_timeout));
    doc.set("keepalive_requests", int(l.keepalive_requests));
    doc.set("keepalive_max_age", duration(l.keepalive_max_age));
    doc.set("send_timeout", duration(l.send_timeout));
    doc.set("max_connections", int(l.max_connections));
    doc.set("max_handshakes", int(l.max_handshakes));
    doc.set("max_pipeline", int(l.max_pipeline));
    doc.set("linger_timeout", duration(l.linger_timeout));
    doc.set("linger_idle", duration(l.linger_idle));
    doc.set("h2_max_streams", int(l.h2_max_streams));

    let c = &web.cache;
    doc.table("web.cache");
    doc.set("revalidate", duration(c.revalidate));
    doc.set("max_entries", int(c.max_entries));
    doc.set("max_open_files", int(c.max_open_files));
    doc.set("max_memory_file", size(c.max_memory_file));
    doc.set("memory_budget", size(c.memory_budget));

    let c = &web.compression;
    doc.table("web.compression");
    doc.set("precompressed", c.precompressed);
    doc.set("on_the_fly", c.on_the_fly);
    doc.set("gzip_level", int(c.gzip_level));
    doc.set("brotli_level", int(c.brotli_level));
    doc.set("min_length", size(c.min_length));
    doc.set("max_length", size(c.max_length));
    doc.set("cache_size", size(c.cache_size));
    doc.set("types", strings(&c.types));

    for addr in &web.listen {
        doc.array_table("listener");
        doc.set("address", addr.to_string());
        doc.set("protocol", "http");
    }
    for l in &web.tls_listen {
        doc.array_table("listener");
        doc.set("address", l.addr.to_string());
        doc.set("protocol", "https");
        doc.set("tls", certs(&l.certs));
    }

    if let Some(w) = &web.web99 {
        doc.table("web99");
        doc.set("enabled", true);
        doc.set("state_dir", path(&w.state_dir));
        doc.set("path", w.path.as_str());
        doc.set("max_post_body", size(w.max_post_body));
        doc.set("manager_networks", nets(&w.manager_networks));
    }
    if let Some(cgi) = &web.cgi {
        doc.table("cgi");
        doc.set("timeout", duration(cgi.timeout));
        doc.set("max_processes", int(cgi.max_processes));
        doc.set("max_output", size(cgi.max_output));
        doc.set("max_body", size(cgi.max_body));
        if web.sites.is_empty() {
            doc.table("cgi.mounts");
            if cgi.mounts.is_empty() {
                doc.comment("none");
            }
            for m in &cgi.mounts {
                doc.set(&Value::from(m.prefix.as_str()).to_string(), path(&m.dir));
            }
        }
    }
    for site in &web.sites {
        site_section(doc, site);
    }
}

/// One `[[site]]`.
fn site_section(doc: &mut Doc, site: &stoa_web::config::SiteConfig) {
    doc.array_table("site");
    doc.set("names", strings(&site.names));
    doc.set("default", site.default);
    doc.set("docroot", path(&site.docroot));
    match &site.access_log {
        Some(target) => doc.set("access_log", access_log(target)),
        None => doc.comment("access_log: the server's ([web] access_log)"),
    }
    if site.tls.is_empty() {
        doc.comment("tls: none (the HTTPS listeners' certificates)");
    } else {
        doc.set("tls", certs(&site.tls));
    }
    doc.set("web99", site.web99);
    let mut cgi = toml::Table::new();
    for m in &site.cgi {
        cgi.insert(m.prefix.clone(), path(&m.dir));
    }
    doc.set("cgi", Value::Table(cgi));
    let mut pages = toml::Table::new();
    for (status, page) in &site.error_pages {
        pages.insert(status.to_string(), Value::from(page.as_str()));
    }
    doc.set("error_pages", Value::Table(pages));
    doc.set("autoindex", site.autoindex);
    match site.hide_dotfiles {
        Some(hide) => doc.set("hide_dotfiles", hide),
        None => doc.comment("hide_dotfiles: the server's ([web] hide_dotfiles)"),
    }
}

/// An access log as its key takes it: a file, `-` or `off`.
fn access_log(target: &AccessLogTarget) -> Value {
    match target {
        AccessLogTarget::Off => Value::from("off"),
        AccessLogTarget::Stdout => Value::from("-"),
        AccessLogTarget::File(file) => path(file),
    }
}
