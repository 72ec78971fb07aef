//! Password schemes as deployments store them: `{SCHEME}value` strings, the same
//! bytes Dovecot's passwd-file takes and (in their RFC 3112 spellings) the
//! `userPassword` values of LDAP entries. One module serves both backends: the
//! embedded directory stores and writes Dovecot's spellings, the LDAP backend
//! reads either.
//!
//! | scheme ([`Scheme`]) | written as | also read as |
//! |---|---|---|
//! | argon2id (the default) | `{ARGON2ID}$argon2id$v=19$m=…,t=…,p=…$salt$hash` | `{ARGON2}$argon2…` (OpenLDAP's module), `{ARGON2I}`; a bare `$argon2…` in an old embedded file |
//! | sha512-crypt (Dovecot's default) | `{SHA512-CRYPT}$6$salt$hash` (5,000 rounds, 16-character salt) | `{CRYPT}$6$…`, `$6$rounds=N$…` |
//! | blf-crypt (bcrypt) | `{BLF-CRYPT}$2y$CC$…` (cost [`Cost::bcrypt`]) | `{CRYPT}$2b$`/`$2a$`/`$2y$` |
//! | ssha | `{SSHA}base64(sha1(password ‖ salt) ‖ salt)` (4-byte salt, as Dovecot; slappasswd's 8 also read) | |
//! | plain | `{PLAIN.BASE64}base64(password)` | `{PLAIN}`, `{CLEAR}`, `{CLEARTEXT}` (each also `.BASE64`, `.B64`, `.HEX`) |
//!
//! Scheme names are case-insensitive, as in Dovecot. Plain text is written
//! base64-encoded so that a password with spaces, colons or any other byte stays
//! one field of the embedded directory's file and of a passwd-file line; a
//! `{PLAIN}` value only ever verifies where the caller allows plain text
//! (`allow_plain`), which is for benchmarks only.
//!
//! Anything else (`{MD5}`, `{SHA}` without salt, DES crypt, a value without a
//! scheme) is refused: the check fails as for a wrong password, and nothing is
//! compared in a way that leaks how much of a value matched (digests are compared
//! in constant time, plain text through BLAKE2b digests of both sides, so that
//! its length does not show either).
//!
//! # Cost
//!
//! argon2id costs what [`PasswordCost`] says (tens of milliseconds by default) and
//! waits for one of the process's argon2 slots ([`password`]); sha512-crypt
//! (5,000 SHA-512 rounds, a few milliseconds) and bcrypt (2^cost rounds: cost 5,
//! Dovecot's default, takes milliseconds; 10, this crate's default, 32 times as
//! long, tens of milliseconds) run on the caller's thread without a slot, and so
//! do the cheap ones.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use blake2::Blake2b512;
use sha1::{Digest, Sha1};

use crate::error::{Error, Result};
use crate::password::{self, PasswordCost};

/// Length of a SHA-1 digest, the first part of a decoded `{SSHA}` value.
const SHA1_LEN: usize = 20;
/// Salt bytes of the `{SSHA}` values made here (Dovecot's length).
const SSHA_SALT_LEN: usize = 4;
/// Random bytes of a sha512-crypt salt: 12 encode to the 16 characters the
/// scheme allows at most (Dovecot's length).
const SHA_CRYPT_SALT_LEN: usize = 12;
/// The sha512-crypt rounds made here: the scheme's default, which is written
/// without a `rounds=` field, as glibc and Dovecot do.
const SHA_CRYPT_ROUNDS: u32 = 5_000;
/// Characters of the hash part of a sha512-crypt string.
const SHA_CRYPT_HASH_LEN: usize = 86;
/// Length of a whole bcrypt string (`$2y$10$` + 22 salt + 31 hash characters).
const BCRYPT_LEN: usize = 60;

/// The bcrypt cost of new `{BLF-CRYPT}` hashes unless told otherwise: 2^10 rounds,
/// tens of milliseconds (Dovecot's `doveadm pw` makes 5, 32 times cheaper; OWASP
/// asks for at least 10).
pub const DEFAULT_BCRYPT_COST: u32 = 10;
/// The lowest bcrypt cost accepted (the algorithm's minimum).
pub const MIN_BCRYPT_COST: u32 = 4;
/// The highest bcrypt cost accepted (the algorithm's maximum).
pub const MAX_BCRYPT_COST: u32 = 31;

/// A password scheme new hashes can be made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Scheme {
    /// `{ARGON2ID}`: argon2id PHC strings, [`PasswordCost`]; the default.
    #[default]
    Argon2id,
    /// `{SHA512-CRYPT}`: glibc's `$6$` crypt, 5,000 rounds; Dovecot's default.
    Sha512Crypt,
    /// `{BLF-CRYPT}`: bcrypt `$2y$`, [`Cost::bcrypt`].
    BlfCrypt,
    /// `{SSHA}`: salted SHA-1, what `slappasswd` makes; cheap to guess offline.
    Ssha,
    /// `{PLAIN}`: the password itself (written `{PLAIN.BASE64}`); only where
    /// plain text is allowed, for benchmarks.
    Plain,
}

impl Scheme {
    /// Every scheme, the default first.
    pub const ALL: [Scheme; 5] = [
        Scheme::Argon2id,
        Scheme::Sha512Crypt,
        Scheme::BlfCrypt,
        Scheme::Ssha,
        Scheme::Plain,
    ];

    /// Dovecot's name, the tag in braces: `ARGON2ID`, `SHA512-CRYPT`, `BLF-CRYPT`,
    /// `SSHA`, `PLAIN`.
    pub fn dovecot_name(self) -> &'static str {
        match self {
            Scheme::Argon2id => "ARGON2ID",
            Scheme::Sha512Crypt => "SHA512-CRYPT",
            Scheme::BlfCrypt => "BLF-CRYPT",
            Scheme::Ssha => "SSHA",
            Scheme::Plain => "PLAIN",
        }
    }

    /// The name the command line and the configuration use: `argon2id`,
    /// `sha512-crypt`, `blf-crypt`, `ssha`, `plain`.
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Argon2id => "argon2id",
            Scheme::Sha512Crypt => "sha512-crypt",
            Scheme::BlfCrypt => "blf-crypt",
            Scheme::Ssha => "ssha",
            Scheme::Plain => "plain",
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scheme {
    type Err = Error;

    /// A scheme by its name or Dovecot's, in any case, with or without braces
    /// (`sha512-crypt`, `SHA512-CRYPT`, `{sha512-crypt}`); `bcrypt` is `blf-crypt`.
    fn from_str(text: &str) -> Result<Scheme> {
        let bare = text.strip_prefix('{').and_then(|t| t.strip_suffix('}'));
        let name = bare.unwrap_or(text).to_ascii_lowercase();
        match name.as_str() {
            "bcrypt" => return Ok(Scheme::BlfCrypt),
            "argon2" => return Ok(Scheme::Argon2id),
            _ => {}
        }
        Scheme::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| Error::UnknownScheme(text.to_owned()))
    }
}

/// The cost parameters of new hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// argon2id's memory, passes and lanes.
    pub argon2: PasswordCost,
    /// bcrypt's cost (log2 of the rounds), [`MIN_BCRYPT_COST`] to [`MAX_BCRYPT_COST`].
    pub bcrypt: u32,
}

impl Default for Cost {
    fn default() -> Self {
        Cost {
            argon2: PasswordCost::default(),
            bcrypt: DEFAULT_BCRYPT_COST,
        }
    }
}

impl Cost {
    /// The cheapest costs, for tests.
    pub const MINIMUM: Cost = Cost {
        argon2: PasswordCost::MINIMUM,
        bcrypt: MIN_BCRYPT_COST,
    };
}

/// How a stored value is checked: the scheme, and for plain text its encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Argon2,
    ShaCrypt,
    Bcrypt,
    Ssha,
    Plain(Encoding),
}

/// How a plain-text value is written after its tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Raw,
    Base64,
    Hex,
}

/// The check of a stored value and the part after its tag, or `None`. No
/// allocation: the embedded directory calls it for every user it loads.
fn parse(value: &str) -> Option<(Kind, &str)> {
    let (tag, rest) = value.strip_prefix('{')?.split_once('}')?;
    let is = |name: &str| tag.eq_ignore_ascii_case(name);
    let bcrypt = ["$2b$", "$2a$", "$2y$"].iter().any(|p| rest.starts_with(p));
    let sha_crypt = rest.starts_with("$6$");
    let kind = if is("ARGON2") || is("ARGON2ID") || is("ARGON2I") {
        rest.starts_with("$argon2").then_some(Kind::Argon2)?
    } else if is("SHA512-CRYPT") {
        sha_crypt.then_some(Kind::ShaCrypt)?
    } else if is("BLF-CRYPT") {
        bcrypt.then_some(Kind::Bcrypt)?
    } else if is("CRYPT") {
        if sha_crypt {
            Kind::ShaCrypt
        } else {
            bcrypt.then_some(Kind::Bcrypt)?
        }
    } else if is("SSHA") {
        Kind::Ssha
    } else {
        let (name, encoding) = match tag.split_once('.') {
            None => (tag, Encoding::Raw),
            Some((name, e))
                if e.eq_ignore_ascii_case("BASE64") || e.eq_ignore_ascii_case("B64") =>
            {
                (name, Encoding::Base64)
            }
            Some((name, e)) if e.eq_ignore_ascii_case("HEX") => (name, Encoding::Hex),
            Some(_) => return None,
        };
        ["PLAIN", "CLEAR", "CLEARTEXT"]
            .iter()
            .any(|p| name.eq_ignore_ascii_case(p))
            .then_some(Kind::Plain(encoding))?
    };
    Some((kind, rest))
}

impl Kind {
    fn scheme(self) -> Scheme {
        match self {
            Kind::Argon2 => Scheme::Argon2id,
            Kind::ShaCrypt => Scheme::Sha512Crypt,
            Kind::Bcrypt => Scheme::BlfCrypt,
            Kind::Ssha => Scheme::Ssha,
            Kind::Plain(_) => Scheme::Plain,
        }
    }
}

/// The scheme of a stored `{SCHEME}value`, or `None` for one this crate does not
/// check (see the module docs for the spellings read).
pub fn scheme_of(value: &str) -> Option<Scheme> {
    parse(value).map(|(kind, _)| kind.scheme())
}

/// A new `{SCHEME}value` for `password` with a fresh random salt, in Dovecot's
/// spelling (see the module docs). Plain text is made whatever the caller allows:
/// refusing it is the caller's rule.
pub fn hash(password: &str, scheme: Scheme, cost: &Cost) -> Result<String> {
    Ok(match scheme {
        Scheme::Argon2id => format!(
            "{{ARGON2ID}}{}",
            password::hash_password(password, &cost.argon2)?
        ),
        Scheme::Sha512Crypt => {
            let mut salt = [0u8; SHA_CRYPT_SALT_LEN];
            fill_random(&mut salt)?;
            format!("{{SHA512-CRYPT}}{}", sha512_crypt(password, &salt)?)
        }
        Scheme::BlfCrypt => {
            if !(MIN_BCRYPT_COST..=MAX_BCRYPT_COST).contains(&cost.bcrypt) {
                return Err(Error::Hashing(format!(
                    "bcrypt cost {} is not {MIN_BCRYPT_COST} to {MAX_BCRYPT_COST}",
                    cost.bcrypt
                )));
            }
            let mut salt = [0u8; 16];
            fill_random(&mut salt)?;
            let parts = bcrypt::hash_with_salt(password, cost.bcrypt, salt)
                .map_err(|e| Error::Hashing(e.to_string()))?;
            format!(
                "{{BLF-CRYPT}}{}",
                parts.format_for_version(bcrypt::Version::TwoY)
            )
        }
        Scheme::Ssha => {
            let mut salt = [0u8; SSHA_SALT_LEN];
            fill_random(&mut salt)?;
            ssha(password, &salt)
        }
        Scheme::Plain => format!(
            "{{PLAIN.BASE64}}{}",
            base64::engine::general_purpose::STANDARD.encode(password)
        ),
    })
}

fn fill_random(bytes: &mut [u8]) -> Result<()> {
    getrandom::fill(bytes).map_err(|e| Error::Hashing(e.to_string()))
}

/// `$6$salt$hash` with the default rounds, written without `rounds=` as
/// `crypt(3)` does for them.
fn sha512_crypt(password: &str, salt: &[u8]) -> Result<String> {
    use sha_crypt::PasswordHasher as _;
    let made = sha_crypt::ShaCrypt::SHA512
        .hash_password_with_salt(password.as_bytes(), salt)
        .map_err(|e| Error::Hashing(e.to_string()))?;
    let text = made.as_str();
    let default_rounds = format!("$6$rounds={SHA_CRYPT_ROUNDS}$");
    Ok(match text.strip_prefix(&default_rounds) {
        Some(rest) => format!("$6${rest}"),
        None => text.to_owned(),
    })
}

/// Whether `password` matches the stored `value`. `false` for a scheme or value
/// this crate cannot check, and for plain text unless `allow_plain`.
pub fn verify(password: &str, value: &str, allow_plain: bool) -> bool {
    let Some((kind, rest)) = parse(value) else {
        return false;
    };
    match kind {
        Kind::Argon2 => password::verify_password("", password, rest).unwrap_or(false),
        Kind::ShaCrypt => {
            use sha_crypt::PasswordVerifier as _;
            sha_crypt::ShaCrypt::SHA512
                .verify_password(password.as_bytes(), rest)
                .is_ok()
        }
        Kind::Bcrypt => bcrypt::verify(password, rest).unwrap_or(false),
        Kind::Ssha => verify_ssha(password, rest),
        Kind::Plain(encoding) => {
            allow_plain
                && decode_plain(encoding, rest).is_some_and(|stored| {
                    // Digests of equal length: neither the contents nor the length
                    // of the stored password shows in the time taken.
                    constant_time_eq(
                        &Blake2b512::digest(password.as_bytes()),
                        &Blake2b512::digest(&stored),
                    )
                })
        }
    }
}

/// Whether `value` is a well-formed value of a scheme this crate checks (a full
/// parse, unlike [`scheme_of`], which looks at the tag and the prefix only).
pub fn is_valid(value: &str) -> bool {
    let Some((kind, rest)) = parse(value) else {
        return false;
    };
    match kind {
        Kind::Argon2 => password::is_valid_hash(rest),
        Kind::ShaCrypt => is_valid_sha_crypt(rest),
        Kind::Bcrypt => is_valid_bcrypt(rest),
        Kind::Ssha => base64::engine::general_purpose::STANDARD
            .decode(rest)
            .is_ok_and(|d| d.len() > SHA1_LEN),
        Kind::Plain(encoding) => decode_plain(encoding, rest).is_some(),
    }
}

/// A stored value in the form the embedded directory keeps: `{SCHEME}value`
/// unchanged, a bare argon2 PHC string (what [`password::hash_password`] makes
/// and old directory files hold) as `{ARGON2ID}` + the string; `None` when it is
/// neither.
pub fn normalize(value: &str) -> Option<String> {
    if value.starts_with("$argon2") {
        Some(format!("{{ARGON2ID}}{value}"))
    } else if parse(value).is_some() {
        Some(value.to_owned())
    } else {
        None
    }
}

/// The `userPassword` value OpenLDAP verifies for a stored value (RFC 3112
/// spellings: `{CRYPT}$6$…`, `{CRYPT}$2y$…`, `{ARGON2}$argon2id$…`, `{SSHA}…`), or
/// `None` for plain text, which has no form an LDAP entry should hold (slapd
/// would compare a value without a scheme as clear text, and this crate's LDAP
/// backend refuses one).
pub fn ldap_value(value: &str) -> Option<String> {
    let (kind, rest) = parse(value)?;
    Some(match kind {
        Kind::Argon2 => format!("{{ARGON2}}{rest}"),
        Kind::ShaCrypt | Kind::Bcrypt => format!("{{CRYPT}}{rest}"),
        Kind::Ssha => format!("{{SSHA}}{rest}"),
        Kind::Plain(_) => return None,
    })
}

fn decode_plain(encoding: Encoding, text: &str) -> Option<Vec<u8>> {
    match encoding {
        Encoding::Raw => Some(text.as_bytes().to_vec()),
        Encoding::Base64 => base64::engine::general_purpose::STANDARD.decode(text).ok(),
        Encoding::Hex => {
            if !text.len().is_multiple_of(2) {
                return None;
            }
            (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
                .collect()
        }
    }
}

/// The characters of crypt(3)'s base64.
fn is_crypt_base64(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/')
}

/// `$6$[rounds=N$]salt$hash`: a salt of at most 16 characters without `$`, and
/// 86 characters of hash.
fn is_valid_sha_crypt(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("$6$") else {
        return false;
    };
    let mut fields: Vec<&str> = rest.split('$').collect();
    if fields
        .first()
        .is_some_and(|f| f.strip_prefix("rounds=").is_some())
    {
        let rounds = fields.remove(0).trim_start_matches("rounds=");
        if !rounds
            .parse::<u32>()
            .is_ok_and(|r| (1_000..=999_999_999).contains(&r))
        {
            return false;
        }
    }
    matches!(fields.as_slice(), [salt, hash]
        if salt.len() <= 16 && !salt.is_empty() && !salt.contains(char::is_whitespace)
            && hash.len() == SHA_CRYPT_HASH_LEN && is_crypt_base64(hash))
}

/// `$2y$CC$` + 53 characters of bcrypt's base64 (which uses crypt(3)'s alphabet).
fn is_valid_bcrypt(text: &str) -> bool {
    text.len() == BCRYPT_LEN
        && text.get(4..6).is_some_and(|cost| {
            cost.parse::<u32>()
                .is_ok_and(|c| (MIN_BCRYPT_COST..=MAX_BCRYPT_COST).contains(&c))
        })
        && text.get(6..7) == Some("$")
        && text.get(7..).is_some_and(is_crypt_base64)
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

/// An `{SSHA}` value for `password` with `salt`, as `slappasswd -h {SSHA}` and
/// `doveadm pw -s SSHA` make; for tests and tools.
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
mod tests;
