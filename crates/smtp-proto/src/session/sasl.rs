//! Decoding of SASL responses (RFC 4954): base64 and PLAIN (RFC 4616) are
//! `stoa-mail-proto`'s, shared with POP3; the LOGIN draft's text responses are
//! SMTP's own (no other Stoa protocol offers LOGIN).

use stoa_mail_proto::sasl;

use super::Credentials;
use crate::Error;

/// Decodes one base64 response. `=` is an empty initial response (RFC 4954 §4); an
/// empty continuation line is an empty response.
pub(super) fn decode(response: &[u8], initial: bool) -> Result<Vec<u8>, Error> {
    Ok(sasl::decode(response, initial)?)
}

/// UTF-8 text of a LOGIN response, not empty.
pub(super) fn text(bytes: Vec<u8>) -> Result<String, Error> {
    match String::from_utf8(bytes) {
        Ok(text) if !text.is_empty() && !text.contains('\0') => Ok(text),
        _ => Err(Error::BadAuthResponse),
    }
}

/// PLAIN's `[authzid] NUL authcid NUL passwd` (RFC 4616 §2).
pub(super) fn plain(message: &[u8]) -> Result<Credentials, Error> {
    Ok(sasl::plain(message)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_is_one_error() {
        assert_eq!(decode(b"am9", false), Err(Error::BadAuthResponse));
        for bad in [&b"joe"[..], b"\0joe\0", b"\0j\xffoe\0secret"] {
            assert_eq!(plain(bad), Err(Error::BadAuthResponse), "{bad:?}");
        }
        assert_eq!(
            plain(b"\0joe\0secret").map(|c| c.username),
            Ok("joe".to_owned())
        );
    }

    #[test]
    fn login_text() {
        assert_eq!(text(b"joe".to_vec()), Ok("joe".to_owned()));
        assert_eq!(text(Vec::new()), Err(Error::BadAuthResponse));
        assert_eq!(text(vec![0xff]), Err(Error::BadAuthResponse));
        assert_eq!(text(b"j\0e".to_vec()), Err(Error::BadAuthResponse));
    }
}
