//! Child processes under test: started with their standard error collected line
//! by line (so a test can wait for a readiness line), stopped with a signal or
//! killed when the guard drops, and commands run to completion with a deadline.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStderr, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use crate::wait::wait_until;

/// How long the output pipes may stay open after the process exited (its
/// reader threads catching up, or a straggler of its group being killed).
pub const PIPE_CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// The standard-error lines of a child, filled by a reader thread.
#[derive(Default)]
struct StderrLog {
    /// The lines so far, and whether the stream has ended.
    lines: Mutex<(Vec<String>, bool)>,
    changed: Condvar,
}

/// What a finished process left behind.
#[derive(Debug)]
pub struct Finished {
    /// How it ended.
    pub status: ExitStatus,
    /// Everything it wrote to standard output (lossy UTF-8).
    pub stdout: String,
    /// Everything it wrote to standard error, `\n`-joined lines.
    pub stderr: String,
}

/// A running child with piped outputs, killed (SIGKILL, the whole process group
/// when it has its own) if the guard drops while it still runs.
pub struct Process {
    child: Child,
    /// Started in its own process group: signals from [`Process::kill`] and the
    /// clean-up after its exit reach everything it started.
    group: bool,
    stderr: Arc<StderrLog>,
    stdout: mpsc::Receiver<String>,
    exited: Option<ExitStatus>,
}

impl Process {
    /// Starts `command` with standard input from `/dev/null` and both outputs
    /// collected (standard error line by line).
    pub fn spawn(command: &mut Command) -> Process {
        Process::start(command, false, None)
    }

    /// Like [`Process::spawn`], in a new process group of its own, so that what it
    /// starts (a built-in server) is killed with it; once it has exited, whatever
    /// is left of its group is killed too.
    pub fn spawn_group(command: &mut Command) -> Process {
        Process::start(command, true, None)
    }

    fn start(command: &mut Command, group: bool, input: Option<&[u8]>) -> Process {
        command
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if group {
            command.process_group(0);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", name(command.get_program())));
        if let Some(input) = input {
            let mut stdin = child.stdin.take().expect("stdin is piped");
            // A child that exits without reading is judged by its status and output.
            let _ = stdin.write_all(input);
            // Dropped here: the child sees the end of its input.
        }
        let stderr = Arc::new(StderrLog::default());
        read_lines(
            child.stderr.take().expect("stderr is piped"),
            Arc::clone(&stderr),
        );
        let mut out = child.stdout.take().expect("stdout is piped");
        let (out_tx, stdout) = mpsc::channel();
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = out.read_to_end(&mut text);
            let _ = out_tx.send(String::from_utf8_lossy(&text).into_owned());
        });
        Process {
            child,
            group,
            stderr,
            stdout,
            exited: None,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn rustix_pid(&self) -> Pid {
        let raw = i32::try_from(self.child.id()).expect("pid fits in i32");
        Pid::from_raw(raw).expect("pid is positive")
    }

    /// Sends `sig` to the process (not its group).
    pub fn signal(&self, sig: Signal) {
        rustix::process::kill_process(self.rustix_pid(), sig).expect("send a signal");
    }

    /// SIGKILLs the process (and its group, if it has its own) and reaps it.
    pub fn kill(&mut self) {
        if self.group {
            let _ = rustix::process::kill_process_group(self.rustix_pid(), Signal::KILL);
        }
        if self.exited.is_none() {
            let _ = self.child.kill();
            self.exited = self.child.wait().ok();
        }
    }

    /// Waits (bounded) for the process to exit; `None` on timeout. After the exit
    /// the rest of its own group is killed, and standard error is read to its end
    /// (bounded), so the last lines are visible.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.exited {
            return Some(status);
        }
        let mut status = None;
        wait_until(timeout, || {
            status = self.child.try_wait().expect("poll the child process");
            status.is_some()
        });
        if status.is_some() {
            self.exited = status;
            if self.group {
                let _ = rustix::process::kill_process_group(self.rustix_pid(), Signal::KILL);
            }
            self.wait_stderr_end(PIPE_CLOSE_TIMEOUT);
        }
        status
    }

    /// Waits (bounded by `timeout`) for the exit and returns both outputs; kills
    /// the process and panics if it runs longer or its outputs stay open.
    pub fn finish(mut self, timeout: Duration) -> Finished {
        let Some(status) = self.wait_exit(timeout) else {
            self.kill();
            panic!(
                "pid {} still running after {timeout:?} (killed); stderr:\n{}",
                self.pid(),
                self.stderr_text()
            );
        };
        let stdout = self
            .stdout
            .recv_timeout(PIPE_CLOSE_TIMEOUT)
            .unwrap_or_else(|_| panic!("stdout still open {PIPE_CLOSE_TIMEOUT:?} after the exit"));
        assert!(
            self.stderr.lines.lock().expect("stderr log lock").1,
            "stderr still open {PIPE_CLOSE_TIMEOUT:?} after the exit"
        );
        Finished {
            status,
            stdout,
            stderr: self.stderr_text(),
        }
    }

    /// A copy of the standard-error lines so far.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.lines.lock().expect("stderr log lock").0.clone()
    }

    /// Standard error so far, one string.
    pub fn stderr_text(&self) -> String {
        self.stderr_lines().join("\n")
    }

    /// Waits (bounded) until `pred` holds for the standard-error lines so far;
    /// `false` on timeout or when standard error ended first.
    pub fn wait_for_stderr(
        &self,
        timeout: Duration,
        mut pred: impl FnMut(&[String]) -> bool,
    ) -> bool {
        let mut held = false;
        self.wait_log(timeout, |lines, ended| {
            held = pred(lines);
            held || ended
        });
        held
    }

    /// The first standard-error line for which `pick` gives a value, waiting at
    /// most `timeout`; panics (showing standard error) if none comes.
    #[track_caller]
    pub fn wait_for_line<T>(
        &self,
        timeout: Duration,
        mut pick: impl FnMut(&str) -> Option<T>,
    ) -> T {
        let mut found = None;
        let mut seen = 0;
        self.wait_for_stderr(timeout, |lines| {
            found = lines[seen..].iter().find_map(|l| pick(l));
            seen = lines.len();
            found.is_some()
        });
        found.unwrap_or_else(|| {
            panic!(
                "no expected line on stderr within {timeout:?}; stderr so far:\n{}",
                self.stderr_text()
            )
        })
    }

    fn wait_stderr_end(&self, timeout: Duration) {
        self.wait_log(timeout, |_, ended| ended);
    }

    /// Waits until `done(lines, ended)` holds for the standard-error log or
    /// `timeout` passes; returns whether it held.
    fn wait_log(&self, timeout: Duration, mut done: impl FnMut(&[String], bool) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut guard = self.stderr.lines.lock().expect("stderr log lock");
        loop {
            if done(&guard.0, guard.1) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            guard = self
                .stderr
                .changed
                .wait_timeout(guard, deadline - now)
                .expect("stderr log lock")
                .0;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.exited.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            self.kill();
        } else if self.group {
            let _ = rustix::process::kill_process_group(self.rustix_pid(), Signal::KILL);
        }
    }
}

/// Collects `stderr` into `log` line by line, marking its end.
fn read_lines(stderr: ChildStderr, log: Arc<StderrLog>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line).unwrap_or(0);
            let mut guard = log.lines.lock().expect("stderr log lock");
            if n == 0 {
                guard.1 = true;
                log.changed.notify_all();
                return;
            }
            let text = String::from_utf8_lossy(&line);
            guard.0.push(text.trim_end_matches(['\r', '\n']).to_owned());
            log.changed.notify_all();
        }
    });
}

/// Runs `command` to completion with `input` on its standard input, bounded by
/// `timeout` (killed after it, with a panic showing its standard error).
pub fn run(command: &mut Command, input: &[u8], timeout: Duration) -> Finished {
    let what = format!(
        "{} {:?}",
        name(command.get_program()),
        command.get_args().collect::<Vec<_>>()
    );
    let mut process = Process::start(command, false, Some(input));
    if process.wait_exit(timeout).is_none() {
        process.kill();
        panic!(
            "{what} still running after {timeout:?} (killed); stderr:\n{}",
            process.stderr_text()
        );
    }
    process.finish(timeout)
}

fn name(program: &OsStr) -> String {
    program.to_string_lossy().into_owned()
}

/// The `(scheme, address)` of a readiness line `… listening on SCHEME://ADDR` or
/// `… listening on ADDR, …` (scheme `""`); the address ends at white space or a
/// comma.
pub fn listening_on(line: &str) -> Option<(&str, SocketAddr)> {
    let (_, rest) = line.split_once("listening on ")?;
    let token = rest.split([' ', ',']).next()?;
    let (scheme, addr) = token.split_once("://").unwrap_or(("", token));
    addr.trim().parse().ok().map(|a| (scheme, a))
}
