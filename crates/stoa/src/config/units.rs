//! Values as people write them in configuration files and flags: durations,
//! sizes, addresses, networks and counts.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use stoa_smtp::config::IpNet;

/// Most workers a server accepts; far above any machine Stoa runs on, low enough
/// to catch a typo before it spawns a million threads.
pub(super) const MAX_WORKERS: usize = 1024;

/// `"32KiB"` → `(32, "KiB")`: the leading whole number and the trimmed rest.
fn number_and_unit(text: &str) -> Option<(u64, &str)> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    Some((digits.parse().ok()?, unit.trim()))
}

/// `"200ms"`, `"20s"`, `"5m"`, `"1h"`, `"5d"`; a bare number is seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (n, unit) = number_and_unit(text)
        .ok_or_else(|| format!("{text:?} is not a duration like \"20s\" or \"200ms\""))?;
    let per_unit = match unit {
        "ms" => Duration::from_millis(1),
        "" | "s" => Duration::from_secs(1),
        "m" | "min" => Duration::from_secs(60),
        "h" => Duration::from_secs(3600),
        "d" => Duration::from_secs(86_400),
        other => return Err(format!("{other:?} is not a time unit (ms, s, m, h, d)")),
    };
    per_unit
        .checked_mul(u32::try_from(n).map_err(|_| format!("{text:?} is too long"))?)
        .ok_or_else(|| format!("{text:?} is too long"))
}

/// `"8192"`, `"8k"`, `"8KiB"`, `"64MiB"`, `"1GiB"` (binary units; `k`, `m`, `g`
/// are read as KiB, MiB, GiB, as nginx does).
pub(crate) fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let (n, unit) = number_and_unit(text)
        .ok_or_else(|| format!("{text:?} is not a size like 8192 or \"32KiB\""))?;
    let shift = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        other => return Err(format!("{other:?} is not a size unit (KiB, MiB, GiB)")),
    };
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

/// `127.0.0.1:8080` or `[::1]:8080`.
pub(super) fn parse_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not an address like 127.0.0.1:8080 or [::1]:8080"))
}

/// A whole number (of workers, connections).
pub(super) fn parse_count(text: &str) -> Result<usize, String> {
    text.parse()
        .map_err(|_| format!("{text:?} is not a whole number"))
}

/// A CIDR block, or a single address.
pub(super) fn parse_net(text: &str) -> Result<IpNet, String> {
    if let Ok(net) = text.parse::<IpNet>() {
        return Ok(net.trunc());
    }
    text.parse::<IpAddr>()
        .map(IpNet::from)
        .map_err(|_| format!("{text:?} is not a network like 192.0.2.0/24 or an address"))
}

/// Loopback, RFC 1918, link-local, or IPv6 unique-local: not reachable from the
/// Internet. The unspecified address (every interface) is not.
pub(super) fn is_private(addr: &SocketAddr) -> bool {
    match addr.ip() {
        IpAddr::V4(ip) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        IpAddr::V6(ip) => {
            ip.is_loopback()
                || (ip.segments()[0] & 0xfe00) == 0xfc00
                || (ip.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("200ms"), Ok(Duration::from_millis(200)));
        assert_eq!(parse_duration("20s"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("20"), Ok(Duration::from_secs(20)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("99999999999h").is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("8192"), Ok(8192));
        assert_eq!(parse_size("8k"), Ok(8192));
        assert_eq!(parse_size("32KiB"), Ok(32 * 1024));
        assert_eq!(parse_size("64 MiB"), Ok(64 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert!(parse_size("1.5k").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999999999999").is_err());
        assert!(parse_size("18014398509481984k").is_err());
    }
}
