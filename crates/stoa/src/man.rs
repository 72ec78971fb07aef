//! `stoa man --dir DIR`: the manual pages, generated from the clap definitions
//! of [`crate::cli`] with `clap_mangen`: `stoa.1`, and one page per subcommand
//! (`stoa-serve.1`, `stoa-bench-mail.1`, …), hidden ones left out.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, ManArgs};

/// Writes every page into `args.dir` (created if missing) and names them on
/// standard error.
pub(crate) fn run(args: &ManArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let pages = write_pages(cmd, &args.dir)?;
    eprintln!(
        "stoa: wrote {} manual pages in {}",
        pages.len(),
        args.dir.display()
    );
    Ok(())
}

/// The page of `cmd` and of each of its subcommands, depth first; the files
/// written.
fn write_pages(cmd: clap::Command, dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        written.extend(write_pages(sub.clone(), dir)?);
    }
    let man = clap_mangen::Man::new(cmd);
    let file = dir.join(man.get_filename());
    let mut page = Vec::new();
    man.render(&mut page)
        .with_context(|| format!("cannot render {}", file.display()))?;
    std::fs::write(&file, page).with_context(|| format!("cannot write {}", file.display()))?;
    written.push(file);
    Ok(written)
}
