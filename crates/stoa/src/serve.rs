//! `stoa serve`: load the configuration, bind the servers it names (the list
//! of `crate::config`: web, SMTP, POP3, the POP3 proxy, LMTP, metrics), serve,
//! react to signals.
//!
//! The order at start: the configuration; the umask; the user to become, looked
//! up; every service bound (listeners, certificates, document root, logs, mail
//! store, directory); then, when a user is named, the switch to it
//! (`crate::privilege`) and the check of the paths it must use; only then the
//! worker threads, and `READY=1` to systemd when it started us (`Type=notify`).
//! `STOPPING=1` follows SIGTERM.
//!
//! SIGHUP reloads ([`reload`]): the whole configuration is read again and, if
//! it is valid and every server binds, a new generation of servers starts on it
//! while the old one hands over (`stoa_netkit::shutdown`): it stops accepting and
//! serves its established connections until they end (at most
//! [`HAND_OVER_LIMIT`]). Listening sockets pass from one generation to the next
//! through one [`Pool`] (same address, same socket: nothing waiting in an accept
//! queue is lost, and a privileged port needs no root again); the mail store, the
//! directory, the failed-login throttle and the queue's delivery thread
//! ([`stoa_smtp::QueueRunner`]) carry over, so a message the old servers accept
//! while they finish is delivered like any other. A configuration with an error,
//! or one that does not bind, is refused whole and the running one stays; either
//! way the access log is reopened (logrotate's SIGHUP).

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use stoa_directory::EmbeddedDirectory;
use stoa_netkit::listener::Pool;
use stoa_netkit::server::{BoxError, Service};
use stoa_netkit::shutdown::Shutdown;
use stoa_netkit::signals::{Signal, Signals};
use stoa_netkit::throttle::Throttle;

use crate::check_config::InvalidConfig;
use crate::cli::ServeArgs;
use crate::config::{self, MailParts};
use crate::privilege::{self, Need};

/// Runs the servers until SIGTERM or SIGINT, reloading on SIGHUP.
pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<()> {
    // A server spends long stretches idle holding memory it has freed (parked
    // connections, finished sessions): let the allocator give it back at once.
    stoa_alloc::purge_freed_memory_at_once();
    // Nor keep it in huge pages, resident whole for a few live objects.
    if let Err(e) = stoa_alloc::no_transparent_huge_pages() {
        tracing::warn!("cannot turn transparent huge pages off: {e}");
    }
    // An invalid configuration is refused with its warnings beside its errors.
    let loaded = crate::check_config::load(args).map_err(crate::check_config::refuse)?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let process = loaded.process.clone();
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(process.umask));
    let target = privilege::resolve(process.user.as_deref(), process.group.as_deref())?;
    let (needs, created) = match &target {
        Some(_) => {
            let (needs, managed) = used_paths(&loaded);
            (needs, privilege::missing(&managed))
        }
        None => Default::default(),
    };
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

    let sockets = Pool::shared();
    let bound = bind_services(loaded, &sockets, None)?;
    if let Some(t) = &target {
        privilege::give(&created, t)?;
        privilege::switch(t)?;
        privilege::check_access(&needs, t)?;
        tracing::info!("running as user {} and group {}", t.name, t.group);
    }
    for service in &bound.services {
        for endpoint in service.endpoints() {
            eprintln!("stoa: listening on {endpoint}");
        }
    }
    if let Some(path) = &args.pid_file {
        write_pid_file(path)?;
    }
    let mut servers = Servers {
        current: Generation::start(bound)?,
        retired: Vec::new(),
        sockets,
        process,
        reloads: 0,
    };
    if let Some(path) = &args.pid_file {
        write_outcome(path, 0, &[]);
    }
    servers.sockets.commit();
    notify(&[sd_notify::NotifyState::Ready]);

    runtime.block_on(serve_signals(&mut signals, args, &mut servers));
    notify(&[sd_notify::NotifyState::Stopping]);
    servers.stop_all();
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
    let result = servers.join_all();
    if let Some(path) = &args.pid_file {
        let _ = std::fs::remove_file(path);
        let _ = std::fs::remove_file(outcome_path(path));
    }
    result
}

/// Where `stoa serve --pid-file FILE` tells how its last reload ended:
/// `FILE.reload`.
fn outcome_path(pid_file: &Path) -> std::path::PathBuf {
    let mut name = pid_file.as_os_str().to_owned();
    name.push(".reload");
    std::path::PathBuf::from(name)
}

/// Writes the outcome of reload number `n` (0: the start): `n ok`, or `n refused`
/// then one error a line. Replaced whole (a temporary file renamed), so a reader
/// never sees half of it; a failure to write is logged, not fatal.
fn write_outcome(pid_file: &Path, n: u64, errors: &[String]) {
    let path = outcome_path(pid_file);
    let mut text = if errors.is_empty() {
        format!("{n} ok\n")
    } else {
        format!("{n} refused\n")
    };
    for e in errors {
        text.push_str(&e.replace('\n', " "));
        text.push('\n');
    }
    let mut tmp = path.clone().into_os_string();
    tmp.push(".tmp");
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        tracing::warn!("cannot write the reload outcome {}: {e}", path.display());
    }
}

/// The outcome file's reload count and text, if there is one.
fn read_outcome(pid_file: &Path) -> Option<(u64, String)> {
    let text = std::fs::read_to_string(outcome_path(pid_file)).ok()?;
    let n = text.split_whitespace().next()?.parse().ok()?;
    Some((n, text))
}

/// `stoa reload`: sends SIGHUP to the `stoa serve` whose id `pid_file` holds.
pub(crate) fn signal_reload(pid_file: &Path) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(pid_file)
        .with_context(|| format!("cannot read the pid file {}", pid_file.display()))?;
    let pid = text
        .trim()
        .parse::<i32>()
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .with_context(|| {
            format!(
                "{} does not hold a process id: {:?}",
                pid_file.display(),
                text.trim()
            )
        })?;
    let before = read_outcome(pid_file).map(|(n, _)| n);
    // Watch the directory before the signal, so the answer cannot be missed.
    let watch = watch_outcome(pid_file);
    rustix::process::kill_process(pid, rustix::process::Signal::HUP).with_context(|| {
        format!(
            "cannot signal process {} (from {})",
            pid.as_raw_nonzero(),
            pid_file.display()
        )
    })?;
    let (Some(before), Some(watch)) = (before, watch) else {
        eprintln!("stoa: reload signalled (this server does not report the outcome)");
        return Ok(());
    };
    // A reload reads, checks, binds and starts the new servers: seconds at most.
    let deadline = std::time::Instant::now() + RELOAD_WAIT;
    loop {
        if let Some((n, text)) = read_outcome(pid_file)
            && n > before
        {
            if text.lines().next().is_some_and(|l| l.ends_with(" ok")) {
                eprintln!("stoa: reload: the new configuration is in service");
                return Ok(());
            }
            for line in text.lines().skip(1) {
                eprintln!("stoa: error: {line}");
            }
            anyhow::bail!("reload refused; the running configuration stays");
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            anyhow::bail!(
                "no answer from process {} within {RELOAD_WAIT:?}; see its log",
                pid.as_raw_nonzero()
            );
        }
        wait_for_change(&watch, left);
    }
}

/// An inotify watch on the pid file's directory, where the outcome file is renamed
/// into place; `None` if it cannot be set (the caller then does not wait).
fn watch_outcome(pid_file: &Path) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::inotify::WatchFlags;
    let dir = pid_file
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    watch_dir(dir, WatchFlags::MOVED_TO | WatchFlags::CLOSE_WRITE)
}

/// An inotify watch on `dir` for the events of `flags` (how a command waits for
/// the server's answer: `stoa reload`, `stoa queue flush`); `None` if it cannot
/// be set.
pub(crate) fn watch_dir(
    dir: &Path,
    flags: rustix::fs::inotify::WatchFlags,
) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::inotify;
    let fd = inotify::init(inotify::CreateFlags::CLOEXEC | inotify::CreateFlags::NONBLOCK).ok()?;
    inotify::add_watch(&fd, dir, flags).ok()?;
    Some(fd)
}

/// Waits until the watched directory changes or `left` passes, then drains the
/// events.
pub(crate) fn wait_for_change(watch: &std::os::fd::OwnedFd, left: std::time::Duration) {
    use rustix::event::{PollFd, PollFlags, poll};
    let timeout = rustix::time::Timespec {
        tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
        tv_nsec: i64::from(left.subsec_nanos()),
    };
    let mut fds = [PollFd::new(watch, PollFlags::IN)];
    let _ = poll(&mut fds, Some(&timeout));
    let mut buf = [0u8; 4096];
    while matches!(rustix::io::read(watch, &mut buf), Ok(n) if n > 0) {}
}

/// How long `stoa reload` waits for the server's answer.
const RELOAD_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Writes this process's id to `path` (for `stoa reload --pid-file`), replacing
/// what was there.
fn write_pid_file(path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, format!("{}\n", std::process::id()))
        .with_context(|| format!("cannot write the pid file {}", path.display()))
}

/// How long a generation of servers replaced by a reload may go on serving its
/// established connections before it is stopped (as on shutdown: SMTP and POP3
/// sessions get their `421`/`-ERR`, within the drain's grace).
const HAND_OVER_LIMIT: Duration = Duration::from_secs(300);

/// The servers of the process: the generation accepting, the ones a reload
/// replaced that still serve their connections, and what passes from one
/// generation to the next.
struct Servers {
    current: Generation,
    retired: Vec<Generation>,
    sockets: Pool,
    /// The user, group and umask the process started with: a reload keeps them.
    process: config::Process,
    /// Reloads answered so far (the count in the outcome file `stoa reload` reads).
    reloads: u64,
}

impl Servers {
    /// Stops every generation (the current one and those handing over).
    fn stop_all(&self) {
        self.current.trigger.trigger();
        for old in &self.retired {
            old.trigger.trigger();
        }
    }

    /// Waits for every generation to finish draining; the first failure is the
    /// result.
    fn join_all(self) -> anyhow::Result<()> {
        let mut result = join_services(self.current.threads);
        for old in self.retired {
            let outcome = join_services(old.threads);
            if result.is_ok() {
                result = outcome;
            }
        }
        result
    }

    /// Forgets the replaced generations that have finished, and stops those past
    /// [`HAND_OVER_LIMIT`].
    fn reap(&mut self) {
        let now = Instant::now();
        let mut still = Vec::new();
        for old in std::mem::take(&mut self.retired) {
            if old.threads.iter().all(|(_, t)| t.is_finished()) {
                if let Err(e) = join_services(old.threads) {
                    tracing::warn!(
                        "a replaced server ended with an error: {}",
                        crate::chain(&e)
                    );
                }
                tracing::info!("reload: the replaced servers have finished");
                continue;
            }
            if old
                .since
                .is_some_and(|since| now.duration_since(since) >= HAND_OVER_LIMIT)
                && !old.stopped
            {
                tracing::info!(
                    "reload: stopping the replaced servers' connections after {HAND_OVER_LIMIT:?}"
                );
                old.trigger.trigger();
                still.push(Generation {
                    stopped: true,
                    ..old
                });
                continue;
            }
            still.push(old);
        }
        self.retired = still;
    }
}

/// One generation of servers: started from one reading of the configuration.
struct Generation {
    trigger: stoa_netkit::shutdown::Trigger,
    threads: Vec<(&'static str, ServiceThread)>,
    /// What a refused reload reopens (the access logs).
    reopen: Vec<Box<dyn Fn() + Send>>,
    mail: Option<MailParts>,
    /// The mail directory the configuration named (a reload cannot move it).
    mail_dir: Option<std::path::PathBuf>,
    /// When a reload replaced it.
    since: Option<Instant>,
    /// Whether it has been told to stop (past [`HAND_OVER_LIMIT`]).
    stopped: bool,
}

impl Generation {
    /// Runs each of `bound`'s servers on a thread of its own.
    fn start(bound: Bound) -> anyhow::Result<Generation> {
        let (trigger, shutdown) = stoa_netkit::shutdown::channel();
        let threads = bound
            .services
            .into_iter()
            .map(|service| spawn_service(service, shutdown.clone()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok(Generation {
            trigger,
            threads,
            reopen: bound.reopen,
            mail: bound.mail,
            mail_dir: bound.mail_dir,
            since: None,
            stopped: false,
        })
    }

    fn embedded(&self) -> Option<&EmbeddedDirectory> {
        self.mail.as_ref().and_then(|m| m.embedded.as_deref())
    }
}

/// SIGHUP: reads the configuration again and, when it is valid and binds, puts a
/// new generation of servers in the place of the running one (module docs).
/// Otherwise the running servers stay, and the reason is logged. The access log
/// is reopened either way.
fn reload(args: &ServeArgs, servers: &mut Servers) {
    let mut reloading = vec![sd_notify::NotifyState::Reloading];
    reloading.extend(sd_notify::NotifyState::monotonic_usec_now().ok());
    notify(&reloading);
    let mut errors = Vec::new();
    match replace(args, servers, &mut errors) {
        Ok(()) => tracing::info!("reload: the new configuration is in service"),
        Err(e) => {
            tracing::error!(
                "reload refused, the running configuration stays: {}",
                crate::chain(&e)
            );
            if errors.is_empty() {
                errors.push(crate::chain(&e));
            }
            for reopen in &servers.current.reopen {
                reopen();
            }
        }
    }
    servers.reloads += 1;
    if let Some(path) = &args.pid_file {
        write_outcome(path, servers.reloads, &errors);
    }
    notify(&[sd_notify::NotifyState::Ready]);
}

/// The work of [`reload`]: load, check, bind, start, hand over.
fn replace(
    args: &ServeArgs,
    servers: &mut Servers,
    errors: &mut Vec<String>,
) -> anyhow::Result<()> {
    let loaded = crate::check_config::load(args).map_err(|rejected| {
        for w in &rejected.warnings {
            tracing::warn!("{w}");
        }
        for e in &rejected.errors {
            tracing::error!("{e}");
        }
        errors.extend(rejected.errors.iter().cloned());
        anyhow::Error::new(InvalidConfig(rejected.errors.len()))
    })?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    if loaded.process.user != servers.process.user || loaded.process.group != servers.process.group
    {
        tracing::warn!("reload: a change of user or group takes effect at the next restart");
    }
    if loaded.process.umask != servers.process.umask {
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(loaded.process.umask));
        servers.process.umask = loaded.process.umask;
    }
    if let (Some(old), Some(new)) = (&servers.current.mail_dir, &loaded.mail_dir)
        && old != new
    {
        anyhow::bail!(
            "the mail directory cannot move from {} to {} without a restart",
            old.display(),
            new.display()
        );
    }
    servers.sockets.begin();
    let bound = match bind_services(loaded, &servers.sockets, servers.current.mail.as_ref()) {
        Ok(bound) => bound,
        Err(e) => {
            servers.sockets.abandon();
            return Err(e);
        }
    };
    let listening: Vec<String> = bound
        .services
        .iter()
        .flat_map(|s| s.endpoints())
        .map(|e| e.to_string())
        .collect();
    let new = match Generation::start(bound) {
        Ok(new) => new,
        Err(e) => {
            servers.sockets.abandon();
            return Err(e);
        }
    };
    servers.sockets.commit();
    tracing::info!("reload: listening on {}", listening.join(", "));
    let mut old = std::mem::replace(&mut servers.current, new);
    old.trigger.hand_over();
    old.since = Some(Instant::now());
    // What the new servers took over needs no second copy in the old generation.
    old.mail = None;
    servers.retired.push(old);
    Ok(())
}

/// Tells systemd `states` when it started the server with `NOTIFY_SOCKET` set
/// (`Type=notify`); nothing otherwise. A failure is logged, never fatal. The
/// variable is left set, for the later `STOPPING=1`; CGI programs do not see it
/// (their environment is built from scratch).
fn notify(states: &[sd_notify::NotifyState<'_>]) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(false, states) {
        tracing::warn!("cannot notify systemd: {e}");
    }
}

/// What the servers use after a switch of user ([`privilege::check_access`]),
/// and the paths that they may create at start ([`privilege::missing`]): the
/// mail directory first, then each server's own (the web server's document
/// roots, access logs and web99 state directory; SMTP's queue).
fn used_paths(loaded: &config::Loaded) -> (Vec<Need>, Vec<std::path::PathBuf>) {
    let (mut needs, mut managed) = (Vec::new(), Vec::new());
    let mail_dir = (loaded.mail_dir.clone())
        .or_else(|| (loaded.services.iter()).find_map(|s| s.directory_home().map(Path::to_owned)));
    if let Some(dir) = &mail_dir {
        let mut mail = vec![Need::read("the mail directory", dir)];
        if matches!(loaded.directory, config::Directory::Embedded(_)) {
            mail.push(Need::read("the user directory", dir.join("directory")));
            mail.push(Need::read(
                "the user directory's file",
                dir.join("directory/entries.txt"),
            ));
        }
        for sub in ["store", "store/tmp", "store/mailboxes"] {
            mail.push(Need::write("the mail store", dir.join(sub)));
        }
        // Any of them may be new, in an old mail directory too.
        managed.extend(mail.iter().map(|n| n.path.clone()));
        needs.extend(mail);
    }
    for service in &loaded.services {
        service.paths(&mut needs, &mut managed);
    }
    (needs, managed)
}

/// Reacts to signals until SIGTERM or SIGINT: SIGHUP reloads ([`reload`]); every
/// [`DIRECTORY_RELOAD`] the user directory is reloaded if `stoa user` changed it,
/// and the generations a reload replaced are looked after ([`Servers::reap`]).
async fn serve_signals(signals: &mut Signals, args: &ServeArgs, servers: &mut Servers) {
    let mut tick = tokio::time::interval(DIRECTORY_RELOAD);
    loop {
        tokio::select! {
            signal = signals.recv() => match signal {
                Signal::Hangup => {
                    tracing::info!("SIGHUP: reloading the configuration");
                    reload(args, servers);
                }
                Signal::Terminate => {
                    tracing::info!("shutting down: draining requests and mail in flight");
                    return;
                }
            },
            _ = tick.tick() => {
                reload_directory(servers.current.embedded());
                servers.reap();
            }
        }
    }
}

/// Waits for every server to finish draining; the first failure is the result.
fn join_services(threads: Vec<(&'static str, ServiceThread)>) -> anyhow::Result<()> {
    let mut result = Ok(());
    for (name, thread) in threads {
        let outcome = match thread.join() {
            Ok(outcome) => {
                outcome.map_err(|e| anyhow::anyhow!(e).context(format!("{name} server failed")))
            }
            Err(_) => Err(anyhow::anyhow!("the {name} server thread panicked")),
        };
        if result.is_ok() {
            result = outcome;
        }
    }
    result
}

/// A server running on its own thread.
type ServiceThread = JoinHandle<Result<(), BoxError>>;

/// The bound servers, in the order they announce themselves (the list of
/// `crate::config`), what a refused reload reopens, and the mail parts they
/// share (kept for the next reload).
struct Bound {
    services: Vec<Box<dyn Service>>,
    reopen: Vec<Box<dyn Fn() + Send>>,
    mail: Option<MailParts>,
    mail_dir: Option<std::path::PathBuf>,
}

/// Binds every configured server, so that every start-up error surfaces before
/// any of them serves. Listening sockets come from `sockets`; the mail parts of
/// `previous` (the running generation's, on a reload) are used again where the
/// configuration still names them.
fn bind_services(
    loaded: config::Loaded,
    sockets: &Pool,
    previous: Option<&MailParts>,
) -> anyhow::Result<Bound> {
    let config::Loaded {
        services: configured,
        mail_dir,
        auth_throttle,
        directory,
        process,
        ..
    } = loaded;
    let mut mail = match &mail_dir {
        Some(dir) => Some(open_mail(
            dir,
            auth_throttle,
            directory.clone(),
            &process,
            previous,
        )?),
        None => None,
    };
    let mut reopen = Vec::new();
    let mut shared = config::Shared {
        sockets,
        mail: mail.as_mut(),
        directory: &directory,
        reopen: &mut reopen,
    };
    let services = (configured.into_iter())
        .map(|service| service.bind(&mut shared))
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Bound {
        services,
        reopen,
        mail,
        mail_dir,
    })
}

/// Runs `service` on a thread of its own until `shutdown`.
fn spawn_service(
    service: Box<dyn Service>,
    shutdown: Shutdown,
) -> anyhow::Result<(&'static str, ServiceThread)> {
    let name = service.name();
    let thread = std::thread::Builder::new()
        .name(format!("stoa-{}", name.to_ascii_lowercase()))
        .spawn(move || service.run(shutdown))
        .with_context(|| format!("cannot start the {name} server thread"))?;
    Ok((name, thread))
}

/// How often the mail server looks for changes `stoa user` made to the directory
/// (a `stat` of one file).
const DIRECTORY_RELOAD: std::time::Duration = std::time::Duration::from_secs(2);

/// Opens the directory and the mail store of the mail directory `mail_dir`, with
/// the failed-login throttle of `throttle`'s settings, or keeps `previous`'s
/// where they are the same.
fn open_mail(
    mail_dir: &Path,
    throttle: stoa_netkit::throttle::AuthThrottle,
    directory: config::Directory,
    process: &config::Process,
    previous: Option<&MailParts>,
) -> anyhow::Result<MailParts> {
    if previous.is_none() {
        std::os::unix::fs::DirBuilderExt::mode(
            std::fs::DirBuilder::new().recursive(true),
            process.mail_dir_mode(),
        )
        .create(mail_dir)
        .with_context(|| format!("cannot create the mail directory {}", mail_dir.display()))?;
    }
    let throttle = match previous {
        Some(p) if *p.throttle.settings() == throttle => Arc::clone(&p.throttle),
        _ => Arc::new(Throttle::new(throttle)),
    };
    let directory_config = directory.clone();
    let (directory, embedded) = match previous {
        Some(p) if p.directory_config == directory => (p.directory.clone(), p.embedded.clone()),
        _ => directory.open(mail_dir)?,
    };
    let store = match previous {
        // The same mail directory (a reload cannot move it).
        Some(p) => Arc::clone(&p.store),
        None => Arc::new(open_store(mail_dir, process)?),
    };
    Ok(MailParts {
        directory,
        embedded,
        directory_config,
        imap_sessions: match previous.and_then(|p| p.imap_sessions.get()) {
            Some(sessions) => std::sync::OnceLock::from(sessions.clone()),
            None => std::sync::OnceLock::new(),
        },
        store,
        throttle,
        runner: previous.and_then(|p| p.runner.clone()),
    })
}

/// Opens the store of the mail directory.
fn open_store(
    mail_dir: &Path,
    process: &config::Process,
) -> anyhow::Result<stoa_mailstore::MailStore> {
    let store_dir = mail_dir.join("store");
    let options = stoa_mailstore::Options {
        file_mode: process.mail_file_mode(),
        dir_mode: process.mail_dir_mode(),
        ..stoa_mailstore::Options::default()
    };
    let store = stoa_mailstore::MailStore::open(&store_dir, options)
        .with_context(|| format!("cannot open the mail store {}", store_dir.display()))?;
    let recovery = store.recovery();
    if recovery.stale_tmp_removed > 0 {
        tracing::info!(
            "mail store: {} unfinished deliveries removed",
            recovery.stale_tmp_removed
        );
    }
    Ok(store)
}

fn reload_directory(directory: Option<&EmbeddedDirectory>) {
    match directory.map(EmbeddedDirectory::reload_if_changed) {
        Some(Ok(true)) => tracing::info!("user directory reloaded"),
        Some(Err(e)) => tracing::warn!("cannot reload the user directory: {e}"),
        Some(Ok(false)) | None => {}
    }
}
