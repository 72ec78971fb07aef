//! `stoa man --dir DIR`: the manual pages, generated from the clap definitions
//! of [`crate::cli`] with `clap_mangen`: `stoa.1`, and one page per subcommand
//! (`stoa-serve.1`, `stoa-bench-mail.1`, …), hidden ones left out. `stoa.1` and
//! `stoa-serve.1` add SIGNALS, FILES, EXAMPLES and SEE ALSO.
//!
//! `stoa.toml(5)`, the configuration file, is `docs/configuration.md` (built
//! into the binary) turned into roff: one text for the web and the manual. It
//! goes to the `man5` directory beside `DIR` when `DIR` is a `man1` directory
//! (`/usr/local/share/man/man1` → `…/man5/stoa.toml.5`), else into `DIR`.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;
use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use roff::{Inline, Roff, bold, italic, line_break, roman};

use crate::cli::{Cli, ManArgs};

/// Writes every page into `args.dir` (created if missing) and names them on
/// standard error.
pub(crate) fn run(args: &ManArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let mut cmd = Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut pages = write_pages(cmd, &args.dir)?;
    let man5 = match args.dir.file_name() {
        Some(name) if name == "man1" => args.dir.with_file_name("man5"),
        _ => args.dir.clone(),
    };
    std::fs::create_dir_all(&man5).with_context(|| format!("cannot create {}", man5.display()))?;
    let file = man5.join("stoa.toml.5");
    std::fs::write(&file, config_page())
        .with_context(|| format!("cannot write {}", file.display()))?;
    pages.push(file);
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
    let subcommands = cmd.has_subcommands();
    let man = clap_mangen::Man::new(cmd);
    let filename = man.get_filename();
    let file = dir.join(&filename);
    // The command and its server get our sections after clap's.
    let extra = match filename.trim_end_matches(".1") {
        "stoa" => Some(COMMON_EXTRA.to_owned()),
        "stoa-serve" => Some(format!("{SERVE_EXTRA}{COMMON_EXTRA}")),
        _ => None,
    };
    let mut page = Vec::new();
    match extra {
        Some(extra) => render_with(&man, subcommands, &extra, &mut page),
        None => man.render(&mut page),
    }
    .with_context(|| format!("cannot render {}", file.display()))?;
    std::fs::write(&file, page).with_context(|| format!("cannot write {}", file.display()))?;
    written.push(file);
    Ok(written)
}

/// clap's sections of `man` (SUBCOMMANDS when it has `subcommands`), then
/// `extra` (Markdown, [`sections`]), then VERSION.
fn render_with(
    man: &clap_mangen::Man,
    subcommands: bool,
    extra: &str,
    page: &mut Vec<u8>,
) -> std::io::Result<()> {
    man.render_title(page)?;
    man.render_name_section(page)?;
    man.render_synopsis_section(page)?;
    man.render_description_section(page)?;
    man.render_options_section(page)?;
    if subcommands {
        man.render_subcommands_section(page)?;
    }
    page.extend(sections(extra).as_bytes());
    man.render_version_section(page)
}

/// SIGNALS and EXAMPLES of `stoa serve`, in the Markdown [`sections`] reads.
const SERVE_EXTRA: &str = "\
## Signals

- SIGTERM, SIGINT: stop accepting, let the requests and mail sessions in flight finish (at most `shutdown_grace`, 30 s by default), then exit 0.
- SIGHUP: read the configuration again (as `stoa reload --pid-file F` does) and reopen the log files. A configuration with an error is refused and logged; the running one stays.

## Examples

```sh
stoa serve --docroot /srv/www --listen 0.0.0.0:8080
stoa serve --config /etc/stoa/stoa.toml --pid-file /run/stoa.pid
stoa check-config --config /etc/stoa/stoa.toml
stoa reload --pid-file /run/stoa.pid
```
";

/// FILES and SEE ALSO of `stoa` and `stoa serve`.
const COMMON_EXTRA: &str = "\
## Files

- `/etc/stoa/stoa.toml`: the configuration file read without `--config` (stoa.toml(5)).
- `/var/lib/stoa/mail`: the mail directory of the examples: `directory/`, the users; `store/`, the messages; `queue/`, mail waiting to be delivered.
- `/run/stoa.pid`: the process id, with `--pid-file` (the path is the operator's choice).

## See also

stoa.toml(5), stoa-serve(1), stoa-check-config(1), stoa-user(1), stoa-queue(1), stoa-bench-web(1), stoa-bench-mail(1)
";

/// A request without arguments.
const NO_ARGS: [&str; 0] = [];

/// `stoa.toml(5)`: `docs/configuration.md` in roff.
fn config_page() -> String {
    let source = format!("stoa {}", env!("CARGO_PKG_VERSION"));
    let mut page = Roff::new();
    // Title, section, date (none), source, manual.
    page.control("TH", ["STOA.TOML", "5", "", &source, "File Formats"]);
    page.control("SH", ["NAME"]);
    page.text([roman("stoa.toml - the configuration file of stoa serve")]);
    let mut text = page.render();
    text.push_str(&sections(include_str!("../../../docs/configuration.md")));
    text
}

/// Markdown (`#` a DESCRIPTION, `##` a section, `###` a subsection, paragraphs,
/// lists, code blocks, tables) as roff. A table row becomes a tagged paragraph:
/// its first cell the tag, each other cell a line `header: cell`, the last one
/// as it is.
fn sections(markdown: &str) -> String {
    let mut page = Roff::new();
    // The inline text being gathered, and the fonts open around it.
    let mut inlines: Vec<Inline> = Vec::new();
    let (mut strong, mut emphasis) = (false, false);
    let mut code_block: Option<String> = None;
    let mut table: Option<Table> = None;
    let mut heading = HeadingLevel::H1;
    for event in Parser::new_ext(markdown, Options::ENABLE_TABLES) {
        match event {
            Event::Start(Tag::Heading { level, .. }) => heading = level,
            Event::End(TagEnd::Heading(_)) => {
                let title = plain(&std::mem::take(&mut inlines));
                match heading {
                    HeadingLevel::H1 => page.control("SH", ["DESCRIPTION"]),
                    HeadingLevel::H2 => page.control("SH", [title.to_uppercase().as_str()]),
                    _ => page.control("SS", [title.as_str()]),
                };
            }
            Event::Start(Tag::Paragraph | Tag::Item) => inlines.clear(),
            Event::End(TagEnd::Paragraph) if table.is_none() && !inlines.is_empty() => {
                page.control("PP", NO_ARGS)
                    .text(std::mem::take(&mut inlines));
            }
            Event::End(TagEnd::Item) => {
                page.control("IP", ["\\(bu", "2"])
                    .text(std::mem::take(&mut inlines));
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(_) | CodeBlockKind::Indented)) => {
                code_block = Some(String::new());
            }
            Event::End(TagEnd::CodeBlock) => {
                let code = code_block.take().unwrap_or_default();
                page.control("PP", NO_ARGS)
                    .control("RS", ["4"])
                    .control("nf", NO_ARGS);
                page.text([roman(code.trim_end())]);
                page.control("fi", NO_ARGS).control("RE", NO_ARGS);
            }
            Event::Start(Tag::Table(_)) => table = Some(Table::default()),
            Event::End(TagEnd::TableCell) => {
                if let Some(t) = &mut table {
                    t.row.push(std::mem::take(&mut inlines));
                }
            }
            Event::End(TagEnd::TableHead) => {
                if let Some(t) = &mut table {
                    t.header = std::mem::take(&mut t.row)
                        .iter()
                        .map(|c| plain(c))
                        .collect();
                }
            }
            Event::End(TagEnd::TableRow) => {
                if let Some(t) = &mut table {
                    t.write_row(&mut page);
                }
            }
            Event::End(TagEnd::Table) => table = None,
            Event::Start(Tag::Strong) => strong = true,
            Event::End(TagEnd::Strong) => strong = false,
            Event::Start(Tag::Emphasis) => emphasis = true,
            Event::End(TagEnd::Emphasis) => emphasis = false,
            Event::Text(t) => match &mut code_block {
                Some(code) => code.push_str(&t),
                None if strong => inlines.push(bold(t.into_string())),
                None if emphasis => inlines.push(italic(t.into_string())),
                None => inlines.push(roman(t.into_string())),
            },
            Event::Code(c) => inlines.push(bold(c.into_string())),
            Event::SoftBreak => inlines.push(roman(" ")),
            Event::HardBreak => inlines.push(line_break()),
            _ => {}
        }
    }
    page.render()
}

/// A Markdown table being turned into tagged paragraphs.
#[derive(Default)]
struct Table {
    /// The header cells, as text.
    header: Vec<String>,
    /// The cells of the row being read.
    row: Vec<Vec<Inline>>,
}

impl Table {
    /// Writes the row read and empties it.
    fn write_row(&mut self, page: &mut Roff) {
        let mut cells = std::mem::take(&mut self.row).into_iter();
        let Some(tag) = cells.next() else {
            return;
        };
        page.control("TP", NO_ARGS).text(tag);
        let rest: Vec<Vec<Inline>> = cells.collect();
        let last = rest.len().saturating_sub(1);
        let mut body: Vec<Inline> = Vec::new();
        for (i, cell) in rest.into_iter().enumerate() {
            if cell.is_empty() {
                continue;
            }
            if !body.is_empty() {
                body.push(line_break());
            }
            if i < last {
                let name = self.header.get(i + 1).map_or("", String::as_str);
                body.push(italic(format!("{name}:")));
                body.push(roman(" "));
            }
            body.extend(cell);
        }
        if !body.is_empty() {
            page.text(body);
        }
    }
}

/// The text of `inlines`, without fonts.
fn plain(inlines: &[Inline]) -> String {
    inlines
        .iter()
        .map(|i| match i {
            Inline::Roman(t) | Inline::Bold(t) | Inline::Italic(t) => t.as_str(),
            Inline::LineBreak => " ",
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_sections_paragraphs_tags_and_blocks() {
        let roff = sections(
            "# Title\n\nSome `key` text\nwrapped.\n\n## `[web]`\n\n\
             | key | default | meaning |\n|---|---|---|\n| `a` | `1` | the a |\n| `b` | | the b |\n\n\
             ### Sub\n\n```toml\n.dot = 1\n```\n\n- one\n- two\n",
        );
        for expected in [
            ".SH DESCRIPTION\n",
            ".PP\nSome \\fBkey\\fR text wrapped.\n",
            ".SH [WEB]\n",
            ".TP\n\\fBa\\fR\n\\fIdefault:\\fR \\fB1\\fR\n.br\nthe a\n",
            ".TP\n\\fBb\\fR\nthe b\n",
            ".SS Sub\n",
            ".nf\n\\&.dot = 1\n.fi\n",
            ".IP \\(bu 2\none\n",
        ] {
            assert!(roff.contains(expected), "no {expected:?} in:\n{roff}");
        }
    }
}
