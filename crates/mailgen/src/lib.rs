//! Stoa's mail load engine for `stoa bench mail`, the SPECmail2001-style harness
//! ([docs/mail2001.md](../../../docs/mail2001.md) §1–§4): the SMTP and
//! POP3 (or IMAP) clients with modem pacing, the mail sink that plays the remote MTAs' side,
//! delivery-time probes, the four Poisson streams over the random and retry pools,
//! and the QoS tally.
//!
//! # Layout
//!
//! - [`message`]: the messages sent (exact sizes, the `X-Stoa-Bench` tag).
//! - [`pace`]: modem pacing (6,000 B/s) of what a client writes and reads.
//! - [`smtp_client`]: one SMTP session (HELO, MAIL, RCPT…, DATA, QUIT), and the
//!   many-messages-per-connection sender the initial fill uses.
//! - [`pop_client`]: one POP3 check (USER, PASS, STAT, RETR and DELE of every
//!   message, QUIT), the delivery probe's poll, and STAT for the store check.
//! - [`imap_client`]: the same three over IMAP (LOGIN, SELECT, FETCH and STORE
//!   `\Deleted` of every message, EXPUNGE, LOGOUT) for `--access imap`;
//!   [`access`] picks the protocol and names the rows.
//! - [`sink`]: the SMTP sink the server relays remote mail to; it counts tagged
//!   recipients (per level, inside or outside the level's window: `receipts`).
//! - [`engine`]: the streams, pools, probes and window of a level, for the whole
//!   run or one [`engine::Part`] of it (an agent's share, the prime's probes).
//! - [`tally`]: what a level measured ([`tally::LevelTally`]), mergeable.
//! - [`qos`]: the QoS rules and the rows of the published tables.
//!
//! The workload's numbers (rates, distributions) come from `stoa-mail2001`.

pub mod access;
pub mod engine;
pub mod imap_client;
pub mod init;
pub mod message;
pub mod pace;
mod pools;
pub mod pop_client;
pub mod qos;
mod receipts;
pub mod sink;
pub mod smtp_client;
pub mod tally;
