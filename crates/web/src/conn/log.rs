//! The access-log batching: each written batch of responses is counted
//! ([`crate::metrics`]) and logged, every response once its bytes are out (or
//! the connection died), into its site's log buffer, which is handed to the
//! log's writer when old enough. HTTP/2 streams log through [`log_written`] too.

use std::time::Instant;

use super::machine::Conn;
use crate::access_log;
use crate::local::{self, Local};
use crate::metrics;
use crate::output::Output;
use crate::shared::Shared;

/// Counts and logs every response queued on `out` (as far as its bytes were
/// written) for the client at `ip`, each in its site's log, and empties the
/// queue; `now` (the batch's time) decides whether a log buffer is old enough
/// to hand over.
pub(crate) fn log_written(shared: &Shared, out: &mut Output, ip: std::net::IpAddr, now: Instant) {
    let responses = out.queued().iter().map(|q| (q.tally, q.status));
    metrics::count_batch(responses, out.written(), now);
    if shared.logs.is_empty() {
        out.reset();
        return;
    }
    local::with(shared, |local| {
        let Local { date, logs, .. } = local;
        out.drain_written(|q, text, body_bytes| {
            // No log text: the request's site does not log.
            let Some(sink) = q.log.as_ref().map(|l| l.sink) else {
                return;
            };
            if let (Some(buffer), Some(to)) = (logs.get_mut(sink), shared.logs.get(sink)) {
                buffer.append(to, now, |line| {
                    access_log::write_line(line, ip, date.clf(), text, q.status, body_bytes);
                });
            }
        });
    });
}

impl Conn {
    /// Logs every response of the batch just written (or cut short) and empties
    /// the queue.
    pub(super) fn log_batch(&mut self) {
        log_written(
            &self.shared,
            &mut self.out,
            self.client.peer.ip(),
            self.clock,
        );
    }
}
