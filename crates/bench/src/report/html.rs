//! A [`Document`] as a self-contained HTML page: tables, inline SVG charts, no
//! scripts and no external resources.

use std::fmt::Write as _;

use super::doc::{Block, Document, Table};
use super::svg::escape;

/// The page's style sheet: readable width, ruled tables with right-aligned
/// figures, failing cells in red, the notice boxed.
const STYLE: &str = "body{font-family:sans-serif;max-width:64em;margin:2em auto;padding:0 1em}\
     h1.pass{color:#1a6b1a}h1.fail{color:#a31515}\
     .notice{border:2px solid #333;background:#fffbe6;padding:.6em 1em;font-weight:bold}\
     table{border-collapse:collapse;margin:.8em 0}th,td{border:1px solid #bbb;padding:.2em .6em}\
     th{background:#eee;text-align:left}table.num td{text-align:right}\
     table.num td:first-child{text-align:left}td.fail{color:#a31515;font-weight:bold;background:#fde8e8}\
     figure{margin:1.5em 0}figcaption{font-size:.9em;color:#444}\
     pre{background:#f6f6f6;padding:1em;overflow:auto}";

/// Renders `doc` as a page.
pub(crate) fn render(doc: &Document) -> String {
    let mut body = String::new();
    for block in &doc.blocks {
        match block {
            Block::Heading(level, h) => {
                let tag = if *level == 1 { "h2" } else { "h3" };
                let _ = writeln!(body, "<{tag}>{}</{tag}>", escape(h));
            }
            Block::Para(p) => {
                let _ = writeln!(body, "<p>{}</p>", escape(p));
            }
            Block::List(items) => {
                body.push_str("<ul>");
                for item in items {
                    let _ = write!(body, "<li>{}</li>", escape(item));
                }
                body.push_str("</ul>\n");
            }
            Block::Table(t) => table(&mut body, t),
            Block::Chart(chart, caption) => {
                let _ = writeln!(
                    body,
                    "<figure>{chart}<figcaption>{}</figcaption></figure>",
                    escape(caption)
                );
            }
            Block::Pre(text) => {
                let _ = writeln!(body, "<pre>{}</pre>", escape(text));
            }
            Block::Deviations { title, items, note } => deviations(&mut body, title, items, note),
        }
    }
    let h1 = match doc.verdict {
        Some(true) => "<h1 class=\"pass\">",
        Some(false) => "<h1 class=\"fail\">",
        None => "<h1>",
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\
         <style>{STYLE}</style></head><body>\n\
         {h1}{title}</h1>\n<p class=\"notice\">{notice}</p>\n{body}</body></html>\n",
        title = escape(&doc.title),
        notice = escape(&doc.notice),
    )
}

fn table(body: &mut String, t: &Table) {
    let class = if t.left { "kv" } else { "num" };
    let _ = write!(body, "<table class=\"{class}\">");
    if !t.head.is_empty() {
        body.push_str("<thead><tr>");
        for h in &t.head {
            let _ = write!(body, "<th>{}</th>", escape(h));
        }
        body.push_str("</tr></thead>");
    }
    body.push_str("<tbody>");
    for r in &t.rows {
        body.push_str("<tr>");
        for c in r {
            if c.fail {
                let _ = write!(body, "<td class=\"fail\">{}</td>", escape(&c.shown()));
            } else {
                let _ = write!(body, "<td>{}</td>", escape(&c.text));
            }
        }
        body.push_str("</tr>");
    }
    body.push_str("</tbody></table>\n");
}

/// The deviations box: a framed, tinted block (styled inline, so it needs
/// nothing from the page's style sheet) with the heading, the items and the
/// note.
fn deviations(body: &mut String, title: &str, items: &[String], note: &str) {
    body.push_str(
        "<div class=\"deviations\" style=\"border:3px solid #a31515;background:#fdf0f0;\
         padding:.4em 1em;margin:1em 0\">",
    );
    let _ = write!(body, "<p><strong>{}</strong></p><ul>", escape(title));
    for item in items {
        let _ = write!(body, "<li>{}</li>", escape(item));
    }
    let _ = writeln!(body, "</ul><p>{}</p></div>", escape(note));
}
