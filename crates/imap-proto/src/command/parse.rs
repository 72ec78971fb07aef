//! The parser of one complete command (its literals included, its final CRLF
//! removed), and of the two lines that are not commands: AUTHENTICATE's responses and
//! IDLE's `DONE`.
//!
//! A recursive-descent parser over the command's bytes. Literals are read by their
//! announced length, so their data is copied once and never scanned. Nesting (search
//! keys, parentheses) is limited to [`MAX_DEPTH`].

use stoa_mail_proto::line::{Line as RawLine, next_line};
use stoa_mail_proto::sasl::{self, Credentials};

use super::reader::Line;
use super::{
    Append, Command, CommandKind, Fetch, FetchAttribute, Flag, List, QResync, Search, SearchKey,
    SearchReturn, Secret, Select, StatusItem, Store, StoreMode,
};
use crate::date::{Date, parse_date_time};
use crate::section::{Section, SectionText};
use crate::sequence::{SeqNumber, SequenceSet};
use crate::string::is_atom_char;
use crate::{Error, Rejection};

/// The deepest nesting of parentheses and search operators accepted.
pub const MAX_DEPTH: usize = 32;

/// The longest tag accepted.
const MAX_TAG: usize = 128;

type R<T> = Result<T, Error>;

fn syntax<T>(what: &'static str) -> R<T> {
    Err(Error::Syntax(what))
}

/// Whether `b` may be in a tag: an `ASTRING-CHAR` but `+`.
pub(crate) fn is_tag_char(b: u8) -> bool {
    (is_atom_char(b) || b == b']') && b != b'+'
}

/// The tag at the start of `input`, when it is a valid one followed by a space (or
/// the end of the given bytes).
pub(crate) fn leading_tag(input: &[u8]) -> Option<String> {
    let end = input
        .iter()
        .take(MAX_TAG + 1)
        .position(|&b| !is_tag_char(b))
        .unwrap_or(input.len());
    if end == 0 || end > MAX_TAG || !matches!(input.get(end), Some(b' ') | None) {
        return None;
    }
    Some(String::from_utf8_lossy(&input[..end]).into_owned())
}

/// Parses one complete command: `input` is its bytes without the final CRLF, any
/// literals included (`{n}` CRLF and the n bytes, as the client sent them).
///
/// The error carries the tag when one was read: the server answers `tag BAD text`.
pub fn parse_command(input: &[u8]) -> Result<Command, Rejection> {
    let Some(tag) = leading_tag(input) else {
        return Err(Rejection {
            tag: None,
            error: Error::BadTag,
        });
    };
    let mut p = Parser {
        input,
        pos: tag.len(),
        depth: 0,
    };
    let kind = p.sp().and_then(|()| p.command()).and_then(|kind| {
        if p.pos == input.len() {
            Ok(kind)
        } else {
            syntax("Unexpected characters at end of command")
        }
    });
    match kind {
        Ok(kind) => Ok(Command { tag, kind }),
        Err(error) => Err(Rejection {
            tag: Some(tag),
            error,
        }),
    }
}

/// Reads one AUTHENTICATE response line (RFC 9051 §6.2.2): base64, decoded, or
/// [`Error::AuthCancelled`] for `*`. `max` bounds the line, CRLF included.
///
/// [`Error::LineTooLong`] means the line's end was not seen: the server should close.
pub fn auth_response(input: &[u8], max: usize) -> Line<Vec<u8>> {
    raw_line(input, max, |line| {
        if line == b"*" {
            Err(Error::AuthCancelled)
        } else {
            sasl::decode(line, false).map_err(Error::from)
        }
    })
}

/// Decodes a PLAIN message (RFC 4616; the decoded initial response or AUTHENTICATE
/// response) into credentials, with `stoa-mail-proto`'s rules: every malformed
/// message is [`Error::BadSaslResponse`].
pub fn sasl_plain(message: &[u8]) -> Result<Credentials, Error> {
    sasl::plain(message).map_err(Error::from)
}

/// Reads the line that ends IDLE (RFC 2177): `DONE`, in any case; anything else is
/// [`Error::ExpectedDone`] (the server ends IDLE and answers BAD).
pub fn idle_done(input: &[u8], max: usize) -> Line<()> {
    raw_line(input, max, |line| {
        if line.eq_ignore_ascii_case(b"DONE") {
            Ok(())
        } else {
            Err(Error::ExpectedDone)
        }
    })
}

fn raw_line<T>(input: &[u8], max: usize, f: impl FnOnce(&[u8]) -> R<T>) -> Line<T> {
    match next_line(input, max) {
        RawLine::Partial => Line::Partial,
        RawLine::Complete { line, consumed } => Line::Complete {
            result: f(line),
            consumed,
        },
        RawLine::BareLf { consumed } => Line::Complete {
            result: Err(Error::BareLf),
            consumed,
        },
        RawLine::TooLong { consumed, .. } => Line::Complete {
            result: Err(Error::LineTooLong),
            consumed,
        },
    }
}

struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.input.get(self.pos).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        if self.peek() == Some(b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect(&mut self, b: u8, what: &'static str) -> R<()> {
        if self.eat(b) { Ok(()) } else { syntax(what) }
    }

    fn sp(&mut self) -> R<()> {
        self.expect(b' ', "Expected a space")
    }

    fn open(&mut self) -> R<()> {
        self.expect(b'(', "Expected (")?;
        self.enter()
    }

    fn close(&mut self) -> R<()> {
        self.expect(b')', "Expected )")?;
        self.depth = self.depth.saturating_sub(1);
        Ok(())
    }

    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(Error::TooDeep)
        } else {
            Ok(())
        }
    }

    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a [u8] {
        let start = self.pos;
        while self.peek().is_some_and(&f) {
            self.pos += 1;
        }
        &self.input[start..self.pos]
    }

    fn atom(&mut self) -> R<&'a [u8]> {
        let atom = self.take_while(is_atom_char);
        if atom.is_empty() {
            syntax("Expected an atom")
        } else {
            Ok(atom)
        }
    }

    /// The next atom, upper-cased, for keyword matching.
    fn keyword(&mut self) -> R<String> {
        let atom = self.atom()?;
        if atom.len() > 64 {
            return syntax("Unknown keyword");
        }
        Ok(String::from_utf8_lossy(atom).to_ascii_uppercase())
    }

    /// Consumes `word` (case-insensitive) when it is the next atom.
    fn eat_keyword(&mut self, word: &str) -> bool {
        let end = self.pos + word.len();
        if self
            .input
            .get(self.pos..end)
            .is_some_and(|w| w.eq_ignore_ascii_case(word.as_bytes()))
            && !self.input.get(end).is_some_and(|&b| is_atom_char(b))
        {
            self.pos = end;
            true
        } else {
            false
        }
    }

    fn number64(&mut self) -> R<u64> {
        let digits = self.take_while(|b| b.is_ascii_digit());
        if digits.is_empty() || digits.len() > 20 {
            return syntax("Expected a number");
        }
        digits
            .iter()
            .try_fold(0u64, |n, &d| {
                n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            })
            .ok_or(Error::Syntax("Number too large"))
    }

    fn number(&mut self) -> R<u32> {
        u32::try_from(self.number64()?).map_err(|_| Error::Syntax("Number too large"))
    }

    fn nz_number(&mut self) -> R<u32> {
        match self.number()? {
            0 => syntax("Expected a non-zero number"),
            n => Ok(n),
        }
    }

    /// A mod-sequence value (RFC 7162: up to 2^63 - 1).
    fn modseq(&mut self) -> R<u64> {
        let n = self.number64()?;
        if n > i64::MAX as u64 {
            return syntax("Mod-sequence too large");
        }
        Ok(n)
    }

    fn quoted(&mut self) -> R<Vec<u8>> {
        self.expect(b'"', "Expected a quoted string")?;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None | Some(b'\r' | b'\n' | 0) => return syntax("Unterminated quoted string"),
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(c @ (b'"' | b'\\')) => out.push(c),
                        _ => return syntax("Invalid escape in quoted string"),
                    }
                    self.pos += 1;
                }
                Some(c) => {
                    out.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// `{n}` / `{n+}` CRLF then n bytes (the framing checked the limits); with
    /// `binary`, `~{n}` too. Returns the data and whether it was `~{`.
    fn literal(&mut self, binary: bool) -> R<(&'a [u8], bool)> {
        let tilde = binary && self.eat(b'~');
        self.expect(b'{', "Expected a literal")?;
        let n = self.number64()?;
        self.eat(b'+');
        self.expect(b'}', "Malformed literal")?;
        if !self.input[self.pos..].starts_with(b"\r\n") {
            return syntax("Literal not followed by CRLF");
        }
        self.pos += 2;
        let n = usize::try_from(n).map_err(|_| Error::Syntax("Literal too large"))?;
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.input.len())
            .ok_or(Error::Syntax("Literal shorter than announced"))?;
        let data = &self.input[self.pos..end];
        self.pos = end;
        if !tilde && data.contains(&0) {
            return syntax("NUL in literal");
        }
        Ok((data, tilde))
    }

    fn string(&mut self) -> R<Vec<u8>> {
        match self.peek() {
            Some(b'"') => self.quoted(),
            Some(b'{') => Ok(self.literal(false)?.0.to_vec()),
            _ => syntax("Expected a string"),
        }
    }

    fn astring(&mut self) -> R<Vec<u8>> {
        match self.peek() {
            Some(b'"' | b'{') => self.string(),
            _ => {
                let atom = self.take_while(|b| is_atom_char(b) || b == b']');
                if atom.is_empty() {
                    syntax("Expected a string or atom")
                } else {
                    Ok(atom.to_vec())
                }
            }
        }
    }

    fn utf8_astring(&mut self) -> R<String> {
        String::from_utf8(self.astring()?).map_err(|_| Error::NotUtf8)
    }

    fn nstring(&mut self) -> R<Option<Vec<u8>>> {
        if self.eat_keyword("NIL") {
            Ok(None)
        } else {
            self.string().map(Some)
        }
    }

    fn mailbox(&mut self) -> R<Vec<u8>> {
        self.astring()
    }

    /// `list-mailbox`: list chars (atom chars, `%`, `*`, `]`) or a string.
    fn list_mailbox(&mut self) -> R<Vec<u8>> {
        match self.peek() {
            Some(b'"' | b'{') => self.string(),
            _ => {
                let atom = self.take_while(|b| is_atom_char(b) || matches!(b, b'%' | b'*' | b']'));
                if atom.is_empty() {
                    syntax("Expected a mailbox pattern")
                } else {
                    Ok(atom.to_vec())
                }
            }
        }
    }

    fn seq_number(&mut self) -> R<SeqNumber> {
        if self.eat(b'*') {
            Ok(SeqNumber::Largest)
        } else {
            Ok(SeqNumber::Value(self.nz_number()?))
        }
    }

    fn sequence_set(&mut self) -> R<SequenceSet> {
        if self.eat(b'$') {
            return Ok(SequenceSet::Saved);
        }
        let mut ranges = Vec::new();
        loop {
            let a = self.seq_number()?;
            let b = if self.eat(b':') {
                self.seq_number()?
            } else {
                a
            };
            ranges.push((a, b));
            if !self.eat(b',') {
                return Ok(SequenceSet::Ranges(ranges));
            }
        }
    }

    fn flag(&mut self) -> R<Flag> {
        let start = self.pos;
        self.eat(b'\\');
        self.take_while(is_atom_char);
        Flag::parse(&self.input[start..self.pos]).ok_or(Error::Syntax("Invalid flag"))
    }

    /// `(flag ...)`, possibly empty; `\Recent` refused (it cannot be set).
    fn flag_list(&mut self) -> R<Vec<Flag>> {
        self.open()?;
        let mut flags = Vec::new();
        if !self.eat(b')') {
            loop {
                flags.push(self.settable_flag()?);
                if !self.eat(b' ') {
                    break;
                }
            }
            self.close()?;
        } else {
            self.depth -= 1;
        }
        Ok(flags)
    }

    fn settable_flag(&mut self) -> R<Flag> {
        match self.flag()? {
            Flag::Recent => syntax("\\Recent cannot be set"),
            flag => Ok(flag),
        }
    }

    /// `date`: `d-MMM-yyyy`, bare or quoted.
    fn date(&mut self) -> R<Date> {
        let quoted = self.eat(b'"');
        let text = self.take_while(|b| b.is_ascii_alphanumeric() || b == b'-');
        if quoted {
            self.expect(b'"', "Unterminated date")?;
        }
        Date::parse(text).ok_or(Error::Syntax("Invalid date"))
    }

    /// A parenthesised, space-separated list of at least one item.
    fn paren_list<T>(&mut self, mut item: impl FnMut(&mut Self) -> R<T>) -> R<Vec<T>> {
        self.open()?;
        let mut items = vec![item(self)?];
        while self.eat(b' ') {
            items.push(item(self)?);
        }
        self.close()?;
        Ok(items)
    }

    fn command(&mut self) -> R<CommandKind> {
        let name = self.keyword().map_err(|_| Error::UnknownCommand)?;
        let kind = match name.as_str() {
            "CAPABILITY" => CommandKind::Capability,
            "NOOP" => CommandKind::Noop,
            "LOGOUT" => CommandKind::Logout,
            "STARTTLS" => CommandKind::StartTls,
            "NAMESPACE" => CommandKind::Namespace,
            "IDLE" => CommandKind::Idle,
            "CHECK" => CommandKind::Check,
            "CLOSE" => CommandKind::Close,
            "UNSELECT" => CommandKind::Unselect,
            "EXPUNGE" => CommandKind::Expunge,
            "ID" => self.id()?,
            "ENABLE" => {
                let mut caps = Vec::new();
                while self.eat(b' ') {
                    caps.push(self.keyword()?);
                }
                if caps.is_empty() {
                    return syntax("ENABLE needs a capability");
                }
                CommandKind::Enable(caps)
            }
            "LOGIN" => {
                self.sp()?;
                let username = self.utf8_astring()?;
                self.sp()?;
                let password = Secret(self.utf8_astring()?);
                CommandKind::Login { username, password }
            }
            "AUTHENTICATE" => {
                self.sp()?;
                let mechanism = self.keyword()?;
                let initial_response = if self.eat(b' ') {
                    let text = self.take_while(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
                    });
                    if text.is_empty() {
                        return syntax("Expected a base64 initial response");
                    }
                    Some(Secret(sasl::decode(text, true)?))
                } else {
                    None
                };
                CommandKind::Authenticate {
                    mechanism,
                    initial_response,
                }
            }
            "COMPRESS" => {
                self.sp()?;
                CommandKind::Compress(self.keyword()?)
            }
            "SELECT" => CommandKind::Select(self.select()?),
            "EXAMINE" => CommandKind::Examine(self.select()?),
            "CREATE" => self.create()?,
            "DELETE" => {
                self.sp()?;
                CommandKind::Delete(self.mailbox()?)
            }
            "RENAME" => {
                self.sp()?;
                let from = self.mailbox()?;
                self.sp()?;
                let to = self.mailbox()?;
                CommandKind::Rename { from, to }
            }
            "SUBSCRIBE" => {
                self.sp()?;
                CommandKind::Subscribe(self.mailbox()?)
            }
            "UNSUBSCRIBE" => {
                self.sp()?;
                CommandKind::Unsubscribe(self.mailbox()?)
            }
            "LIST" => CommandKind::List(self.list()?),
            "LSUB" => {
                self.sp()?;
                let reference = self.mailbox()?;
                self.sp()?;
                let pattern = self.list_mailbox()?;
                CommandKind::Lsub { reference, pattern }
            }
            "STATUS" => {
                self.sp()?;
                let mailbox = self.mailbox()?;
                self.sp()?;
                let items = self.paren_list(Self::status_item)?;
                CommandKind::Status { mailbox, items }
            }
            "APPEND" => self.append()?,
            "SEARCH" => CommandKind::Search(self.search(false)?),
            "FETCH" => CommandKind::Fetch(self.fetch(false)?),
            "STORE" => CommandKind::Store(self.store(false)?),
            "COPY" => self.copy_move(false, false)?,
            "MOVE" => self.copy_move(false, true)?,
            "UID" => {
                self.sp()?;
                match self.keyword()?.as_str() {
                    "SEARCH" => CommandKind::Search(self.search(true)?),
                    "FETCH" => CommandKind::Fetch(self.fetch(true)?),
                    "STORE" => CommandKind::Store(self.store(true)?),
                    "COPY" => self.copy_move(true, false)?,
                    "MOVE" => self.copy_move(true, true)?,
                    "EXPUNGE" => {
                        self.sp()?;
                        CommandKind::UidExpunge(self.sequence_set()?)
                    }
                    _ => return syntax("Unknown UID command"),
                }
            }
            _ => return Err(Error::UnknownCommand),
        };
        Ok(kind)
    }

    fn id(&mut self) -> R<CommandKind> {
        self.sp()?;
        if self.eat_keyword("NIL") {
            return Ok(CommandKind::Id(None));
        }
        self.open()?;
        let mut fields = Vec::new();
        if self.eat(b')') {
            self.depth -= 1;
            return Ok(CommandKind::Id(Some(fields)));
        }
        loop {
            let key = self.string()?;
            self.sp()?;
            let value = self.nstring()?;
            if fields.len() == 30
                || key.len() > 30
                || value.as_ref().is_some_and(|v| v.len() > 1024)
            {
                return syntax("ID field too long or too many");
            }
            let key = String::from_utf8(key).map_err(|_| Error::NotUtf8)?;
            let value = value
                .map(String::from_utf8)
                .transpose()
                .map_err(|_| Error::NotUtf8)?;
            fields.push((key, value));
            if !self.eat(b' ') {
                break;
            }
        }
        self.close()?;
        Ok(CommandKind::Id(Some(fields)))
    }

    fn select(&mut self) -> R<Select> {
        self.sp()?;
        let mut select = Select {
            mailbox: self.mailbox()?,
            ..Select::default()
        };
        if self.eat(b' ') {
            self.paren_list(|p| {
                match p.keyword()?.as_str() {
                    "CONDSTORE" => select.condstore = true,
                    "QRESYNC" => {
                        p.sp()?;
                        p.open()?;
                        let uid_validity = p.nz_number()?;
                        p.sp()?;
                        let modseq = p.modseq()?;
                        let mut q = QResync {
                            uid_validity,
                            modseq,
                            known_uids: None,
                            seq_match: None,
                        };
                        if p.eat(b' ') && p.peek() != Some(b'(') {
                            q.known_uids = Some(p.sequence_set()?);
                            p.eat(b' ');
                        }
                        if p.peek() == Some(b'(') {
                            p.open()?;
                            let seqs = p.sequence_set()?;
                            p.sp()?;
                            let uids = p.sequence_set()?;
                            p.close()?;
                            q.seq_match = Some((seqs, uids));
                        }
                        p.close()?;
                        select.qresync = Some(q);
                    }
                    _ => return syntax("Unknown SELECT parameter"),
                }
                Ok(())
            })?;
        }
        Ok(select)
    }

    fn create(&mut self) -> R<CommandKind> {
        self.sp()?;
        let mailbox = self.mailbox()?;
        let mut special_use = Vec::new();
        if self.eat(b' ') {
            self.paren_list(|p| {
                if p.keyword()? != "USE" {
                    return syntax("Unknown CREATE parameter");
                }
                p.sp()?;
                let uses = p.paren_list(|p| {
                    p.expect(b'\\', "Expected a special-use attribute")?;
                    let name = p.atom()?;
                    if name.len() > 64 {
                        return syntax("Special-use attribute too long");
                    }
                    Ok(format!("\\{}", String::from_utf8_lossy(name)))
                })?;
                special_use.extend(uses);
                Ok(())
            })?;
        }
        Ok(CommandKind::Create {
            mailbox,
            special_use,
        })
    }

    fn list(&mut self) -> R<List> {
        self.sp()?;
        let mut list = List::default();
        if self.peek() == Some(b'(') {
            self.open()?;
            if self.eat(b')') {
                self.depth -= 1;
            } else {
                loop {
                    match self.keyword()?.as_str() {
                        "SUBSCRIBED" => list.selection.subscribed = true,
                        "REMOTE" => list.selection.remote = true,
                        "RECURSIVEMATCH" => list.selection.recursive_match = true,
                        "SPECIAL-USE" => list.selection.special_use = true,
                        _ => return syntax("Unknown LIST selection option"),
                    }
                    if !self.eat(b' ') {
                        break;
                    }
                }
                self.close()?;
            }
            self.sp()?;
            let s = list.selection;
            if s.recursive_match && !(s.subscribed || s.special_use) {
                return syntax("RECURSIVEMATCH needs another selection option");
            }
        }
        list.reference = self.mailbox()?;
        self.sp()?;
        if self.peek() == Some(b'(') {
            list.patterns = self.paren_list(Self::list_mailbox)?;
        } else {
            list.patterns = vec![self.list_mailbox()?];
        }
        if self.eat(b' ') {
            if !self.eat_keyword("RETURN") {
                return syntax("Expected RETURN");
            }
            self.sp()?;
            self.open()?;
            if self.eat(b')') {
                self.depth -= 1;
            } else {
                loop {
                    match self.keyword()?.as_str() {
                        "SUBSCRIBED" => list.ret.subscribed = true,
                        "CHILDREN" => list.ret.children = true,
                        "SPECIAL-USE" => list.ret.special_use = true,
                        "STATUS" => {
                            self.sp()?;
                            list.ret.status = Some(self.paren_list(Self::status_item)?);
                        }
                        _ => return syntax("Unknown LIST return option"),
                    }
                    if !self.eat(b' ') {
                        break;
                    }
                }
                self.close()?;
            }
        }
        Ok(list)
    }

    fn status_item(&mut self) -> R<StatusItem> {
        let name = self.keyword()?;
        StatusItem::ALL
            .into_iter()
            .find(|i| i.as_str() == name)
            .ok_or(Error::Syntax("Unknown STATUS item"))
    }

    fn append(&mut self) -> R<CommandKind> {
        self.sp()?;
        let mailbox = self.mailbox()?;
        self.sp()?;
        let flags = if self.peek() == Some(b'(') {
            let flags = self.flag_list()?;
            self.sp()?;
            flags
        } else {
            Vec::new()
        };
        let date = if self.peek() == Some(b'"') {
            let text = self.quoted()?;
            self.sp()?;
            Some(parse_date_time(&text).ok_or(Error::Syntax("Invalid date-time"))?)
        } else {
            None
        };
        let (message, binary) = self.literal(true)?;
        Ok(CommandKind::Append(Append {
            mailbox,
            flags,
            date,
            message: message.to_vec(),
            binary,
        }))
    }

    fn copy_move(&mut self, uid: bool, is_move: bool) -> R<CommandKind> {
        self.sp()?;
        let set = self.sequence_set()?;
        self.sp()?;
        let mailbox = self.mailbox()?;
        Ok(if is_move {
            CommandKind::Move { uid, set, mailbox }
        } else {
            CommandKind::Copy { uid, set, mailbox }
        })
    }

    fn search(&mut self, uid: bool) -> R<Search> {
        self.sp()?;
        let mut ret = None;
        if self.eat_keyword("RETURN") {
            self.sp()?;
            self.open()?;
            let mut options = Vec::new();
            if self.eat(b')') {
                self.depth -= 1;
            } else {
                loop {
                    options.push(match self.keyword()?.as_str() {
                        "MIN" => SearchReturn::Min,
                        "MAX" => SearchReturn::Max,
                        "ALL" => SearchReturn::All,
                        "COUNT" => SearchReturn::Count,
                        "SAVE" => SearchReturn::Save,
                        _ => return syntax("Unknown SEARCH return option"),
                    });
                    if !self.eat(b' ') {
                        break;
                    }
                }
                self.close()?;
            }
            ret = Some(options);
            self.sp()?;
        }
        let mut charset = None;
        if self.eat_keyword("CHARSET") {
            self.sp()?;
            let name = self.astring()?;
            if name.len() > 64 {
                return syntax("Charset name too long");
            }
            charset = Some(String::from_utf8_lossy(&name).to_ascii_uppercase());
            self.sp()?;
        }
        let mut keys = vec![self.search_key()?];
        while self.eat(b' ') {
            keys.push(self.search_key()?);
        }
        let key = if keys.len() == 1 {
            keys.remove(0)
        } else {
            SearchKey::And(keys)
        };
        Ok(Search {
            uid,
            charset,
            ret,
            key,
        })
    }

    fn search_key(&mut self) -> R<SearchKey> {
        self.enter()?;
        let key = self.search_key_inner();
        self.depth -= 1;
        key
    }

    fn search_key_inner(&mut self) -> R<SearchKey> {
        match self.peek() {
            Some(b'(') => {
                let mut keys = self.paren_list(Self::search_key)?;
                return Ok(if keys.len() == 1 {
                    keys.remove(0)
                } else {
                    SearchKey::And(keys)
                });
            }
            Some(b'0'..=b'9' | b'*' | b'$') => {
                return Ok(SearchKey::Sequence(self.sequence_set()?));
            }
            _ => {}
        }
        let name = self.keyword()?;
        let key = match name.as_str() {
            "ALL" => SearchKey::All,
            "ANSWERED" => SearchKey::Answered,
            "DELETED" => SearchKey::Deleted,
            "DRAFT" => SearchKey::Draft,
            "FLAGGED" => SearchKey::Flagged,
            "SEEN" => SearchKey::Seen,
            "RECENT" => SearchKey::Recent,
            "NEW" => SearchKey::New,
            "OLD" => SearchKey::Old,
            "UNANSWERED" => SearchKey::Unanswered,
            "UNDELETED" => SearchKey::Undeleted,
            "UNDRAFT" => SearchKey::Undraft,
            "UNFLAGGED" => SearchKey::Unflagged,
            "UNSEEN" => SearchKey::Unseen,
            "KEYWORD" | "UNKEYWORD" => {
                self.sp()?;
                let flag = self.flag()?;
                if !matches!(flag, Flag::Keyword(_)) {
                    return syntax("KEYWORD takes a keyword");
                }
                if name == "KEYWORD" {
                    SearchKey::Keyword(flag)
                } else {
                    SearchKey::Unkeyword(flag)
                }
            }
            "BCC" | "CC" | "FROM" | "TO" | "SUBJECT" | "BODY" | "TEXT" => {
                self.sp()?;
                let text = self.astring()?;
                match name.as_str() {
                    "BCC" => SearchKey::Bcc(text),
                    "CC" => SearchKey::Cc(text),
                    "FROM" => SearchKey::From(text),
                    "TO" => SearchKey::To(text),
                    "SUBJECT" => SearchKey::Subject(text),
                    "BODY" => SearchKey::Body(text),
                    _ => SearchKey::Text(text),
                }
            }
            "HEADER" => {
                self.sp()?;
                let field = self.utf8_astring()?;
                self.sp()?;
                SearchKey::Header(field, self.astring()?)
            }
            "BEFORE" | "ON" | "SINCE" | "SENTBEFORE" | "SENTON" | "SENTSINCE" => {
                self.sp()?;
                let date = self.date()?;
                match name.as_str() {
                    "BEFORE" => SearchKey::Before(date),
                    "ON" => SearchKey::On(date),
                    "SINCE" => SearchKey::Since(date),
                    "SENTBEFORE" => SearchKey::SentBefore(date),
                    "SENTON" => SearchKey::SentOn(date),
                    _ => SearchKey::SentSince(date),
                }
            }
            "LARGER" | "SMALLER" => {
                self.sp()?;
                let n = self.number64()?;
                if name == "LARGER" {
                    SearchKey::Larger(n)
                } else {
                    SearchKey::Smaller(n)
                }
            }
            "UID" => {
                self.sp()?;
                SearchKey::Uid(self.sequence_set()?)
            }
            "NOT" => {
                self.sp()?;
                SearchKey::Not(Box::new(self.search_key()?))
            }
            "OR" => {
                self.sp()?;
                let a = self.search_key()?;
                self.sp()?;
                let b = self.search_key()?;
                SearchKey::Or(Box::new(a), Box::new(b))
            }
            "MODSEQ" => {
                self.sp()?;
                let mut entry = None;
                if self.peek() == Some(b'"') {
                    let name = self.quoted()?;
                    self.sp()?;
                    let kind = self.keyword()?;
                    if !matches!(kind.as_str(), "PRIV" | "SHARED" | "ALL") {
                        return syntax("Unknown MODSEQ entry type");
                    }
                    self.sp()?;
                    entry = Some((name, kind));
                }
                SearchKey::ModSeq {
                    entry,
                    modseq: self.number64()?,
                }
            }
            _ => return syntax("Unknown search key"),
        };
        Ok(key)
    }

    fn fetch(&mut self, uid: bool) -> R<Fetch> {
        self.sp()?;
        let set = self.sequence_set()?;
        self.sp()?;
        let mut attributes = if self.peek() == Some(b'(') {
            self.paren_list(Self::fetch_attribute)?
        } else if self.eat_keyword("ALL") {
            use FetchAttribute::*;
            vec![Flags, InternalDate, Rfc822Size, Envelope]
        } else if self.eat_keyword("FAST") {
            use FetchAttribute::*;
            vec![Flags, InternalDate, Rfc822Size]
        } else if self.eat_keyword("FULL") {
            use FetchAttribute::*;
            vec![Flags, InternalDate, Rfc822Size, Envelope, Body]
        } else {
            vec![self.fetch_attribute()?]
        };
        let mut fetch = Fetch {
            uid,
            set,
            attributes: Vec::new(),
            changed_since: None,
            vanished: false,
        };
        if self.eat(b' ') {
            self.paren_list(|p| {
                match p.keyword()?.as_str() {
                    "CHANGEDSINCE" => {
                        p.sp()?;
                        fetch.changed_since = Some(p.modseq()?);
                    }
                    "VANISHED" => fetch.vanished = true,
                    _ => return syntax("Unknown FETCH modifier"),
                }
                Ok(())
            })?;
            if fetch.vanished && (!uid || fetch.changed_since.is_none()) {
                return syntax("VANISHED needs UID FETCH and CHANGEDSINCE");
            }
        }
        if uid && !attributes.contains(&FetchAttribute::Uid) {
            attributes.push(FetchAttribute::Uid);
        }
        if fetch.changed_since.is_some() && !attributes.contains(&FetchAttribute::ModSeq) {
            attributes.push(FetchAttribute::ModSeq);
        }
        fetch.attributes = attributes;
        Ok(fetch)
    }

    fn fetch_attribute(&mut self) -> R<FetchAttribute> {
        let name = self.take_while(|b| b.is_ascii_alphanumeric() || b == b'.');
        if name.len() > 16 {
            return syntax("Unknown fetch attribute");
        }
        let name = String::from_utf8_lossy(name).to_ascii_uppercase();
        let attribute = match name.as_str() {
            "ENVELOPE" => FetchAttribute::Envelope,
            "FLAGS" => FetchAttribute::Flags,
            "INTERNALDATE" => FetchAttribute::InternalDate,
            "RFC822" => FetchAttribute::Rfc822,
            "RFC822.HEADER" => FetchAttribute::Rfc822Header,
            "RFC822.TEXT" => FetchAttribute::Rfc822Text,
            "RFC822.SIZE" => FetchAttribute::Rfc822Size,
            "BODYSTRUCTURE" => FetchAttribute::BodyStructure,
            "UID" => FetchAttribute::Uid,
            "MODSEQ" => FetchAttribute::ModSeq,
            "BODY" if self.peek() != Some(b'[') => FetchAttribute::Body,
            "BODY" | "BODY.PEEK" => {
                let section = self.section()?;
                FetchAttribute::BodySection {
                    section,
                    partial: self.partial()?,
                    peek: name == "BODY.PEEK",
                }
            }
            "BINARY" | "BINARY.PEEK" | "BINARY.SIZE" => {
                self.expect(b'[', "Expected [")?;
                let part = if self.peek() == Some(b']') {
                    Vec::new()
                } else {
                    self.part()?
                };
                self.expect(b']', "Expected ]")?;
                if name == "BINARY.SIZE" {
                    FetchAttribute::BinarySize(part)
                } else {
                    FetchAttribute::Binary {
                        part,
                        partial: self.partial()?,
                        peek: name == "BINARY.PEEK",
                    }
                }
            }
            _ => return syntax("Unknown fetch attribute"),
        };
        Ok(attribute)
    }

    fn part(&mut self) -> R<Vec<u32>> {
        let mut part = vec![self.nz_number()?];
        while self.peek() == Some(b'.')
            && self.input.get(self.pos + 1).is_some_and(u8::is_ascii_digit)
        {
            self.pos += 1;
            if part.len() == 64 {
                return Err(Error::TooDeep);
            }
            part.push(self.nz_number()?);
        }
        Ok(part)
    }

    /// `[section-spec]`.
    fn section(&mut self) -> R<Section> {
        self.expect(b'[', "Expected [")?;
        let mut section = Section::default();
        if self.peek().is_some_and(|b| b.is_ascii_digit()) {
            section.part = self.part()?;
            if !self.eat(b'.') {
                self.expect(b']', "Expected ]")?;
                return Ok(section);
            }
        }
        if section.part.is_empty() && self.eat(b']') {
            return Ok(section);
        }
        let word = self.take_while(|b| b.is_ascii_alphabetic() || b == b'.');
        let word = String::from_utf8_lossy(word).to_ascii_uppercase();
        section.text = match word.as_str() {
            "HEADER" => SectionText::Header,
            "TEXT" => SectionText::Text,
            "MIME" if !section.part.is_empty() => SectionText::Mime,
            "HEADER.FIELDS" | "HEADER.FIELDS.NOT" => {
                self.sp()?;
                let names = self.paren_list(|p| {
                    let name = p.utf8_astring()?;
                    if name.is_empty() || name.len() > 256 || name.contains(':') {
                        return syntax("Invalid header field name");
                    }
                    Ok(name)
                })?;
                SectionText::HeaderFields {
                    names,
                    not: word == "HEADER.FIELDS.NOT",
                }
            }
            _ => return syntax("Invalid section"),
        };
        self.expect(b']', "Expected ]")?;
        Ok(section)
    }

    /// `<origin.count>`, optional.
    fn partial(&mut self) -> R<Option<(u32, u32)>> {
        if !self.eat(b'<') {
            return Ok(None);
        }
        let origin = self.number()?;
        self.expect(b'.', "Expected . in partial")?;
        let count = self.nz_number()?;
        self.expect(b'>', "Expected >")?;
        Ok(Some((origin, count)))
    }

    fn store(&mut self, uid: bool) -> R<Store> {
        self.sp()?;
        let set = self.sequence_set()?;
        self.sp()?;
        let mut unchanged_since = None;
        if self.peek() == Some(b'(') {
            self.open()?;
            if !self.eat_keyword("UNCHANGEDSINCE") {
                return syntax("Unknown STORE modifier");
            }
            self.sp()?;
            unchanged_since = Some(self.modseq()?);
            self.close()?;
            self.sp()?;
        }
        let mode = if self.eat(b'+') {
            StoreMode::Add
        } else if self.eat(b'-') {
            StoreMode::Remove
        } else {
            StoreMode::Replace
        };
        let silent = if self.eat_keyword("FLAGS") {
            false
        } else if self.eat_keyword("FLAGS.SILENT") {
            true
        } else {
            return syntax("Expected FLAGS, +FLAGS or -FLAGS");
        };
        self.sp()?;
        let flags = if self.peek() == Some(b'(') {
            self.flag_list()?
        } else {
            let mut flags = vec![self.settable_flag()?];
            while self.eat(b' ') {
                flags.push(self.settable_flag()?);
            }
            flags
        };
        Ok(Store {
            uid,
            set,
            unchanged_since,
            mode,
            silent,
            flags,
        })
    }
}
