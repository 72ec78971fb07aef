//! What a load level measured: per-function attempts, QoS passes, errors and
//! times; the size-adjusted DATA and RETR checks; delivery probes; remote delivery
//! at the sink; the counters of the published detailed tables.
//!
//! A client fills a [`SessionRecord`] as a session runs; the engine adds it to the
//! level's [`LevelTally`] only when the session started inside the measurement
//! window (the choice the white paper leaves open, `mail2001.md` §2.7: a session
//! counts by its start time).

use serde::{Deserialize, Serialize};
use stoa_latency::Latency;

use crate::access::Access;
use crate::qos;

/// The protocol steps the published detailed tables list, in their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Function {
    /// TCP connect and the `220` banner.
    SmtpConnect,
    /// `HELO` → `250`.
    SmtpHello,
    /// `MAIL FROM` → `250`.
    SmtpMailFrom,
    /// Each `RCPT TO` → `250`.
    SmtpRcptTo,
    /// `DATA` → `354` (the message transfer is [`Sized::DataResponse`]).
    SmtpData,
    /// `QUIT` → `221`.
    SmtpQuit,
    /// TCP connect and the `+OK` greeting.
    PopConnect,
    /// `USER` → `+OK`.
    PopUserId,
    /// `PASS` → `+OK`.
    PopPassword,
    /// `STAT` → `+OK n size`.
    PopStatus,
    /// `RETR` → the first line `+OK` (the whole transfer is [`Sized::RetrieveResponse`]).
    PopRetrieve,
    /// `DELE` → `+OK`.
    PopDelete,
    /// IMAP only: `EXPUNGE` → `OK`, which commits the `STORE \Deleted`s (POP3's
    /// `QUIT` does that, [`crate::access`]).
    Expunge,
    /// `QUIT` → `+OK`.
    PopQuit,
}

impl Function {
    /// Every function, in report order.
    pub const ALL: [Function; 14] = [
        Function::SmtpConnect,
        Function::SmtpHello,
        Function::SmtpMailFrom,
        Function::SmtpRcptTo,
        Function::SmtpData,
        Function::SmtpQuit,
        Function::PopConnect,
        Function::PopUserId,
        Function::PopPassword,
        Function::PopStatus,
        Function::PopRetrieve,
        Function::PopDelete,
        Function::Expunge,
        Function::PopQuit,
    ];

    /// The row name of the published tables ("SMTP Connect", "POP User ID", …),
    /// for a POP3 run ([`Function::label`] names the rows of either).
    pub fn name(self) -> &'static str {
        match self {
            Function::SmtpConnect => "SMTP Connect",
            Function::SmtpHello => "SMTP Hello",
            Function::SmtpMailFrom => "SMTP Mail From",
            Function::SmtpRcptTo => "SMTP Rcpt To",
            Function::SmtpData => "SMTP Data",
            Function::SmtpQuit => "SMTP Quit",
            Function::PopConnect => "POP Connect",
            Function::PopUserId => "POP User ID",
            Function::PopPassword => "POP Password",
            Function::PopStatus => "POP Status",
            Function::PopRetrieve => "POP Retrieve",
            Function::PopDelete => "POP Delete",
            Function::Expunge => "IMAP Expunge",
            Function::PopQuit => "POP Quit",
        }
    }

    /// The row name in a run that reads the mailboxes with `access`: an IMAP
    /// run names the IMAP command each POP3 function stands for ("IMAP
    /// Select" for "POP Status", …, [`crate::access`]).
    pub fn label(self, access: Access) -> &'static str {
        match (access, self) {
            (Access::Pop3, f) => f.name(),
            (Access::Imap, Function::PopConnect) => "IMAP Connect",
            (Access::Imap, Function::PopUserId) => "IMAP User ID",
            (Access::Imap, Function::PopPassword) => "IMAP Login",
            (Access::Imap, Function::PopStatus) => "IMAP Select",
            (Access::Imap, Function::PopRetrieve) => "IMAP Fetch",
            (Access::Imap, Function::PopDelete) => "IMAP Store",
            (Access::Imap, Function::PopQuit) => "IMAP Logout",
            (Access::Imap, f) => f.name(),
        }
    }

    /// Position in [`Function::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether this is an SMTP step (else POP).
    pub fn is_smtp(self) -> bool {
        self.index() <= Function::SmtpQuit.index()
    }
}

/// The two transfers judged against the size-adjusted cutoff (§2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Sized {
    /// The message body sent after `354`, up to the final `250` ("SMTP Data Response Time").
    DataResponse,
    /// `RETR` sent, up to the terminating `.` ("POP Retrieve Response Time").
    RetrieveResponse,
}

/// Why a step failed (§2.4: an unexpected reply or no reply within 60 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Failure {
    /// The TCP connection could not be made.
    Connect,
    /// A reply other than the expected one (or a malformed reply).
    Protocol,
    /// The server closed the connection (or it reset) before the reply: a
    /// connect error at the connect step (no greeting), a protocol error after
    /// it. Not a "Disconnect": the published Disconnect counters are the
    /// client's deliberate drops ([`SessionRecord::dropped`]).
    Closed,
    /// No reply within the reply timeout.
    Timeout,
}

/// One step of a session: which function, how long, and how it ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    /// The function.
    pub function: Function,
    /// From just before the request was sent to the reply (or its first packet).
    pub ms: f64,
    /// `Ok` for the expected reply.
    pub outcome: Result<(), Failure>,
}

/// One size-adjusted transfer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    /// DATA body or RETR.
    pub kind: Sized,
    /// Its time, ms.
    pub ms: f64,
    /// The message's size in bytes (the generator's size for DATA, the octets
    /// received for RETR).
    pub bytes: u64,
    /// Whether it ended with the expected reply.
    pub ok: bool,
}

/// What one SMTP or POP session did, filled by the client as it runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionRecord {
    /// Every step, in order; a failed step ends the session.
    pub steps: Vec<Step>,
    /// DATA bodies and RETRs.
    pub transfers: Vec<Transfer>,
    /// SMTP: local recipients accepted (`RCPT` answered 250).
    pub to_local: u32,
    /// SMTP: remote recipients accepted.
    pub to_remote: u32,
    /// Whether the session reached the end of its last step (QUIT answered).
    pub completed: bool,
    /// Whether the client dropped the session on purpose, as the kit did in
    /// about 1 % of SMTP and 0.27 % of POP sessions (`stoa_mail2001::disconnect`):
    /// counted as a Disconnect, not as a Session, and not an error.
    pub dropped: bool,
}

impl SessionRecord {
    /// Records a step.
    pub fn step(&mut self, function: Function, ms: f64, outcome: Result<(), Failure>) {
        self.steps.push(Step {
            function,
            ms,
            outcome,
        });
    }

    /// Records a size-adjusted transfer.
    pub fn transfer(&mut self, kind: Sized, ms: f64, bytes: u64, ok: bool) {
        self.transfers.push(Transfer {
            kind,
            ms,
            bytes,
            ok,
        });
    }

    /// The first failure, if any.
    pub fn failure(&self) -> Option<(Function, Failure)> {
        self.steps
            .iter()
            .find_map(|s| s.outcome.err().map(|f| (s.function, f)))
    }
}

/// Attempts, QoS passes, errors and times of one function.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FunctionStats {
    /// Requests sent.
    pub attempts: u64,
    /// Expected replies within the function's limit (5 s).
    pub pass: u64,
    /// Unexpected replies, disconnects and timeouts.
    pub errors: u64,
    /// Times of the expected replies.
    pub latency: Latency,
}

/// Attempts and passes of a size-adjusted check.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct SizedStats {
    /// Transfers started.
    pub attempts: u64,
    /// Transfers that ended well within 5 s + size / 3,000 B/s.
    pub pass: u64,
}

/// Smallest, largest and total message size of a direction.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct SizeStats {
    /// Messages.
    pub count: u64,
    /// Smallest, bytes.
    pub min: u64,
    /// Largest, bytes.
    pub max: u64,
    /// Total, bytes.
    pub sum: u64,
}

impl SizeStats {
    /// Adds one message of `bytes`.
    pub fn add(&mut self, bytes: u64) {
        self.min = if self.count == 0 {
            bytes
        } else {
            self.min.min(bytes)
        };
        self.max = self.max.max(bytes);
        self.sum += bytes;
        self.count += 1;
    }

    /// Adds `other`'s messages.
    pub fn merge(&mut self, other: &SizeStats) {
        if other.count == 0 {
            return;
        }
        self.min = if self.count == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.sum += other.sum;
        self.count += other.count;
    }

    /// The mean size in bytes; 0 when empty.
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum as f64 / self.count as f64
        }
    }
}

/// The delivery-time probes (§2.2).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DeliveryStats {
    /// Probe messages accepted by the server (the SMTP session ended well).
    pub attempts: u64,
    /// Found by POP within 60 s of the start of the SMTP session.
    pub pass: u64,
    /// Found later than 60 s (within the polling limit).
    pub late: u64,
    /// Never found within the polling limit.
    pub lost: u64,
    /// Polls that could not connect or log in.
    pub connect_errors: u64,
    /// Times from the start of the SMTP session to the poll that found the message.
    pub times: Latency,
}

/// Remote delivery, counted at the sink (§2.3).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct RemoteStats {
    /// Remote recipients accepted by the server in measured sessions
    /// ("SMTP To Remote"; the published denominator).
    pub sent: u64,
    /// Of those, recipients of sessions the client dropped on purpose (their
    /// message was never sent whole, so they cannot arrive; the kit counted
    /// them, `mail2001.md` §2.8).
    pub dropped: u64,
    /// Of those, recipients the sink received within the measurement window
    /// plus the delivery-time limit (`engine::REMOTE_GRACE`).
    pub received: u64,
    /// Recipients of the level's judged mail the sink received outside that
    /// window (later, during the cool-down or the drain): not delivered in
    /// time.
    pub outside: u64,
}

/// The counters of the published detailed tables, plus the generator's health.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Counters {
    /// SMTP sessions whose connection could not be made, or that the server
    /// closed before its greeting.
    pub smtp_connect_error: u64,
    /// SMTP steps answered with an unexpected reply, or whose connection the
    /// server closed before the reply.
    pub smtp_protocol_error: u64,
    /// SMTP sessions the client dropped on purpose (the kit's disconnects).
    pub smtp_disconnect: u64,
    /// SMTP replies that did not come within the timeout.
    pub smtp_timeout: u64,
    /// SMTP sessions that ended other than by a deliberate drop: completed or
    /// failed (on the published page, POP Session = POP Quit + POP Connect
    /// Error at every level).
    pub smtp_session: u64,
    /// Local recipients accepted.
    pub smtp_to_local: u64,
    /// Remote recipients accepted.
    pub smtp_to_remote: u64,
    /// Sink sessions that failed (the server's client broke the protocol or the
    /// connection).
    pub sink_connect_error: u64,
    /// POP sessions whose connection could not be made, or that the server
    /// closed before its greeting.
    pub pop_connect_error: u64,
    /// POP steps answered with an unexpected reply (or `-ERR`), or whose
    /// connection the server closed before the reply.
    pub pop_protocol_error: u64,
    /// POP sessions the client dropped on purpose (the kit's disconnects).
    pub pop_disconnect: u64,
    /// POP replies that did not come within the timeout.
    pub pop_timeout: u64,
    /// POP sessions that ended other than by a deliberate drop: completed or
    /// failed.
    pub pop_session: u64,
    /// Delivery probes' polls that could not connect or log in.
    pub delivery_time_connect_error: u64,
    /// Sessions started more than 1 s after their scheduled time: the generator
    /// fell behind (an overloaded client, not a slow server).
    pub late_starts: u64,
    /// Repeated checks skipped because no retry-pool mailbox was eligible (all
    /// checked within 300 s, or busy).
    pub retry_pool_exhausted: u64,
    /// Measured sessions still running when the level ended (aborted, not judged).
    pub unfinished: u64,
}

impl Counters {
    /// SMTP sessions that ended: completed, or broken off by the client on
    /// purpose (the deliberate disconnects).
    pub fn smtp_ended(&self) -> u64 {
        self.smtp_session + self.smtp_disconnect
    }

    /// POP3 sessions that ended, as [`Counters::smtp_ended`].
    pub fn pop_ended(&self) -> u64 {
        self.pop_session + self.pop_disconnect
    }

    /// The counter a failed step of `function` adds to: a connection that
    /// could not be made, or was closed before the greeting, is a connect
    /// error; any other unexpected reply or close a protocol error; silence a
    /// timeout.
    fn error_counter(&mut self, function: Function, failure: Failure) -> &mut u64 {
        let connect = Counters::is_connect_error(function, failure);
        match (function.is_smtp(), failure) {
            (true, _) if connect => &mut self.smtp_connect_error,
            (true, Failure::Protocol | Failure::Closed | Failure::Connect) => {
                &mut self.smtp_protocol_error
            }
            (true, Failure::Timeout) => &mut self.smtp_timeout,
            (false, _) if connect => &mut self.pop_connect_error,
            (false, Failure::Protocol | Failure::Closed | Failure::Connect) => {
                &mut self.pop_protocol_error
            }
            (false, Failure::Timeout) => &mut self.pop_timeout,
        }
    }

    /// Whether a failed step of `function` is a Connect Error: a connection
    /// that could not be made, or that the server closed before its greeting.
    fn is_connect_error(function: Function, failure: Failure) -> bool {
        let at_connect = matches!(function, Function::SmtpConnect | Function::PopConnect);
        failure == Failure::Connect || (at_connect && failure == Failure::Closed)
    }

    /// The error rate's numerator: sessions that ended in an error (a failed
    /// step ends its session, so each counts once): connect errors, protocol
    /// errors and timeouts, SMTP and POP. The delivery probes' failed polls
    /// are not in it (the published 2.52 % leaves them out).
    pub fn session_errors(&self) -> u64 {
        self.smtp_connect_error
            + self.smtp_protocol_error
            + self.smtp_timeout
            + self.pop_connect_error
            + self.pop_protocol_error
            + self.pop_timeout
    }

    /// The error rate's denominator: every SMTP and POP session, Sessions
    /// (completed or failed) and Disconnects (dropped on purpose).
    pub fn sessions(&self) -> u64 {
        self.smtp_session + self.smtp_disconnect + self.pop_session + self.pop_disconnect
    }
}

/// Sessions started in the measurement window, per stream.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Started {
    /// SMTP sessions of local users sending.
    pub user_smtp: u64,
    /// SMTP sessions of "remote MTAs".
    pub remote_smtp: u64,
    /// Initial POP checks (random pool).
    pub initial_pop: u64,
    /// Repeated POP checks (retry pool).
    pub repeated_pop: u64,
}

/// Everything one load level measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelTally {
    /// How the mailboxes were read: it names the rows (a merge keeps this
    /// tally's).
    #[serde(default)]
    pub access: Access,
    /// One entry per [`Function::ALL`], same order.
    pub functions: Vec<FunctionStats>,
    /// "SMTP Data Response Time".
    pub data_response: SizedStats,
    /// "POP Retrieve Response Time".
    pub retrieve_response: SizedStats,
    /// "Delivery Time".
    pub delivery: DeliveryStats,
    /// "Remote Message Delivery".
    pub remote: RemoteStats,
    /// The counters table.
    pub counters: Counters,
    /// "SMTP Data (KB up)".
    pub data_up: SizeStats,
    /// "POP Retrieve (KB down)".
    pub retrieve_down: SizeStats,
    /// Sessions started in the window.
    pub started: Started,
    /// Length of the measurement window, seconds.
    pub window_secs: f64,
}

impl Default for LevelTally {
    fn default() -> LevelTally {
        LevelTally {
            access: Access::default(),
            functions: vec![FunctionStats::default(); Function::ALL.len()],
            data_response: SizedStats::default(),
            retrieve_response: SizedStats::default(),
            delivery: DeliveryStats::default(),
            remote: RemoteStats::default(),
            counters: Counters::default(),
            data_up: SizeStats::default(),
            retrieve_down: SizeStats::default(),
            started: Started::default(),
            window_secs: 0.0,
        }
    }
}

impl LevelTally {
    /// The stats of one function.
    pub fn function(&self, f: Function) -> &FunctionStats {
        &self.functions[f.index()]
    }

    /// Adds a measured session.
    pub fn add_session(&mut self, rec: &SessionRecord) {
        let mut smtp = None;
        let mut previous: Option<&Step> = None;
        for step in &rec.steps {
            smtp = Some(step.function.is_smtp());
            // A failed step right after a successful one of the same function is
            // that request's later reply failing (DATA's final reply after its
            // 354, a RETR body cut off after its +OK): an error, not a new attempt.
            let continuation = matches!(step.function, Function::SmtpData | Function::PopRetrieve)
                && previous.is_some_and(|p| p.function == step.function && p.outcome.is_ok())
                && step.outcome.is_err();
            previous = Some(step);
            let stats = &mut self.functions[step.function.index()];
            match step.outcome {
                // A connection that could not be made (or closed before its
                // greeting) is a Connect Error, not an attempt of the Connect
                // row: on the published page POP Connect's attempts equal POP
                // Quit + POP Disconnect, with the 53,117 Connect Errors of the
                // 120 % level left out (mail2001.md §2.4).
                Err(failure) if Counters::is_connect_error(step.function, failure) => {
                    *self.counters.error_counter(step.function, failure) += 1;
                }
                Ok(()) => {
                    stats.attempts += u64::from(!continuation);
                    stats.latency.record_ms(step.ms);
                    if step.ms <= qos::RESPONSE_LIMIT_SECS * 1000.0 {
                        stats.pass += 1;
                    }
                }
                Err(failure) => {
                    stats.attempts += u64::from(!continuation);
                    stats.errors += 1;
                    *self.counters.error_counter(step.function, failure) += 1;
                }
            }
        }
        for t in &rec.transfers {
            let (stats, sizes) = match t.kind {
                Sized::DataResponse => (&mut self.data_response, &mut self.data_up),
                Sized::RetrieveResponse => (&mut self.retrieve_response, &mut self.retrieve_down),
            };
            stats.attempts += 1;
            if t.ok {
                sizes.add(t.bytes);
                if t.ms <= qos::sized_cutoff_secs(t.bytes) * 1000.0 {
                    stats.pass += 1;
                }
            }
        }
        let c = &mut self.counters;
        c.smtp_to_local += u64::from(rec.to_local);
        c.smtp_to_remote += u64::from(rec.to_remote);
        // Every session is either a Session (completed or failed) or a
        // Disconnect (dropped on purpose): together they are the error rate's
        // denominator.
        let counter = match (smtp, rec.dropped) {
            (Some(true), false) => &mut c.smtp_session,
            (Some(true), true) => &mut c.smtp_disconnect,
            (Some(false), false) => &mut c.pop_session,
            (Some(false), true) => &mut c.pop_disconnect,
            (None, _) => return,
        };
        *counter += 1;
    }

    /// Adds another tally (another load thread's or agent's share of the level).
    pub fn merge(&mut self, other: &LevelTally) {
        for (a, b) in self.functions.iter_mut().zip(&other.functions) {
            a.attempts += b.attempts;
            a.pass += b.pass;
            a.errors += b.errors;
            a.latency.merge(&b.latency);
        }
        for (a, b) in [
            (&mut self.data_response, &other.data_response),
            (&mut self.retrieve_response, &other.retrieve_response),
        ] {
            a.attempts += b.attempts;
            a.pass += b.pass;
        }
        let (d, o) = (&mut self.delivery, &other.delivery);
        d.attempts += o.attempts;
        d.pass += o.pass;
        d.late += o.late;
        d.lost += o.lost;
        d.connect_errors += o.connect_errors;
        d.times.merge(&o.times);
        self.remote.sent += other.remote.sent;
        self.remote.received += other.remote.received;
        self.remote.outside += other.remote.outside;
        self.remote.dropped += other.remote.dropped;
        let (c, o) = (&mut self.counters, &other.counters);
        for (a, b) in [
            (&mut c.smtp_connect_error, o.smtp_connect_error),
            (&mut c.smtp_protocol_error, o.smtp_protocol_error),
            (&mut c.smtp_disconnect, o.smtp_disconnect),
            (&mut c.smtp_timeout, o.smtp_timeout),
            (&mut c.smtp_session, o.smtp_session),
            (&mut c.smtp_to_local, o.smtp_to_local),
            (&mut c.smtp_to_remote, o.smtp_to_remote),
            (&mut c.sink_connect_error, o.sink_connect_error),
            (&mut c.pop_connect_error, o.pop_connect_error),
            (&mut c.pop_protocol_error, o.pop_protocol_error),
            (&mut c.pop_disconnect, o.pop_disconnect),
            (&mut c.pop_timeout, o.pop_timeout),
            (&mut c.pop_session, o.pop_session),
            (
                &mut c.delivery_time_connect_error,
                o.delivery_time_connect_error,
            ),
            (&mut c.late_starts, o.late_starts),
            (&mut c.retry_pool_exhausted, o.retry_pool_exhausted),
            (&mut c.unfinished, o.unfinished),
        ] {
            *a += b;
        }
        self.data_up.merge(&other.data_up);
        self.retrieve_down.merge(&other.retrieve_down);
        let (s, o) = (&mut self.started, &other.started);
        s.user_smtp += o.user_smtp;
        s.remote_smtp += o.remote_smtp;
        s.initial_pop += o.initial_pop;
        s.repeated_pop += o.repeated_pop;
        self.window_secs = self.window_secs.max(other.window_secs);
    }

    /// The msgs/min actually offered: user SMTP sessions started per minute of the
    /// window (the published "Actual Message Rate").
    pub fn actual_mpm(&self) -> f64 {
        if self.window_secs <= 0.0 {
            return 0.0;
        }
        self.started.user_smtp as f64 * 60.0 / self.window_secs
    }
}

#[cfg(test)]
#[path = "tally_tests.rs"]
mod tests;
