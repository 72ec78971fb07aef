//! `stoa bench directory`: how fast the mail servers' [`Directory`] answers, as
//! they call it: lookups of random users (and optionally password checks) from
//! C threads at once for a bounded time, with throughput and latency
//! percentiles.
//!
//! The users are the harness's usual `user1@DOMAIN` … `userN@DOMAIN` (the LDIF
//! `bench/ldap-directory.sh` loads into slapd has exactly these). Two cache
//! modes, each a fresh directory from the caller's [`Open`]:
//!
//! - [`Cache::Off`] ("cold"): the directory's own cache disabled, addresses drawn
//!   from all N users, so every lookup is an LDAP search. This is the cost of a
//!   miss; the LDAP server's caches are whatever the earlier runs left.
//! - [`Cache::On`] ("warm"): a hot set of H users (H no larger than the cache) is
//!   looked up once, untimed, and the measured lookups are drawn from it, so they
//!   are answered from memory: the cost of a hit.
//!
//! It does not build the directory (the `stoa` binary reads the configuration
//! and opens the backend), generate the LDIF, or manage the LDAP server.

use std::io::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use stoa_directory::Directory;
use stoa_latency::Latency;

#[cfg(test)]
mod tests;

/// Whether the directory's own cache of answers is used (`--cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Cache {
    /// The configured cache, warmed with the hot set first ("warm").
    #[value(help = None::<&str>)]
    On,
    /// No cache: every lookup asks the backend ("cold").
    #[value(help = None::<&str>)]
    Off,
}

impl Cache {
    fn label(self) -> &'static str {
        match self {
            Cache::Off => "cold (cache off)",
            Cache::On => "warm (hot set cached)",
        }
    }
}

/// Opens a fresh directory with or without its cache.
pub type Open<'a> = &'a dyn Fn(Cache) -> anyhow::Result<Arc<dyn Directory>>;

/// Password checks to time: every check is of one of `logins`, in turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyCase {
    /// What the row is called (the password scheme, say `ssha`).
    pub label: String,
    /// The users checked; all have the run's password.
    pub logins: Vec<String>,
}

/// What to measure: the flags of `stoa bench directory` (but `--config`, which
/// the binary reads), each field's documentation its help.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Users in the directory: `user1@DOMAIN` … `userN@DOMAIN`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub users: u64,

    /// The users' domain.
    #[arg(long, value_name = "NAME", default_value = "stoa.test")]
    pub domain: String,

    /// Threads calling the directory at once, one run per value.
    #[arg(long, value_name = "C,C…", value_delimiter = ',', default_value = "1,64",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=4096))]
    pub concurrency: Vec<usize>,

    /// Length of each run.
    #[arg(long, value_name = "DURATION", default_value = "20s", value_parser = crate::flags::duration)]
    pub duration: Duration,

    /// `off`: the directory's cache disabled, lookups of any user (cold);
    /// `on`: a hot set looked up once first, then lookups of it (warm).
    #[arg(
        long,
        value_name = "on|off",
        value_enum,
        value_delimiter = ',',
        default_value = "off,on"
    )]
    pub cache: Vec<Cache>,

    /// Users in the warm runs' hot set (at most the configured cache_size).
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub hot_set: u64,

    /// Password checks to time, without the cache: `LABEL=LOGIN[,LOGIN…]`
    /// (e.g. `ssha=user1@stoa.test`); repeat for several.
    #[arg(long, value_name = "LABEL=LOGINS", value_parser = parse_verify)]
    pub verify: Vec<VerifyCase>,

    /// The password of the --verify users.
    #[arg(long, value_name = "PASSWORD", default_value = "stoa-bench")]
    pub password: String,

    /// Seed of the random choice of users.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
}

/// The address of user `n` (1-based), as the LDIF has it.
pub fn address(n: u64, domain: &str) -> String {
    format!("user{n}@{domain}")
}

/// Reads `LABEL=LOGIN[,LOGIN…]` (the `--verify` flag).
pub fn parse_verify(text: &str) -> anyhow::Result<VerifyCase> {
    let Some((label, logins)) = text.split_once('=') else {
        bail!("expected LABEL=LOGIN[,LOGIN...]");
    };
    let logins: Vec<String> = logins
        .split(',')
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    if label.is_empty() || logins.is_empty() {
        bail!("expected LABEL=LOGIN[,LOGIN...]");
    }
    Ok(VerifyCase {
        label: label.to_owned(),
        logins,
    })
}

/// One timed run.
#[derive(Debug, Clone)]
pub struct Measurement {
    /// What was measured (cache mode or password scheme).
    pub case: String,
    /// Threads at once.
    pub concurrency: usize,
    /// Calls that returned a user.
    pub ok: u64,
    /// Calls that returned no user (a lookup's address, or a password, wrong).
    pub misses: u64,
    /// Calls that failed (the backend did not answer); not in `latency`.
    pub errors: u64,
    /// The first error's message, if any.
    pub first_error: Option<String>,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Times of the calls that did not fail.
    pub latency: Latency,
}

impl Measurement {
    /// Answered calls (found or not) per second.
    pub fn rate(&self) -> f64 {
        (self.ok + self.misses) as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Runs every combination, printing a table on standard output as it goes.
pub fn run(options: &Options, open: Open<'_>) -> anyhow::Result<Vec<Measurement>> {
    check(options)?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "directory: {} users (user1..user{}@{}), {:?} per run",
        options.users, options.users, options.domain, options.duration
    )?;
    writeln!(out, "{}", header())?;
    let mut all = Vec::new();
    for &cache in &options.cache {
        let dir = open(cache).with_context(|| format!("cannot open the directory ({cache:?})"))?;
        let hot = match cache {
            Cache::On => warm(dir.as_ref(), options)?,
            Cache::Off => Vec::new(),
        };
        for &c in &options.concurrency {
            let m = lookups(&dir, options, cache, &hot, c);
            writeln!(out, "{}", row(&m))?;
            all.push(m);
        }
    }
    if !options.verify.is_empty() {
        let dir = open(Cache::Off).context("cannot open the directory (cache off)")?;
        for case in &options.verify {
            for &c in &options.concurrency {
                let m = verifies(&dir, options, case, c);
                writeln!(out, "{}", row(&m))?;
                all.push(m);
            }
        }
    }
    judge(&all)?;
    Ok(all)
}

fn check(options: &Options) -> anyhow::Result<()> {
    if options.users == 0 {
        bail!("--users must be at least 1");
    }
    if options.concurrency.is_empty() || options.concurrency.contains(&0) {
        bail!("--concurrency needs values of at least 1");
    }
    if options.duration.is_zero() {
        bail!("--duration must be longer than 0");
    }
    Ok(())
}

/// A run whose calls all failed, or whose lookups never found anyone, measured
/// nothing: an error rather than a table of zeros.
fn judge(all: &[Measurement]) -> anyhow::Result<()> {
    for m in all {
        if m.ok == 0 {
            let why = m.first_error.as_deref().unwrap_or(
                "nobody was found: do --users and --domain match the directory's entries?",
            );
            bail!("{} at concurrency {}: {why}", m.case, m.concurrency);
        }
    }
    Ok(())
}

/// The hot set, each of its users looked up once so that the cache holds it.
fn warm(dir: &dyn Directory, options: &Options) -> anyhow::Result<Vec<String>> {
    let size = options.hot_set.clamp(1, options.users);
    let mut rng = fastrand::Rng::with_seed(options.seed ^ 0x486f_7453);
    let hot: Vec<String> = (0..size)
        .map(|_| address(1 + rng.u64(..options.users), &options.domain))
        .collect();
    for a in &hot {
        dir.lookup(a)
            .with_context(|| format!("warming the cache: lookup of {a}"))?;
    }
    Ok(hot)
}

/// Lookups of random users (of all, or of the hot set) from `c` threads.
fn lookups(
    dir: &Arc<dyn Directory>,
    options: &Options,
    cache: Cache,
    hot: &[String],
    c: usize,
) -> Measurement {
    let (users, domain) = (options.users, options.domain.as_str());
    let pick = |rng: &mut fastrand::Rng| match cache {
        Cache::On => hot[rng.usize(..hot.len())].clone(),
        Cache::Off => address(1 + rng.u64(..users), domain),
    };
    let call = |a: &str| dir.lookup(a).map(|u| u.is_some());
    let mut m = measure(c, options.duration, options.seed, pick, call);
    m.case = format!("lookup, {}", cache.label());
    m
}

/// Password checks of `case`'s users in turn from `c` threads.
fn verifies(
    dir: &Arc<dyn Directory>,
    options: &Options,
    case: &VerifyCase,
    c: usize,
) -> Measurement {
    let pick = |rng: &mut fastrand::Rng| case.logins[rng.usize(..case.logins.len())].clone();
    let call = |login: &str| {
        dir.verify_password(login, &options.password)
            .map(|u| u.is_some())
    };
    let mut m = measure(c, options.duration, options.seed, pick, call);
    m.case = format!("verify_password {}, cache off", case.label);
    m
}

/// What one thread counted.
#[derive(Default)]
struct Tally {
    ok: u64,
    misses: u64,
    errors: u64,
    first_error: Option<String>,
    latency: Latency,
}

/// Calls `call(pick())` from `c` threads until `duration` has passed; `call`
/// answers whether it found what it looked for.
fn measure<P, F, E>(c: usize, duration: Duration, seed: u64, pick: P, call: F) -> Measurement
where
    P: Fn(&mut fastrand::Rng) -> String + Sync,
    F: Fn(&str) -> Result<bool, E> + Sync,
    E: std::fmt::Display,
{
    let start = Instant::now();
    let deadline = start + duration;
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..c)
            .map(|i| {
                let (pick, call) = (&pick, &call);
                s.spawn(move || worker(seed.wrapping_add(i as u64), deadline, pick, call))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .expect("invariant: a measuring thread does not panic")
            })
            .collect()
    });
    let elapsed = start.elapsed();
    let mut m = Measurement {
        case: String::new(),
        concurrency: c,
        ok: 0,
        misses: 0,
        errors: 0,
        first_error: None,
        elapsed,
        latency: Latency::default(),
    };
    for t in tallies {
        m.ok += t.ok;
        m.misses += t.misses;
        m.errors += t.errors;
        m.first_error = m.first_error.or(t.first_error);
        m.latency.merge(&t.latency);
    }
    m
}

/// One thread's calls until `deadline`.
fn worker<P, F, E>(seed: u64, deadline: Instant, pick: &P, call: &F) -> Tally
where
    P: Fn(&mut fastrand::Rng) -> String,
    F: Fn(&str) -> Result<bool, E>,
    E: std::fmt::Display,
{
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut t = Tally::default();
    while Instant::now() < deadline {
        let key = pick(&mut rng);
        let began = Instant::now();
        let result = call(&key);
        let ms = began.elapsed().as_secs_f64() * 1000.0;
        match result {
            Ok(found) => {
                t.latency.record_ms(ms);
                *(if found { &mut t.ok } else { &mut t.misses }) += 1;
            }
            Err(e) => {
                t.errors += 1;
                t.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    t
}

/// The table's column names.
pub fn header() -> String {
    format!(
        "{:<38} {:>4} {:>9} {:>10} {:>8} {:>8} {:>8} {:>8} {:>7} {:>6}",
        "case",
        "conc",
        "calls",
        "calls/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "misses",
        "errors"
    )
}

/// One measurement as a table row.
pub fn row(m: &Measurement) -> String {
    let l = &m.latency;
    let mut line = format!(
        "{:<38} {:>4} {:>9} {:>10.0} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>7} {:>6}",
        m.case,
        m.concurrency,
        m.ok + m.misses,
        m.rate(),
        l.quantile_ms(0.50),
        l.quantile_ms(0.90),
        l.quantile_ms(0.99),
        l.max_ms(),
        m.misses,
        m.errors
    );
    if let Some(e) = &m.first_error {
        line.push_str(&format!("  (first error: {e})"));
    }
    line
}
