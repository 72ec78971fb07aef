//! Configuration: the TOML file, then the command-line flags over it, then one
//! validation of the result. Every problem is collected and reported together;
//! unknown keys are errors, with the key they most likely meant (a typo must not
//! leave a server silently unconfigured).
//!
//! Each server is one entry of [`SERVICES`], a `static` of data declared in its
//! own file (`service.rs` says what an entry is): the web server (`web/`), SMTP
//! (`smtp.rs`), POP3 (`pop3.rs`), the POP3 proxy (`pop3_proxy.rs`), LMTP
//! (`lmtp.rs`), IMAP (`imap.rs`), the IMAP proxy (`imap_proxy.rs`; `proxy.rs` holds
//! what the two proxies share) and the metrics endpoint (`metrics.rs`). This file only
//! orchestrates: it reads the file, decides which servers run (a table or a
//! flag of their own asks for one; the web server runs unless only mail was
//! asked for; `--mail-dir` alone asks for SMTP), finishes each in the list's
//! order, then the parts they share (`[directory]`, `[[mail_host]]`, the
//! top-level process keys, the failed-login throttle, the mail directory).
//!
//! The file is read into `toml::Table` and walked by hand instead of derived with
//! serde, because serde stops at the first error and cannot name every bad key.
//! `report.rs` holds the collector and the typed readers of tables and flags;
//! `units.rs` the values (durations, sizes, addresses, networks); `tls.rs` the
//! certificates; `mail.rs` what the mail servers read and check alike; `print.rs`
//! writes a loaded configuration back as TOML (`stoa check-config`).

use std::path::{Path, PathBuf};

use stoa_netkit::throttle::AuthThrottle;
use toml::Table;

use crate::cli::ServeArgs;

mod auth_throttle;
mod directory;
mod imap;
mod imap_proxy;
mod lmtp;
pub(crate) mod locate;
mod mail;
mod mail_host;
mod mail_limits;
mod metrics;
mod pop3;
mod pop3_proxy;
pub(crate) mod print;
mod process;
mod proxy;
mod report;
mod service;
mod smtp;
mod tls;
mod units;
mod web;

pub(crate) use directory::Directory;
#[cfg(test)]
pub(crate) use imap::Imap;
#[cfg(test)]
pub(crate) use imap_proxy::ImapProxy;
#[cfg(test)]
pub(crate) use metrics::Metrics;
#[cfg(test)]
pub(crate) use pop3::Pop3;
#[cfg(test)]
pub(crate) use pop3_proxy::Pop3Proxy;
pub(crate) use print::effective;
pub(crate) use process::Process;
use report::Report;
pub(crate) use service::{Configured, MailParts, Shared};
use service::{Finish, Implied, Read, Service, Settled};

/// Every server `stoa serve` can run, in the order they are read, finished,
/// printed, bound and announced. A new server is a file beside these that
/// declares its `service::Service` and implements `service.rs`'s two traits,
/// and a line here.
///
/// The order matters where one server's settings or binding depend on
/// another's: the metrics endpoint binds first (it touches nothing shared);
/// SMTP comes before the other mail servers, whose mail directory must be its
/// own; and SMTP binds after the web server, so that a web server that does not
/// bind stops a reload before SMTP's queue runner takes the new settings.
static SERVICES: [&Service; 8] = [
    &metrics::METRICS,
    &web::WEB,
    &smtp::SMTP,
    &pop3::POP3,
    &pop3_proxy::POP3_PROXY,
    &lmtp::LMTP,
    &imap::IMAP,
    &imap_proxy::IMAP_PROXY,
];

/// The top-level keys of the file that are no server's: the parts the servers
/// share, and the process's (`process.rs`).
const SHARED_KEYS: &[&str] = &["directory", "mail_host", "user", "group", "umask"];

/// The outcome of loading: a configuration and its warnings, or every error.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The servers that run, in the order of [`SERVICES`].
    pub(crate) services: Vec<Box<dyn Configured>>,
    /// The mail directory of the servers that use the mail store (they agree
    /// on it), when one runs.
    pub(crate) mail_dir: Option<PathBuf>,
    /// The failed-login throttle the mail servers share: its settings.
    pub(crate) auth_throttle: AuthThrottle,
    /// The store hosts (`[[mail_host]]`).
    pub(crate) mail_hosts: Vec<stoa_smtp::config::MailHost>,
    /// The user directory of the mail servers (`[directory]`).
    pub(crate) directory: Directory,
    /// The user to switch to and the umask (`user`, `group`, `umask`).
    pub(crate) process: Process,
    /// The file the LDAP service account's password was read from, named where
    /// the configuration is printed instead of the password.
    pub(crate) bind_password_file: Option<PathBuf>,
    pub(crate) warnings: Vec<String>,
}

#[cfg(test)]
impl Loaded {
    /// The settings of the server whose settings are a `T`, when it runs.
    pub(crate) fn get<T: Configured>(&self) -> Option<&T> {
        (self.services.iter()).find_map(|s| (&**s as &dyn std::any::Any).downcast_ref::<T>())
    }

    /// Whether the server whose settings are a `T` runs.
    pub(crate) fn runs<T: Configured>(&self) -> bool {
        self.get::<T>().is_some()
    }

    /// The settings of the server whose settings are a `T`, taken out.
    pub(crate) fn take<T: Configured>(&mut self) -> Option<T> {
        let at = (self.services.iter()).position(|s| (&**s as &dyn std::any::Any).is::<T>())?;
        let taken: Box<dyn std::any::Any> = self.services.remove(at);
        taken.downcast::<T>().ok().map(|t| *t)
    }
}

/// A configuration refused: every error, and the warnings met on the way (shown
/// beside the errors: an unknown key is often why a required one is missing).
#[derive(Debug, Default)]
pub(crate) struct Rejected {
    pub(crate) errors: Vec<String>,
    pub(crate) warnings: Vec<String>,
}

/// The file `stoa serve` and `stoa check-config` read when `--config` is not
/// given, if it exists.
pub(crate) const DEFAULT_CONFIG_FILE: &str = "/etc/stoa/stoa.toml";

/// Replaces [`DEFAULT_CONFIG_FILE`], for tests (which cannot create `/etc/stoa`).
pub(crate) const DEFAULT_CONFIG_ENV: &str = "STOA_DEFAULT_CONFIG";

/// `args` with `--config` set to the default file when it was not given and the
/// file exists (`STOA_DEFAULT_CONFIG` names another default, for tests).
pub(crate) fn with_default_file(args: &ServeArgs) -> ServeArgs {
    let mut args = args.clone();
    if args.config.is_none() {
        let default = std::env::var_os(DEFAULT_CONFIG_ENV)
            .map_or_else(|| PathBuf::from(DEFAULT_CONFIG_FILE), PathBuf::from);
        args.config = default.exists().then_some(default);
    }
    args
}

/// The embedded directory's options from the configuration file at `path`
/// (read with `read`), for the `stoa user` commands: only its `[directory]`
/// table is read, the rest is not theirs to judge. An LDAP `[directory]` gives
/// the defaults (its keys are not the embedded directory's). `Err` holds every
/// problem with that table; `Ok` the warnings beside the options.
pub(crate) fn embedded_options(
    path: &Path,
    read: impl Fn(&Path) -> std::io::Result<String>,
) -> Result<(stoa_directory::Options, Vec<String>), Vec<String>> {
    let text = read(path).map_err(|e| vec![format!("{}: {e}", path.display())])?;
    let table = parse(path, &text)?;
    let mut report = Report::default();
    let draft = directory::read_table(&table, path.parent(), &mut report);
    let options = match draft {
        Some(directory::Draft::Embedded(options)) => options,
        _ => stoa_directory::Options::default(),
    };
    let warnings = report
        .warnings
        .into_iter()
        .filter(|w| w.starts_with("directory."))
        .collect();
    if report.errors.is_empty() {
        Ok((options, warnings))
    } else {
        Err(report.errors)
    }
}

/// The configuration file the `stoa user` commands read for the directory's
/// settings: `--config`, else the default file when it exists.
pub(crate) fn default_file_if_any(given: Option<&Path>) -> Option<PathBuf> {
    let args = ServeArgs {
        config: given.map(Path::to_owned),
        ..ServeArgs::default()
    };
    with_default_file(&args).config
}

/// Where the dynamic API keeps its state unless told: the system's state
/// directory for root, the user's (XDG) state directory otherwise.
pub(crate) fn default_web99_state() -> PathBuf {
    if rustix::process::geteuid().is_root() {
        return "/var/lib/stoa/web99".into();
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .unwrap_or_else(|| std::env::temp_dir().join("stoa-state"));
    base.join("stoa/web99")
}

/// [`load_all`] without the warnings of a refused configuration.
pub(crate) fn load(
    args: &ServeArgs,
    read: impl Fn(&Path) -> std::io::Result<String>,
    default_web99_state: &Path,
) -> Result<Loaded, Vec<String>> {
    load_all(args, read, default_web99_state).map_err(|rejected| rejected.errors)
}

/// Builds the servers' configuration from the file named by `--config` (read
/// with `read`, so tests need no files) and the flags.
pub(crate) fn load_all(
    args: &ServeArgs,
    read: impl Fn(&Path) -> std::io::Result<String>,
    default_web99_state: &Path,
) -> Result<Loaded, Rejected> {
    let mut report = Report::default();
    let file = match &args.config {
        Some(path) => read_config(path, read(path), default_web99_state, &mut report),
        None => FileParts::default(),
    };
    if file.unreadable {
        return Err(Rejected {
            errors: report.errors,
            warnings: Vec::new(),
        });
    }
    let mut drafts = file.drafts;
    drafts.resize_with(SERVICES.len(), || None);
    let runs = which_run(args, &drafts);
    let mail = (SERVICES.iter().zip(&runs)).any(|(s, runs)| *runs && s.mail);
    let mut cx = Finish::new(args, mail, &file.mail_hosts, default_web99_state);
    let defaults = Read {
        base: None,
        default_web99_state,
    };
    let mut services = Vec::new();
    for ((service, draft), runs) in SERVICES.iter().zip(drafts).zip(runs) {
        let draft = draft.unwrap_or_else(|| (service.draft)(&defaults));
        if runs {
            services.extend(draft.finish(&mut cx, &mut report));
        } else {
            draft.unused(&mut cx, &mut report);
        }
    }
    let bind_password_file =
        (file.directory.as_ref()).and_then(|d| d.password_file().map(Path::to_owned));
    let directory = directory::finish(file.directory, &read, &mut report);
    let process = process::finish(file.process, args, &mut report);
    let (auth_throttle, mail_dir) = cx.settle(&mut report);
    let settled = Settled {
        mail_dir: mail_dir.as_deref(),
        auth_throttle: &auth_throttle,
        directory: &directory,
    };
    for service in &mut services {
        service.settle(&settled, &mut report);
    }
    if report.errors.is_empty() {
        Ok(Loaded {
            services,
            mail_dir,
            auth_throttle,
            mail_hosts: file.mail_hosts,
            directory,
            process,
            bind_password_file,
            warnings: report.warnings,
        })
    } else {
        Err(Rejected {
            errors: report.errors,
            warnings: report.warnings,
        })
    }
}

/// Which of [`SERVICES`] run, given their tables' drafts: those a table or a
/// flag of their own asks for, and the implied ones ([`Implied`]).
fn which_run(args: &ServeArgs, drafts: &[Option<Box<dyn service::Draft>>]) -> Vec<bool> {
    let asked: Vec<bool> = (SERVICES.iter().zip(drafts))
        .map(|(s, d)| d.is_some() || (s.flags_given)(args))
        .collect();
    let mail_asked = (SERVICES.iter().zip(&asked)).any(|(s, asked)| *asked && s.mail);
    let asked: Vec<bool> = (SERVICES.iter().zip(asked))
        .map(|(s, asked)| {
            asked || (s.implied == Implied::ByMailDir && !mail_asked && args.mail_dir.is_some())
        })
        .collect();
    let mail = (SERVICES.iter().zip(&asked)).any(|(s, asked)| *asked && s.mail);
    (SERVICES.iter().zip(asked))
        .map(|(s, asked)| asked || (s.implied == Implied::WithoutMail && !mail))
        .collect()
}

/// What the file holds: each server's part, and the parts they share.
#[derive(Debug, Default)]
struct FileParts {
    /// Each server's part, in the order of [`SERVICES`]: `None` for one the
    /// file does not configure.
    drafts: Vec<Option<Box<dyn service::Draft>>>,
    /// The `[directory]` table, when it names a backend other than the embedded one.
    directory: Option<directory::Draft>,
    /// The `[[mail_host]]` entries, for the SMTP server's routing and the proxy.
    mail_hosts: Vec<stoa_smtp::config::MailHost>,
    /// The top-level `user`, `group` and `umask`.
    process: Option<process::Process>,
    /// The file could not be read or is not TOML: its error is the only one
    /// worth printing (every other would only follow from it).
    unreadable: bool,
}

/// The file at `path`, whose text is `text`, as a table; or every syntax error
/// in it, each with its line and column.
fn parse(path: &Path, text: &str) -> Result<Table, Vec<String>> {
    text.parse::<Table>().map_err(|e| {
        // Parsed again only when it is not TOML, for every error, not the first.
        let errors = locate::syntax_errors(path, text);
        if errors.is_empty() {
            vec![format!("{}: {}", path.display(), e.to_string().trim_end())]
        } else {
            errors
        }
    })
}

/// Reads the configuration file at `path` (its `text`, or why it could not be
/// read): each server's part, and the shared tables.
fn read_config(
    path: &Path,
    text: std::io::Result<String>,
    default_web99_state: &Path,
    r: &mut Report,
) -> FileParts {
    let mut file = FileParts::default();
    let table = match text.map(|text| parse(path, &text)) {
        Ok(Ok(table)) => table,
        Ok(Err(errors)) => {
            file.unreadable = true;
            r.errors.extend(errors);
            return file;
        }
        Err(e) => {
            file.unreadable = true;
            r.errors.push(format!("{}: {e}", path.display()));
            return file;
        }
    };
    let known: Vec<&str> = (SERVICES.iter())
        .flat_map(|s| s.keys.iter().copied())
        .chain(SHARED_KEYS.iter().copied())
        .collect();
    r.known_keys(&table, "", &known);
    let cx = Read {
        base: path.parent(),
        default_web99_state,
    };
    file.drafts = SERVICES.iter().map(|s| (s.read)(&table, &cx, r)).collect();
    file.directory = directory::read_table(&table, path.parent(), r);
    file.mail_hosts = mail_host::read(&table, r);
    file.process = Some(process::read_table(&table, r));
    file
}

#[cfg(test)]
mod tests;
