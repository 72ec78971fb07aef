//! The messages the generators send: exact sizes, a tag the sink and the delivery
//! probes recognise, and a body that needs no dot-stuffing.
//!
//! A message is a head (header fields, the blank line and one short filler line)
//! followed by whole 80-byte filler lines shared by every message, so a 2.7 MB
//! message costs no allocation beyond its head. Lines never start with `.` and
//! end in CRLF, so the bytes go on the wire as they are.

use std::fmt::Write as _;
use std::sync::OnceLock;

/// The header field carrying a message's [`Tag`].
pub const TAG_HEADER: &str = "X-Stoa-Bench";

/// Bytes per filler line, CRLF included.
const LINE: usize = 80;
/// The largest message the size table draws (2,675 KB) plus slack.
const FILLER_MAX: usize = 2_800 * 1024;

/// Which run, level and window a message belongs to, and whether it is a
/// delivery probe: `X-Stoa-Bench: <run> <level> <m|w> <seq> [probe]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// A random id of the harness run (tells this run's mail from older mail).
    pub run: u32,
    /// The load level's index in the run (0, 1, 2…).
    pub level: u8,
    /// Sent from a session started inside the measurement window.
    pub measured: bool,
    /// The message's number within the run.
    pub seq: u64,
    /// A delivery-time probe.
    pub probe: bool,
}

impl Tag {
    /// The header field's value.
    pub fn value(&self) -> String {
        format!(
            "{:08x} {} {} {}{}",
            self.run,
            self.level,
            if self.measured { 'm' } else { 'w' },
            self.seq,
            if self.probe { " probe" } else { "" }
        )
    }

    /// Parses a header field's value (surrounding spaces allowed).
    pub fn parse(value: &str) -> Option<Tag> {
        let mut it = value.split_ascii_whitespace();
        let run = u32::from_str_radix(it.next()?, 16).ok()?;
        let level = it.next()?.parse().ok()?;
        let measured = match it.next()? {
            "m" => true,
            "w" => false,
            _ => return None,
        };
        let seq = it.next()?.parse().ok()?;
        let probe = match it.next() {
            None => false,
            Some("probe") => true,
            Some(_) => return None,
        };
        it.next().is_none().then_some(Tag {
            run,
            level,
            measured,
            seq,
            probe,
        })
    }

    /// Finds the tag in a message's header section (up to the first empty line);
    /// field names match case-insensitively, folded values are not expected.
    pub fn find(message: &[u8]) -> Option<Tag> {
        for line in message.split(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                return None;
            }
            let Some(colon) = line.iter().position(|&b| b == b':') else {
                continue;
            };
            if line[..colon].eq_ignore_ascii_case(TAG_HEADER.as_bytes()) {
                return std::str::from_utf8(&line[colon + 1..])
                    .ok()
                    .and_then(Tag::parse);
            }
        }
        None
    }
}

/// The shared filler: [`FILLER_MAX`] bytes of 80-byte lines.
fn filler() -> &'static [u8] {
    static FILLER: OnceLock<Vec<u8>> = OnceLock::new();
    FILLER.get_or_init(|| {
        let pattern = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let mut out = Vec::with_capacity(FILLER_MAX);
        let mut i = 0usize;
        while out.len() + LINE <= FILLER_MAX {
            for k in 0..LINE - 2 {
                out.push(pattern[(i + k) % pattern.len()]);
            }
            out.extend_from_slice(b"\r\n");
            i += 7;
        }
        out
    })
}

/// A message ready to send: `head` then `body`, exactly the requested size.
#[derive(Debug, Clone)]
pub struct Message {
    /// Header fields, blank line, one partial filler line.
    pub head: Vec<u8>,
    /// Whole filler lines.
    pub body: &'static [u8],
}

impl Message {
    /// Builds a message of `size` bytes (at least the head's size; the head is
    /// about 250 bytes, the table's smallest size 1,024) from `from` to `to`
    /// (header fields only; the envelope is the session's).
    pub fn new(from: &str, to: &str, tag: &Tag, size: usize) -> Message {
        let mut head = String::with_capacity(320);
        let _ = write!(
            head,
            "From: <{from}>\r\nTo: <{to}>\r\nSubject: stoa bench mail {seq}\r\n\
             Message-ID: <{run:08x}.{seq}@bench.stoa>\r\n{TAG_HEADER}: {tag}\r\n\r\n",
            seq = tag.seq,
            run = tag.run,
            tag = tag.value()
        );
        let size = size.min(FILLER_MAX);
        // What is left after the head: whole lines plus one partial line (≥ 2 bytes
        // for its CRLF; a remainder of 1 becomes a longer partial line).
        let rest = size.saturating_sub(head.len());
        let mut partial = rest % LINE;
        let mut whole = rest - partial;
        if partial < 2 && whole >= LINE {
            whole -= LINE;
            partial += LINE;
        }
        let mut head = head.into_bytes();
        if partial >= 2 {
            head.extend(std::iter::repeat_n(b'z', partial - 2));
            head.extend_from_slice(b"\r\n");
        }
        Message {
            head,
            body: &filler()[..whole],
        }
    }

    /// The size in bytes (what SMTP's DATA carries before the terminating dot).
    pub fn len(&self) -> usize {
        self.head.len() + self.body.len()
    }

    /// Never empty.
    pub fn is_empty(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(m: &Message) -> Vec<u8> {
        let mut v = m.head.clone();
        v.extend_from_slice(m.body);
        v
    }

    #[test]
    fn exact_sizes_and_clean_lines() {
        let tag = Tag {
            run: 0xdead_beef,
            level: 1,
            measured: true,
            seq: 42,
            probe: true,
        };
        for kb in [1usize, 2, 3, 10, 100, 1000, 2675] {
            for extra in [0usize, 1, 2, 79, 80, 81] {
                let size = kb * 1024 + extra;
                let m = Message::new("a@b.test", "c@d.test", &tag, size);
                assert_eq!(m.len(), size, "size {size}");
                let all = bytes(&m);
                assert!(all.ends_with(b"\r\n"));
                for line in all.split(|&b| b == b'\n') {
                    assert!(!line.starts_with(b"."));
                    assert!(line.len() <= 1000);
                }
                assert_eq!(
                    all.windows(2).filter(|w| w == b"\r\n").count(),
                    all.iter().filter(|&&b| b == b'\n').count()
                );
                assert_eq!(Tag::find(&all), Some(tag));
            }
        }
    }

    #[test]
    fn tag_round_trip_and_rejects() {
        let tag = Tag {
            run: 7,
            level: 2,
            measured: false,
            seq: 9,
            probe: false,
        };
        assert_eq!(Tag::parse(&tag.value()), Some(tag));
        assert_eq!(Tag::parse(" 00000007 2 w 9 "), Some(tag));
        for bad in [
            "",
            "zz 1 m 2",
            "1 1 x 2",
            "1 1 m",
            "1 1 m 2 extra",
            "1 1 m 2 probe more",
        ] {
            assert_eq!(Tag::parse(bad), None, "{bad}");
        }
        assert_eq!(
            Tag::find(b"Subject: x\r\n\r\nX-Stoa-Bench: 1 1 m 2\r\n"),
            None
        );
        assert_eq!(
            Tag::find(b"x-stoa-bench: 1 1 m 2\r\n\r\n").map(|t| t.seq),
            Some(2)
        );
    }
}
