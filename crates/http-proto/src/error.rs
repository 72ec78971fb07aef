//! The one error type of the request parser.

use std::fmt;

/// Why a request head was refused.
///
/// Every variant maps to the status the peer gets ([`Error::status`]); after any of
/// them the connection must be closed, because the byte where the next request would
/// start is no longer known.
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
}

impl Error {
    /// The status code to answer with before closing the connection.
    pub fn status(self) -> u16 {
        match self {
            Error::RequestLineTooLong => 414,
            Error::HeaderLineTooLong | Error::HeadTooLarge | Error::TooManyHeaders => 431,
            Error::UnsupportedTransferCoding => 501,
            Error::UnsupportedExpectation => 417,
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
        };
        f.write_str(text)
    }
}

impl std::error::Error for Error {}
