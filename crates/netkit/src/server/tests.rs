use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A test protocol: greets with its listener's kind byte, then holds the
/// connection until the client closes it (or, with `hold_past_shutdown` off, until
/// shutdown).
struct Greeter {
    max_connections: usize,
    grace: Duration,
    hold_past_shutdown: bool,
    clients: Arc<ClientCounts>,
    workers_started: AtomicUsize,
    workers_stopped: AtomicUsize,
    drains: AtomicUsize,
    left_at_grace: AtomicUsize,
}

impl Greeter {
    fn new(max_connections: usize, grace: Duration, hold_past_shutdown: bool) -> Arc<Greeter> {
        Arc::new(Greeter {
            max_connections,
            grace,
            hold_past_shutdown,
            clients: Arc::new(ClientCounts::new(0)),
            workers_started: AtomicUsize::new(0),
            workers_stopped: AtomicUsize::new(0),
            drains: AtomicUsize::new(0),
            left_at_grace: AtomicUsize::new(0),
        })
    }
}

impl Handler for Greeter {
    type Kind = u8;
    type Worker = WorkerScope;
    const NAME: &'static str = "test";

    fn max_connections(&self) -> usize {
        self.max_connections
    }
    fn grace(&self) -> Duration {
        self.grace
    }
    fn in_flight(&self) -> usize {
        self.clients.open()
    }
    fn start_worker(self: &Arc<Self>, scope: WorkerScope) -> WorkerScope {
        self.workers_started.fetch_add(1, Ordering::SeqCst);
        scope
    }
    fn accept(self: &Arc<Self>, _worker: &Arc<WorkerScope>, conn: Accepted<u8>) {
        let slot = self.clients.enter(conn.peer.ip());
        let hold = self.hold_past_shutdown;
        tokio::spawn(async move {
            let Accepted {
                stream,
                peer,
                kind,
                permit,
                mut shutdown,
            } = conn;
            let mut stream = crate::accept::register(stream, peer).expect("register");
            let _ = stream.write_all(&[kind]).await;
            let mut byte = [0u8; 1];
            if hold {
                let _ = stream.read(&mut byte).await;
            } else {
                tokio::select! {
                    _ = stream.read(&mut byte) => {}
                    () = shutdown.wait() => {}
                }
            }
            drop((slot, permit));
        });
    }
    fn begin_drain(&self, _worker: &WorkerScope) {
        self.drains.fetch_add(1, Ordering::SeqCst);
    }
    fn stop_worker(&self, _worker: &WorkerScope) {
        self.workers_stopped.fetch_add(1, Ordering::SeqCst);
    }
    fn grace_over(&self, left: usize) {
        self.left_at_grace.fetch_max(left, Ordering::SeqCst);
    }
}

/// Binds `kinds` on loopback port 0 for `workers` workers and runs `handler` on a
/// thread; returns the addresses, the trigger and the thread.
fn start(
    handler: &Arc<Greeter>,
    workers: usize,
    kinds: &[u8],
    model: RuntimeModel,
) -> (
    Vec<SocketAddr>,
    crate::shutdown::Trigger,
    std::thread::JoinHandle<io::Result<()>>,
) {
    let mut listeners = Listeners::new(workers);
    let addrs = kinds
        .iter()
        .map(|&k| listeners.bind("127.0.0.1:0".parse().expect("addr"), k))
        .collect::<io::Result<Vec<_>>>()
        .expect("bind");
    assert_eq!(listeners.workers(), workers);
    let (trigger, shutdown) = crate::shutdown::channel();
    let handler = Arc::clone(handler);
    let thread = std::thread::spawn(move || run(&handler, listeners, model, shutdown));
    (addrs, trigger, thread)
}

fn greeting(addr: SocketAddr) -> (TcpStream, u8) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte).expect("greeting");
    (stream, byte[0])
}

fn serves_every_listener_then_drains(model: RuntimeModel) {
    let handler = Greeter::new(16, Duration::from_secs(10), false);
    let (addrs, trigger, thread) = start(&handler, 2, &[1, 2], model);
    assert_ne!(addrs[0].port(), 0);
    let (_a, kind_a) = greeting(addrs[0]);
    let (mut b, kind_b) = greeting(addrs[1]);
    assert_eq!((kind_a, kind_b), (1, 2));
    b.write_all(b"x").expect("write");
    trigger.trigger();
    thread.join().expect("server thread").expect("run");
    let workers = match model {
        RuntimeModel::PerCore => 2,
        RuntimeModel::MultiThread => 1,
    };
    assert_eq!(handler.workers_started.load(Ordering::SeqCst), workers);
    assert_eq!(handler.drains.load(Ordering::SeqCst), workers);
    assert_eq!(handler.workers_stopped.load(Ordering::SeqCst), workers);
    assert_eq!(handler.clients.open(), 0, "every connection drained");
    assert_eq!(handler.left_at_grace.load(Ordering::SeqCst), 0);
}

#[test]
fn per_core_serves_every_listener_then_drains() {
    serves_every_listener_then_drains(RuntimeModel::PerCore);
}

#[test]
fn multi_thread_serves_every_listener_then_drains() {
    serves_every_listener_then_drains(RuntimeModel::MultiThread);
}

#[test]
fn connection_slots_bound_a_worker() {
    let handler = Greeter::new(1, Duration::from_secs(10), true);
    let (addrs, trigger, thread) = start(&handler, 1, &[7], RuntimeModel::PerCore);
    let (first, _) = greeting(addrs[0]);
    // The second connection completes in the kernel but is not accepted while the
    // only slot is taken: no greeting comes.
    let mut second = TcpStream::connect(addrs[0]).expect("connect");
    second
        .set_read_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    let early = second.read(&mut byte);
    assert!(early.is_err(), "greeted beyond the limit: {early:?}");
    drop(first);
    second
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    second
        .read_exact(&mut byte)
        .expect("greeting once the slot is free");
    assert_eq!(byte[0], 7);
    drop(second);
    trigger.trigger();
    thread.join().expect("server thread").expect("run");
}

#[test]
fn drain_gives_up_after_the_grace() {
    let handler = Greeter::new(4, Duration::from_millis(50), true);
    let (addrs, trigger, thread) = start(&handler, 1, &[3], RuntimeModel::PerCore);
    let (_held, _) = greeting(addrs[0]);
    trigger.trigger();
    thread.join().expect("server thread").expect("run");
    assert_eq!(handler.left_at_grace.load(Ordering::SeqCst), 1);
}

#[test]
fn a_hand_over_stops_accepting_and_waits_for_connections_to_end() {
    // Connections end at the stop, not at the hand-over.
    let handler = Greeter::new(4, Duration::from_secs(10), false);
    let (addrs, trigger, thread) = start(&handler, 2, &[5], RuntimeModel::PerCore);
    let (mut held, _) = greeting(addrs[0]);
    trigger.hand_over();
    // The listener is gone (nothing keeps it: the default pool): no one else is
    // taken in.
    // (Connections made before the listener closed end at once: dropped here.)
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = std::iter::repeat_with(|| TcpStream::connect(addrs[0]).is_err())
        .take_while(|_| Instant::now() < deadline)
        .any(|refused| refused);
    assert!(refused, "still accepting after the hand-over");
    // The established connection is still served...
    held.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let mut byte = [0u8; 1];
    let early = held.read(&mut byte);
    assert!(
        early.is_err(),
        "the connection ended at the hand-over: {early:?}"
    );
    assert!(
        !thread.is_finished(),
        "the server ended with a connection open"
    );
    // ...and when it ends, the server ends, without a stop.
    held.write_all(b"x").expect("write");
    thread.join().expect("server thread").expect("run");
    assert_eq!(handler.drains.load(Ordering::SeqCst), 2);
    assert_eq!(handler.clients.open(), 0);
    assert_eq!(handler.left_at_grace.load(Ordering::SeqCst), 0);
    drop(trigger);
}

#[test]
fn client_counts_limit_each_address() {
    let counts = Arc::new(ClientCounts::new(2));
    let ip: std::net::IpAddr = "127.0.0.1".parse().expect("ip");
    let other: std::net::IpAddr = "::1".parse().expect("ip");
    let a = counts.enter(ip);
    let b = counts.enter(ip);
    let c = counts.enter(ip);
    let d = counts.enter(other);
    assert!(!a.over_limit() && !b.over_limit() && !d.over_limit());
    assert!(c.over_limit());
    assert_eq!(counts.open(), 4);
    drop((a, c));
    assert!(!counts.enter(ip).over_limit());
    drop((b, d));
    assert_eq!(counts.open(), 0);
}

#[test]
fn endpoints_name_their_scheme() {
    let addrs: Vec<SocketAddr> = ["127.0.0.1:25", "[::1]:587"]
        .iter()
        .map(|a| a.parse().expect("addr"))
        .collect();
    let shown: Vec<String> = Endpoint::each("smtp", &addrs)
        .map(|e| e.to_string())
        .collect();
    assert_eq!(shown, ["smtp://127.0.0.1:25", "smtp://[::1]:587"]);
}
