//! What a `stoa bench mail` (or `mail-users`) run is asked to do: its flags,
//! derived here and flattened into the binary's command line.

use std::path::PathBuf;
use std::time::Duration;

use super::tiers::{TierCount, TierNote, TierSpec};

/// The phase lengths a run starts from (`--profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProfileName {
    /// Per level 10 s warm-up, 180 s measurement, 20 s cool-down; delivery
    /// probes raised so that every level has enough to judge.
    #[value(help = None::<&str>)]
    Quick,
    /// The white paper's 5 min, 60 min, 15 min.
    #[value(help = None::<&str>)]
    Standard,
}

/// How the mailboxes are read (`--access`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AccessName {
    /// POP3, as the kit.
    #[value(help = None::<&str>)]
    Pop3,
    /// IMAP, a non-compliant run.
    #[value(help = None::<&str>)]
    Imap,
}

impl AccessName {
    /// The load engine's value.
    pub fn access(self) -> stoa_mailgen::access::Access {
        match self {
            AccessName::Pop3 => stoa_mailgen::access::Access::Pop3,
            AccessName::Imap => stoa_mailgen::access::Access::Imap,
        }
    }
}

/// A `stoa bench mail` run; each field is the flag of the same name, and its
/// documentation the flag's help (the binary flattens these into `stoa bench mail`).
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// The server's SMTP service (`HOST:PORT`); with --pop3 (or --imap with
    /// --access imap). Default: a built-in `stoa serve` on loopback, filled
    /// and checked for the run.
    #[arg(long, value_name = "ADDR")]
    pub smtp: Option<String>,

    /// The server's POP3 service (`HOST:PORT`); with --smtp.
    #[arg(long, value_name = "ADDR", requires = "smtp", conflicts_with = "imap")]
    pub pop3: Option<String>,

    /// How the harness reads the mailboxes: `pop3` (the kit's) or `imap`, which
    /// replaces each POP3 check by its IMAP equivalent (LOGIN, SELECT INBOX,
    /// FETCH and STORE \Deleted of each message, EXPUNGE, LOGOUT), the delivery
    /// probes' polls and the store check too, with the same QoS arithmetic and
    /// rows named IMAP …; an IMAP run is non-compliant (the kit reads mail over
    /// POP3). The built-in server then listens for IMAP.
    #[arg(long, value_name = "PROTOCOL", value_enum, default_value = "pop3")]
    pub access: AccessName,

    /// The server's IMAP service (`HOST:PORT`, plain text, LOGIN allowed), read
    /// with --access imap; with --smtp.
    #[arg(long, value_name = "ADDR", requires = "smtp")]
    pub imap: Option<String>,

    /// The claimed rate, SPECmail2001-style messages per minute (the 100 %
    /// level); users = 200 × rate. Default: --users / 200, or 20 (4,000 users).
    #[arg(long, value_name = "MPM", value_parser = crate::flags::positive)]
    pub rate: Option<f64>,

    /// Accounts in the store (`user1@DOMAIN` … `userN@DOMAIN`); at least 200 ×
    /// rate. --find-max searches rates up to N / 200. Default 200 × rate.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub users: Option<u32>,

    /// Fill and use a store of N accounts whatever the rate: below 200 × rate
    /// a declared smaller store, and the run is non-compliant (every report
    /// says so and how). --find-max then searches the rate with the store
    /// fixed, up to what its retry pool holds (see the README).
    #[arg(long, value_name = "N", conflicts_with = "users",
          value_parser = clap::value_parser!(u32).range(10..))]
    pub store_users: Option<u32>,

    /// The local domain.
    #[arg(long, value_name = "NAME", default_value = "stoa.test")]
    pub domain: String,

    /// The remote domain: mail to it must be relayed by the server to the sink.
    #[arg(long, value_name = "NAME", default_value = "remote.test")]
    pub remote_domain: String,

    /// Every account's password.
    #[arg(long, value_name = "PASSWORD", default_value = "stoa-bench")]
    pub password: String,

    /// The password scheme of the built-in server's generated users: argon2id,
    /// sha512-crypt, blf-crypt, ssha or plain (any case; plain turns on the
    /// server's allow_plain_passwords). The report says which.
    #[arg(long, value_name = "SCHEME", default_value = "argon2id")]
    pub password_scheme: stoa_directory::Scheme,

    /// Where the harness's SMTP sink listens (the server relays remote mail
    /// here). Default 127.0.0.1:2526 for an external server; any free port for
    /// the built-in one.
    #[arg(long, value_name = "ADDR")]
    pub sink_listen: Option<String>,

    /// Phase lengths: `quick` (per level 10 s warm-up, 180 s measurement, 20 s
    /// cool-down, and delivery probes raised so that each level has enough to
    /// judge) or `standard` (the white paper's 5 min, 60 min, 15 min, 1 % probes).
    #[arg(long, value_name = "PROFILE", value_enum, default_value = "quick")]
    pub profile: ProfileName,

    /// Warm-up of each level, overriding the profile's (e.g. `30s`).
    #[arg(long, value_name = "DURATION", value_parser = crate::flags::duration)]
    pub warmup: Option<Duration>,

    /// Measurement window of each level, overriding the profile's.
    #[arg(long, value_name = "DURATION", value_parser = crate::flags::duration)]
    pub run_time: Option<Duration>,

    /// Cool-down of each level, overriding the profile's.
    #[arg(long, value_name = "DURATION", value_parser = crate::flags::duration)]
    pub cooldown: Option<Duration>,

    /// Load levels to run, percent of the rate.
    #[arg(long, value_name = "PERCENT,…", value_delimiter = ',', default_value = "80,100,120",
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub levels: Vec<u32>,

    /// Search the highest rate whose 100 % level passes (up to --users / 200).
    #[arg(long)]
    pub find_max: bool,

    /// Only fill the store to the steady state (by SMTP), check it and stop.
    /// Resumable: accounts already filled are in --init-journal.
    #[arg(long)]
    pub init_only: bool,

    /// The fill's journal (accounts done). Default `init-HOST:PORT.journal`
    /// (the --smtp address) in the harness's cache directory,
    /// `$XDG_CACHE_HOME/stoa/bench-mail` or `~/.cache/stoa/bench-mail`.
    #[arg(long, value_name = "FILE")]
    pub init_journal: Option<PathBuf>,

    /// Parallel SMTP connections of the fill.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub init_connections: u32,

    /// Mailboxes whose contents are checked before the run.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub check_sample: u32,

    /// Share (0–1) of SMTP sessions carrying a delivery probe. Default: the white
    /// paper's 0.01 in the standard profile; the quick profile raises it so that
    /// its lowest level expects 80 probes (0.88 at 20 msgs/min). With fewer than
    /// 59 probes in a level its Delivery Time row is reported as too few probes
    /// to judge.
    #[arg(long, value_name = "RATIO", value_parser = crate::flags::ratio)]
    pub probe_share: Option<f64>,

    /// Time a reply may take before it counts as an error (60 s in the white
    /// paper).
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = crate::flags::duration)]
    pub reply_timeout: Duration,

    /// Load threads of the harness.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: u32,

    /// Run the four streams on these `stoa bench agent` daemons (`HOST:PORT,…`)
    /// instead of in this process: each sends an even share of the SMTP
    /// sessions and checks its own share of the mailboxes. This process keeps
    /// the sink, the store's fill and check, the delivery probes, the QoS tally
    /// and the one report. The agents must reach --smtp and --pop3 (or
    /// --imap; the built-in server listens on loopback: agents on this
    /// machine only).
    #[arg(long, value_name = "ADDR,…", value_delimiter = ',')]
    pub agents: Vec<String>,

    /// Longest wait after a level's cool-down for its judged sessions and
    /// probes (default: 2 min for the quick profile, 20 min for standard).
    #[arg(long, value_name = "DURATION", hide = true, value_parser = crate::flags::duration)]
    pub drain_limit: Option<Duration>,

    /// The random seed of the load (the store's fill uses --store-seed).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,

    /// The seed of the initial store's contents.
    #[arg(long, value_name = "N", default_value_t = 2001)]
    pub store_seed: u64,

    /// The server's name in the report. Default: Stoa's version for the built-in
    /// server, "unnamed server" otherwise.
    #[arg(long, value_name = "TEXT")]
    pub server_software: Option<String>,

    /// Processes of the server under test whose CPU time the report shows (same
    /// machine; the built-in server is measured without it).
    #[arg(long, value_name = "PID")]
    pub server_pid: Vec<u32>,

    /// Run the harness on these CPUs only (a `taskset -c` list: `1`, `2-3`,
    /// `0,2`); the report then judges its CPU share against them and calls a
    /// trial where it passed 70 % harness-bound.
    #[arg(long, value_name = "LIST")]
    pub harness_cpus: Option<crate::cpus::CpuList>,

    /// Run the built-in server on these CPUs only (a `taskset -c` list); pin an
    /// external server with `taskset -c LIST` when starting it.
    #[arg(long, value_name = "LIST", conflicts_with = "smtp")]
    pub server_cpus: Option<crate::cpus::CpuList>,

    /// A setting of the built-in server's configuration, `TABLE.KEY=VALUE` with
    /// a TOML value (`smtp.max_deliveries=100`, `directory.cache_ttl="0s"`),
    /// repeatable; the report's server name lists them. Not the keys the
    /// harness itself sets (listeners, mail_dir, domains, relay_host,
    /// trusted_networks, the password scheme: --password-scheme).
    #[arg(long, value_name = "TABLE.KEY=VALUE", conflicts_with = "smtp")]
    pub server_set: Vec<String>,

    /// One tier of a system of several processes on this machine: its role, its
    /// processes, and `@smtp`/`@pop3` for the tier that answers --smtp/--pop3
    /// (`"POP proxy=1234@pop3"`, `"MMP=10+11+12"`). The report's System
    /// Configuration lists each tier's CPU time over each measurement window, its
    /// peak memory and what it handled. Repeat for each tier.
    #[arg(long = "tier", value_name = "ROLE=PID[+PID…][@smtp|@pop3]")]
    pub tiers: Vec<TierSpec>,

    /// A line of description for a --tier's row (`"LDAP=slapd on 127.0.0.10"`).
    #[arg(long = "tier-note", value_name = "ROLE=TEXT")]
    pub tier_notes: Vec<TierNote>,

    /// What a --tier handled, from its log: the lines of FILE containing TEXT
    /// written during each measurement window count as LABEL
    /// (`"POP store 1=POP logins:logged in (:/tmp/store1.log"`).
    #[arg(long = "tier-count", value_name = "ROLE=LABEL:TEXT:FILE")]
    pub tier_counts: Vec<TierCount>,

    /// Write result.txt, result.json and result.html here.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Where the finished run is archived, and under which label.
    #[command(flatten)]
    pub archive: crate::archive::Keep,

    /// The `stoa` binary the built-in server runs as `stoa serve`; `None`:
    /// this process's executable. Not a flag.
    #[arg(skip)]
    pub server_exe: Option<PathBuf>,
}

/// How `stoa bench mail-users` writes the accounts (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum UsersFormat {
    /// Dovecot passwd-file lines `ADDRESS:{SCHEME}VALUE`.
    #[value(help = None::<&str>)]
    Dovecot,
    /// One address per line.
    #[value(help = None::<&str>)]
    Plain,
}

/// A `stoa bench mail-users` run; each field is the flag of the same name, and
/// its documentation the flag's help.
#[derive(Debug, Clone, clap::Args)]
pub struct UsersOptions {
    /// Accounts (`user1@DOMAIN` … `userN@DOMAIN`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub users: u32,

    /// The local domain.
    #[arg(long, value_name = "NAME", default_value = "stoa.test")]
    pub domain: String,

    /// Every account's password.
    #[arg(long, value_name = "PASSWORD", default_value = "stoa-bench")]
    pub password: String,

    /// `dovecot`: passwd-file lines `ADDRESS:{SCHEME}VALUE` (one hash of --scheme,
    /// Stoa's default costs, shared by every account; the strings
    /// `stoa user add --scheme` stores); `plain`: one address per line.
    #[arg(long, value_name = "FORMAT", value_enum, default_value = "dovecot")]
    pub format: UsersFormat,

    /// The password scheme of the dovecot format: argon2id, sha512-crypt,
    /// blf-crypt, ssha or plain (written {PLAIN.BASE64}), any case.
    #[arg(long, value_name = "SCHEME", default_value = "argon2id")]
    pub scheme: stoa_directory::Scheme,

    /// The file to write (replaced atomically).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

#[cfg(test)]
impl Options {
    /// `stoa bench mail` with no flags but `--no-archive`: the flags' defaults.
    pub(crate) fn defaults() -> Options {
        use clap::{Args as _, FromArgMatches as _};
        let command = Options::augment_args(clap::Command::new("mail"));
        let matches = command.get_matches_from(["mail", "--no-archive"]);
        Options::from_arg_matches(&matches).expect("invariant: the defaults parse")
    }
}
