//! A generator against a loopback server that records the request heads of each
//! connection and who closed it.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, mpsc};

use stoa_web99::fileset::FileId;
use stoa_web99::workload::{HttpVersion, Targets};

use super::*;

/// Longest a test waits for the recorder to report a connection.
const WAIT: Duration = Duration::from_secs(10);

/// One connection as the recorder saw it.
#[derive(Debug)]
struct Seen {
    heads: Vec<String>,
    /// The client closed it (the recorder read end of stream); otherwise the
    /// recorder closed it after an answer without keep-alive.
    client_closed: bool,
}

/// Serves connections one at a time, answering each request with an empty 200
/// (HTTP/1.0 keep-alive when asked for), and reports each finished connection.
fn recorder() -> (SocketAddr, mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the recorder");
    let addr = listener.local_addr().expect("recorder address");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            if tx.send(record(stream)).is_err() {
                return;
            }
        }
    });
    (addr, rx)
}

fn record(mut stream: TcpStream) -> Seen {
    let _ = stream.set_read_timeout(Some(WAIT));
    let mut seen = Seen {
        heads: Vec::new(),
        client_closed: false,
    };
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            match stream.read(&mut chunk) {
                Ok(0) => seen.client_closed = true,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    continue;
                }
                Err(_) => {}
            }
            return seen;
        };
        let head = String::from_utf8_lossy(&buf[..end + 4]).into_owned();
        let body = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .and_then(|n| n.trim().parse::<usize>().ok())
            .unwrap_or(0);
        while buf.len() < end + 4 + body {
            match stream.read(&mut chunk) {
                Ok(n) if n > 0 => buf.extend_from_slice(&chunk[..n]),
                _ => return seen,
            }
        }
        buf.drain(..end + 4 + body);
        let keep = head.contains("\r\nConnection: Keep-Alive\r\n");
        seen.heads.push(head);
        let answer: &[u8] = if keep {
            b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n"
        } else {
            b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"
        };
        if stream.write_all(answer).is_err() || !keep {
            return seen;
        }
    }
}

fn plan(addr: SocketAddr) -> Plan {
    Plan {
        addr,
        targets: Targets {
            host: addr.to_string(),
            url_root: String::new(),
            dynamic: "/web99".into(),
            cgi: "/cgi-bin/web99".into(),
            post: "/web99".into(),
            version: HttpVersion::Http10,
        },
        connections: 1,
        directories: 25,
        warmup: Duration::ZERO,
        run: Duration::from_secs(60),
        rampdown: Duration::ZERO,
        static_only: false,
        expired: [0, 100],
        client: 0,
        first_user: 0,
        deck_size: 100,
        closed_loop: false,
        threads: 1,
        tls: None,
    }
}

fn clock() -> Clock {
    Clock {
        base: Instant::now(),
        run_start: Duration::ZERO,
        run_end: Duration::from_secs(60),
        end: Duration::from_secs(60),
    }
}

/// A seed whose first connection is a keep-alive one, and its request count.
fn keep_alive_seed() -> (i32, u32) {
    (0..1000)
        .map(|g| crate::generator_seed(0, g))
        .find_map(|seed| {
            let n = workload::requests_for_connection(&mut SpecRng::new(seed));
            (n > 1).then_some((seed, n))
        })
        .expect("invariant: 18.92 % of connections are keep-alive")
}

fn current_thread() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("test runtime")
}

const FILE: FileId = FileId {
    dir: 3,
    class: 1,
    num: 4,
};

/// Issue 18, item 8: the last request of an HTTP/1.0 keep-alive connection went
/// out without `Connection: Keep-Alive`, so the server closed; the kit's client
/// sends it on every request of the connection and closes itself.
#[test]
fn every_request_of_a_keep_alive_connection_says_keep_alive() {
    let (addr, seen) = recorder();
    let plan = plan(addr);
    let (shard, live) = (RefCell::new(Tally::default()), Live::default());
    let connector = Connector::new(None).expect("plain connector");
    let local = Local::new(plan.directories);
    let mut g = Generator::new(&plan, 0, &shard, &live, &connector, &local);
    let (seed, n) = keep_alive_seed();
    g.rng = SpecRng::new(seed);
    let clock = clock();
    let entry = Entry {
        file: FILE,
        kind: RequestType::Static,
    };
    current_thread().block_on(async {
        for i in 0..n {
            let mut rated = RatedReceive::start(clock.ms(Instant::now()));
            let answered = g.try_exchange(entry, &mut rated, &clock).await;
            assert!(answered.is_ok(), "request {} of {n} failed", i + 1);
        }
    });
    assert!(g.conn.is_none(), "the client closes after its last request");
    drop(g);
    let conn = seen
        .recv_timeout(WAIT)
        .expect("the recorder saw a connection");
    assert_eq!(conn.heads.len(), n as usize, "{conn:?}");
    for (i, head) in conn.heads.iter().enumerate() {
        assert!(
            head.contains("\r\nConnection: Keep-Alive\r\n"),
            "request {} of {n} lacks Connection: Keep-Alive:\n{head}",
            i + 1
        );
    }
    assert!(conn.client_closed, "the client, not the server, closes");
}

/// A one-request connection carries no keep-alive header and the server closes.
#[test]
fn a_single_request_connection_does_not_ask_for_keep_alive() {
    let (addr, seen) = recorder();
    let plan = plan(addr);
    let (shard, live) = (RefCell::new(Tally::default()), Live::default());
    let connector = Connector::new(None).expect("plain connector");
    let local = Local::new(plan.directories);
    let mut g = Generator::new(&plan, 0, &shard, &live, &connector, &local);
    let seed = (0..1000)
        .map(|g| crate::generator_seed(0, g))
        .find(|&s| workload::requests_for_connection(&mut SpecRng::new(s)) == 1)
        .expect("invariant: most connections carry one request");
    g.rng = SpecRng::new(seed);
    let clock = clock();
    let entry = Entry {
        file: FILE,
        kind: RequestType::Static,
    };
    current_thread().block_on(async {
        let mut rated = RatedReceive::start(clock.ms(Instant::now()));
        assert!(g.try_exchange(entry, &mut rated, &clock).await.is_ok());
    });
    let conn = seen
        .recv_timeout(WAIT)
        .expect("the recorder saw a connection");
    assert_eq!(conn.heads.len(), 1);
    assert!(!conn.heads[0].contains("Connection:"), "{}", conn.heads[0]);
    assert!(!conn.client_closed);
}

/// Issue 18, item 10: `ClassStats::post` stayed 0; every POST sent now counts
/// in its class, in every phase, as `Tally::posts` does for the audit.
#[test]
fn posts_are_counted_per_class() {
    let (addr, _seen) = recorder();
    let plan = plan(addr);
    let (shard, live) = (RefCell::new(Tally::default()), Live::default());
    let connector = Connector::new(None).expect("plain connector");
    let local = Local::new(plan.directories);
    let mut g = Generator::new(&plan, 0, &shard, &live, &connector, &local);
    // A clock whose run phase is over: the POST is not measured, still counted.
    let mut clock = clock();
    clock.run_end = Duration::ZERO;
    let post = |class| Entry {
        file: FileId { class, ..FILE },
        kind: RequestType::Post,
    };
    current_thread().block_on(async {
        g.operation(post(2), &clock).await;
        g.operation(post(2), &clock).await;
        g.operation(post(0), &clock).await;
    });
    let posts: Vec<u64> = g.stats.classes.iter().map(|c| c.post).collect();
    assert_eq!(posts, [1, 0, 2, 0]);
    assert_eq!(shard.borrow().posts, [1, 0, 2, 0]);
    assert_eq!(g.stats.classes[2].good + g.stats.classes[2].bad, 0);
}

/// Issue 18, item 6: a run reports its client's class totals, so the manager's
/// per-client check can be made after agents' tallies are merged.
#[test]
fn a_run_reports_its_client_totals() {
    let (addr, _seen) = recorder();
    let mut plan = plan(addr);
    plan.client = 2;
    plan.static_only = true;
    plan.run = Duration::from_millis(100);
    let tally = current_thread().block_on(crate::run(&plan, Arc::new(Live::default())));
    assert_eq!(tally.clients.len(), 1);
    assert_eq!(tally.clients[0].client, 2);
    assert_eq!(
        tally.clients[0].classes,
        stoa_web99::metrics::class_totals(&tally.generators)
    );
    // Empty answers fail the static check: the totals carry the errors.
    let bad: u64 = tally.clients[0].classes.iter().map(|c| c.bad).sum();
    assert!(bad > 0, "{tally:?}");
    let mut merged = tally.clone();
    merged.merge(tally);
    assert_eq!(
        merged.clients.len(),
        2,
        "merging keeps each client's totals"
    );
}
