//! Where in the file a message is about (issue 56: errors named a key but not
//! where it was). A message that starts with a key path the file has
//! (`web.acces_log: unknown key`, `site[1].docroot: …`) gets the file and line
//! of that key in front (`/etc/stoa/stoa.toml:12: web.acces_log: …`); one about
//! a flag or the configuration as a whole is left as it is. A file that is not
//! TOML gets every syntax error the parser recovers from, each with its line
//! and column, not only the first.

use std::path::Path;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

/// Every syntax error of `text` (the file at `path`), each located; empty when
/// it is TOML.
pub(crate) fn syntax_errors(path: &Path, text: &str) -> Vec<String> {
    let (_, errors) = DeTable::parse_recoverable(text);
    errors
        .iter()
        .map(|e| {
            let message = e.message().trim_end();
            match e.span() {
                Some(span) => {
                    let (line, column) = position(text, span.start);
                    format!("{}:{line}:{column}: {message}", path.display())
                }
                None => format!("{}: {message}", path.display()),
            }
        })
        .collect()
}

/// Puts the file and line in front of each of `messages` that names a key of
/// `text` (the file at `path`, already known to be TOML).
pub(crate) fn messages(path: &Path, text: &str, messages: &mut [String]) {
    if messages.is_empty() {
        return;
    }
    let Ok(doc) = DeTable::parse(text) else {
        return;
    };
    for message in messages {
        if let Some(offset) = offset_of(doc.get_ref(), message) {
            let (line, _) = position(text, offset);
            *message = format!("{}:{line}: {message}", path.display());
        }
    }
}

/// The start of the deepest part of the key path `message` starts with (up to
/// its first `: `) that `doc` has: the key itself, or the nearest table or
/// array entry above it.
fn offset_of(doc: &DeTable<'_>, message: &str) -> Option<usize> {
    let (path, _) = message.split_once(": ")?;
    if path.is_empty() || path.starts_with('-') || path.contains(char::is_whitespace) {
        return None;
    }
    let mut table = doc;
    let mut found = None;
    for segment in path.split('.') {
        // `site[1]`: a key, then indices into its array.
        let mut parts = segment.split('[');
        let key = parts.next()?;
        let Some((name, value)) = table.iter().find(|(k, _)| k.get_ref() == key) else {
            break;
        };
        found = Some(name.span().start);
        let mut value: &Spanned<DeValue<'_>> = value;
        for index in parts {
            let i: usize = index.strip_suffix(']')?.parse().ok()?;
            let DeValue::Array(items) = value.get_ref() else {
                return found;
            };
            let Some(item) = items.get(i) else {
                return found;
            };
            found = Some(item.span().start);
            value = item;
        }
        match value.get_ref() {
            DeValue::Table(inner) => table = inner,
            _ => break,
        }
    }
    found
}

/// The line and column (both from 1, the column in characters) of byte
/// `offset` of `text`.
fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(offset.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
user = \"stoa\"
[web]
docroot = \"/srv/www\"
acces_log = \"a.log\"

[[site]]
names = [\"a.example\"]

[[site]]
names = [\"b.example\"]
docroot = \"/nowhere\"
[smpt]
";

    fn located(message: &str) -> String {
        let mut all = [message.to_owned()];
        messages(Path::new("/etc/stoa/stoa.toml"), FILE, &mut all);
        let [one] = all;
        one
    }

    #[test]
    fn a_message_gets_the_line_of_its_key() {
        let at = |line: usize, m: &str| format!("/etc/stoa/stoa.toml:{line}: {m}");
        for (line, message) in [
            (
                4,
                "web.acces_log: unknown key (did you mean web.access_log?)",
            ),
            (12, "smpt: unknown key (did you mean smtp?)"),
            (11, "site[1].docroot: /nowhere is not a directory"),
            (
                10,
                "site[1].names: \"b.example\" is already a name of site[0]",
            ),
            // A key the file lacks: the nearest entry above it.
            (2, "web.workers: required"),
            (1, "user: no such user"),
        ] {
            assert_eq!(located(message), at(line, message));
        }
        for unlocated in [
            "--listen nowhere: not an address",
            "no server to run: give a docroot",
            "tls.cert: the file has no [tls]",
        ] {
            assert_eq!(located(unlocated), unlocated);
        }
        // An entry the array lacks: the array's key.
        let past = located("site[7].docroot: out of range");
        assert!(past.starts_with("/etc/stoa/stoa.toml:"), "{past}");
    }

    #[test]
    fn every_syntax_error_is_reported_with_its_line_and_column() {
        let text =
            "[web\ndocroot = \"/srv\"\n\n[smtp]\nlisten = = 1\nok = true\nbad = \"unclosed\n";
        let errors = syntax_errors(Path::new("s.toml"), text);
        assert!(errors.len() >= 3, "{errors:?}");
        assert!(errors[0].starts_with("s.toml:1:"), "{errors:?}");
        assert!(
            errors.iter().any(|e| e.starts_with("s.toml:5:")),
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.starts_with("s.toml:7:")),
            "{errors:?}"
        );
        assert!(syntax_errors(Path::new("s.toml"), FILE).is_empty());
    }

    #[test]
    fn columns_count_characters() {
        assert_eq!(position("a\nbé c", 5), (2, 3));
        assert_eq!(position("abc", 99), (1, 4));
    }
}
