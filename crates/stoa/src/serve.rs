//! `stoa serve`: load the configuration, bind the web, SMTP, POP3 and LMTP
//! servers, serve, react to signals.
//!
//! The order at start: the configuration; the umask; the user to become, looked
//! up; every service bound (listeners, certificates, document root, logs, mail
//! store, directory); then, when a user is named, the switch to it
//! (`crate::privilege`) and the check of the paths it must use; only then the
//! worker threads, and `READY=1` to systemd when it started us (`Type=notify`).
//! `STOPPING=1` follows SIGTERM.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use stoa_directory::{Directory, EmbeddedDirectory, LdapDirectory};
use stoa_netkit::server::{BoxError, Service};
use stoa_netkit::shutdown::Shutdown;
use stoa_netkit::signals::{Signal, Signals};
use stoa_netkit::throttle::Throttle;

use crate::cli::ServeArgs;
use crate::config;
use crate::privilege::{self, Need};

/// Configuration errors, already printed; the process exits with status 2.
#[derive(Debug)]
pub(crate) struct InvalidConfig(pub(crate) usize);

impl std::fmt::Display for InvalidConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            1 => write!(f, "invalid configuration (1 error)"),
            n => write!(f, "invalid configuration ({n} errors)"),
        }
    }
}

impl std::error::Error for InvalidConfig {}

/// Runs the servers until SIGTERM or SIGINT, reopening the access log on SIGHUP.
pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<()> {
    // An invalid configuration is refused with its warnings beside its errors.
    let loaded = crate::check_config::load(args).map_err(crate::check_config::refuse)?;
    for w in &loaded.warnings {
        tracing::warn!("{w}");
    }
    let process = loaded.process.clone();
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(process.umask));
    let target = privilege::resolve(&process)?;
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

    let (services, reopener, directory) = bind_services(loaded)?;
    if let Some(t) = &target {
        privilege::give(&created, t)?;
        privilege::switch(t)?;
        privilege::check_access(&needs, t)?;
        tracing::info!("running as user {} and group {}", t.name, t.group);
    }
    for service in &services {
        for endpoint in service.endpoints() {
            eprintln!("stoa: listening on {endpoint}");
        }
    }
    let (trigger, shutdown) = stoa_netkit::shutdown::channel();
    let threads = services
        .into_iter()
        .map(|service| spawn_service(service, shutdown.clone()))
        .collect::<anyhow::Result<Vec<_>>>()?;
    notify(sd_notify::NotifyState::Ready);

    runtime.block_on(serve_signals(
        &mut signals,
        reopener.as_ref(),
        directory.as_deref(),
    ));
    notify(sd_notify::NotifyState::Stopping);
    trigger.trigger();
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
    join_services(threads)
}

/// Tells systemd `state` when it started the server with `NOTIFY_SOCKET` set
/// (`Type=notify`); nothing otherwise. A failure is logged, never fatal. The
/// variable is left set, for the later `STOPPING=1`; CGI programs do not see it
/// (their environment is built from scratch).
fn notify(state: sd_notify::NotifyState<'_>) {
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    if let Err(e) = sd_notify::notify(false, &[state]) {
        tracing::warn!("cannot notify systemd: {e}");
    }
}

/// What the servers use after a switch of user ([`privilege::check_access`]),
/// and the paths that they may create at start ([`privilege::missing`]): the
/// mail directory, the web99 state directory, the access log.
fn used_paths(loaded: &config::Loaded) -> (Vec<Need>, Vec<std::path::PathBuf>) {
    let (mut needs, mut managed) = (Vec::new(), Vec::new());
    if let Some(web) = &loaded.web {
        needs.push(Need::read("the document root", &web.docroot));
        if let stoa_web::config::AccessLogTarget::File(log) = &web.access_log {
            needs.push(Need::write("the access log (reopened on SIGHUP)", log));
            managed.push(log.clone());
        }
        if let Some(w) = &web.web99 {
            needs.push(Need::write("the web99 state directory", &w.state_dir));
            managed.push(w.state_dir.clone());
        }
        for m in web.cgi.iter().flat_map(|c| &c.mounts) {
            needs.push(Need::read("the CGI directory", &m.dir));
        }
    }
    let mail_dir = (loaded.smtp.as_ref().map(|c| &c.mail_dir))
        .or(loaded.pop3.as_ref().map(|p| &p.mail_dir))
        .or(loaded.lmtp.as_ref().map(|l| &l.mail_dir))
        .or(loaded.pop3_proxy.as_ref().and_then(|p| p.mail_dir.as_ref()));
    if let Some(dir) = mail_dir {
        let mut mail = vec![Need::read("the mail directory", dir)];
        if loaded.directory == config::Directory::Embedded {
            mail.push(Need::read("the user directory", dir.join("directory")));
            mail.push(Need::read(
                "the user directory's file",
                dir.join("directory/entries.txt"),
            ));
        }
        if loaded.smtp.is_some() {
            mail.push(Need::write("the mail queue", dir.join("queue")));
        }
        for sub in ["store", "store/tmp", "store/mailboxes"] {
            mail.push(Need::write("the mail store", dir.join(sub)));
        }
        // Any of them may be new, in an old mail directory too.
        managed.extend(mail.iter().map(|n| n.path.clone()));
        needs.extend(mail);
    }
    (needs, managed)
}

/// Reacts to signals until SIGTERM or SIGINT: SIGHUP reopens the access log; every
/// [`DIRECTORY_RELOAD`] the user directory is reloaded if `stoa user` changed it.
async fn serve_signals(
    signals: &mut Signals,
    reopener: Option<&stoa_web::LogReopener>,
    directory: Option<&EmbeddedDirectory>,
) {
    let mut reload = tokio::time::interval(DIRECTORY_RELOAD);
    loop {
        tokio::select! {
            signal = signals.recv() => match signal {
                Signal::Hangup => {
                    if let Some(reopener) = reopener {
                        tracing::info!("SIGHUP: reopening the access log");
                        reopener.reopen();
                    }
                }
                Signal::Terminate => {
                    tracing::info!("shutting down: draining requests and mail in flight");
                    return;
                }
            },
            _ = reload.tick(), if directory.is_some() => reload_directory(directory),
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

/// The bound servers, in the order they announce themselves (web, SMTP, POP3,
/// LMTP), the
/// access log's reopener for SIGHUP, and the directory to watch for changes.
type Bound = (
    Vec<Box<dyn Service>>,
    Option<stoa_web::LogReopener>,
    Option<Arc<EmbeddedDirectory>>,
);

/// Binds every configured server, so that every start-up error surfaces before
/// any of them serves.
fn bind_services(loaded: config::Loaded) -> anyhow::Result<Bound> {
    let mut services: Vec<Box<dyn Service>> = Vec::new();
    if let Some(m) = &loaded.metrics {
        services.push(Box::new(crate::metrics::Server::bind(m.listen)?));
    }
    let mut reopener = None;
    if let Some(config) = loaded.web {
        let server = stoa_web::Server::bind(config).context("cannot start the web server")?;
        reopener = Some(server.log_reopener());
        services.push(Box::new(server));
    }
    let proxy_directory = loaded
        .pop3_proxy
        .is_some()
        .then(|| loaded.directory.clone());
    let mail = open_mail(
        loaded.smtp.as_ref(),
        loaded.pop3.as_ref(),
        loaded.lmtp.as_ref(),
        loaded.directory,
        &loaded.process,
    )?;
    if let (Some(config), Some(parts)) = (loaded.smtp, &mail) {
        services.push(Box::new(bind_smtp(config, parts)?));
    }
    if let (Some(pop3), Some(parts)) = (loaded.pop3, &mail) {
        let server = stoa_pop3::Server::bind_with_throttle(
            pop3.config,
            parts.directory.clone(),
            parts.store.clone(),
            Arc::clone(&parts.throttle),
        )
        .context("cannot start the POP3 server")?;
        services.push(Box::new(server));
    }
    if let (Some(lmtp), Some(parts)) = (loaded.lmtp, &mail) {
        let local = Arc::new(stoa_smtp::StoreDelivery::new(Arc::clone(&parts.store)));
        let server = stoa_smtp::lmtp::Server::bind(lmtp.config, parts.directory.clone(), local)
            .context("cannot start the LMTP server")?;
        services.push(Box::new(server));
    }
    if let (Some(proxy), Some(directory)) = (loaded.pop3_proxy, proxy_directory) {
        // Beside a store host the proxy shares its directory; alone it opens its
        // own (LDAP, or the embedded one under its mail directory).
        let directory = match &mail {
            Some(parts) => parts.directory.clone(),
            None => {
                let mail_dir = proxy.mail_dir.clone().unwrap_or_default();
                open_directory(&mail_dir, directory)?.0
            }
        };
        let server = stoa_pop3::Server::bind_proxy(proxy.config, proxy.proxy, directory)
            .context("cannot start the POP3 proxy")?;
        services.push(Box::new(server));
    }
    Ok((services, reopener, mail.and_then(|parts| parts.embedded)))
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

/// What the mail servers share: the user directory and the mail store of one mail
/// directory, each opened once.
struct MailParts {
    directory: Arc<dyn Directory>,
    /// The directory again when it is the embedded one, to reload its file.
    embedded: Option<Arc<EmbeddedDirectory>>,
    store: Arc<stoa_mailstore::MailStore>,
    /// Failed logins per client address, counted alike by SMTP AUTH and POP3 (the
    /// configuration gave both the same settings).
    throttle: Arc<Throttle>,
}

/// Opens the directory and the mail store of the mail directory, when SMTP, POP3
/// or LMTP is configured (the configuration checked that they use the same one).
fn open_mail(
    smtp: Option<&stoa_smtp::Config>,
    pop3: Option<&config::Pop3>,
    lmtp: Option<&config::Lmtp>,
    directory: config::Directory,
    process: &config::Process,
) -> anyhow::Result<Option<MailParts>> {
    let Some(mail_dir) = smtp
        .map(|c| c.mail_dir.as_path())
        .or(pop3.map(|p| p.mail_dir.as_path()))
        .or(lmtp.map(|l| l.mail_dir.as_path()))
    else {
        return Ok(None);
    };
    std::os::unix::fs::DirBuilderExt::mode(
        std::fs::DirBuilder::new().recursive(true),
        process.mail_dir_mode(),
    )
    .create(mail_dir)
    .with_context(|| format!("cannot create the mail directory {}", mail_dir.display()))?;
    let (directory, embedded) = open_directory(mail_dir, directory)?;
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
    let throttle = smtp
        .map(|c| c.auth_throttle.clone())
        .or_else(|| pop3.map(|p| p.config.auth_throttle.clone()))
        .unwrap_or_default();
    Ok(Some(MailParts {
        directory,
        embedded,
        store: Arc::new(store),
        throttle: Arc::new(Throttle::new(throttle)),
    }))
}

/// The directory the mail servers share.
type SharedDirectory = Arc<dyn Directory>;

/// The configured directory; the embedded one also as itself, for reloads.
fn open_directory(
    mail_dir: &Path,
    directory: config::Directory,
) -> anyhow::Result<(SharedDirectory, Option<Arc<EmbeddedDirectory>>)> {
    match directory {
        config::Directory::Embedded => {
            let dir = mail_dir.join("directory");
            let embedded = EmbeddedDirectory::open(&dir, stoa_directory::Options::default())
                .with_context(|| format!("cannot open the user directory {}", dir.display()))?;
            let embedded = Arc::new(embedded);
            Ok((embedded.clone(), Some(embedded)))
        }
        config::Directory::Ldap(options) => {
            let urls = options.urls.join(" ");
            let ldap = LdapDirectory::new(*options).context("cannot set up the LDAP directory")?;
            tracing::info!("user directory: LDAP at {urls}");
            Ok((Arc::new(ldap), None))
        }
    }
}

/// Binds the SMTP server over the shared directory and store.
fn bind_smtp(config: stoa_smtp::Config, parts: &MailParts) -> anyhow::Result<stoa_smtp::Server> {
    let local = Arc::new(stoa_smtp::StoreDelivery::new(Arc::clone(&parts.store)));
    let throttle = Arc::clone(&parts.throttle);
    let server =
        stoa_smtp::Server::bind_with_throttle(config, parts.directory.clone(), local, throttle)
            .context("cannot start the mail server")?;
    if server.recovered() > 0 {
        tracing::info!("{} queued messages recovered", server.recovered());
    }
    Ok(server)
}

fn reload_directory(directory: Option<&EmbeddedDirectory>) {
    match directory.map(EmbeddedDirectory::reload_if_changed) {
        Some(Ok(true)) => tracing::info!("user directory reloaded"),
        Some(Err(e)) => tracing::warn!("cannot reload the user directory: {e}"),
        Some(Ok(false)) | None => {}
    }
}
