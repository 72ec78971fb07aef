//! The POP3 client (`mail2001.md` §1.5, §2.2, §4.2): one mailbox check
//! ([`pop_session`]: `USER`, `PASS`, `STAT`, `RETR` and `DELE` of every message,
//! `QUIT`) timed into a [`SessionRecord`]; the delivery-time probe's poll
//! ([`probe_poll`]); and `STAT` for the store check ([`pop_stat`]).
//!
//! Message bodies are streamed: a `RETR` of a 2.7 MB message only counts its
//! octets (after un-dot-stuffing) and keeps at most the first few KiB when a
//! probe needs to look at the header section.

use std::net::SocketAddr;
use std::time::Duration;

use stoa_mail2001::disconnect::PopDrop;
use tokio::io::AsyncWriteExt;
use tokio::time::{Instant, timeout};

use crate::message::Tag;
use crate::pace::{Pace, read_dot_body};
use crate::smtp_client::{Line, MAX_LINE, StepError, detail, ms_since, step};
use crate::tally::{Failure, Function, SessionRecord, Sized};

/// How much of a message a probe keeps to look for its tag: the generator's
/// head is about 250 bytes, a relayed message adds a few `Received:` fields.
const PROBE_HEAD: usize = 8 * 1024;
/// How long a best-effort `QUIT` after a failure may take.
const QUIT_GRACE: Duration = Duration::from_secs(1);

/// One POP3 client to run.
#[derive(Debug, Clone)]
pub struct PopPlan {
    /// The server.
    pub addr: SocketAddr,
    /// The login, e.g. `user7@stoa.test`.
    pub user: String,
    /// The password.
    pub password: String,
    /// Modem or full speed.
    pub pace: Pace,
    /// The longest wait for a reply (60 s in runs, §2.4).
    pub reply_timeout: Duration,
    /// Where [`pop_session`] drops the connection on purpose, as the kit's
    /// client did (`stoa_mail2001::disconnect`): at that `RETR`, right after
    /// its `+OK` (the body still on its way) or after the body, before `DELE`.
    /// No `DELE` or `QUIT` follows, so the server must keep every message.
    /// `None`: never (probes, the store check).
    pub drop: Option<PopDrop>,
}

/// What a delivery probe's poll found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeResult {
    /// The probe message was there; it has been deleted.
    Found,
    /// The mailbox does not hold the probe message (yet).
    NotFound,
    /// The poll failed: [`Failure::Connect`] when the connection could not be
    /// made, else the kind of the failed step.
    Failed(Failure),
}

/// An open POP3 connection.
struct Client {
    line: Line,
}

impl Client {
    /// Connects (the greeting is read separately, by [`Client::status`]).
    async fn open(addr: SocketAddr, pace: Pace, limit: Duration) -> Result<Client, StepError> {
        Ok(Client {
            line: Line::open(addr, pace, limit).await?,
        })
    }

    /// Sends one command line (CRLF added).
    async fn send(&mut self, command: &str) -> Result<(), StepError> {
        self.line.send(command).await
    }

    /// Reads a status line: `Ok(Ok(text))` for `+OK text`, `Ok(Err(line))` for
    /// `-ERR`, a protocol error for anything else.
    async fn status(&mut self) -> Result<Result<String, String>, StepError> {
        let line = self.line.reader.line(MAX_LINE).await?;
        if line.starts_with(b"+OK") {
            Ok(Ok(detail(&line[3..]).trim().to_owned()))
        } else if line.starts_with(b"-ERR") {
            Ok(Err(detail(line)))
        } else {
            Err(StepError::protocol(detail(line)))
        }
    }

    /// Reads a status line that must be `+OK`; returns its text.
    async fn ok(&mut self) -> Result<String, StepError> {
        self.status().await?.map_err(StepError::protocol)
    }

    /// Sends `command` and expects `+OK`.
    async fn command(&mut self, command: &str) -> Result<String, StepError> {
        self.send(command).await?;
        self.ok().await
    }

    /// Reads a multi-line body to its terminator; keeps its first `keep` octets
    /// in `head`; `count` is the octets received so far.
    async fn body(
        &mut self,
        count: &mut u64,
        head: &mut Vec<u8>,
        keep: usize,
    ) -> Result<(), StepError> {
        read_dot_body(&mut self.line.reader, count, |data| {
            let room = keep.saturating_sub(head.len()).min(data.len());
            head.extend_from_slice(&data[..room]);
        })
        .await
        .map_err(StepError::from)
    }

    /// `USER` and `PASS`.
    async fn login(&mut self, plan: &PopPlan) -> Result<(), StepError> {
        self.command(&format!("USER {}", plan.user)).await?;
        self.command(&format!("PASS {}", plan.password)).await?;
        Ok(())
    }

    /// `STAT`: messages and octets.
    async fn stat(&mut self) -> Result<(u32, u64), StepError> {
        let text = self.command("STAT").await?;
        parse_stat(&text).ok_or_else(|| StepError::protocol(format!("+OK {text}")))
    }

    /// After a protocol failure: `QUIT`, briefly waiting for the reply, ignoring
    /// any error.
    async fn quit_best_effort(&mut self) {
        let _ = timeout(QUIT_GRACE, async {
            let _ = self.line.writer.write_all(b"QUIT\r\n").await;
            let _ = self.status().await;
        })
        .await;
    }
}

/// Parses the text of `STAT`'s `+OK n size`.
fn parse_stat(text: &str) -> Option<(u32, u64)> {
    let mut it = text.split_ascii_whitespace();
    let n = it.next()?.parse().ok()?;
    let size = it.next()?.parse().ok()?;
    Some((n, size))
}

/// One check: connect and greeting ([`Function::PopConnect`]), `USER`, `PASS`,
/// `STAT`, then for each message `RETR` (the step ends at the `+OK` line; the
/// [`Sized::RetrieveResponse`] transfer runs from `RETR` to the terminating dot
/// and counts the un-dot-stuffed octets) and `DELE`, then `QUIT`.
///
/// Failures as in [`crate::smtp_client::smtp_session`]: `-ERR` is a
/// [`Failure::Protocol`]. When a body breaks off, the transfer is recorded with
/// `ok = false` and the failure as a second, failed [`Function::PopRetrieve`]
/// step.
///
/// At [`PopPlan::drop`]'s `RETR` the session ends on purpose: the record is
/// marked [`SessionRecord::dropped`], no step fails, and a transfer broken off
/// mid-body is recorded with `ok = false` (attempted, not passed, as the kit
/// counted it); the connection closes when the session returns.
pub async fn pop_session(plan: &PopPlan) -> SessionRecord {
    let mut rec = SessionRecord::default();
    let start = Instant::now();
    let mut client = match Client::open(plan.addr, plan.pace, plan.reply_timeout).await {
        Ok(client) => client,
        Err(e) => {
            rec.step(Function::PopConnect, ms_since(start), Err(e.failure));
            return rec;
        }
    };
    if let Err(e) = check(&mut client, plan, &mut rec, start).await
        && e.failure == Failure::Protocol
    {
        client.quit_best_effort().await;
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
    let greeting = c.ok().await;
    let outcome = greeting.as_ref().map(|_| ()).map_err(|e| e.failure);
    rec.step(Function::PopConnect, ms_since(start), outcome);
    greeting?;
    let user = format!("USER {}", plan.user);
    step(rec, Function::PopUserId, c.command(&user)).await?;
    let pass = format!("PASS {}", plan.password);
    step(rec, Function::PopPassword, c.command(&pass)).await?;
    let (n, _) = step(rec, Function::PopStatus, c.stat()).await?;
    for i in 1..=n {
        match plan.drop {
            Some(d) if d.retrieve == i && d.mid_body => {
                return retrieve_and_drop(c, rec, i).await;
            }
            Some(d) if d.retrieve == i => {
                retrieve(c, rec, i).await?;
                rec.dropped = true;
                return Ok(());
            }
            _ => {}
        }
        retrieve(c, rec, i).await?;
        step(rec, Function::PopDelete, c.command(&format!("DELE {i}"))).await?;
    }
    step(rec, Function::PopQuit, c.command("QUIT")).await?;
    rec.completed = true;
    Ok(())
}

/// `RETR i`: the step to the `+OK` line, then the body as a transfer.
async fn retrieve(c: &mut Client, rec: &mut SessionRecord, i: u32) -> Result<(), StepError> {
    let start = Instant::now();
    step(rec, Function::PopRetrieve, async {
        c.send(&format!("RETR {i}")).await?;
        c.ok().await
    })
    .await?;
    let mut octets = 0;
    let body = c.body(&mut octets, &mut Vec::new(), 0).await;
    let ms = ms_since(start);
    rec.transfer(Sized::RetrieveResponse, ms, octets, body.is_ok());
    if let Err(e) = &body {
        rec.step(Function::PopRetrieve, ms, Err(e.failure));
    }
    body
}

/// `RETR i` up to its `+OK`, then a deliberate drop with the body unread.
async fn retrieve_and_drop(
    c: &mut Client,
    rec: &mut SessionRecord,
    i: u32,
) -> Result<(), StepError> {
    let start = Instant::now();
    step(rec, Function::PopRetrieve, async {
        c.send(&format!("RETR {i}")).await?;
        c.ok().await
    })
    .await?;
    rec.transfer(Sized::RetrieveResponse, ms_since(start), 0, false);
    rec.dropped = true;
    Ok(())
}

/// A delivery probe's poll, at full speed and not recorded: log in, `STAT`,
/// then `TOP i 0` of each message (falling back to `RETR i` once `TOP` is
/// refused) until one carries exactly `tag` ([`Tag::find`]); `DELE` that one
/// message and `QUIT` so the deletion is committed.
pub async fn probe_poll(plan: &PopPlan, tag: &Tag) -> ProbeResult {
    let mut c = match Client::open(plan.addr, Pace::full(), plan.reply_timeout).await {
        Ok(c) => c,
        Err(e) => return ProbeResult::Failed(e.failure),
    };
    match poll(&mut c, plan, tag).await {
        Ok(true) => ProbeResult::Found,
        Ok(false) => ProbeResult::NotFound,
        Err(e) => {
            if e.failure == Failure::Protocol {
                c.quit_best_effort().await;
            }
            ProbeResult::Failed(e.failure)
        }
    }
}

/// [`probe_poll`]'s conversation: whether the probe was found (and deleted).
async fn poll(c: &mut Client, plan: &PopPlan, tag: &Tag) -> Result<bool, StepError> {
    c.ok().await?;
    c.login(plan).await?;
    let (n, _) = c.stat().await?;
    let mut top = true;
    let mut found = None;
    for i in 1..=n {
        if top {
            c.send(&format!("TOP {i} 0")).await?;
            top = c.status().await?.is_ok();
        }
        if !top {
            c.command(&format!("RETR {i}")).await?;
        }
        let mut head = Vec::new();
        c.body(&mut 0, &mut head, PROBE_HEAD).await?;
        if Tag::find(&head) == Some(*tag) {
            found = Some(i);
            break;
        }
    }
    if let Some(i) = found {
        c.command(&format!("DELE {i}")).await?;
    }
    c.command("QUIT").await?;
    Ok(found.is_some())
}

/// For the store check: log in, `STAT`, `QUIT`; the mailbox's messages and
/// octets, or the failure and the reply or error.
pub async fn pop_stat(plan: &PopPlan) -> Result<(u32, u64), (Failure, String)> {
    let mut c = Client::open(plan.addr, Pace::full(), plan.reply_timeout)
        .await
        .map_err(|e| (e.failure, e.detail))?;
    let result = async {
        c.ok().await?;
        c.login(plan).await?;
        let stat = c.stat().await?;
        c.command("QUIT").await?;
        Ok::<_, StepError>(stat)
    }
    .await;
    if let Err(e) = &result
        && e.failure == Failure::Protocol
    {
        c.quit_best_effort().await;
    }
    result.map_err(|e| (e.failure, e.detail))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_replies() {
        assert_eq!(parse_stat("2 3400"), Some((2, 3400)));
        assert_eq!(parse_stat("0 0 extra"), Some((0, 0)));
        assert_eq!(parse_stat("x 1"), None);
        assert_eq!(parse_stat("3"), None);
        assert_eq!(parse_stat(""), None);
    }
}
