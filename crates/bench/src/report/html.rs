//! A [`Document`] as a self-contained HTML page: tables, inline SVG charts, no
//! scripts and no external resources.

use std::fmt::Write as _;

use super::doc::{Block, Document, Table};
use super::svg::escape;

/// The page's style sheet, after the published result pages: section titles
/// on a shaded bar, ruled tables with shaded headings and right-aligned
/// figures, failing cells in red, the notice boxed. Nothing is cut off at any
/// width: a table wider than the window scrolls inside its own box, long
/// values wrap, and the charts scale with the page (up to 60 rem: `em` in
/// the chart would be its own 11 px font's).
const STYLE: &str = "body{font-family:Arial,Helvetica,sans-serif;max-width:70em;margin:1.5em auto;\
     padding:0 1em;color:#111;line-height:1.35}\
     h1{font-size:1.5em;margin:.2em 0 .4em}h1.pass{color:#1a6b1a}h1.fail{color:#a31515}\
     h2{font-size:1.15em;background:#d4dcea;border-top:2px solid #34507a;padding:.25em .5em;margin:1.6em 0 .5em}\
     h3{font-size:1em;margin:1.1em 0 .3em;color:#34507a}\
     p{white-space:pre-line;margin:.5em 0}\
     .notice{border:2px solid #333;background:#fffbe6;padding:.6em 1em;font-weight:bold}\
     .scroll{overflow-x:auto;max-width:100%;margin:.4em 0 1em}\
     table{border-collapse:collapse;font-size:.95em}\
     th,td{border:1px solid #8a96a8;padding:.2em .6em;vertical-align:top}\
     thead th{background:#d4dcea;text-align:center}\
     tbody th{background:#eef1f6;text-align:left;font-weight:normal;white-space:nowrap}\
     td{overflow-wrap:anywhere}table.num td{text-align:right;white-space:nowrap}\
     table.num td:first-child{text-align:left}\
     td.fail{color:#a31515;font-weight:bold;background:#fde8e8}tr.shaded td{background:#e4e9f1}\
     figure{margin:1.2em 0}figure svg{display:block;width:100%;height:auto;max-width:60rem}\
     figcaption{font-size:.9em;color:#444}";

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
            Block::Deviations { title, items, note } => deviations(&mut body, title, items, note),
        }
    }
    let h1 = match doc.verdict {
        Some(true) => "<h1 class=\"pass\">",
        Some(false) => "<h1 class=\"fail\">",
        None => "<h1>",
    };
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><title>{title}</title>\
         <style>{STYLE}</style></head><body>\n\
         {h1}{title}</h1>\n<p class=\"notice\">{notice}</p>\n{body}</body></html>\n",
        title = escape(&doc.title),
        notice = escape(&doc.notice),
    )
}

/// A table in its own scrolling box; a table without a header (label–value
/// rows) has its labels as row headings.
fn table(body: &mut String, t: &Table) {
    let class = if t.left { "kv" } else { "num" };
    let _ = write!(body, "<div class=\"scroll\"><table class=\"{class}\">");
    if !t.head.is_empty() {
        body.push_str("<thead><tr>");
        for h in &t.head {
            let _ = write!(body, "<th>{}</th>", escape(h));
        }
        body.push_str("</tr></thead>");
    }
    body.push_str("<tbody>");
    for (n, r) in t.rows.iter().enumerate() {
        body.push_str(if t.shaded == Some(n) {
            "<tr class=\"shaded\">"
        } else {
            "<tr>"
        });
        for (i, c) in r.iter().enumerate() {
            if i == 0 && t.head.is_empty() {
                let _ = write!(body, "<th scope=\"row\">{}</th>", escape(&c.shown()));
            } else if c.fail {
                let _ = write!(body, "<td class=\"fail\">{}</td>", escape(&c.shown()));
            } else {
                let _ = write!(body, "<td>{}</td>", escape(&c.text));
            }
        }
        body.push_str("</tr>");
    }
    body.push_str("</tbody></table></div>\n");
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
