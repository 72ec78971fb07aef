//! `[web.compression]`: `Content-Encoding` for static files, server-wide.
//!
//! `precompressed` (siblings written by `stoa compress`) and `on_the_fly`
//! (gzip and brotli of the text `types`) are on by default, as Debian's
//! nginx.conf turns gzip on; a request without `Accept-Encoding` is answered
//! as if both were off.

use stoa_web::config::CompressionConfig;
use toml::Table;

use super::super::Report;

const P: &str = "web.compression.";

/// The keys of `[web.compression]`.
const KEYS: &[&str] = &[
    "precompressed",
    "on_the_fly",
    "gzip_level",
    "brotli_level",
    "min_length",
    "max_length",
    "cache_size",
    "types",
];

pub(super) fn read(t: &Table, c: &mut CompressionConfig, r: &mut Report) {
    r.known_keys(t, P, KEYS);
    r.boolean_into(t, P, "precompressed", &mut c.precompressed);
    r.boolean_into(t, P, "on_the_fly", &mut c.on_the_fly);
    r.integer_into(t, P, "gzip_level", &mut c.gzip_level);
    r.integer_into(t, P, "brotli_level", &mut c.brotli_level);
    r.size(t, P, "min_length", &mut c.min_length);
    r.size(t, P, "max_length", &mut c.max_length);
    r.size(t, P, "cache_size", &mut c.cache_size);
    if t.contains_key("types") {
        c.types = r.parsed_list(t, P, "types", parse_type);
    }
    r.check(
        (1..=9).contains(&c.gzip_level),
        &format!("{P}gzip_level: {} is not a level from 1 to 9", c.gzip_level),
    );
    r.check(
        c.brotli_level <= 11,
        &format!(
            "{P}brotli_level: {} is not a level from 0 to 11",
            c.brotli_level
        ),
    );
    r.check(
        c.min_length <= c.max_length,
        &format!(
            "{P}min_length ({}) is above max_length ({})",
            c.min_length, c.max_length
        ),
    );
}

/// A media type (`text/html`) or a whole top-level type (`text/*`), lower case.
fn parse_type(s: &str) -> Result<String, String> {
    let t = s.trim().to_ascii_lowercase();
    let valid = |part: &str| {
        !part.is_empty()
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    match t.split_once('/') {
        Some((top, sub)) if valid(top) && (sub == "*" || valid(sub)) => Ok(t),
        _ => Err(format!(
            "{s:?} is not a media type such as \"text/html\" or \"text/*\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_type;

    #[test]
    fn media_types() {
        assert_eq!(parse_type("Text/HTML").as_deref(), Ok("text/html"));
        assert_eq!(parse_type("text/*").as_deref(), Ok("text/*"));
        assert_eq!(parse_type("image/svg+xml").as_deref(), Ok("image/svg+xml"));
        for bad in ["text", "*/*", "/html", "text/", "text/html; charset=utf-8"] {
            assert!(parse_type(bad).is_err(), "{bad}");
        }
    }
}
