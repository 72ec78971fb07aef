//! Dates: the IMF-fixdate of `Date` and `Last-Modified` (RFC 9110 §5.6.7), the
//! Common Log Format timestamp, and a per-second cache of both.
//!
//! The caller passes the time in seconds since the Unix epoch; this crate reads no
//! clock.

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A broken-down UTC time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Civil {
    year: i64,
    month: usize, // 1..=12
    day: u32,
    hour: u32,
    minute: u32,
    second: u32,
    weekday: usize, // 0 = Thursday (1970-01-01)
}

/// Howard Hinnant's `civil_from_days`, valid for every date Stoa will meet.
fn civil(secs: u64) -> Civil {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as usize;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Civil {
        year,
        month,
        day,
        hour: (rem / 3600) as u32,
        minute: (rem / 60 % 60) as u32,
        second: (rem % 60) as u32,
        weekday: (days.rem_euclid(7)) as usize,
    }
}

fn push2(out: &mut Vec<u8>, n: u32) {
    out.push(b'0' + (n / 10 % 10) as u8);
    out.push(b'0' + (n % 10) as u8);
}

fn push_year(out: &mut Vec<u8>, year: i64) {
    let mut digits = itoa::Buffer::new();
    out.extend_from_slice(digits.format(year).as_bytes());
}

/// Appends `Sun, 06 Nov 1994 08:49:37 GMT` for `secs` since the epoch.
pub fn write_http_date(out: &mut Vec<u8>, secs: u64) {
    let c = civil(secs);
    out.extend_from_slice(DAYS[c.weekday].as_bytes());
    out.extend_from_slice(b", ");
    push2(out, c.day);
    out.push(b' ');
    out.extend_from_slice(MONTHS[c.month - 1].as_bytes());
    out.push(b' ');
    push_year(out, c.year);
    out.push(b' ');
    write_clock(out, &c);
    out.extend_from_slice(b" GMT");
}

/// Appends the Common Log Format timestamp `[10/Oct/2000:13:55:36 +0000]` (UTC).
pub fn write_clf_date(out: &mut Vec<u8>, secs: u64) {
    let c = civil(secs);
    out.push(b'[');
    push2(out, c.day);
    out.push(b'/');
    out.extend_from_slice(MONTHS[c.month - 1].as_bytes());
    out.push(b'/');
    push_year(out, c.year);
    out.push(b':');
    write_clock(out, &c);
    out.extend_from_slice(b" +0000]");
}

fn write_clock(out: &mut Vec<u8>, c: &Civil) {
    push2(out, c.hour);
    out.push(b':');
    push2(out, c.minute);
    out.push(b':');
    push2(out, c.second);
}

/// Parses an HTTP date in any of the three formats of RFC 9110 §5.6.7 into seconds
/// since the epoch. `None` for anything else (the header is then ignored).
pub fn parse_http_date(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?;
    let time = httpdate::parse_http_date(text.trim()).ok()?;
    time.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_secs())
}

/// The `Date` value and the log timestamp for the current second, recomputed only
/// when the second changes (hyper's `common/date.rs` idea).
#[derive(Debug, Clone)]
pub struct DateCache {
    secs: u64,
    http: Vec<u8>,
    clf: Vec<u8>,
}

impl Default for DateCache {
    fn default() -> Self {
        DateCache::new()
    }
}

impl DateCache {
    /// An empty cache; the first [`DateCache::update`] fills it.
    pub fn new() -> DateCache {
        let mut cache = DateCache {
            secs: u64::MAX,
            http: Vec::with_capacity(29),
            clf: Vec::with_capacity(28),
        };
        cache.update(0);
        cache
    }

    /// Moves the cache to `secs` since the epoch.
    pub fn update(&mut self, secs: u64) {
        if secs == self.secs {
            return;
        }
        self.secs = secs;
        self.http.clear();
        write_http_date(&mut self.http, secs);
        self.clf.clear();
        write_clf_date(&mut self.clf, secs);
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT` for the cached second.
    pub fn http(&self) -> &[u8] {
        &self.http
    }

    /// `[06/Nov/1994:08:49:37 +0000]` for the cached second.
    pub fn clf(&self) -> &[u8] {
        &self.clf
    }

    /// The cached second.
    pub fn secs(&self) -> u64 {
        self.secs
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    #[test]
    fn matches_httpdate_over_many_dates() {
        let mut secs = 0u64;
        while secs < 5_000_000_000 {
            let mut ours = Vec::new();
            write_http_date(&mut ours, secs);
            let theirs = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(secs));
            assert_eq!(String::from_utf8(ours).expect("ascii"), theirs);
            assert_eq!(parse_http_date(theirs.as_bytes()), Some(secs));
            secs += 86_399 * 37 + 12_345;
        }
    }

    #[test]
    fn formats() {
        let mut cache = DateCache::new();
        cache.update(784_111_777);
        assert_eq!(cache.http(), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(cache.clf(), b"[06/Nov/1994:08:49:37 +0000]");
        assert_eq!(cache.secs(), 784_111_777);
    }

    #[test]
    fn parses_the_obsolete_formats() {
        assert_eq!(
            parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(
            parse_http_date(b"Sun Nov  6 08:49:37 1994"),
            Some(784_111_777)
        );
        assert_eq!(parse_http_date(b"yesterday"), None);
        assert_eq!(parse_http_date(b"\xff"), None);
    }
}
