//! A shutdown signal that any number of tasks and threads can wait on.

use tokio::sync::watch;

/// The sending half: [`Trigger::trigger`] starts the shutdown.
#[derive(Debug)]
pub struct Trigger {
    tx: watch::Sender<bool>,
}

/// The receiving half; clone it freely.
#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

/// A connected pair.
pub fn channel() -> (Trigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (Trigger { tx }, Shutdown { rx })
}

impl Trigger {
    /// Starts the shutdown. Calling it again does nothing.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }
}

impl Shutdown {
    /// Whether shutdown has started.
    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves once shutdown has started (at once if it already has). A dropped
    /// [`Trigger`] counts as a shutdown.
    pub async fn wait(&mut self) {
        // An error means the trigger is gone: nobody can start or stop us any more.
        let _ = self.rx.wait_for(|&down| down).await;
    }
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn wait_returns_after_trigger() {
        let (trigger, mut shutdown) = super::channel();
        assert!(!shutdown.is_triggered());
        let mut other = shutdown.clone();
        let waiter = tokio::spawn(async move { other.wait().await });
        trigger.trigger();
        waiter.await.expect("waiter");
        shutdown.wait().await;
        assert!(shutdown.is_triggered());
    }
}
