//! The reports of both benchmarks, from one document model.
//!
//! - `doc.rs`: the model, a [`doc::Document`] of headings, paragraphs, tables,
//!   lists, charts and preformatted text.
//! - `text.rs` and `html.rs`: one renderer per format (text tables aligned with
//!   spaces; HTML tables styled after the published result pages).
//! - `svg.rs`: the charts, as inline SVG for chart blocks, scaled to the page.
//! - `archive.rs`: the pages of `stoa bench results` and `stoa bench compare`;
//!   `disclose.rs`: a stored run as a full-disclosure page.
//! - `web/` and `mail/`: the builders of each benchmark's document from its run,
//!   and each run's JSON (a serialisation of the run's figures, not of the
//!   document).

pub(crate) mod archive;
pub(crate) mod disclose;
mod doc;
mod html;
pub(crate) mod mail;
mod svg;
mod text;
pub(crate) mod web;

use std::path::Path;

use anyhow::Context as _;

/// `n` and `singular` in the form the count takes: "1 iteration", "2
/// iterations" (for nouns whose plural adds an "s"; see [`plural`]).
pub(crate) fn count(n: u64, singular: &str) -> String {
    if n == 1 {
        format!("1 {singular}")
    } else {
        format!("{n} {singular}s")
    }
}

/// `singular` when `n` is 1, `plural` otherwise: for irregular plurals
/// ("mailbox", "mailboxes") and counts printed with separators.
pub(crate) fn plural<'a>(n: u64, singular: &'a str, plural: &'a str) -> &'a str {
    if n == 1 { singular } else { plural }
}

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

#[cfg(test)]
mod tests {
    #[test]
    fn counts_take_the_right_form() {
        assert_eq!(super::count(1, "iteration"), "1 iteration");
        assert_eq!(super::count(0, "error"), "0 errors");
        assert_eq!(super::count(2, "connection"), "2 connections");
        assert_eq!(super::plural(1, "mailbox", "mailboxes"), "mailbox");
        assert_eq!(super::plural(3, "mailbox", "mailboxes"), "mailboxes");
    }
}
