//! The process signals a server reacts to.

use std::io;

use tokio::signal::unix::{SignalKind, signal};

/// A signal that asks something of the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM or SIGINT: drain and exit.
    Terminate,
    /// SIGHUP: reopen log files (logrotate).
    Hangup,
}

/// SIGTERM, SIGINT and SIGHUP as one stream. Create it inside a tokio runtime.
#[derive(Debug)]
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers.
    pub fn new() -> io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal.
    pub async fn recv(&mut self) -> Signal {
        tokio::select! {
            _ = self.term.recv() => Signal::Terminate,
            _ = self.int.recv() => Signal::Terminate,
            _ = self.hup.recv() => Signal::Hangup,
        }
    }
}
