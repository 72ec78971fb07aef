//! The `[metrics]` table: where `stoa serve` answers Prometheus' scrapes
//! (`listen`, one address). Without the table there is no metrics listener.

use std::net::SocketAddr;

use toml::Table;

use super::{Report, lmtp, parse_addr};

/// The metrics endpoint as configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Metrics {
    /// The address `GET /metrics` is answered on.
    pub(crate) listen: SocketAddr,
}

/// The prefix of `[metrics]` keys in messages.
const P: &str = "metrics.";

/// The keys of `[metrics]`.
const KEYS: &[&str] = &["listen"];

/// The `[metrics]` table, if present and valid (errors reported otherwise).
pub(super) fn read_table(table: &Table, r: &mut Report) -> Option<Metrics> {
    let t = r.table(table, "", "metrics")?;
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
    if !lmtp::is_private(&listen) {
        r.warnings.push(format!(
            "{P}listen {listen}: /metrics has no authentication and tells anyone who \
             connects how busy every server is; listen on loopback or a private network"
        ));
    }
    Some(Metrics { listen })
}
