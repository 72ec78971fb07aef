//! Command lines (RFC 5321 §4.1): framing out of a byte buffer and parsing into
//! [`Command`].
//!
//! [`next_line`] (`stoa-mail-proto`'s, shared with POP3 and re-exported here) finds
//! one CRLF-terminated line within the length limit; a bare LF is an error (Postfix's
//! `smtpd_forbid_bare_newline`), and a line over the limit is reported so the caller
//! can discard it without buffering it. [`parse_command`] turns a line (CRLF removed)
//! into a [`Command`]. Only printable ASCII is accepted on a command line: a lone CR
//! (`RSET\rQUIT\r\n`), NUL or 8-bit byte makes the whole line one bad command.
//!
//! Leniency, where real clients need it and it creates no ambiguity: verbs are
//! case-insensitive, spaces may be repeated between arguments, trailing spaces are
//! ignored, and `MAIL FROM: <a@b>` (space after the colon) is accepted. Paths must be
//! in angle brackets.

pub use stoa_mail_proto::line::{Line, next_line};

use crate::Error;
use crate::address::{ForwardPath, ReversePath, parse_forward_path, parse_reverse_path};
use crate::session::Dialect;

/// Longest HELO/EHLO argument (a domain name's limit).
pub const MAX_HELO: usize = 255;

/// Most digits of a `SIZE=` value: more than `u64` holds is refused as malformed.
const MAX_SIZE_DIGITS: usize = 20;

/// The command verbs Stoa knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `EHLO` (RFC 5321 §4.1.1.1)
    Ehlo,
    /// `HELO`
    Helo,
    /// `MAIL`
    Mail,
    /// `RCPT`
    Rcpt,
    /// `DATA`
    Data,
    /// `RSET`
    Rset,
    /// `NOOP`
    Noop,
    /// `QUIT`
    Quit,
    /// `VRFY`
    Vrfy,
    /// `EXPN`
    Expn,
    /// `HELP`
    Help,
    /// `STARTTLS` (RFC 3207)
    StartTls,
    /// `AUTH` (RFC 4954)
    Auth,
    /// `LHLO` (RFC 2033 §4.1), LMTP's EHLO; only a command in [`Dialect::Lmtp`].
    Lhlo,
}

impl Verb {
    /// The verb as sent on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Ehlo => "EHLO",
            Verb::Helo => "HELO",
            Verb::Mail => "MAIL",
            Verb::Rcpt => "RCPT",
            Verb::Data => "DATA",
            Verb::Rset => "RSET",
            Verb::Noop => "NOOP",
            Verb::Quit => "QUIT",
            Verb::Vrfy => "VRFY",
            Verb::Expn => "EXPN",
            Verb::Help => "HELP",
            Verb::StartTls => "STARTTLS",
            Verb::Auth => "AUTH",
            Verb::Lhlo => "LHLO",
        }
    }

    /// The usage line of a `501` syntax error.
    pub(crate) fn usage(self) -> &'static str {
        match self {
            Verb::Ehlo => "Syntax: EHLO hostname",
            Verb::Helo => "Syntax: HELO hostname",
            Verb::Mail => "Syntax: MAIL FROM:<address>",
            Verb::Rcpt => "Syntax: RCPT TO:<address>",
            Verb::Data => "Syntax: DATA",
            Verb::Rset => "Syntax: RSET",
            Verb::Noop => "Syntax: NOOP",
            Verb::Quit => "Syntax: QUIT",
            Verb::Vrfy => "Syntax: VRFY address",
            Verb::Expn => "Syntax: EXPN mailing-list",
            Verb::Help => "Syntax: HELP [topic]",
            Verb::StartTls => "Syntax: STARTTLS",
            Verb::Auth => "Syntax: AUTH mechanism [initial-response]",
            Verb::Lhlo => "Syntax: LHLO hostname",
        }
    }

    /// The verb `token` names in `dialect`: LHLO exists only in LMTP, so that an
    /// SMTP session answers it as any unknown command.
    fn from_token(token: &[u8], dialect: Dialect) -> Option<Verb> {
        const VERBS: [Verb; 13] = [
            Verb::Ehlo,
            Verb::Helo,
            Verb::Mail,
            Verb::Rcpt,
            Verb::Data,
            Verb::Rset,
            Verb::Noop,
            Verb::Quit,
            Verb::Vrfy,
            Verb::Expn,
            Verb::Help,
            Verb::StartTls,
            Verb::Auth,
        ];
        if dialect == Dialect::Lmtp && Verb::Lhlo.as_str().as_bytes().eq_ignore_ascii_case(token) {
            return Some(Verb::Lhlo);
        }
        VERBS
            .into_iter()
            .find(|v| v.as_str().as_bytes().eq_ignore_ascii_case(token))
    }
}

/// A SASL mechanism Stoa offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mechanism {
    /// `PLAIN` (RFC 4616)
    Plain,
    /// `LOGIN` (draft-murchison-sasl-login)
    Login,
}

impl Mechanism {
    /// The mechanism name as advertised.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::Plain => "PLAIN",
            Mechanism::Login => "LOGIN",
        }
    }
}

/// The `BODY=` parameter of MAIL (RFC 6152).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// `BODY=7BIT`
    SevenBit,
    /// `BODY=8BITMIME`
    EightBitMime,
}

/// The MAIL parameters Stoa understands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MailParams {
    /// `SIZE=n` (RFC 1870): the size the client announces.
    pub size: Option<u64>,
    /// `BODY=` (RFC 6152).
    pub body: Option<Body>,
}

/// One parsed command. Borrowed text points into the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    /// `EHLO domain`
    Ehlo(&'a str),
    /// `HELO domain`
    Helo(&'a str),
    /// `LHLO domain` (LMTP only)
    Lhlo(&'a str),
    /// `MAIL FROM:<path> [params]`
    Mail {
        /// The sender.
        from: ReversePath,
        /// SIZE and BODY.
        params: MailParams,
    },
    /// `RCPT TO:<path>`
    Rcpt {
        /// The recipient.
        to: ForwardPath,
    },
    /// `DATA`
    Data,
    /// `RSET`
    Rset,
    /// `NOOP [text]`
    Noop,
    /// `QUIT`
    Quit,
    /// `VRFY string`
    Vrfy(&'a str),
    /// `EXPN string`
    Expn(&'a str),
    /// `HELP [topic]`
    Help(Option<&'a str>),
    /// `STARTTLS`
    StartTls,
    /// `AUTH mechanism [initial-response]`
    Auth {
        /// PLAIN or LOGIN.
        mechanism: Mechanism,
        /// The base64 initial response (`=` for an empty one), not yet decoded.
        initial_response: Option<&'a str>,
    },
}

impl Command<'_> {
    /// The command's verb.
    pub fn verb(&self) -> Verb {
        match self {
            Command::Ehlo(_) => Verb::Ehlo,
            Command::Helo(_) => Verb::Helo,
            Command::Lhlo(_) => Verb::Lhlo,
            Command::Mail { .. } => Verb::Mail,
            Command::Rcpt { .. } => Verb::Rcpt,
            Command::Data => Verb::Data,
            Command::Rset => Verb::Rset,
            Command::Noop => Verb::Noop,
            Command::Quit => Verb::Quit,
            Command::Vrfy(_) => Verb::Vrfy,
            Command::Expn(_) => Verb::Expn,
            Command::Help(_) => Verb::Help,
            Command::StartTls => Verb::StartTls,
            Command::Auth { .. } => Verb::Auth,
        }
    }
}

impl Verb {
    /// Whether RFC 2920 §3.1 (and RFC 3207 for STARTTLS) require this command to be the
    /// last of a pipelined group: the client must wait for its reply before sending
    /// anything else.
    pub fn ends_group(self) -> bool {
        matches!(
            self,
            Verb::Ehlo
                | Verb::Helo
                | Verb::Lhlo
                | Verb::Data
                | Verb::Vrfy
                | Verb::Expn
                | Verb::Quit
                | Verb::Noop
                | Verb::StartTls
        )
    }
}

/// Parses one SMTP command line (without its CRLF).
pub fn parse_command(line: &[u8]) -> Result<Command<'_>, Error> {
    parse_command_in(line, Dialect::Smtp)
}

/// Parses one command line (without its CRLF) of `dialect`.
pub fn parse_command_in(line: &[u8], dialect: Dialect) -> Result<Command<'_>, Error> {
    check_characters(line)?;
    // Invariant: every byte is printable ASCII, checked above.
    let line = std::str::from_utf8(line).map_err(|_| Error::BadCharacter)?;
    let line = line.trim_end_matches(' ');
    let (token, args) = match line.split_once(' ') {
        Some((token, args)) => (token, args.trim_start_matches(' ')),
        None => (line, ""),
    };
    let verb = Verb::from_token(token.as_bytes(), dialect).ok_or(Error::UnknownCommand)?;
    let syntax = Error::Syntax(verb);
    match verb {
        Verb::Ehlo => helo_argument(args).map(Command::Ehlo).ok_or(syntax),
        Verb::Helo => helo_argument(args).map(Command::Helo).ok_or(syntax),
        Verb::Lhlo => helo_argument(args).map(Command::Lhlo).ok_or(syntax),
        Verb::Mail => parse_mail(args),
        Verb::Rcpt => parse_rcpt(args),
        Verb::Data => no_argument(args, Command::Data, syntax),
        Verb::Rset => no_argument(args, Command::Rset, syntax),
        Verb::Quit => no_argument(args, Command::Quit, syntax),
        Verb::StartTls => no_argument(args, Command::StartTls, syntax),
        Verb::Noop => Ok(Command::Noop),
        Verb::Help => Ok(Command::Help((!args.is_empty()).then_some(args))),
        Verb::Vrfy if !args.is_empty() => Ok(Command::Vrfy(args)),
        Verb::Expn if !args.is_empty() => Ok(Command::Expn(args)),
        Verb::Vrfy | Verb::Expn => Err(syntax),
        Verb::Auth => parse_auth(args),
    }
}

/// Printable ASCII and spaces only; a CR gets its own error.
fn check_characters(line: &[u8]) -> Result<(), Error> {
    match line.iter().find(|&&b| !(b' '..=b'~').contains(&b)) {
        None => Ok(()),
        Some(b'\r') => Err(Error::BareCr),
        Some(_) => Err(Error::BadCharacter),
    }
}

fn no_argument<'a>(args: &str, command: Command<'a>, syntax: Error) -> Result<Command<'a>, Error> {
    if args.is_empty() {
        Ok(command)
    } else {
        Err(syntax)
    }
}

/// One token of visible ASCII without the characters that could break the comment
/// structure of a `Received:` header (`(`, `)`, `<`, `>`, `"`, `\`).
fn helo_argument(args: &str) -> Option<&str> {
    let ok = !args.is_empty()
        && args.len() <= MAX_HELO
        && args
            .bytes()
            .all(|b| b.is_ascii_graphic() && !b"()<>\"\\".contains(&b));
    ok.then_some(args)
}

/// `args` starts with `keyword` (case-insensitive): the rest, spaces after it skipped.
fn after_keyword<'a>(args: &'a str, keyword: &str) -> Option<&'a str> {
    let head = args.get(..keyword.len())?;
    head.eq_ignore_ascii_case(keyword)
        .then(|| args[keyword.len()..].trim_start_matches(' '))
}

fn parse_mail(args: &str) -> Result<Command<'_>, Error> {
    let path = after_keyword(args, "FROM:")
        .filter(|p| p.starts_with('<'))
        .ok_or(Error::Syntax(Verb::Mail))?;
    let (from, rest) = parse_reverse_path(path.as_bytes()).map_err(Error::BadSender)?;
    let params = parse_mail_params(parameters(rest).ok_or(Error::BadSender(
        crate::address::AddressError::MissingBrackets,
    ))?)?;
    Ok(Command::Mail { from, params })
}

fn parse_rcpt(args: &str) -> Result<Command<'_>, Error> {
    let path = after_keyword(args, "TO:")
        .filter(|p| p.starts_with('<'))
        .ok_or(Error::Syntax(Verb::Rcpt))?;
    let (to, rest) = parse_forward_path(path.as_bytes()).map_err(Error::BadRecipient)?;
    let rest = parameters(rest).ok_or(Error::BadRecipient(
        crate::address::AddressError::MissingBrackets,
    ))?;
    // No RCPT parameter is offered (no DSN).
    if rest.split(' ').any(|p| !p.is_empty()) {
        return Err(Error::UnsupportedParameter);
    }
    Ok(Command::Rcpt { to })
}

/// What follows a path's `>`: nothing, or parameters after a space.
fn parameters(rest: &[u8]) -> Option<&str> {
    let text = std::str::from_utf8(rest).ok()?;
    (text.is_empty() || text.starts_with(' ')).then_some(text)
}

/// `esmtp-param *(SP esmtp-param)`, `esmtp-keyword ["=" esmtp-value]`.
fn parse_mail_params(text: &str) -> Result<MailParams, Error> {
    let mut params = MailParams::default();
    for param in text.split(' ').filter(|p| !p.is_empty()) {
        let (keyword, value) = match param.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (param, None),
        };
        let keyword_ok = keyword.starts_with(|c: char| c.is_ascii_alphanumeric())
            && keyword
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !keyword_ok || value.is_some_and(|v| v.is_empty() || v.contains('=')) {
            return Err(Error::BadParameter);
        }
        if keyword.eq_ignore_ascii_case("SIZE") {
            if params.size.is_some() {
                return Err(Error::BadParameter);
            }
            params.size = Some(parse_size(value)?);
        } else if keyword.eq_ignore_ascii_case("BODY") {
            if params.body.is_some() {
                return Err(Error::BadParameter);
            }
            params.body = Some(match value {
                Some(v) if v.eq_ignore_ascii_case("7BIT") => Body::SevenBit,
                Some(v) if v.eq_ignore_ascii_case("8BITMIME") => Body::EightBitMime,
                _ => return Err(Error::BadParameter),
            });
        } else if keyword.eq_ignore_ascii_case("AUTH") {
            // RFC 4954 §5: accepted and ignored (Stoa does not act on it).
            if value.is_none() {
                return Err(Error::BadParameter);
            }
        } else {
            return Err(Error::UnsupportedParameter);
        }
    }
    Ok(params)
}

fn parse_size(value: Option<&str>) -> Result<u64, Error> {
    match value {
        Some(v) if v.len() <= MAX_SIZE_DIGITS && v.bytes().all(|b| b.is_ascii_digit()) => {
            // 20 digits can exceed u64: saturate, which is over any limit anyway.
            Ok(v.parse().unwrap_or(u64::MAX))
        }
        _ => Err(Error::BadParameter),
    }
}

fn parse_auth(args: &str) -> Result<Command<'_>, Error> {
    let (name, initial) = match args.split_once(' ') {
        Some((name, rest)) => (name, Some(rest.trim_start_matches(' '))),
        None => (args, None),
    };
    if name.is_empty() || initial.is_some_and(|i| i.is_empty() || i.contains(' ')) {
        return Err(Error::Syntax(Verb::Auth));
    }
    let mechanism = if name.eq_ignore_ascii_case("PLAIN") {
        Mechanism::Plain
    } else if name.eq_ignore_ascii_case("LOGIN") {
        Mechanism::Login
    } else {
        return Err(Error::UnknownMechanism);
    };
    Ok(Command::Auth {
        mechanism,
        initial_response: initial,
    })
}

#[cfg(test)]
mod tests;
