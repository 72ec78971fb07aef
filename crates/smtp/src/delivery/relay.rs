//! A small SMTP client for the smart host: one connection per message, one
//! outcome per recipient.
//!
//! The conversation is the plain RFC 5321 one (EHLO, falling back to HELO; MAIL
//! with `SIZE` when offered; one RCPT per recipient; DATA), without pipelining or
//! TLS: the smart host is a trusted next hop on the local network. Every reply has
//! a deadline (Postfix's `smtp_*_timeout`; the end of data its own, longer one), and
//! a connection that breaks or times out is a temporary failure for everyone not
//! yet answered for.
//!
//! The message leaves normalised: every line ends in CRLF (a stray CR or LF is made
//! a line end, so a smuggled `\n.\n` cannot end the message early on the next hop)
//! and lines starting with `.` are dot-stuffed.

use std::io;
use std::time::Duration;

use super::wire::{Client, answer_unanswered, mail_from};
pub use super::wire::{Outcome, normalise};

/// Where and how to relay.
#[derive(Debug, Clone)]
pub struct Relay {
    /// `HOST:PORT`.
    pub host: String,
    /// Our name for EHLO.
    pub helo: String,
    /// Time to connect.
    pub connect_timeout: Duration,
    /// Time for each reply.
    pub command_timeout: Duration,
    /// Time for the reply to the end of the message.
    pub data_timeout: Duration,
}

/// Relays `message` from `sender` (empty for `<>`) to `recipients` through the smart
/// host; one outcome per recipient, in order.
pub async fn send(
    relay: &Relay,
    sender: &str,
    recipients: &[String],
    message: &[u8],
) -> Vec<Outcome> {
    let mut outcomes: Vec<Option<Outcome>> = vec![None; recipients.len()];
    let result = conversation(relay, sender, recipients, message, &mut outcomes).await;
    let fallback = match result {
        Ok(()) => Outcome::Temporary("4.0.0".into(), "no reply".into()),
        Err(e) => Outcome::Temporary(
            "4.4.2".into(),
            format!("conversation with {} failed: {e}", relay.host),
        ),
    };
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| fallback.clone()))
        .collect()
}

/// The conversation; fills `outcomes` as replies come. Recipients left `None` get
/// the result's outcome.
async fn conversation(
    relay: &Relay,
    sender: &str,
    recipients: &[String],
    message: &[u8],
    outcomes: &mut [Option<Outcome>],
) -> io::Result<()> {
    let mut c = Client::connect(&relay.host, relay.connect_timeout).await?;
    let t = relay.command_timeout;
    let offers_size = match c.hello(relay).await? {
        Ok(offers_size) => offers_size,
        Err(refused) => {
            answer_unanswered(outcomes, &refused);
            return Ok(());
        }
    };
    let reply = c
        .command(&mail_from(sender, offers_size, message), t)
        .await?;
    if reply.code != 250 {
        answer_unanswered(outcomes, &reply.failure(&c.host));
        return Ok(());
    }
    let accepted = c.recipients(recipients, t, outcomes).await?;
    if accepted.is_empty() {
        let _ = c.command("QUIT", t).await;
        return Ok(());
    }
    let reply = c.command("DATA", t).await?;
    if reply.code != 354 {
        answer(outcomes, &accepted, &reply.failure(&c.host));
        return Ok(());
    }
    let outcome = c.message(relay, message).await?;
    answer(outcomes, &accepted, &outcome);
    let _ = c.command("QUIT", t).await;
    Ok(())
}

/// Gives `outcome` to the recipients at `indices`.
fn answer(outcomes: &mut [Option<Outcome>], indices: &[usize], outcome: &Outcome) {
    for &i in indices {
        outcomes[i] = Some(outcome.clone());
    }
}

impl Client {
    /// The greeting, then EHLO (falling back to HELO): whether the smart host
    /// offers `SIZE`, or the outcome for every recipient when it refuses.
    async fn hello(&mut self, relay: &Relay) -> io::Result<Result<bool, Outcome>> {
        let t = relay.command_timeout;
        let greeting = self.reply(t).await?;
        if greeting.code != 220 {
            // A refusing greeting is temporary whatever its code (Postfix does the same).
            let diagnostic = format!(
                "host {} refused the connection: {} {}",
                self.host,
                greeting.code,
                greeting.text()
            );
            return Ok(Err(Outcome::Temporary("4.4.2".into(), diagnostic)));
        }
        let mut ehlo = self.command(&format!("EHLO {}", relay.helo), t).await?;
        if ehlo.code != 250 {
            ehlo = self.command(&format!("HELO {}", relay.helo), t).await?;
            if ehlo.code != 250 {
                return Ok(Err(ehlo.failure(&self.host)));
            }
        }
        Ok(Ok(ehlo.offers("SIZE")))
    }

    /// After `354`: the message and the reply to its end, as the accepted
    /// recipients' outcome.
    async fn message(&mut self, relay: &Relay, message: &[u8]) -> io::Result<Outcome> {
        self.send(&normalise(message), relay.data_timeout).await?;
        let reply = self.reply(relay.data_timeout).await?;
        Ok(reply.outcome(&self.host))
    }
}
