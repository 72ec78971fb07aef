//! The `[metrics]` table: where `stoa serve` answers Prometheus' scrapes
//! (`listen`, one address). Without the table there is no metrics listener. It
//! prints `[metrics]` and binds `crate::metrics`'s server.

use std::net::SocketAddr;

use toml::Table;

use super::Report;
use super::print::Doc;
use super::service::{self, Configured, Finish, Implied, Service, Shared};
use super::units::{is_private, parse_addr};

/// The metrics endpoint's entry in the list of servers.
pub(super) static METRICS: Service = Service {
    name: "metrics",
    keys: &["metrics"],
    mail: false,
    // An endpoint beside the servers, not a role of its own.
    role: false,
    implied: Implied::Never,
    // Only the file asks for it.
    flags_given: |_| false,
    read: |file, _, r| {
        let t = r.table(file, "", "metrics")?;
        service::boxed(Some(Draft(read(t, r))))
    },
    draft: service::default::<Draft>,
};

/// The `[metrics]` table as read: `None` when it is wrong (errors reported).
#[derive(Debug, Default)]
struct Draft(Option<Metrics>);

impl service::Draft for Draft {
    fn finish(
        self: Box<Self>,
        _cx: &mut Finish<'_>,
        _r: &mut Report,
    ) -> Option<Box<dyn Configured>> {
        self.0.map(|m| Box::new(m) as Box<dyn Configured>)
    }
}

/// The metrics endpoint as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Metrics {
    /// The address `GET /metrics` is answered on.
    pub(crate) listen: SocketAddr,
}

impl Configured for Metrics {
    fn service(&self) -> &'static Service {
        &METRICS
    }

    fn print(&self, doc: &mut Doc) {
        doc.table("metrics");
        doc.set("listen", self.listen.to_string());
    }

    fn bind(
        self: Box<Self>,
        shared: &mut Shared<'_>,
    ) -> anyhow::Result<Box<dyn stoa_netkit::server::Service>> {
        let server = crate::metrics::Server::bind(self.listen, shared.sockets)?;
        Ok(Box::new(server))
    }
}

/// The prefix of `[metrics]` keys in messages.
const P: &str = "metrics.";

/// The keys of `[metrics]`.
const KEYS: &[&str] = &["listen"];

/// The `[metrics]` table `t`, if valid (errors reported otherwise).
fn read(t: &Table, r: &mut Report) -> Option<Metrics> {
    r.known_keys(t, P, KEYS);
    let listen = match r.string(t, P, "listen").map(|text| parse_addr(&text)) {
        Some(Ok(addr)) => addr,
        Some(Err(e)) => {
            r.errors.push(format!("{P}listen: {e}"));
            return None;
        }
        None => {
            if !t.contains_key("listen") {
                r.errors.push(format!(
                    "{P}listen: missing: give the address to serve /metrics on, like \
                     \"127.0.0.1:9100\""
                ));
            }
            return None;
        }
    };
    if !is_private(&listen) {
        r.warnings.push(format!(
            "{P}listen {listen}: /metrics has no authentication and tells anyone who \
             connects how busy every server is; listen on loopback or a private network"
        ));
    }
    Some(Metrics { listen })
}
