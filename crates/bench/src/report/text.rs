//! A [`Document`] as plain text: every table aligned with spaces, so each value
//! stands under its heading in any viewer (tabs put them under the wrong one as
//! soon as a cell is wider than a tab stop).

use std::fmt::Write as _;

use super::doc::{Block, Document, Table};

/// How headings are set; tables are aligned in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// The published SPECmail2001 page's: section titles underlined.
    Underlined,
    /// The published SPECweb99 pages' as copied from a browser: plain titles,
    /// a blank line under each.
    Plain,
}

/// Renders `doc` (charts are HTML-only).
pub(crate) fn render(doc: &Document, layout: Layout) -> String {
    let mut out = match layout {
        Layout::Underlined => format!("{}\n{}\n\n", doc.title, doc.notice),
        Layout::Plain => format!("{}\n\n{}\n\n", doc.title, doc.notice),
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
                aligned(&mut out, t);
                out.push('\n');
            }
            Block::Deviations { title, items, note } => framed(&mut out, title, items, note),
            Block::Chart(..) => {}
        }
    }
    out
}

fn heading(out: &mut String, layout: Layout, level: u8, h: &str) {
    let rule = |c: &str| c.repeat(h.chars().count());
    let _ = match (layout, level) {
        (Layout::Plain, _) => writeln!(out, "{h}\n"),
        (Layout::Underlined, 1) => writeln!(out, "\n{h}\n{}\n", rule("=")),
        (Layout::Underlined, _) => writeln!(out, "{h}\n{}\n", rule("-")),
    };
}

/// The cells of `t` as printed: a column with a failing cell keeps one place
/// for the mark in every row, so its figures stay aligned.
fn shown(t: &Table, columns: usize) -> Vec<Vec<String>> {
    let marked: Vec<bool> = (0..columns)
        .map(|c| {
            t.rows
                .iter()
                .any(|r| r.get(c).is_some_and(|cell| cell.fail))
        })
        .collect();
    t.rows
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
        .collect()
}

/// Renders a table with aligned columns, two spaces apart: the first column
/// (labels) and every column of a `left` table left-aligned, figures
/// right-aligned. A table without a header (label–value rows) is aligned too.
fn aligned(out: &mut String, t: &Table) {
    let columns = t
        .rows
        .iter()
        .map(Vec::len)
        .chain(std::iter::once(t.head.len()))
        .max()
        .unwrap_or(0);
    let shown = shown(t, columns);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            shown
                .iter()
                .filter_map(|r| r.get(c))
                .chain(t.head.get(c))
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
    if !t.head.is_empty() {
        line(&t.head);
    }
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

/// Every cell of `doc`'s tables that does not stand under its heading in
/// `text` (its render): a label or a `left` table's cell must start where its
/// heading starts, a figure must end where its heading ends (one place
/// earlier in a column keeping room for the failure mark). A table without a
/// header is checked against its first row. Empty when all line up.
#[cfg(test)]
pub(crate) fn misaligned(doc: &Document, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut at = 0;
    let mut out = Vec::new();
    for t in doc.blocks.iter().filter_map(|b| match b {
        Block::Table(t) => Some(t),
        _ => None,
    }) {
        let first: Vec<String> = match t.rows.first() {
            Some(r) if t.head.is_empty() => r.iter().map(|c| c.shown()).collect(),
            _ => t.head.clone(),
        };
        // The header line (or first row): it starts with the first cell and
        // holds every other in order.
        let holds = |l: &str| {
            l.starts_with(first[0].as_str()) && spans(l, &first).iter().all(|s| s.0 != usize::MAX)
        };
        let Some(found) = (at..lines.len()).find(|&i| holds(lines[i])) else {
            out.push(format!("table {first:?} not found"));
            continue;
        };
        let head = spans(lines[found], &first);
        let skip = usize::from(t.head.is_empty());
        for (i, r) in t.rows.iter().enumerate().skip(skip) {
            let line = lines.get(found + 1 + i - skip).copied().unwrap_or("");
            let texts: Vec<String> = r.iter().map(|c| c.shown()).collect();
            for (c, (span, cell)) in spans(line, &texts).iter().zip(r).enumerate() {
                let marked = t.rows.iter().any(|r| r.get(c).is_some_and(|x| x.fail));
                let Some(&(start, end)) = head.get(c) else {
                    continue;
                };
                let ok = if c == 0 || t.left {
                    span.0 == start
                } else {
                    span.1 + usize::from(marked && !cell.fail) == end
                };
                if !ok && !cell.text.is_empty() {
                    out.push(format!(
                        "{:?} at {span:?}, its heading at {:?}: {line:?}",
                        cell.text,
                        (start, end)
                    ));
                }
            }
        }
        at = found + 1;
    }
    out
}

/// The char offsets `(start, end)` of each of `cells` in `line`, found in
/// order.
#[cfg(test)]
fn spans(line: &str, cells: &[String]) -> Vec<(usize, usize)> {
    let mut from = 0;
    cells
        .iter()
        .map(|cell| {
            let Some(start) = line[from..].find(cell.as_str()).map(|i| from + i) else {
                return (usize::MAX, usize::MAX);
            };
            from = (start + cell.len()).min(line.len());
            (line[..start].chars().count(), line[..from].chars().count())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::doc::{Cell, Table, cells};

    fn table(t: &Table) -> String {
        let mut out = String::new();
        super::aligned(&mut out, t);
        out
    }

    #[test]
    fn figures_end_under_their_headings() {
        let mut t = Table::new(&["Iteration", "Conforming Connections", "Percent Conform"]);
        t.row(cells(["=>1".into(), "8120".into(), "100.0%".into()]));
        t.row(vec![
            Cell::from("2"),
            Cell::from("12"),
            Cell::marked("94.0%", true),
        ]);
        assert_eq!(
            table(&t),
            "Iteration  Conforming Connections  Percent Conform\n\
             =>1                          8120          100.0%\n\
             2                              12           94.0%*\n"
        );
    }

    #[test]
    fn the_check_catches_tab_separated_rows() {
        let mut t = Table::new(&["Iteration", "Conforming Connections"]);
        t.row(cells(["1".into(), "10".into()]));
        let mut doc = super::Document::new("t".into(), "n");
        doc.table(t);
        // The old web layout: one tab between cells.
        let tabbed = "t\n\nn\n\nIteration\tConforming Connections\n1\t10\n";
        assert_eq!(super::misaligned(&doc, tabbed).len(), 1);
        let aligned = super::render(&doc, super::Layout::Plain);
        assert!(super::misaligned(&doc, &aligned).is_empty(), "{aligned}");
    }

    #[test]
    fn label_value_rows_align_their_values() {
        let mut t = Table::new(&[]);
        t.left = true;
        t.row(cells(["Target:".into(), "built-in".into()]));
        t.row(cells(["Server software:".into(), "Stoa".into()]));
        assert_eq!(
            table(&t),
            "Target:           built-in\nServer software:  Stoa\n"
        );
    }
}
