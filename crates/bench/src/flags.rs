//! The value parsers of the harnesses' flags, for the option structs that derive
//! them (`#[derive(clap::Args)]`): a wrong value is refused by the command line,
//! before a run starts, with the flag and the value named.

use std::time::Duration;

/// A length of time as `stoa serve`'s configuration file writes one: `"200ms"`,
/// `"20s"`, `"5m"`, `"1h"`, `"5d"`; a bare number is seconds.
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let n: u32 = match digits.parse::<u64>() {
        Ok(n) => u32::try_from(n).map_err(|_| format!("{text:?} is too long"))?,
        Err(_) => {
            return Err(format!(
                "{text:?} is not a duration like \"20s\" or \"200ms\""
            ));
        }
    };
    let per_unit = match unit.trim() {
        "ms" => Duration::from_millis(1),
        "" | "s" => Duration::from_secs(1),
        "m" | "min" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        "d" => Duration::from_secs(86_400),
        other => return Err(format!("{other:?} is not a time unit (ms, s, m, h, d)")),
    };
    per_unit
        .checked_mul(n)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// A share from 0 to 1.
pub(crate) fn ratio(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(format!("{s:?} is not a number from 0 to 1")),
    }
}

/// A number above 0.
pub(crate) fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        _ => Err(format!("{s:?} is not a positive number")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_the_configuration_file_writes_them() {
        assert_eq!(duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(duration("20"), Ok(Duration::from_secs(20)));
        assert_eq!(duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(duration("1h"), Ok(Duration::from_secs(3600)));
        for bad in ["", "fast", "10 parsecs", "-1s", "99999999999h"] {
            assert!(duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ratios_and_positive_numbers() {
        assert_eq!(ratio("0.5"), Ok(0.5));
        assert!(ratio("1.5").is_err() && ratio("x").is_err());
        assert_eq!(positive("20"), Ok(20.0));
        assert!(positive("0").is_err() && positive("inf").is_err());
    }
}
