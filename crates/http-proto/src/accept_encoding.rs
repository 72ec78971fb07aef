//! `Accept-Encoding` (RFC 9110 §12.5.3): the content codings a client takes, with
//! their weights, and the best of those a server has.
//!
//! Weights are kept in thousandths (`q=0.5` is 500). A coding the client does not
//! name gets the weight of `*` if it sent one, else 0. `identity` not named gets
//! the weight of `*`, else 1: acceptable (RFC 9110 §12.5.3) but after every
//! coding the client named, so `gzip;q=0.5` alone still asks for gzip. `x-gzip` is `gzip` (§8.4.1.3). An item whose `q` is
//! not a valid qvalue is ignored, as if it had not been sent.

use crate::request::{list_items, trim};

/// A content coding a server can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    /// `br`, RFC 7932.
    Brotli,
    /// `zstd`, RFC 8878.
    Zstd,
    /// `gzip`, RFC 1952.
    Gzip,
}

impl Coding {
    /// Every coding, in the order a server prefers them at equal weight: the
    /// smallest output first.
    pub const ALL: [Coding; 3] = [Coding::Brotli, Coding::Zstd, Coding::Gzip];

    /// The token in `Accept-Encoding` and `Content-Encoding`.
    pub fn token(self) -> &'static str {
        match self {
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
            Coding::Gzip => "gzip",
        }
    }

    /// The file-name suffix of a precompressed sibling (`page.html.br`).
    pub fn extension(self) -> &'static str {
        match self {
            Coding::Brotli => ".br",
            Coding::Zstd => ".zst",
            Coding::Gzip => ".gz",
        }
    }

    fn index(self) -> usize {
        match self {
            Coding::Brotli => 0,
            Coding::Zstd => 1,
            Coding::Gzip => 2,
        }
    }
}

/// What one or more `Accept-Encoding` values allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepted {
    /// The weight of each of [`Coding::ALL`], in its order.
    codings: [u16; 3],
    identity: u16,
}

impl Accepted {
    /// Parses the values of every `Accept-Encoding` field of a request, in
    /// order (several fields are one comma-separated list). An empty value
    /// accepts `identity` only.
    pub fn parse<'v>(values: impl IntoIterator<Item = &'v [u8]>) -> Accepted {
        let mut named = [None::<u16>; 3];
        let mut identity = None::<u16>;
        let mut star = None::<u16>;
        for value in values {
            for item in list_items(value) {
                let mut parts = item.split(|&b| b == b';');
                let token = trim(parts.next().unwrap_or_default());
                if token.is_empty() {
                    continue;
                }
                let Some(q) = weight(parts) else {
                    continue;
                };
                let slot = if token.eq_ignore_ascii_case(b"*") {
                    &mut star
                } else if token.eq_ignore_ascii_case(b"identity") {
                    &mut identity
                } else if let Some(c) = coding(token) {
                    &mut named[c.index()]
                } else {
                    continue;
                };
                // A token named twice keeps its first weight.
                slot.get_or_insert(q);
            }
        }
        Accepted {
            codings: named.map(|q| q.or(star).unwrap_or(0)),
            identity: identity.or(star).unwrap_or(1),
        }
    }

    /// The weight (0–1000) of `coding`; 0 means not acceptable.
    pub fn weight(&self, coding: Coding) -> u16 {
        self.codings[coding.index()]
    }

    /// The weight (0–1000) of sending the representation as it is.
    pub fn identity(&self) -> u16 {
        self.identity
    }

    /// The codings worth sending instead of `identity`, best first: weight
    /// above 0 and at least `identity`'s, higher weights first, then the order
    /// of [`Coding::ALL`].
    pub fn ranked(&self) -> impl Iterator<Item = Coding> + use<> {
        let mut ranked = Coding::ALL;
        let codings = self.codings;
        // Stable: equal weights keep the server's order.
        ranked.sort_by_key(|c| std::cmp::Reverse(codings[c.index()]));
        let floor = self.identity.max(1);
        ranked
            .into_iter()
            .filter(move |c| codings[c.index()] >= floor)
    }
}

fn coding(token: &[u8]) -> Option<Coding> {
    if token.eq_ignore_ascii_case(b"br") {
        Some(Coding::Brotli)
    } else if token.eq_ignore_ascii_case(b"zstd") {
        Some(Coding::Zstd)
    } else if token.eq_ignore_ascii_case(b"gzip") || token.eq_ignore_ascii_case(b"x-gzip") {
        Some(Coding::Gzip)
    } else {
        None
    }
}

/// The weight of an item from its parameters: its `q`, 1000 without one, `None`
/// when `q` is not a qvalue (`0`, `0.5`, `1.000`: at most three decimals, at
/// most 1).
pub(crate) fn weight<'a>(params: impl Iterator<Item = &'a [u8]>) -> Option<u16> {
    for param in params {
        let param = trim(param);
        let Some(value) = param
            .get(..2)
            .filter(|name| name.eq_ignore_ascii_case(b"q="))
            .map(|_| trim(&param[2..]))
        else {
            continue;
        };
        return qvalue(value);
    }
    Some(1000)
}

fn qvalue(v: &[u8]) -> Option<u16> {
    let (int, frac) = match memchr::memchr(b'.', v) {
        Some(dot) => (&v[..dot], &v[dot + 1..]),
        None => (v, &b""[..]),
    };
    if frac.len() > 3 || !frac.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut thousandths = 0u16;
    for i in 0..3 {
        thousandths = thousandths * 10 + frac.get(i).map_or(0, |d| u16::from(d - b'0'));
    }
    match int {
        b"0" => Some(thousandths),
        b"1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{Accepted, Coding};

    fn accepted(v: &str) -> Accepted {
        Accepted::parse([v.as_bytes()])
    }

    fn ranked(v: &str) -> Vec<Coding> {
        accepted(v).ranked().collect()
    }

    #[test]
    fn weights_and_defaults() {
        let a = accepted("gzip, deflate, br;q=0.5");
        assert_eq!(a.weight(Coding::Gzip), 1000);
        assert_eq!(a.weight(Coding::Brotli), 500);
        assert_eq!(a.weight(Coding::Zstd), 0);
        assert_eq!(a.identity(), 1);
        assert_eq!(
            ranked("gzip, deflate, br;q=0.5"),
            [Coding::Gzip, Coding::Brotli]
        );
        assert_eq!(ranked("gzip;q=0.001"), [Coding::Gzip]);
        assert_eq!(
            ranked("gzip;q=1.0, br;Q=0.999, identity;q=0.5"),
            [Coding::Gzip, Coding::Brotli]
        );
    }

    #[test]
    fn equal_weights_keep_the_servers_order() {
        assert_eq!(
            ranked("gzip, zstd, br"),
            [Coding::Brotli, Coding::Zstd, Coding::Gzip]
        );
        assert_eq!(ranked("*"), [Coding::Brotli, Coding::Zstd, Coding::Gzip]);
        assert_eq!(ranked("x-gzip, *;q=0"), [Coding::Gzip]);
    }

    #[test]
    fn identity_and_zero_weights() {
        assert!(ranked("").is_empty());
        assert!(ranked("identity").is_empty());
        assert!(ranked("gzip;q=0").is_empty());
        assert!(ranked("br;q=0.4, identity;q=0.5").is_empty());
        let a = accepted("*;q=0");
        assert_eq!(a.identity(), 0);
        assert!(a.ranked().next().is_none());
        // identity;q=0 with gzip: gzip is all there is.
        assert_eq!(ranked("gzip;q=0.1, identity;q=0"), [Coding::Gzip]);
    }

    #[test]
    fn bad_items_are_ignored_and_the_first_weight_counts() {
        assert!(ranked("gzip;q=2").is_empty());
        assert!(ranked("gzip;q=0.1234").is_empty());
        assert!(ranked("gzip;q=x").is_empty());
        assert!(ranked("gzip;q=").is_empty());
        assert_eq!(ranked("gzip;q=1.001, br"), [Coding::Brotli]);
        assert_eq!(ranked("gzip;q=0, gzip"), Vec::<Coding>::new());
        assert_eq!(ranked(" , ;q=1, GZIP ; q = 0.3 "), [Coding::Gzip]);
        assert_eq!(ranked("gzip;level=1;q=0.2"), [Coding::Gzip]);
    }

    #[test]
    fn several_fields_are_one_list() {
        let a = Accepted::parse([&b"gzip;q=0.2"[..], b"br"]);
        assert_eq!(
            a.ranked().collect::<Vec<_>>(),
            [Coding::Brotli, Coding::Gzip]
        );
    }
}
