//! The built-in target: `stoa serve --web99` over a cached file set, on loopback.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use super::FilesetWriter;

/// What the built-in target is made of: the binary it runs and the file set's
/// writer.
pub(crate) struct Wiring {
    /// The `stoa` binary; `None`: this process's executable.
    pub(crate) exe: Option<PathBuf>,
    /// Writes the file set (the binary's `stoa fileset`).
    pub(crate) write_fileset: FilesetWriter,
}

impl std::fmt::Debug for Wiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wiring")
            .field("exe", &self.exe)
            .finish_non_exhaustive()
    }
}

/// A running `stoa serve`, stopped (SIGTERM) when dropped.
#[derive(Debug)]
pub(crate) struct BuiltIn {
    pub(crate) addr: SocketAddr,
    /// With `--tls`: the self-signed certificate it serves (PEM), for the
    /// generators to trust.
    pub(crate) cert_pem: Option<String>,
    child: Child,
    wiring: Wiring,
}

/// A fresh self-signed certificate for `localhost` and 127.0.0.1 (ECDSA
/// P-256), written to `dir` as `cert.pem` and `key.pem` (owner-only).
fn self_signed(dir: &std::path::Path) -> anyhow::Result<(PathBuf, PathBuf, String)> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let rcgen::CertifiedKey { cert, signing_key } =
        rcgen::generate_simple_self_signed(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .context("cannot generate a certificate")?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
    let pem = cert.pem();
    std::fs::write(&cert_path, &pem)
        .with_context(|| format!("cannot write {}", cert_path.display()))?;
    let _ = std::fs::remove_file(&key_path);
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&key_path)
        .and_then(|mut f| f.write_all(signing_key.serialize_pem().as_bytes()))
        .with_context(|| format!("cannot write {}", key_path.display()))?;
    Ok((cert_path, key_path, pem))
}

/// Where the built-in target keeps its file set and state between runs.
fn cache_dir() -> PathBuf {
    crate::cache_dir("bench-web")
}

/// Writes (or completes) the cached file set for `connections`.
async fn write_fileset(write: &FilesetWriter, connections: u32) -> anyhow::Result<()> {
    let dir = cache_dir();
    eprintln!(
        "stoa bench: file set for {} in {}",
        crate::report::count(u64::from(connections), "connection"),
        dir.join("www").display()
    );
    let write = std::sync::Arc::clone(write);
    tokio::task::spawn_blocking(move || write(connections, &dir.join("www"), &dir.join("cgi-bin")))
        .await
        .context("file set generation panicked")?
}

impl BuiltIn {
    /// The server's process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Extends the file set for a larger load (the server sees new files at once).
    pub(crate) async fn ensure_fileset(&self, connections: u32) -> anyhow::Result<()> {
        write_fileset(&self.wiring.write_fileset, connections).await
    }

    /// Makes sure the file set for `connections` exists, then starts the server
    /// (over HTTPS with a fresh self-signed certificate when `tls`), on `cpus`
    /// when given (`--server-cpus`).
    pub(crate) async fn start(
        wiring: Wiring,
        connections: u32,
        tls: bool,
        cpus: Option<&crate::cpus::CpuList>,
    ) -> anyhow::Result<BuiltIn> {
        let dir = cache_dir();
        let (www, cgi, state) = (dir.join("www"), dir.join("cgi-bin"), dir.join("state"));
        write_fileset(&wiring.write_fileset, connections).await?;
        let exe = crate::stoa_exe(wiring.exe.as_deref())?;
        let mut command = Command::new(exe);
        command.args(["serve", "--web99", "--access-log", "off"]);
        let mut cert_pem = None;
        if tls {
            let (cert, key, pem) = self_signed(&dir.join("tls"))?;
            command
                .args(["--tls-listen", "127.0.0.1:0", "--tls-cert"])
                .arg(cert)
                .arg("--tls-key")
                .arg(key);
            cert_pem = Some(pem);
        } else {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        let scheme = if tls { "https" } else { "http" };
        command
            .arg("--docroot")
            .arg(&www)
            .arg("--web99-state")
            .arg(&state)
            .arg("--cgi-dir")
            .arg(&cgi)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = crate::cpus::start_pinned(cpus, || command.spawn())?
            .context("cannot start stoa serve")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let addr = loop {
            let Some(line) = lines.next_line().await? else {
                bail!("stoa serve exited before listening");
            };
            if let Some(a) = line
                .strip_prefix("stoa: listening on ")
                .and_then(|rest| rest.strip_prefix(scheme))
                .and_then(|rest| rest.strip_prefix("://"))
            {
                break a.parse().context("bad listening address")?;
            }
        };
        // Keep draining its error log so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        eprintln!("stoa bench: built-in server on {addr}");
        Ok(BuiltIn {
            addr,
            cert_pem,
            child,
            wiring,
        })
    }
}

impl Drop for BuiltIn {
    fn drop(&mut self) {
        terminate(&self.child);
    }
}

/// Asks a built-in server to drain and exit (SIGTERM), if it still runs.
pub(crate) fn terminate(child: &Child) {
    if let Some(pid) = child
        .id()
        .and_then(|p| rustix::process::Pid::from_raw(p as i32))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
    }
}
