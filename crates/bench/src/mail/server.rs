//! The built-in server under test: `stoa serve` with SMTP and POP3 over a fresh
//! mail directory in a temporary directory, its users generated for the run, and
//! mail to other domains relayed to the harness's sink.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, bail};
use stoa_directory::embedded::{EmbeddedDirectory, NewUser, Options};
use stoa_directory::password::{PasswordCost, hash_password};
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

/// Creates `users` accounts `user1@DOMAIN` … in the embedded directory under
/// `mail_dir`, all with one argon2id hash of `password` (Stoa's default cost:
/// the server verifies as it would for real users).
pub(crate) fn create_users(
    mail_dir: &Path,
    domain: &str,
    users: u32,
    password: &str,
) -> anyhow::Result<()> {
    let dir = EmbeddedDirectory::open(&mail_dir.join("directory"), Options::default())
        .context("cannot open the built-in server's user directory")?;
    dir.add_domain(domain)
        .with_context(|| format!("cannot add the domain {domain}"))?;
    let hash = hash_password(password, &PasswordCost::default()).context("cannot hash")?;
    let new: Vec<NewUser> = (1..=users)
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

    /// Starts `stoa serve` with `users` accounts in `domain`, relaying other
    /// domains to `sink`.
    pub(crate) async fn start(
        exe: &Path,
        domain: &str,
        users: u32,
        password: &str,
        sink: SocketAddr,
    ) -> anyhow::Result<BuiltIn> {
        let dir = tempfile::Builder::new()
            .prefix("stoa-bench-mail-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let mail_dir = dir.path().join("mail");
        eprintln!(
            "stoa bench: built-in mail server in {} with {}",
            dir.path().display(),
            crate::report::count(u64::from(users), "user")
        );
        {
            let (mail_dir, domain, password) =
                (mail_dir.clone(), domain.to_owned(), password.to_owned());
            tokio::task::spawn_blocking(move || create_users(&mail_dir, &domain, users, &password))
                .await
                .context("user creation panicked")??;
        }
        let config = dir.path().join("stoa.toml");
        let mail = mail_dir.display().to_string();
        // Everything comes from 127.0.0.1: no per-client limit; the load's users
        // relay without AUTH from the trusted loopback, as in the kit.
        let text = format!(
            "[smtp]\nmail_dir = {mail:?}\nlisten = [\"127.0.0.1:0\"]\ndomains = [{domain:?}]\n\
             trusted_networks = [\"127.0.0.0/8\"]\nrelay_host = \"{sink}\"\n\
             max_connections_per_client = 0\n\n\
             [pop3]\nmail_dir = {mail:?}\nlisten = [\"127.0.0.1:0\"]\n\
             allow_plaintext_auth = true\nmax_connections_per_client = 0\n"
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
