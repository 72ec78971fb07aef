//! Starting a peer server from its generated configuration on a free loopback
//! port, waiting until it answers, and stopping it with its process tree.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};

use super::config::{self, Setup};
use crate::cpus::{CpuList, start_pinned};
use crate::proctree;

/// Longest a server may take to answer after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// Longest a server may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a start or a stop is checked on (a condition polled, with a
/// deadline).
const POLL: Duration = Duration::from_millis(20);

/// Which server software a peer runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Software {
    /// `stoa serve` of this binary or another build (`--baseline`), with
    /// extra flags (`--stoa-flags`, `--baseline-flags`).
    Stoa(PathBuf, Vec<String>),
    /// nginx, from `nginx` on the path or `/usr/sbin/nginx`.
    Nginx(PathBuf),
    /// Dovecot's master (`dovecot` on the path or `/usr/sbin/dovecot`), in
    /// the foreground, serving IMAP.
    Dovecot(PathBuf),
}

/// A peer server that runs, stopped (with its tree) when dropped.
#[derive(Debug)]
pub(crate) struct Running {
    /// Its name in the results (`stoa`, `nginx`, `stoa-base`).
    pub(crate) name: String,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// Its configuration as the result directory keeps it: nginx.conf, or
    /// stoa's command line.
    pub(crate) config: String,
    /// The access log, truncated after each run to keep the disk bounded.
    pub(crate) access_log: Option<PathBuf>,
    child: Child,
}

/// The nginx binary: `nginx` on the path, else `/usr/sbin/nginx`; `None` when
/// neither exists.
pub(crate) fn nginx_binary() -> Option<PathBuf> {
    which("nginx").or_else(|| Some(PathBuf::from("/usr/sbin/nginx")).filter(|p| p.is_file()))
}

/// Dovecot: `dovecot` on the path, else `/usr/sbin/dovecot`, provided its
/// imapd (`/usr/lib/dovecot/imap`) is installed; `None` otherwise.
pub(crate) fn dovecot_binary() -> Option<PathBuf> {
    let master = which("dovecot")
        .or_else(|| Some(PathBuf::from("/usr/sbin/dovecot")).filter(|p| p.is_file()))?;
    Path::new("/usr/lib/dovecot/imap")
        .is_file()
        .then_some(master)
}

/// Dovecot's imaptest: `flag` (`--imaptest`), else `$STOA_IMAPTEST`, else
/// `/opt/imaptest/bin/imaptest` (where scripts/test.sh builds it), else
/// `imaptest` on the path; `None` when that is not a file.
pub(crate) fn imaptest_binary(flag: Option<&Path>) -> Option<PathBuf> {
    let named = flag
        .map(Path::to_owned)
        .or_else(|| std::env::var_os("STOA_IMAPTEST").map(PathBuf::from));
    match named {
        Some(path) => Some(path).filter(|p| p.is_file()),
        None => Some(PathBuf::from("/opt/imaptest/bin/imaptest"))
            .filter(|p| p.is_file())
            .or_else(|| which("imaptest")),
    }
}

/// A program on the path.
pub(crate) fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// A loopback port that was free a moment ago.
fn free_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?.port())
}

impl Running {
    /// Starts `software` as `name` from a configuration generated in `dir`
    /// from `setup` (its `dir` and `port` are filled in here), on `cpus`
    /// when given; returns once it accepts connections.
    pub(crate) fn start(
        name: &str,
        software: &Software,
        setup: &Setup<'_>,
        web99: Option<(&Path, &Path)>,
        cpus: Option<&CpuList>,
    ) -> anyhow::Result<Running> {
        std::fs::create_dir_all(setup.dir)
            .with_context(|| format!("cannot create {}", setup.dir.display()))?;
        let running = match software {
            Software::Stoa(exe, extra) => start_stoa(name, exe, extra, setup, web99, cpus),
            Software::Nginx(exe) => start_nginx(name, exe, setup, cpus),
            Software::Dovecot(exe) => start_dovecot(name, exe, setup, cpus),
        }
        .with_context(|| format!("cannot start {name}"))?;
        eprintln!(
            "stoa bench peers: {name} (pid {}) on {}",
            running.pid(),
            running.addr
        );
        Ok(running)
    }

    /// The process that started it (nginx's master), the root of its tree.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it still runs.
    pub(crate) fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Empties its access log (the server keeps it open and appends).
    pub(crate) fn truncate_log(&self) {
        if let Some(log) = &self.access_log
            && let Ok(file) = std::fs::OpenOptions::new().write(true).open(log)
        {
            let _ = file.set_len(0);
        }
    }

    /// SIGTERM to the root, up to [`STOP_TIMEOUT`] for it to exit, then SIGKILL
    /// to it and every descendant left.
    pub(crate) fn stop(&mut self) {
        let pid = self.pid();
        signal(pid, rustix::process::Signal::TERM);
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if !self.alive() {
                return;
            }
            pause(POLL);
        }
        eprintln!(
            "stoa bench peers: {} ignored SIGTERM for {STOP_TIMEOUT:?}; killing it",
            self.name
        );
        for p in proctree::descendants(pid) {
            signal(p, rustix::process::Signal::KILL);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.alive() {
            self.stop();
        }
    }
}

pub(super) fn signal(pid: u32, sig: rustix::process::Signal) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, sig);
    }
}

fn start_stoa(
    name: &str,
    exe: &Path,
    extra: &[String],
    setup: &Setup<'_>,
    web99: Option<(&Path, &Path)>,
    cpus: Option<&CpuList>,
) -> anyhow::Result<Running> {
    let (args, toml) = if setup.imap {
        let (toml, mail) = stoa_imap_user(exe, setup.dir)?;
        let args = config::stoa_imap_args(&toml, &mail, extra);
        (
            args,
            format!("\n# {}:\n{}", toml.display(), config::STOA_IMAP_TOML),
        )
    } else {
        (config::stoa_args(setup, web99, extra), String::new())
    };
    let mut command = Command::new(exe);
    command
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = start_pinned(cpus, || command.spawn())?
        .with_context(|| format!("cannot run {}", exe.display()))?;
    let stderr = child.stderr.take().context("no standard error")?;
    let log_path = setup.dir.join("stderr.log");
    let mut log = std::fs::File::create(&log_path)
        .with_context(|| format!("cannot create {}", log_path.display()))?;
    let (tx, rx) = mpsc::channel();
    // Copies its standard error to the log (so it never blocks on a full pipe)
    // and sends the address of its "listening on http://" line (https:// with
    // TLS: the port the load goes to).
    let prefix = match setup.tls {
        _ if setup.imap => "stoa: listening on imap://",
        Some(_) => "stoa: listening on https://",
        None => "stoa: listening on http://",
    };
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix(prefix) {
                let _ = tx.send(addr.trim().to_owned());
            }
            let _ = writeln!(log, "{line}");
        }
    });
    let mut running = Running {
        name: name.to_owned(),
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        config: format!("stoa {}\n{toml}", args.join(" ")),
        access_log: setup.access_log.map(Path::to_owned),
        child,
    };
    let addr = rx.recv_timeout(START_TIMEOUT).map_err(|_| {
        anyhow::anyhow!(
            "no \"listening on\" line within {START_TIMEOUT:?}: {}",
            tail(&log_path)
        )
    })?;
    running.addr = addr.parse().context("bad listening address")?;
    wait_answers(&mut running, &log_path)?;
    Ok(running)
}

fn start_nginx(
    name: &str,
    exe: &Path,
    setup: &Setup<'_>,
    cpus: Option<&CpuList>,
) -> anyhow::Result<Running> {
    let port = free_port()?;
    let setup = Setup {
        port,
        ..setup.clone()
    };
    config::nginx_dirs(setup.dir)?;
    let conf = config::nginx_conf(&setup);
    let conf_path = setup.dir.join("nginx.conf");
    std::fs::write(&conf_path, &conf)
        .with_context(|| format!("cannot write {}", conf_path.display()))?;
    let stderr_path = setup.dir.join("stderr.log");
    let stderr = std::fs::File::create(&stderr_path)
        .with_context(|| format!("cannot create {}", stderr_path.display()))?;
    let mut command = Command::new(exe);
    command
        .arg("-p")
        .arg(setup.dir)
        .arg("-c")
        .arg(&conf_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    let child = start_pinned(cpus, || command.spawn())?
        .with_context(|| format!("cannot run {}", exe.display()))?;
    let mut running = Running {
        name: name.to_owned(),
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        config: conf,
        access_log: setup.access_log.map(Path::to_owned),
        child,
    };
    wait_answers(&mut running, &setup.dir.join("error.log"))?;
    Ok(running)
}

/// The imap workload's stoa: [`config::STOA_IMAP_TOML`] written to `dir`, and
/// [`config::IMAP_USER`] added with a plain password to the mail directory
/// `dir/mail` by `exe user add`; returns the file's and the directory's paths.
fn stoa_imap_user(exe: &Path, dir: &Path) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (toml, mail) = (dir.join("stoa.toml"), dir.join("mail"));
    std::fs::write(&toml, config::STOA_IMAP_TOML)
        .with_context(|| format!("cannot write {}", toml.display()))?;
    let log = dir.join("user-add.log");
    let out =
        std::fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
    let mut child = Command::new(exe)
        .args(["user", "add", "--scheme", "plain", "--password-stdin"])
        .arg("--config")
        .arg(&toml)
        .arg("--mail-dir")
        .arg(&mail)
        .arg(config::IMAP_USER)
        .stdin(Stdio::piped())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .with_context(|| format!("cannot run {} user add", exe.display()))?;
    if let Some(mut stdin) = child.stdin.take() {
        writeln!(stdin, "{}", config::IMAP_PASSWORD).context("stoa user add: its input")?;
    }
    let status = super::load::wait_bounded(child, START_TIMEOUT)?;
    if !status.success() {
        bail!("stoa user add failed ({status}): {}", tail(&log));
    }
    Ok((toml, mail))
}

/// Dovecot in the foreground (`dovecot -F -c dovecot.conf`, so the master is
/// the child and the root of the tree), its directories, passwd-file and mail
/// directory made first: as root the mail belongs to
/// [`config::DOVECOT_MAIL_ID`] and the directories on the way are readable
/// by all (Dovecot's processes drop to other users).
fn start_dovecot(
    name: &str,
    exe: &Path,
    setup: &Setup<'_>,
    cpus: Option<&CpuList>,
) -> anyhow::Result<Running> {
    use std::os::unix::fs::PermissionsExt as _;
    let port = free_port()?;
    let setup = Setup {
        port,
        ..setup.clone()
    };
    let dir = setup.dir;
    for sub in ["run", "state", "log", "mail"] {
        let path = dir.join(sub);
        std::fs::create_dir_all(&path)
            .with_context(|| format!("cannot create {}", path.display()))?;
    }
    let (uid, gid, users) = if setup.root {
        let open = std::fs::Permissions::from_mode(0o755);
        for path in [dir, dir.parent().unwrap_or(dir)] {
            std::fs::set_permissions(path, open.clone())
                .with_context(|| format!("cannot open up {}", path.display()))?;
        }
        let mail = dir.join("mail");
        let id = config::DOVECOT_MAIL_ID;
        std::os::unix::fs::chown(&mail, Some(id), Some(id))
            .with_context(|| format!("cannot give {} to {id}", mail.display()))?;
        (id, id, None)
    } else {
        let (uid, gid) = (rustix::process::getuid(), rustix::process::getgid());
        (uid.as_raw(), gid.as_raw(), Some(user_and_group()?))
    };
    let passwd = dir.join("passwd");
    std::fs::write(&passwd, config::dovecot_passwd(dir, uid, gid))
        .with_context(|| format!("cannot write {}", passwd.display()))?;
    let conf = config::dovecot_conf(
        &setup,
        users.as_ref().map(|(u, g)| (u.as_str(), g.as_str())),
    );
    let conf_path = dir.join("dovecot.conf");
    std::fs::write(&conf_path, &conf)
        .with_context(|| format!("cannot write {}", conf_path.display()))?;
    let stderr_path = dir.join("stderr.log");
    let stderr = std::fs::File::create(&stderr_path)
        .with_context(|| format!("cannot create {}", stderr_path.display()))?;
    let mut command = Command::new(exe);
    command
        .arg("-F")
        .arg("-c")
        .arg(&conf_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    let child = start_pinned(cpus, || command.spawn())?
        .with_context(|| format!("cannot run {}", exe.display()))?;
    let mut running = Running {
        name: name.to_owned(),
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        config: conf,
        access_log: None,
        child,
    };
    let log = dir.join("log/dovecot.log");
    wait_answers(&mut running, &log)
        .map_err(|e| anyhow::anyhow!("{e:#} {}", tail(&stderr_path)))?;
    Ok(running)
}

/// This process's user and group names (`id -un`, `id -gn`), for a Dovecot
/// that runs as them.
fn user_and_group() -> anyhow::Result<(String, String)> {
    let id = |flag: &str| -> anyhow::Result<String> {
        let out = Command::new("id")
            .arg(flag)
            .stdin(Stdio::null())
            .output()
            .context("cannot run id")?;
        let name = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !out.status.success() || name.is_empty() {
            bail!("id {flag} gave no name");
        }
        Ok(name)
    };
    Ok((id("-un")?, id("-gn")?))
}

/// Until `running` accepts a TCP connection, or exits, or [`START_TIMEOUT`].
fn wait_answers(running: &mut Running, log: &Path) -> anyhow::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if TcpStream::connect_timeout(&running.addr, POLL * 10).is_ok() {
            return Ok(());
        }
        if !running.alive() {
            bail!("it exited at start: {}", tail(log));
        }
        if Instant::now() >= deadline {
            bail!("it did not answer within {START_TIMEOUT:?}: {}", tail(log));
        }
        pause(POLL);
    }
}

/// The last lines of a log, on one line.
pub(super) fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().rev().take(5).collect();
    lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
}

/// One poll interval between checks of a condition that has a deadline.
pub(super) fn pause(d: Duration) {
    #[allow(
        clippy::disallowed_methods,
        reason = "the interval of a condition polled with a deadline, never synchronisation"
    )]
    std::thread::sleep(d);
}
