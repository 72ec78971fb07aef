//! What both harnesses share about the kits' run rules: a [`Deviation`] of a
//! run from the kit's run, and how a report labels a run with any.
//!
//! Each benchmark lists its own deviations (`web::compliance`,
//! `mail::compliance`) from the run's settings alone; the reports print them in
//! a box and mark the score "non-compliant" (the way the LKML posts of
//! SPECweb99 figures from shortened runs labelled them), in text, JSON and HTML.

use std::time::Duration;

use serde::Serialize;

/// The box's heading.
pub(crate) const BOX_TITLE: &str = "NON-COMPLIANT RUN: this run breaks the kit's run rules, so \
     its score cannot be compared with the kit's published results.";

/// What the headline adds to the score of a run with deviations.
pub(crate) const NON_COMPLIANT: &str = "non-compliant";

/// One way a run differs from the kit's run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Deviation {
    /// The setting, as a short key for scripts (`run_time`, `iterations`, …).
    pub(crate) setting: &'static str,
    /// What this run did ("measured 60 s").
    pub(crate) run: String,
    /// What the kit does ("the kit measures 1,200 s").
    pub(crate) kit: String,
}

impl std::fmt::Display for Deviation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}; {}", self.run, self.kit)
    }
}

/// A deviation on `setting` when `differs`: what the run did, and what the
/// kit does.
pub(crate) fn rule(
    setting: &'static str,
    differs: bool,
    run: impl Into<String>,
    kit: impl Into<String>,
) -> Option<Deviation> {
    differs.then(|| Deviation {
        setting,
        run: run.into(),
        kit: kit.into(),
    })
}

/// The box's lines, one per deviation.
pub(crate) fn items(deviations: &[Deviation]) -> Vec<String> {
    deviations.iter().map(ToString::to_string).collect()
}

/// A duration as the reports print settings: whole seconds with thousands
/// separators ("1,200 s"), or with one decimal under 10 s when fractional.
pub(crate) fn seconds(d: Duration) -> String {
    let s = d.as_secs();
    if d.subsec_millis() != 0 && s < 10 {
        return format!("{:.1} s", d.as_secs_f64());
    }
    format!("{} s", grouped(s))
}

/// `n` with thousands separators ("3,600").
pub(crate) fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deviation_reads_as_the_run_then_the_kit() {
        let d = rule(
            "run_time",
            true,
            "measured 60 s",
            "the kit measures 1,200 s",
        );
        assert_eq!(
            d.map(|d| d.to_string()).as_deref(),
            Some("measured 60 s; the kit measures 1,200 s")
        );
        assert_eq!(rule("run_time", false, "", ""), None);
    }

    #[test]
    fn settings_print_with_separators() {
        assert_eq!(seconds(Duration::from_secs(1200)), "1,200 s");
        assert_eq!(seconds(Duration::from_secs(60)), "60 s");
        assert_eq!(seconds(Duration::from_millis(2500)), "2.5 s");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }
}
