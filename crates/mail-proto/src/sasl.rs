//! SASL responses (RFC 4422) as the mail protocols carry them: base64 on a line
//! (SMTP AUTH, RFC 4954 §4; POP3 AUTH, RFC 5034 §4; IMAP AUTHENTICATE, RFC 9051
//! §6.2.2), and the PLAIN mechanism's message (RFC 4616) into [`Credentials`].
//!
//! Which mechanisms are offered, the challenges and the cancel line `*` are each
//! protocol's; only the decoding is shared.

use std::fmt;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use crate::Error;

/// Credentials for the server to check. `Debug` does not show the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// PLAIN's authorization identity, when the client sent one (a login by name
    /// and password never does). The server should refuse one that differs from
    /// `username` unless it supports proxy logins.
    pub authzid: Option<String>,
    /// The login name (PLAIN's authentication identity).
    pub username: String,
    /// The password.
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("authzid", &self.authzid)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// Decodes one base64 response. `=` is an empty initial response (RFC 4954 §4,
/// RFC 5034 §4); an empty continuation line is an empty response.
pub fn decode(response: &[u8], initial: bool) -> Result<Vec<u8>, Error> {
    if initial && response == b"=" {
        return Ok(Vec::new());
    }
    STANDARD.decode(response).map_err(|_| Error::BadBase64)
}

/// PLAIN's `[authzid] NUL authcid NUL passwd` (RFC 4616 §2): three UTF-8 fields, the
/// last two not empty. An empty authzid is none.
pub fn plain(message: &[u8]) -> Result<Credentials, Error> {
    let mut parts = message.split(|&b| b == 0);
    let (Some(authzid), Some(username), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::MalformedPlain);
    };
    let utf8 = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| Error::NotUtf8);
    let (authzid, username, password) = (utf8(authzid)?, utf8(username)?, utf8(password)?);
    if username.is_empty() || password.is_empty() {
        return Err(Error::EmptyCredential);
    }
    Ok(Credentials {
        authzid: (!authzid.is_empty()).then_some(authzid),
        username,
        password,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_messages() {
        let ok = plain(b"\0joe\0secret").expect("valid");
        assert_eq!(
            (ok.authzid, ok.username.as_str(), ok.password.as_str()),
            (None, "joe", "secret")
        );
        let ok = plain(b"admin\0joe\0se cret").expect("valid");
        assert_eq!(ok.authzid.as_deref(), Some("admin"));
        assert_eq!(ok.password, "se cret");
        let ok = plain("\0jo\u{e9}\0p\u{e4}ss".as_bytes()).expect("UTF-8 is valid");
        assert_eq!(
            (ok.username.as_str(), ok.password.as_str()),
            ("jo\u{e9}", "p\u{e4}ss")
        );
    }

    #[test]
    fn plain_refusals() {
        let cases: &[(&[u8], Error)] = &[
            (b"", Error::MalformedPlain),
            (b"joe", Error::MalformedPlain),
            (b"\0joe", Error::MalformedPlain),
            (b"\0joe\0se\0cret", Error::MalformedPlain),
            (b"\0\0secret", Error::EmptyCredential),
            (b"\0joe\0", Error::EmptyCredential),
            (b"\0j\xffoe\0secret", Error::NotUtf8),
            (b"\xff\0joe\0secret", Error::NotUtf8),
        ];
        for (message, error) in cases {
            assert_eq!(plain(message), Err(*error), "{message:?}");
        }
    }

    #[test]
    fn base64_responses() {
        assert_eq!(decode(b"=", true), Ok(Vec::new()));
        assert_eq!(decode(b"", false), Ok(Vec::new()));
        assert_eq!(decode(b"am9l", false), Ok(b"joe".to_vec()));
        assert_eq!(
            decode(b"AGpvZQBzZWNyZXQ=", true),
            Ok(b"\0joe\0secret".to_vec())
        );
        for bad in [&b"am9"[..], b"am9l!", b"am 9l", b"="] {
            assert_eq!(decode(bad, false), Err(Error::BadBase64), "{bad:?}");
        }
    }

    #[test]
    fn debug_hides_the_password() {
        let c = plain(b"\0joe\0hunter2").expect("valid");
        let shown = format!("{c:?}");
        assert!(
            shown.contains("joe") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
