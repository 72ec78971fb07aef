//! `Accept` (RFC 9110 §12.5.1): the weight a client gives one media type, for
//! a server that can answer in a few (the metrics endpoint: OpenMetrics or
//! Prometheus's classic text).
//!
//! The weight of a type is that of the most specific range that covers it: the
//! type itself (`text/plain`), then its subtypes (`text/*`), then `*/*`. Media
//! type parameters other than `q` (`version=1.0.0`) are not compared. Weights
//! are in thousandths, as [`crate::accept_encoding`]'s, and an item whose `q`
//! is not a valid qvalue is ignored.

use crate::accept_encoding::weight;
use crate::request::{list_items, trim};

/// Which range of an `Accept` list gave a type its weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Range {
    /// `*/*`.
    Any,
    /// `type/*`.
    Subtypes,
    /// The type itself.
    Exact,
}

/// The weight (0–1000; 0: not acceptable) of `media` (`type/subtype`) in the
/// values of every `Accept` field of a request, and the range that gave it;
/// `None` when no range covers it. A request without `Accept` takes anything:
/// the caller decides what that means.
pub fn weight_of<'v>(
    values: impl IntoIterator<Item = &'v [u8]>,
    media: &str,
) -> Option<(u16, Range)> {
    let (kind, _) = media.split_once('/')?;
    let mut best: Option<(u16, Range)> = None;
    for value in values {
        for item in list_items(value) {
            let mut parts = item.split(|&b| b == b';');
            let range = trim(parts.next().unwrap_or_default());
            let matched = if range.eq_ignore_ascii_case(media.as_bytes()) {
                Range::Exact
            } else if range.eq_ignore_ascii_case(b"*/*") {
                Range::Any
            } else if range.len() == kind.len() + 2
                && range[..kind.len()].eq_ignore_ascii_case(kind.as_bytes())
                && range.ends_with(b"/*")
            {
                Range::Subtypes
            } else {
                continue;
            };
            let Some(q) = weight(parts) else {
                continue;
            };
            // The most specific range wins; the first of equally specific ones.
            if best.is_none_or(|(_, seen)| matched > seen) {
                best = Some((q, matched));
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::{Range, weight_of};

    const OPENMETRICS: &str = "application/openmetrics-text";

    fn w(accept: &str, media: &str) -> Option<(u16, Range)> {
        weight_of([accept.as_bytes()], media)
    }

    #[test]
    fn prometheus_asks_for_openmetrics_first() {
        let prometheus = "application/openmetrics-text;version=1.0.0,\
            application/openmetrics-text;version=0.0.1;q=0.75,\
            text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(w(prometheus, OPENMETRICS), Some((1000, Range::Exact)));
        assert_eq!(w(prometheus, "text/plain"), Some((500, Range::Exact)));
    }

    #[test]
    fn the_most_specific_range_wins() {
        assert_eq!(w("*/*", OPENMETRICS), Some((1000, Range::Any)));
        assert_eq!(
            w("text/*;q=0.3, */*", "text/plain"),
            Some((300, Range::Subtypes))
        );
        assert_eq!(
            w("*/*;q=0.2, TEXT/Plain;q=0", "text/plain"),
            Some((0, Range::Exact))
        );
        assert_eq!(w("text/html", "text/plain"), None);
        assert_eq!(w("text/plainx, tex/*", "text/plain"), None);
        assert_eq!(w("", "text/plain"), None);
        // A bad qvalue: the item is ignored.
        assert_eq!(
            w("text/plain;q=2, */*;q=0.1", "text/plain"),
            Some((100, Range::Any))
        );
        // Several fields are one list.
        let fields = [&b"text/html"[..], b"application/openmetrics-text;q=0.9"];
        assert_eq!(weight_of(fields, OPENMETRICS), Some((900, Range::Exact)));
    }
}
