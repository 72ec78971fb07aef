//! Directory listings (`autoindex`): the HTML page for a directory without
//! `index.html`, on a site that asks for them.
//!
//! Entries are sorted by name (bytewise), dotfiles are hidden, and each entry is
//! opened beneath the document root the way a request for it would be
//! (`openat2(RESOLVE_BENEATH)`), so a symlink that leaves the root, or anything
//! that is neither a regular file nor a directory, is not listed. Names are
//! percent-encoded in links and HTML-escaped in text. Bounded: at most
//! [`MAX_SCANNED`] names are read and sorted, at most [`MAX_LISTED`] listed; the
//! rest are counted at the end of the page.

use std::fmt::Write as _;
use std::os::fd::OwnedFd;

use rustix::fs::FileType;

use crate::cache::open_beneath;

/// Most entries listed on one page.
pub(crate) const MAX_LISTED: usize = 1000;
/// Most names read and sorted; further entries are only counted.
pub(crate) const MAX_SCANNED: usize = 10_000;

/// The listing of `path` (decoded, normalised, ending in `/`) beneath `root`;
/// `None` when the directory cannot be read.
pub(crate) fn render(root: &OwnedFd, path: &[u8]) -> Option<Vec<u8>> {
    let rel = path.strip_prefix(b"/").unwrap_or(path);
    let dir_rel: &[u8] = if rel.is_empty() { b"." } else { rel };
    let (fd, _) = open_beneath(root, dir_rel).ok()?;
    let dir = rustix::fs::Dir::new(fd).ok()?;
    let mut names: Vec<Vec<u8>> = Vec::new();
    let mut unread = 0usize;
    for entry in dir {
        let entry = entry.ok()?;
        let name = entry.file_name().to_bytes();
        if name.starts_with(b".") {
            continue;
        }
        if names.len() < MAX_SCANNED {
            names.push(name.to_vec());
        } else {
            unread += 1;
        }
    }
    names.sort_unstable();
    let mut page = String::with_capacity(512 + names.len().min(MAX_LISTED) * 96);
    let title = escape_html(&String::from_utf8_lossy(path));
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n\
         <body><h1>Index of {title}</h1>\n<ul>\n"
    );
    if !rel.is_empty() {
        page.push_str("<li><a href=\"../\">../</a></li>\n");
    }
    let mut listed = 0;
    let mut more = unread;
    for name in &names {
        if listed == MAX_LISTED {
            more += 1;
            continue;
        }
        let full = [rel, name.as_slice()].concat();
        let is_dir = match open_beneath(root, &full) {
            Ok((_, st)) => match FileType::from_raw_mode(st.st_mode) {
                FileType::Directory => true,
                FileType::RegularFile => false,
                _ => continue,
            },
            // Outside the root, unreadable, gone: not something to offer.
            Err(_) => continue,
        };
        let slash = if is_dir { "/" } else { "" };
        let _ = writeln!(
            page,
            "<li><a href=\"{}{slash}\">{}{slash}</a></li>",
            escape_url(name),
            escape_html(&String::from_utf8_lossy(name))
        );
        listed += 1;
    }
    page.push_str("</ul>\n");
    if more > 0 {
        let _ = writeln!(page, "<p>{more} more entries not listed.</p>");
    }
    page.push_str("</body></html>\n");
    Some(page.into_bytes())
}

/// `text` with `&`, `<`, `>`, `"` and `'` as character references.
fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A name as a relative URL path segment: everything but unreserved bytes
/// percent-encoded (a `:` in the first segment would read as a scheme, so it
/// is encoded too).
fn escape_url(name: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = String::with_capacity(name.len());
    for &b in name {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use rustix::fs::{Mode, OFlags};

    use super::{MAX_LISTED, escape_html, escape_url, render};

    #[test]
    fn escaping() {
        assert_eq!(escape_html("<b>&\"x'"), "&lt;b&gt;&amp;&quot;x&#39;");
        assert_eq!(
            escape_url(b"<b>&\"x y/\xc3\xa9"),
            "%3Cb%3E%26%22x%20y%2F%C3%A9"
        );
    }

    #[test]
    fn sorted_hidden_escaped_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("www");
        std::fs::create_dir_all(root.join("sub/deeper")).expect("mkdir");
        for name in ["b.txt", "a.txt", ".hidden", "<b>&\"x"] {
            std::fs::write(root.join("sub").join(name), "x").expect("write");
        }
        std::fs::write(dir.path().join("outside"), "secret").expect("write");
        std::os::unix::fs::symlink("../../outside", root.join("sub/escape")).expect("symlink");
        std::os::unix::fs::symlink("a.txt", root.join("sub/inside")).expect("symlink");
        let fd = rustix::fs::open(&root, OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())
            .expect("open root");
        let page = String::from_utf8(render(&fd, b"/sub/").expect("listing")).expect("utf-8");
        let links: Vec<&str> = page
            .lines()
            .filter_map(|l| l.strip_prefix("<li><a href=\""))
            .map(|l| &l[..l.find('"').expect("closing quote")])
            .collect();
        assert_eq!(
            links,
            [
                "../",
                "%3Cb%3E%26%22x",
                "a.txt",
                "b.txt",
                "deeper/",
                "inside"
            ],
            "{page}"
        );
        assert!(page.contains(">&lt;b&gt;&amp;&quot;x</a>"), "{page}");
        assert!(
            !page.contains("hidden") && !page.contains("escape"),
            "{page}"
        );
        assert!(page.contains("<title>Index of /sub/</title>"), "{page}");

        for i in 0..MAX_LISTED + 5 {
            std::fs::write(root.join(format!("f{i:05}")), "").expect("write");
        }
        let page = String::from_utf8(render(&fd, b"/").expect("listing")).expect("utf-8");
        let listed = page.lines().filter(|l| l.starts_with("<li>")).count();
        assert_eq!(listed, MAX_LISTED);
        // `sub/` sorts after the files: it is one of the six not listed.
        assert!(page.contains("<p>6 more entries not listed.</p>"), "{page}");
        assert!(!page.contains("href=\"../\""));
    }
}
