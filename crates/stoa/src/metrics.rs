//! `[metrics]`: this process's counters at `GET /metrics` on their own
//! listener, in the OpenMetrics text format to a client that asks for it in
//! `Accept` (Prometheus does), else in Prometheus's classic text format (version
//! 0.0.4: what `curl`, older scrapers and most other tools read), as Prometheus's
//! own client libraries choose.
//!
//! Besides the libraries' counters it gives `process_*` (CPU time, memory,
//! descriptors, threads, start time, read from `/proc` by `procfs`, the names
//! Prometheus's client libraries use) and `stoa_build_info` (version, revision,
//! compiler).
//!
//! The counters live in the libraries, as plain process-wide atomics
//! (`stoa_web::metrics`, `stoa_smtp::metrics`, `stoa_pop3::metrics`,
//! `stoa_directory::metrics`, `stoa_netkit::metrics`), so that servers rebuilt
//! from a re-read configuration count on where the old ones stopped, and no
//! library knows Prometheus. Here, at each scrape, [`Collector`] reads them and
//! encodes them with `prometheus-client`; nothing is kept between scrapes.
//!
//! The listener runs on netkit's server skeleton like every other server (a
//! [`Handler`] for the scrapes, a [`Service`] for `stoa serve`: bound before the
//! privilege drop, handed over on a reload and drained by the same shutdown),
//! and counts in `stoa_connections_open` as `metrics`. Its HTTP is the least
//! that works: one request per connection, its head read up to [`MAX_HEAD`]
//! bytes within [`HEAD_TIMEOUT`] and parsed by `stoa_http_proto::parse_request`
//! (as strictly as the web server's), `GET /metrics` answered `200` (`HEAD` with
//! the same head and no body), any other path `404`, any other method `405`, a head the parser refuses with the status
//! it names (`400`, `431`, ...), the answer written within [`SEND_TIMEOUT`],
//! then the connection closes. A scrape still being answered at shutdown is
//! dropped.
//!
//! Its limits are the web listener's, scaled to a scraper (issue 56: 16 slots
//! held 10 s each by silent clients made a scrape wait 9.7 s):
//! `TCP_DEFER_ACCEPT`, so a client that connects and says nothing is never
//! handed over; a head timeout of seconds, not the answer's; and
//! [`MAX_CONNECTIONS`] at once, enough that a scraper finds a slot unless a
//! client holds a thousand connections open (the others wait in the kernel's
//! backlog).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeMetric as _, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;
use stoa_http_proto::response::HeadWriter;
use stoa_http_proto::{Method, RequestHead, Status, parse_request};
use stoa_netkit::server::{
    Accepted, BoxError, Endpoint, Handler, Listeners, RuntimeModel, Service, WorkerScope,
};
use stoa_netkit::shutdown::Shutdown;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Longest request head read: a scraper's is a few hundred bytes.
const MAX_HEAD: usize = 8 * 1024;
/// The parser's limits: the whole head within [`MAX_HEAD`]; a scraper sends a
/// handful of header fields, far fewer than the web server's 100.
const LIMITS: stoa_http_proto::Limits = stoa_http_proto::Limits {
    max_request_line: MAX_HEAD,
    max_header_line: MAX_HEAD,
    max_head: MAX_HEAD,
    max_headers: 32,
};
/// Time for the request head to arrive, from the accept: a scraper sends it
/// with the connection, so this only bounds how long a client that stalls
/// holds its slot (Prometheus's whole scrape timeout is 10 s).
const HEAD_TIMEOUT: Duration = Duration::from_secs(3);
/// Time for the answer to be written (a few KiB): a client that stops reading
/// is cut off, as the web server's `send_timeout` does.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once. Prometheus sends one scrape at a time per
/// target, but each slot must outnumber what idle clients can hold: one
/// waiting costs its task and at most [`MAX_HEAD`] bytes (under 10 MiB for
/// all), and with [`HEAD_TIMEOUT`] a client must open a thousand every three
/// seconds to keep a scrape waiting.
const MAX_CONNECTIONS: usize = 1024;
/// `TCP_DEFER_ACCEPT` on the listener, the web server's period
/// ([`stoa_web::config::DEFER_ACCEPT_PERIOD`]): a connection is handed over
/// with its first bytes, so a silent one holds no slot.
const DEFER_ACCEPT: Duration = stoa_web::config::DEFER_ACCEPT_PERIOD;
/// The content type of the OpenMetrics text `prometheus-client` writes.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of Prometheus's classic text format.
const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The bound metrics listener.
pub(crate) struct Server {
    listeners: Listeners<()>,
    addr: SocketAddr,
}

impl Server {
    /// Binds `addr` (before the privilege drop, like every listener) with one
    /// worker, and `TCP_DEFER_ACCEPT` ([`DEFER_ACCEPT`]).
    pub(crate) fn bind(
        addr: SocketAddr,
        sockets: &stoa_netkit::listener::Pool,
    ) -> anyhow::Result<Server> {
        let mut listeners = Listeners::with_pool(1, sockets.clone());
        let bound = listeners
            .bind_with(addr, (), |l| {
                stoa_sockopt::set_defer_accept(l, DEFER_ACCEPT)
            })
            .with_context(|| format!("cannot listen for metrics on {addr}"))?;
        Ok(Server {
            listeners,
            addr: bound,
        })
    }
}

impl Service for Server {
    fn name(&self) -> &'static str {
        Scrapes::NAME
    }

    fn endpoints(&self) -> Vec<Endpoint> {
        vec![Endpoint {
            scheme: "metrics",
            addr: self.addr,
        }]
    }

    fn run(self: Box<Self>, shutdown: Shutdown) -> Result<(), BoxError> {
        let scrapes = Arc::new(Scrapes);
        stoa_netkit::server::run(&scrapes, self.listeners, RuntimeModel::PerCore, shutdown)?;
        Ok(())
    }
}

/// The metrics endpoint on the skeleton: each connection is one scrape.
struct Scrapes;

impl Handler for Scrapes {
    type Kind = ();
    type Worker = ();
    const NAME: &'static str = "metrics";

    fn max_connections(&self) -> usize {
        MAX_CONNECTIONS
    }

    /// Nothing to wait for: a scrape in progress at shutdown is dropped.
    fn grace(&self) -> Duration {
        Duration::ZERO
    }

    fn in_flight(&self) -> usize {
        0
    }

    fn start_worker(self: &Arc<Self>, _scope: WorkerScope) {}

    fn accept(self: &Arc<Self>, _worker: &Arc<()>, conn: Accepted<()>) {
        let Accepted {
            stream,
            peer,
            permit,
            ..
        } = conn;
        tokio::spawn(async move {
            if let Some(stream) = stoa_netkit::accept::register(stream, peer)
                && let Err(e) = answer(stream).await
            {
                tracing::debug!("metrics: scrape from {peer} failed: {e}");
            }
            drop(permit);
        });
    }
}

/// Reads one request head within [`HEAD_TIMEOUT`] and answers it within
/// [`SEND_TIMEOUT`].
async fn answer(mut stream: TcpStream) -> io::Result<()> {
    let routed = match tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut stream)).await {
        Ok(Ok(Some(routed))) => routed,
        // The client closed first.
        Ok(Ok(None)) => return Ok(()),
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "no request head")),
    };
    tokio::time::timeout(SEND_TIMEOUT, respond_to(&mut stream, routed))
        .await
        .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "answer not taken")))
}

/// Reads a request head: what it asks for, or the parser's refusal; `None`
/// when the client closes before it is whole.
async fn read_head(
    stream: &mut TcpStream,
) -> io::Result<Option<Result<Route, stoa_http_proto::Error>>> {
    let mut head = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let routed = loop {
        match route(&head) {
            Ok(Some(route)) => break Ok(route),
            Err(e) => break Err(e),
            // One byte past the limit, for the parser to refuse.
            Ok(None) if head.len() > MAX_HEAD => break Err(stoa_http_proto::Error::HeadTooLarge),
            Ok(None) => {}
        }
        let room = (MAX_HEAD + 1 - head.len()).min(chunk.len());
        let n = stream.read(&mut chunk[..room]).await?;
        if n == 0 {
            return Ok(None);
        }
        head.extend_from_slice(&chunk[..n]);
    };
    Ok(Some(routed))
}

/// Writes the answer to what the head asked for.
async fn respond_to(
    stream: &mut TcpStream,
    routed: Result<Route, stoa_http_proto::Error>,
) -> io::Result<()> {
    match routed {
        Ok(Route::Metrics { format, head_only }) => {
            let text = encode();
            let (content_type, body) = match format {
                Format::OpenMetrics => (OPENMETRICS, text),
                Format::Classic => (CLASSIC, classic(&text)),
            };
            let answer = Answer {
                status: 200,
                content_type,
                head_only,
            };
            answer.send(stream, body.as_bytes()).await
        }
        Ok(Route::NotFound) => Answer::text(404).send(stream, b"not found\n").await,
        Ok(Route::NotAllowed) => Answer::text(405).send(stream, b"GET or HEAD only\n").await,
        Err(e) => {
            let body = format!("{e}\n");
            Answer::text(e.status()).send(stream, body.as_bytes()).await
        }
    }
}

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics { format: Format, head_only: bool },
    NotFound,
    NotAllowed,
}

/// The text format of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    OpenMetrics,
    Classic,
}

impl Format {
    /// OpenMetrics when `Accept` names it (not through `*/*`) with a weight
    /// above zero and at least `text/plain`'s; else the classic format, as
    /// Prometheus's client libraries negotiate.
    fn of(head: &RequestHead<'_, '_>) -> Format {
        use stoa_http_proto::accept::{Range, weight_of};
        let accept = || {
            (head.headers.iter())
                .filter(|h| h.name.eq_ignore_ascii_case("accept"))
                .map(|h| h.value)
        };
        let openmetrics = weight_of(accept(), "application/openmetrics-text");
        let plain = weight_of(accept(), "text/plain").map_or(0, |(q, _)| q);
        match openmetrics {
            Some((q, Range::Exact)) if q > 0 && q >= plain => Format::OpenMetrics,
            _ => Format::Classic,
        }
    }
}

/// What the request head at the start of `buf` asks for: `None` while it is
/// incomplete, the parser's error when it is malformed.
fn route(buf: &[u8]) -> Result<Option<Route>, stoa_http_proto::Error> {
    let mut storage = stoa_http_proto::request::header_storage();
    match parse_request(buf, &mut storage, &LIMITS)? {
        Status::Partial => Ok(None),
        Status::Complete(head) => Ok(Some(route_of(&head))),
    }
}

/// The method and the path of the target; the query is ignored.
fn route_of(head: &RequestHead<'_, '_>) -> Route {
    let head_only = match head.method {
        Method::Get => false,
        Method::Head => true,
        _ => return Route::NotAllowed,
    };
    let path = head.target.split(|&b| b == b'?').next().unwrap_or_default();
    if path == b"/metrics" {
        Route::Metrics {
            format: Format::of(head),
            head_only,
        }
    } else {
        Route::NotFound
    }
}

/// The head of an answer.
struct Answer {
    status: u16,
    content_type: &'static str,
    /// A `HEAD` request: the head that `GET` gets, without the body.
    head_only: bool,
}

impl Answer {
    /// A plain-text error page.
    fn text(status: u16) -> Answer {
        Answer {
            status,
            content_type: "text/plain",
            head_only: false,
        }
    }

    /// Writes the head and `body`, then closes the sending side.
    async fn send(self, stream: &mut TcpStream, body: &[u8]) -> io::Result<()> {
        let mut head = Vec::with_capacity(160);
        let mut writer = HeadWriter::new(&mut head, self.status)
            .header("Content-Type", self.content_type.as_bytes())
            .content_length(body.len() as u64);
        if self.status == 405 {
            writer = writer.header("Allow", b"GET, HEAD");
        }
        writer.header("Connection", b"close").finish();
        stream.write_all(&head).await?;
        if !self.head_only {
            stream.write_all(body).await?;
        }
        stream.shutdown().await
    }
}

/// The OpenMetrics text `open` in Prometheus's classic text format (0.0.4):
/// counters' `HELP` and `TYPE` name the `_total` series, and the `# UNIT` and
/// `# EOF` lines, which the classic format lacks, go. Samples, label escapes,
/// `+Inf` and histograms read the same in both.
fn classic(open: &str) -> String {
    let mut out = String::with_capacity(open.len());
    // A family's `HELP` comes before its `TYPE`, which says whether to rename.
    let mut help: Option<&str> = None;
    for line in open.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "untyped"));
            let (name, kind) = match kind {
                "counter" => (format!("{name}_total"), "counter"),
                "gauge" | "histogram" | "summary" => (name.to_owned(), kind),
                "info" => (format!("{name}_info"), "gauge"),
                _ => (name.to_owned(), "untyped"),
            };
            if let Some(text) = help.take().and_then(|h| h.split_once(' ')).map(|h| h.1) {
                out.push_str(&format!("# HELP {name} {text}\n"));
            }
            out.push_str(&format!("# TYPE {name} {kind}\n"));
            continue;
        }
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The OpenMetrics text of every counter now.
pub(crate) fn encode() -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Collector));
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry)
        .expect("invariant: writing to a String does not fail");
    text
}

/// Reads the libraries' counters at each scrape.
#[derive(Debug)]
struct Collector;

impl prometheus_client::collector::Collector for Collector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        web(&mut encoder)?;
        net(&mut encoder)?;
        smtp(&mut encoder)?;
        pop3(&mut encoder)?;
        directory(&mut encoder)?;
        process(&mut encoder)?;
        build_info(&mut encoder)
    }
}

/// One counter without labels: a count (`u64`) or seconds (`f64`).
fn counter<N: EncodeCounterValue>(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    v: N,
) -> std::fmt::Result {
    ConstCounter::new(v).encode(e.encode_descriptor(name, help, None, MetricType::Counter)?)
}

/// One gauge without labels.
fn gauge(e: &mut DescriptorEncoder<'_>, name: &str, help: &str, v: f64) -> std::fmt::Result {
    ConstGauge::new(v).encode(e.encode_descriptor(name, help, None, MetricType::Gauge)?)
}

/// A family of `kind` with one value per label set.
fn family<L: AsRef<[(&'static str, String)]>>(
    e: &mut DescriptorEncoder<'_>,
    (name, help, kind): (&str, &str, MetricType),
    rows: impl IntoIterator<Item = (L, u64)>,
) -> std::fmt::Result {
    let mut family = e.encode_descriptor(name, help, None, kind)?;
    for (labels, v) in rows {
        let labels = labels.as_ref();
        let metric = family.encode_family(&labels)?;
        match kind {
            MetricType::Gauge => ConstGauge::new(v as i64).encode(metric)?,
            _ => ConstCounter::new(v).encode(metric)?,
        }
    }
    Ok(())
}

fn web(e: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
    use stoa_web::metrics::{CLASSES, METHODS, code_label};
    let w = stoa_web::metrics::snapshot();
    family(
        e,
        (
            "stoa_http_requests",
            "HTTP responses sent, by request method and status code",
            MetricType::Counter,
        ),
        w.requests.iter().map(|&(m, code, n)| {
            let labels = [
                ("method", METHODS[m].to_owned()),
                ("code", code_label(code)),
            ];
            (labels, n)
        }),
    )?;
    family(
        e,
        (
            "stoa_http_site_responses",
            "HTTP responses sent, by site (its first name; `_` for none) and status class",
            MetricType::Counter,
        ),
        w.sites.iter().flat_map(|site| {
            (CLASSES.iter().zip(site.classes)).map(|(class, n)| {
                let labels = [("site", site.label.clone()), ("code", (*class).to_owned())];
                (labels, n)
            })
        }),
    )?;
    histograms(
        e,
        "stoa_http_request_duration_seconds",
        "Time from a request's dispatch to its answer's last byte written, by site",
        (w.sites.iter()).map(|site| ([("site", site.label.clone())], &site.duration)),
    )?;
    counter(
        e,
        "stoa_http_sent_bytes",
        "Bytes of HTTP responses written, heads and bodies, before TLS",
        w.sent_bytes,
    )?;
    counter(e, "stoa_cgi_runs", "CGI scripts started", w.cgi_runs)?;
    counter(
        e,
        "stoa_log_reopen_failures",
        "Access-log files that could not be reopened (SIGHUP after a rotation)",
        w.log_reopen_failures,
    )
}

fn net(e: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
    let open = stoa_netkit::metrics::connections_open();
    family(
        e,
        (
            "stoa_connections_open",
            "Client connections open now, by server",
            MetricType::Gauge,
        ),
        open.into_iter()
            .map(|(server, n)| ([("service", server.to_ascii_lowercase())], n)),
    )?;
    let h = stoa_netkit::metrics::handshakes();
    family(
        e,
        (
            "stoa_tls_handshakes",
            "TLS handshakes (HTTPS, STARTTLS, STLS, POP3S), by result",
            MetricType::Counter,
        ),
        [
            ("full", h.full),
            ("resumed", h.resumed),
            ("failed", h.failed),
        ]
        .map(|(result, n)| ([("result", result.to_owned())], n)),
    )
}

fn smtp(e: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
    let s = stoa_smtp::metrics::snapshot();
    family(
        e,
        (
            "stoa_smtp_sessions",
            "SMTP and LMTP sessions accepted, by protocol",
            MetricType::Counter,
        ),
        [("smtp", s.smtp_sessions), ("lmtp", s.lmtp_sessions)]
            .map(|(p, n)| ([("protocol", p.to_owned())], n)),
    )?;
    counter(
        e,
        "stoa_smtp_messages_accepted",
        "Messages accepted by the SMTP server (250 after the final dot)",
        s.accepted,
    )?;
    family(
        e,
        (
            "stoa_smtp_rejected",
            "Refusals by the SMTP server (recipients, messages, logins, connections), by reason",
            MetricType::Counter,
        ),
        s.rejected
            .iter()
            .map(|&(r, n)| ([("reason", r.label().to_owned())], n)),
    )?;
    let queue = [
        (
            "stoa_queue_queued",
            "Messages committed to the queue, bounces included",
            s.queued,
        ),
        (
            "stoa_queue_deferred",
            "Recipients whose delivery failed for now and will be retried",
            s.deferred,
        ),
        (
            "stoa_queue_bounced",
            "Recipients that failed for good or expired",
            s.bounced,
        ),
        ("stoa_queue_delivered", "Recipients delivered", s.delivered),
    ];
    for (name, help, v) in queue {
        counter(e, name, help, v)?;
    }
    gauge(
        e,
        "stoa_queue_messages",
        "Messages in the queue now",
        s.queue_length as f64,
    )?;
    gauge(
        e,
        "stoa_queue_oldest_seconds",
        "Age of the oldest message in the queue (0 when empty)",
        s.queue_oldest.as_secs_f64(),
    )?;
    histogram(
        e,
        "stoa_delivery_seconds",
        "Time from a message's arrival to each recipient's delivery",
        &s.delivery,
    )
}

/// A histogram; `h`'s buckets are per bucket (the encoder accumulates them).
fn histogram(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    h: &stoa_netkit::metrics::Histogram,
) -> std::fmt::Result {
    let mut metric = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    metric.encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)
}

/// A family of histograms, one per label set, as [`histogram`].
fn histograms<'h, L: AsRef<[(&'static str, String)]>>(
    e: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: impl IntoIterator<Item = (L, &'h stoa_netkit::metrics::Histogram)>,
) -> std::fmt::Result {
    let mut family = e.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, h) in rows {
        let labels = labels.as_ref();
        (family.encode_family(&labels)?)
            .encode_histogram::<NoLabelSet>(h.sum, h.count, &h.buckets, None)?;
    }
    Ok(())
}

fn pop3(e: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
    let p = stoa_pop3::metrics::snapshot();
    family(
        e,
        (
            "stoa_pop3_logins",
            "POP3 logins, by result (ok, failed credentials, error)",
            MetricType::Counter,
        ),
        p.logins
            .iter()
            .map(|&(l, n)| ([("result", l.label().to_owned())], n)),
    )?;
    counter(
        e,
        "stoa_pop3_retrievals",
        "POP3 RETR and TOP commands served",
        p.retrievals,
    )
}

fn directory(e: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
    let d = stoa_directory::metrics::snapshot();
    family(
        e,
        (
            "stoa_directory_cache",
            "Directory cache questions, by cache (lookup, password) and result (hit, miss)",
            MetricType::Counter,
        ),
        d.caches.iter().flat_map(|&(c, hits, misses)| {
            [("hit", hits), ("miss", misses)].map(|(result, n)| {
                let labels = [
                    ("cache", c.label().to_owned()),
                    ("result", result.to_owned()),
                ];
                (labels, n)
            })
        }),
    )?;
    counter(
        e,
        "stoa_ldap_errors",
        "Failed LDAP operations and connection attempts",
        d.ldap_errors,
    )
}

/// `process_*`, as Prometheus's client libraries name them, from `/proc`;
/// left out when `/proc` cannot be read (a scrape still answers).
fn process(e: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
    let Ok(me) = procfs::process::Process::myself() else {
        return Ok(());
    };
    if let Ok(stat) = me.stat() {
        let ticks = procfs::ticks_per_second() as f64;
        let cpu = (stat.utime + stat.stime) as f64 / ticks;
        counter(
            e,
            "process_cpu_seconds",
            "User and system CPU time spent, in seconds",
            cpu,
        )?;
        let rss = stat.rss.saturating_mul(procfs::page_size());
        gauge(
            e,
            "process_resident_memory_bytes",
            "Resident memory size, in bytes",
            rss as f64,
        )?;
        gauge(
            e,
            "process_virtual_memory_bytes",
            "Virtual memory size, in bytes",
            stat.vsize as f64,
        )?;
        gauge(
            e,
            "process_threads",
            "Threads of the process",
            stat.num_threads as f64,
        )?;
        if let Ok(boot) = procfs::boot_time_secs() {
            let start = boot as f64 + stat.starttime as f64 / ticks;
            gauge(
                e,
                "process_start_time_seconds",
                "Start time of the process since the Unix epoch, in seconds",
                start,
            )?;
        }
    }
    if let Ok(open) = me.fd_count() {
        gauge(e, "process_open_fds", "Open file descriptors", open as f64)?;
    }
    if let Ok(limits) = me.limits()
        && let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit
    {
        gauge(
            e,
            "process_max_fds",
            "The limit on open file descriptors",
            max as f64,
        )?;
    }
    Ok(())
}

/// `stoa_build_info`: 1, labelled with what the binary was built from.
fn build_info(e: &mut DescriptorEncoder<'_>) -> std::fmt::Result {
    let labels = [
        ("version", env!("CARGO_PKG_VERSION").to_owned()),
        ("revision", env!("STOA_REVISION").to_owned()),
        ("rustc", env!("STOA_RUSTC").to_owned()),
    ];
    family(
        e,
        (
            "stoa_build_info",
            "1, labelled with the version, the git revision (`unknown` when built outside a checkout) and the compiler of this binary",
            MetricType::Gauge,
        ),
        [(labels, 1)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_get_or_head_of_metrics_only() {
        let status = |head: &[u8]| route(head).map_err(|e| e.status());
        let host = "Host: 127.0.0.1:9100\r\n";
        let get = |target: &str| format!("GET {target} HTTP/1.1\r\n{host}\r\n");
        let classic = |head_only| {
            Ok(Some(Route::Metrics {
                format: Format::Classic,
                head_only,
            }))
        };
        assert_eq!(status(get("/metrics").as_bytes()), classic(false));
        assert_eq!(status(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), classic(false));
        assert_eq!(status(b"HEAD /metrics HTTP/1.0\r\n\r\n"), classic(true));
        let prometheus = format!(
            "GET /metrics HTTP/1.1\r\n{host}Accept: application/openmetrics-text;version=1.0.0,\
             text/plain;version=0.0.4;q=0.5,*/*;q=0.1\r\n\r\n"
        );
        let openmetrics = Ok(Some(Route::Metrics {
            format: Format::OpenMetrics,
            head_only: false,
        }));
        assert_eq!(status(prometheus.as_bytes()), openmetrics);
        for accept in [
            "*/*",
            "text/plain",
            "application/openmetrics-text;q=0",
            "application/openmetrics-text;q=0.4, text/plain;q=0.5",
        ] {
            let head = format!("GET /metrics HTTP/1.1\r\n{host}Accept: {accept}\r\n\r\n");
            assert_eq!(status(head.as_bytes()), classic(false), "{accept}");
        }
        assert_eq!(status(get("/").as_bytes()), Ok(Some(Route::NotFound)));
        let post = format!("POST /metrics HTTP/1.1\r\n{host}Content-Length: 0\r\n\r\n");
        assert_eq!(status(post.as_bytes()), Ok(Some(Route::NotAllowed)));
        assert_eq!(status(b"GET /metr"), Ok(None));
        for bad in [
            &b"GET /metrics\r\n\r\n"[..],
            b"GET /metrics SPDY/3\r\n\r\n",
            b"\xff\xfe\r\n\r\n",
            // HTTP/1.1 without Host, and a bare LF: the web server's rules.
            b"GET /metrics HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.0\n\n",
        ] {
            assert_eq!(status(bad), Err(400), "{bad:?}");
        }
        let long = format!(
            "GET /metrics HTTP/1.1\r\n{host}X: {}\r\n\r\n",
            "a".repeat(MAX_HEAD)
        );
        assert_eq!(status(long.as_bytes()), Err(431));
    }

    #[test]
    fn the_classic_text_names_counters_by_their_samples_and_has_no_eof() {
        let open = "# HELP stoa_cgi_runs CGI scripts started.\n\
            # TYPE stoa_cgi_runs counter\n\
            stoa_cgi_runs_total 3\n\
            # HELP q Messages in the queue now.\n\
            # TYPE q gauge\n\
            # UNIT q messages\n\
            q 2\n\
            # HELP h test.\n\
            # TYPE h histogram\n\
            h_bucket{le=\"+Inf\"} 5\n\
            # EOF\n";
        assert_eq!(
            classic(open),
            "# HELP stoa_cgi_runs_total CGI scripts started.\n\
             # TYPE stoa_cgi_runs_total counter\n\
             stoa_cgi_runs_total 3\n\
             # HELP q Messages in the queue now.\n\
             # TYPE q gauge\n\
             q 2\n\
             # HELP h test.\n\
             # TYPE h histogram\n\
             h_bucket{le=\"+Inf\"} 5\n"
        );
    }

    /// Encodes `h` alone.
    #[derive(Debug)]
    struct One(stoa_smtp::metrics::Histogram);

    impl prometheus_client::collector::Collector for One {
        fn encode(&self, mut e: DescriptorEncoder<'_>) -> std::fmt::Result {
            histogram(&mut e, "h", "test", &self.0)
        }
    }

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_the_count() {
        let h = stoa_netkit::metrics::Histogram {
            buckets: vec![(0.1, 2), (1.0, 0), (f64::INFINITY, 3)],
            sum: 9.5,
            count: 5,
        };
        let mut registry = Registry::default();
        registry.register_collector(Box::new(One(h)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for line in [
            "h_bucket{le=\"0.1\"} 2\n",
            "h_bucket{le=\"1.0\"} 2\n",
            "h_bucket{le=\"+Inf\"} 5\n",
            "h_count 5\n",
            "h_sum 9.5\n",
        ] {
            assert!(text.contains(line), "{line}: {text}");
        }
    }

    #[test]
    fn the_text_has_every_family_typed_and_ends_with_eof() {
        let text = encode();
        assert!(text.ends_with("# EOF\n"), "{text}");
        for (name, kind) in [
            ("stoa_http_requests", "counter"),
            ("stoa_http_sent_bytes", "counter"),
            ("stoa_connections_open", "gauge"),
            ("stoa_tls_handshakes", "counter"),
            ("stoa_cgi_runs", "counter"),
            ("stoa_log_reopen_failures", "counter"),
            ("stoa_smtp_sessions", "counter"),
            ("stoa_smtp_messages_accepted", "counter"),
            ("stoa_smtp_rejected", "counter"),
            ("stoa_queue_queued", "counter"),
            ("stoa_queue_deferred", "counter"),
            ("stoa_queue_bounced", "counter"),
            ("stoa_queue_delivered", "counter"),
            ("stoa_queue_messages", "gauge"),
            ("stoa_queue_oldest_seconds", "gauge"),
            ("stoa_delivery_seconds", "histogram"),
            ("stoa_pop3_logins", "counter"),
            ("stoa_pop3_retrievals", "counter"),
            ("stoa_directory_cache", "counter"),
            ("stoa_ldap_errors", "counter"),
            ("stoa_http_site_responses", "counter"),
            ("stoa_http_request_duration_seconds", "histogram"),
            ("process_cpu_seconds", "counter"),
            ("process_resident_memory_bytes", "gauge"),
            ("process_open_fds", "gauge"),
            ("process_max_fds", "gauge"),
            ("process_start_time_seconds", "gauge"),
            ("stoa_build_info", "gauge"),
        ] {
            assert!(
                text.contains(&format!("# TYPE {name} {kind}\n")),
                "{name} {kind}:\n{text}"
            );
        }
        assert!(text.contains("stoa_smtp_rejected_total{reason=\"relay_denied\"} "));
        assert!(text.contains("stoa_tls_handshakes_total{result=\"resumed\"} "));
        assert!(text.contains("stoa_delivery_seconds_bucket{le=\"+Inf\"} "));
        assert!(text.contains("\nstoa_ldap_errors_total "));
    }
}
