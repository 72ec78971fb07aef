//! `stoa queue list | flush | delete | hold | release` against a running
//! `stoa serve` whose smart host (a sink in this file, on port 0) first refuses
//! every connection, so mail stays queued, then accepts: mail submitted with
//! Python's smtplib is listed (text and JSON), held (a flush does not attempt
//! it), released (a flush delivers it), deleted (never delivered), and deleted
//! while an attempt is in flight (the command waits for it).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use stoa_testkit::wait_until;

use common::{Server, ServerBuilder};

const RUN_TIMEOUT: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(20);

/// What the smart host does with a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `421` at once: a temporary failure, the message stays queued.
    Refuse,
    /// A whole SMTP conversation; the message's `Subject:` is recorded.
    Accept,
    /// Nothing until the mode changes (an attempt in flight).
    Stall,
}

#[derive(Debug)]
struct SinkState {
    mode: Mode,
    connections: usize,
    stalled: usize,
    subjects: Vec<String>,
}

/// A smart host on 127.0.0.1:0, one thread per connection.
struct Sink {
    addr: SocketAddr,
    state: Arc<(Mutex<SinkState>, Condvar)>,
}

impl Sink {
    fn start(mode: Mode) -> Sink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the sink");
        let addr = listener.local_addr().expect("sink address");
        let state = Arc::new((
            Mutex::new(SinkState {
                mode,
                connections: 0,
                stalled: 0,
                subjects: Vec::new(),
            }),
            Condvar::new(),
        ));
        let shared = Arc::clone(&state);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let state = Arc::clone(&shared);
                std::thread::spawn(move || {
                    let _ = converse(stream, &state);
                });
            }
        });
        Sink { addr, state }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SinkState> {
        self.state.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn set_mode(&self, mode: Mode) {
        self.lock().mode = mode;
        self.state.1.notify_all();
    }

    fn connections(&self) -> usize {
        self.lock().connections
    }

    fn stalled(&self) -> usize {
        self.lock().stalled
    }

    fn subjects(&self) -> Vec<String> {
        self.lock().subjects.clone()
    }
}

/// One connection to the sink, in the mode of the moment.
fn converse(stream: TcpStream, state: &(Mutex<SinkState>, Condvar)) -> std::io::Result<()> {
    stream.set_read_timeout(Some(RUN_TIMEOUT))?;
    let mode = {
        let mut s = state.0.lock().unwrap_or_else(PoisonError::into_inner);
        s.connections += 1;
        if s.mode == Mode::Stall {
            s.stalled += 1;
            while s.mode == Mode::Stall {
                s = state.1.wait(s).unwrap_or_else(PoisonError::into_inner);
            }
        }
        s.mode
    };
    let mut out = stream.try_clone()?;
    if mode == Mode::Refuse {
        return out.write_all(b"421 sink.test busy, try later\r\n");
    }
    out.write_all(b"220 sink.test ESMTP\r\n")?;
    let mut lines = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let verb = line.get(..4).unwrap_or("").to_ascii_uppercase();
        match verb.as_str() {
            "DATA" => {
                out.write_all(b"354 go on\r\n")?;
                let mut subject = String::new();
                loop {
                    line.clear();
                    if lines.read_line(&mut line)? == 0 {
                        return Ok(());
                    }
                    if line == ".\r\n" {
                        break;
                    }
                    if let Some(s) = line.strip_prefix("Subject: ") {
                        subject = s.trim_end().to_owned();
                    }
                }
                let mut s = state.0.lock().unwrap_or_else(PoisonError::into_inner);
                s.subjects.push(subject);
                drop(s);
                out.write_all(b"250 2.0.0 stored\r\n")?;
            }
            "QUIT" => return out.write_all(b"221 bye\r\n"),
            _ => out.write_all(b"250 sink.test\r\n")?,
        }
    }
}

/// `stoa serve` with an SMTP listener relaying everything from 127.0.0.1 to
/// `sink`.
fn serve(mail_dir: &Path, sink: &Sink) -> Server {
    ServerBuilder::mail(mail_dir)
        .args([
            "--smtp-listen",
            "127.0.0.1:0",
            "--trusted-net",
            "127.0.0.0/8",
        ])
        .args(["--relay-host", &sink.addr.to_string()])
        .start()
}

/// `stoa queue ARGS --mail-dir DIR`: (exit code, stdout, stderr).
fn queue(mail_dir: &Path, args: &[&str]) -> (i32, String, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stoa"));
    command
        .arg("queue")
        .args(args)
        .arg("--mail-dir")
        .arg(mail_dir)
        .env_remove("RUST_LOG");
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    (done.status.code().unwrap_or(-1), done.stdout, done.stderr)
}

/// `stoa queue list --json`, parsed.
fn listed(mail_dir: &Path) -> Vec<Value> {
    let (code, out, err) = queue(mail_dir, &["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    match serde_json::from_str(&out) {
        Ok(Value::Array(messages)) => messages,
        other => panic!("not a JSON array: {other:?} from {out:?}"),
    }
}

/// The listed message from `sender`.
fn from(mail_dir: &Path, sender: &str) -> Option<Value> {
    listed(mail_dir).into_iter().find(|m| m["sender"] == sender)
}

/// Waits until the message from `sender` has had `n` attempts; returns it.
fn wait_attempts(mail_dir: &Path, sender: &str, n: u64) -> Value {
    let ok = wait_until(WAIT, || {
        from(mail_dir, sender).is_some_and(|m| m["attempts"].as_u64() >= Some(n))
    });
    assert!(
        ok,
        "{sender}'s message did not get {n} attempts: {:?}",
        listed(mail_dir)
    );
    from(mail_dir, sender).expect("listed")
}

/// Submits one message per sender (subject `msg-SENDER`) to `server` with
/// smtplib.
fn submit(server: &Server, senders: &[&str]) {
    let port = server.smtp_addrs[0].port();
    let mut script = format!("import smtplib\ns = smtplib.SMTP('127.0.0.1', {port})\n");
    for sender in senders {
        script.push_str(&format!(
            "s.sendmail('{sender}', ['ann@remote.test', 'bob@remote.test'], \
             'From: <{sender}>\\r\\nSubject: msg-{sender}\\r\\n\\r\\nHello.\\r\\n')\n"
        ));
    }
    script.push_str("s.quit()\n");
    let mut command = Command::new("python3");
    command.args(["-c", &script]);
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    assert!(done.status.success(), "smtplib: {}", done.stderr);
}

fn id_of(message: &Value) -> String {
    message["id"].as_str().expect("an id").to_owned()
}

#[test]
fn list_hold_flush_release_and_delete_beside_a_running_server() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("mail");
    let sink = Sink::start(Mode::Refuse);
    let server = serve(&dir, &sink);
    submit(&server, &["a@here.test", "b@here.test", "c@here.test"]);
    // Each is tried once at arrival and refused; the next try is minutes away.
    let a = id_of(&wait_attempts(&dir, "a@here.test", 1));
    let b = id_of(&wait_attempts(&dir, "b@here.test", 1));
    let c = id_of(&wait_attempts(&dir, "c@here.test", 1));

    // The listing, for people.
    let (code, text, err) = queue(&dir, &["list"]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        &a,
        &b,
        &c,
        "a@here.test",
        "ann@remote.test",
        "bob@remote.test",
    ] {
        assert!(text.contains(needle), "{needle} missing in:\n{text}");
    }
    assert!(
        text.contains("421 sink.test busy"),
        "no last error in:\n{text}"
    );
    assert!(text.contains("-- 3 messages"), "{text}");
    // And for scripts.
    let message = from(&dir, "a@here.test").expect("listed");
    assert_eq!(message["held"], false);
    assert!(message["size"].as_u64() > Some(30), "{message}");
    let recipients = message["recipients"].as_array().expect("recipients");
    assert_eq!(recipients.len(), 2, "{message}");
    assert!(
        recipients[0]["diagnostic"]
            .as_str()
            .is_some_and(|d| d.contains("421")),
        "{message}"
    );

    // Held: a flush tries the others, not it.
    let (code, _, err) = queue(&dir, &["hold", &a]);
    assert_eq!(code, 0, "{err}");
    let (code, text, _) = queue(&dir, &["list"]);
    assert_eq!(code, 0);
    assert!(text.contains(&format!("{a}!")), "no hold mark in:\n{text}");
    assert_eq!(from(&dir, "a@here.test").expect("listed")["held"], true);
    let before = sink.connections();
    let (code, _, err) = queue(&dir, &["flush"]);
    assert_eq!(code, 0, "{err}");
    wait_attempts(&dir, "b@here.test", 2);
    wait_attempts(&dir, "c@here.test", 2);
    let skipped = format!("queue {a}: on hold, not attempted");
    assert!(
        server.wait_for_stderr(WAIT, |lines| lines.iter().any(|l| l.contains(&skipped))),
        "the held message was not skipped (attempted, or the flush missed it):\n{}",
        server.stderr_text()
    );
    assert_eq!(
        sink.connections(),
        before + 2,
        "the held message was attempted"
    );
    assert_eq!(from(&dir, "a@here.test").expect("queued")["attempts"], 1);

    // Deleted: gone at once, and never delivered (no bounce either).
    let (code, _, err) = queue(&dir, &["delete", &c]);
    assert_eq!(code, 0, "{err}");
    assert!(from(&dir, "c@here.test").is_none(), "{:?}", listed(&dir));
    assert!(!dir.join(format!("queue/{c}.msg")).exists());

    // Released and flushed: delivered, with the other one.
    sink.set_mode(Mode::Accept);
    let (code, _, err) = queue(&dir, &["release", &a]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = queue(&dir, &["flush"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        wait_until(WAIT, || listed(&dir).is_empty()),
        "still queued: {:?}",
        listed(&dir)
    );
    let mut subjects = sink.subjects();
    subjects.sort();
    assert_eq!(subjects, ["msg-a@here.test", "msg-b@here.test"]);
    let (code, text, _) = queue(&dir, &["list"]);
    assert_eq!(code, 0);
    assert_eq!(text, "The mail queue is empty.\n");
    assert!(
        !server.stderr_text().contains("bounce queued"),
        "{}",
        server.stderr_text()
    );
}

/// Whether a thread of process `pid` waits for a file lock.
fn waits_for_a_lock(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_to_string(task.path().join("wchan")).is_ok_and(|w| w.contains("lock"))
    })
}

#[test]
fn delete_waits_for_the_attempt_in_flight() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("mail");
    let sink = Sink::start(Mode::Refuse);
    let server = serve(&dir, &sink);
    submit(&server, &["a@here.test"]);
    let a = id_of(&wait_attempts(&dir, "a@here.test", 1));

    // An attempt that the smart host keeps waiting.
    sink.set_mode(Mode::Stall);
    let (code, _, err) = queue(&dir, &["flush"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        wait_until(WAIT, || sink.stalled() == 1),
        "no attempt started"
    );
    let delete = Command::new(env!("CARGO_BIN_EXE_stoa"))
        .args(["queue", "delete", &a, "--mail-dir"])
        .arg(&dir)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn stoa queue delete");
    let pid = delete.id();
    let waited = wait_until(WAIT, || waits_for_a_lock(pid));
    // The attempt ends with the message delivered: the deletion, which waited
    // for it, finds nothing left to delete and says so.
    sink.set_mode(Mode::Accept);
    let out = delete.wait_with_output().expect("stoa queue delete");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(waited, "the deletion did not wait for the attempt: {err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("no message {a} in the queue")),
        "{err}"
    );
    assert_eq!(sink.subjects(), ["msg-a@here.test"]);
    assert!(listed(&dir).is_empty(), "{:?}", listed(&dir));
}

#[test]
fn bad_ids_a_missing_queue_and_no_server_are_errors() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("mail");
    // A mistyped mail directory is not an empty queue.
    let (code, _, err) = queue(&dir, &["list"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no mail directory"), "{err}");
    std::fs::create_dir(&dir).expect("mkdir");
    let (code, out, err) = queue(&dir, &["list"]);
    assert_eq!(
        (code, out.as_str()),
        (0, "The mail queue is empty.\n"),
        "{err}"
    );
    assert!(listed(&dir).is_empty());

    let (code, _, err) = queue(&dir, &["flush"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no server delivers from"), "{err}");

    let unknown = "0123456789ABCDEF01234";
    for command in ["delete", "hold", "release"] {
        let (code, _, err) = queue(&dir, &[command, "../../etc/passwd", unknown]);
        assert_eq!(code, 1, "{command}: {err}");
        assert!(
            err.contains("\"../../etc/passwd\" is not a queue id"),
            "{err}"
        );
        assert!(err.contains("nothing was done"), "{err}");
        let (code, _, err) = queue(&dir, &[command, unknown]);
        assert_eq!(code, 1, "{command}: {err}");
        assert!(
            err.contains(&format!("no message {unknown} in the queue")),
            "{err}"
        );
    }
    let (code, _, err) = queue(&dir, &["delete"]);
    assert_eq!(code, 2, "an id or --all is required: {err}");
}
