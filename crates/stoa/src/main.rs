//! The `stoa` binary: one command for the web server, the mail server (and its
//! users) and the benchmark harnesses.
//!
//! It stays thin: it parses the command line and configuration (`cli`, `config`),
//! builds the servers from the library crates, and turns signals and errors into
//! process behaviour. Everything that serves lives in `stoa-web` and below; the
//! benchmark harness lives in `stoa-bench`.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc rather than glibc's malloc: the servers allocate and free large
/// buffers on many threads (argon2's 19 MiB per login, multi-megabyte messages),
/// and glibc's per-thread arenas kept them: a `stoa bench mail` run at 100
/// msgs/min held 1.8 GB resident where 60 MB were live, and a login storm at
/// 1,500 msgs/min grew the server to 22 GB and got it OOM-killed. mimalloc returns
/// freed pages to the system.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod bench;
mod cli;
mod config;
mod fileset;
mod serve;
mod user;
mod web99_cgi;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    // With the `failpoints` feature, FAILPOINTS=name=action arms the mail queue's
    // crash points (stoa-smtp's crate docs).
    #[cfg(feature = "failpoints")]
    let _failpoints = fail::FailScenario::setup();
    init_tracing(&cli.log_level);
    let result = match &cli.command {
        cli::Command::Serve(args) => serve::run(args),
        cli::Command::User(command) => user::run(command),
        cli::Command::Mailbox(command) => user::mailbox(command),
        cli::Command::Fileset(args) => fileset::run(args),
        cli::Command::Web99Cgi => web99_cgi::run(),
        cli::Command::Bench(command) => bench::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<serve::InvalidConfig>() => {
            eprintln!("stoa: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("stoa: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The error log: human-readable lines on standard error. `RUST_LOG` wins over
/// `--log-level` when set.
fn init_tracing(level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
}
