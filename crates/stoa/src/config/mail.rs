//! What the SMTP, POP3 and IMAP parts of the configuration share: both servers read
//! their mail directory and certificates from their table relative to the file,
//! take `--tls-cert`/`--tls-key` and `--workers` the same way, and check their
//! host name, workers and certificates alike. Each part keeps its own order of
//! reads and checks, which is the order its errors are reported in.

use std::path::{Path, PathBuf};

use stoa_netkit::tls::CertKeyFiles;
use toml::Table;

use super::Report;
use super::tls::{cert_errors, read_certs};
use super::units::{MAX_WORKERS, parse_count};
use crate::cli::ServeArgs;

/// `path` from the file: a relative one is relative to the file's directory
/// `base`.
fn rebase(base: Option<&Path>, path: PathBuf) -> PathBuf {
    match base {
        Some(base) if path.is_relative() => base.join(path),
        _ => path,
    }
}

impl Report {
    /// A mail server's table in the file (`name` is `smtp` or `pop3`), if
    /// present: keys not in `keys` are warned of, and its `mail_dir` is read,
    /// relative to the file's directory `base`.
    pub(super) fn mail_table<'t>(
        &mut self,
        file: &'t Table,
        name: &str,
        keys: &[&str],
        base: Option<&Path>,
    ) -> Option<(&'t Table, Option<PathBuf>)> {
        let t = self.table(file, "", name)?;
        let path = format!("{name}.");
        self.known_keys(t, &path, keys);
        let mail_dir = self.string(t, &path, "mail_dir");
        Some((t, mail_dir.map(|dir| rebase(base, PathBuf::from(dir)))))
    }

    /// A mail server's `tls`: its certificate and key pairs, relative to the
    /// file's directory `base`. `None` when absent or wrong (errors reported).
    pub(super) fn mail_tls(
        &mut self,
        t: &Table,
        path: &str,
        base: Option<&Path>,
    ) -> Option<Vec<CertKeyFiles>> {
        let certs = read_certs(t.get("tls")?, &format!("{path}tls"), self)?;
        let rebased = certs.into_iter().map(|c| CertKeyFiles {
            cert: rebase(base, c.cert),
            key: rebase(base, c.key),
        });
        Some(rebased.collect())
    }

    /// A mail server's host name and workers: a name without spaces or
    /// controls, and as many workers as the web server may have.
    pub(super) fn check_host_and_workers(&mut self, path: &str, hostname: &str, workers: usize) {
        if hostname.is_empty()
            || hostname.contains(|ch: char| ch.is_whitespace() || ch.is_control())
        {
            self.errors
                .push(format!("{path}hostname {hostname:?}: not a host name"));
        }
        self.check(
            (1..=MAX_WORKERS).contains(&workers),
            &format!("{path}workers: must be 1 to {MAX_WORKERS}"),
        );
    }
}

/// The flags every mail server takes over its table: the `--tls-cert`/`--tls-key`
/// pairs (`certs`) when given, and `--workers` when it parses (the web server's
/// check reports it when it does not).
pub(super) fn apply_shared_flags(
    args: &ServeArgs,
    certs: Vec<CertKeyFiles>,
    tls: &mut Vec<CertKeyFiles>,
    workers: &mut usize,
) {
    if !certs.is_empty() {
        *tls = certs;
    }
    if let Some(text) = &args.workers
        && let Ok(n) = parse_count(text)
    {
        *workers = n;
    }
}

/// What is wrong with each of a mail server's certificate and key pairs, in
/// order.
pub(super) fn tls_errors(pairs: &[CertKeyFiles]) -> Vec<String> {
    pairs.iter().flat_map(cert_errors).collect()
}

/// How a mail server that takes passwords names itself and its flags in
/// messages (`[pop3]`, `[imap]` and their proxies).
pub(super) struct Names {
    /// The key prefix, `pop3.`.
    pub(super) p: &'static str,
    /// The listeners in words, `POP3`.
    pub(super) plain: &'static str,
    /// `POP3S`.
    pub(super) tls: &'static str,
    /// The article before them, `a` (`an` for IMAP).
    pub(super) a: &'static str,
    /// The protocol's TLS upgrade, `STLS`.
    pub(super) upgrade: &'static str,
    /// `--pop3-listen`.
    pub(super) listen_flag: &'static str,
    /// `--pop3s-listen`.
    pub(super) tls_flag: &'static str,
}

/// The listener checks of a server that takes passwords: a listener at all,
/// certificates for a TLS one, and a warning for a plain one that cannot offer
/// the upgrade.
pub(super) fn check_listeners(
    n: &Names,
    (listen, tls_listen): (&[std::net::SocketAddr], &[std::net::SocketAddr]),
    (certs, allow_plaintext): (&[CertKeyFiles], bool),
    r: &mut Report,
) {
    let Names {
        p,
        plain,
        tls,
        a,
        upgrade,
        listen_flag,
        tls_flag,
    } = n;
    if listen.is_empty() && tls_listen.is_empty() {
        r.errors.push(format!(
            "no {plain} listener: give {listen_flag} ADDR:PORT or {tls_flag} ADDR:PORT \
             ({p}listen, {p}tls_listen)"
        ));
    }
    if !tls_listen.is_empty() && certs.is_empty() {
        r.errors.push(format!(
            "{a} {tls} listener needs certificates: give --tls-cert FILE --tls-key FILE ({p}tls)"
        ));
    }
    if !listen.is_empty() && certs.is_empty() && !allow_plaintext {
        r.warnings.push(format!(
            "{a} {plain} listener without --tls-cert/--tls-key ({p}tls) offers no {upgrade}, and \
             without {p}allow_plaintext_auth it accepts no login off {}",
            "the secure networks (loopback by default)"
        ));
    }
}
