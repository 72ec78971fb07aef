//! The POP3 proxy over real sockets: two store hosts and a proxy in this process,
//! users routed by their `mailHost`, the client's address forwarded, refusals
//! that never reach a store host, a store host that is down.

mod common;

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use stoa_directory::Directory;
use stoa_pop3::{BackendTls, ProxyConfig, Server, StoreHost};
use stoa_testkit::base64;

use common::{ANN, ANN_PASSWORD, Client, JOE, JOE_PASSWORD, MailDir, Running, message};

/// A user whose store host is not running.
const LOST: &str = "lost@example.test";

/// Two store hosts (joe's and ann's mail on each differs), a proxy in front.
struct System {
    stores: [MailDir; 2],
    /// Kept running for the system's life.
    _store_servers: [Running; 2],
    /// The proxy's own directory: the users with their `mailHost`.
    proxy_dir: MailDir,
    proxy: SocketAddr,
    proxy_tls: SocketAddr,
    trigger: Option<stoa_netkit::shutdown::Trigger>,
    thread: Option<JoinHandle<()>>,
}

impl System {
    fn start() -> System {
        System::start_with(|_| {}, |_| {})
    }

    /// [`System::start`] with the store hosts' and the proxy's configuration
    /// changed by `store` and `proxy`.
    fn start_with(
        store: impl Fn(&mut stoa_pop3::Config),
        proxy: impl FnOnce(&mut ProxyConfig),
    ) -> System {
        let stores = [MailDir::new(), MailDir::new()];
        for (i, store) in stores.iter().enumerate() {
            store.directory.add_user(LOST, Some("lost")).expect("lost");
            store.deliver(JOE, &message(10 + i, 300));
            store.deliver(ANN, &message(20 + i, 400));
        }
        let store_servers = [0, 1].map(|i| {
            let mut config = stores[i].config();
            config.trusted_proxies = vec!["127.0.0.1/32".parse().expect("net")];
            store(&mut config);
            Running::start(&stores[i], config)
        });
        let proxy_dir = MailDir::new();
        proxy_dir
            .directory
            .add_user(LOST, Some("lost"))
            .expect("lost");
        let d = &proxy_dir.directory;
        d.set_mail_host(JOE, Some("store1.test")).expect("joe");
        d.set_mail_host(ANN, Some("Store2.Test.")).expect("ann");
        d.set_mail_host(LOST, Some("store3.test")).expect("lost");
        let down = {
            let l = TcpListener::bind("127.0.0.1:0").expect("bind");
            l.local_addr().expect("addr")
        };
        let store = |name: &str, addr: SocketAddr| StoreHost {
            name: name.into(),
            pop3: Some(addr.to_string()),
            imap: None,
        };
        let proxy_config = ProxyConfig {
            stores: vec![
                store("store1.test", store_servers[0].pop3),
                store("store2.test", store_servers[1].pop3),
                store("store3.test", down),
            ],
            connect_timeout: Duration::from_secs(2),
            ..ProxyConfig::default()
        };
        let mut proxy_config = proxy_config;
        proxy(&mut proxy_config);
        let mut config = proxy_dir.config();
        config.hostname = "mmp.example.test".into();
        let directory: Arc<dyn Directory> = proxy_dir.directory.clone();
        let server = Server::bind_proxy(config, proxy_config, directory).expect("bind the proxy");
        let proxy = server.local_addrs()[0];
        let proxy_tls = server.tls_addrs()[0];
        let (trigger, shutdown) = stoa_netkit::shutdown::channel();
        let thread = std::thread::spawn(move || server.run(shutdown).expect("run"));
        System {
            stores,
            _store_servers: store_servers,
            proxy_dir,
            proxy,
            proxy_tls,
            trigger: Some(trigger),
            thread: Some(thread),
        }
    }

    /// A client of the proxy, TLS on (STLS), not logged in.
    fn client(&self) -> Client {
        let mut c = Client::connect(self.proxy);
        assert!(c.greeting.contains("mmp.example.test"), "{}", c.greeting);
        c.starttls(&self.proxy_dir.cert);
        c
    }
}

impl Drop for System {
    fn drop(&mut self) {
        if let Some(trigger) = self.trigger.take() {
            trigger.trigger();
        }
        if let Some(thread) = self.thread.take() {
            thread.join().expect("proxy thread");
        }
    }
}

#[test]
fn users_reach_their_own_store_host() {
    let system = System::start();
    // joe over STLS with USER/PASS: store 1's message for him.
    let mut c = system.client();
    let ok = c.login(JOE, JOE_PASSWORD);
    assert!(ok.contains("Maildrop has 1 message"), "{ok}");
    let (_, got) = c.retr(1);
    assert_eq!(got, message(10, 300));
    c.ok("DELE 1");
    c.ok("QUIT");
    c.expect_eof();
    assert!(
        system.stores[0].stored(JOE).is_empty(),
        "QUIT committed on store 1"
    );
    assert_eq!(system.stores[1].stored(JOE).len(), 1, "store 2 untouched");
    // ann over POP3S with AUTH PLAIN, commands pipelined behind the login.
    let mut c = Client::connect_tls(system.proxy_tls, &system.proxy_dir.cert);
    let plain = base64(format!("\0{ANN}\0{ANN_PASSWORD}").as_bytes());
    c.send(format!("AUTH PLAIN {plain}\r\nSTAT\r\n").as_bytes());
    assert!(c.status().starts_with("+OK Logged in."));
    assert_eq!(c.status(), format!("+OK 1 {}", message(21, 400).len()));
    assert_eq!(c.retr(1).1, message(21, 400));
    c.ok("QUIT");
}

#[test]
fn refusals_are_the_proxys_and_a_store_that_is_down_is_temporary() {
    let system = System::start();
    let mut c = system.client();
    c.ok(&format!("USER {JOE}"));
    assert_eq!(c.cmd("PASS wrong"), "-ERR [AUTH] Authentication failed");
    c.ok("USER nobody@example.test");
    assert_eq!(c.cmd("PASS wrong"), "-ERR [AUTH] Authentication failed");
    // The store host is down: a temporary failure, and the session goes on.
    c.ok(&format!("USER {LOST}"));
    assert!(c.cmd("PASS lost").starts_with("-ERR [SYS/TEMP]"));
    let ok = c.login(JOE, JOE_PASSWORD);
    assert!(ok.starts_with("+OK"), "{ok}");
    c.ok("QUIT");
    // A mailbox in use on its store host is [IN-USE], passed on.
    let mut first = system.client();
    first.login(ANN, ANN_PASSWORD);
    let mut second = system.client();
    second.ok(&format!("USER {ANN}"));
    assert!(
        second
            .cmd(&format!("PASS {ANN_PASSWORD}"))
            .starts_with("-ERR [IN-USE]")
    );
    first.ok("QUIT");
}

#[test]
fn the_store_host_counts_the_forwarded_client_not_the_proxy() {
    // The store hosts allow one connection per client address. Two clients of
    // the proxy (127.0.0.2 for joe, 127.0.0.3 for ann, both on store 2) are two
    // addresses there when the proxy forwards them, and one (the proxy's) when it
    // does not.
    for forward in [true, false] {
        let system = System::start_with(
            |c| c.limits.max_connections_per_client = 1,
            |p| {
                p.forward_client = forward;
            },
        );
        let d = &system.proxy_dir.directory;
        d.set_mail_host(JOE, Some("store2.test")).expect("joe");
        let session = |from: &str, user: &str, password: &str| {
            let mut c = Client::connect_from(system.proxy, Some(from.parse().expect("ip")));
            c.starttls(&system.proxy_dir.cert);
            c.ok(&format!("USER {user}"));
            (c.cmd(&format!("PASS {password}")), c)
        };
        let (first, _joe) = session("127.0.0.2", JOE, JOE_PASSWORD);
        assert!(first.starts_with("+OK Logged in."), "{first}");
        let (second, _ann) = session("127.0.0.3", ANN, ANN_PASSWORD);
        match forward {
            true => assert!(second.starts_with("+OK Logged in."), "{second}"),
            false => assert!(second.starts_with("-ERR [SYS/TEMP]"), "{second}"),
        }
    }
}

#[test]
fn the_leg_to_the_store_host_can_be_stls_or_tls_and_is_verified() {
    let system = System::start();
    let store1 = &system.stores[0];
    for (tls, trusted) in [
        (BackendTls::StartTls, true),
        (BackendTls::Tls, true),
        (BackendTls::StartTls, false),
    ] {
        let mut config = store1.config();
        config.trusted_proxies = vec!["127.0.0.1/32".parse().expect("net")];
        let running = Running::start(store1, config);
        let addr = match tls {
            BackendTls::Tls => running.pop3s.expect("pop3s"),
            _ => running.pop3,
        };
        let proxy_dir = MailDir::new();
        proxy_dir
            .directory
            .set_mail_host(JOE, Some("localhost"))
            .expect("joe");
        // Without the store's CA the proxy must not talk to it: another CA.
        let ca = match trusted {
            true => store1.cert.cert.clone(),
            false => proxy_dir.cert.cert.clone(),
        };
        let proxy_config = ProxyConfig {
            stores: vec![StoreHost {
                name: "localhost".into(),
                pop3: Some(addr.to_string()),
                imap: None,
            }],
            backend_tls: tls,
            backend_ca: vec![ca],
            ..ProxyConfig::default()
        };
        let directory: Arc<dyn Directory> = proxy_dir.directory.clone();
        let server = Server::bind_proxy(proxy_dir.config(), proxy_config, directory).expect("bind");
        let proxy = server.local_addrs()[0];
        let (trigger, shutdown) = stoa_netkit::shutdown::channel();
        let thread = std::thread::spawn(move || server.run(shutdown).expect("run"));
        let mut c = Client::connect(proxy);
        c.starttls(&proxy_dir.cert);
        c.ok(&format!("USER {JOE}"));
        let reply = c.cmd(&format!("PASS {JOE_PASSWORD}"));
        match trusted {
            true => {
                assert!(reply.starts_with("+OK Logged in."), "{tls:?}: {reply}");
                assert_eq!(c.retr(1).1, message(10, 300));
                c.ok("QUIT");
            }
            false => assert!(reply.starts_with("-ERR [SYS/TEMP]"), "{reply}"),
        }
        trigger.trigger();
        thread.join().expect("proxy thread");
    }
}
