//! The part of a message a `BODY[...]` fetch names (RFC 9051 §6.4.5): shared by the
//! command parser, which reads it, and the message structure, which cuts it out.

/// A section specification: a part path, then what of that part.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Section {
    /// The part numbers, outermost first (`1.2` is `[1, 2]`); empty for the whole
    /// message. Each is at least 1.
    pub part: Vec<u32>,
    /// What of the part.
    pub text: SectionText,
}

/// What of a part a section names.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SectionText {
    /// The whole part (`BODY[]`, `BODY[1.2]`): for a part, its body without its MIME
    /// header; for the message, everything.
    #[default]
    Full,
    /// `HEADER`: the header of the message (or of the message/rfc822 part), with the
    /// blank line that ends it.
    Header,
    /// `HEADER.FIELDS (names)` or, with `not`, `HEADER.FIELDS.NOT (names)`: the
    /// matching (or the other) header fields, then the blank line. Names are
    /// compared case-insensitively.
    HeaderFields {
        /// The field names, as the client sent them.
        names: Vec<String>,
        /// `HEADER.FIELDS.NOT`: every field but these.
        not: bool,
    },
    /// `TEXT`: the body of the message (or of the message/rfc822 part), without its
    /// header.
    Text,
    /// `MIME`: the MIME header of a part (only with a part path).
    Mime,
}
