//! The HTTP-01 answers (RFC 8555 §8.3): token → key authorization, shared
//! between the issuer that publishes them and the HTTP listener that serves them.

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

/// The path prefix the CA fetches an HTTP-01 answer under.
const PREFIX: &[u8] = b"/.well-known/acme-challenge/";

/// The HTTP-01 answers currently published. Cheap to clone: the clones share one
/// map, so the HTTP listener holds one and the issuer another.
#[derive(Clone, Debug, Default)]
pub struct Http01 {
    answers: Arc<RwLock<HashMap<String, String>>>,
}

impl Http01 {
    /// An empty set of answers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Publishes `key_authorization` for `token`. Returns false, publishing
    /// nothing, for a token outside the ACME charset (base64url, RFC 8555 §8.1):
    /// such a token could never be asked for by [`Http01::answer`].
    pub fn publish(&self, token: &str, key_authorization: &str) -> bool {
        if !is_token(token.as_bytes()) {
            return false;
        }
        self.answers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(token.to_owned(), key_authorization.to_owned());
        true
    }

    /// Withdraws the answer for `token`, if any.
    pub fn remove(&self, token: &str) {
        self.answers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(token);
    }

    /// The body to answer a GET of `path` with (the request target's path, no
    /// query), or None when `path` is not `/.well-known/acme-challenge/TOKEN`
    /// with a published, well-formed token.
    pub fn answer(&self, path: &[u8]) -> Option<String> {
        let token = path.strip_prefix(PREFIX)?;
        if !is_token(token) {
            return None;
        }
        let token = std::str::from_utf8(token).ok()?;
        self.answers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(token)
            .cloned()
    }

    /// How many answers are published.
    pub fn len(&self) -> usize {
        self.answers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Whether no answer is published.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A token of the ACME charset: base64url without padding, non-empty.
fn is_token(token: &[u8]) -> bool {
    !token.is_empty()
        && token
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_published_tokens_only() {
        let h = Http01::new();
        assert!(h.publish("abc-DEF_123", "abc-DEF_123.thumb"));
        assert_eq!(
            h.answer(b"/.well-known/acme-challenge/abc-DEF_123")
                .as_deref(),
            Some("abc-DEF_123.thumb")
        );
        assert_eq!(h.answer(b"/.well-known/acme-challenge/other"), None);
        assert_eq!(h.answer(b"/abc-DEF_123"), None);
        h.remove("abc-DEF_123");
        assert_eq!(h.answer(b"/.well-known/acme-challenge/abc-DEF_123"), None);
        assert!(h.is_empty());
    }

    #[test]
    fn token_charset() {
        let h = Http01::new();
        for bad in ["", "a/b", "a.b", "..", "a b", "a=", "a%2F", "é"] {
            assert!(!h.publish(bad, "x"), "{bad:?} accepted");
            let mut path = PREFIX.to_vec();
            path.extend_from_slice(bad.as_bytes());
            assert_eq!(h.answer(&path), None, "{bad:?} answered");
        }
        assert!(h.is_empty());
        assert_eq!(h.answer(b"/.well-known/acme-challenge/"), None);
        assert_eq!(h.answer(b"/.well-known/acme-challenge/\xff"), None);
    }

    #[test]
    fn clones_share_the_map() {
        let a = Http01::new();
        let b = a.clone();
        assert!(a.publish("t", "t.k"));
        assert_eq!(
            b.answer(b"/.well-known/acme-challenge/t").as_deref(),
            Some("t.k")
        );
    }
}
