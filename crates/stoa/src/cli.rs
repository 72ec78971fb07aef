//! The command line. Flags that take numbers, durations or addresses are read as
//! text here and checked by [`crate::config`] together with the configuration file,
//! so one run reports every mistake at once; a flag that takes one of a few words
//! is a [`ValueEnum`], refused here. The benchmark harnesses' flags are
//! `stoa-bench`'s option structs, flattened in.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use stoa_directory::Scheme;

/// Stoa: a web server, a mail server and SPEC-style benchmarks in one binary.
#[derive(Debug, Parser)]
#[command(name = "stoa", version, about, propagate_version = true)]
pub(crate) struct Cli {
    /// Error-log level: error, warn, info, debug or trace (RUST_LOG overrides).
    #[arg(long, global = true, default_value = "info", value_name = "LEVEL")]
    pub(crate) log_level: String,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at start-up; boxing would only obscure the clap derive"
)]
pub(crate) enum Command {
    /// Run the web server, the mail server, or both.
    Serve(ServeArgs),
    /// Manage the mail users and local domains of a mail directory.
    #[command(subcommand)]
    User(UserCommand),
    /// Look into the mail queue and act on it, as Postfix's `postqueue -p/-f` and
    /// `postsuper -d/-h/-H` do; safe while `stoa serve` delivers from it.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Look into users' mailboxes in the mail store, or move one out or in as a
    /// Maildir++ tree (Dovecot's layout).
    #[command(subcommand)]
    Mailbox(MailboxCommand),
    /// Write (or verify) the SPECweb99 file set under a document root.
    Fileset(FilesetArgs),
    /// Write precompressed siblings (FILE.gz, FILE.br, FILE.zst) of the text
    /// files beneath a directory, for `[web.compression] precompressed`.
    ///
    /// The files are those of the default `[web.compression] types` (HTML,
    /// CSS, JavaScript, JSON, XML, SVG, …): the ones the server looks for
    /// siblings of.
    ///
    /// Siblings no older than their file are kept; one that would be no
    /// smaller is not written (and a stale one is removed). Each sibling gets
    /// its file's permissions and is renamed into place whole.
    Compress(CompressArgs),
    /// Act as the SPECweb99 CGI program (run by the web server, not by hand).
    #[command(name = "web99-cgi")]
    Web99Cgi,
    /// SPEC-style benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Check the configuration and print the effective one, as TOML.
    ///
    /// Reads the configuration as `stoa serve` would (the same flags, the same
    /// default file), reports every error and warning on standard error, and
    /// prints every setting, defaults filled in, on standard output, in a file
    /// `stoa serve --config` accepts back. Exit status 0 when valid, 2 when not.
    #[command(name = "check-config")]
    CheckConfig(ServeArgs),
    /// Write the manual pages (stoa.1, stoa-serve.1, …) into a directory.
    Man(ManArgs),
    /// Tell a running `stoa serve --pid-file F` to reload its configuration
    /// (SIGHUP), as systemd's `ExecReload` does.
    Reload(ReloadArgs),
}

/// `stoa reload`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ReloadArgs {
    /// The file `stoa serve --pid-file` wrote its process id to.
    #[arg(long, value_name = "FILE")]
    pub(crate) pid_file: PathBuf,
}

/// `stoa man`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ManArgs {
    /// Where to write the pages (created if missing), e.g. /usr/local/share/man/man1.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: PathBuf,
}

/// `stoa bench …`.
#[derive(Debug, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once at start-up; boxing would only obscure the clap derive"
)]
pub(crate) enum BenchCommand {
    /// A SPECweb99-style run: paced 400 kbit/s connections, conformance, report.
    /// Without --target, generates a file set and benchmarks a built-in
    /// `stoa serve --web99` on loopback.
    Web(stoa_bench::web::Options),
    /// SPECmail2001-style mail benchmark (SMTP + POP3 at 80/100/120 % of a rate,
    /// with the published QoS tables). Without --smtp/--pop3, benchmarks a
    /// built-in `stoa serve` with generated users.
    Mail(stoa_bench::mail::Options),
    /// Writes the benchmark's users for another server: a Dovecot passwd-file
    /// (or a plain list), so Postfix + Dovecot can be measured the same way.
    MailUsers(stoa_bench::mail::UsersOptions),
    /// A client daemon for `stoa bench web --agents` and `stoa bench mail
    /// --agents`: runs the load generators a prime client sends it and answers
    /// with their counters.
    Agent(stoa_bench::agent::Options),
    /// Lookups/s and latency of the configured user directory (the LDAP
    /// backend): random users of `user1@DOMAIN` … `userN@DOMAIN`, cold and warm
    /// cache, at each concurrency; optionally password checks.
    Directory(BenchDirectoryArgs),
    /// Lists the stored runs of the results archive (every `stoa bench web` and
    /// `stoa bench mail` run is stored, with a description of the system).
    Results(BenchResultsArgs),
    /// Puts stored runs side by side, one column per --label: the score, the
    /// throughput, the server's CPU per operation, the differences with their
    /// 95 % intervals, and the system rows that differ.
    Compare(BenchCompareArgs),
    /// Measures two configurations in interleaved rounds (A B, B A, …) until
    /// the 95 % interval of their difference leaves out zero, or is within
    /// --precision, or --max-rounds is spent; then says which is better and by
    /// how much, or that no difference was detected.
    Ab(BenchAbArgs),
    /// Writes a stored run as a full-disclosure page (text, and HTML with
    /// --out), laid out like the published result pages: the result, the
    /// iterations, Hardware, Software, Network, Clients, Benchmark
    /// Configuration, Notes, and the non-compliance box when there is one.
    Disclose(BenchDiscloseArgs),
    /// Stoa against other servers (nginx) started from generated configurations
    /// on loopback, in interleaved pinned rounds (web99, static or h2 workload);
    /// writes README.md, summary.txt and raw.csv to a result directory.
    Peers(stoa_bench::peers::Args),
}

/// `stoa bench disclose`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchDiscloseArgs {
    /// The stored run: its ID, a label that only it has, or a record file.
    #[arg(value_name = "RUN")]
    pub(crate) run: String,

    /// What only the tester knows, as TOML: rows for `[hardware]`,
    /// `[software]`, `[server]`, `[test]`, `[network]`, `[clients]`,
    /// `[benchmark]`, and the `[notes]` lists sut, os and other (see
    /// docs/results-archive.md).
    #[arg(long, value_name = "FILE")]
    pub(crate) notes: Option<PathBuf>,

    /// Also write disclosure.txt and disclosure.html here.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    /// The results archive (default as for `stoa bench web --archive`).
    #[arg(long, value_name = "DIR")]
    pub(crate) archive: Option<PathBuf>,
}

/// `stoa bench ab`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchAbArgs {
    /// Compare with `stoa bench mail` runs (default: `stoa bench web`).
    #[arg(long)]
    pub(crate) mail: bool,

    /// A's server: a URL (web), or `SMTP,POP3` addresses (--mail). Default:
    /// the harness's built-in server.
    #[arg(long, value_name = "TARGET")]
    pub(crate) a_target: Option<String>,

    /// B's server, as --a-target.
    #[arg(long, value_name = "TARGET")]
    pub(crate) b_target: Option<String>,

    /// A shell command run before each of A's measurements (a sysctl, a
    /// restart with other flags).
    #[arg(long, value_name = "CMD")]
    pub(crate) a_setup: Option<String>,

    /// A shell command run before each of B's measurements.
    #[arg(long, value_name = "CMD")]
    pub(crate) b_setup: Option<String>,

    /// Harness flags for A's measurements only, as one shell-quoted string
    /// (`--a-flags "--server-pid 1234 --sink-listen 127.0.0.1:2526"`): what
    /// belongs to A's server and not to B's.
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub(crate) a_flags: Option<String>,

    /// Harness flags for B's measurements only, as --a-flags.
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub(crate) b_flags: Option<String>,

    /// A's name in the output and the archive.
    #[arg(long, value_name = "TEXT", default_value = "A")]
    pub(crate) a_label: String,

    /// B's name in the output and the archive.
    #[arg(long, value_name = "TEXT", default_value = "B")]
    pub(crate) b_label: String,

    /// The figure compared: `cpu` (server CPU per operation at a fixed load;
    /// cheap, and an external server needs `--a-flags "--server-pid PID"`),
    /// `throughput`, or `score` (a --find-max per measurement, started near
    /// the side's last score).
    #[arg(long, value_name = "METRIC", value_enum, default_value = "cpu")]
    pub(crate) metric: stoa_bench::ab::Metric,

    /// Stop as "no difference" once the interval is this narrow (share of A).
    #[arg(long, value_name = "PERCENT", default_value = "1%", value_parser = parse_percent)]
    pub(crate) precision: f64,

    /// The round budget (one measurement of each side per round).
    #[arg(long, value_name = "N", default_value_t = 24, value_parser = clap::value_parser!(u32).range(2..=200))]
    pub(crate) max_rounds: u32,

    /// The order within rounds: `alternate` (A B, B A, …) or `random`.
    #[arg(long, value_name = "ORDER", value_enum, default_value = "alternate")]
    pub(crate) order: stoa_bench::ab::Order,

    /// The seed of the random order.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) seed: u64,

    /// Where each measurement is archived, under its side's label (default as
    /// for `stoa bench web --archive`).
    #[arg(long, value_name = "DIR")]
    pub(crate) archive: Option<PathBuf>,

    /// Do not archive the measurements.
    #[arg(long, conflicts_with = "archive")]
    pub(crate) no_archive: bool,

    /// Flags for every measurement of both sides, after `--` (e.g. `--
    /// --connections 400 --run-time 30s`).
    #[arg(last = true, value_name = "HARNESS FLAGS")]
    pub(crate) harness: Vec<String>,
}

/// `stoa bench results`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchResultsArgs {
    /// The results archive (default as for `stoa bench web --archive`).
    #[arg(long, value_name = "DIR")]
    pub(crate) archive: Option<PathBuf>,
}

/// `stoa bench compare`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchCompareArgs {
    /// Stored runs: an ID (`stoa bench results`), a label (every run with it),
    /// or a record file.
    #[arg(value_name = "RUN", required = true)]
    pub(crate) runs: Vec<String>,

    /// The results archive (default as for `stoa bench web --archive`).
    #[arg(long, value_name = "DIR")]
    pub(crate) archive: Option<PathBuf>,
}

/// `stoa bench directory`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchDirectoryArgs {
    /// A configuration file with a `[directory]` table (`backend = "ldap"`).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: PathBuf,

    #[command(flatten)]
    pub(crate) options: stoa_bench::directory::Options,
}

fn parse_scheme(s: &str) -> Result<Scheme, String> {
    s.parse::<Scheme>().map_err(|e| e.to_string())
}

/// A share written as a percentage (`1%`, `0.5 %`) or a bare number of per
/// cent, above 0 and below 100; the value is the share (0.01).
fn parse_percent(s: &str) -> Result<f64, String> {
    let number = s.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(p) if p > 0.0 && p < 100.0 => Ok(p / 100.0),
        _ => Err(format!(
            "{s:?} is not a percentage above 0 and below 100, such as 1%"
        )),
    }
}

/// `stoa compress`.
#[derive(Debug, Clone, Args)]
pub(crate) struct CompressArgs {
    /// The directory (a document root) to walk.
    #[arg(value_name = "DIR")]
    pub(crate) dir: PathBuf,

    /// The codings to write, comma-separated: gzip, br, zstd.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "gzip,br,zstd",
          value_parser = parse_coding)]
    pub(crate) codings: Vec<stoa_http_proto::accept_encoding::Coding>,

    /// Leave files smaller than this alone (bytes).
    #[arg(long, value_name = "BYTES", default_value_t = 256)]
    pub(crate) min_length: u64,

    /// Rewrite siblings that are up to date.
    #[arg(long)]
    pub(crate) force: bool,
}

fn parse_coding(s: &str) -> Result<stoa_http_proto::accept_encoding::Coding, String> {
    use stoa_http_proto::accept_encoding::Coding;
    Coding::ALL
        .into_iter()
        .find(|c| c.token().eq_ignore_ascii_case(s.trim()))
        .ok_or_else(|| format!("{s:?} is not a coding: gzip, br or zstd"))
}

/// `stoa fileset`.
#[derive(Debug, Clone, Args)]
pub(crate) struct FilesetArgs {
    /// Simultaneous connections the file set must carry; sets the number of
    /// directories: int(25 + (400000/122000 × N) / 5).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) connections: u32,

    /// Document root; the set is written to DIR/file_set.
    #[arg(long, value_name = "DIR")]
    pub(crate) dir: PathBuf,

    /// Re-read and check every file; write nothing. Exits 1 if any is wrong.
    #[arg(long)]
    pub(crate) verify: bool,

    /// Write into a non-empty directory that holds no file set.
    #[arg(long)]
    pub(crate) force: bool,

    /// Threads to use (default: one per core).
    #[arg(long, value_name = "N")]
    pub(crate) jobs: Option<usize>,

    /// Seed of the random body bytes (the same seed writes the same files).
    #[arg(long, value_name = "N", default_value_t = 1999)]
    pub(crate) seed: u64,

    /// Also install the SPECweb99 CGI program as DIR/web99 (serve DIR with
    /// `stoa serve --cgi-dir DIR`, at /cgi-bin/web99).
    #[arg(long, value_name = "DIR")]
    pub(crate) cgi_dir: Option<PathBuf>,
}

/// `stoa queue …`.
#[derive(Debug, Subcommand)]
pub(crate) enum QueueCommand {
    /// List the queued messages: id (`!` after it when on hold), size, arrival
    /// (UTC), sender, then the attempts so far and the next one, and each
    /// recipient still to deliver with its last error. Reads the queue without
    /// locking it: a message arriving or leaving meanwhile is left out.
    List(QueueListArgs),
    /// Ask the running server to try every queued message now (held ones
    /// excepted). Fails when no server delivers from the queue.
    Flush(QueueDirArgs),
    /// Remove messages from the queue, without a bounce. A message being
    /// delivered is waited for (up to 30 s): once the command succeeds, it is
    /// never attempted again.
    Delete(QueueDeleteArgs),
    /// Put messages on hold: not attempted until released (an attempt in flight
    /// is waited for, up to 30 s). The queue lifetime keeps counting from
    /// arrival, as Postfix's does.
    Hold(QueueIdsArgs),
    /// Release held messages: they are attempted at their next retry (within the
    /// minimal backoff) or at the next `stoa queue flush`.
    Release(QueueIdsArgs),
}

/// The queue of a `stoa queue` command: that of the mail directory.
#[derive(Debug, Clone, Args)]
pub(crate) struct QueueDirArgs {
    #[command(flatten)]
    pub(crate) dir: MailDirArgs,
}

/// `stoa queue list`.
#[derive(Debug, Clone, Args)]
pub(crate) struct QueueListArgs {
    #[command(flatten)]
    pub(crate) dir: MailDirArgs,
    /// One JSON array of messages (times in Unix seconds), for scripts.
    #[arg(long)]
    pub(crate) json: bool,
}

/// `stoa queue hold` and `release`.
#[derive(Debug, Clone, Args)]
pub(crate) struct QueueIdsArgs {
    /// Queue ids, as `stoa queue list` shows them.
    #[arg(value_name = "ID", required = true)]
    pub(crate) ids: Vec<String>,
    #[command(flatten)]
    pub(crate) dir: MailDirArgs,
}

/// `stoa queue delete`.
#[derive(Debug, Clone, Args)]
pub(crate) struct QueueDeleteArgs {
    /// Queue ids, as `stoa queue list` shows them.
    #[arg(
        value_name = "ID",
        required_unless_present = "all",
        conflicts_with = "all"
    )]
    pub(crate) ids: Vec<String>,
    /// Every message queued when the command starts.
    #[arg(long)]
    pub(crate) all: bool,
    #[command(flatten)]
    pub(crate) dir: MailDirArgs,
}

/// `stoa user …`.
#[derive(Debug, Subcommand)]
pub(crate) enum UserCommand {
    /// Create an empty user directory in the mail directory (the other commands,
    /// but add and domain add, need one to exist).
    Init(MailDirArgs),
    /// Add a user (its domain is added as a local domain if it is not one yet).
    Add(UserPasswordArgs),
    /// Remove a user. Its mail stays in the store unless --purge is given (the
    /// command says how much).
    Del(UserDelArgs),
    /// List the users, one address per line.
    List(MailDirArgs),
    /// Set a user's password (asked for twice on a terminal, or read from
    /// standard input with --password-stdin).
    Passwd(UserPasswordArgs),
    /// Manage the local domains.
    #[command(subcommand)]
    Domain(DomainCommand),
    /// Manage aliases: addresses in a local domain that expand to others.
    #[command(subcommand)]
    Alias(AliasCommand),
    /// Write every user as LDIF for slapadd or ldapadd (password hashes kept, in
    /// LDAP's spelling: {ARGON2}, {CRYPT}$6$, {CRYPT}$2y$, {SSHA}; plain-text
    /// passwords refused; mailbox numbers as employeeNumber), to standard output.
    ExportLdif(ExportLdifArgs),
}

/// `stoa user export-ldif`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ExportLdifArgs {
    #[command(flatten)]
    pub(crate) dir: MailDirArgs,
    /// The DN the entries go under (it must exist), e.g. ou=people,dc=example,dc=com.
    #[arg(long, value_name = "DN")]
    pub(crate) base: String,
    /// The mailHost of users stored on this host (the store's `this_host`).
    #[arg(long, value_name = "HOST")]
    pub(crate) mail_host: Option<String>,
}

/// `stoa user domain …`.
#[derive(Debug, Subcommand)]
pub(crate) enum DomainCommand {
    /// Add a local domain.
    Add(DomainArgs),
    /// Remove a local domain (it must have no users or aliases left).
    Del(DomainArgs),
    /// List the local domains, one per line.
    List(MailDirArgs),
}

/// The mail directory of a `stoa user` command, given or read from the
/// configuration.
#[derive(Debug, Clone, Args)]
pub(crate) struct MailDirArgs {
    /// The mail directory (the users are in DIR/directory, the queue in
    /// DIR/queue). Default: the one
    /// the configuration's mail servers use (`mail_dir` of `[smtp]`, `[pop3]`,
    /// `[imap]` or `[lmtp]`).
    #[arg(long, value_name = "DIR")]
    pub(crate) mail_dir: Option<PathBuf>,
    /// The configuration `stoa serve` reads: the mail directory when --mail-dir
    /// is not given, and the `[directory]` password settings of add and passwd
    /// (scheme, costs, allow_plain_passwords). Default: /etc/stoa/stoa.toml
    /// when it exists (STOA_DEFAULT_CONFIG names another default, for tests).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

/// A user and the mail directory.
#[derive(Debug, Clone, Args)]
pub(crate) struct UserArgs {
    /// The user's address, e.g. joe@example.com.
    #[arg(value_name = "ADDRESS")]
    pub(crate) address: String,
    #[command(flatten)]
    pub(crate) dir: MailDirArgs,
}

/// `stoa user del`.
#[derive(Debug, Clone, Args)]
pub(crate) struct UserDelArgs {
    #[command(flatten)]
    pub(crate) user: UserArgs,
    /// Also delete the user's mail from the store (after the user is removed, so
    /// nothing new arrives meanwhile).
    #[arg(long)]
    pub(crate) purge: bool,
}

/// A user, a password source and the mail directory.
#[derive(Debug, Clone, Args)]
pub(crate) struct UserPasswordArgs {
    #[command(flatten)]
    pub(crate) user: UserArgs,
    /// Read the password from the first line of standard input. Without it, on
    /// a terminal, the password is asked for twice without echo; otherwise `add`
    /// creates a user who receives mail but cannot log in (and says so), and
    /// `passwd` refuses.
    #[arg(long)]
    pub(crate) password_stdin: bool,
    /// No password, and none asked for: `add` creates a user who receives mail
    /// but cannot log in until `stoa user passwd`; `passwd` removes the
    /// password, so the user can no longer log in.
    #[arg(long, conflicts_with_all = ["password_stdin", "scheme"])]
    pub(crate) no_password: bool,
    /// The password scheme of the hash: argon2id, sha512-crypt, blf-crypt, ssha
    /// or plain (any case; plain only where the configuration has
    /// allow_plain_passwords = true). Default: the configuration's
    /// `[directory] password_scheme`, else argon2id.
    #[arg(long, value_name = "SCHEME", value_parser = parse_scheme)]
    pub(crate) scheme: Option<Scheme>,
}

/// `stoa mailbox …`.
#[derive(Debug, Subcommand)]
pub(crate) enum MailboxCommand {
    /// Messages and bytes in a user's mailbox.
    Stat(UserArgs),
    /// Copy a user's whole mailbox out as a Maildir++ tree, Dovecot's layout:
    /// INBOX in DIR/{cur,new,tmp}, folder a/b in DIR/.a.b (modified UTF-7 names;
    /// a `.` inside a name is written &AC4-), each message in cur/ with LF line
    /// ends, its flags after `:2,` (D F R S T, keywords as dovecot-keywords
    /// letters) and its internal date as modification time; the subscriptions
    /// file; no dovecot-uidlist. Run again, it adds only the messages not there
    /// yet. The mail in the store is left as it is.
    Export(MailboxExportArgs),
    /// Read a Maildir++ tree (as Dovecot, mbsync or `stoa mailbox export` left
    /// it) into a user's mailbox: folders created (SPECIAL-USE for Drafts, Sent,
    /// Trash, Junk, Archive), messages from cur/ and new/ appended with their
    /// flags, keywords and modification time as internal date, CRLF restored,
    /// subscriptions added. The whole tree is checked before anything is
    /// written; run again, it skips what it already imported.
    Import(MailboxImportArgs),
}

/// `stoa mailbox export`.
#[derive(Debug, Clone, Args)]
pub(crate) struct MailboxExportArgs {
    #[command(flatten)]
    pub(crate) user: UserArgs,
    /// The Maildir++ tree to write (created if missing; messages already in it
    /// are kept as they are).
    #[arg(long, value_name = "MAILDIR")]
    pub(crate) to: PathBuf,
}

/// `stoa mailbox import`.
#[derive(Debug, Clone, Args)]
pub(crate) struct MailboxImportArgs {
    #[command(flatten)]
    pub(crate) user: UserArgs,
    /// The Maildir++ tree to read (its root holds INBOX's cur/ and new/). It is
    /// only read; stop any server that writes it first.
    #[arg(long, value_name = "MAILDIR")]
    pub(crate) from: PathBuf,
}

/// `stoa user alias …`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum AliasCommand {
    /// Add an alias expanding to one or more addresses (local users, other
    /// aliases, or remote addresses).
    Add(AliasAddArgs),
    /// Remove an alias.
    Del(UserArgs),
    /// List the aliases, one per line: the alias, then its targets.
    List(MailDirArgs),
}

/// `stoa user alias add`.
#[derive(Debug, Clone, Args)]
pub(crate) struct AliasAddArgs {
    /// The alias, e.g. sales@example.com (its domain must be local).
    #[arg(value_name = "ALIAS")]
    pub(crate) alias: String,
    /// Where its mail goes.
    #[arg(value_name = "TARGET", required = true)]
    pub(crate) targets: Vec<String>,
    #[command(flatten)]
    pub(crate) dir: MailDirArgs,
}

/// A domain and the mail directory.
#[derive(Debug, Clone, Args)]
pub(crate) struct DomainArgs {
    /// The domain, e.g. example.com.
    #[arg(value_name = "DOMAIN")]
    pub(crate) domain: String,
    #[command(flatten)]
    pub(crate) dir: MailDirArgs,
}

/// `stoa serve`: flags override the configuration file.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ServeArgs {
    /// TOML configuration file (see docs/configuration.md). Default:
    /// /etc/stoa/stoa.toml when it exists (STOA_DEFAULT_CONFIG names another
    /// default, for tests).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// Write the server's process id to this file once it serves (removed at
    /// exit), for `stoa reload --pid-file`.
    #[arg(long, value_name = "FILE")]
    pub(crate) pid_file: Option<PathBuf>,

    /// Started as root: bind the listeners and open the files, then switch to
    /// this user (and its group) for good. Overrides the file's `user`.
    #[arg(long, value_name = "NAME")]
    pub(crate) user: Option<String>,

    /// Directory to serve files from.
    #[arg(long, value_name = "DIR")]
    pub(crate) docroot: Option<PathBuf>,

    /// Address to listen on for HTTP; repeat for several. Replaces the file's
    /// listeners. Default 127.0.0.1:8080.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) listen: Vec<String>,

    /// Address to listen on for HTTPS; repeat for several. Like --listen, replaces
    /// the file's listeners. Needs --tls-cert and --tls-key.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) tls_listen: Vec<String>,

    /// PEM certificate chain for the --tls-listen addresses (and SMTP STARTTLS,
    /// POP3 STLS and POP3S).
    /// Repeat with --tls-key
    /// for several certificates: the client's SNI name picks one by the names it
    /// carries, the first is the default.
    #[arg(long, value_name = "FILE")]
    pub(crate) tls_cert: Vec<PathBuf>,

    /// PEM private key of the --tls-cert in the same position.
    #[arg(long, value_name = "FILE")]
    pub(crate) tls_key: Vec<PathBuf>,

    /// Worker threads, each with its own event loop. Default: one per core.
    #[arg(long, value_name = "N")]
    pub(crate) workers: Option<String>,

    /// Access log: a file, `-` for standard output, or `off`.
    #[arg(long, value_name = "FILE|-|off")]
    pub(crate) access_log: Option<String>,

    /// Access-log format: `common` or `combined`.
    #[arg(long, value_name = "FORMAT", value_enum)]
    pub(crate) log_format: Option<LogFormat>,

    /// Time allowed for a request head (e.g. `20s`, `200ms`).
    #[arg(long, value_name = "DURATION")]
    pub(crate) head_timeout: Option<String>,

    /// Idle time allowed between requests on a kept-alive connection.
    #[arg(long, value_name = "DURATION")]
    pub(crate) keepalive_timeout: Option<String>,

    /// Longest wait for a client to accept more response bytes.
    #[arg(long, value_name = "DURATION")]
    pub(crate) send_timeout: Option<String>,

    /// Most connections per worker.
    #[arg(long, value_name = "N")]
    pub(crate) max_connections: Option<String>,

    /// Event-loop model: `per-core` (default) or `multi-thread` (for measurement).
    #[arg(long, value_name = "MODEL", value_enum)]
    pub(crate) runtime: Option<Runtime>,

    /// Enable the SPECweb99 dynamic API at /web99.
    #[arg(long)]
    pub(crate) web99: bool,

    /// Run the executables of DIR as CGI scripts under /cgi-bin/.
    #[arg(long, value_name = "DIR")]
    pub(crate) cgi_dir: Option<PathBuf>,

    /// Address to listen on for SMTP (mail exchange, port 25 style); repeat for
    /// several. Replaces the file's smtp.listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) smtp_listen: Vec<String>,

    /// Address to listen on for mail submission (port 587 style: AUTH after
    /// STARTTLS required); repeat for several.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) submission_listen: Vec<String>,

    /// Address to listen on for POP3 (port 110 style: STLS with --tls-cert and
    /// --tls-key); repeat for several. Replaces the file's pop3.listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) pop3_listen: Vec<String>,

    /// Address to listen on for POP3S (port 995 style: TLS from the first byte;
    /// needs --tls-cert and --tls-key); repeat for several. Replaces the file's
    /// pop3.tls_listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) pop3s_listen: Vec<String>,

    /// Address to listen on for IMAP (port 143 style: STARTTLS with --tls-cert and
    /// --tls-key); repeat for several. Replaces the file's imap.listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) imap_listen: Vec<String>,

    /// Address to listen on for IMAPS (port 993 style: TLS from the first byte;
    /// needs --tls-cert and --tls-key); repeat for several. Replaces the file's
    /// imap.tls_listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) imaps_listen: Vec<String>,

    /// Address to listen on as a POP3 proxy (logins checked in the directory and
    /// handed to the user's mailHost store host; STLS with --tls-cert and
    /// --tls-key); repeat for several. Replaces the file's pop3_proxy.listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) pop3_proxy_listen: Vec<String>,

    /// Address to listen on as a POP3S proxy (TLS from the first byte; needs
    /// --tls-cert and --tls-key); repeat for several. Replaces the file's
    /// pop3_proxy.tls_listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) pop3s_proxy_listen: Vec<String>,

    /// Address to listen on as an IMAP proxy (logins checked in the directory and
    /// handed to the user's mailHost store host; STARTTLS with --tls-cert and
    /// --tls-key); repeat for several. Replaces the file's imap_proxy.listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) imap_proxy_listen: Vec<String>,

    /// Address to listen on as an IMAPS proxy (TLS from the first byte; needs
    /// --tls-cert and --tls-key); repeat for several. Replaces the file's
    /// imap_proxy.tls_listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) imaps_proxy_listen: Vec<String>,

    /// Address to listen on for LMTP (RFC 2033: a store host's delivery port for
    /// the MTA; no authentication, so loopback or a private network only); repeat
    /// for several. Replaces the file's lmtp.listen.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) lmtp_listen: Vec<String>,

    /// The mail directory: the queue, the mail store and the user directory
    /// beneath; SMTP and LMTP deliver into it and POP3 reads from it.
    #[arg(long, value_name = "DIR")]
    pub(crate) mail_dir: Option<PathBuf>,

    /// A local domain, in addition to those of the user directory; repeat for
    /// several.
    #[arg(long, value_name = "NAME")]
    pub(crate) domain: Vec<String>,

    /// Smart host for mail to other domains.
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) relay_host: Option<String>,

    /// Client network allowed to relay without AUTH; repeat for several. None by
    /// default (not even loopback).
    #[arg(long, value_name = "CIDR")]
    pub(crate) trusted_net: Vec<String>,

    /// Where the dynamic API keeps User.Personality, Custom.Ads and post.log
    /// (outside the document root; implies --web99). Default /var/lib/stoa/web99
    /// for root, ~/.local/state/stoa/web99 otherwise.
    #[arg(long, value_name = "DIR")]
    pub(crate) web99_state: Option<PathBuf>,
}

/// `--runtime`: the event-loop model (`[web] runtime`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Runtime {
    PerCore,
    MultiThread,
}

impl From<Runtime> for stoa_web::config::RuntimeModel {
    fn from(r: Runtime) -> Self {
        match r {
            Runtime::PerCore => stoa_web::config::RuntimeModel::PerCore,
            Runtime::MultiThread => stoa_web::config::RuntimeModel::MultiThread,
        }
    }
}

/// `--log-format`: the access log's format (`[web] log_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    Common,
    Combined,
}

impl From<LogFormat> for stoa_web::config::LogFormat {
    fn from(f: LogFormat) -> Self {
        match f {
            LogFormat::Common => stoa_web::config::LogFormat::Common,
            LogFormat::Combined => stoa_web::config::LogFormat::Combined,
        }
    }
}
