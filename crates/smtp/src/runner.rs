//! The queue and its delivery thread as a value of their own, [`QueueRunner`], so
//! that they can outlive the SMTP servers feeding them: on a reload the binary
//! binds new servers over the same runner, and a message accepted by the old
//! servers while they finish their sessions is delivered by the same scheduler
//! as one accepted by the new ones, once, with the new delivery settings.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;

use stoa_directory::Directory;
use stoa_netkit::shutdown::Trigger;
use tokio::sync::mpsc;

use crate::config::Config;
use crate::delivery::{self, Deliverer, LocalDelivery, Notifier, Relay};
use crate::queue::{Envelope, Queue};
use crate::server::Error;

/// The delivery settings attempts read, replaced by [`QueueRunner::update`].
pub(crate) type Current = RwLock<Arc<Deliverer>>;

/// A queue directory, opened and recovered, and the thread that delivers from it
/// once [`QueueRunner::start`]ed. Stopped (after the deliveries in flight, within
/// the configured grace) by [`QueueRunner::stop`] or when dropped.
pub struct QueueRunner {
    queue: Arc<Queue>,
    path: PathBuf,
    notify: Notifier,
    current: Arc<Current>,
    /// What the thread starts with, until it is started.
    pending: Mutex<Option<(mpsc::UnboundedReceiver<String>, Vec<Envelope>)>>,
    recovered: usize,
    trigger: Trigger,
    shutdown: stoa_netkit::shutdown::Shutdown,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for QueueRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueRunner")
            .field("path", &self.path)
            .field("recovered", &self.recovered)
            .finish_non_exhaustive()
    }
}

impl QueueRunner {
    /// Opens the queue directory of `config` and recovers what a previous run left
    /// in it. Nothing is delivered before [`QueueRunner::start`] (so a process
    /// that gives up root first never delivers as root).
    pub fn open(
        config: &Config,
        directory: Arc<dyn Directory>,
        local: Arc<dyn LocalDelivery>,
    ) -> Result<QueueRunner, Error> {
        let path = config.queue_dir();
        let queue_error = |source| Error::Queue {
            path: path.clone(),
            source,
        };
        let queue = Arc::new(Queue::open(&path).map_err(queue_error)?);
        let recovered = queue.recover().map_err(queue_error)?;
        if !recovered.is_empty() {
            tracing::info!("queue: {} messages recovered", recovered.len());
        }
        let (notify, incoming) = mpsc::unbounded_channel();
        let deliverer = deliverer(config, &queue, directory, local);
        let (trigger, shutdown) = stoa_netkit::shutdown::channel();
        Ok(QueueRunner {
            queue,
            path,
            notify,
            current: Arc::new(RwLock::new(Arc::new(deliverer))),
            recovered: recovered.len(),
            pending: Mutex::new(Some((incoming, recovered))),
            trigger,
            shutdown,
            thread: Mutex::new(None),
        })
    }

    /// Starts the delivery thread; once started, does nothing.
    pub fn start(&self) -> Result<(), Error> {
        let Some((incoming, recovered)) = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        else {
            return Ok(());
        };
        let (current, notify, shutdown) = (
            Arc::clone(&self.current),
            self.notify.clone(),
            self.shutdown.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("stoa-queue".into())
            .spawn(move || {
                stoa_netkit::worker::run_current_thread(delivery::run(
                    current, notify, incoming, recovered, shutdown,
                ));
            })
            .map_err(Error::Workers)?;
        *self.thread.lock().unwrap_or_else(PoisonError::into_inner) = Some(thread);
        Ok(())
    }

    /// Delivers with `config`'s settings (smart host, store hosts, retry
    /// schedule, limits, grace), `directory` and `local` from the next attempt on;
    /// attempts in flight finish with the old ones. The queue directory cannot
    /// move: a `config` naming another is refused, and nothing changes.
    pub fn update(
        &self,
        config: &Config,
        directory: Arc<dyn Directory>,
        local: Arc<dyn LocalDelivery>,
    ) -> Result<(), Error> {
        let path = config.queue_dir();
        if path != self.path {
            return Err(Error::QueueMoved {
                from: self.path.clone(),
                to: path,
            });
        }
        let deliverer = Arc::new(deliverer(config, &self.queue, directory, local));
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = deliverer;
        Ok(())
    }

    /// Messages found in the queue when it was opened.
    pub fn recovered(&self) -> usize {
        self.recovered
    }

    /// Stops the thread after the deliveries in flight (within the grace), and
    /// waits for it. Messages not delivered stay queued for the next start.
    pub fn stop(&self) {
        self.trigger.trigger();
        let thread = self
            .thread
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            tracing::error!("the queue thread panicked");
        }
    }

    /// The queue, for the servers that add to it.
    pub(crate) fn queue(&self) -> &Arc<Queue> {
        &self.queue
    }

    /// Tells the scheduler of a newly queued message.
    pub(crate) fn notifier(&self) -> Notifier {
        self.notify.clone()
    }
}

impl Drop for QueueRunner {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What an attempt needs, from `config`.
fn deliverer(
    config: &Config,
    queue: &Arc<Queue>,
    directory: Arc<dyn Directory>,
    local: Arc<dyn LocalDelivery>,
) -> Deliverer {
    Deliverer {
        queue: Arc::clone(queue),
        directory,
        local,
        relay: relay(config),
        lmtp: delivery::lmtp::Lmtp::new(&config.mail_hosts, &config.hostname, &config.queue),
        config: config.queue.clone(),
        hostname: config.hostname.clone(),
        grace: config.shutdown_grace,
    }
}

/// The smart host's client settings, when one is configured.
fn relay(config: &Config) -> Option<Relay> {
    config.relay_host.as_ref().map(|host| Relay {
        host: host.clone(),
        helo: config.hostname.clone(),
        connect_timeout: config.queue.relay_connect_timeout,
        command_timeout: config.queue.relay_command_timeout,
        data_timeout: config.queue.relay_data_timeout,
    })
}
