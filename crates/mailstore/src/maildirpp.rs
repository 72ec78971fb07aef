//! Maildir++ as Dovecot lays it out, the format of
//! [`crate::MailStore::export_maildir`] and [`crate::MailStore::import_maildir`]: how
//! folder names become directory names, how flags and keywords become the letters
//! after `:2,`, and the line ends.
//!
//! ```text
//! DIR/cur/ new/ tmp/               INBOX
//! DIR/.Sent/                       folder "Sent" (its cur/ new/ tmp/, an empty
//!                                  maildirfolder file, dovecot-keywords)
//! DIR/.Work.2026/                  folder "Work/2026"
//! DIR/.Entw&APw-rfe/               folder "Entwürfe" (modified UTF-7)
//! DIR/.v1&AC4-2/                   folder "v1.2" (a `.` inside a level)
//! DIR/subscriptions                subscribed names, one a line ("Work.2026")
//! DIR/stoa-special-use             SPECIAL-USE of the folders (Stoa's own file)
//! DIR/.Sent/cur/1767225600.M1P2Q3.mx,S=2001,W=2048:2,RSa
//! ```
//!
//! - **Names.** `/` separates levels in Stoa, `.` on disk; each level is written in
//!   modified UTF-7 as Dovecot stores names without its `UTF-8` option. A `.` inside
//!   a level cannot be written as itself, and Dovecot's stock Maildir++ refuses such
//!   names (its `listescape` plugin writes `\2e`); Stoa writes it in base64, `&AC4-`,
//!   and reads it back. Dovecot, whose decoder rejects ASCII in base64, shows such a
//!   folder under its raw name `v1&AC4-2`: nothing is lost, the name is only less
//!   pretty there. INBOX is the root itself; `INBOX/x` is `.INBOX.x`.
//! - **Flags.** `D` `\Draft`, `F` `\Flagged`, `R` `\Answered`, `S` `\Seen`, `T`
//!   `\Deleted`, in ASCII order, then keywords as the letters `a`–`z` that the
//!   folder's `dovecot-keywords` file (`0 $Forwarded`: letter `a` is keyword 0)
//!   assigns, as Dovecot does. On import `P` (passed, written by mutt and others)
//!   is the keyword `$Forwarded`; other letters, and keyword letters the file does
//!   not name, are ignored as Dovecot ignores them. A folder's keywords beyond 26
//!   have no letter (Dovecot keeps those in its index only) and are not exported.
//! - **Line ends.** Files hold LF line ends; the store keeps the wire form, CRLF.

use std::collections::BTreeMap;

use crate::folders::DELIMITER;
use crate::index::valid_flag;
use stoa_mail_proto::mutf7;

/// The characters of a name level that Maildir++ writes in base64 besides the
/// non-ASCII ones: its own hierarchy separator.
const ENCODED: &[char] = &['.'];

/// The most keyword letters a Maildir file name has: `a` to `z`.
pub(crate) const MAX_KEYWORDS: usize = 26;

/// The keyword file Dovecot keeps beside each Maildir's `cur/`.
pub(crate) const KEYWORDS_FILE: &str = "dovecot-keywords";

/// The subscriptions file at the root of the tree.
pub(crate) const SUBSCRIPTIONS_FILE: &str = "subscriptions";

/// The SPECIAL-USE attributes of the folders: Stoa's own file at the root, which
/// Dovecot ignores (it takes SPECIAL-USE from its configuration).
pub(crate) const SPECIAL_USE_FILE: &str = "stoa-special-use";

/// The empty file that marks a Maildir++ folder directory.
pub(crate) const FOLDER_MARK: &str = "maildirfolder";

/// The keyword that mutt's and Courier's `P` (passed) flag stands for.
const FORWARDED: &str = "$Forwarded";

/// The system flags and their letters, in the letters' ASCII order.
const SYSTEM_FLAGS: [(char, &str); 5] = [
    ('D', "\\Draft"),
    ('F', "\\Flagged"),
    ('R', "\\Answered"),
    ('S', "\\Seen"),
    ('T', "\\Deleted"),
];

/// The directory name (under the tree's root) of folder `name`; `None` for INBOX,
/// which is the root itself.
pub fn folder_dir_name(name: &str) -> Option<String> {
    if name == "INBOX" {
        return None;
    }
    let levels: Vec<String> = name
        .split(DELIMITER)
        .map(|level| mutf7::encode(level, ENCODED))
        .collect();
    Some(format!(".{}", levels.join(".")))
}

/// The folder name of a directory of the tree (`.Work.2026` is `Work/2026`);
/// `Err` says why it is not one. A level that is not modified UTF-7 is taken as it
/// is (a tree written with Dovecot's `UTF-8` option).
pub fn folder_name_of_dir(dir: &str) -> Result<String, String> {
    let Some(rest) = dir.strip_prefix('.') else {
        return Err("a folder directory starts with '.'".into());
    };
    folder_name_of_levels(rest.split('.'))
}

/// The folder name of its levels as stored on disk (see [`folder_name_of_dir`]).
pub(crate) fn folder_name_of_levels<'a>(
    stored: impl Iterator<Item = &'a str>,
) -> Result<String, String> {
    let mut levels = Vec::new();
    for level in stored {
        if level.is_empty() {
            return Err("empty hierarchy level".into());
        }
        levels.push(mutf7::decode(level.as_bytes(), ENCODED).unwrap_or_else(|| level.to_owned()));
    }
    Ok(crate::folders::canonical(
        &levels.join(&DELIMITER.to_string()),
    ))
}

/// The names in a `subscriptions` file: Dovecot's version 2 (a `V\t2` header,
/// levels separated by tabs, tab-escaped) or version 1 (one stored name a line,
/// levels separated by `.`, as Stoa writes it).
pub(crate) fn parse_subscriptions(text: &str) -> Result<Vec<String>, String> {
    let (v2, body) = match text.strip_prefix("V\t2\n\n") {
        Some(body) => (true, body),
        None => (false, text),
    };
    let mut names = Vec::new();
    for line in body.lines().filter(|l| !l.is_empty()) {
        let name = if v2 {
            let levels: Vec<String> = line.split('\t').map(tab_unescape).collect();
            folder_name_of_levels(levels.iter().map(String::as_str))
        } else if line.eq_ignore_ascii_case("INBOX") {
            Ok("INBOX".to_owned())
        } else {
            folder_name_of_levels(line.split('.'))
        }
        .map_err(|reason| format!("{line:?}: {reason}"))?;
        names.push(name);
    }
    Ok(names)
}

/// Undoes Dovecot's tab-escaping (`\x01` then `1`, `t`, `r` or `n`).
fn tab_unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\u{1}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('1') => out.push('\u{1}'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// A folder's keyword letters: `dovecot-keywords`, keyword `n` being letter
/// `a + n`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keywords {
    slots: BTreeMap<usize, String>,
}

impl Keywords {
    /// Reads a `dovecot-keywords` file: lines `N KEYWORD`, N from 0 to 25.
    pub fn parse(text: &str) -> Result<Keywords, String> {
        let mut slots = BTreeMap::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad = || format!("line {}: {line:?} is not \"N KEYWORD\"", n + 1);
            let (slot, keyword) = line.split_once(' ').ok_or_else(bad)?;
            let slot: usize = slot.parse().map_err(|_| bad())?;
            if slot >= MAX_KEYWORDS || !valid_flag(keyword) || keyword.starts_with('\\') {
                return Err(bad());
            }
            slots.insert(slot, keyword.to_owned());
        }
        Ok(Keywords { slots })
    }

    /// The file's text.
    pub fn render(&self) -> String {
        self.slots
            .iter()
            .map(|(slot, keyword)| format!("{slot} {keyword}\n"))
            .collect()
    }

    /// Whether no keyword has a letter.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The letter of `keyword`, given a free one if it has none; `None` when all
    /// 26 are taken.
    pub fn letter_or_assign(&mut self, keyword: &str) -> Option<char> {
        if let Some(letter) = self.letter(keyword) {
            return Some(letter);
        }
        let free = (0..MAX_KEYWORDS).find(|slot| !self.slots.contains_key(slot))?;
        self.slots.insert(free, keyword.to_owned());
        letter_of(free)
    }

    /// The letter of `keyword` (compared as IMAP compares flags), if it has one.
    pub fn letter(&self, keyword: &str) -> Option<char> {
        self.slots
            .iter()
            .find(|(_, k)| k.eq_ignore_ascii_case(keyword))
            .and_then(|(&slot, _)| letter_of(slot))
    }

    /// The keyword of letter `letter`.
    pub fn keyword(&self, letter: char) -> Option<&str> {
        let slot = (letter as usize).checked_sub('a' as usize)?;
        self.slots.get(&slot).map(String::as_str)
    }
}

fn letter_of(slot: usize) -> Option<char> {
    u8::try_from(slot)
        .ok()
        .filter(|&s| usize::from(s) < MAX_KEYWORDS)
        .map(|s| char::from(b'a' + s))
}

/// The letters after `:2,` for `flags` (system flags and keywords), in ASCII
/// order; keywords without a letter (the 27th and later of a folder) are counted in
/// the second value.
pub fn flag_letters(flags: &[String], keywords: &Keywords) -> (String, usize) {
    let mut letters = Vec::new();
    let mut missing = 0;
    for flag in flags {
        if let Some((letter, _)) = SYSTEM_FLAGS
            .iter()
            .find(|(_, f)| f.eq_ignore_ascii_case(flag))
        {
            letters.push(*letter);
        } else if flag.starts_with('\\') {
            // \Recent and the like: not a stored flag.
        } else if let Some(letter) = keywords.letter(flag) {
            letters.push(letter);
        } else {
            missing += 1;
        }
    }
    letters.sort_unstable();
    letters.dedup();
    (letters.into_iter().collect(), missing)
}

/// The flags of the letters after `:2,` (see the module docs).
pub fn flags_of_letters(letters: &str, keywords: &Keywords) -> Vec<String> {
    let mut flags = Vec::new();
    for letter in letters.chars() {
        if let Some((_, flag)) = SYSTEM_FLAGS.iter().find(|(l, _)| *l == letter) {
            flags.push((*flag).to_owned());
        } else if letter == 'P' {
            flags.push(FORWARDED.to_owned());
        } else if let Some(keyword) = keywords.keyword(letter) {
            flags.push(keyword.to_owned());
        }
    }
    crate::index::normalize_flags(flags)
}

/// A Maildir file name taken apart: `UNIQUE[,FIELD…][:2,FLAGS]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MaildirName<'a> {
    /// What names the message: before the first `,` or `:`.
    pub(crate) unique: &'a str,
    /// The `W=` field: the size with CRLF line ends.
    pub(crate) wire_size: Option<u64>,
    /// The letters after `:2,` (empty without them).
    pub(crate) letters: &'a str,
}

/// Takes a Maildir file name apart.
pub(crate) fn parse_maildir_name(name: &str) -> MaildirName<'_> {
    let (base, letters) = match name.split_once(':') {
        Some((base, info)) => (base, info.strip_prefix("2,").unwrap_or("")),
        None => (name, ""),
    };
    let mut fields = base.split(',');
    let unique = fields.next().unwrap_or(base);
    let wire_size = fields
        .filter_map(|f| f.strip_prefix("W="))
        .find_map(|w| w.parse().ok());
    MaildirName {
        unique,
        wire_size,
        letters,
    }
}

/// `wire` with every CRLF turned into LF (a bare CR stays: it is not a line end).
pub(crate) fn lf_endings(wire: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(wire.len());
    let mut i = 0;
    while i < wire.len() {
        if wire[i] == b'\r' && wire.get(i + 1) == Some(&b'\n') {
            i += 1;
            continue;
        }
        out.push(wire[i]);
        i += 1;
    }
    out
}

/// The wire (CRLF) form of a Maildir file's `text`. Every LF becomes CRLF when
/// that gives the `W=` size the name records (the exact inverse of
/// [`lf_endings`], even for a CR before a line end); otherwise only a LF without
/// its CR gets one (a file already holding CRLF stays as it is).
pub(crate) fn crlf_endings(text: &[u8], wire_size: Option<u64>) -> Vec<u8> {
    let lines = text.iter().filter(|&&b| b == b'\n').count();
    let every = wire_size == Some((text.len() + lines) as u64);
    let mut out = Vec::with_capacity(text.len() + lines);
    for (i, &b) in text.iter().enumerate() {
        if b == b'\n' && (every || i == 0 || text[i - 1] != b'\r') {
            out.push(b'\r');
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn folder_names_map_to_directories_and_back() {
        let cases = [
            ("Sent", ".Sent"),
            ("Work/2026", ".Work.2026"),
            ("Entwürfe", ".Entw&APw-rfe"),
            ("v1.2", ".v1&AC4-2"),
            ("Ü.x/y", ".&ANwALg-x.y"),
            ("A&B", ".A&-B"),
            ("INBOX/Sub", ".INBOX.Sub"),
            ("a b/c d", ".a b.c d"),
        ];
        for (name, dir) in cases {
            assert_eq!(folder_dir_name(name).as_deref(), Some(dir), "{name}");
            assert_eq!(folder_name_of_dir(dir).as_deref(), Ok(name), "{dir}");
        }
        assert_eq!(folder_dir_name("INBOX"), None);
        // What others write: raw UTF-8 (Dovecot's UTF-8 option) and inbox in any case.
        assert_eq!(folder_name_of_dir(".Entwürfe").as_deref(), Ok("Entwürfe"));
        assert_eq!(folder_name_of_dir(".inbox.x").as_deref(), Ok("INBOX/x"));
        // An invalid mUTF-7 level is taken as it is, as Dovecot shows it.
        assert_eq!(folder_name_of_dir(".a&AGE-").as_deref(), Ok("a&AGE-"));
        for bad in ["Sent", ".", ".a..b", ".a."] {
            assert!(folder_name_of_dir(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn subscriptions_of_both_versions() {
        let v1 = "INBOX\nWork.2026\nEntw&APw-rfe\nv1&AC4-2\n";
        assert_eq!(
            parse_subscriptions(v1),
            Ok(strings(&["INBOX", "Work/2026", "Entwürfe", "v1.2"]))
        );
        let v2 = "V\t2\n\nINBOX\nWork\t2026\na\u{1}tb\n";
        assert_eq!(
            parse_subscriptions(v2),
            Ok(strings(&["INBOX", "Work/2026", "a\tb"]))
        );
        assert!(parse_subscriptions("a..b\n").is_err());
    }

    #[test]
    fn flags_map_to_letters_and_back() {
        let mut keywords = Keywords::default();
        assert_eq!(keywords.letter_or_assign("$Forwarded"), Some('a'));
        assert_eq!(keywords.letter_or_assign("Work"), Some('b'));
        assert_eq!(keywords.letter_or_assign("work"), Some('b'));
        let flags = strings(&[
            "$Forwarded",
            "\\Answered",
            "\\Deleted",
            "\\Draft",
            "\\Flagged",
            "\\Recent",
            "\\Seen",
            "Work",
            "Unlettered",
        ]);
        let (letters, missing) = flag_letters(&flags, &keywords);
        assert_eq!(letters, "DFRSTab");
        assert_eq!(missing, 1, "a keyword without a letter");
        let back = flags_of_letters(&letters, &keywords);
        assert_eq!(
            back,
            strings(&[
                "$Forwarded",
                "\\Answered",
                "\\Deleted",
                "\\Draft",
                "\\Flagged",
                "\\Seen",
                "Work"
            ])
        );
        // P is $Forwarded; unknown letters are ignored.
        assert_eq!(
            flags_of_letters("PSXz", &keywords),
            strings(&["$Forwarded", "\\Seen"])
        );
        assert_eq!(flag_letters(&[], &keywords), (String::new(), 0));
    }

    #[test]
    fn keyword_files_parse_and_fill_up() {
        let keywords = Keywords::parse("0 $Junk\n3 Later\n\n").expect("parses");
        assert_eq!(keywords.keyword('a'), Some("$Junk"));
        assert_eq!(keywords.keyword('d'), Some("Later"));
        assert_eq!(keywords.keyword('b'), None);
        assert_eq!(keywords.render(), "0 $Junk\n3 Later\n");
        let mut keywords = keywords;
        assert_eq!(
            keywords.letter_or_assign("New"),
            Some('b'),
            "first free slot"
        );
        for n in 0..23 {
            assert!(keywords.letter_or_assign(&format!("k{n}")).is_some(), "{n}");
        }
        assert_eq!(keywords.letter_or_assign("one-too-many"), None);
        for bad in ["x Junk", "26 Junk", "0", "0 \\Seen", "0 a(b"] {
            assert!(Keywords::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn file_names_and_line_ends() {
        let name = parse_maildir_name("1767.M1P2Q3.mx1,S=20,W=22:2,RSa");
        assert_eq!(
            name,
            MaildirName {
                unique: "1767.M1P2Q3.mx1",
                wire_size: Some(22),
                letters: "RSa"
            }
        );
        let mbsync = parse_maildir_name("1767.12_3.host,U=7:2,S");
        assert_eq!((mbsync.unique, mbsync.wire_size), ("1767.12_3.host", None));
        assert_eq!(parse_maildir_name("plain").letters, "");
        assert_eq!(parse_maildir_name("x:1,experimental").letters, "");

        let wire = b"a\r\nb\rc\r\n\r\nd\r\r\n".to_vec();
        let text = lf_endings(&wire);
        assert_eq!(text, b"a\nb\rc\n\nd\r\n");
        assert_eq!(crlf_endings(&text, Some(wire.len() as u64)), wire);
        // Without W= (or another one), a CRLF already there stays.
        assert_eq!(crlf_endings(b"a\nb\r\n", None), b"a\r\nb\r\n");
        assert_eq!(crlf_endings(b"\n", Some(99)), b"\r\n");
    }
}
