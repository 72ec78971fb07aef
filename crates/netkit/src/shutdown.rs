//! A shutdown signal that any number of tasks and threads can wait on, in two
//! stages: a hand-over (a reload's new servers took the listeners: stop accepting,
//! let established connections carry on until they end) and the stop (end
//! connections, drain, exit). A stop may follow a hand-over, or come alone.

use tokio::sync::watch;

/// How far the shutdown has gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Running,
    HandOver,
    Stop,
}

/// The sending half: [`Trigger::hand_over`] and [`Trigger::trigger`] start the
/// stages.
#[derive(Debug)]
pub struct Trigger {
    tx: watch::Sender<Stage>,
}

/// The receiving half; clone it freely.
#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<Stage>,
}

/// A connected pair.
pub fn channel() -> (Trigger, Shutdown) {
    let (tx, rx) = watch::channel(Stage::Running);
    (Trigger { tx }, Shutdown { rx })
}

impl Trigger {
    /// Starts the stop. Calling it again does nothing.
    pub fn trigger(&self) {
        self.tx.send_replace(Stage::Stop);
    }

    /// Starts the hand-over, unless the stop has begun: no new connections,
    /// established ones carry on.
    pub fn hand_over(&self) {
        self.tx.send_if_modified(|stage| {
            let change = *stage == Stage::Running;
            if change {
                *stage = Stage::HandOver;
            }
            change
        });
    }
}

impl Shutdown {
    /// Whether the stop has started.
    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow() == Stage::Stop
    }

    /// Whether the server must no longer accept: the hand-over or the stop has
    /// started.
    pub fn accepting_has_ended(&self) -> bool {
        *self.rx.borrow() >= Stage::HandOver
    }

    /// Resolves once the stop has started (at once if it already has). A dropped
    /// [`Trigger`] counts as a stop.
    pub async fn wait(&mut self) {
        // An error means the trigger is gone: nobody can start or stop us any more.
        let _ = self.rx.wait_for(|&stage| stage == Stage::Stop).await;
    }

    /// Resolves once the server must stop accepting: at the hand-over or the
    /// stop, whichever comes first.
    pub async fn accepting_ends(&mut self) {
        let _ = self.rx.wait_for(|&stage| stage >= Stage::HandOver).await;
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

    #[tokio::test]
    async fn a_hand_over_ends_accepting_but_is_not_a_stop() {
        let (trigger, mut shutdown) = super::channel();
        assert!(!shutdown.accepting_has_ended());
        trigger.hand_over();
        shutdown.accepting_ends().await;
        assert!(shutdown.accepting_has_ended());
        assert!(!shutdown.is_triggered());
        let mut stop = shutdown.clone();
        let waiter = tokio::spawn(async move { stop.wait().await });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "the stop has not come");
        trigger.trigger();
        waiter.await.expect("waiter");
        trigger.hand_over();
        assert!(shutdown.is_triggered(), "a hand-over never undoes a stop");
    }
}
