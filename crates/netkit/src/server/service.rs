//! What a bound server looks like to the binary: the addresses it listens on, and
//! a way to run it until shutdown. `stoa serve` holds its servers as a list of
//! these, whatever their protocols.

use std::net::SocketAddr;

use crate::shutdown::Shutdown;

/// Any server's start-up or run-time error, for the binary to report.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// One address a server listens on, with the URL scheme that names its protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// `http`, `https`, `smtp`, `submission`, `pop3`, `pop3s`, ...
    pub scheme: &'static str,
    /// The bound address (port 0 resolved).
    pub addr: SocketAddr,
}

impl Endpoint {
    /// Each of `addrs` as an endpoint of `scheme`.
    pub fn each(scheme: &'static str, addrs: &[SocketAddr]) -> impl Iterator<Item = Endpoint> {
        addrs.iter().map(move |&addr| Endpoint { scheme, addr })
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.scheme, self.addr)
    }
}

/// A bound server, ready to run.
pub trait Service: Send + 'static {
    /// The server's name in thread names and messages (`web`, `mail`, `POP3`).
    fn name(&self) -> &'static str;
    /// Every address it listens on, in configuration order.
    fn endpoints(&self) -> Vec<Endpoint>;
    /// Serves until `shutdown` fires, then drains. Blocks the calling thread.
    fn run(self: Box<Self>, shutdown: Shutdown) -> Result<(), BoxError>;
}
