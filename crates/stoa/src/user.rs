//! `stoa user add|del|list|passwd` and `stoa user domain add|del|list`: the mail
//! users and local domains of the embedded directory in `MAIL_DIR/directory`;
//! `stoa user export-ldif`: that directory as LDIF for an LDAP server;
//! `stoa mailbox stat|export|import`: a user's mailbox in the mail store
//! (`MAIL_DIR/store`); export and import move it out and in as a Maildir++ tree
//! (Dovecot's layout, `stoa_mailstore::maildirpp`).
//!
//! The mail directory is `--mail-dir`, else the one `stoa serve` would use: that
//! of the mail servers of the configuration (`--config`, else
//! /etc/stoa/stoa.toml when it exists), read and checked as `stoa serve` reads
//! it. A `--config` that does not exist is an error; so is a configuration whose
//! users are in LDAP (they are managed there).
//!
//! Every change is saved atomically by the directory (and picked up by a running
//! `stoa serve` within seconds). `add` makes the address's domain local if it is
//! not yet, and says so. Passwords are never taken from the command line, where
//! `ps` would show them: on a terminal they are asked for twice without echo
//! ([`ask_password`]); `--password-stdin` reads the first line of standard
//! input. `add` and `passwd` hash them with `--scheme`, else the `[directory]`
//! password_scheme of the configuration, at its costs; plain text only with its
//! allow_plain_passwords = true.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use stoa_directory::{Directory, EmbeddedDirectory, Options};

use crate::cli::{
    AliasCommand, DomainCommand, ExportLdifArgs, MailDirArgs, MailboxCommand, MailboxImportArgs,
    ServeArgs, UserArgs, UserCommand, UserDelArgs, UserPasswordArgs,
};

/// Runs one `stoa user` command.
pub(crate) fn run(command: &UserCommand) -> anyhow::Result<()> {
    match command {
        UserCommand::Init(args) => {
            let mail_dir = mail_dir(args)?;
            let existed = mail_dir.join("directory").is_dir();
            create(&mail_dir)?;
            let what = if existed { "already has" } else { "now has" };
            eprintln!("stoa: {} {what} a user directory", mail_dir.display());
            Ok(())
        }
        UserCommand::Add(args) => add(args),
        UserCommand::Del(args) => del(args),
        UserCommand::List(args) => {
            let mut users = open(&mail_dir(args)?)?.users();
            users.sort_by(|a, b| a.address.cmp(&b.address));
            print_lines(users.iter().map(|u| u.address.as_str()))
        }
        UserCommand::Passwd(args) => {
            let options = hashing_options(args)?;
            let scheme = options.scheme;
            let directory = open_with(&mail_dir(&args.user.dir)?, options)?;
            let address = &args.user.address;
            if args.no_password {
                directory.set_password(address, None)?;
                eprintln!("stoa: password of {address} removed: it can no longer log in");
                return Ok(());
            }
            let Some(password) = password(args)? else {
                bail!(
                    "no password: give it on standard input with --password-stdin, or run \
                     on a terminal to be asked for it"
                );
            };
            directory.set_password(address, Some(&password))?;
            eprintln!("stoa: password of {address} changed ({scheme})");
            Ok(())
        }
        UserCommand::Domain(command) => domain(command),
        UserCommand::Alias(command) => alias(command),
        UserCommand::ExportLdif(args) => export_ldif(args),
    }
}

/// `stoa user export-ldif`: the LDIF on standard output, a summary on standard
/// error (with the aliases LDAP cannot hold).
fn export_ldif(args: &ExportLdifArgs) -> anyhow::Result<()> {
    let host = args
        .mail_host
        .as_deref()
        .map(stoa_directory::address::normalize_domain)
        .transpose()?;
    if !args.base.contains('=') || args.base.contains(['\n', '\r']) {
        bail!(
            "--base {:?} is not a DN like ou=people,dc=example,dc=com",
            args.base
        );
    }
    let directory = open(&mail_dir(&args.dir)?)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let summary = directory.write_ldif(&args.base, host.as_deref(), &mut out)?;
    out.flush()?;
    eprintln!(
        "stoa: exported {} users and {} aliases",
        summary.users, summary.aliases
    );
    for alias in &summary.skipped_aliases {
        eprintln!("stoa: alias {alias} left out: not the address of a single local user");
    }
    Ok(())
}

/// `stoa user del`: removes the user, then says what became of its mail, or
/// deletes it with `--purge`.
fn del(args: &UserDelArgs) -> anyhow::Result<()> {
    let dir = &mail_dir(&args.user.dir)?;
    let user = open(dir)?.remove_user(&args.user.address)?;
    eprintln!("stoa: removed {} (mailbox {})", user.address, user.mailbox);
    let store_dir = dir.join("store");
    if !store_dir.is_dir() {
        return Ok(());
    }
    let store = stoa_mailstore::MailStore::open(&store_dir, stoa_mailstore::Options::default())
        .with_context(|| format!("cannot open the mail store {}", store_dir.display()))?;
    let stats = store.mailbox_stats(user.mailbox)?;
    if stats.count == 0 {
        return Ok(());
    }
    if !args.purge {
        eprintln!(
            "stoa: its {} ({} bytes) stay in the store as mailbox {}, reachable by no user; \
             `stoa user del --purge` deletes a user's mail with the user",
            messages(stats.count),
            stats.size,
            user.mailbox
        );
        return Ok(());
    }
    let mailbox = store
        .open_mailbox(user.mailbox)
        .with_context(|| format!("cannot open mailbox {} to purge it", user.mailbox))?;
    let all: Vec<usize> = (0..mailbox.messages().len()).collect();
    let deleted = mailbox
        .commit_deletes(&all)
        .with_context(|| format!("cannot purge mailbox {}", user.mailbox))?;
    eprintln!("stoa: purged {} ({} bytes)", messages(deleted), stats.size);
    Ok(())
}

/// "1 message", "2 messages".
fn messages(n: usize) -> String {
    if n == 1 {
        "1 message".to_owned()
    } else {
        format!("{n} messages")
    }
}

/// The directory options `add` and `passwd` hash with: the configuration's
/// `[directory]` password settings, `--scheme` over them. Plain text is refused
/// here, before any password is read, unless the configuration allows it.
fn hashing_options(args: &UserPasswordArgs) -> anyhow::Result<Options> {
    let mut options = match crate::config::default_file_if_any(args.user.dir.config.as_deref()) {
        None => Options::default(),
        Some(file) => {
            let (options, warnings) =
                crate::config::embedded_options(&file, |p| std::fs::read_to_string(p)).map_err(
                    |errors| {
                        anyhow::anyhow!(
                            "the configuration {} is not usable:\n  {}",
                            file.display(),
                            errors.join("\n  ")
                        )
                    },
                )?;
            for warning in warnings {
                eprintln!("stoa: warning: {warning}");
            }
            options
        }
    };
    if let Some(scheme) = args.scheme {
        options.scheme = scheme;
    }
    if options.scheme == stoa_directory::Scheme::Plain && !options.allow_plain {
        bail!(
            "--scheme plain stores the password as it is: refused unless the configuration's \
             [directory] has allow_plain_passwords = true (for benchmarks only)"
        );
    }
    Ok(options)
}

fn add(args: &UserPasswordArgs) -> anyhow::Result<()> {
    let asks = args.password_stdin || std::io::stdin().is_terminal();
    if args.scheme.is_some() && !asks {
        bail!("--scheme without --password-stdin: there is no password to hash");
    }
    let options = hashing_options(args)?;
    let scheme = options.scheme;
    let mail_dir = mail_dir(&args.user.dir)?;
    let password = match args.no_password {
        true => None,
        false => password(args)?,
    };
    let directory = create_with(&mail_dir, options)?;
    let address = stoa_directory::address::normalize_address(&args.user.address)?;
    let domain = stoa_directory::address::domain_of(&address).to_owned();
    if !directory.is_local_domain(&domain)? {
        directory.add_domain(&domain)?;
        eprintln!("stoa: added local domain {domain}");
    }
    let user = directory.add_user(&address, password.as_deref())?;
    match password {
        Some(_) => eprintln!(
            "stoa: added {} (mailbox {}, password {scheme})",
            user.address, user.mailbox
        ),
        None => eprintln!("stoa: added {} (mailbox {})", user.address, user.mailbox),
    }
    if password.is_none() {
        eprintln!(
            "stoa: {} has no password: it receives mail but cannot log in",
            user.address
        );
    }
    Ok(())
}

fn alias(command: &AliasCommand) -> anyhow::Result<()> {
    match command {
        AliasCommand::Add(args) => {
            let targets: Vec<&str> = args.targets.iter().map(String::as_str).collect();
            open(&mail_dir(&args.dir)?)?.add_alias(&args.alias, &targets)?;
            eprintln!("stoa: added alias {} -> {}", args.alias, targets.join(", "));
            Ok(())
        }
        AliasCommand::Del(args) => {
            open(&mail_dir(&args.dir)?)?.remove_alias(&args.address)?;
            eprintln!("stoa: removed alias {}", args.address);
            Ok(())
        }
        AliasCommand::List(args) => {
            let aliases = open(&mail_dir(args)?)?.aliases();
            let lines: Vec<String> = aliases
                .iter()
                .map(|(alias, targets)| format!("{alias} {}", targets.join(" ")))
                .collect();
            print_lines(lines.iter().map(String::as_str))
        }
    }
}

fn domain(command: &DomainCommand) -> anyhow::Result<()> {
    match command {
        DomainCommand::Add(args) => {
            create(&mail_dir(&args.dir)?)?.add_domain(&args.domain)?;
            eprintln!("stoa: added local domain {}", args.domain);
            Ok(())
        }
        DomainCommand::Del(args) => {
            open(&mail_dir(&args.dir)?)?.remove_domain(&args.domain)?;
            eprintln!("stoa: removed local domain {}", args.domain);
            Ok(())
        }
        DomainCommand::List(args) => {
            let mut domains = open(&mail_dir(args)?)?.domains();
            domains.sort();
            print_lines(domains.iter().map(String::as_str))
        }
    }
}

/// Runs one `stoa mailbox` command.
#[allow(clippy::print_stdout, reason = "the figures are the command's output")]
pub(crate) fn mailbox(command: &MailboxCommand) -> anyhow::Result<()> {
    match command {
        MailboxCommand::Stat(args) => {
            let (store, user) = store_and_user(args)?;
            let stats = store.mailbox_stats(user.mailbox)?;
            println!("{} messages, {} bytes", stats.count, stats.size);
            Ok(())
        }
        MailboxCommand::Export(args) => {
            let (store, user) = store_and_user(&args.user)?;
            let report = store
                .export_maildir(user.mailbox, &args.to)
                .with_context(|| format!("cannot export to {}", args.to.display()))?;
            eprintln!(
                "stoa: exported {} ({} bytes) in {} folders of {} to {}; {} already there",
                messages(report.messages),
                report.bytes,
                report.folders,
                user.address,
                args.to.display(),
                report.skipped
            );
            if report.keywords_dropped > 0 {
                eprintln!(
                    "stoa: warning: {} keywords left out (a Maildir folder names at most 26)",
                    report.keywords_dropped
                );
            }
            Ok(())
        }
        MailboxCommand::Import(args) => import(args),
    }
}

/// `stoa mailbox import`: the store is created if the user has no mail yet.
fn import(args: &MailboxImportArgs) -> anyhow::Result<()> {
    let mail_dir = mail_dir(&args.user.dir)?;
    let directory = open(&mail_dir)?;
    let user = directory
        .lookup(&args.user.address)?
        .with_context(|| format!("no user {}", args.user.address))?;
    let dir = mail_dir.join("store");
    let store = stoa_mailstore::MailStore::open(&dir, stoa_mailstore::Options::default())
        .with_context(|| format!("cannot open the mail store {}", dir.display()))?;
    let report = store
        .import_maildir(user.mailbox, &args.from)
        .with_context(|| format!("cannot import {}", args.from.display()))?;
    for name in &report.ignored {
        eprintln!("stoa: note: {name} is not a Maildir (no cur/ or new/): left out");
    }
    eprintln!(
        "stoa: imported {} ({} bytes) from {} into {}; {} folders created, {} already there, \
         {} subscriptions added",
        messages(report.messages),
        report.bytes,
        args.from.display(),
        user.address,
        report.folders_created,
        report.skipped,
        report.subscribed
    );
    Ok(())
}

/// The mail store of a mail directory and the user `args` names.
fn store_and_user(
    args: &UserArgs,
) -> anyhow::Result<(stoa_mailstore::MailStore, stoa_directory::User)> {
    let mail_dir = mail_dir(&args.dir)?;
    let directory = open(&mail_dir)?;
    let user = directory
        .lookup(&args.address)?
        .with_context(|| format!("no user {}", args.address))?;
    let dir = mail_dir.join("store");
    if !dir.is_dir() {
        bail!("no mail store in {} yet", mail_dir.display());
    }
    let store = stoa_mailstore::MailStore::open(&dir, stoa_mailstore::Options::default())
        .with_context(|| format!("cannot open the mail store {}", dir.display()))?;
    Ok((store, user))
}

/// The mail directory `args` name, whose users this command manages (so not
/// one whose users are in LDAP).
fn mail_dir(args: &MailDirArgs) -> anyhow::Result<PathBuf> {
    let (dir, read) = configured_mail_dir(args)?;
    if let Some((file, crate::config::Directory::Ldap(_))) = read {
        bail!(
            "the users of {} are in LDAP ([directory] backend = \"ldap\"): manage them there \
             (or give --mail-dir for an embedded directory)",
            file.display()
        );
    }
    Ok(dir)
}

/// The mail directory `args` name: `--mail-dir`, else that of the mail servers
/// of the configuration, loaded as `stoa serve` loads it (its errors printed),
/// with the configuration file and its directory settings when it was read.
pub(crate) fn configured_mail_dir(
    args: &MailDirArgs,
) -> anyhow::Result<(PathBuf, Option<(PathBuf, crate::config::Directory)>)> {
    if let Some(file) = &args.config
        && !file.exists()
    {
        bail!("--config {}: no such file", file.display());
    }
    if let Some(dir) = &args.mail_dir {
        return Ok((dir.clone(), None));
    }
    let serve = crate::config::with_default_file(&ServeArgs {
        config: args.config.clone(),
        ..ServeArgs::default()
    });
    let Some(file) = serve.config.clone() else {
        bail!(
            "no mail directory: give --mail-dir DIR, or a configuration that names one \
             (--config FILE; {} is read when it exists)",
            crate::config::DEFAULT_CONFIG_FILE
        );
    };
    let loaded = crate::check_config::load(&serve).map_err(|rejected| {
        crate::check_config::refuse(rejected).context(format!(
            "cannot read the mail directory from {}",
            file.display()
        ))
    })?;
    let dir = loaded.mail_dir.with_context(|| {
        format!(
            "{} runs no mail server, so it names no mail directory: give --mail-dir DIR",
            file.display()
        )
    })?;
    Ok((dir, Some((file, loaded.directory))))
}

/// The embedded directory of `mail_dir`, created if needed (`stoa user init`,
/// `add`, `domain add`).
fn create(mail_dir: &Path) -> anyhow::Result<EmbeddedDirectory> {
    create_with(mail_dir, Options::default())
}

/// [`create`] with `options` (the scheme and costs of new hashes).
fn create_with(mail_dir: &Path, options: Options) -> anyhow::Result<EmbeddedDirectory> {
    let dir = mail_dir.join("directory");
    EmbeddedDirectory::open(&dir, options)
        .with_context(|| format!("cannot open the user directory {}", dir.display()))
}

/// The embedded directory of `mail_dir`, which must exist: a command that only
/// reads or removes must not turn a mistyped `--mail-dir` into a new, empty
/// mail directory (issue 21).
fn open(mail_dir: &Path) -> anyhow::Result<EmbeddedDirectory> {
    open_with(mail_dir, Options::default())
}

/// [`open`] with `options`.
fn open_with(mail_dir: &Path, options: Options) -> anyhow::Result<EmbeddedDirectory> {
    let dir = mail_dir.join("directory");
    if !dir.is_dir() {
        bail!(
            "no user directory in {}: is --mail-dir right? (`stoa user init --mail-dir {}` \
             or the first `stoa user add` creates one)",
            mail_dir.display(),
            mail_dir.display()
        );
    }
    create_with(mail_dir, options)
}

/// The password of `add` or `passwd`: the first line of standard input with
/// `--password-stdin`; else, on a terminal, asked for twice; else none.
fn password(args: &UserPasswordArgs) -> anyhow::Result<Option<String>> {
    if args.password_stdin {
        return read_password().map(Some);
    }
    if !std::io::stdin().is_terminal() {
        return Ok(None);
    }
    let first = ask_password("Password: ")?;
    let again = ask_password("Password again: ")?;
    if first != again {
        bail!("the two passwords differ: nothing changed");
    }
    Ok(Some(first))
}

/// Asks for a password on the terminal that standard input is, its echo off
/// while it is typed (and restored after, whatever happens).
fn ask_password(prompt: &str) -> anyhow::Result<String> {
    use rustix::termios::{LocalModes, OptionalActions, tcgetattr, tcsetattr};
    let stdin = std::io::stdin();
    let saved = tcgetattr(&stdin).context("cannot read the terminal's settings")?;
    let mut quiet = saved.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    quiet.local_modes.insert(LocalModes::ECHONL);
    // Echo off before the prompt shows, and what was typed ahead kept: an
    // answer typed as soon as the prompt appears is read, never echoed.
    tcsetattr(&stdin, OptionalActions::Now, &quiet).context("cannot turn the echo off")?;
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    let restored = tcsetattr(&stdin, OptionalActions::Now, &saved);
    read.context("cannot read the password from the terminal")?;
    restored.context("cannot turn the echo back on")?;
    let password = line.trim_end_matches(['\n', '\r']);
    if password.is_empty() {
        bail!("empty password: nothing changed");
    }
    Ok(password.to_owned())
}

/// The first line of standard input, without its line end.
fn read_password() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .context("cannot read the password from standard input")?;
    let password = line.strip_suffix('\n').unwrap_or(&line);
    let password = password.strip_suffix('\r').unwrap_or(password);
    if password.is_empty() {
        bail!("empty password on standard input");
    }
    Ok(password.to_owned())
}

fn print_lines<'a>(lines: impl Iterator<Item = &'a str>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    for line in lines {
        writeln!(out, "{line}")?;
    }
    out.flush()?;
    Ok(())
}
