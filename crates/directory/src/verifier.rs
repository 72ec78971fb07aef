//! Password checks for async servers.
//!
//! A full check is slow (an argon2 run, a few milliseconds of sha512-crypt, an
//! LDAP round trip), so async servers run it on a blocking thread. Handing every
//! login straight to `spawn_blocking` breaks down in a login storm, when logins
//! come faster than the cores can hash (the first minutes after a restart, when no
//! success is cached yet): each waiting login holds one of the runtime's blocking
//! threads, parked at argon2's slots; once all of them (512 per runtime) are held,
//! every other blocking job waits behind the storm too. Measured with `stoa bench
//! mail --rate 3150 --password-scheme argon2id` from a cold cache: RETR, whose
//! file opens are blocking jobs, took 3.7 s on average, and the logins of users
//! whose success *was* cached, a hash of a few hundred bytes, waited as long as the
//! cold ones; POP3 sessions piled up to the connection limit and new clients waited
//! 25 s for the greeting.
//!
//! [`Verifier::verify`] instead:
//!
//! 1. answers a success the directory remembers on the spot
//!    ([`Directory::verify_cached`]), on the caller's task, no thread at all;
//! 2. otherwise waits for one of [`Directory::concurrent_checks`] turns, in line
//!    with the other logins (a waiting login is a parked task of a few hundred
//!    bytes, not a thread);
//! 3. then runs [`Directory::verify_password`] on a blocking thread, the turn held
//!    until that thread is done (also when the caller stops waiting, so the bound
//!    holds even while connections are dropped).
//!
//! # The order of the line: adaptive LIFO
//!
//! While the line moves (its oldest login has waited less than [`LIFO_AFTER`]),
//! turns go first come, first served. Once it does not, the storm is longer than
//! the cores can absorb: served in order, *every* login would wait as long as the
//! whole line, seconds and then tens of seconds, and every client would see a slow
//! login. From then on the newest login goes first, so a login that arrives while
//! the cores keep up with the arrivals is answered in milliseconds, and the logins
//! already late wait for the capacity left over (or for their client to give up,
//! which then costs nothing: a login whose caller has gone is skipped, its turn
//! passed on). The line returns to its order as soon as the oldest login in it is
//! younger than [`LIFO_AFTER`]. This is the "adaptive LIFO" of Facebook's overload
//! control ("Fail at Scale", ACM Queue 2015): under a standing queue, order by
//! freshness, since the stale requests' deadlines have passed anyway.
//!
//! Measured with `stoa bench mail --store-users 30000 --rate 3150
//! --password-scheme argon2id --warmup 120s --run-time 60s`, from a cold cache:
//! logins straight to `spawn_blocking`: POP Connect 0 % within 5 s (25.4 s on
//! average), POP Retrieve 72 %; through the line in order: every row but POP
//! Password at 100 %, POP Password 19.8 % (33.7 s on average).
//!
//! The timing of an answer tells no more than before: a remembered success was
//! already answered in microseconds, and failures are never remembered.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::{Directory, Error, Result, User};

/// While the oldest login in line has waited less than this, turns go first come,
/// first served; from then on, newest first (see "The order of the line").
pub const LIFO_AFTER: Duration = Duration::from_secs(1);

/// How many entries the line holds before it first drops those whose callers
/// have gone (then at twice what is left): the memory of a client that sends a
/// password and hangs up, again and again, stays bounded.
const PRUNE_FIRST: usize = 1024;

/// Password checks through a directory, for async servers (see the module docs).
pub struct Verifier {
    directory: Arc<dyn Directory>,
    line: Arc<Line>,
}

impl Verifier {
    /// Checks through `directory`, [`Directory::concurrent_checks`] at once.
    pub fn new(directory: Arc<dyn Directory>) -> Verifier {
        let limit = directory.concurrent_checks();
        Verifier::with_limit(directory, limit)
    }

    /// Checks through `directory`, at most `limit` (at least 1) at once.
    pub fn with_limit(directory: Arc<dyn Directory>, limit: usize) -> Verifier {
        Verifier::with_order(directory, limit, LIFO_AFTER)
    }

    fn with_order(directory: Arc<dyn Directory>, limit: usize, lifo_after: Duration) -> Verifier {
        let line = Line {
            state: Mutex::new(LineState {
                free: limit.max(1),
                waiting: VecDeque::new(),
                prune_at: PRUNE_FIRST,
            }),
            lifo_after,
        };
        Verifier {
            directory,
            line: Arc::new(line),
        }
    }

    /// The user, if `login` and `password` are right: what
    /// [`Directory::verify_password`] answers, without blocking the caller's thread.
    /// Needs a tokio runtime.
    pub async fn verify(&self, login: &str, password: &str) -> Result<Option<User>> {
        if let Some(user) = self.directory.verify_cached(login, password) {
            return Ok(Some(user));
        }
        let turn = self.line.turn().await?;
        let directory = Arc::clone(&self.directory);
        let (login, password) = (login.to_owned(), password.to_owned());
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            directory.verify_password(&login, &password)
        })
        .await
        .map_err(|e| Error::Interrupted(e.to_string()))?
    }
}

/// The line of checks waiting for a turn.
struct Line {
    state: Mutex<LineState>,
    lifo_after: Duration,
}

/// What [`Line`] guards.
struct LineState {
    /// Turns nobody holds (only while nobody waits).
    free: usize,
    /// Oldest first.
    waiting: VecDeque<Waiter>,
    /// The length at which the next push drops waiters whose callers have gone.
    prune_at: usize,
}

/// A login waiting for its turn.
struct Waiter {
    since: Instant,
    turn: oneshot::Sender<Turn>,
}

/// A turn at a full check; passed on when dropped.
struct Turn {
    /// `None` for a turn that was never handed over (its login had gone).
    line: Option<Arc<Line>>,
}

impl Line {
    fn lock(&self) -> MutexGuard<'_, LineState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits for a turn.
    async fn turn(self: &Arc<Line>) -> Result<Turn> {
        let handed = {
            let mut state = self.lock();
            if state.free > 0 {
                state.free -= 1;
                return Ok(Turn {
                    line: Some(Arc::clone(self)),
                });
            }
            let (turn, handed) = oneshot::channel();
            state.waiting.push_back(Waiter {
                since: Instant::now(),
                turn,
            });
            if state.waiting.len() >= state.prune_at {
                state.waiting.retain(|w| !w.turn.is_closed());
                state.prune_at = PRUNE_FIRST.max(2 * state.waiting.len());
            }
            handed
        };
        handed
            .await
            .map_err(|_| Error::Interrupted("the verifier was dropped".to_owned()))
    }

    /// Hands a returned turn to the next login (see "The order of the line"), or
    /// keeps it free when none waits.
    fn pass_on(self: &Arc<Line>) {
        let mut state = self.lock();
        loop {
            while state.waiting.front().is_some_and(|w| w.turn.is_closed()) {
                state.waiting.pop_front();
            }
            let stale = match state.waiting.front() {
                Some(oldest) => oldest.since.elapsed() >= self.lifo_after,
                None => {
                    state.free += 1;
                    return;
                }
            };
            let next = match stale {
                true => state.waiting.pop_back(),
                false => state.waiting.pop_front(),
            };
            let Some(next) = next else { continue };
            let turn = Turn {
                line: Some(Arc::clone(self)),
            };
            match next.turn.send(turn) {
                Ok(()) => return,
                // Its login has gone since the check above: not a turn to pass on
                // again, the next one gets it.
                Err(mut unused) => unused.line = None,
            }
        }
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        if let Some(line) = self.line.take() {
            line.pass_on();
        }
    }
}

/// This machine's cores as the process may use them (at least 1).
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

#[cfg(test)]
mod tests;
