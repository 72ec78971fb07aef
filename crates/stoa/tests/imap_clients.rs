//! The IMAP server in the binary driven by real clients: mbsync (isync) syncing
//! three folders both ways with a Maildir, mutt in IMAP mode driven through tmux,
//! fetchmail over IMAP into an MDA, and Python's imaplib over STARTTLS and IMAPS,
//! in IDLE, and beside poplib on the same INBOX. Mail arrives through Stoa's SMTP
//! (smtplib); every check reads the server back over imaplib.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use stoa_testkit::wait_until;

use common::{ServerBuilder, add_user, tls_pair};

/// Cap on one client run (mbsync, fetchmail, a Python script, a tmux command).
const RUN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long mutt gets to show a screen or to make a change on the server.
const SCREEN_TIMEOUT: Duration = Duration::from_secs(20);
const JOE: &str = "joe@example.test";
const PASSWORD: &str = "joe-secret";

/// What every Python script starts with: imaplib and smtplib helpers for Joe.
/// `@IMAP@`, `@SMTP@`, `@POP3@` and `@CERT@` are replaced by the test's values.
const PRELUDE: &str = r#"
import imaplib, poplib, re, smtplib, socket, ssl, sys, time
IMAP, SMTP, POP3, CERT = @IMAP@, @SMTP@, @POP3@, "@CERT@"
USER, PASS = "joe@example.test", "joe-secret"

def ok(result):
    typ, data = result
    assert typ == "OK", (typ, data)
    return data

def connect():
    c = imaplib.IMAP4("127.0.0.1", IMAP, timeout=10)
    ok(c.login(USER, PASS))
    return c

def message(subject):
    return ("From: alice@ext.test\r\nTo: %s\r\nSubject: %s\r\n\r\nbody of %s\r\n"
            % (USER, subject, subject))

def deliver(*subjects):
    s = smtplib.SMTP("127.0.0.1", SMTP, timeout=10)
    for subject in subjects:
        s.sendmail("alice@ext.test", [USER], message(subject))
    s.quit()

def count(c, folder):
    data = ok(c.status(folder, "(MESSAGES)"))
    return int(re.search(rb"MESSAGES (\d+)", data[0]).group(1))

def wait_count(folder, n):
    """Polls (bounded) until `folder` holds `n` messages: the queue delivers in the
    background."""
    c = connect()
    deadline = time.time() + 15
    while count(c, folder) != n:
        assert time.time() < deadline, "%s never held %d messages" % (folder, n)
        time.sleep(0.05)
    c.logout()

def append(c, folder, subject, flags=None):
    ok(c.append(folder, flags, None, message(subject).encode()))

def subjects(c):
    """{sequence number: subject} of the selected folder."""
    out = {}
    for item in ok(c.fetch("1:*", "(BODY.PEEK[HEADER.FIELDS (SUBJECT)])")):
        if isinstance(item, tuple):
            seq = int(item[0].split()[0])
            out[seq] = item[1].decode().strip().split(":", 1)[1].strip()
    return out

def find(c, subject):
    """The sequence number of `subject` in the selected folder."""
    return [n for n, s in subjects(c).items() if s == subject][0]

def messages(c, folder):
    """[(subject, [flags])] of `folder`, by subject, flags sorted (\\Recent, which
    only the first session to see a message gets, left out)."""
    n = int(ok(c.select(folder, readonly=True))[0])
    if n == 0:
        return []
    flags = {}
    for line in ok(c.fetch("1:*", "(FLAGS)")):
        m = re.match(rb"(\d+) \(.*FLAGS \(([^)]*)\)", line)
        flags[int(m.group(1))] = sorted(
            f for f in m.group(2).decode().split() if f != "\\Recent")
    return sorted((s, flags[n]) for n, s in subjects(c).items())

def show(c, folder):
    """`folder: subject [flags], ...`, as the Rust side renders a Maildir."""
    return folder + ": " + ", ".join(
        "%s [%s]" % (s, " ".join(f)) for s, f in messages(c, folder))
"#;

/// Joe's mail server (SMTP and IMAP on loopback plus `extra` flags) and a home
/// directory for the clients.
struct Fixture {
    home: tempfile::TempDir,
    server: common::Server,
    cert: PathBuf,
}

impl Fixture {
    fn start(extra: &[&str]) -> Fixture {
        let home = tempfile::tempdir().expect("tempdir");
        let mail = home.path().join("mail");
        add_user(&mail, JOE, PASSWORD);
        let (cert, key) = tls_pair(home.path(), "localhost");
        let server = ServerBuilder::mail(&mail)
            .args([
                "--smtp-listen",
                "127.0.0.1:0",
                "--imap-listen",
                "127.0.0.1:0",
            ])
            .args(["--tls-cert", arg(&cert), "--tls-key", arg(&key)])
            .args(extra)
            .start();
        Fixture { home, server, cert }
    }

    fn home(&self) -> &Path {
        self.home.path()
    }

    fn imap_port(&self) -> u16 {
        self.server.imap_addrs[0].port()
    }

    /// Runs [`PRELUDE`] then `body` in Python; its standard output. Panics with
    /// everything it wrote if it fails.
    fn python(&self, body: &str) -> String {
        let port = |addrs: &[std::net::SocketAddr]| addrs.first().map_or(0, |a| a.port());
        let script = PRELUDE
            .replace("@IMAP@", &self.imap_port().to_string())
            .replace("@SMTP@", &port(&self.server.smtp_addrs).to_string())
            .replace("@POP3@", &port(&self.server.pop3_addrs).to_string())
            .replace("@CERT@", arg(&self.cert))
            + body;
        let (code, out) = run("python3", &["-c", &script], self.home());
        assert_eq!(code, 0, "python failed ({code}):\n{out}");
        out
    }

    /// The server's view of `folders`, one [`PRELUDE`] `show` line each.
    fn server_state(&self, folders: &[&str]) -> String {
        self.python(&format!(
            "c = connect()\nfor f in {folders:?}:\n    print(show(c, f))\n"
        ))
    }
}

/// Runs `program args` in `home` with `HOME=home`, bounded; (exit code, stdout
/// and stderr).
fn run(program: &str, args: &[&str], home: &Path) -> (i32, String) {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(home)
        .env("HOME", home)
        .env_remove("RUST_LOG");
    let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
    let output = format!("{}{}", done.stdout, done.stderr);
    (done.status.code().unwrap_or(-1), output)
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// Whether a client is missing, said on standard error (the convention of
/// `fetchmail.rs` and `pop3.rs`: scripts/test.sh and CI install them all).
fn missing(programs: &[&str]) -> bool {
    let absent: Vec<&str> = programs
        .iter()
        .copied()
        .filter(|p| Command::new(p).arg("-h").output().is_err())
        .collect();
    if !absent.is_empty() {
        eprintln!("{absent:?} not installed (scripts/test.sh installs them); skipping");
    }
    !absent.is_empty()
}

// ---------------------------------------------------------------------------
// mbsync
// ---------------------------------------------------------------------------

/// The three synced folders, as the server and the Maildir name them.
const SYNCED: [&str; 3] = ["INBOX", "Local", "Work"];

/// mbsync's configuration: the server's three folders against a Maildir tree
/// (`Mail/`, INBOX as `Inbox/` beside it), created and expunged both ways.
fn mbsync_config(home: &Path, port: u16) -> PathBuf {
    let config = home.join("mbsyncrc");
    let home = arg(home);
    std::fs::write(
        &config,
        format!(
            "IMAPAccount stoa\nHost 127.0.0.1\nPort {port}\nUser {JOE}\nPass {PASSWORD}\n\
             SSLType None\nAuthMechs LOGIN\n\n\
             IMAPStore stoa-far\nAccount stoa\n\n\
             MaildirStore local\nPath {home}/Mail/\nInbox {home}/Inbox\nSubFolders Verbatim\n\n\
             Channel joe\nFar :stoa-far:\nNear :local:\nPatterns INBOX Work Local\n\
             Create Both\nExpunge Both\nSyncState *\nSync All\n"
        ),
    )
    .expect("write mbsyncrc");
    config
}

/// One mbsync run of every channel, tracing its IMAP commands (`-Dn`); its output.
fn mbsync(home: &Path, config: &Path) -> String {
    let (code, out) = run("mbsync", &["-V", "-Dn", "-c", arg(config), "-a"], home);
    assert_eq!(code, 0, "mbsync failed ({code}):\n{out}");
    out
}

/// The Maildir folder of an IMAP name.
fn maildir_folder(home: &Path, folder: &str) -> PathBuf {
    match folder {
        "INBOX" => home.join("Inbox"),
        other => home.join("Mail").join(other),
    }
}

/// Every message file of a Maildir folder (`new` and `cur`), with its subject.
fn maildir_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    for sub in ["new", "cur"] {
        let Ok(entries) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("a Maildir entry").path();
            let text = std::fs::read_to_string(&path).expect("read a message");
            let subject = text
                .lines()
                .find_map(|l| l.strip_prefix("Subject: "))
                .unwrap_or_default()
                .to_owned();
            files.push((path, subject));
        }
    }
    files
}

/// The IMAP flags a Maildir file name carries (`:2,FS`), sorted.
fn maildir_flags(path: &Path) -> Vec<&'static str> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let info = name.split_once(":2,").map_or("", |(_, i)| i);
    let mut flags: Vec<&'static str> = info
        .chars()
        .filter_map(|c| match c {
            'D' => Some("\\Draft"),
            'F' => Some("\\Flagged"),
            'R' => Some("\\Answered"),
            'S' => Some("\\Seen"),
            'T' => Some("\\Deleted"),
            _ => None,
        })
        .collect();
    flags.sort_unstable();
    flags
}

/// The Maildir side, rendered as [`PRELUDE`]'s `show` renders the server's.
fn local_state(home: &Path) -> String {
    let mut out = String::new();
    for folder in SYNCED {
        let mut messages: Vec<(String, String)> = maildir_files(&maildir_folder(home, folder))
            .into_iter()
            .map(|(path, subject)| (subject, maildir_flags(&path).join(" ")))
            .collect();
        messages.sort();
        let list: Vec<String> = messages.iter().map(|(s, f)| format!("{s} [{f}]")).collect();
        out += &format!("{folder}: {}\n", list.join(", "));
    }
    out
}

/// Every message file name of the Maildir side (what a run that changes nothing
/// leaves as it was).
fn local_names(home: &Path) -> BTreeMap<String, Vec<String>> {
    SYNCED
        .iter()
        .map(|folder| {
            let mut names: Vec<String> = maildir_files(&maildir_folder(home, folder))
                .into_iter()
                .map(|(p, _)| p.to_string_lossy().into_owned())
                .collect();
            names.sort();
            ((*folder).to_owned(), names)
        })
        .collect()
}

/// The server's STATUS of the synced folders: a run that changes nothing leaves
/// MESSAGES, UIDNEXT and HIGHESTMODSEQ as they were.
fn server_status(f: &Fixture) -> String {
    f.python(&format!(
        "c = connect()\nfor f in {SYNCED:?}:\n    \
         print(ok(c.status(f, '(MESSAGES UIDNEXT UIDVALIDITY HIGHESTMODSEQ)'))[0].decode())\n"
    ))
}

/// Sets a Maildir message's flags by renaming it into `cur` (as a client does).
fn set_local_flags(home: &Path, folder: &str, subject: &str, flags: &str) {
    let dir = maildir_folder(home, folder);
    let (path, _) = maildir_files(&dir)
        .into_iter()
        .find(|(_, s)| s == subject)
        .unwrap_or_else(|| panic!("no {subject:?} in {}", dir.display()));
    let name = path.file_name().and_then(|n| n.to_str()).expect("a name");
    let base = name.split_once(":2,").map_or(name, |(b, _)| b);
    std::fs::rename(&path, dir.join("cur").join(format!("{base}:2,{flags}")))
        .expect("rename the message");
}

/// mbsync run twice after each side changed: the first run's results on both
/// sides, then a second run that changes neither side.
fn sync_twice(f: &Fixture, config: &Path, expected: &str) {
    let out = mbsync(f.home(), config);
    assert_eq!(
        local_state(f.home()),
        expected,
        "Maildir after mbsync:\n{out}"
    );
    assert_eq!(
        f.server_state(&SYNCED),
        expected,
        "server after mbsync:\n{out}"
    );
    let (names, status) = (local_names(f.home()), server_status(f));
    let again = mbsync(f.home(), config);
    // mbsync prints its counters only to a terminal: its trace of the commands it
    // sent (`>>> TAG COMMAND ...`) shows it changed nothing on the server.
    let changes: Vec<&str> = again
        .lines()
        .filter_map(|l| l.strip_prefix(">>> "))
        .filter(|command| {
            let verb = command
                .split_whitespace()
                .skip(1)
                .take(2)
                .collect::<Vec<_>>();
            matches!(
                verb.as_slice(),
                [
                    "APPEND" | "CREATE" | "DELETE" | "EXPUNGE" | "STORE" | "MOVE" | "COPY",
                    ..
                ] | ["UID", "STORE" | "EXPUNGE" | "MOVE" | "COPY"]
            )
        })
        .collect();
    assert!(
        changes.is_empty(),
        "the second run changed the server: {changes:?}\n{again}"
    );
    assert!(again.contains(">>> 1 LOGIN"), "no IMAP trace:\n{again}");
    assert_eq!(local_names(f.home()), names, "second run:\n{again}");
    assert_eq!(server_status(f), status, "second run:\n{again}");
    assert_eq!(f.server_state(&SYNCED), expected, "second run:\n{again}");
}

#[test]
fn mbsync_syncs_three_folders_both_ways_and_a_second_run_changes_nothing() {
    if missing(&["mbsync", "python3"]) {
        return;
    }
    let f = Fixture::start(&[]);
    // The server: three deliveries in INBOX, a folder made over IMAP with two.
    f.python(
        r#"
deliver("in 1", "in 2", "in 3")
wait_count("INBOX", 3)
c = connect()
ok(c.create("Work"))
append(c, "Work", "work 1")
append(c, "Work", "work 2", "(\\Flagged)")
"#,
    );
    // The Maildir: a folder the server lacks, with a read message.
    let local = maildir_folder(f.home(), "Local");
    for sub in ["tmp", "new", "cur"] {
        std::fs::create_dir_all(local.join(sub)).expect("mkdir");
    }
    std::fs::write(
        local.join("cur/1700000000.1_1.localhost:2,S"),
        format!("From: joe@example.test\nTo: {JOE}\nSubject: local 1\n\nbody of local 1\n"),
    )
    .expect("write a local message");
    let config = mbsync_config(f.home(), f.imap_port());
    sync_twice(
        &f,
        &config,
        "INBOX: in 1 [], in 2 [], in 3 []\n\
         Local: local 1 [\\Seen]\n\
         Work: work 1 [], work 2 [\\Flagged]\n",
    );
    // Local changes: read and flag, read, delete; server changes: flag, delete.
    set_local_flags(f.home(), "INBOX", "in 1", "FS");
    set_local_flags(f.home(), "Work", "work 1", "S");
    let work = maildir_folder(f.home(), "Work");
    let (work2, _) = maildir_files(&work)
        .into_iter()
        .find(|(_, s)| s == "work 2")
        .expect("work 2 synced");
    std::fs::remove_file(work2).expect("delete work 2 locally");
    f.python(
        r#"
c = connect()
ok(c.select("INBOX"))
ok(c.store(str(find(c, "in 2")), "+FLAGS", "(\\Flagged)"))
ok(c.store(str(find(c, "in 3")), "+FLAGS", "(\\Deleted)"))
ok(c.expunge())
ok(c.select("Local"))
ok(c.store(str(find(c, "local 1")), "+FLAGS", "(\\Flagged)"))
"#,
    );
    sync_twice(
        &f,
        &config,
        "INBOX: in 1 [\\Flagged \\Seen], in 2 [\\Flagged]\n\
         Local: local 1 [\\Flagged \\Seen]\n\
         Work: work 1 [\\Seen]\n",
    );
}

// ---------------------------------------------------------------------------
// mutt through tmux
// ---------------------------------------------------------------------------

/// A tmux server of the test's own (its socket in the test's directory) running
/// one session; killed when dropped, so a failing test leaves no mutt behind.
struct Tmux {
    socket: PathBuf,
    home: PathBuf,
}

impl Tmux {
    const SESSION: &'static str = "stoa";

    fn start(home: &Path, command: &str) -> Tmux {
        let tmux = Tmux {
            socket: home.join("tmux.sock"),
            home: home.to_owned(),
        };
        tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            Self::SESSION,
            "-x",
            "150",
            "-y",
            "40",
            command,
        ]);
        tmux
    }

    fn run(&self, args: &[&str]) -> String {
        let mut command = Command::new("tmux");
        command
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .current_dir(&self.home)
            .env("HOME", &self.home)
            .env("TERM", "xterm")
            .env_remove("TMUX");
        let done = stoa_testkit::run(&mut command, b"", RUN_TIMEOUT);
        assert!(done.status.success(), "tmux {args:?}: {}", done.stderr);
        done.stdout
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", Self::SESSION];
        args.extend_from_slice(keys);
        self.run(&args);
    }

    fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", Self::SESSION])
    }

    /// Waits (bounded) until the screen shows `text`; the screen.
    fn wait_for(&self, text: &str) -> String {
        let mut screen = String::new();
        let shown = wait_until(SCREEN_TIMEOUT, || {
            screen = self.screen();
            screen.contains(text)
        });
        assert!(shown, "mutt never showed {text:?}; the screen:\n{screen}");
        screen
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .output();
    }
}

#[test]
fn mutt_reads_flags_moves_and_deletes_over_imap() {
    if missing(&["mutt", "tmux", "python3"]) {
        return;
    }
    let f = Fixture::start(&[]);
    f.python(
        r#"
deliver("alpha to read", "bravo to move", "charlie to delete")
wait_count("INBOX", 3)
"#,
    );
    let muttrc = f.home().join("muttrc");
    std::fs::write(
        &muttrc,
        format!(
            "set imap_user=\"{JOE}\"\nset imap_pass=\"{PASSWORD}\"\n\
             set folder=\"imap://127.0.0.1:{}/\"\nset spoolfile=\"+INBOX\"\n\
             set ssl_starttls=no\nset ssl_force_tls=no\n\
             set record=\"\"\nset postponed=\"\"\nset header_cache=\"\"\n\
             set message_cachedir=\"\"\nset confirmappend=no\nset confirmcreate=no\n\
             set delete=yes\nset move=no\nset mark_old=no\nset wait_key=no\n\
             set pager_stop=yes\nset beep=no\nset sort=date-received\n",
            f.imap_port()
        ),
    )
    .expect("write muttrc");
    let mutt = Tmux::start(f.home(), &format!("mutt -n -F {}", arg(&muttrc)));
    mutt.wait_for("charlie to delete");
    // Read alpha: its body on screen.
    mutt.keys(&["/alpha", "Enter"]);
    mutt.keys(&["Enter"]);
    mutt.wait_for("body of alpha to read");
    // Back to the index, flag it.
    mutt.keys(&["i"]);
    mutt.wait_for("charlie to delete");
    mutt.keys(&["F"]);
    // Save bravo, unread, to Archive (which marks it deleted here).
    mutt.keys(&["/bravo", "Enter", "s"]);
    mutt.wait_for("Save to mailbox");
    mutt.keys(&["C-u", "=Archive", "Enter"]);
    // Saved, bravo is marked deleted in the index (`D` in its flag column).
    let mut screen = String::new();
    let saved = wait_until(SCREEN_TIMEOUT, || {
        screen = mutt.screen();
        screen.lines().any(|l| {
            l.contains("bravo to move") && matches!(l.split_whitespace().nth(1), Some("ND" | "D"))
        })
    });
    assert!(saved, "bravo never marked deleted; the screen:\n{screen}");
    // Delete charlie, then sync.
    mutt.keys(&["/charlie", "Enter", "d", "$"]);
    mutt_synced(
        &f,
        &mutt,
        "INBOX: alpha to read [\\Flagged \\Seen]\nArchive: bravo to move []\n",
    );
    // In the folder: open Archive, read bravo there, sync.
    mutt.keys(&["c"]);
    mutt.wait_for("Open mailbox");
    mutt.keys(&["C-u", "=Archive", "Enter"]);
    mutt.wait_for("Mutt: =Archive [Msgs:1");
    mutt.keys(&["Enter"]);
    mutt.wait_for("body of bravo to move");
    mutt.keys(&["i", "$"]);
    mutt_synced(
        &f,
        &mutt,
        "INBOX: alpha to read [\\Flagged \\Seen]\nArchive: bravo to move [\\Seen]\n",
    );
    mutt.keys(&["q"]);
}

/// Waits (bounded) until the server's INBOX and Archive are `expected`.
fn mutt_synced(f: &Fixture, mutt: &Tmux, expected: &str) {
    let mut state = String::new();
    let done = wait_until(SCREEN_TIMEOUT, || {
        state = f.server_state(&["INBOX", "Archive"]);
        state == expected
    });
    assert!(
        done,
        "the server after mutt's sync:\n{state}\nthe screen:\n{}",
        mutt.screen()
    );
}

// ---------------------------------------------------------------------------
// fetchmail
// ---------------------------------------------------------------------------

/// The MDA fetchmail runs (`sh -c`): each message into its own file of `$1`.
const MDA: &str = "#!/bin/sh\nmkdir -p \"$1\" && f=$(mktemp \"$1/msg.XXXXXX\") && cat > \"$f\"\n";

/// One fetchmail run over IMAP with `flags`, delivering into `out/`; its exit code
/// and output. fetchmail asks for STARTTLS whether offered or not (as it should):
/// the certificate is checked, as the mail guide's POP3 recipe does.
fn fetchmail(f: &Fixture, out: &str, flags: &[&str]) -> (i32, String) {
    let home = f.home();
    let mda = format!("/bin/sh {}/mda.sh {}/{out}", arg(home), arg(home));
    let mut args = vec![
        "-f",
        "fetchmailrc",
        // fetchmail run by root locks /var/run/fetchmail.pid: one of its own.
        "--pidfile",
        "fetchmail.pid",
        "--nodetach",
        "--nosyslog",
        "--sslproto",
        "tls1.2+",
        "--sslcertck",
        "--sslcertfile",
        arg(&f.cert),
        "--sslcommonname",
        "localhost",
        "--mda",
        &mda,
    ];
    args.extend_from_slice(flags);
    args.push("127.0.0.1");
    run("fetchmail", &args, home)
}

/// The subjects of the messages the MDA wrote into `out/`, sorted.
fn delivered(home: &Path, out: &str) -> Vec<String> {
    let mut subjects: Vec<String> = std::fs::read_dir(home.join(out))
        .map(|entries| {
            entries
                .map(|e| std::fs::read_to_string(e.expect("entry").path()).expect("read"))
                .map(|text| {
                    text.lines()
                        .find_map(|l| l.strip_prefix("Subject: "))
                        .unwrap_or("(no subject)")
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default();
    subjects.sort();
    subjects
}

#[test]
fn fetchmail_over_imap_keeps_or_expunges() {
    if missing(&["fetchmail", "python3"]) {
        return;
    }
    let f = Fixture::start(&[]);
    let home = f.home();
    std::fs::write(home.join("mda.sh"), MDA).expect("write the MDA");
    let rc = home.join("fetchmailrc");
    std::fs::write(
        &rc,
        format!(
            "poll 127.0.0.1 proto IMAP service {} user \"{JOE}\" password \"{PASSWORD}\"\n",
            f.imap_port()
        ),
    )
    .expect("write the rc file");
    std::fs::set_permissions(&rc, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod 0600");
    f.python("deliver('fetch 1', 'fetch 2')\nwait_count('INBOX', 2)\n");

    // keep: both fetched, both left on the server, marked seen.
    let (code, out) = fetchmail(&f, "keep1", &["--keep"]);
    assert_eq!(code, 0, "fetchmail --keep:\n{out}");
    assert_eq!(delivered(home, "keep1"), ["fetch 1", "fetch 2"], "{out}");
    assert_eq!(
        f.server_state(&["INBOX"]),
        "INBOX: fetch 1 [\\Seen], fetch 2 [\\Seen]\n",
        "{out}"
    );
    // keep again after one more delivery: only the new one.
    f.python("deliver('fetch 3')\nwait_count('INBOX', 3)\n");
    let (code, out) = fetchmail(&f, "keep2", &["--keep"]);
    assert_eq!(code, 0, "fetchmail --keep:\n{out}");
    assert_eq!(delivered(home, "keep2"), ["fetch 3"], "{out}");
    // no keep, all: every message once more, then none left on the server.
    let (code, out) = fetchmail(&f, "all", &["--nokeep", "--fetchall"]);
    assert_eq!(code, 0, "fetchmail --nokeep --fetchall:\n{out}");
    assert_eq!(
        delivered(home, "all"),
        ["fetch 1", "fetch 2", "fetch 3"],
        "{out}"
    );
    assert_eq!(f.server_state(&["INBOX"]), "INBOX: \n", "{out}");
    // Nothing left: fetchmail says so (exit 1) and delivers nothing.
    let (code, out) = fetchmail(&f, "none", &["--nokeep", "--fetchall"]);
    assert_eq!(code, 1, "fetchmail with no mail:\n{out}");
    assert!(delivered(home, "none").is_empty(), "{out}");
}

// ---------------------------------------------------------------------------
// imaplib
// ---------------------------------------------------------------------------

#[test]
fn imaplib_logs_in_only_after_starttls_and_over_imaps() {
    if missing(&["python3"]) {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    // Loopback is secure by default; here it must not be, to see the refusal.
    let config = dir.path().join("stoa.toml");
    std::fs::write(&config, "[imap]\nsecure_networks = []\n").expect("write config");
    let f = Fixture::start(&["--config", arg(&config), "--imaps-listen", "127.0.0.1:0"]);
    let imaps = f.server.imaps_addrs[0].port();
    let out = f.python(&format!(
        r#"
ctx = ssl.create_default_context(cafile=CERT)
ctx.check_hostname = False   # the certificate names localhost; we dial 127.0.0.1
ctx.verify_flags &= ~getattr(ssl, "VERIFY_X509_STRICT", 0)
c = imaplib.IMAP4("127.0.0.1", IMAP, timeout=10)
print("before:", " ".join(c.capabilities))
try:
    c.login(USER, PASS)
    raise SystemExit("LOGIN accepted before STARTTLS")
except imaplib.IMAP4.error as e:
    print("refused:", e)
ok(c.starttls(ctx))
print("after:", " ".join(c.capabilities))
ok(c.login(USER, PASS))
exists = ok(c.select("INBOX"))[0].decode()
print("starttls:", c.state, exists)
c.logout()
s = imaplib.IMAP4_SSL("127.0.0.1", {imaps}, ssl_context=ctx, timeout=10)
ok(s.login(USER, PASS))
exists = ok(s.select("INBOX"))[0].decode()
print("imaps:", s.state, s.sock.version(), exists)
s.logout()
"#
    ));
    let line = |prefix: &str| {
        out.lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in:\n{out}"))
            .to_owned()
    };
    let before = line("before:");
    assert!(
        before.contains("STARTTLS") && before.contains("LOGINDISABLED"),
        "{out}"
    );
    assert!(!line("after:").contains("LOGINDISABLED"), "{out}");
    assert!(!line("after:").contains("STARTTLS"), "{out}");
    assert!(line("refused:").contains("[PRIVACYREQUIRED]"), "{out}");
    assert_eq!(line("starttls:"), "starttls: SELECTED 0", "{out}");
    assert!(
        line("imaps:").starts_with("imaps: SELECTED TLSv1."),
        "{out}"
    );
}

#[test]
fn imaplib_in_idle_hears_deliveries_flags_and_expunges() {
    if missing(&["python3"]) {
        return;
    }
    let f = Fixture::start(&[]);
    let out = f.python(
        r#"
deliver("idle 1")
wait_count("INBOX", 1)
a = connect()
ok(a.select("INBOX"))
a.sock.settimeout(10)
a.send(b"I1 IDLE\r\n")
assert a.readline().startswith(b"+"), "no continuation for IDLE"

def heard(what, start):
    """Reads untagged lines until one matches `what`; how long since `start`."""
    while True:
        line = a.readline()   # socket.timeout after 10 s fails the test
        assert line, "connection closed in IDLE"
        print("idle:", line.decode().strip())
        if re.match(what, line):
            return time.time() - start

start = time.time()
deliver("idle 2")
print("exists after %.1f s" % heard(rb"\* 2 EXISTS", start))
b = connect()
ok(b.select("INBOX"))
start = time.time()
ok(b.store("1", "+FLAGS", "(\\Flagged)"))
print("flags after %.1f s" % heard(rb"\* 1 FETCH \(.*FLAGS \([^)]*\\Flagged", start))
start = time.time()
ok(b.store("2", "+FLAGS", "(\\Deleted)"))
ok(b.expunge())
print("expunge after %.1f s" % heard(rb"\* 2 EXPUNGE", start))
a.send(b"DONE\r\n")
while True:
    line = a.readline()
    if line.startswith(b"I1 "):
        print("done:", line.decode().strip())
        break
"#,
    );
    for event in ["exists", "flags", "expunge"] {
        let line = out
            .lines()
            .find(|l| l.starts_with(&format!("{event} after")))
            .unwrap_or_else(|| panic!("no {event} in IDLE:\n{out}"));
        let secs: f64 = line
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .expect("seconds");
        assert!(secs < 5.0, "{event} took {secs} s in IDLE:\n{out}");
    }
    assert!(out.contains("done: I1 OK"), "{out}");
}

#[test]
fn pop3_and_imap_share_the_inbox() {
    if missing(&["python3"]) {
        return;
    }
    let f = Fixture::start(&["--pop3-listen", "127.0.0.1:0"]);
    let out = f.python(
        r#"
deliver("shared 1", "shared 2", "shared 3")
wait_count("INBOX", 3)
i = connect()
ok(i.select("INBOX"))

def pop3():
    p = poplib.POP3("127.0.0.1", POP3, timeout=10)
    p.user(USER)
    p.pass_(PASS)
    return p

def pop_subjects(p):
    out = []
    for n in range(1, len(p.list()[1]) + 1):
        head = p.top(n, 0)[1]
        out.append([l.decode()[9:] for l in head if l.startswith(b"Subject: ")][0])
    return out

# Deleted over POP3: IMAP's next NOOP expunges it.
p = pop3()
subjects_pop = pop_subjects(p)
print("pop3 sees:", subjects_pop)
p.dele(subjects_pop.index("shared 2") + 1)
p.quit()
typ, data = i.noop()
print("noop:", typ, i.untagged_responses.get("EXPUNGE"))
print("imap sees:", sorted(subjects(i).values()))
# Expunged over IMAP: gone from POP3's next listing.
ok(i.store(str(find(i, "shared 3")), "+FLAGS", "(\\Deleted)"))
ok(i.expunge())
p = pop3()
print("pop3 then:", pop_subjects(p))
p.quit()
"#,
    );
    assert!(
        out.contains("pop3 sees: ['shared 1', 'shared 2', 'shared 3']"),
        "{out}"
    );
    assert!(out.contains("noop: OK [b'2']"), "{out}");
    assert!(out.contains("imap sees: ['shared 1', 'shared 3']"), "{out}");
    assert!(out.contains("pop3 then: ['shared 1']"), "{out}");
}
