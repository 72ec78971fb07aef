//! The kit's own pieces against real processes and sockets on loopback.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::process::Command;
use std::time::{Duration, Instant};

use stoa_testkit::{LineConn, Process, base64, listening_on, run, wait_until};

const TIMEOUT: Duration = Duration::from_secs(10);

#[test]
fn base64_pads_like_rfc_4648() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"\0joe\0pw"), "AGpvZQBwdw==");
}

#[test]
fn wait_until_holds_or_gives_up_at_the_deadline() {
    let mut n = 0;
    assert!(wait_until(TIMEOUT, || {
        n += 1;
        n == 3
    }));
    let start = Instant::now();
    assert!(!wait_until(Duration::from_millis(50), || false));
    assert!(start.elapsed() >= Duration::from_millis(50));
}

#[test]
fn readiness_lines_with_and_without_a_scheme() {
    let addr: SocketAddr = "127.0.0.1:8080".parse().expect("address");
    assert_eq!(
        listening_on("stoa: listening on https://127.0.0.1:8080"),
        Some(("https", addr))
    );
    assert_eq!(
        listening_on("agent: listening on 127.0.0.1:8080, 2 load threads"),
        Some(("", addr))
    );
    assert_eq!(listening_on("stoa: listening on nowhere"), None);
    assert_eq!(listening_on("stoa: ready"), None);
}

#[test]
fn run_collects_both_outputs_and_the_status() {
    let mut sh = Command::new("sh");
    sh.args(["-c", "read x; echo \"out $x\"; echo err >&2; exit 3"]);
    let done = run(&mut sh, b"in\n", TIMEOUT);
    assert_eq!(done.status.code(), Some(3));
    assert_eq!(done.stdout, "out in\n");
    assert_eq!(done.stderr, "err");
}

#[test]
fn a_process_is_waited_for_by_its_lines_and_killed_on_drop() {
    let mut sh = Command::new("sh");
    // `exec` keeps the pid: the guard's SIGKILL reaches the waiting process.
    sh.args(["-c", "echo 'x: listening on 127.0.0.1:9' >&2; exec cat"]);
    let process = Process::spawn(&mut sh);
    let addr = process.wait_for_line(TIMEOUT, |l| listening_on(l).map(|(_, a)| a));
    assert_eq!(addr.port(), 9);
    let pid = process.pid();
    drop(process);
    let gone = wait_until(TIMEOUT, || {
        !std::path::Path::new(&format!("/proc/{pid}")).exists()
    });
    assert!(gone, "pid {pid} outlived its guard");
}

#[test]
fn a_line_conversation_sends_lines_and_expects_prefixes() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = std::thread::spawn(move || {
        let (stream, _) = listener.accept().expect("accept");
        let mut out = stream.try_clone().expect("clone");
        let mut lines = BufReader::new(stream);
        out.write_all(b"+OK hello\r\n").expect("greet");
        let mut line = String::new();
        while lines.read_line(&mut line).expect("read") > 0 {
            let reply = format!("+OK {}", line.trim_end());
            out.write_all(format!("{reply}\r\n").as_bytes())
                .expect("reply");
            if line.starts_with("QUIT") {
                return;
            }
            line.clear();
        }
    });
    let mut conn = LineConn::connect(addr);
    assert_eq!(conn.line().as_deref(), Some("+OK hello"));
    assert_eq!(conn.expect("NOOP", "+OK"), "+OK NOOP");
    conn.expect("QUIT", "+OK QUIT");
    conn.expect_eof();
    server.join().expect("server thread");
}
