//! A [`Document`] as plain text, in one of two layouts.

use std::fmt::Write as _;

use super::doc::{Block, Document, Table};

/// How the text is laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// The published SPECmail2001 pages': underlined headings and tables with
    /// aligned columns.
    Published,
    /// The published SPECweb99 pages' as copied from a browser: plain headings
    /// and tab-separated rows.
    Tabbed,
}

/// Renders `doc` (charts and preformatted blocks are HTML-only).
pub(crate) fn render(doc: &Document, layout: Layout) -> String {
    let mut out = match layout {
        Layout::Published => format!("{}\n{}\n\n", doc.title, doc.notice),
        Layout::Tabbed => format!("{}\n\n{}\n\n", doc.title, doc.notice),
    };
    for block in &doc.blocks {
        match block {
            Block::Heading(level, h) => heading(&mut out, layout, *level, h),
            Block::Para(p) => {
                let _ = writeln!(out, "{p}\n");
            }
            Block::List(items) => {
                for item in items {
                    let _ = writeln!(out, "- {item}");
                }
                out.push('\n');
            }
            Block::Table(t) => {
                match layout {
                    Layout::Published => aligned(&mut out, t),
                    Layout::Tabbed => tabbed(&mut out, t),
                }
                out.push('\n');
            }
            Block::Deviations { title, items, note } => framed(&mut out, title, items, note),
            Block::Chart(..) | Block::Pre(_) => {}
        }
    }
    out
}

fn heading(out: &mut String, layout: Layout, level: u8, h: &str) {
    let rule = |c: &str| c.repeat(h.chars().count());
    let _ = match (layout, level) {
        (Layout::Tabbed, _) => writeln!(out, "{h}\n"),
        (Layout::Published, 1) => writeln!(out, "\n{h}\n{}\n", rule("=")),
        (Layout::Published, _) => writeln!(out, "{h}\n{}\n", rule("-")),
    };
}

/// One line per row, cells tab-separated; no header line when there is none.
fn tabbed(out: &mut String, t: &Table) {
    if !t.head.is_empty() {
        let _ = writeln!(out, "{}", t.head.join("\t"));
    }
    for r in &t.rows {
        let shown: Vec<String> = r.iter().map(|c| c.shown()).collect();
        let _ = writeln!(out, "{}", shown.join("\t"));
    }
}

/// Renders a table with aligned columns, two spaces apart.
fn aligned(out: &mut String, t: &Table) {
    let columns = t.head.len();
    // A column with a failing cell keeps one place for the mark in every row, so
    // its figures stay aligned.
    let marked: Vec<bool> = (0..columns)
        .map(|c| {
            t.rows
                .iter()
                .any(|r| r.get(c).is_some_and(|cell| cell.fail))
        })
        .collect();
    let shown: Vec<Vec<String>> = t
        .rows
        .iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .map(
                    |(c, cell)| match (cell.fail, marked.get(c) == Some(&true)) {
                        (true, _) => cell.shown(),
                        (false, true) => format!("{} ", cell.text),
                        (false, false) => cell.text.clone(),
                    },
                )
                .collect()
        })
        .collect();
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            shown
                .iter()
                .filter_map(|r| r.get(c))
                .chain(std::iter::once(&t.head[c]))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut line = |cells: &[String]| {
        let mut l = String::new();
        for (c, text) in cells.iter().enumerate() {
            let w = widths.get(c).copied().unwrap_or(0);
            if c > 0 {
                l.push_str("  ");
            }
            if c == 0 || t.left {
                let _ = write!(l, "{text:<w$}");
            } else {
                let _ = write!(l, "{text:>w$}");
            }
        }
        let _ = writeln!(out, "{}", l.trim_end());
    };
    line(&t.head);
    for r in &shown {
        line(r);
    }
}

/// Text width inside the deviations box (the frame adds four columns).
const BOX_WIDTH: usize = 74;

/// The deviations box: the heading, "- " items and the note, wrapped inside a
/// `+---+` frame so it stands out of the tables around it.
fn framed(out: &mut String, title: &str, items: &[String], note: &str) {
    let rule = format!("+{}+\n", "-".repeat(BOX_WIDTH + 2));
    out.push_str(&rule);
    let mut lines = wrap(title, "", "");
    lines.push(String::new());
    for item in items {
        lines.extend(wrap(item, "- ", "  "));
    }
    lines.push(String::new());
    lines.extend(wrap(note, "", ""));
    for l in lines {
        let _ = writeln!(out, "| {l:<BOX_WIDTH$} |");
    }
    out.push_str(&rule);
    out.push('\n');
}

/// `text` wrapped at word boundaries to [`BOX_WIDTH`], the first line after
/// `first`, the others after `rest` (a word longer than a line stays whole).
fn wrap(text: &str, first: &str, rest: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut line = first.to_owned();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > BOX_WIDTH {
            lines.push(std::mem::replace(&mut line, rest.to_owned()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    lines.push(line);
    lines
}
