//! `stoa bench mail --agents` end to end: two `stoa bench agent` daemons on
//! loopback (port 0, their address read from their readiness line) share the
//! four streams against the built-in server while this prime keeps the sink,
//! the probes and the report; the merged report must add up to what each agent
//! said it ran. Then the bad inputs (an agent that cannot be reached, is busy
//! or runs another version) fail before any load, and an agent that goes away
//! mid-level fails the run, named.
//!
//! Every run is a child process in its own process group, killed whole if it
//! overstays its time; every wait is bounded.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use stoa_testkit::{Process, listening_on};

/// Longest a short run may take: fill, check, one level, drain.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest a run that must fail before its load may take.
const ABORT_TIMEOUT: Duration = Duration::from_secs(90);

/// `stoa bench mail <args>` (or any `stoa` command) in its own process group.
fn stoa(command: &[&str], args: &[&str]) -> Process {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stoa"));
    child
        .args(command)
        .args(args)
        // The results archive: nothing of a test run in the user's home.
        .env(
            "XDG_DATA_HOME",
            std::env::temp_dir().join("stoa-test-results"),
        )
        .env_remove("RUST_LOG");
    Process::spawn_group(&mut child)
}

/// `stoa bench agent` for one run on a free loopback port, and its address.
fn start_agent(extra: &[&str]) -> (Process, SocketAddr) {
    let mut args = vec!["--listen", "127.0.0.1:0", "--threads", "1"];
    args.extend_from_slice(extra);
    let agent = stoa(&["bench", "agent"], &args);
    let addr = agent.wait_for_line(Duration::from_secs(30), |l| listening_on(l).map(|(_, a)| a));
    (agent, addr)
}

fn u64_of(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The four per-stream counts an agent printed for level 0: "level 0 done:
/// judged A user SMTP, B remote SMTP, C initial POP, D repeated POP sessions".
fn agent_counts(stderr: &str) -> [u64; 4] {
    let line = stderr
        .lines()
        .find_map(|l| l.split_once("level 0 done: judged ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no level line from the agent:\n{stderr}"));
    let n: Vec<u64> = line
        .split(", ")
        .map(|part| {
            part.split(' ')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no count in {part:?}"))
        })
        .collect();
    n.try_into()
        .unwrap_or_else(|n| panic!("four counts, got {n:?}"))
}

const STREAMS: [(&str, &str); 4] = [
    ("user_smtp", "User SMTP"),
    ("remote_smtp", "Remote MTA SMTP"),
    ("initial_pop", "Initial POP"),
    ("repeated_pop", "Repeated POP"),
];

#[test]
fn two_agents_share_the_streams_and_the_prime_reports_one_run() {
    let (agent_a, a) = start_agent(&["--runs", "1"]);
    let (agent_b, b) = start_agent(&["--runs", "1"]);
    let (a, b) = (a.to_string(), b.to_string());
    let out = tempfile::tempdir().expect("tempdir");
    let dir = out.path().join("report");
    let agents = format!("{a},{b}");
    // 300 % of 5 msgs/min over a 30 s window: a dozen sessions per stream
    // kind, a quarter of the SMTP ones the prime's probes.
    let run = stoa(
        &["bench", "mail"],
        &[
            "--agents",
            &agents,
            "--users",
            "1000",
            "--rate",
            "5",
            "--levels",
            "300",
            "--warmup",
            "2s",
            "--run-time",
            "30s",
            "--cooldown",
            "4s",
            "--drain-limit",
            "60s",
            "--probe-share",
            "0.25",
            "--check-sample",
            "40",
            "--seed",
            "11",
            "--out",
            dir.to_str().expect("utf-8 path"),
        ],
    )
    .finish(RUN_TIMEOUT);
    assert!(
        run.status.success(),
        "the run failed; stderr:\n{}",
        run.stderr
    );
    let a_done = agent_a.finish(Duration::from_secs(30));
    let b_done = agent_b.finish(Duration::from_secs(30));
    assert!(a_done.status.success(), "agent A: {}", a_done.stderr);
    assert!(b_done.status.success(), "agent B: {}", b_done.stderr);
    assert!(
        a_done.stderr.contains("as agent 1 of 2"),
        "{}",
        a_done.stderr
    );
    assert!(
        b_done.stderr.contains("as agent 2 of 2"),
        "{}",
        b_done.stderr
    );
    assert!(run.stderr.contains("2 agents ready"), "{}", run.stderr);

    // One report, naming both agents.
    assert!(
        run.stdout.contains("2 agents generated the load: ")
            && run.stdout.contains(&format!("{a} (1 load thread"))
            && run.stdout.contains(&format!("{b} (1 load thread")),
        "{}",
        run.stdout
    );
    assert_eq!(
        run.stdout.matches("Detailed Results -- 300% Load").count(),
        1
    );
    let text = std::fs::read_to_string(dir.join("result.json")).expect("result.json");
    let json: Value = serde_json::from_str(&text).expect("result.json parses");
    let listed: Vec<&str> = json["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|x| x["addr"].as_str().expect("addr"))
        .collect();
    assert_eq!(listed, [a.as_str(), b.as_str()]);
    let level = &json["levels"][0];
    let generators = level["generators"].as_array().expect("generators");
    let names: Vec<&str> = generators
        .iter()
        .map(|g| g["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, ["prime", a.as_str(), b.as_str()]);

    // What each agent said it ran is its row of the report, and the rows add
    // up to the level's sessions.
    for (g, done) in generators[1..].iter().zip([&a_done, &b_done]) {
        let said = agent_counts(&done.stderr);
        let row: Vec<u64> = STREAMS
            .iter()
            .map(|(key, _)| u64_of(&g["started"][key]))
            .collect();
        assert_eq!(row, said, "{}: {}", g["name"], done.stderr);
        assert!(said[0] + said[1] > 0, "no SMTP on {}", g["name"]);
        assert!(said[2] + said[3] > 0, "no POP on {}", g["name"]);
    }
    let prime = &generators[0]["started"];
    assert!(
        u64_of(&prime["user_smtp"]) + u64_of(&prime["remote_smtp"]) > 0,
        "no probes: {prime}"
    );
    assert_eq!(
        u64_of(&prime["initial_pop"]) + u64_of(&prime["repeated_pop"]),
        0,
        "the prime checks no mailbox: {prime}"
    );
    let started = &level["sessions_started"];
    let mut total = [0u64; 4];
    for (k, (key, name)) in STREAMS.iter().enumerate() {
        let sum: u64 = generators.iter().map(|g| u64_of(&g["started"][key])).sum();
        assert_eq!(sum, u64_of(&started[name]["started"]), "{name}");
        total[k] = sum;
    }
    // The merged counters are every generator's sessions: each judged SMTP
    // session is a Session or a Disconnect, each POP check too unless no
    // retry-pool mailbox was eligible.
    let c = &level["counters"];
    assert_eq!(
        u64_of(&c["smtp_session"]) + u64_of(&c["smtp_disconnect"]),
        total[0] + total[1],
        "{c}"
    );
    assert_eq!(
        u64_of(&c["pop_session"])
            + u64_of(&c["pop_disconnect"])
            + u64_of(&c["retry_pool_exhausted"]),
        total[2] + total[3],
        "{c}"
    );
    assert_eq!(level["error_rate_percent"], 0.0, "{c}");
    // The probes' mailboxes were reserved on the agents (no agent's POP check
    // took a probe message away): every probe was found.
    let delivery = &level["delivery"];
    assert!(u64_of(&delivery["attempts"]) > 0, "{delivery}");
    assert_eq!(delivery["pass"], delivery["attempts"], "{delivery}");
    // Remote mail reached the prime's sink and counts for the merged run.
    let remote = &level["remote"];
    assert!(u64_of(&remote["sent"]) > 0, "{remote}");
    assert_eq!(
        u64_of(&remote["received"]),
        u64_of(&remote["sent"]) - u64_of(&remote["dropped"]),
        "{remote}"
    );
}

/// Runs `stoa bench mail --agents <agents>` against a small built-in server;
/// it must fail before the store is filled, with `error` on standard error.
fn fails_before_load(agents: &str, error: &str) {
    let run = stoa(
        &["bench", "mail"],
        &[
            "--agents", agents, "--users", "200", "--rate", "1", "--levels", "100", "--seed", "3",
        ],
    )
    .finish(ABORT_TIMEOUT);
    assert!(!run.status.success(), "the run succeeded:\n{}", run.stdout);
    assert!(
        run.stderr.contains(error),
        "no {error:?} in:\n{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("filling") && !run.stderr.contains("level "),
        "load started:\n{}",
        run.stderr
    );
    assert!(run.stdout.is_empty(), "a report:\n{}", run.stdout);
}

#[test]
fn bad_agents_fail_before_any_load() {
    // Nobody listens here.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    fails_before_load(&closed.to_string(), &format!("cannot reach agent {closed}"));

    // An agent that serves another prime already.
    let (_agent, busy) = start_agent(&[]);
    let _other_prime = TcpStream::connect(busy).expect("the first prime");
    fails_before_load(&busy.to_string(), &format!("agent {busy}: busy"));

    // An agent of another version: it reads the mail plan and says so.
    let fake = TcpListener::bind("127.0.0.1:0").expect("bind");
    let fake_addr = fake.local_addr().expect("addr");
    let seen = std::thread::spawn(move || {
        let (conn, _) = fake.accept().expect("the prime connects");
        conn.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        let mut line = String::new();
        BufReader::new(&conn)
            .read_line(&mut line)
            .expect("the plan");
        let plan: Value = serde_json::from_str(&line).expect("a JSON plan");
        (&conn)
            .write_all(b"{\"error\": \"version mismatch: prime 0.1.0, agent 9.9.9\"}\n")
            .expect("answer");
        plan
    });
    fails_before_load(
        &fake_addr.to_string(),
        &format!("agent {fake_addr}: version mismatch: prime 0.1.0, agent 9.9.9"),
    );
    let plan = seen.join().expect("the fake agent");
    assert_eq!(plan["plan"]["version"], env!("CARGO_PKG_VERSION"), "{plan}");
    assert_eq!(plan["plan"]["mail"]["share"]["agents"], 1, "{plan}");
    assert_eq!(plan["plan"]["mail"]["workload"]["users"], 200, "{plan}");
}

#[test]
fn an_agent_that_goes_away_fails_the_run_naming_it() {
    let (mut agent, addr) = start_agent(&["--runs", "1"]);
    let run = stoa(
        &["bench", "mail"],
        &[
            "--agents",
            &addr.to_string(),
            "--users",
            "200",
            "--rate",
            "1",
            "--levels",
            "100",
            "--warmup",
            "1s",
            "--run-time",
            "60s",
            "--check-sample",
            "20",
            "--seed",
            "5",
        ],
    );
    // Once the level runs on the agent, the agent dies.
    run.wait_for_line(Duration::from_secs(120), |l| {
        l.contains("msgs/min at 100%:").then_some(())
    });
    agent.kill();
    let done = run.finish(ABORT_TIMEOUT);
    assert!(
        !done.status.success(),
        "the run succeeded:\n{}",
        done.stdout
    );
    assert!(
        done.stderr.contains(&format!("agent {addr}: ")) && done.stderr.contains("(level 0)"),
        "{}",
        done.stderr
    );
    assert!(done.stdout.is_empty(), "a report:\n{}", done.stdout);
}
