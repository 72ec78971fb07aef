//! `stoa check-config`: reads the configuration exactly as `stoa serve` would
//! (the same flags, the same default file), reports every error and warning on
//! standard error, and prints the effective configuration on standard output, a
//! TOML file `stoa serve --config` accepts back (`config::effective`). The exit
//! status is 0 when the configuration is valid, 2 when not, as for `nginx -t`.
//!
//! It also holds the refusal `stoa serve` gives an invalid configuration, so both
//! show the warnings beside the errors.

use std::cell::RefCell;
use std::io::Write as _;
use std::path::Path;

use anyhow::Context;

use crate::cli::ServeArgs;
use crate::config::{self, Loaded, Rejected};

/// Configuration errors, already printed; the process exits with status 2.
#[derive(Debug)]
pub(crate) struct InvalidConfig(pub(crate) usize);

impl std::fmt::Display for InvalidConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            1 => write!(f, "invalid configuration (1 error)"),
            n => write!(f, "invalid configuration ({n} errors)"),
        }
    }
}

impl std::error::Error for InvalidConfig {}

/// Checks the configuration `args` name (or the default file) and prints it.
pub(crate) fn run(args: &ServeArgs) -> anyhow::Result<()> {
    let args = config::with_default_file(args);
    let loaded = load(&args).map_err(refuse)?;
    for w in &loaded.warnings {
        eprintln!("stoa: warning: {w}");
    }
    let source = match &args.config {
        Some(file) => format!("{} and the flags", file.display()),
        None => "the flags alone (no configuration file)".to_owned(),
    };
    let roles = config::print::roles(&loaded);
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "# The effective configuration (stoa check-config): every setting, defaults\n\
         # filled in. Read from {source}.\n# Roles: {roles}.\n"
    )
    .and_then(|()| out.write_all(config::effective(&loaded).as_bytes()))
    .and_then(|()| out.flush())
    .context("cannot write the configuration to standard output")?;
    let warnings = match loaded.warnings.len() {
        0 => String::new(),
        1 => " (1 warning)".to_owned(),
        n => format!(" ({n} warnings)"),
    };
    eprintln!("stoa: the configuration is valid{warnings}");
    Ok(())
}

/// The configuration as `stoa serve` loads it; each error and warning about a
/// key of the file has the file and line of that key in front.
pub(crate) fn load(args: &ServeArgs) -> Result<Loaded, Rejected> {
    // The file's text as it was read, for the lines (not read twice: it could
    // have changed in between).
    let file = RefCell::new(None);
    let read = |p: &Path| {
        let text = std::fs::read_to_string(p);
        if args.config.as_deref() == Some(p)
            && let Ok(text) = &text
        {
            *file.borrow_mut() = Some(text.clone());
        }
        text
    };
    let loaded = config::load_all(args, read, &config::default_web99_state());
    let located = |messages: &mut [String]| {
        if let (Some(path), Some(text)) = (&args.config, &*file.borrow()) {
            config::locate::messages(path, text, messages);
        }
    };
    match loaded {
        Ok(mut loaded) => {
            located(&mut loaded.warnings);
            Ok(loaded)
        }
        Err(mut rejected) => {
            located(&mut rejected.errors);
            located(&mut rejected.warnings);
            Err(rejected)
        }
    }
}

/// Prints the warnings, then the errors (the reason last, next to the summary
/// `main` prints), and gives the exit-status-2 error.
#[allow(
    clippy::needless_pass_by_value,
    reason = "used as `map_err(refuse)`: the refusal is consumed"
)]
pub(crate) fn refuse(rejected: Rejected) -> anyhow::Error {
    for w in &rejected.warnings {
        eprintln!("stoa: warning: {w}");
    }
    for e in &rejected.errors {
        eprintln!("stoa: error: {e}");
    }
    InvalidConfig(rejected.errors.len()).into()
}
