//! The live progress line of a web iteration (standard error, a terminal only).

use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use stoa_loadgen::LiveSnapshot;

/// Where the progress line reads the generators' live counters.
pub(crate) type LiveSource = Arc<dyn Fn() -> LiveSnapshot + Send + Sync>;

/// A live progress line for one iteration, on a terminal only: phase, time
/// left, operations per second over the last second, and how many of the
/// measured connections conform so far.
pub(crate) struct Progress(ProgressBar);

impl Progress {
    pub(crate) fn start(
        iteration: u32,
        phases: [(&'static str, Duration); 3],
        live: LiveSource,
    ) -> Progress {
        let total: Duration = phases.iter().map(|p| p.1).sum();
        let bar = ProgressBar::new(total.as_secs());
        bar.set_style(
            ProgressStyle::with_template("iteration {prefix} [{bar:25}] {msg}")
                .expect("invariant: valid template")
                .progress_chars("=> "),
        );
        bar.set_prefix(iteration.to_string());
        let ticker = bar.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let (mut last_at, mut last_ops) = (started, 0);
            while !ticker.is_finished() {
                let now = Instant::now();
                let elapsed = now - started;
                let mut end = Duration::ZERO;
                let phase = phases
                    .iter()
                    .find(|(_, len)| {
                        end += *len;
                        elapsed < end
                    })
                    .map_or("finishing", |(name, _)| *name);
                let snap = live();
                let rate = (snap.ops - last_ops.min(snap.ops)) as f64
                    / (now - last_at).as_secs_f64().max(1e-3);
                (last_at, last_ops) = (now, snap.ops);
                let conforming = if snap.measured == 0 {
                    "conforming -".to_owned()
                } else {
                    format!("conforming {}/{}", snap.conforming, snap.measured)
                };
                ticker.set_position(elapsed.as_secs().min(total.as_secs()));
                ticker.set_message(format!(
                    "{phase}, {} s left, {rate:.0} ops/s, {conforming}",
                    total.saturating_sub(elapsed).as_secs()
                ));
                std::thread::park_timeout(Duration::from_secs(1));
            }
        });
        Progress(bar)
    }

    pub(crate) fn finish(self) {
        self.0.finish_and_clear();
    }
}
