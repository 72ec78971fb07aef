//! A bounded pool of blocking LDAP connections with failover and reconnection.
//!
//! Each [`LdapConn`] owns a single-threaded tokio runtime that only runs while an
//! operation waits, so a connection costs one socket and a small runtime, and the
//! [`Directory`](crate::Directory) trait stays synchronous. A new connection tries
//! the URLs in order and binds as the service account; the first that answers is
//! used. An operation that fails drops its connection and every idle one (after a
//! server restart they are all dead), then runs once more on a fresh connection, so
//! a directory that comes back is used again by the next call, with no health
//! checker thread.

use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use ldap3::{LdapConn, LdapConnSettings};

use crate::error::{Error, Result};

use super::LdapOptions;

/// The connections and how many exist.
#[derive(Default)]
struct State {
    idle: Vec<LdapConn>,
    open: usize,
}

/// The pool (see the module docs).
pub(crate) struct Pool {
    urls: Vec<String>,
    bind_dn: Option<String>,
    bind_password: String,
    timeout: Duration,
    max: usize,
    state: Mutex<State>,
    freed: Condvar,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("urls", &self.urls)
            .field("bind_dn", &self.bind_dn)
            .field("max", &self.max)
            .finish_non_exhaustive()
    }
}

/// A connection taken from the pool; given back on drop unless it failed.
struct Taken<'a> {
    pool: &'a Pool,
    conn: Option<LdapConn>,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        let mut state = self.pool.lock();
        match self.conn.take() {
            Some(conn) => state.idle.push(conn),
            None => state.open -= 1,
        }
        self.pool.freed.notify_one();
    }
}

impl Pool {
    pub(crate) fn new(options: &LdapOptions) -> Pool {
        Pool {
            urls: options.urls.clone(),
            bind_dn: options.bind_dn.clone(),
            bind_password: options.bind_password.clone(),
            timeout: options.timeout,
            max: options.pool_size.max(1),
            state: Mutex::new(State::default()),
            freed: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Connections open now (in use or idle).
    pub(crate) fn open(&self) -> usize {
        self.lock().open
    }

    /// The per-operation limit, for operations that run several requests.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The service account's DN and password, to bind back after a user bind.
    pub(crate) fn service_credentials(&self) -> (&str, &str) {
        match &self.bind_dn {
            Some(dn) => (dn, &self.bind_password),
            None => ("", ""),
        }
    }

    /// Runs `op` on a connection (its first request with the timeout set). On
    /// failure the connection and the idle ones are dropped and `op` runs once more
    /// on a new connection; a second failure is [`Error::Unavailable`].
    pub(crate) fn run<T>(
        &self,
        mut op: impl FnMut(&mut LdapConn) -> ldap3::result::Result<T>,
    ) -> Result<T> {
        let mut last = None;
        for _ in 0..2 {
            let mut taken = self.take()?;
            let conn = taken
                .conn
                .as_mut()
                .expect("invariant: a taken connection is present");
            conn.with_timeout(self.timeout);
            match op(conn) {
                Ok(value) => return Ok(value),
                Err(e) => {
                    crate::metrics::count_ldap_error();
                    taken.conn = None;
                    last = Some(e.to_string());
                    self.drop_idle();
                }
            }
        }
        Err(unavailable(last))
    }

    /// An idle connection, or a new one while fewer than `max` exist, waiting up
    /// to the timeout for one to be given back.
    fn take(&self) -> Result<Taken<'_>> {
        let deadline = Instant::now() + self.timeout;
        let mut state = self.lock();
        loop {
            if let Some(conn) = state.idle.pop() {
                return Ok(Taken {
                    pool: self,
                    conn: Some(conn),
                });
            }
            if state.open < self.max {
                state.open += 1;
                drop(state);
                // Counted before connecting, so a failed connect must give it back.
                let mut taken = Taken {
                    pool: self,
                    conn: None,
                };
                taken.conn = Some(self.connect()?);
                return Ok(taken);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                crate::metrics::count_ldap_error();
                return Err(Error::Unavailable(format!(
                    "all {} LDAP connections busy for {:?}",
                    self.max, self.timeout
                )));
            }
            state = self
                .freed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Closes the idle connections: after one failed, the others (to the same
    /// server) most likely did too.
    fn drop_idle(&self) {
        let stale = {
            let mut state = self.lock();
            let stale = std::mem::take(&mut state.idle);
            state.open -= stale.len();
            stale
        };
        drop(stale);
    }

    /// A new, bound connection to the first URL that answers.
    fn connect(&self) -> Result<LdapConn> {
        let mut last = None;
        for url in &self.urls {
            match self.connect_to(url) {
                Ok(conn) => return Ok(conn),
                Err(e) => {
                    crate::metrics::count_ldap_error();
                    last = Some(format!("{url}: {e}"));
                }
            }
        }
        Err(Error::Unavailable(
            last.unwrap_or_else(|| "no LDAP URL configured".into()),
        ))
    }

    fn connect_to(&self, url: &str) -> ldap3::result::Result<LdapConn> {
        let settings = LdapConnSettings::new().set_conn_timeout(self.timeout);
        let mut conn = LdapConn::with_settings(settings, url)?;
        if let Some(dn) = &self.bind_dn {
            conn.with_timeout(self.timeout)
                .simple_bind(dn, &self.bind_password)?
                .success()?;
        }
        Ok(conn)
    }
}

fn unavailable(last: Option<String>) -> Error {
    Error::Unavailable(last.unwrap_or_else(|| "LDAP operation failed".into()))
}
