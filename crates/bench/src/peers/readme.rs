//! The result directory's README.md: the command, the machine, the setup,
//! how to read the files, and the summary.

use std::time::Duration;

use super::{Args, Pinning, WARM_UP, Workload};

/// What the README is written from.
pub(super) struct Parts<'a> {
    pub(super) args: &'a Args,
    pub(super) servers: &'a [String],
    pub(super) pinning: &'a Pinning,
    pub(super) run_time: Duration,
    /// The background-load notes, a Markdown list.
    pub(super) background: &'a str,
    pub(super) summary: &'a str,
}

/// The result directory's README: the command, the machine, the setup, how to
/// read the files, and the summary.
pub(super) fn readme(p: &Parts<'_>) -> String {
    let mut md = String::new();
    let command: Vec<String> = std::iter::once("stoa".to_owned())
        .chain(std::env::args().skip(1))
        .collect();
    let w = p.args.workload.name();
    md.push_str(&format!("# {}: {}\n\n", w, p.servers.join(" vs ")));
    md.push_str(&format!(
        "Command (from the repository root): `{}`\n\n",
        command.join(" ")
    ));
    let now = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    md.push_str(&format!("Date: {now}\n\n## Machine\n\n"));
    let system = crate::archive::System::collect(crate::archive::Server::default());
    for (k, v) in system.rows() {
        if k.starts_with("Server") || k.starts_with("Target") || k.starts_with("Harness") {
            continue;
        }
        md.push_str(&format!("- {k}: {v}\n"));
    }
    let versions: &[(&str, &str)] = match p.args.workload {
        Workload::Imap => &[
            ("stoa revision", "git rev-parse --short HEAD"),
            ("dovecot", "dovecot --version"),
        ],
        _ => &[
            ("stoa revision", "git rev-parse --short HEAD"),
            ("nginx", "nginx -v"),
            ("wrk", "wrk -v"),
        ],
    };
    for &(name, cmd) in versions {
        md.push_str(&format!("- {name}: {}\n", version_of(cmd)));
    }
    md.push_str(&format!(
        "- Server sources (crates/, Cargo.toml, Cargo.lock) changed since that revision: {}\n",
        sources_dirty()
    ));
    md.push_str("\n## Setup\n\n");
    md.push_str(&setup_lines(p));
    md.push_str("\n## Background load\n\n");
    md.push_str(p.background);
    md.push_str("\n## Reading\n\n");
    md.push_str(READING);
    md.push_str(&format!(
        "- raw.csv: one line per run ({}; sectors of 512 bytes).\n",
        super::results::RAW_COLUMNS
    ));
    md.push_str("\n## Summary\n\n```\n");
    md.push_str(p.summary);
    md.push_str("```\n");
    md
}

fn setup_lines(p: &Parts<'_>) -> String {
    let a = p.args;
    let mut s = String::new();
    match a.workload {
        Workload::Web99 => {
            s.push_str(&format!(
                "- Load: `stoa bench web --static-only --connections N --run-time {}s` at N = {}, paced \
                 SPECweb99-style connections over the same file set (`stoa fileset`){}.\n",
                p.run_time.as_secs(),
                a.loads.0.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
                if a.mix_load > 0 {
                    format!("; the mix row: the full mix at {} against stoa only", a.mix_load)
                } else {
                    String::new()
                }
            ));
            if a.no_warm {
                s.push_str("- `--no-warm`: the file set was not read before the runs; the disks' reads are in the table.\n");
            } else {
                s.push_str(
                    "- Before each run every file of the set was read once, so that the run started with all of \
                     it in the page cache; what that read took from the disks is in raw.csv (warm_disk_sectors, \
                     warm_secs) and summary.txt.\n",
                );
            }
            if let Some(n) = a.profile_load {
                s.push_str(&format!(
                    "- Profile: after the rounds, one more static-only run per server at {n} connections with \
                     `perf stat -e raw_syscalls:sys_enter` (system calls per operation) and, with inferno, \
                     `perf record -e cpu-clock -F 999 -g` on its worker (nginx's worker, stoa's process) for \
                     the whole run; the flame graphs are kept beside the runs' records in the results \
                     archive, not here. These runs are not in raw.csv.\n"
                ));
            }
            if a.mix_load > 0 {
                s.push_str(
                    "- Mix row: the CGI children's CPU (cutime + cstime stoa reaped over the run) and the \
                     web99-state thread's (utime + stime from /proc/PID/task/TID/stat: the POSTs' durable \
                     commits) per operation of the whole mix, on lines of their own.\n",
                );
            }
        }
        Workload::Static => {
            s.push_str(&format!(
            "- Load: `wrk -t{} -cC -d{}s --latency URL` with C in {{{}}} (plus `-H 'Connection: close'` \
             for the close rows) against {} (random bytes); {}s of wrk per server and file first.\n",
            a.threads,
            p.run_time.as_secs(),
            a.connections.0.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            a.files.iter().map(|f| f.file()).collect::<Vec<_>>().join(", "),
            WARM_UP.as_secs()
            ));
            s.push_str(
                "- Before the rounds and after every run each file is fetched from each server and compared \
                 with the file byte for byte: a server that served other bytes stops the comparison (an \
                 error, not a figure).\n",
            );
        }
        Workload::H2 => {
            s.push_str(&format!(
                "- Rows `h2-*`: `h2load -c {c} -m {m} -t 1 -D {t} --warm-up-time 1` against 1k.bin and \
                 10k.bin over TLS with ALPN h2 (random bytes). `handshake-h2`: batches of `h2load -c {b} \
                 -n {b} -m 1 -t 1` (each connection a full handshake with ALPN h2 and one 1 KiB request, \
                 no resumption) for {t} s: new connections per second. A run that did not negotiate h2 \
                 stops the comparison.\n",
                c = super::H2_CONNECTIONS,
                m = super::H2_STREAMS,
                b = super::HANDSHAKE_BATCH,
                t = p.run_time.as_secs(),
            ));
            s.push_str(
                "- TLS: one self-signed ECDSA P-256 certificate for both, TLS 1.2 and 1.3. nginx: `listen ... \
                 ssl http2` with its HTTP/2 defaults, `ssl_session_cache shared:SSL:20m`, and \
                 `keepalive_requests 1000000`, since its 1000 also ends an HTTP/2 connection after 1000 \
                 streams and h2load does not reconnect; stoa: its defaults. Access log off on both.\n",
            );
        }
        Workload::Imap => {
            s.push_str(&format!(
                "- Load: Dovecot's imaptest in its stress mode, `imaptest host=127.0.0.1 port=P \
                 user=testuser@example.com pass=pw mbox=M clients=C secs={t}` with C in {{{c}}} (a row \
                 each): its default command mix (LOGIN, LIST, STATUS, SELECT, FETCH, STORE, EXPUNGE, \
                 APPEND, LOGOUT …) with its state checking on, every client the same user, APPENDs \
                 from the eight small messages of imaptest's reference mbox.\n\
                 - Commands: the sum of imaptest's Totals line (every command it finished); cmds/s \
                 that over {t} s. Errors: imaptest's lines that start with `Error` (plus one when it \
                 exited with failure): a row with errors is not a clean figure.\n\
                 - PLAIN passwords on both, Maildir with Dovecot's default fsync, one user. \
                 stoa: `stoa serve` with one IMAP listener, its mail directory in the temporary \
                 directory, the user added by `stoa user add --scheme plain`, \
                 `[directory] allow_plain_passwords = true` and `[imap] max_sessions_per_user = 0`, \
                 `max_connections_per_client = 0` (stoa.args); stoa makes every change durable \
                 (fsync) before its OK. Dovecot: a private instance in the foreground (`dovecot -F \
                 -c dovecot.conf`), imap only, plaintext auth without TLS, a passwd-file with a \
                 `{{PLAIN}}` password, `mail_location = maildir:~/Maildir`, its defaults otherwise \
                 (`mail_fsync = optimized`); as root its mail belongs to nobody (65534).\n\
                 - Server CPU: Dovecot's master and all its children (imap-login, imap, auth, \
                 anvil, log, config), reaped ones included; stoa's one process.\n",
                t = p.run_time.as_secs(),
                c = a.clients.0.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            ));
        }
    }
    let log = match a.workload {
        Workload::H2 => "access log off",
        _ => "access log on (combined, to a file, truncated after each run)",
    };
    if a.workload != Workload::Imap {
        s.push_str(&format!(
            "- Servers: one worker each, on 127.0.0.1, the same document root, {log}, keep-alive \
             timeout 75 s. nginx: sendfile, tcp_nopush, open_file_cache (nginx.conf); stoa: \
             stoa.args (`$TMP` is the temporary directory).\n",
        ));
    }
    for (name, flags) in [("stoa", &a.stoa_flags), ("stoa-base", &a.baseline_flags)] {
        if let Some(flags) = flags {
            s.push_str(&format!(
                "- {name}'s own flags: `{flags}` (see {name}.args).\n"
            ));
        }
    }
    if a.baseline_flags.is_some() && a.baseline.is_none() {
        s.push_str("- stoa-base runs the same binary as stoa: two configurations of one build.\n");
    }
    s.push_str(&format!(
        "- {} rounds; each round runs every row against every server, in the order {} in odd rounds and \
         reversed in even ones.\n",
        a.rounds,
        p.servers.join(", ")
    ));
    s.push_str(&format!("- Pinning: {}.\n", p.pinning.words()));
    if a.workload == Workload::Web99 {
        s.push_str(&format!(
            "- Each `stoa bench web` run's JSON is in the results archive (`stoa bench results`), \
             labelled `peers-web99-SERVER`; none is kept here{}.\n",
            if a.no_archive {
                " (`--no-archive`: nor there)"
            } else {
                ""
            }
        ));
    }
    s
}

/// How to read the result directory's files.
const READING: &str = "\
- summary.txt: per row and server, the medians over the rounds; then each server's per-round ratio to \
the reference (median, smallest, largest), for operations per second and for server CPU per operation.
- Server CPU: the server's whole process tree (nginx's master and workers, stoa and its CGI children), \
utime + stime from /proc before and after each run, per operation the load finished; kernel % is the \
system time's share. On loopback a server's kernel time includes part of the load's receive work.
- harness %: the load generator's CPU over the run, % of one core; a row where it used more than \
70 % of its cores (\"bound\") may have measured the generator, not the server: compare CPU per \
operation there, not throughput.
- disk MB: what the machine's whole disks (not partitions) read during the run, from \
/proc/diskstats: a file set read from disk caps the figure. other %: the machine's CPU busy with \
work other than the server's and the load's during the run (/proc/stat), % of all CPUs; above 10 % \
the figures are disturbed (see also the background load above).
";

/// The first line a version command prints (to standard output or error), or
/// `unknown`.
fn version_of(command: &str) -> String {
    let mut words = command.split_whitespace();
    let Some(program) = words.next() else {
        return "unknown".to_owned();
    };
    std::process::Command::new(program)
        .args(words)
        .stdin(std::process::Stdio::null())
        .output()
        .ok()
        .and_then(|o| {
            let text = String::from_utf8_lossy(&o.stdout).into_owned()
                + &String::from_utf8_lossy(&o.stderr);
            text.lines()
                .next()
                .map(|l| l.split(" Copyright").next().unwrap_or(l).trim().to_owned())
        })
        .filter(|l| !l.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// `yes` when git sees uncommitted changes to the sources of the binary in
/// the current directory's checkout, `no` when it sees none, else `unknown`.
fn sources_dirty() -> &'static str {
    let out = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no", "--"])
        .args(["crates", "Cargo.toml", "Cargo.lock"])
        .stdin(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() && o.stdout.is_empty() => "no",
        Ok(o) if o.status.success() => "yes",
        _ => "unknown",
    }
}
