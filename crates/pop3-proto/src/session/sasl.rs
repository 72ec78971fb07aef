//! Decoding of SASL PLAIN responses (RFC 5034 §4, RFC 4616).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::Credentials;
use crate::Error;

/// Decodes one base64 response. `=` is an empty initial response (RFC 5034 §4); an
/// empty continuation line is an empty response.
pub(super) fn decode(response: &[u8], initial: bool) -> Result<Vec<u8>, Error> {
    if initial && response == b"=" {
        return Ok(Vec::new());
    }
    STANDARD
        .decode(response)
        .map_err(|_| Error::BadAuthResponse)
}

/// PLAIN's `[authzid] NUL authcid NUL passwd` (RFC 4616 §2).
pub(super) fn plain(message: &[u8]) -> Result<Credentials, Error> {
    let mut parts = message.split(|&b| b == 0);
    let (Some(authzid), Some(user), Some(password), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::BadAuthResponse);
    };
    let utf8 = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| Error::BadAuthResponse);
    let (authzid, user, password) = (utf8(authzid)?, utf8(user)?, utf8(password)?);
    if user.is_empty() || password.is_empty() {
        return Err(Error::BadAuthResponse);
    }
    Ok(Credentials {
        authzid: (!authzid.is_empty()).then_some(authzid),
        user,
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
            (ok.authzid, ok.user.as_str(), ok.password.as_str()),
            (None, "joe", "secret")
        );
        let ok = plain(b"admin\0joe\0se cret").expect("valid");
        assert_eq!(ok.authzid.as_deref(), Some("admin"));
        assert_eq!(ok.password, "se cret");
        for bad in [
            &b""[..],
            b"joe",
            b"\0joe",
            b"\0\0secret",
            b"\0joe\0",
            b"\0joe\0se\0cret",
            b"\0j\xffoe\0secret",
        ] {
            assert_eq!(plain(bad), Err(Error::BadAuthResponse), "{bad:?}");
        }
    }

    #[test]
    fn base64_responses() {
        assert_eq!(decode(b"=", true), Ok(Vec::new()));
        assert_eq!(decode(b"", false), Ok(Vec::new()));
        assert_eq!(decode(b"am9l", false), Ok(b"joe".to_vec()));
        for bad in [&b"am9"[..], b"am9l!", b"am 9l", b"="] {
            assert_eq!(decode(bad, false), Err(Error::BadAuthResponse), "{bad:?}");
        }
    }
}
