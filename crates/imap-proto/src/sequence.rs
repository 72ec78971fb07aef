//! Sequence sets (RFC 9051 §9 `sequence-set`, RFC 5182 `$`): what FETCH, STORE,
//! SEARCH, COPY, MOVE and UID EXPUNGE act on, resolved against the mailbox, and the
//! compact form of a list of numbers for responses (`1:3,5,7:9`).

use std::fmt;
use std::ops::RangeInclusive;

/// One end of a range: a number, or `*`, the largest number in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeqNumber {
    /// A number (at least 1).
    Value(u32),
    /// `*`: the largest message sequence number or UID in use.
    Largest,
}

impl SeqNumber {
    /// The number `*` stands for given the largest in use, or `None` for `*` in an
    /// empty mailbox.
    pub fn resolve(self, largest: u32) -> Option<u32> {
        match self {
            SeqNumber::Value(n) => Some(n),
            SeqNumber::Largest => (largest > 0).then_some(largest),
        }
    }
}

/// A sequence set: ranges as the client wrote them, or `$`, the result the last
/// `SEARCH RETURN (SAVE)` saved (RFC 5182), which the server substitutes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SequenceSet {
    /// Comma-separated numbers and ranges, in the client's order; `5:2` is the same
    /// range as `2:5`. Never empty.
    Ranges(Vec<(SeqNumber, SeqNumber)>),
    /// `$`: the saved search result.
    Saved,
}

impl SequenceSet {
    /// Whether this is `$`.
    pub fn is_saved(&self) -> bool {
        matches!(self, SequenceSet::Saved)
    }

    /// The ranges with `*` resolved to `largest` and each ordered low to high
    /// (`5:2` gives `2..=5`, `7:*` with largest 3 gives `3..=7`). Ranges naming `*` in
    /// an empty mailbox (`largest` 0) are left out; `$` gives nothing (resolve it
    /// first). Ranges may overlap and exceed `largest`: see [`Self::fits`].
    pub fn ranges(&self, largest: u32) -> impl Iterator<Item = RangeInclusive<u32>> + '_ {
        let list: &[(SeqNumber, SeqNumber)] = match self {
            SequenceSet::Ranges(list) => list,
            SequenceSet::Saved => &[],
        };
        list.iter().filter_map(move |&(a, b)| {
            let (a, b) = (a.resolve(largest)?, b.resolve(largest)?);
            Some(a.min(b)..=a.max(b))
        })
    }

    /// Whether `n` is in the set, `*` standing for `largest`.
    pub fn contains(&self, n: u32, largest: u32) -> bool {
        self.ranges(largest).any(|r| r.contains(&n))
    }

    /// Whether every number the client wrote is at most `largest`: message sequence
    /// numbers beyond the mailbox are an error (RFC 9051 §9 `seq-number`), UIDs
    /// beyond it are simply absent.
    pub fn fits(&self, largest: u32) -> bool {
        match self {
            SequenceSet::Ranges(list) => list.iter().all(|&(a, b)| {
                [a, b].iter().all(|n| {
                    matches!(n, SeqNumber::Largest)
                        || matches!(n, SeqNumber::Value(v) if *v <= largest)
                })
            }),
            SequenceSet::Saved => true,
        }
    }

    /// The set as ascending, disjoint, non-adjacent ranges within `1..=largest`:
    /// what a server binary-searches or walks alongside its UID list, in
    /// O(r log r) for r ranges whatever numbers they span.
    pub fn merged(&self, largest: u32) -> Vec<RangeInclusive<u32>> {
        let mut ranges: Vec<RangeInclusive<u32>> = self
            .ranges(largest)
            .filter(|r| *r.start() <= largest)
            .map(|r| *r.start()..=(*r.end()).min(largest))
            .collect();
        ranges.sort_by_key(|r| *r.start());
        let mut out: Vec<RangeInclusive<u32>> = Vec::with_capacity(ranges.len());
        for r in ranges {
            match out.last_mut() {
                Some(last) if *r.start() <= last.end().saturating_add(1) => {
                    if r.end() > last.end() {
                        *last = *last.start()..=*r.end();
                    }
                }
                _ => out.push(r),
            }
        }
        out
    }

    /// The numbers in the set that are at most `largest`, ascending and without
    /// repeats. As many as `largest` at worst: for message sequence numbers (the
    /// mailbox's size), not for UIDs (use [`Self::merged`] against the UID list).
    pub fn to_sorted(&self, largest: u32) -> Vec<u32> {
        self.merged(largest).into_iter().flatten().collect()
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeqNumber::Value(n) => write!(f, "{n}"),
            SeqNumber::Largest => f.write_str("*"),
        }
    }
}

impl fmt::Display for SequenceSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SequenceSet::Saved => f.write_str("$"),
            SequenceSet::Ranges(list) => {
                for (i, (a, b)) in list.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    if a == b {
                        write!(f, "{a}")?;
                    } else {
                        write!(f, "{a}:{b}")?;
                    }
                }
                Ok(())
            }
        }
    }
}

/// Appends `numbers` (ascending; repeats are tolerated) as a sequence set with runs
/// compressed: `[1, 2, 3, 5, 7, 8, 9]` is `1:3,5,7:9`. Nothing for an empty list.
pub fn write_sequence(out: &mut Vec<u8>, numbers: &[u32]) {
    let mut i = 0;
    let mut first = true;
    while i < numbers.len() {
        let start = numbers[i];
        let mut end = start;
        i += 1;
        while i < numbers.len() && (numbers[i] == end || Some(numbers[i]) == end.checked_add(1)) {
            end = numbers[i];
            i += 1;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(start.to_string().as_bytes());
        if end != start {
            out.push(b':');
            out.extend_from_slice(end.to_string().as_bytes());
        }
    }
}

/// [`write_sequence`] into a `String`.
pub fn format_sequence(numbers: &[u32]) -> String {
    let mut out = Vec::new();
    write_sequence(&mut out, numbers);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use SeqNumber::{Largest, Value};

    #[test]
    fn resolving() {
        let set = SequenceSet::Ranges(vec![(Value(5), Value(2)), (Value(9), Largest)]);
        assert_eq!(set.ranges(7).collect::<Vec<_>>(), vec![2..=5, 7..=9]);
        assert!(set.contains(3, 7) && set.contains(8, 7) && !set.contains(6, 7));
        assert!(!set.fits(7) && set.fits(9));
        assert_eq!(set.to_sorted(7), vec![2, 3, 4, 5, 7]);
        let overlapping = SequenceSet::Ranges(vec![
            (Value(9), Value(12)),
            (Value(1), Value(3)),
            (Value(4), Value(4)),
            (Value(2), Value(2)),
            (Value(11), Largest),
        ]);
        assert_eq!(overlapping.merged(20), vec![1..=4, 9..=20]);
        assert_eq!(overlapping.merged(10), vec![1..=4, 9..=10]);
        let star = SequenceSet::Ranges(vec![(Largest, Largest)]);
        assert_eq!(star.ranges(0).count(), 0);
        assert!(!star.contains(0, 0));
        assert!(star.contains(4, 4));
        let big = SequenceSet::Ranges(vec![(Value(1), Value(u32::MAX))]);
        assert_eq!(big.to_sorted(3), vec![1, 2, 3]);
        assert_eq!(SequenceSet::Saved.ranges(5).count(), 0);
        assert_eq!(set.to_string(), "5:2,9:*");
    }

    #[test]
    fn formatting() {
        assert_eq!(format_sequence(&[1, 2, 3, 5, 7, 8, 9]), "1:3,5,7:9");
        assert_eq!(format_sequence(&[]), "");
        assert_eq!(format_sequence(&[4]), "4");
        assert_eq!(format_sequence(&[4, 4, 5]), "4:5");
        assert_eq!(
            format_sequence(&[u32::MAX - 1, u32::MAX]),
            "4294967294:4294967295"
        );
    }
}
