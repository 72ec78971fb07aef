//! The SPECmail2001 workload as data and arithmetic, for the `stoa bench mail` harness
//! ([docs/mail2001.md](../../../docs/mail2001.md) §0–§1).
//!
//! # Layout
//!
//! - [`profile`]: the constants of the per-user daily profile (§1.1), users per
//!   msgs/min (§1.2), the local/remote split (§1.8), the modem share and speed (§1.9)
//!   and the POP retry pool (§1.5).
//! - [`rates`]: [`Rates`], the four Poisson stream rates and their derived figures
//!   as functions of msgs/min and load factor (§1.3).
//! - [`dist`]: the `MSG_SIZE_DISTRIBUTION` and `MSG_RECP_DISTRIBUTION` tables, the
//!   steady-state mailbox table (§1.11), and samplers over a caller's
//!   [`fastrand::Rng`]: sizes, recipient counts, local or remote, modem or LAN,
//!   exponential inter-arrival times.
//! - [`disconnect`]: the sessions the kit's client dropped on purpose (§2.8),
//!   their shares as the published counters give them, and their samplers.
//!
//! # What it does not do
//!
//! No I/O and no clock: it never opens a socket, never sleeps and never reads the
//! time. Pacing, sessions, the mail sink and the QoS judgement live in the harness;
//! randomness comes from the caller's generator, so a fixed seed gives a fixed run.

pub mod disconnect;
pub mod dist;
pub mod profile;
pub mod rates;

pub use rates::Rates;
