//! Decoding of SASL PLAIN responses (RFC 5034 §4): `stoa-mail-proto`'s base64 and
//! PLAIN (RFC 4616) decoding, shared with SMTP, every refusal made this crate's one
//! [`Error::BadAuthResponse`].

use stoa_mail_proto::sasl;

use super::Credentials;
use crate::Error;

/// Decodes one base64 response. `=` is an empty initial response (RFC 5034 §4); an
/// empty continuation line is an empty response.
pub(super) fn decode(response: &[u8], initial: bool) -> Result<Vec<u8>, Error> {
    Ok(sasl::decode(response, initial)?)
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
        assert_eq!(decode(b"=", true), Ok(Vec::new()));
        for bad in [&b"joe"[..], b"\0joe\0", b"\0j\xffoe\0secret"] {
            assert_eq!(plain(bad), Err(Error::BadAuthResponse), "{bad:?}");
        }
        assert_eq!(
            plain(b"\0joe\0se cret").map(|c| c.password),
            Ok("se cret".to_owned())
        );
    }
}
