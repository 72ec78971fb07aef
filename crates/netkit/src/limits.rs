//! Process limits.

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};

/// Raises the soft `RLIMIT_NOFILE` to the hard limit and returns the new soft limit
/// (`None` when unlimited). Servers holding tens of thousands of connections need it;
/// failure leaves the limit as it was.
pub fn raise_nofile() -> Option<u64> {
    let limit = getrlimit(Resource::Nofile);
    if limit.current != limit.maximum {
        let raised = Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if setrlimit(Resource::Nofile, raised).is_err() {
            return limit.current;
        }
    }
    getrlimit(Resource::Nofile).current
}
