//! The built-in server under test: `stoa serve` with SMTP and POP3 (or IMAP, for
//! `--access imap`) over a fresh
//! mail directory in a temporary directory, its users generated for the run, and
//! mail to other domains relayed to the harness's sink.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use anyhow::{Context, bail};
use stoa_directory::Scheme;
use stoa_directory::embedded::{EmbeddedDirectory, NewUser, Options};
use stoa_directory::scheme::{Cost, hash};
use stoa_mailgen::access::Access;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// A running `stoa serve`, stopped (SIGTERM) when dropped with its directory.
#[derive(Debug)]
pub(crate) struct BuiltIn {
    pub(crate) smtp: SocketAddr,
    /// Where the mailboxes are read: the POP3 listener, or the IMAP one.
    pub(crate) read_addr: SocketAddr,
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

/// The keys of the built-in configuration the run depends on, which
/// `--server-set` may not change.
const HARNESS_KEYS: &[&str] = &[
    "smtp.mail_dir",
    "smtp.listen",
    "smtp.domains",
    "smtp.trusted_networks",
    "smtp.relay_host",
    "pop3.mail_dir",
    "pop3.listen",
    "imap.mail_dir",
    "imap.listen",
    // The report names the scheme --password-scheme gave.
    "directory.password_scheme",
    "directory.allow_plain_passwords",
];

/// `text` (a TOML configuration) with each `TABLE.KEY=VALUE` of `settings` set:
/// the value as TOML (`100`, `true`, `"0s"`, `["a", "b"]`), or, when it is not
/// TOML, as a string (`directory.cache_ttl=0s`). The server checks the keys.
pub(crate) fn with_settings(text: &str, settings: &[String]) -> anyhow::Result<String> {
    if settings.is_empty() {
        return Ok(text.to_owned());
    }
    let mut doc: toml::Table = text
        .parse()
        .context("the built-in server's configuration is not TOML")?;
    for set in settings {
        let (path, value) = set
            .split_once('=')
            .with_context(|| format!("--server-set {set}: expected TABLE.KEY=VALUE"))?;
        let names: Vec<&str> = path.split('.').map(str::trim).collect();
        if names.len() < 2 || names.iter().any(|n| n.is_empty()) {
            bail!("--server-set {set}: the key is TABLE.KEY (smtp.max_deliveries)");
        }
        let path = names.join(".");
        if HARNESS_KEYS.contains(&path.as_str()) {
            bail!("--server-set {set}: the harness sets {path} itself");
        }
        let value = match format!("v = {value}").parse::<toml::Table>() {
            Ok(mut t) => t.remove("v").context("a parsed value")?,
            Err(_) => toml::Value::String(value.trim().to_owned()),
        };
        let (key, tables) = names.split_last().context("a key")?;
        let mut table = &mut doc;
        for name in tables {
            let entry = table
                .entry((*name).to_owned())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            table = entry
                .as_table_mut()
                .with_context(|| format!("--server-set {set}: {name} is not a table"))?;
        }
        table.insert((*key).to_owned(), value);
    }
    toml::to_string(&doc).context("cannot write the built-in server's configuration")
}

impl BuiltIn {
    /// The server's process id, while it runs.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Starts `stoa serve` with the `users` accounts, relaying other domains to
    /// `sink`, its configuration changed by `settings` (`--server-set`), on
    /// `cpus` when given (`--server-cpus`).
    pub(crate) async fn start(
        exe: &Path,
        users: &Users<'_>,
        sink: SocketAddr,
        settings: &[String],
        cpus: Option<&crate::cpus::CpuList>,
        access: Access,
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
        // relay without AUTH from the trusted loopback, as in the kit. IMAP,
        // for --access imap, over the same mail directory (INBOX is the POP3
        // mailbox).
        let imap = if access == Access::Imap {
            format!(
                "[imap]\nmail_dir = {mail:?}\nlisten = [\"127.0.0.1:0\"]\n\
                 allow_plaintext_auth = true\nmax_connections_per_client = 0\n\n"
            )
        } else {
            String::new()
        };
        let text = format!(
            "[smtp]\nmail_dir = {mail:?}\nlisten = [\"127.0.0.1:0\"]\ndomains = [{domain:?}]\n\
             trusted_networks = [\"127.0.0.0/8\"]\nrelay_host = \"{sink}\"\n\
             max_connections_per_client = 0\n\n\
             [pop3]\nmail_dir = {mail:?}\nlisten = [\"127.0.0.1:0\"]\n\
             allow_plaintext_auth = true\nmax_connections_per_client = 0\n\n\
             {imap}\
             [directory]\npassword_scheme = \"{}\"\nallow_plain_passwords = {}\n",
            scheme.name(),
            scheme == Scheme::Plain
        );
        let text = with_settings(&text, settings)?;
        std::fs::write(&config, text)
            .with_context(|| format!("cannot write {}", config.display()))?;
        let mut command = Command::new(exe);
        command
            .arg("serve")
            .arg("--config")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = crate::cpus::start_pinned(cpus, || command.spawn())?
            .context("cannot start stoa serve")?;
        let stderr = child.stderr.take().context("no stderr")?;
        let mut lines = BufReader::new(stderr).lines();
        let (mut smtp, mut pop3, mut imap) = (None, None, None);
        let mut log = Vec::new();
        while smtp.is_none() || pop3.is_none() || (access == Access::Imap && imap.is_none()) {
            let Some(line) = lines.next_line().await? else {
                bail!("stoa serve exited before listening:\n{}", log.join("\n"));
            };
            if let Some(a) = line.strip_prefix("stoa: listening on smtp://") {
                smtp = Some(a.parse().context("bad SMTP address")?);
            } else if let Some(a) = line.strip_prefix("stoa: listening on pop3://") {
                pop3 = Some(a.parse().context("bad POP3 address")?);
            } else if let Some(a) = line.strip_prefix("stoa: listening on imap://") {
                imap = Some(a.parse().context("bad IMAP address")?);
            } else if line.contains(": unknown key") {
                // The server refuses a key it does not know (older ones warned and
                // went on); either way the --server-set did not take.
                bail!(
                    "stoa serve does not know a key of the built-in configuration ({line}); check --server-set"
                );
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
        let read = match access {
            Access::Pop3 => pop3,
            Access::Imap => imap,
        };
        let (Some(smtp), Some(read_addr)) = (smtp, read) else {
            bail!("stoa serve did not report its addresses");
        };
        eprintln!(
            "stoa bench: built-in server: SMTP {smtp}, {} {read_addr}, relaying to {sink}",
            access.name()
        );
        Ok(BuiltIn {
            smtp,
            read_addr,
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

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str =
        "[smtp]\nlisten = [\"127.0.0.1:0\"]\n\n[pop3]\nallow_plaintext_auth = true\n";

    fn set(settings: &[&str]) -> anyhow::Result<toml::Table> {
        let owned: Vec<String> = settings.iter().map(|s| (*s).to_owned()).collect();
        Ok(with_settings(BASE, &owned)?.parse()?)
    }

    #[test]
    fn settings_land_in_their_tables_as_toml_values() {
        let doc = set(&[
            "smtp.max_deliveries=100",
            "pop3.allow_plaintext_auth = false",
            "directory.cache_ttl=0s",
            "queue.retry.first=\"5m\"",
        ])
        .expect("valid settings");
        assert_eq!(doc["smtp"]["max_deliveries"].as_integer(), Some(100));
        assert_eq!(doc["smtp"]["listen"][0].as_str(), Some("127.0.0.1:0"));
        assert_eq!(doc["pop3"]["allow_plaintext_auth"].as_bool(), Some(false));
        // Not TOML: a string.
        assert_eq!(doc["directory"]["cache_ttl"].as_str(), Some("0s"));
        assert_eq!(doc["queue"]["retry"]["first"].as_str(), Some("5m"));
    }

    #[test]
    fn bad_settings_are_refused_before_the_server_starts() {
        for (bad, says) in [
            ("smtp.max_deliveries", "TABLE.KEY=VALUE"),
            ("max_deliveries=1", "TABLE.KEY"),
            ("smtp..x=1", "TABLE.KEY"),
            (
                "smtp.listen=[\"0.0.0.0:25\"]",
                "the harness sets smtp.listen",
            ),
            ("smtp.listen.x=1", "listen is not a table"),
            (
                " smtp . relay_host =\"x:25\"",
                "the harness sets smtp.relay_host",
            ),
            ("directory.password_scheme=\"plain\"", "the harness sets"),
        ] {
            let err = set(&[bad]).expect_err(bad).to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn no_settings_leave_the_text_as_it_is() {
        assert_eq!(with_settings(BASE, &[]).expect("unchanged"), BASE);
    }
}
