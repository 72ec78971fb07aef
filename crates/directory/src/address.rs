//! How the directory spells addresses and domains.
//!
//! Directory keys are whole addresses folded to lowercase: mailbox names are
//! case-insensitive here, as in Postfix's lookup tables and in practice everywhere,
//! even though RFC 5321 lets a server treat local parts as case-sensitive. Local parts
//! are RFC 5322 dot-atoms (no quoted strings, so no spaces or `@`); domains lose one
//! trailing dot. Anything else cannot be a directory entry, and a lookup of it finds
//! nothing.

use crate::error::{Error, Result};

/// Longest address accepted (RFC 5321's path limit, 256, minus the brackets).
pub const MAX_ADDRESS: usize = 254;

/// Whether `name` (without trailing dot) is a valid domain name: labels of letters,
/// digits and inner hyphens, 63 and 255 octets at most.
fn valid_domain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Whether `local` is an RFC 5322 dot-atom.
fn valid_local(local: &str) -> bool {
    let atext = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-/=?^_`{|}~".contains(&b);
    !local.is_empty()
        && local
            .split('.')
            .all(|atom| !atom.is_empty() && atom.bytes().all(atext))
}

fn has_upper(text: &str) -> bool {
    text.bytes().any(|b| b.is_ascii_uppercase())
}

/// A domain or host name, lowercased, one trailing dot removed.
pub fn normalize_domain(domain: &str) -> Result<String> {
    let name = domain.strip_suffix('.').unwrap_or(domain);
    if valid_domain(name) {
        Ok(name.to_ascii_lowercase())
    } else {
        Err(Error::InvalidDomain(domain.to_owned()))
    }
}

/// A whole address, lowercased, its domain normalised.
pub fn normalize_address(address: &str) -> Result<String> {
    let invalid = || Error::InvalidAddress(address.to_owned());
    let (local, domain) = address.rsplit_once('@').ok_or_else(invalid)?;
    if !valid_local(local) {
        return Err(invalid());
    }
    let domain = normalize_domain(domain).map_err(|_| invalid())?;
    let normalized = format!("{}@{domain}", local.to_ascii_lowercase());
    if normalized.len() > MAX_ADDRESS {
        return Err(invalid());
    }
    Ok(normalized)
}

/// Whether `domain` is already what [`normalize_domain`] makes of it (no allocation).
pub fn is_normal_domain(domain: &str) -> bool {
    valid_domain(domain) && !has_upper(domain)
}

/// Whether `address` is already what [`normalize_address`] makes of it (no
/// allocation).
pub fn is_normal_address(address: &str) -> bool {
    address.len() <= MAX_ADDRESS
        && !has_upper(address)
        && address
            .rsplit_once('@')
            .is_some_and(|(local, domain)| valid_local(local) && valid_domain(domain))
}

/// The domain of a normalised address.
pub fn domain_of(address: &str) -> &str {
    address.rsplit_once('@').map_or("", |(_, d)| d)
}

/// `user+detail@domain` → `user@domain`, when the local part has the separator and
/// something before it.
pub fn without_detail(address: &str, separator: char) -> Option<String> {
    let (local, domain) = address.rsplit_once('@')?;
    let (base, _) = local.split_once(separator)?;
    (!base.is_empty()).then(|| format!("{base}@{domain}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let ok = [
            ("User@Example.COM", "user@example.com"),
            ("a.b+c@x.org.", "a.b+c@x.org"),
            ("to%ext@ours", "to%ext@ours"),
        ];
        for (input, output) in ok {
            assert_eq!(
                normalize_address(input).ok().as_deref(),
                Some(output),
                "{input}"
            );
        }
        let bad = [
            "",
            "user",
            "@x.org",
            "user@",
            "a b@x",
            "\"a\"@x",
            ".a@x",
            "a..b@x",
            "a@b@c",
            "a@-x",
            "a@x_y",
            "ü@x",
            "a@[192.0.2.1]",
        ];
        for input in bad {
            assert!(normalize_address(input).is_err(), "{input}");
        }
        assert!(normalize_address(&format!("{}@x.org", "a".repeat(249))).is_err());
        for input in ok.iter().map(|(i, _)| *i).chain(bad) {
            let normal = normalize_address(input).ok();
            assert_eq!(
                is_normal_address(input),
                normal.as_deref() == Some(input),
                "{input}"
            );
        }
        assert!(
            is_normal_domain("x.org") && !is_normal_domain("X.org") && !is_normal_domain("x.org.")
        );
    }

    #[test]
    fn domains_and_details() {
        assert_eq!(
            normalize_domain("Mail.Example.").ok().as_deref(),
            Some("mail.example")
        );
        assert!(normalize_domain("..").is_err());
        assert_eq!(domain_of("a@b.c"), "b.c");
        assert_eq!(without_detail("joe+news@x", '+').as_deref(), Some("joe@x"));
        assert_eq!(without_detail("joe+a+b@x", '+').as_deref(), Some("joe@x"));
        assert_eq!(without_detail("+news@x", '+'), None);
        assert_eq!(without_detail("joe@x", '+'), None);
    }
}
