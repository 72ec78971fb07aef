//! The one error type of the crate's parsers.

use std::fmt;

/// Why a request head, or a response head a client read, was refused.
///
/// Every variant maps to the status the peer gets ([`Error::status`]): the client's
/// faults to 4xx, an unsupported coding to 501, a malformed response to 502 (what a
/// proxy answers for its upstream's fault). After any of them the connection must be
/// closed, because the byte where the next message would start is no longer known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The request line is longer than [`crate::Limits::max_request_line`] (414).
    RequestLineTooLong,
    /// One header line is longer than [`crate::Limits::max_header_line`] (431).
    HeaderLineTooLong,
    /// The whole head is larger than [`crate::Limits::max_head`] (431).
    HeadTooLarge,
    /// More header fields than [`crate::Limits::max_headers`] (431).
    TooManyHeaders,
    /// The request line is malformed: bad method token, bad target, extra spaces.
    BadRequestLine,
    /// The version is missing (HTTP/0.9) or not HTTP/1.0 or HTTP/1.1.
    BadVersion,
    /// A header field is malformed: bad name byte, control byte in a value, space
    /// before the colon, obs-fold.
    BadHeader,
    /// A line of the head ends in LF without CR, or a CR is not followed by LF.
    BareLineEnding,
    /// HTTP/1.1 request without `Host`, a request with more than one, or a `Host`
    /// value that is not `uri-host [ ":" port ]`.
    BadHost,
    /// Both `Transfer-Encoding` and `Content-Length` (a smuggling vector).
    TransferEncodingWithContentLength,
    /// `Transfer-Encoding` in an HTTP/1.0 request.
    TransferEncodingInHttp10,
    /// `Transfer-Encoding` whose final coding is not `chunked`, or `chunked` twice.
    BadTransferEncoding,
    /// A transfer coding other than `chunked` (501).
    UnsupportedTransferCoding,
    /// `Content-Length` that is not one decimal number, or several of them.
    BadContentLength,
    /// An `Expect` value other than `100-continue` (417).
    UnsupportedExpectation,
    /// A response head refused by [`crate::response::parse_response`]: the server
    /// that sent it is at fault (502).
    BadResponse(ResponseError),
}

/// Why [`crate::response::parse_response`] refused a response head: the rules of
/// the request side, read from the client's side (RFC 9112 §4, §6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResponseError {
    /// The status line is longer than
    /// [`crate::response::ResponseLimits::max_status_line`].
    StatusLineTooLong,
    /// One header line is longer than
    /// [`crate::response::ResponseLimits::max_header_line`].
    HeaderLineTooLong,
    /// The whole head is larger than [`crate::response::ResponseLimits::max_head`].
    HeadTooLarge,
    /// More header fields than [`crate::response::ResponseLimits::max_headers`].
    TooManyHeaders,
    /// The status line is malformed, or its status code is outside 100–599
    /// (RFC 9110 §15).
    BadStatusLine,
    /// The version is not HTTP/1.0 or HTTP/1.1.
    BadVersion,
    /// A header field is malformed: bad name byte, control byte in a value, space
    /// before the colon, obs-fold.
    BadHeader,
    /// A line of the head ends in LF without CR, or a CR is not followed by LF.
    BareLineEnding,
    /// Both `Transfer-Encoding` and `Content-Length` (a smuggling vector).
    TransferEncodingWithContentLength,
    /// `Transfer-Encoding` in an HTTP/1.0 response (RFC 9112 §6.1: faulty framing).
    TransferEncodingInHttp10,
    /// `Transfer-Encoding` whose final coding is not `chunked`, or `chunked` twice.
    BadTransferEncoding,
    /// A transfer coding other than `chunked`, which would have to be decoded.
    UnsupportedTransferCoding,
    /// `Content-Length` that is not a decimal number, or values that differ.
    BadContentLength,
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            ResponseError::StatusLineTooLong => "status line too long",
            ResponseError::HeaderLineTooLong => "header line too long",
            ResponseError::HeadTooLarge => "response head too large",
            ResponseError::TooManyHeaders => "too many header fields",
            ResponseError::BadStatusLine => "malformed status line",
            ResponseError::BadVersion => "unsupported HTTP version",
            ResponseError::BadHeader => "malformed header field",
            ResponseError::BareLineEnding => "bare CR or LF in response head",
            ResponseError::TransferEncodingWithContentLength => {
                "both Transfer-Encoding and Content-Length"
            }
            ResponseError::TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 response",
            ResponseError::BadTransferEncoding => "Transfer-Encoding does not end in chunked",
            ResponseError::UnsupportedTransferCoding => "unsupported transfer coding",
            ResponseError::BadContentLength => "invalid or conflicting Content-Length",
        };
        f.write_str(text)
    }
}

impl std::error::Error for ResponseError {}

impl From<ResponseError> for Error {
    fn from(e: ResponseError) -> Error {
        Error::BadResponse(e)
    }
}

impl Error {
    /// The status code to answer with before closing the connection.
    pub fn status(self) -> u16 {
        match self {
            Error::RequestLineTooLong => 414,
            Error::HeaderLineTooLong | Error::HeadTooLarge | Error::TooManyHeaders => 431,
            Error::UnsupportedTransferCoding => 501,
            Error::UnsupportedExpectation => 417,
            Error::BadResponse(_) => 502,
            Error::BadRequestLine
            | Error::BadVersion
            | Error::BadHeader
            | Error::BareLineEnding
            | Error::BadHost
            | Error::TransferEncodingWithContentLength
            | Error::TransferEncodingInHttp10
            | Error::BadTransferEncoding
            | Error::BadContentLength => 400,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Error::RequestLineTooLong => "request line too long",
            Error::HeaderLineTooLong => "header line too long",
            Error::HeadTooLarge => "request head too large",
            Error::TooManyHeaders => "too many header fields",
            Error::BadRequestLine => "malformed request line",
            Error::BadVersion => "missing or unsupported HTTP version",
            Error::BadHeader => "malformed header field",
            Error::BareLineEnding => "bare CR or LF in request head",
            Error::BadHost => "missing, repeated or invalid Host header",
            Error::TransferEncodingWithContentLength => "both Transfer-Encoding and Content-Length",
            Error::TransferEncodingInHttp10 => "Transfer-Encoding in an HTTP/1.0 request",
            Error::BadTransferEncoding => "Transfer-Encoding does not end in chunked",
            Error::UnsupportedTransferCoding => "unsupported transfer coding",
            Error::BadContentLength => "invalid Content-Length",
            Error::UnsupportedExpectation => "unsupported Expect value",
            Error::BadResponse(e) => return write!(f, "malformed response: {e}"),
        };
        f.write_str(text)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::BadResponse(e) => Some(e),
            _ => None,
        }
    }
}
