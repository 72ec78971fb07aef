//! The reports of both benchmarks, from one document model.
//!
//! - `doc.rs`: the model, a [`doc::Document`] of headings, paragraphs, tables,
//!   lists, charts and preformatted text.
//! - `text.rs` and `html.rs`: one renderer per format (the text in the mail
//!   pages' aligned layout or the web pages' tab-separated one).
//! - `svg.rs`: the charts, as inline SVG for chart blocks.
//! - `web/` and `mail/`: the builders of each benchmark's document from its run,
//!   and each run's JSON (a serialisation of the run's figures, not of the
//!   document).

mod doc;
mod html;
pub(crate) mod mail;
mod svg;
mod text;
pub(crate) mod web;

use std::path::Path;

use anyhow::Context as _;

/// Writes `files` (name, contents) into `dir`, created if missing.
fn write_files(dir: &Path, files: &[(&str, &str)]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    for (name, contents) in files {
        let path = dir.join(name);
        std::fs::write(&path, contents)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
