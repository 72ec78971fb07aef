//! The POST log (`web99.md` §6.5): an 11-byte count line, then fixed 139-byte
//! records `%10d %10d %10d %5d %2d %2d %10d %-60.60s %10d %10d\n`.
//!
//! Fixed widths make the file self-checking: its length tells how many whole
//! records it holds, so a record torn by a crash is found (and cut off) at start-up,
//! and the count line can be rewritten in place.

use std::fmt::Write as _;

/// Bytes of the count line, `%10d\n`.
pub const HEADER: usize = 11;
/// Bytes of one record.
pub const RECORD: usize = 139;
/// Width of the file-name field.
const FILE_WIDTH: usize = 60;

/// One POST, as logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// 1, 2, 3, … in file order.
    pub number: u64,
    /// Unix time of the POST.
    pub time: i64,
    /// Process or thread id of the writer (written twice, to detect torn writes).
    pub pid: u32,
    /// Directory number from the form.
    pub dir: u32,
    /// Class from the form.
    pub class: u8,
    /// File number from the form.
    pub num: u8,
    /// The form's `client` field.
    pub client: u32,
    /// The file named by the form (`urlroot` + `dirNNNNN/classC_F`), cut to 60 bytes.
    pub file: String,
    /// The user id of the request's cookie.
    pub cookie: u32,
}

/// The count line for `n` records.
pub fn count_line(n: u64) -> String {
    format!("{n:10}\n")
}

/// Appends one record of exactly [`RECORD`] bytes.
pub fn write_record(out: &mut String, r: &Record) {
    let file: String = r
        .file
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(FILE_WIDTH)
        .collect();
    let _ = writeln!(
        out,
        "{:10} {:10} {:10} {:5} {:2} {:2} {:10} {:<60} {:10} {:10}",
        r.number, r.time, r.pid, r.dir, r.class, r.num, r.client, file, r.pid, r.cookie
    );
}

/// Whole records in a log file of `len` bytes; anything beyond them is a torn
/// tail to cut off.
pub fn whole_records(len: u64) -> u64 {
    len.saturating_sub(HEADER as u64) / RECORD as u64
}

/// What is wrong with a log's contents.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogError {
    /// The count line is missing or not a number.
    Count,
    /// The count line disagrees with the records present.
    CountMismatch {
        /// The count line.
        count: u64,
        /// Records present.
        records: u64,
    },
    /// Record `n` (1-based position) is malformed or torn.
    Record(u64),
    /// Record numbers do not increase one by one at this position.
    OutOfOrder(u64),
}

impl std::fmt::Display for LogError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LogError::Count => f.write_str("missing or malformed count line"),
            LogError::CountMismatch { count, records } => {
                write!(f, "count line says {count}, {records} records present")
            }
            LogError::Record(n) => write!(f, "record {n} is malformed"),
            LogError::OutOfOrder(n) => write!(f, "record {n} is out of order"),
        }
    }
}

impl std::error::Error for LogError {}

/// Parses and checks a whole log: the count equals the records, every record is
/// whole with equal pid fields, and numbers run 1, 2, 3, ….
pub fn parse(text: &str) -> Result<Vec<Record>, LogError> {
    let mut lines = text.split_inclusive('\n');
    let count: u64 = lines
        .next()
        .filter(|l| l.len() == HEADER)
        .and_then(|l| l.trim().parse().ok())
        .ok_or(LogError::Count)?;
    let mut records = Vec::new();
    for (i, line) in lines.enumerate() {
        let at = i as u64 + 1;
        let record = parse_record(line).ok_or(LogError::Record(at))?;
        if record.number != at {
            return Err(LogError::OutOfOrder(at));
        }
        records.push(record);
    }
    if records.len() as u64 != count {
        return Err(LogError::CountMismatch {
            count,
            records: records.len() as u64,
        });
    }
    Ok(records)
}

fn parse_record(line: &str) -> Option<Record> {
    if line.len() != RECORD || !line.ends_with('\n') {
        return None;
    }
    let f: Vec<&str> = line.split_whitespace().collect();
    let [
        number,
        time,
        pid,
        dir,
        class,
        num,
        client,
        file,
        pid2,
        cookie,
    ] = f[..]
    else {
        return None;
    };
    (pid == pid2).then_some(())?;
    Some(Record {
        number: number.parse().ok()?,
        time: time.parse().ok()?,
        pid: pid.parse().ok()?,
        dir: dir.parse().ok()?,
        class: class.parse().ok()?,
        num: num.parse().ok()?,
        client: client.parse().ok()?,
        file: file.to_owned(),
        cookie: cookie.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(number: u64) -> Record {
        Record {
            number,
            time: 952_393_980,
            pid: 4242,
            dir: 4,
            class: 1,
            num: 3,
            client: 2,
            file: "/file_set/dir00004/class1_3".into(),
            cookie: 10_001,
        }
    }

    #[test]
    fn records_are_139_bytes() {
        let mut out = String::new();
        write_record(&mut out, &record(1));
        assert_eq!(out.len(), RECORD);
        assert_eq!(
            out,
            format!(
                "         1  952393980       4242     4  1  3          2 {:<60}       4242      10001\n",
                "/file_set/dir00004/class1_3"
            )
        );
        let mut long = record(2);
        long.file = "/x".repeat(50) + " with spaces\x01";
        let mut out = String::new();
        write_record(&mut out, &long);
        assert_eq!(out.len(), RECORD);
        assert_eq!(count_line(0), "         0\n");
        assert_eq!(count_line(0).len(), HEADER);
    }

    #[test]
    fn parse_checks_the_whole_log() {
        let mut log = count_line(3);
        for n in 1..=3 {
            write_record(&mut log, &record(n));
        }
        assert_eq!(parse(&log).map(|r| r.len()), Ok(3));
        assert_eq!(whole_records(log.len() as u64), 3);

        let torn = &log[..log.len() - 20];
        assert_eq!(whole_records(torn.len() as u64), 2);
        assert_eq!(parse(torn), Err(LogError::Record(3)));

        let mut miscounted = count_line(4);
        miscounted.push_str(&log[HEADER..]);
        assert_eq!(
            parse(&miscounted),
            Err(LogError::CountMismatch {
                count: 4,
                records: 3
            })
        );

        let mut disordered = count_line(2);
        write_record(&mut disordered, &record(1));
        write_record(&mut disordered, &record(3));
        assert_eq!(parse(&disordered), Err(LogError::OutOfOrder(2)));

        let inconsistent = log.replacen("      4242      10001", "      4243      10001", 1);
        assert_eq!(parse(&inconsistent), Err(LogError::Record(1)));
        assert_eq!(parse("garbage"), Err(LogError::Count));
    }
}
