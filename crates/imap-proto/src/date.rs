//! IMAP dates: `date` (`d-MMM-yyyy`, SEARCH's BEFORE, ON, SINCE...) and `date-time`
//! (`"dd-MMM-yyyy hh:mm:ss +zzzz"`, APPEND's and INTERNALDATE's), RFC 9051 §9.
//!
//! Pure calendar arithmetic (proleptic Gregorian, days from the civil date); no clock.

use std::fmt;

const MONTHS: [&[u8; 3]; 12] = [
    b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
];

/// A calendar date, as SEARCH compares them (disregarding time and timezone).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// The year (four digits on the wire).
    pub year: u16,
    /// 1 to 12.
    pub month: u8,
    /// 1 to the month's length.
    pub day: u8,
}

impl Date {
    /// The date from its parts, when they name a real day.
    pub fn new(year: u16, month: u8, day: u8) -> Option<Date> {
        ((1..=12).contains(&month) && day >= 1 && day <= days_in_month(year, month))
            .then_some(Date { year, month, day })
    }

    /// Days since 1970-01-01 (negative before).
    pub fn days_since_epoch(self) -> i64 {
        days_from_civil(
            i64::from(self.year),
            i64::from(self.month),
            i64::from(self.day),
        )
    }

    /// The UTC date of a unix time.
    pub fn from_unix(seconds: i64) -> Option<Date> {
        let (y, m, d) = civil_from_days(seconds.div_euclid(86_400));
        Date::new(u16::try_from(y).ok()?, m, d)
    }

    /// Parses `d-MMM-yyyy` (one or two day digits, month names case-insensitive).
    pub fn parse(text: &[u8]) -> Option<Date> {
        let mut parts = text.split(|&b| b == b'-');
        let (Some(day), Some(month), Some(year), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        if day.is_empty() || day.len() > 2 || year.len() != 4 {
            return None;
        }
        let day = u8::try_from(digits(day)?).ok()?;
        let year = u16::try_from(digits(year)?).ok()?;
        Date::new(year, month_number(month)?, day)
    }
}

impl fmt::Display for Date {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let month = MONTHS[usize::from(self.month.clamp(1, 12) - 1)];
        write!(
            f,
            "{}-{}-{:04}",
            self.day,
            String::from_utf8_lossy(month),
            self.year
        )
    }
}

fn digits(text: &[u8]) -> Option<u32> {
    if text.is_empty() || text.len() > 9 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(text.iter().fold(0, |n, &b| n * 10 + u32::from(b - b'0')))
}

fn month_number(name: &[u8]) -> Option<u8> {
    let i = MONTHS.iter().position(|m| m.eq_ignore_ascii_case(name))?;
    u8::try_from(i + 1).ok()
}

fn is_leap(year: u16) -> bool {
    (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400)
}

fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Howard Hinnant's days_from_civil.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Howard Hinnant's civil_from_days.
fn civil_from_days(z: i64) -> (i64, u8, u8) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    // d is 1..=31 and m 1..=12 by construction.
    (y, m as u8, d as u8)
}

/// Parses a `date-time` without its quotes: `dd-MMM-yyyy hh:mm:ss +zzzz` (the day
/// may be space-padded or, leniently, one digit) into unix seconds.
pub fn parse_date_time(text: &[u8]) -> Option<i64> {
    let text = text.strip_prefix(b" ").unwrap_or(text);
    let (date, rest) = text.split_at(text.iter().position(|&b| b == b' ')?);
    let date = Date::parse(date)?;
    let rest = rest.strip_prefix(b" ")?;
    if rest.len() != 14 || rest[2] != b':' || rest[5] != b':' || rest[8] != b' ' {
        return None;
    }
    let (h, mi, s) = (
        digits(&rest[0..2])?,
        digits(&rest[3..5])?,
        digits(&rest[6..8])?,
    );
    if h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let sign = match rest[9] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let (zh, zm) = (digits(&rest[10..12])?, digits(&rest[12..14])?);
    if zm > 59 {
        return None;
    }
    let offset = sign * i64::from(zh * 3600 + zm * 60);
    let local = date.days_since_epoch() * 86_400 + i64::from(h * 3600 + mi * 60 + s);
    Some(local - offset)
}

/// Appends unix seconds as a quoted `date-time` in UTC: `"07-Dec-2026 16:51:50 +0000"`.
pub fn write_date_time(out: &mut Vec<u8>, seconds: i64) {
    let days = seconds.div_euclid(86_400);
    let secs = seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let month = String::from_utf8_lossy(MONTHS[usize::from(m - 1)]);
    let y = y.clamp(0, 9999);
    out.extend_from_slice(
        format!(
            "\"{d:02}-{month}-{y:04} {:02}:{:02}:{:02} +0000\"",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
        .as_bytes(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(Date::parse(b"1-Feb-1994"), Date::new(1994, 2, 1));
        assert_eq!(Date::parse(b"29-feb-2024"), Date::new(2024, 2, 29));
        for bad in [
            &b"29-Feb-2023"[..],
            b"1-Foo-2000",
            b"123-Jan-2000",
            b"1-Jan-99",
            b"-Jan-2000",
            b"1-Jan-2000-",
            b"0-Jan-2000",
            b"+1-Jan-2000",
        ] {
            assert_eq!(Date::parse(bad), None, "{bad:?}");
        }
        assert_eq!(Date::new(1970, 1, 1).map(Date::days_since_epoch), Some(0));
        assert_eq!(Date::from_unix(86_400 * 365), Date::new(1971, 1, 1));
        assert_eq!(Date::from_unix(-1), Date::new(1969, 12, 31));
        assert_eq!(
            Date::new(2026, 12, 7).map(|d| d.to_string()).as_deref(),
            Some("7-Dec-2026")
        );
    }

    #[test]
    fn date_times() {
        assert_eq!(parse_date_time(b"01-Jan-1970 00:00:00 +0000"), Some(0));
        assert_eq!(parse_date_time(b" 1-Jan-1970 01:00:00 +0100"), Some(0));
        assert_eq!(parse_date_time(b"31-Dec-1969 23:00:00 -0100"), Some(0));
        assert_eq!(
            parse_date_time(b"17-Jul-1996 02:44:25 -0700"),
            Some(837_596_665)
        );
        for bad in [
            &b"17-Jul-1996 02:44:25"[..],
            b"17-Jul-1996 24:00:00 +0000",
            b"17-Jul-1996 02:44:25 0700",
            b"17-Jul-1996 02:44:25 +07000",
            b"17-Jul-1996  02:44:25 +0700",
            b"",
        ] {
            assert_eq!(parse_date_time(bad), None, "{bad:?}");
        }
        let mut out = Vec::new();
        write_date_time(&mut out, 837_596_665);
        assert_eq!(out, b"\"17-Jul-1996 09:44:25 +0000\"");
        out.clear();
        write_date_time(&mut out, -1);
        assert_eq!(out, b"\"31-Dec-1969 23:59:59 +0000\"");
    }
}
