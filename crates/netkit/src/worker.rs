//! Thread-per-core workers: each worker is an OS thread running its own
//! single-threaded tokio runtime. Tasks never migrate between threads, so a worker's
//! caches need no locks, and the kernel (through `SO_REUSEPORT`) is the only load
//! balancer.

use std::future::Future;
use std::io;
use std::thread::JoinHandle;

/// Starts `count` worker threads named `{name}-{index}`. Each calls `make(index)` on
/// its own thread and runs the returned future to completion on a current-thread
/// runtime (with a `LocalSet`, so `spawn_local` works too). When the future returns,
/// the runtime is dropped, which drops every task still on it.
pub fn spawn<F, Fut>(count: usize, name: &str, make: F) -> io::Result<Vec<JoinHandle<()>>>
where
    F: Fn(usize) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = ()> + 'static,
{
    (0..count)
        .map(|index| {
            let make = make.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{index}"))
                .spawn(move || run_current_thread(make(index)))
        })
        .collect()
}

/// Runs `future` on a new current-thread runtime on this thread.
pub fn run_current_thread<Fut: Future<Output = ()>>(future: Fut) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build();
    match runtime {
        Ok(runtime) => tokio::task::LocalSet::new().block_on(&runtime, future),
        Err(e) => tracing::error!("cannot start worker runtime: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn every_worker_runs_once_on_its_own_thread() {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let handles = super::spawn(3, "test", move |i| {
            let r = r.clone();
            async move {
                assert!(
                    std::thread::current()
                        .name()
                        .is_some_and(|n| n == format!("test-{i}"))
                );
                tokio::task::spawn_local(async {})
                    .await
                    .expect("local task");
                r.fetch_add(1, Ordering::SeqCst);
            }
        })
        .expect("spawn");
        for h in handles {
            h.join().expect("worker");
        }
        assert_eq!(ran.load(Ordering::SeqCst), 3);
    }
}
