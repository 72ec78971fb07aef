//! Sans-IO HTTP/1.0 and HTTP/1.1 for Stoa.
//!
//! This crate turns bytes into request heads and response heads into bytes, and for
//! the clients (the load generator, the harness, a proxy's upstream side) response
//! bytes into response heads. It never touches a socket, a file or a clock: callers
//! hand it buffers and the current time, and it hands back parsed values, "need more
//! bytes", or a typed [`Error`] that knows the status code the peer should get. That
//! keeps every parsing rule testable with plain byte strings and fuzzable (see
//! `fuzz/`).
//!
//! # Layout
//!
//! - [`request`]: the request-head parser ([`parse_request`]) on top of `httparse`,
//!   with the size limits of [`Limits`] and the framing rules of RFC 9112 (§6:
//!   `Transfer-Encoding` against `Content-Length`, bare LF, duplicate `Host`, ...).
//! - [`chunked`]: an incremental decoder for `Transfer-Encoding: chunked` bodies.
//! - [`response`]: status reasons and the response-head writer; and the client
//!   side's response-head parser ([`parse_response`]): the same limits, line-ending
//!   and framing rules as requests, into a [`Framing`] (length, chunked, until close,
//!   none), for whatever reads another server's answers.
//! - [`date`]: IMF-fixdate and Common Log Format timestamps, cached per second.
//! - [`target`]: request-target decoding (percent-decoding once, dot-segment removal
//!   that never climbs above `/`).
//! - [`precondition`]: `Range`, `If-None-Match` and `If-Modified-Since` evaluation.
//! - [`accept_encoding`]: `Accept-Encoding` weights and the best coding on offer.
//! - [`accept`]: the weight an `Accept` list gives a media type.
//!
//! # What it does not do
//!
//! No I/O, no timeouts (the caller owns the clock), no routing, no file access.

pub mod accept;
pub mod accept_encoding;
pub mod chunked;
pub mod date;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod precondition;
pub mod request;
pub mod response;
pub mod target;

pub use error::{Error, ResponseError};
pub use request::host;
pub use request::{BodyKind, Limits, Method, RequestHead, Status, Version, parse_request};
pub use response::{Framing, ResponseHead, ResponseLimits, parse_response};
