//! The IMAP client of `stoa bench mail --access imap` (issue 52, item 5): the
//! POP3 client's three conversations ([`crate::pop_client`]) over IMAP, each
//! command standing where its POP3 equivalent stood, so the QoS arithmetic is the
//! same ([`crate::access`] names the rows):
//!
//! - [`imap_session`], one mailbox check: connect and greeting, `LOGIN`,
//!   `SELECT INBOX` (the `EXISTS` count, as `STAT`'s), then for each message
//!   `FETCH i (BODY.PEEK[])` (as `RETR i`: the step ends at the first line of its
//!   data, the transfer at the tagged `OK`) and `STORE i +FLAGS.SILENT
//!   (\Deleted)` (as `DELE i`), then `EXPUNGE` (when there was mail) and
//!   `LOGOUT`. A check fetches one message per command, as POP3 retrieves one
//!   per `RETR`, so each transfer is judged against its own message's
//!   size-adjusted cutoff.
//! - [`imap_probe_poll`], a delivery probe's poll: `FETCH i (BODY.PEEK[HEADER])`
//!   of each message (as `TOP i 0`) until one carries the tag, then `STORE` and
//!   `EXPUNGE` of that one.
//! - [`imap_stat`], the store check: `EXAMINE INBOX` and the sum of `FETCH 1:n
//!   (RFC822.SIZE)`.
//!
//! Failures are classified as POP3's: a refused connection is
//! [`Failure::Connect`], a `NO`, `BAD`, `BYE` or anything unexpected (a failed
//! login included) [`Failure::Protocol`], silence [`Failure::Timeout`], a closed
//! connection [`Failure::Closed`].
//!
//! # What it reads, and its bounds
//!
//! Every server byte is hostile. Responses are read line by line through the
//! shared bounded reader (lines of at most `MAX_LINE`, each read within the
//! reply timeout); a line ending in a literal `{n}` (or `{n+}`) is followed by
//! exactly `n` octets, at most [`MAX_LITERAL`], streamed and never held (a probe
//! keeps the first 8 KiB), then by the rest of the response,
//! with at most [`MAX_LITERALS`] literals in one response and
//! [`MAX_UNTAGGED`] untagged responses before a command's tagged one. Only what
//! the checks need is parsed: the tagged status, `EXISTS`, a `FETCH`'s literal
//! and `RFC822.SIZE`; everything else untagged is skipped. Each line is told
//! apart (greeting, tagged status, untagged data, literal at its end) by
//! `stoa_imap_proto::reply`, the client side the IMAP proxy reads with too; this
//! is a load generator's conversation, not an IMAP client library.

use std::time::Duration;

use stoa_imap_proto::reply::{self, Reply, Status};
use tokio::io::AsyncWriteExt;
use tokio::time::{Instant, timeout};

use crate::message::Tag;
use crate::pace::Pace;
use crate::pop_client::{PopPlan, ProbeResult};
use crate::smtp_client::{Line, MAX_LINE, StepError, detail, ms_since, step};
use crate::tally::{Failure, Function, SessionRecord, Sized};

/// How much of a message a probe keeps to look for its tag, as POP3's probe.
const PROBE_HEAD: usize = 8 * 1024;
/// How long a best-effort `LOGOUT` after a failure may take.
const LOGOUT_GRACE: Duration = Duration::from_secs(1);
/// The largest literal accepted: the workload's largest message is about
/// 2.7 MB (`mail2001.md` §1.6); a server announcing more is refused rather
/// than read for minutes.
pub const MAX_LITERAL: u64 = 64 * 1024 * 1024;
/// Most literals in one response: a `FETCH` of one body part has one.
pub const MAX_LITERALS: usize = 8;
/// Most untagged responses before a command's tagged one: `SELECT` sends a
/// dozen, the store check's `FETCH 1:n (RFC822.SIZE)` one per message (a
/// steady-state mailbox holds tens).
pub const MAX_UNTAGGED: usize = 100_000;

/// One response of the server to a command.
enum Response {
    /// `* …`: the line without `* `, and the literal announced at its end.
    Untagged(Vec<u8>, Option<u64>),
    /// The command's tagged status: whether `OK`, and the line for a detail.
    Tagged(bool, String),
}

/// An open IMAP connection and its next tag.
struct Client {
    line: Line,
    next_tag: u32,
}

impl Client {
    /// Connects (the greeting is read separately, by [`Client::greeting`]).
    async fn open(plan: &PopPlan, pace: Pace) -> Result<Client, StepError> {
        Ok(Client {
            line: Line::open(plan.addr, pace, plan.reply_timeout).await?,
            next_tag: 1,
        })
    }

    /// Reads the greeting, which must be `* OK`.
    async fn greeting(&mut self) -> Result<(), StepError> {
        let line = self.line.reader.line(MAX_LINE).await?;
        let ok = matches!(
            reply::parse_line(line),
            Ok(Reply::Status {
                tag: None,
                status: Status::Ok,
                ..
            })
        );
        if ok {
            Ok(())
        } else {
            Err(StepError::protocol(detail(line)))
        }
    }

    /// Sends `command` with a fresh tag; returns the tag.
    async fn send(&mut self, command: &str) -> Result<String, StepError> {
        let tag = format!("a{}", self.next_tag);
        self.next_tag += 1;
        self.line.send(&format!("{tag} {command}")).await?;
        Ok(tag)
    }

    /// Reads one response line: untagged (its literal still to be read), or
    /// `tag`'s status; anything else is a protocol error.
    async fn next(&mut self, tag: &str) -> Result<Response, StepError> {
        let line = self.line.reader.line(MAX_LINE).await?;
        if let Some(rest) = line.strip_prefix(b"* ") {
            let literal = literal_at_end(rest)?;
            return Ok(Response::Untagged(rest.to_vec(), literal));
        }
        match reply::parse_line(line) {
            Ok(Reply::Status {
                tag: Some(t),
                status,
                ..
            }) if t == tag => Ok(Response::Tagged(status == Status::Ok, detail(line))),
            _ => Err(StepError::protocol(detail(line))),
        }
    }

    /// Reads a literal of `n` octets, counting them into `count` and keeping
    /// the first `keep` in `head`.
    async fn literal(
        &mut self,
        n: u64,
        count: &mut u64,
        head: &mut Vec<u8>,
        keep: usize,
    ) -> Result<(), StepError> {
        let reader = &mut self.line.reader;
        let mut left = n;
        while left > 0 {
            if reader.buffered().is_empty() {
                reader.read_more().await?;
            }
            let data = reader.buffered();
            let take = data.len().min(usize::try_from(left).unwrap_or(usize::MAX));
            let room = keep.saturating_sub(head.len()).min(take);
            head.extend_from_slice(&data[..room]);
            reader.consume(take);
            left -= take as u64;
            *count += take as u64;
        }
        Ok(())
    }

    /// Reads the rest of a response whose line announced `literal`: each
    /// literal and the line that follows it, until a line announces none.
    async fn skip_rest(&mut self, mut literal: Option<u64>) -> Result<(), StepError> {
        let mut literals = 0;
        while let Some(n) = literal {
            literals += 1;
            if literals > MAX_LITERALS {
                return Err(StepError::protocol(format!(
                    "more than {MAX_LITERALS} literals in one response"
                )));
            }
            self.literal(n, &mut 0, &mut Vec::new(), 0).await?;
            let line = self.line.reader.line(MAX_LINE).await?;
            literal = literal_at_end(line)?;
        }
        Ok(())
    }

    /// Reads the responses to the command tagged `tag` up to its tagged
    /// status, handing the first line of each untagged one to `untagged`;
    /// `NO`, `BAD` or an untagged `BYE` (unless `bye_ok`, for `LOGOUT`) is a
    /// protocol error.
    async fn finish(
        &mut self,
        tag: &str,
        bye_ok: bool,
        mut untagged: impl FnMut(&[u8]),
    ) -> Result<String, StepError> {
        for _ in 0..=MAX_UNTAGGED {
            match self.next(tag).await? {
                Response::Tagged(true, line) => return Ok(line),
                Response::Tagged(false, line) => return Err(StepError::protocol(line)),
                Response::Untagged(line, _) if !bye_ok && status_is(&line, b"BYE") => {
                    return Err(StepError::protocol(format!("* {}", detail(&line))));
                }
                Response::Untagged(line, literal) => {
                    untagged(&line);
                    self.skip_rest(literal).await?;
                }
            }
        }
        Err(too_many())
    }

    /// Sends `command` and reads its responses up to a tagged `OK`.
    async fn command(
        &mut self,
        command: &str,
        untagged: impl FnMut(&[u8]),
    ) -> Result<String, StepError> {
        let tag = self.send(command).await?;
        self.finish(&tag, false, untagged).await
    }

    /// `LOGIN` with the plan's user and password as quoted strings.
    async fn login(&mut self, plan: &PopPlan) -> Result<(), StepError> {
        let command = format!("LOGIN {} {}", quoted(&plan.user)?, quoted(&plan.password)?);
        self.command(&command, |_| {}).await.map(drop)
    }

    /// `SELECT INBOX` (or `EXAMINE INBOX`, read-only): its `EXISTS` count.
    async fn open_inbox(&mut self, verb: &str) -> Result<u32, StepError> {
        let mut exists = None;
        self.command(&format!("{verb} INBOX"), |line| {
            if let Some(n) = number_before(line, b"EXISTS") {
                exists = Some(n);
            }
        })
        .await?;
        exists.ok_or_else(|| StepError::protocol(format!("{verb} INBOX: no EXISTS")))
    }

    /// `FETCH i (item)` up to the first line of message `i`'s data, which must
    /// end in a literal: the tag and the literal's length. Other untagged
    /// responses before it are skipped.
    async fn fetch_start(&mut self, i: u32, item: &str) -> Result<(String, u64), StepError> {
        let tag = self.send(&format!("FETCH {i} ({item})")).await?;
        for _ in 0..=MAX_UNTAGGED {
            match self.next(&tag).await? {
                Response::Untagged(line, literal) if number_before(&line, b"FETCH") == Some(i) => {
                    let Some(n) = literal else {
                        return Err(StepError::protocol(format!(
                            "* {}: the message data is not a literal",
                            detail(&line)
                        )));
                    };
                    return Ok((tag, n));
                }
                Response::Untagged(line, _) if status_is(&line, b"BYE") => {
                    return Err(StepError::protocol(format!("* {}", detail(&line))));
                }
                Response::Untagged(_, literal) => self.skip_rest(literal).await?,
                Response::Tagged(_, line) => {
                    return Err(StepError::protocol(format!("{line} (no message {i} data)")));
                }
            }
        }
        Err(too_many())
    }

    /// After [`Client::fetch_start`]: the message's `n` octets (counted into
    /// `count`, the first `keep` kept in `head`), the rest of its response and
    /// the tagged `OK`.
    async fn fetch_rest(
        &mut self,
        tag: &str,
        n: u64,
        (count, head, keep): (&mut u64, &mut Vec<u8>, usize),
    ) -> Result<(), StepError> {
        self.literal(n, count, head, keep).await?;
        let line = self.line.reader.line(MAX_LINE).await?;
        let literal = literal_at_end(line)?;
        self.skip_rest(literal).await?;
        self.finish(tag, false, |_| {}).await.map(drop)
    }

    /// `STORE i +FLAGS.SILENT (\Deleted)`.
    async fn store_deleted(&mut self, i: u32) -> Result<(), StepError> {
        let command = format!("STORE {i} +FLAGS.SILENT (\\Deleted)");
        self.command(&command, |_| {}).await.map(drop)
    }

    /// `EXPUNGE`.
    async fn expunge(&mut self) -> Result<(), StepError> {
        self.command("EXPUNGE", |_| {}).await.map(drop)
    }

    /// `LOGOUT`: `* BYE`, then the tagged `OK` (a server that closes right
    /// after its `BYE` is forgiven).
    async fn logout(&mut self) -> Result<(), StepError> {
        let tag = self.send("LOGOUT").await?;
        let mut bye = false;
        match self
            .finish(&tag, true, |line| bye |= status_is(line, b"BYE"))
            .await
        {
            Err(e) if bye && e.failure == Failure::Closed => Ok(()),
            other => other.map(drop),
        }
    }

    /// After a protocol failure: `LOGOUT`, briefly waiting for the reply,
    /// ignoring any error.
    async fn logout_best_effort(&mut self) {
        let tag = format!("a{}", self.next_tag);
        let _ = timeout(LOGOUT_GRACE, async {
            let command = format!("{tag} LOGOUT\r\n");
            let _ = self.line.writer.write_all(command.as_bytes()).await;
            let _ = self.finish(&tag, true, |_| {}).await;
        })
        .await;
    }
}

/// The error for a server that never sends the tagged status.
fn too_many() -> StepError {
    StepError::protocol(format!(
        "more than {MAX_UNTAGGED} untagged responses to one command"
    ))
}

/// Whether `text` starts with the status word `word` (any case), alone or
/// followed by a space.
fn status_is(text: &[u8], word: &[u8]) -> bool {
    text.len() >= word.len()
        && text[..word.len()].eq_ignore_ascii_case(word)
        && matches!(text.get(word.len()), None | Some(b' '))
}

/// The number `n` of an untagged `n WORD…` line (`3 EXISTS`, `2 FETCH (…`).
fn number_before(line: &[u8], word: &[u8]) -> Option<u32> {
    let space = line.iter().position(|&b| b == b' ')?;
    let (digits, rest) = (&line[..space], &line[space + 1..]);
    if digits.is_empty() || digits.len() > 10 || !status_is(rest, word) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// The literal a response line announces at its end (`{123}` or `{123+}`), if
/// any; one longer than [`MAX_LITERAL`] is a protocol error.
fn literal_at_end(line: &[u8]) -> Result<Option<u64>, StepError> {
    match reply::literal_at_end(line) {
        Some(n) if n > MAX_LITERAL => Err(StepError::protocol(format!(
            "a literal of {n} octets, more than {MAX_LITERAL}"
        ))),
        literal => Ok(literal),
    }
}

/// The sum of the `RFC822.SIZE` of a `n FETCH (RFC822.SIZE s)` line, if any.
fn rfc822_size(line: &[u8]) -> Option<u64> {
    const ITEM: &[u8] = b"RFC822.SIZE ";
    let at = line
        .windows(ITEM.len())
        .position(|w| w.eq_ignore_ascii_case(ITEM))?;
    let rest = &line[at + ITEM.len()..];
    let end = rest
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(rest.len());
    std::str::from_utf8(&rest[..end.min(20)]).ok()?.parse().ok()
}

/// `text` as an IMAP quoted string; one that cannot be quoted (CR, LF, NUL or
/// non-ASCII) is refused rather than sent as a literal: the harness's
/// accounts never need one.
fn quoted(text: &str) -> Result<String, StepError> {
    stoa_imap_proto::string::quoted(text.as_bytes())
        .and_then(|q| String::from_utf8(q).ok())
        .ok_or_else(|| {
            StepError::protocol("a login or password IMAP cannot take as a quoted string")
        })
}

/// One check: connect and greeting ([`Function::PopConnect`], "IMAP
/// Connect"), `LOGIN` ([`Function::PopPassword`]), `SELECT INBOX`
/// ([`Function::PopStatus`]), then for each message `FETCH` (the
/// [`Function::PopRetrieve`] step ends at the first line of its data; the
/// [`Sized::RetrieveResponse`] transfer runs from the command to the tagged
/// `OK` and counts the literal's octets) and `STORE \Deleted`
/// ([`Function::PopDelete`]), then `EXPUNGE` ([`Function::Expunge`], when
/// there was mail) and `LOGOUT` ([`Function::PopQuit`]).
///
/// Failures and the deliberate drop ([`PopPlan::drop`], at that `FETCH`) as in
/// [`crate::pop_client::pop_session`]: a dropped session never sends `EXPUNGE`,
/// so the server keeps every message (flagged `\Deleted` or not).
pub async fn imap_session(plan: &PopPlan) -> SessionRecord {
    let mut rec = SessionRecord::default();
    let start = Instant::now();
    let mut client = match Client::open(plan, plan.pace).await {
        Ok(client) => client,
        Err(e) => {
            rec.step(Function::PopConnect, ms_since(start), Err(e.failure));
            return rec;
        }
    };
    if let Err(e) = check(&mut client, plan, &mut rec, start).await
        && e.failure == Failure::Protocol
    {
        client.logout_best_effort().await;
    }
    rec
}

/// The check after the TCP connect, which began at `start`.
async fn check(
    c: &mut Client,
    plan: &PopPlan,
    rec: &mut SessionRecord,
    start: Instant,
) -> Result<(), StepError> {
    let greeting = c.greeting().await;
    let outcome = greeting.as_ref().map(|_| ()).map_err(|e| e.failure);
    rec.step(Function::PopConnect, ms_since(start), outcome);
    greeting?;
    step(rec, Function::PopPassword, c.login(plan)).await?;
    let n = step(rec, Function::PopStatus, c.open_inbox("SELECT")).await?;
    for i in 1..=n {
        match plan.drop {
            Some(d) if d.retrieve == i && d.mid_body => {
                let start = Instant::now();
                step(rec, Function::PopRetrieve, c.fetch_start(i, "BODY.PEEK[]")).await?;
                rec.transfer(Sized::RetrieveResponse, ms_since(start), 0, false);
                rec.dropped = true;
                return Ok(());
            }
            Some(d) if d.retrieve == i => {
                fetch(c, rec, i).await?;
                rec.dropped = true;
                return Ok(());
            }
            _ => {}
        }
        fetch(c, rec, i).await?;
        step(rec, Function::PopDelete, c.store_deleted(i)).await?;
    }
    if n > 0 {
        step(rec, Function::Expunge, c.expunge()).await?;
    }
    step(rec, Function::PopQuit, c.logout()).await?;
    rec.completed = true;
    Ok(())
}

/// `FETCH i (BODY.PEEK[])`: the step to the first line of its data, then the
/// whole response as a transfer.
async fn fetch(c: &mut Client, rec: &mut SessionRecord, i: u32) -> Result<(), StepError> {
    let start = Instant::now();
    let (tag, n) = step(rec, Function::PopRetrieve, c.fetch_start(i, "BODY.PEEK[]")).await?;
    let mut octets = 0;
    let body = c
        .fetch_rest(&tag, n, (&mut octets, &mut Vec::new(), 0))
        .await;
    let ms = ms_since(start);
    rec.transfer(Sized::RetrieveResponse, ms, octets, body.is_ok());
    if let Err(e) = &body {
        rec.step(Function::PopRetrieve, ms, Err(e.failure));
    }
    body
}

/// A delivery probe's poll over IMAP, at full speed and not recorded: log in,
/// `SELECT INBOX`, then `FETCH i (BODY.PEEK[HEADER])` of each message until
/// one carries exactly `tag`; `STORE \Deleted` and `EXPUNGE` that one message,
/// and `LOGOUT`.
pub async fn imap_probe_poll(plan: &PopPlan, tag: &Tag) -> ProbeResult {
    let mut c = match Client::open(plan, Pace::full()).await {
        Ok(c) => c,
        Err(e) => return ProbeResult::Failed(e.failure),
    };
    match poll(&mut c, plan, tag).await {
        Ok(true) => ProbeResult::Found,
        Ok(false) => ProbeResult::NotFound,
        Err(e) => {
            if e.failure == Failure::Protocol {
                c.logout_best_effort().await;
            }
            ProbeResult::Failed(e.failure)
        }
    }
}

/// [`imap_probe_poll`]'s conversation: whether the probe was found (and
/// deleted).
async fn poll(c: &mut Client, plan: &PopPlan, tag: &Tag) -> Result<bool, StepError> {
    c.greeting().await?;
    c.login(plan).await?;
    let n = c.open_inbox("SELECT").await?;
    let mut found = None;
    for i in 1..=n {
        let (command, size) = c.fetch_start(i, "BODY.PEEK[HEADER]").await?;
        let mut head = Vec::new();
        c.fetch_rest(&command, size, (&mut 0, &mut head, PROBE_HEAD))
            .await?;
        if Tag::find(&head) == Some(*tag) {
            found = Some(i);
            break;
        }
    }
    if let Some(i) = found {
        c.store_deleted(i).await?;
        c.expunge().await?;
    }
    c.logout().await?;
    Ok(found.is_some())
}

/// For the store check: log in, `EXAMINE INBOX` (read-only), the sum of
/// `FETCH 1:n (RFC822.SIZE)`, `LOGOUT`; the mailbox's messages and octets, or
/// the failure and the reply or error.
pub async fn imap_stat(plan: &PopPlan) -> Result<(u32, u64), (Failure, String)> {
    let mut c = Client::open(plan, Pace::full())
        .await
        .map_err(|e| (e.failure, e.detail))?;
    let result = async {
        c.greeting().await?;
        c.login(plan).await?;
        let n = c.open_inbox("EXAMINE").await?;
        let mut octets = 0u64;
        if n > 0 {
            c.command(&format!("FETCH 1:{n} (RFC822.SIZE)"), |line| {
                if number_before(line, b"FETCH").is_some() {
                    octets = octets.saturating_add(rfc822_size(line).unwrap_or(0));
                }
            })
            .await?;
        }
        c.logout().await?;
        Ok::<_, StepError>((n, octets))
    }
    .await;
    if let Err(e) = &result
        && e.failure == Failure::Protocol
    {
        c.logout_best_effort().await;
    }
    result.map_err(|e| (e.failure, e.detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_at_the_end_of_a_line() {
        assert_eq!(
            literal_at_end(b"1 FETCH (BODY[] {310}").ok(),
            Some(Some(310))
        );
        assert_eq!(literal_at_end(b"1 FETCH (BODY[] {0}").ok(), Some(Some(0)));
        assert_eq!(
            literal_at_end(b"1 FETCH (BODY[] {12+}").ok(),
            Some(Some(12))
        );
        assert_eq!(literal_at_end(b"OK done").ok(), Some(None));
        assert_eq!(literal_at_end(b"OK {x}").ok(), Some(None));
        assert_eq!(literal_at_end(b"OK {}").ok(), Some(None));
        assert_eq!(literal_at_end(b"}").ok(), Some(None));
        let huge = format!("1 FETCH (BODY[] {{{}}}", MAX_LITERAL + 1);
        assert!(literal_at_end(huge.as_bytes()).is_err());
        assert!(literal_at_end(b"1 FETCH (BODY[] {99999999999999999999}").is_err());
    }

    #[test]
    fn untagged_numbers_and_sizes() {
        assert_eq!(number_before(b"3 EXISTS", b"EXISTS"), Some(3));
        assert_eq!(number_before(b"3 exists", b"EXISTS"), Some(3));
        assert_eq!(number_before(b"0 RECENT", b"EXISTS"), None);
        assert_eq!(number_before(b"2 FETCH (BODY[] {4}", b"FETCH"), Some(2));
        assert_eq!(number_before(b"OK [UIDNEXT 4]", b"EXISTS"), None);
        assert_eq!(number_before(b"99999999999 EXISTS", b"EXISTS"), None);
        assert_eq!(rfc822_size(b"1 FETCH (RFC822.SIZE 2300)"), Some(2300));
        assert_eq!(rfc822_size(b"1 FETCH (UID 4 rfc822.size 7)"), Some(7));
        assert_eq!(rfc822_size(b"1 FETCH (UID 4)"), None);
        assert!(status_is(b"OK [CAPABILITY IMAP4rev1] ready", b"OK"));
        assert!(status_is(b"bye", b"BYE"));
        assert!(!status_is(b"OKAY", b"OK"));
    }

    #[test]
    fn quoting() {
        assert_eq!(
            quoted("user7@stoa.test").ok(),
            Some("\"user7@stoa.test\"".into())
        );
        assert_eq!(quoted("a\"b\\c").ok(), Some("\"a\\\"b\\\\c\"".into()));
        assert!(quoted("a\r\nb").is_err());
        assert!(quoted("pässword").is_err());
    }
}
