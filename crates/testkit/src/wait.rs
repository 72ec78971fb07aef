//! Bounded waiting: a condition polled until a deadline, and the pause a test may
//! use to pace a client (never to wait for the code under test).

use std::time::{Duration, Instant};

/// Time between two polls of a condition: short next to any deadline a test uses,
/// long enough not to spin a core of a loaded two-core machine.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `cond` until it holds or `timeout` passes; returns whether it held.
///
/// The pause between polls is a poll interval, not synchronisation: the condition
/// decides, the deadline bounds.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        pause(POLL_INTERVAL);
    }
}

/// Sleeps for `d`: a poll interval, or pacing a deliberately slow client
/// (trickled bytes, requests spaced in time). Never a wait for the server: that
/// is a bounded read or [`wait_until`].
pub fn pause(d: Duration) {
    #[allow(
        clippy::disallowed_methods,
        reason = "a poll interval or a client's pacing, never synchronisation"
    )]
    std::thread::sleep(d);
}
