//! Stoa's benchmark harness: what `stoa bench web|mail|mail-users|agent|directory|results|compare|ab|peers` runs.
//!
//! It owns the runs and their flags, not the command line: each harness's
//! option struct derives its flags (`#[derive(clap::Args)]`, each field's
//! documentation its help, the values parsed by `flags`), and the `stoa` binary
//! flattens them into its commands and hands the parsed structs back:
//!
//! - [`web`]: the SPECweb99-style run ([`web::Options`], [`web::run`]): validation,
//!   iterations of paced load (`stoa-loadgen`), the post.log audit, `--find-max`,
//!   and the built-in `stoa serve --web99` target over a cached file set.
//! - [`agent`]: the client daemon of a many-machine web or mail run
//!   ([`agent::Options`], [`agent::serve`]) and the prime's side of both
//!   (`--agents`).
//! - [`mail`]: the SPECmail2001-style run ([`mail::Options`], [`mail::run`]): the
//!   SMTP sink, the store fill and check, the load levels (`stoa-mailgen`), the
//!   QoS verdict, and the built-in `stoa serve` mail target; plus
//!   [`mail::write_users`] for measuring another server the same way.
//! - [`directory`]: `stoa bench directory` ([`directory::Options`],
//!   [`directory::run`]): lookups and password checks against a configured
//!   [`stoa_directory::Directory`] (the binary opens it), cold and warm cache.
//! - `report`: both benchmarks' reports from one document model (text on
//!   standard output; text, JSON and HTML with SVG charts in `--out`); the
//!   progress lines on standard error are the runners'.
//! - [`ab`]: `stoa bench ab`, two configurations in interleaved rounds of
//!   this binary's own `stoa bench web|mail` runs, judged by a sequential test.
//! - [`archive`]: every finished run's JSON with a description of the system
//!   it measured ([`archive::Keep`], `--archive`, `--label`), and the pages of
//!   `stoa bench results` and `stoa bench compare`; `stats` holds the
//!   intervals those comparisons print.
//! - [`peers`]: `stoa bench peers`, Stoa and other servers (nginx) started
//!   from generated configurations and compared in interleaved, pinned rounds,
//!   each server's CPU from its process tree; writes a result directory.
//! - [`cpus`]: `--harness-cpus` and `--server-cpus`, the harness's and the
//!   built-in server's CPUs ([`cpus::CpuList`]).
//!
//! It does not build the command line or read configuration files, write the file set
//! (the binary's `stoa fileset` does, through [`web::FilesetWriter`]), or serve:
//! the built-in targets are the `stoa` binary itself, started as `stoa serve`
//! (by default this process's executable: the harness runs inside `stoa`).
//!
//! # Errors
//!
//! The entry points return [`anyhow::Result`], a deliberate deviation from the
//! workspace's "typed errors in libraries": every error here is a message for the
//! person running the benchmark (a bad flag value, a target that does not answer,
//! a run that failed validation), printed by the binary and never matched by a
//! caller, and each carries the context of where in the run it happened. A typed
//! error would be one variant holding that same chain of messages.
//!
//! Figures are "SPECweb99-style" and "SPECmail2001-style", not SPEC results: SPEC,
//! SPECweb and SPECmail are trademarks of the Standard Performance Evaluation
//! Corporation.

pub mod ab;
pub mod agent;
pub mod archive;
mod compliance;
pub mod cpus;
pub mod directory;
mod flags;
pub mod mail;
pub mod peers;
mod proctree;
mod report;
mod stats;
pub mod web;

use std::path::{Path, PathBuf};
use std::time::Duration;

/// CPU time (user + system) of `pids` so far, from `/proc/PID/stat`; `None`
/// when there are none or one cannot be read.
pub(crate) fn cpu_of(pids: &[u32]) -> Option<Duration> {
    if pids.is_empty() {
        return None;
    }
    let mut total = 0u64;
    for &pid in pids {
        total += proctree::own_ticks(pid)?;
    }
    Some(proctree::ticks_to_duration(total))
}

/// The `stoa` binary a built-in target runs: `exe` when given, else this
/// process's executable (the harness runs inside `stoa`).
pub(crate) fn stoa_exe(exe: Option<&Path>) -> anyhow::Result<PathBuf> {
    match exe {
        Some(path) => Ok(path.to_owned()),
        None => anyhow::Context::context(std::env::current_exe(), "cannot find the stoa binary"),
    }
}

/// The harness's cache directory for `what` (`bench-web`, `bench-mail`):
/// `$XDG_CACHE_HOME/stoa/WHAT`, else `~/.cache/stoa/WHAT`, else under the
/// temporary directory.
pub(crate) fn cache_dir(what: &str) -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("stoa")
        .join(what)
}
