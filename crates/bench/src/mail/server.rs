//! The built-in server under test: `stoa serve` with SMTP and POP3 over a fresh
//! mail directory in a temporary directory, its users generated for the run, and
//! mail to other domains relayed to the harness's sink.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, bail};
use stoa_directory::Scheme;
use stoa_directory::embedded::{EmbeddedDirectory, NewUser, Options};
use stoa_directory::scheme::{Cost, hash};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running `stoa serve`, stopped (SIGTERM) when dropped with its directory.
#[derive(Debug)]
pub(crate) struct BuiltIn {
    pub(crate) smtp: SocketAddr,
    pub(crate) pop3: SocketAddr,
    child: Child,
    /// The last lines of its error log.
    log: std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<String>>>,
    _dir: tempfile::TempDir,
}

/// The generated accounts of a built-in run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Users<'a> {
    /// Their domain.
    pub(crate) domain: &'a str,
    /// How many: `user1@DOMAIN` … `userN@DOMAIN`.
    pub(crate) count: u32,
    /// Every account's password.
    pub(crate) password: &'a str,
    /// The scheme of its one hash (`--password-scheme`).
    pub(crate) scheme: Scheme,
}

/// The embedded directory's options for `scheme`: plain text allowed only when
/// it is the scheme asked for.
fn directory_options(scheme: Scheme) -> Options {
    Options {
        scheme,
        allow_plain: scheme == Scheme::Plain,
        ..Options::default()
    }
}

/// Creates the accounts in the embedded directory under `mail_dir`, all with one
/// hash of the password in their scheme at Stoa's default costs (the server
/// verifies as it would for real users).
pub(crate) fn create_users(mail_dir: &Path, users: &Users<'_>) -> anyhow::Result<()> {
    let options = directory_options(users.scheme);
    let dir = EmbeddedDirectory::open(&mail_dir.join("directory"), options)
        .context("cannot open the built-in server's user directory")?;
    let domain = users.domain;
    dir.add_domain(domain)
        .with_context(|| format!("cannot add the domain {domain}"))?;
    let hash = hash(users.password, users.scheme, &Cost::default()).context("cannot hash")?;
    let new: Vec<NewUser> = (1..=users.count)
        .map(|n| NewUser {
            address: format!("user{n}@{domain}"),
            password_hash: Some(hash.clone()),
        })
        .collect();
    dir.add_users(&new).context("cannot add the users")?;
    Ok(())
}

impl BuiltIn {
    /// The server's process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Starts `stoa serve` with the `users` accounts, relaying other domains to
    /// `sink`.
    pub(crate) async fn start(
        exe: &Path,
        users: &Users<'_>,
        sink: SocketAddr,
    ) -> anyhow::Result<BuiltIn> {
        let dir = tempfile::Builder::new()
            .prefix("stoa-bench-mail-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let mail_dir = dir.path().join("mail");
        eprintln!(
            "stoa bench: built-in mail server in {} with {} ({} passwords)",
            dir.path().display(),
            crate::report::count(u64::from(users.count), "user"),
            users.scheme.dovecot_name()
        );
        {
            let (mail_dir, domain, password) = (
                mail_dir.clone(),
                users.domain.to_owned(),
                users.password.to_owned(),
            );
            let (count, scheme) = (users.count, users.scheme);
            tokio::task::spawn_blocking(move || {
                let users = Users {
                    domain: &domain,
                    count,
                    password: &password,
                    scheme,
                };
                create_users(&mail_dir, &users)
            })
            .await
            .context("user creation panicked")??;
        }
        let domain = users.domain;
        let scheme = users.scheme;
        let config = dir.path().join("stoa.toml");
        let mail = mail_dir.display().to_string();
        // Everything comes from 127.0.0.1: no per-client limit; the load's users
        // relay without AUTH from the trusted loopback, as in the kit.
        let text = format!(
            "[smtp]\nmail_dir = {mail:?}\nlisten = [\"127.0.0.1:0\"]\ndomains = [{domain:?}]\n\
             trusted_networks = [\"127.0.0.0/8\"]\nrelay_host = \"{sink}\"\n\
             max_connections_per_client = 0\n\n\
             [pop3]\nmail_dir = {mail:?}\nlisten = [\"127.0.0.1:0\"]\n\
             allow_plaintext_auth = true\nmax_connections_per_client = 0\n\n\
             [directory]\npassword_scheme = \"{}\"\nallow_plain_passwords = {}\n",
            scheme.name(),
            scheme == Scheme::Plain
        );
        std::fs::write(&config, text)
            .with_context(|| format!("cannot write {}", config.display()))?;
        let mut child = Command::new(exe)
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("cannot start stoa serve")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let (mut smtp, mut pop3) = (None, None);
        let mut log = Vec::new();
        while smtp.is_none() || pop3.is_none() {
            let Some(line) = lines.next_line().await? else {
                bail!("stoa serve exited before listening:\n{}", log.join("\n"));
            };
            if let Some(a) = line.strip_prefix("stoa: listening on smtp://") {
                smtp = Some(a.parse().context("bad SMTP address")?);
            } else if let Some(a) = line.strip_prefix("stoa: listening on pop3://") {
                pop3 = Some(a.parse().context("bad POP3 address")?);
            } else if log.len() < 50 {
                log.push(line);
            }
        }
        // Keep draining its log so it never blocks on a full pipe; keep the tail
        // for when it dies.
        let tail = std::sync::Arc::new(std::sync::Mutex::new(std::collections::VecDeque::new()));
        let keep = std::sync::Arc::clone(&tail);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                let mut t = keep
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if t.len() == 20 {
                    t.pop_front();
                }
                t.push_back(line);
            }
        });
        let (Some(smtp), Some(pop3)) = (smtp, pop3) else {
            bail!("stoa serve did not report its addresses");
        };
        eprintln!("stoa bench: built-in server: SMTP {smtp}, POP3 {pop3}, relaying to {sink}");
        Ok(BuiltIn {
            smtp,
            pop3,
            child,
            log: tail,
            _dir: dir,
        })
    }

    /// An error if the server has exited (killed by the OOM killer, say), with
    /// the end of its log: a run against a dead server measures nothing.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                let log = self
                    .log
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                bail!(
                    "the built-in server exited ({status}); the end of its log:\n{}",
                    log.iter().cloned().collect::<Vec<_>>().join("\n")
                )
            }
            Err(e) => bail!("cannot check the built-in server: {e}"),
        }
    }
}

impl Drop for BuiltIn {
    fn drop(&mut self) {
        crate::web::terminate(&self.child);
    }
}
