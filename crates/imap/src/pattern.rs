//! LIST patterns (RFC 9051 §6.3.9): `*` matches any run of characters, `%` any run
//! without the hierarchy delimiter; everything else matches itself, INBOX in any
//! case. Matching is a dynamic programme over the two strings, linear in their
//! product, so a hostile pattern costs at most [`MAX_PATTERN`] × the name length.

use stoa_mailstore::DELIMITER;

/// Longest pattern considered, in characters; a longer one matches nothing.
const MAX_PATTERN: usize = 1024;

/// Whether mailbox `name` (canonical: `INBOX` upper-case) matches `pattern`.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    let pattern = canonical_inbox(pattern);
    let p: Vec<char> = pattern.chars().collect();
    if p.len() > MAX_PATTERN {
        return false;
    }
    let n: Vec<char> = name.chars().collect();
    // row[j]: whether p[..i] matches n[..j].
    let mut row = vec![false; n.len() + 1];
    row[0] = true;
    for &pc in &p {
        let mut next = vec![false; n.len() + 1];
        match pc {
            '*' => {
                let mut any = false;
                for j in 0..=n.len() {
                    any |= row[j];
                    next[j] = any;
                }
            }
            '%' => {
                let mut any = false;
                for j in 0..=n.len() {
                    if j > 0 && n[j - 1] == DELIMITER {
                        any = false;
                    }
                    any |= row[j];
                    next[j] = any;
                }
            }
            c => {
                for j in 1..=n.len() {
                    next[j] = row[j - 1] && n[j - 1] == c;
                }
            }
        }
        row = next;
    }
    row[n.len()]
}

/// The pattern with a leading `INBOX` (any case) spelled `INBOX`, as names are.
fn canonical_inbox(pattern: &str) -> String {
    let first_end = pattern.find(DELIMITER).unwrap_or(pattern.len());
    if pattern[..first_end].eq_ignore_ascii_case("INBOX") {
        format!("INBOX{}", &pattern[first_end..])
    } else {
        pattern.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards() {
        assert!(matches("*", "INBOX"));
        assert!(matches("*", "a/b/c"));
        assert!(matches("%", "Sent"));
        assert!(!matches("%", "a/b"));
        assert!(matches("a/%", "a/b"));
        assert!(!matches("a/%", "a/b/c"));
        assert!(matches("a/*", "a/b/c"));
        assert!(matches("inbox", "INBOX"));
        assert!(matches("Inbox/%", "INBOX/x"));
        assert!(!matches("sent", "Sent"), "case-sensitive but for INBOX");
        assert!(matches("S%t", "Sent"));
        assert!(matches("%/%", "a/b"));
        assert!(!matches("", "a"));
        let hostile = "*%".repeat(400);
        assert!(matches(&hostile, "abc"));
        assert!(!matches(&"*".repeat(2000), "abc"));
    }
}
