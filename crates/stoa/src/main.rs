//! The `stoa` binary: one command for the web server, the mail server (and its
//! users) and the benchmark harnesses.
//!
//! It stays thin: it parses the command line and configuration (`cli`, `config`),
//! builds the servers from the library crates, and turns signals and errors into
//! process behaviour. Everything that serves lives in `stoa-web` and below; the
//! benchmark harness lives in `stoa-bench`.

use std::process::ExitCode;

use clap::Parser;

/// mimalloc (stoa-alloc's docs say why, and why a server purges at once).
#[global_allocator]
static ALLOCATOR: stoa_alloc::Allocator = stoa_alloc::Allocator;

mod bench;
mod check_config;
mod cli;
mod compress;
mod config;
mod fileset;
mod man;
mod metrics;
mod privilege;
mod queue;
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
        cli::Command::Serve(args) => serve::run(&config::with_default_file(args)),
        cli::Command::CheckConfig(args) => check_config::run(args),
        cli::Command::Man(args) => man::run(args),
        cli::Command::Reload(args) => serve::signal_reload(&args.pid_file),
        cli::Command::User(command) => user::run(command),
        cli::Command::Mailbox(command) => user::mailbox(command),
        cli::Command::Queue(command) => queue::run(command),
        cli::Command::Fileset(args) => fileset::run(args),
        cli::Command::Compress(args) => compress::run(args),
        cli::Command::Web99Cgi => web99_cgi::run(),
        cli::Command::Bench(command) => bench::run(command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<check_config::InvalidConfig>() => {
            eprintln!("stoa: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("stoa: error: {}", chain(&e));
            ExitCode::FAILURE
        }
    }
}

/// `e` and its causes, `: `-separated, each cause left out when the text
/// before it already says it: the libraries' errors print their source in
/// their own message ("cannot listen on ADDR: Address already in use"), so
/// anyhow's `{:#}` said the reason twice.
fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// The error log: human-readable lines on standard error. `RUST_LOG` wins over
/// `--log-level` when set. Under journald (standard error is the stream that
/// `JOURNAL_STREAM` names) the lines carry no timestamp of their own: the journal
/// stamps each one.
fn init_tracing(level: &str) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if stderr_is_journal() {
        builder.without_time().init();
    } else {
        builder.init();
    }
}

/// Whether standard error is the journal's stream: `JOURNAL_STREAM` is
/// `DEVICE:INODE` of it (systemd.exec(5)), and a child whose standard error was
/// redirected elsewhere inherits the variable, so the two are compared.
fn stderr_is_journal() -> bool {
    let Some(value) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Ok(stat) = rustix::fs::fstat(std::io::stderr()) else {
        return false;
    };
    journal_stream_matches(&value.to_string_lossy(), stat.st_dev, stat.st_ino)
}

/// Whether `value` (`DEVICE:INODE`, decimal) names the file `dev`, `ino`.
fn journal_stream_matches(value: &str, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = value.split_once(':') else {
        return false;
    };
    d.parse() == Ok(dev) && i.parse() == Ok(ino)
}

#[cfg(test)]
mod journal_tests {
    #[test]
    fn journal_stream_is_device_and_inode() {
        assert!(super::journal_stream_matches("8:12345", 8, 12345));
        assert!(!super::journal_stream_matches("8:12345", 8, 12346));
        assert!(!super::journal_stream_matches("8:", 8, 0));
        assert!(!super::journal_stream_matches("12345", 8, 12345));
    }
}

#[cfg(test)]
mod chain_tests {
    /// Issue 21: "Address already in use (os error 98)" came twice.
    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use");
        #[derive(Debug)]
        struct Listen {
            source: std::io::Error,
        }
        impl std::fmt::Display for Listen {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "cannot listen on 127.0.0.1:80: {}", self.source)
            }
        }
        impl std::error::Error for Listen {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.source)
            }
        }
        let e = anyhow::Error::new(Listen { source: io }).context("cannot start the web server");
        assert_eq!(
            super::chain(&e),
            "cannot start the web server: cannot listen on 127.0.0.1:80: Address already in use"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(super::chain(&plain), "outer: inner");
    }
}
