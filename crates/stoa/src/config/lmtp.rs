//! The LMTP server's part of the configuration: the `[lmtp]` table, then
//! `--lmtp-listen` over it, then its checks. LMTP delivers into the mail store of
//! the same mail directory as SMTP and POP3, so a store host can run LMTP and POP3
//! without SMTP. It prints `[lmtp]` and binds over the shared directory and store.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use stoa_smtp::lmtp::Config;
use toml::Table;

use super::Report;
use super::mail_limits::{self, SMTP_LIMIT_KEYS};
use super::print::{Doc, addrs, duration, int, path};
use super::service::{self, Configured, Finish, Implied, Service, Shared};
use super::units::{is_private, parse_addr, parse_count};

/// LMTP's entry in the list of servers.
pub(super) static LMTP: Service = Service {
    name: "lmtp",
    keys: &["lmtp"],
    mail: true,
    role: true,
    implied: Implied::Never,
    flags_given: |args| !args.lmtp_listen.is_empty(),
    read: |file, cx, r| service::boxed(read_table(file, cx.base, r)),
    draft: service::default::<Draft>,
};

impl service::Draft for Draft {
    fn finish(self: Box<Self>, cx: &mut Finish<'_>, r: &mut Report) -> Option<Box<dyn Configured>> {
        let lmtp = finish(*self, cx, r)?;
        cx.uses_store("lmtp", &lmtp.mail_dir);
        Some(Box::new(lmtp))
    }
}

impl Configured for Lmtp {
    fn service(&self) -> &'static Service {
        &LMTP
    }

    fn print(&self, doc: &mut Doc) {
        let c = &self.config;
        doc.table("lmtp");
        doc.set("mail_dir", path(&self.mail_dir));
        doc.set("listen", addrs(&c.listen));
        doc.set("hostname", c.hostname.as_str());
        doc.set("workers", int(c.workers));
        doc.set("delivered_to", c.delivered_to);
        mail_limits::print(doc, &c.limits);
        doc.set("shutdown_grace", duration(c.shutdown_grace));
    }

    fn bind(
        self: Box<Self>,
        shared: &mut Shared<'_>,
    ) -> anyhow::Result<Box<dyn stoa_netkit::server::Service>> {
        let mut config = self.config;
        config.sockets = shared.sockets.clone();
        let parts = shared.mail()?;
        let local = Arc::new(
            stoa_smtp::StoreDelivery::new(Arc::clone(&parts.store))
                .with_delivered_to(config.delivered_to),
        );
        let server = stoa_smtp::lmtp::Server::bind(config, parts.directory.clone(), local)
            .context("cannot start the LMTP server")?;
        Ok(Box::new(server))
    }
}

/// The LMTP server as configured: its mail directory and its settings.
#[derive(Debug)]
pub(crate) struct Lmtp {
    /// The mail directory (the directory and the store beneath).
    pub(crate) mail_dir: PathBuf,
    /// The server's settings.
    pub(crate) config: Config,
}

/// The `[lmtp]` table while it is being read.
#[derive(Debug, Default)]
struct Draft {
    mail_dir: Option<PathBuf>,
    config: Config,
}

/// The prefix of `[lmtp]` keys in messages.
const P: &str = "lmtp.";

/// The keys of `[lmtp]`, besides [`SMTP_LIMIT_KEYS`].
const KEYS: &[&str] = &[
    "mail_dir",
    "hostname",
    "listen",
    "workers",
    "delivered_to",
    "shutdown_grace",
];

/// The `[lmtp]` table, if present. `base` resolves a relative `mail_dir` (the
/// file's directory).
fn read_table(table: &Table, base: Option<&Path>, r: &mut Report) -> Option<Draft> {
    let (t, mail_dir) = r.mail_table(table, "lmtp", &[KEYS, SMTP_LIMIT_KEYS].concat(), base)?;
    let mut d = Draft {
        mail_dir,
        ..Draft::default()
    };
    let c = &mut d.config;
    r.string_into(t, P, "hostname", &mut c.hostname);
    c.listen = r.parsed_list(t, P, "listen", parse_addr);
    r.integer_into(t, P, "workers", &mut c.workers);
    r.boolean_into(t, P, "delivered_to", &mut c.delivered_to);
    r.smtp_limits(t, P, &mut c.limits);
    r.duration(t, P, "shutdown_grace", &mut c.shutdown_grace);
    Some(d)
}

/// Applies `--lmtp-listen` and `--workers` over the file's `[lmtp]` (or the
/// defaults), then checks the result. The mail directory must be the one of the
/// servers finished before it that use the store (SMTP, POP3), when they run.
fn finish(mut d: Draft, cx: &Finish<'_>, r: &mut Report) -> Option<Lmtp> {
    let args = cx.args;
    let c = &mut d.config;
    r.flag_list(
        "--lmtp-listen",
        &args.lmtp_listen,
        parse_addr,
        &mut c.listen,
    );
    if let Some(n) = args.workers.as_deref().and_then(|t| parse_count(t).ok()) {
        c.workers = n;
    }
    validate(c, r);
    let mail_dir = match (args.mail_dir.clone(), d.mail_dir, cx.mail_dir()) {
        (Some(flag), _, _) => Some(flag),
        (None, Some(own), Some((_, other))) if own != other => {
            r.errors.push(format!(
                "lmtp.mail_dir {} differs from the SMTP/POP3 mail directory {}: LMTP delivers \
                 into the store they use",
                own.display(),
                other.display()
            ));
            None
        }
        (None, Some(own), _) => Some(own),
        (None, None, Some((_, other))) => Some(other.to_path_buf()),
        (None, None, None) => {
            r.errors.push(
                "no mail directory: give --mail-dir DIR or lmtp.mail_dir in the configuration \
                 file"
                    .into(),
            );
            None
        }
    };
    mail_dir.map(|mail_dir| Lmtp {
        mail_dir,
        config: d.config,
    })
}

fn validate(c: &Config, r: &mut Report) {
    if c.listen.is_empty() {
        r.errors
            .push("no LMTP listener: give --lmtp-listen ADDR:PORT (lmtp.listen)".into());
    }
    for addr in c.listen.iter().filter(|a| !is_private(a)) {
        r.warnings.push(format!(
            "lmtp.listen {addr}: LMTP has no authentication and lets anyone who connects \
             deliver to every user; listen on loopback or a private network"
        ));
    }
    r.check_host_and_workers(P, &c.hostname, c.workers);
    r.check_smtp_limits(P, &c.limits);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::load;
    use super::*;
    use crate::cli::ServeArgs;

    fn load_file(text: &str, args: ServeArgs) -> Result<super::super::Loaded, Vec<String>> {
        let args = ServeArgs {
            config: Some(PathBuf::from("/etc/stoa/stoa.toml")),
            ..args
        };
        load(&args, |_| Ok(text.to_owned()), Path::new("/w"))
    }

    #[test]
    fn an_lmtp_only_store_host() {
        let file = "[lmtp]\nmail_dir = \"mail\"\nlisten = [\"10.0.0.2:24\"]\nhostname = \"store-a.test\"\n\
                    max_message_size = \"20M\"\ncommand_timeout = \"1m\"\n";
        let mut loaded = load_file(file, ServeArgs::default()).expect("valid");
        assert!(
            !loaded.runs::<stoa_web::Config>()
                && !loaded.runs::<stoa_smtp::Config>()
                && !loaded.runs::<super::super::Pop3>()
        );
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let lmtp = loaded.take::<Lmtp>().expect("LMTP configured");
        assert_eq!(lmtp.mail_dir, PathBuf::from("/etc/stoa/mail"));
        let c = lmtp.config;
        assert_eq!(c.listen, ["10.0.0.2:24".parse().expect("addr")]);
        assert_eq!(c.hostname, "store-a.test");
        assert_eq!(c.limits.session.max_message_size, 20 * 1024 * 1024);
        assert_eq!(c.limits.command_timeout, Duration::from_secs(60));
        assert_eq!(
            c.limits.max_connections,
            stoa_smtp::lmtp::DEFAULT_MAX_CONNECTIONS
        );
    }

    #[test]
    fn the_flag_beside_pop3_shares_the_mail_dir_and_warns_of_public_addresses() {
        let args = ServeArgs {
            mail_dir: Some(PathBuf::from("/m")),
            lmtp_listen: vec!["0.0.0.0:24".into()],
            pop3_listen: vec!["127.0.0.1:110".into()],
            ..ServeArgs::default()
        };
        let mut loaded = load_file("[pop3]\nallow_plaintext_auth = true\n", args).expect("valid");
        assert!(
            !loaded.runs::<stoa_smtp::Config>(),
            "no SMTP on a store host"
        );
        let lmtp = loaded.take::<Lmtp>().expect("LMTP");
        assert_eq!(lmtp.mail_dir, PathBuf::from("/m"));
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains("lmtp.listen 0.0.0.0:24")),
            "{:?}",
            loaded.warnings
        );
    }

    #[test]
    fn every_mistake_is_reported() {
        let file = "[smtp]\nmail_dir = \"/a\"\nlisten = [\"127.0.0.1:25\"]\n\
                    [lmtp]\nmail_dir = \"/b\"\nlisten = [\"nowhere\"]\nmax_recipients = 0\nbogus = 1\n";
        let errors = load_file(file, ServeArgs::default()).expect_err("invalid");
        for expected in [
            "lmtp.listen: \"nowhere\" is not an address",
            "no LMTP listener",
            "lmtp.max_recipients: must be at least 1",
            "lmtp.mail_dir /b differs",
        ] {
            assert!(
                errors.iter().any(|e| e.contains(expected)),
                "{expected}: {errors:?}"
            );
        }
    }
}
