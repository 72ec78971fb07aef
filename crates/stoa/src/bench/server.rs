//! The built-in target: `stoa serve --web99` over a cached file set, on loopback.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::cli::FilesetArgs;

/// A running `stoa serve`, stopped (SIGTERM) when dropped.
#[derive(Debug)]
pub(crate) struct BuiltIn {
    pub(crate) addr: SocketAddr,
    child: Child,
}

/// Where the built-in target keeps its file set and state between runs.
fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("stoa/bench-web")
}

/// Writes (or completes) the cached file set for `connections`.
async fn write_fileset(connections: u32) -> anyhow::Result<()> {
    let dir = cache_dir();
    eprintln!(
        "stoa bench: file set for {connections} connections in {}",
        dir.join("www").display()
    );
    let args = FilesetArgs {
        connections,
        dir: dir.join("www"),
        verify: false,
        force: false,
        jobs: None,
        seed: 1999,
        cgi_dir: Some(dir.join("cgi-bin")),
    };
    tokio::task::spawn_blocking(move || crate::fileset::write(&args, false))
        .await
        .context("file set generation panicked")?
}

impl BuiltIn {
    /// Extends the file set for a larger load (the server sees new files at once).
    /// The server's process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub(crate) async fn ensure_fileset(&self, connections: u32) -> anyhow::Result<()> {
        write_fileset(connections).await
    }

    /// Makes sure the file set for `connections` exists, then starts the server.
    pub(crate) async fn start(connections: u32) -> anyhow::Result<BuiltIn> {
        let dir = cache_dir();
        let (www, cgi, state) = (dir.join("www"), dir.join("cgi-bin"), dir.join("state"));
        write_fileset(connections).await?;
        let exe = std::env::current_exe().context("cannot find the stoa binary")?;
        let mut child = Command::new(exe)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--web99",
                "--access-log",
                "off",
            ])
            .arg("--docroot")
            .arg(&www)
            .arg("--web99-state")
            .arg(&state)
            .arg("--cgi-dir")
            .arg(&cgi)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start stoa serve")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let Some(line) = lines.next_line().await? else {
                bail!("stoa serve exited before listening");
            };
            if let Some(a) = line.strip_prefix("stoa: listening on http://") {
                break a.parse().context("bad listening address")?;
            }
        };
        // Keep draining its error log so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        eprintln!("stoa bench: built-in server on {addr}");
        Ok(BuiltIn { addr, child })
    }
}

impl Drop for BuiltIn {
    fn drop(&mut self) {
        if let Some(pid) = self
            .child
            .id()
            .and_then(|p| rustix::process::Pid::from_raw(p as i32))
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
    }
}
