//! Records what the binary is built from, for `stoa_build_info`: the git
//! revision (`STOA_REVISION`, `unknown` outside a checkout or without git; a
//! packager may set it in the environment) and the compiler (`STOA_RUSTC`).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    // Without it, a build outside a checkout would rerun on every change.
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=STOA_REVISION");
    let revision = std::env::var("STOA_REVISION")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(git_revision)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=STOA_REVISION={revision}");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let version = output(Command::new(rustc).arg("--version"))
        .and_then(|v| v.split_whitespace().nth(1).map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=STOA_RUSTC={version}");
}

/// The short revision of the checkout's `HEAD`, and the files that change with
/// it watched, so a new commit rebuilds the label.
fn git_revision() -> Option<String> {
    let git = |args: &[&str]| output(Command::new("git").args(args));
    let revision = git(&["rev-parse", "--short=12", "HEAD"])?;
    for path in [
        git(&["rev-parse", "--git-path", "HEAD"]),
        git(&["rev-parse", "--git-path", "packed-refs"]),
        git(&["rev-parse", "--symbolic-full-name", "HEAD"])
            .and_then(|r| git(&["rev-parse", "--git-path", &r])),
    ]
    .into_iter()
    .flatten()
    {
        let path = PathBuf::from(path);
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    Some(revision)
}

/// What `command` prints, trimmed, when it succeeds.
fn output(command: &mut Command) -> Option<String> {
    let out = command.output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_owned())
}
