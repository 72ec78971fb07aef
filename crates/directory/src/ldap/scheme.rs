//! `userPassword` values as LDAP deployments store them (RFC 3112 `{SCHEME}value`),
//! checked locally.
//!
//! - `{SSHA}base64(sha1(password ‖ salt) ‖ salt)`: what `slappasswd` makes by default.
//! - `{CRYPT}$6$…` (sha512-crypt) and `{CRYPT}$2b$…` (bcrypt, also `$2a$`/`$2y$`).
//! - `{ARGON2}$argon2id$…`: OpenLDAP's argon2 module, and what `stoa user export-ldif`
//!   writes, so moved users keep their passwords.
//!
//! Anything else (plain text, `{MD5}`, `{SHA}` without salt, DES crypt) is refused:
//! the check fails as for a wrong password, and nothing is compared in a way that
//! leaks how much of a value matched.

use base64::Engine as _;
use sha1::{Digest, Sha1};

use crate::password;

/// Length of a SHA-1 digest, the first part of a decoded `{SSHA}` value.
const SHA1_LEN: usize = 20;

/// Which scheme a value uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    /// `{SSHA}`.
    Ssha,
    /// `{CRYPT}$6$`.
    ShaCrypt,
    /// `{CRYPT}$2b$` and its older spellings.
    Bcrypt,
    /// `{ARGON2}`.
    Argon2,
}

/// The scheme of a `userPassword` value and the part after `{SCHEME}`, or `None`
/// for a scheme this crate does not verify.
pub(crate) fn scheme_of(value: &str) -> Option<(Scheme, &str)> {
    let (tag, rest) = value.strip_prefix('{')?.split_once('}')?;
    match tag.to_ascii_uppercase().as_str() {
        "SSHA" => Some((Scheme::Ssha, rest)),
        "CRYPT" if rest.starts_with("$6$") => Some((Scheme::ShaCrypt, rest)),
        "CRYPT" if ["$2b$", "$2a$", "$2y$"].iter().any(|p| rest.starts_with(p)) => {
            Some((Scheme::Bcrypt, rest))
        }
        "ARGON2" if rest.starts_with("$argon2") => Some((Scheme::Argon2, rest)),
        _ => None,
    }
}

/// Whether `password` matches the `userPassword` `value`. `false` for a scheme or
/// value this crate cannot check.
pub(crate) fn verify(password: &str, value: &str) -> bool {
    let Some((scheme, rest)) = scheme_of(value) else {
        return false;
    };
    match scheme {
        Scheme::Ssha => verify_ssha(password, rest),
        Scheme::ShaCrypt => {
            use sha_crypt::PasswordVerifier as _;
            sha_crypt::ShaCrypt::default()
                .verify_password(password.as_bytes(), rest)
                .is_ok()
        }
        Scheme::Bcrypt => bcrypt::verify(password, rest).unwrap_or(false),
        Scheme::Argon2 => password::verify_password("", password, rest).unwrap_or(false),
    }
}

fn verify_ssha(password: &str, encoded: &str) -> bool {
    let Ok(decoded) = base64::engine::general_purpose::STANDARD.decode(encoded.trim()) else {
        return false;
    };
    if decoded.len() <= SHA1_LEN {
        return false;
    }
    let (digest, salt) = decoded.split_at(SHA1_LEN);
    let mut hasher = Sha1::new();
    hasher.update(password.as_bytes());
    hasher.update(salt);
    constant_time_eq(&hasher.finalize(), digest)
}

/// Compares two byte strings without an early exit: the time depends on the
/// lengths only (public here: a digest's length is fixed by the scheme).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// An `{SSHA}` value for `password` with `salt`, as `slappasswd -h {SSHA}` makes;
/// for tests and tools.
pub fn ssha(password: &str, salt: &[u8]) -> String {
    let mut hasher = Sha1::new();
    hasher.update(password.as_bytes());
    hasher.update(salt);
    let mut bytes = hasher.finalize().to_vec();
    bytes.extend_from_slice(salt);
    format!(
        "{{SSHA}}{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssha_round_trip_and_wrong_password() {
        let value = ssha("secret", b"salt");
        assert!(verify("secret", &value));
        assert!(!verify("secreT", &value));
        assert!(!verify("", &value));
        // slappasswd -h {SSHA} -s secret, salt chosen by slappasswd.
        assert!(verify("secret", "{SSHA}r8lTTRxNjuJrCxbT9Dr3/0RnQu/eRC8m"));
    }

    #[test]
    fn crypt_schemes() {
        use sha_crypt::PasswordHasher as _;
        let sha = sha_crypt::ShaCrypt::default()
            .hash_password_with_salt(b"pw", b"saltsalt")
            .expect("sha-crypt");
        let value = format!("{{CRYPT}}{}", sha.as_str());
        assert!(value.starts_with("{CRYPT}$6$"), "{value}");
        assert!(verify("pw", &value));
        assert!(!verify("pW", &value));
        let bc = format!("{{CRYPT}}{}", bcrypt::hash("pw", 4).expect("bcrypt"));
        assert!(verify("pw", &bc));
        assert!(!verify("px", &bc));
        let argon = password::hash_password("pw", &password::PasswordCost::MINIMUM).expect("a");
        assert!(verify("pw", &format!("{{ARGON2}}{argon}")));
        assert!(!verify("p", &format!("{{argon2}}{argon}")));
    }

    #[test]
    fn unknown_schemes_never_match() {
        for value in [
            "pw",
            "{CLEARTEXT}pw",
            "{CRYPT}abJnggxhB/yWI",
            "{MD5}8BZw8aBqDbEUpf+wpw/NZQ==",
            "{SSHA}",
            "{SSHA}not base64!",
            "{ARGON2}plain",
            "{CRYPT}$6$broken",
        ] {
            assert!(!verify("pw", value), "{value}");
        }
    }
}
