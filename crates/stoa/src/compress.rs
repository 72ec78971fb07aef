//! `stoa compress DIR`: the precompressed siblings of a document root's text
//! files ([`stoa_web::precompress`] does the work), and a summary.

use anyhow::{Context, bail};
use stoa_web::config::CompressionConfig;
use stoa_web::precompress::{self, Options};

use crate::cli::CompressArgs;

/// Runs the command: every file it could not read or write is named on
/// standard error, the rest is done, and the exit status says whether any failed.
#[allow(clippy::print_stdout, reason = "the summary is the command's output")]
pub(crate) fn run(args: &CompressArgs) -> anyhow::Result<()> {
    let options = Options {
        codings: args.codings.clone(),
        min_length: args.min_length,
        types: CompressionConfig::default(),
        force: args.force,
    };
    let summary = precompress::compress_tree(&args.dir, &options)
        .with_context(|| format!("cannot compress {}", args.dir.display()))?;
    let ratio = if summary.bytes_in == 0 {
        String::new()
    } else {
        format!(
            " ({:.1} % of their files' size)",
            100.0 * summary.bytes_out as f64 / summary.bytes_in as f64
        )
    };
    println!("files:          {}", summary.files);
    println!("written:        {} siblings{ratio}", summary.written);
    println!("up to date:     {}", summary.up_to_date);
    println!("not smaller:    {} (none written)", summary.no_gain);
    for (path, e) in &summary.failed {
        eprintln!("stoa: {}: {e}", path.display());
    }
    if !summary.failed.is_empty() {
        bail!("{} paths could not be compressed", summary.failed.len());
    }
    Ok(())
}
