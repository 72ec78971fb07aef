//! The command line. Flags that take numbers, durations or addresses are read as
//! text here and checked by [`crate::config`] together with the configuration file,
//! so one run reports every mistake at once.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};
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
    /// Look into users' mailboxes in the mail store, or take one out as a Maildir.
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
    Web(BenchWebArgs),
    /// SPECmail2001-style mail benchmark (SMTP + POP3 at 80/100/120 % of a rate,
    /// with the published QoS tables). Without --smtp/--pop3, benchmarks a
    /// built-in `stoa serve` with generated users.
    Mail(BenchMailArgs),
    /// Writes the benchmark's users for another server: a Dovecot passwd-file
    /// (or a plain list), so Postfix + Dovecot can be measured the same way.
    MailUsers(BenchMailUsersArgs),
    /// A client daemon for `stoa bench web --agents` and `stoa bench mail
    /// --agents`: runs the load generators a prime client sends it and answers
    /// with their counters.
    Agent(BenchAgentArgs),
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
    /// on loopback, in interleaved pinned rounds (web99 or static workload);
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
    #[arg(long, value_name = "METRIC", default_value = "cpu", value_parser = ["cpu", "throughput", "score"])]
    pub(crate) metric: String,

    /// Stop as "no difference" once the interval is this narrow (share of A).
    #[arg(long, value_name = "PERCENT", default_value = "1%", value_parser = parse_percent)]
    pub(crate) precision: f64,

    /// The round budget (one measurement of each side per round).
    #[arg(long, value_name = "N", default_value_t = 24, value_parser = clap::value_parser!(u32).range(2..=200))]
    pub(crate) max_rounds: u32,

    /// The order within rounds: `alternate` (A B, B A, …) or `random`.
    #[arg(long, value_name = "ORDER", default_value = "alternate", value_parser = ["alternate", "random"])]
    pub(crate) order: String,

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

/// Where a run is archived (`stoa bench web` and `stoa bench mail`).
#[derive(Debug, Clone, Args)]
pub(crate) struct ArchiveArgs {
    /// The results archive. Default: $XDG_DATA_HOME/stoa/results, else
    /// ~/.local/share/stoa/results.
    #[arg(long, value_name = "DIR")]
    pub(crate) archive: Option<PathBuf>,

    /// Do not store this run in the archive.
    #[arg(long, conflicts_with = "archive")]
    pub(crate) no_archive: bool,

    /// The configuration's name in the archive (`stoa bench compare` groups
    /// runs by it), e.g. "autocorking off".
    #[arg(long, value_name = "TEXT")]
    pub(crate) label: Option<String>,

    /// A file describing the server's configuration (nginx.conf, stoa.toml …),
    /// stored with the run.
    #[arg(long, value_name = "FILE")]
    pub(crate) server_config: Option<PathBuf>,
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

/// `stoa bench agent`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchAgentArgs {
    /// Address to listen on for the prime client.
    #[arg(long, value_name = "ADDR:PORT")]
    pub(crate) listen: String,

    /// Prime clients allowed to connect, as an address or CIDR block; repeat for
    /// several. Default: loopback only. An agent runs whatever load an allowed
    /// prime asks for, so allow only machines of the test network.
    #[arg(long, value_name = "CIDR")]
    pub(crate) allow: Vec<String>,

    /// Load threads (default: one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) threads: Option<u32>,

    /// Serve this many runs, then exit (default: serve until killed).
    #[arg(long, value_name = "N", hide = true)]
    pub(crate) runs: Option<u32>,
}

/// `stoa bench web`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchWebArgs {
    /// The server, `http://HOST:PORT[/path-of-the-file_set-parent]`. Default: a
    /// built-in `stoa serve --web99` on loopback.
    #[arg(long, value_name = "URL")]
    pub(crate) target: Option<String>,

    /// The built-in target over HTTPS (a SPECweb99_SSL-style run), with a
    /// self-signed certificate made for the run.
    #[arg(long)]
    pub(crate) tls: bool,

    /// Share (0–1) of new HTTPS connections that resume an earlier TLS session;
    /// the rest pay a full handshake. The kit's ratio is not known (web99.md
    /// §10); 0.5 keeps the full handshake (the key exchange the 2003 defect
    /// notice insists on) a large part of the load while exercising resumption.
    #[arg(long, value_name = "RATIO", default_value_t = 0.5, value_parser = parse_ratio)]
    pub(crate) tls_resume: f64,

    /// Certificates to trust for an https target (PEM); default: the system's.
    #[arg(long, value_name = "FILE")]
    pub(crate) tls_ca: Option<PathBuf>,

    /// Accept any certificate from an https target (handshake signatures are
    /// still checked).
    #[arg(long)]
    pub(crate) tls_insecure: bool,

    /// Simultaneous connections (load generators).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) connections: u32,

    /// Phase lengths: `quick` (seconds) or `standard` (the kit's 20-minute phases).
    #[arg(long, value_name = "PROFILE", default_value = "quick", value_parser = ["quick", "standard"])]
    pub(crate) profile: String,

    /// Measurement time of each iteration, overriding the profile's (e.g. `30s`).
    #[arg(long, value_name = "DURATION")]
    pub(crate) run_time: Option<String>,

    /// Iterations (default: 3 for the standard profile, as the run rules require;
    /// 1 for quick).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) iterations: Option<u32>,

    /// HTTP version of the whole run: 1.0 or 1.1 (the kit's), or 2 (HTTPS only:
    /// the same requests and connections as HTTP/2 streams, one at a time on
    /// each connection; a non-compliant run).
    #[arg(long, value_name = "VERSION", default_value = "1.1", value_parser = ["1.0", "1.1", "2"])]
    pub(crate) http: String,

    /// Only static GETs, for servers without the dynamic API (the report says so).
    #[arg(long)]
    pub(crate) static_only: bool,

    /// Closed loop: no pacing and every connection kept alive (wrk's model), to
    /// cross-check throughput; conformance is meaningless in this mode.
    #[arg(long)]
    pub(crate) closed_loop: bool,

    /// Print the URLs of the first deck of each connection (one per line) and exit:
    /// the same requests for another load tool.
    #[arg(long, hide = true)]
    pub(crate) print_urls: bool,

    /// Search for the highest connection count that still conforms.
    #[arg(long)]
    pub(crate) find_max: bool,

    /// Highest load --find-max may try (the target's file set must hold it).
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    pub(crate) find_max_limit: u32,

    /// Load threads of the harness (each one event loop on its own core). One
    /// leaves the other cores to a server on the same machine.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) threads: u32,

    /// Run the load on these `stoa bench agent` daemons (`HOST:PORT,…`) instead of
    /// in this process; the connections are split evenly between them and their
    /// counters merged. This process validates, resets and reports.
    #[arg(long, value_name = "ADDR,…", value_delimiter = ',')]
    pub(crate) agents: Vec<String>,

    /// Processes of the server under test whose CPU time the report puts beside
    /// the harness's (repeat for several, e.g. nginx's master and worker; the
    /// built-in server is measured without it). Same machine only.
    #[arg(long, value_name = "PID")]
    pub(crate) server_pid: Vec<u32>,

    /// Run the harness on these CPUs only (a `taskset -c` list: `1`, `2-3`,
    /// `0,2`); the report then judges its CPU share against them and calls a
    /// trial where it passed 70 % harness-bound.
    #[arg(long, value_name = "LIST")]
    pub(crate) harness_cpus: Option<stoa_bench::cpus::CpuList>,

    /// Run the built-in server on these CPUs only (a `taskset -c` list); pin an
    /// external server with `taskset -c LIST` when starting it.
    #[arg(long, value_name = "LIST", conflicts_with = "target")]
    pub(crate) server_cpus: Option<stoa_bench::cpus::CpuList>,

    /// Write report.txt, report.json and report.html here.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) archive: ArchiveArgs,

    /// The dynamic API's entry point on the server.
    #[arg(long, value_name = "PATH", default_value = "/web99")]
    pub(crate) dynamic_path: String,

    /// The SPECweb99 CGI program on the server.
    #[arg(long, value_name = "PATH", default_value = "/cgi-bin/web99")]
    pub(crate) cgi_path: String,
}

/// `stoa bench mail`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchMailArgs {
    /// The server's SMTP service (`HOST:PORT`); with --pop3. Default: a built-in
    /// `stoa serve` on loopback, filled and checked for the run.
    #[arg(long, value_name = "ADDR", requires = "pop3")]
    pub(crate) smtp: Option<String>,

    /// The server's POP3 service (`HOST:PORT`); with --smtp.
    #[arg(long, value_name = "ADDR", requires = "smtp")]
    pub(crate) pop3: Option<String>,

    /// The claimed rate, SPECmail2001-style messages per minute (the 100 %
    /// level); users = 200 × rate. Default: --users / 200, or 20 (4,000 users).
    #[arg(long, value_name = "MPM", value_parser = parse_positive)]
    pub(crate) rate: Option<f64>,

    /// Accounts in the store (`user1@DOMAIN` … `userN@DOMAIN`); at least 200 ×
    /// rate. --find-max searches rates up to N / 200. Default 200 × rate.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) users: Option<u32>,

    /// Fill and use a store of N accounts whatever the rate: below 200 × rate
    /// a declared smaller store, and the run is non-compliant (every report
    /// says so and how). --find-max then searches the rate with the store
    /// fixed, up to what its retry pool holds (see the README).
    #[arg(long, value_name = "N", conflicts_with = "users",
          value_parser = clap::value_parser!(u32).range(10..))]
    pub(crate) store_users: Option<u32>,

    /// The local domain.
    #[arg(long, value_name = "NAME", default_value = "stoa.test")]
    pub(crate) domain: String,

    /// The remote domain: mail to it must be relayed by the server to the sink.
    #[arg(long, value_name = "NAME", default_value = "remote.test")]
    pub(crate) remote_domain: String,

    /// Every account's password.
    #[arg(long, value_name = "PASSWORD", default_value = "stoa-bench")]
    pub(crate) password: String,

    /// The password scheme of the built-in server's generated users: argon2id,
    /// sha512-crypt, blf-crypt, ssha or plain (any case; plain turns on the
    /// server's allow_plain_passwords). The report says which.
    #[arg(long, value_name = "SCHEME", default_value = "argon2id", value_parser = parse_scheme)]
    pub(crate) password_scheme: Scheme,

    /// Where the harness's SMTP sink listens (the server relays remote mail
    /// here). Default 127.0.0.1:2526 for an external server; any free port for
    /// the built-in one.
    #[arg(long, value_name = "ADDR")]
    pub(crate) sink_listen: Option<String>,

    /// Phase lengths: `quick` (per level 10 s warm-up, 60 s measurement, 20 s
    /// cool-down) or `standard` (the white paper's 5 min, 60 min, 15 min).
    #[arg(long, value_name = "PROFILE", default_value = "quick", value_parser = ["quick", "standard"])]
    pub(crate) profile: String,

    /// Warm-up of each level, overriding the profile's (e.g. `30s`).
    #[arg(long, value_name = "DURATION")]
    pub(crate) warmup: Option<String>,

    /// Measurement window of each level, overriding the profile's.
    #[arg(long, value_name = "DURATION")]
    pub(crate) run_time: Option<String>,

    /// Cool-down of each level, overriding the profile's.
    #[arg(long, value_name = "DURATION")]
    pub(crate) cooldown: Option<String>,

    /// Load levels to run, percent of the rate.
    #[arg(long, value_name = "PERCENT,…", value_delimiter = ',', default_value = "80,100,120",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) levels: Vec<u32>,

    /// Search the highest rate whose 100 % level passes (up to --users / 200).
    #[arg(long)]
    pub(crate) find_max: bool,

    /// Only fill the store to the steady state (by SMTP), check it and stop.
    /// Resumable: accounts already filled are in --init-journal.
    #[arg(long)]
    pub(crate) init_only: bool,

    /// The fill's journal (accounts done). Default `init-HOST:PORT.journal`
    /// (the --smtp address) in the harness's cache directory,
    /// `$XDG_CACHE_HOME/stoa/bench-mail` or `~/.cache/stoa/bench-mail`.
    #[arg(long, value_name = "FILE")]
    pub(crate) init_journal: Option<PathBuf>,

    /// Parallel SMTP connections of the fill.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub(crate) init_connections: u32,

    /// Mailboxes whose contents are checked before the run.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub(crate) check_sample: u32,

    /// Share (0–1) of SMTP sessions carrying a delivery probe. Default: the white
    /// paper's 0.01 at every rate; with fewer than 59 probes in a level its
    /// Delivery Time row is reported as too few probes to judge.
    #[arg(long, value_name = "RATIO", value_parser = parse_ratio)]
    pub(crate) probe_share: Option<f64>,

    /// Time a reply may take before it counts as an error (60 s in the white
    /// paper).
    #[arg(long, value_name = "DURATION", default_value = "60s")]
    pub(crate) reply_timeout: String,

    /// Load threads of the harness.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) threads: u32,

    /// Run the four streams on these `stoa bench agent` daemons (`HOST:PORT,…`)
    /// instead of in this process: each sends an even share of the SMTP
    /// sessions and checks its own share of the mailboxes. This process keeps
    /// the sink, the store's fill and check, the delivery probes, the QoS tally
    /// and the one report. The agents must reach --smtp/--pop3 (the built-in
    /// server listens on loopback: agents on this machine only).
    #[arg(long, value_name = "ADDR,…", value_delimiter = ',')]
    pub(crate) agents: Vec<String>,

    /// Longest wait after a level's cool-down for its judged sessions and
    /// probes (default: 2 min for the quick profile, 20 min for standard).
    #[arg(long, value_name = "DURATION", hide = true)]
    pub(crate) drain_limit: Option<String>,

    /// The random seed of the load (the store's fill uses --store-seed).
    #[arg(long, value_name = "N")]
    pub(crate) seed: Option<u64>,

    /// The seed of the initial store's contents.
    #[arg(long, value_name = "N", default_value_t = 2001)]
    pub(crate) store_seed: u64,

    /// The server's name in the report. Default: Stoa's version for the built-in
    /// server, "unnamed server" otherwise.
    #[arg(long, value_name = "TEXT")]
    pub(crate) server_software: Option<String>,

    /// Processes of the server under test whose CPU time the report shows (same
    /// machine; the built-in server is measured without it).
    #[arg(long, value_name = "PID")]
    pub(crate) server_pid: Vec<u32>,

    /// Run the harness on these CPUs only (a `taskset -c` list: `1`, `2-3`,
    /// `0,2`); the report then judges its CPU share against them and calls a
    /// trial where it passed 70 % harness-bound.
    #[arg(long, value_name = "LIST")]
    pub(crate) harness_cpus: Option<stoa_bench::cpus::CpuList>,

    /// Run the built-in server on these CPUs only (a `taskset -c` list); pin an
    /// external server with `taskset -c LIST` when starting it.
    #[arg(long, value_name = "LIST", conflicts_with = "smtp")]
    pub(crate) server_cpus: Option<stoa_bench::cpus::CpuList>,

    /// A setting of the built-in server's configuration, `TABLE.KEY=VALUE` with
    /// a TOML value (`smtp.max_deliveries=100`, `directory.cache_ttl="0s"`),
    /// repeatable; the report's server name lists them. Not the keys the
    /// harness itself sets (listeners, mail_dir, domains, relay_host,
    /// trusted_networks, the password scheme: --password-scheme).
    #[arg(long, value_name = "TABLE.KEY=VALUE", conflicts_with = "smtp")]
    pub(crate) server_set: Vec<String>,

    /// One tier of a system of several processes on this machine: its role, its
    /// processes, and `@smtp`/`@pop3` for the tier that answers --smtp/--pop3
    /// (`"POP proxy=1234@pop3"`, `"MMP=10+11+12"`). The report's System
    /// Configuration lists each tier's CPU time over each measurement window, its
    /// peak memory and what it handled. Repeat for each tier.
    #[arg(long, value_name = "ROLE=PID[+PID…][@smtp|@pop3]")]
    pub(crate) tier: Vec<String>,

    /// A line of description for a --tier's row (`"LDAP=slapd on 127.0.0.10"`).
    #[arg(long, value_name = "ROLE=TEXT")]
    pub(crate) tier_note: Vec<String>,

    /// What a --tier handled, from its log: the lines of FILE containing TEXT
    /// written during each measurement window count as LABEL
    /// (`"POP store 1=POP logins:logged in (:/tmp/store1.log"`).
    #[arg(long, value_name = "ROLE=LABEL:TEXT:FILE")]
    pub(crate) tier_count: Vec<String>,

    /// Write result.txt, result.json and result.html here.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,

    #[command(flatten)]
    pub(crate) archive: ArchiveArgs,
}

/// `stoa bench mail-users`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchMailUsersArgs {
    /// Accounts (`user1@DOMAIN` … `userN@DOMAIN`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) users: u32,

    /// The local domain.
    #[arg(long, value_name = "NAME", default_value = "stoa.test")]
    pub(crate) domain: String,

    /// Every account's password.
    #[arg(long, value_name = "PASSWORD", default_value = "stoa-bench")]
    pub(crate) password: String,

    /// `dovecot`: passwd-file lines `ADDRESS:{SCHEME}VALUE` (one hash of --scheme,
    /// Stoa's default costs, shared by every account; the strings
    /// `stoa user add --scheme` stores); `plain`: one address per line.
    #[arg(long, value_name = "FORMAT", default_value = "dovecot", value_parser = ["dovecot", "plain"])]
    pub(crate) format: String,

    /// The password scheme of the dovecot format: argon2id, sha512-crypt,
    /// blf-crypt, ssha or plain (written {PLAIN.BASE64}), any case.
    #[arg(long, value_name = "SCHEME", default_value = "argon2id", value_parser = parse_scheme)]
    pub(crate) scheme: Scheme,

    /// The file to write (replaced atomically).
    #[arg(long, value_name = "FILE")]
    pub(crate) out: PathBuf,
}

/// `stoa bench directory`.
#[derive(Debug, Clone, Args)]
pub(crate) struct BenchDirectoryArgs {
    /// A configuration file with a `[directory]` table (`backend = "ldap"`).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: PathBuf,

    /// Users in the directory: `user1@DOMAIN` … `userN@DOMAIN`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) users: u64,

    /// The users' domain.
    #[arg(long, value_name = "NAME", default_value = "stoa.test")]
    pub(crate) domain: String,

    /// Threads calling the directory at once, one run per value.
    #[arg(long, value_name = "C,C…", value_delimiter = ',', default_value = "1,64",
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub(crate) concurrency: Vec<u64>,

    /// Length of each run.
    #[arg(long, value_name = "DURATION", default_value = "20s")]
    pub(crate) duration: String,

    /// `off`: the directory's cache disabled, lookups of any user (cold);
    /// `on`: a hot set looked up once first, then lookups of it (warm).
    #[arg(long, value_name = "on|off", value_delimiter = ',', default_value = "off,on",
          value_parser = ["on", "off"])]
    pub(crate) cache: Vec<String>,

    /// Users in the warm runs' hot set (at most the configured cache_size).
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) hot_set: u64,

    /// Password checks to time, without the cache: `LABEL=LOGIN[,LOGIN…]`
    /// (e.g. `ssha=user1@stoa.test`); repeat for several.
    #[arg(long, value_name = "LABEL=LOGINS")]
    pub(crate) verify: Vec<String>,

    /// The password of the --verify users.
    #[arg(long, value_name = "PASSWORD", default_value = "stoa-bench")]
    pub(crate) password: String,

    /// Seed of the random choice of users.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub(crate) seed: u64,
}

fn parse_scheme(s: &str) -> Result<Scheme, String> {
    s.parse::<Scheme>().map_err(|e| e.to_string())
}

fn parse_positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

fn parse_ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{s:?} is not a number from 0 to 1")),
    }
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
    /// Set a user's password (read from standard input).
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

/// The mail directory of a `stoa user` command.
#[derive(Debug, Clone, Args)]
pub(crate) struct MailDirArgs {
    /// The mail directory (the users are in DIR/directory).
    #[arg(long, value_name = "DIR")]
    pub(crate) mail_dir: PathBuf,
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
    /// Read the password from the first line of standard input. Without it `add`
    /// creates a user who receives mail but cannot log in.
    #[arg(long)]
    pub(crate) password_stdin: bool,
    /// The password scheme of the hash: argon2id, sha512-crypt, blf-crypt, ssha
    /// or plain (any case; plain only where the configuration has
    /// allow_plain_passwords = true). Default: the configuration's
    /// `[directory] password_scheme`, else argon2id.
    #[arg(long, value_name = "SCHEME", value_parser = parse_scheme)]
    pub(crate) scheme: Option<Scheme>,
    /// The configuration whose `[directory]` password settings apply (scheme,
    /// costs, allow_plain_passwords; nothing else is read). Default:
    /// /etc/stoa/stoa.toml when it exists (STOA_DEFAULT_CONFIG names another
    /// default, for tests).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

/// `stoa mailbox …`.
#[derive(Debug, Subcommand)]
pub(crate) enum MailboxCommand {
    /// Messages and bytes in a user's mailbox.
    Stat(UserArgs),
    /// Copy a user's mailbox into a standard Maildir (tmp/new/cur), byte for byte,
    /// so the mail can be read by or moved to another server. The mailbox is left
    /// as it is.
    Export(MailboxExportArgs),
}

/// `stoa mailbox export`.
#[derive(Debug, Clone, Args)]
pub(crate) struct MailboxExportArgs {
    #[command(flatten)]
    pub(crate) user: UserArgs,
    /// The Maildir to write (created if missing; existing messages are kept).
    #[arg(long, value_name = "MAILDIR")]
    pub(crate) to: PathBuf,
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
    #[arg(long, value_name = "FORMAT")]
    pub(crate) log_format: Option<String>,

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
    #[arg(long, value_name = "MODEL")]
    pub(crate) runtime: Option<String>,

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
