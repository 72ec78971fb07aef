//! `stoa serve`: load the configuration, bind, serve, react to signals.

use std::path::Path;

use anyhow::Context;
use stoa_netkit::signals::{Signal, Signals};

use crate::cli::ServeArgs;
use crate::config;

/// Configuration errors, already printed; the process exits with status 2.
#[derive(Debug)]
pub(crate) struct InvalidConfig(pub(crate) usize);

impl std::fmt::Display for InvalidConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid configuration ({} errors)", self.0)
    }
}

impl std::error::Error for InvalidConfig {}

/// Where the dynamic API keeps its state unless told: the system's state
/// directory for root, the user's (XDG) state directory otherwise.
fn default_web99_state() -> std::path::PathBuf {
    if rustix::process::geteuid().is_root() {
        return "/var/lib/stoa/web99".into();
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".local/state"))
        })
        .unwrap_or_else(|| std::env::temp_dir().join("stoa-state"));
    base.join("stoa/web99")
}

/// Runs the server until SIGTERM or SIGINT, reopening the access log on SIGHUP.
pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let loaded = match config::load(
        args,
        |p: &Path| std::fs::read_to_string(p),
        &default_web99_state(),
    ) {
        Ok(loaded) => loaded,
        Err(errors) => {
            for e in &errors {
                eprintln!("stoa: error: {e}");
            }
            return Err(InvalidConfig(errors.len()).into());
        }
    };
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    if let Some(limit) = stoa_netkit::limits::raise_nofile() {
        tracing::debug!("open-file limit: {limit}");
    }
    // Signal handlers go in before the server announces itself, so a SIGTERM sent
    // the moment it is ready is handled, not fatal.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the signal runtime")?;
    let mut signals = runtime
        .block_on(async { Signals::new() })
        .context("cannot install signal handlers")?;

    let server = stoa_web::Server::bind(loaded.web).context("cannot start the web server")?;
    for addr in server.local_addrs() {
        eprintln!("stoa: listening on http://{addr}");
    }
    for addr in server.tls_addrs() {
        eprintln!("stoa: listening on https://{addr}");
    }
    let reopener = server.log_reopener();
    let (trigger, shutdown) = stoa_netkit::shutdown::channel();
    let worker = std::thread::Builder::new()
        .name("stoa-web".into())
        .spawn(move || server.run(shutdown))
        .context("cannot start the server thread")?;

    runtime.block_on(async {
        loop {
            match signals.recv().await {
                Signal::Hangup => {
                    tracing::info!("SIGHUP: reopening the access log");
                    reopener.reopen();
                }
                Signal::Terminate => {
                    tracing::info!("shutting down: draining requests in flight");
                    trigger.trigger();
                    break;
                }
            }
        }
    });
    std::thread::spawn(move || {
        // A second SIGTERM/SIGINT while draining means "now".
        runtime.block_on(async { while signals.recv().await != Signal::Terminate {} });
        tracing::warn!("second signal: exiting without draining");
        #[allow(
            clippy::exit,
            reason = "the user asked twice; nothing is left to clean up"
        )]
        std::process::exit(1);
    });
    match worker.join() {
        Ok(result) => result.context("web server failed"),
        Err(_) => anyhow::bail!("the web server thread panicked"),
    }
}
