//! What a `stoa bench mail` (or `mail-users`) run is asked to do: the binary's
//! flags, parsed.

use std::path::PathBuf;
use std::time::Duration;

use super::tiers::{TierCount, TierNote, TierSpec};

/// The phase lengths a run starts from (`--profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProfileName {
    /// Per level 10 s warm-up, 60 s measurement, 20 s cool-down.
    Quick,
    /// The white paper's 5 min, 60 min, 15 min.
    Standard,
}

/// A `stoa bench mail` run; each field is the flag of the same name.
#[derive(Debug, Clone)]
pub struct Options {
    /// The external server's SMTP service (`HOST:PORT`), with `pop3`; `None`
    /// for the built-in server.
    pub smtp: Option<String>,
    /// The external server's POP3 service (`HOST:PORT`), with `smtp`.
    pub pop3: Option<String>,
    /// The claimed rate, messages per minute; `None`: from `users`, or 20.
    pub rate: Option<f64>,
    /// Accounts in the store; `None`: 200 × rate.
    pub users: Option<u32>,
    /// A store of this many accounts whatever the rate (`--store-users`): below
    /// 200 × rate a declared, non-compliant store.
    pub store_users: Option<u32>,
    /// The local domain.
    pub domain: String,
    /// The domain the server relays to the sink.
    pub remote_domain: String,
    /// Every account's password.
    pub password: String,
    /// The password scheme of the built-in server's generated users.
    pub password_scheme: stoa_directory::Scheme,
    /// Where the sink listens; `None`: 127.0.0.1:2526 for an external server,
    /// any free port for the built-in one.
    pub sink_listen: Option<String>,
    /// Phase lengths.
    pub profile: ProfileName,
    /// Warm-up of each level, overriding the profile's.
    pub warmup: Option<Duration>,
    /// Measurement window of each level, overriding the profile's.
    pub run_time: Option<Duration>,
    /// Cool-down of each level, overriding the profile's.
    pub cooldown: Option<Duration>,
    /// Load levels, percent of the rate.
    pub levels: Vec<u32>,
    /// Search the highest rate whose 100 % level passes.
    pub find_max: bool,
    /// Only fill the store, check it and stop.
    pub init_only: bool,
    /// The fill's journal; `None`: [`default_journal`](super::default_journal)
    /// for the SMTP address.
    pub init_journal: Option<PathBuf>,
    /// Parallel SMTP connections of the fill.
    pub init_connections: u32,
    /// Mailboxes checked before the run.
    pub check_sample: u32,
    /// Share (0–1) of SMTP sessions carrying a delivery probe; `None`: the
    /// white paper's 1 %, at every rate.
    pub probe_share: Option<f64>,
    /// Time a reply may take before it counts as an error.
    pub reply_timeout: Duration,
    /// Load threads of the harness.
    pub threads: u32,
    /// `stoa bench agent` daemons (`HOST:PORT`) to run the load on.
    pub agents: Vec<String>,
    /// Longest wait after a level's cool-down; `None`: the profile's.
    pub drain_limit: Option<Duration>,
    /// The load's random seed; `None`: from the clock.
    pub seed: Option<u64>,
    /// The seed of the initial store's contents.
    pub store_seed: u64,
    /// The server's name in the report; `None`: Stoa's for the built-in one.
    pub server_software: Option<String>,
    /// Processes of an external server whose CPU time the report shows.
    pub server_pid: Vec<u32>,
    /// The CPUs the harness runs on (`--harness-cpus`); `None`: any.
    pub harness_cpus: Option<crate::cpus::CpuList>,
    /// The CPUs the built-in server runs on (`--server-cpus`); `None`: any.
    pub server_cpus: Option<crate::cpus::CpuList>,
    /// The system's tiers (`--tier`): processes by role, measured per level.
    pub tiers: Vec<TierSpec>,
    /// A line of description per tier (`--tier-note`).
    pub tier_notes: Vec<TierNote>,
    /// Log lines counted per tier and level (`--tier-count`).
    pub tier_counts: Vec<TierCount>,
    /// Where result.txt, result.json and result.html go.
    pub out: Option<PathBuf>,
    /// Settings of the built-in server's configuration (`--server-set
    /// TABLE.KEY=VALUE`), each value TOML.
    pub server_set: Vec<String>,
    /// The `stoa` binary the built-in server runs as `stoa serve`; `None`:
    /// this process's executable.
    pub server_exe: Option<PathBuf>,
    /// Where the finished run is archived, and under which label.
    pub archive: crate::archive::Keep,
}

/// How `stoa bench mail-users` writes the accounts (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsersFormat {
    /// Dovecot passwd-file lines `ADDRESS:{SCHEME}VALUE`.
    Dovecot,
    /// One address per line.
    Plain,
}

/// A `stoa bench mail-users` run; each field is the flag of the same name.
#[derive(Debug, Clone)]
pub struct UsersOptions {
    /// Accounts (`user1@DOMAIN` … `userN@DOMAIN`).
    pub users: u32,
    /// The local domain.
    pub domain: String,
    /// Every account's password.
    pub password: String,
    /// The file's format.
    pub format: UsersFormat,
    /// The password scheme of the dovecot format.
    pub scheme: stoa_directory::Scheme,
    /// The file to write (replaced atomically).
    pub out: PathBuf,
}

#[cfg(test)]
impl Options {
    /// `stoa bench mail` with no flags, as the binary's defaults make it.
    pub(crate) fn defaults() -> Options {
        Options {
            smtp: None,
            pop3: None,
            rate: None,
            users: None,
            store_users: None,
            domain: "stoa.test".into(),
            remote_domain: "remote.test".into(),
            password: "stoa-bench".into(),
            password_scheme: stoa_directory::Scheme::Argon2id,
            sink_listen: None,
            profile: ProfileName::Quick,
            warmup: None,
            run_time: None,
            cooldown: None,
            levels: vec![80, 100, 120],
            find_max: false,
            init_only: false,
            init_journal: None,
            init_connections: 8,
            check_sample: 200,
            probe_share: None,
            reply_timeout: Duration::from_secs(60),
            threads: 1,
            agents: Vec::new(),
            drain_limit: None,
            seed: None,
            store_seed: 2001,
            server_software: None,
            server_pid: Vec::new(),
            harness_cpus: None,
            server_cpus: None,
            tiers: Vec::new(),
            tier_notes: Vec::new(),
            tier_counts: Vec::new(),
            out: None,
            server_set: Vec::new(),
            server_exe: None,
            archive: crate::archive::Keep {
                off: true,
                ..crate::archive::Keep::default()
            },
        }
    }
}
