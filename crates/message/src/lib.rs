//! What an IMAP server needs to know of a stored message's MIME structure, for Stoa:
//! the part tree with the byte range of every header and body, the body fields of
//! each part, the envelope, the sent date; and from them the FETCH values (ENVELOPE,
//! BODYSTRUCTURE, BODY, `BODY[section]`) and the SEARCH matches (HEADER, FROM,
//! SUBJECT…, BODY, TEXT, SENT*).
//!
//! The MIME parsing, RFC 2047 and RFC 2231 decoding, address and date parsing and
//! charset conversion are mail-parser's; this crate turns its parse into what IMAP
//! wants (RFC 9051 §6.4.5 and §7.5.2, RFC 3501 §7.4.2), with Dovecot's answers as
//! the reference where the RFCs leave a choice. Messages are stored as received,
//! with CRLF line endings; LF alone is read too. IMAP strings go out through
//! `stoa_imap_proto::string`.
//!
//! # Layout
//!
//! - [`Structure`] (`structure.rs`): [`Structure::parse`] parses once; the result is
//!   owned, with no reference to the message. Envelope and body field values are kept
//!   raw (unfolded; RFC 2047 words left for the client), as RFC 3501 wants. Display
//!   names and parameter values are the exception: mail-parser gives them decoded,
//!   so a value decoded to non-ASCII is encoded again, as RFC 2047 words
//!   (`=?utf-8?q?...?=`), or, for a parameter the sender wrote RFC 2231-style, as
//!   `name*` = `utf-8''%XX`; raw UTF-8 (RFC 6532) goes as it is, in a literal.
//! - [`Structure::write_envelope`], [`Structure::write_body_structure`]
//!   (`render.rs`): the FETCH values. Defaults: no Content-Type is `text/plain;
//!   charset=us-ascii` (inside a `multipart/digest`, `message/rfc822`), a text part
//!   without charset gets `us-ascii`, no or an invalid Content-Transfer-Encoding is
//!   `7bit`. Sizes are bytes of the part's body as stored; lines are its line feeds
//!   (the line break before a boundary belongs to the boundary).
//! - [`Structure::section`] (`section.rs`): the bytes of `BODY[section]` for an
//!   `stoa_imap_proto::Section`.
//! - [`Structure::header_contains`], [`Structure::text_contains`] (`search.rs`),
//!   [`Structure::sent_date`], [`Structure::sent_day`]: SEARCH.
//! - [`Structure::to_cache`], [`Structure::from_cache`] (`cache.rs`): a versioned
//!   binary form to store beside the message.
//!
//! # Hostile input
//!
//! Every message is parsed without panicking, in time linear in its size and in
//! bounded stack. Parts nest at most [`MAX_DEPTH`] levels and a message has at
//! most [`MAX_PARTS`] parts; beyond, parts are described as opaque
//! `application/octet-stream` leaves. So is a part that is not structured as its type
//! says (a multipart without boundary or parts, a `message/rfc822` that is
//! base64- or quoted-printable-encoded or has no header).
//!
//! mail-parser itself is not linear on every input: it looks for each multipart's
//! first boundary up to the end of the message when it is missing (many such parts:
//! quadratic), compares the boundary at every `--` (a megabyte boundary: quadratic),
//! and nests encapsulated messages recursively (tens of thousands: a stack overflow
//! when they are dropped). So a linear pre-scan reads every Content-Type field with
//! mail-parser's own field parser and bounds all three (500 `message/*` or digest
//! fields, 200-byte boundaries, and the boundary searches to eight times the message
//! plus 1 MiB); a message past a bound is described as one opaque body under its
//! header (its envelope, sections `HEADER` and `TEXT`, and SEARCH on its raw body
//! still work).
//!
//! # What it does not do
//!
//! No I/O and no cache policy (the server stores [`Structure::to_cache`] where it
//! likes). No `BINARY[...]` (decoded sections), no partial fetches (`<0.100>`: the
//! server slices what [`Structure::section`] gives), no `[n.HEADER]` of a part that
//! is not `message/rfc822`. No charset conversion beyond mail-parser's built-in
//! tables (UTF-8, ISO-8859-*, Windows-125*, KOI8…; not the CJK multi-byte charsets,
//! which need its `full_encoding` feature). SEARCH's case folding is Unicode
//! lowercasing, not i;unicode-casemap. Boundaries are found as mail-parser finds them
//! (it accepts `--boundary` anywhere in a line, a laxer reading than RFC 2046's).

mod cache;
mod render;
mod search;
mod section;
mod structure;

pub use structure::{MAX_DEPTH, MAX_PARTS, Structure};

#[cfg(test)]
mod tests;
