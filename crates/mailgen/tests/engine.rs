//! The engine over real sockets: one short level of full-speed remote-MTA
//! SMTP sessions against the sink, which plays the server here.

mod common;

use std::sync::Arc;
use std::time::Duration;

use stoa_mail2001::Rates;
use stoa_mailgen::engine::{Engine, LevelPlan, Live, Workload};
use stoa_mailgen::qos;
use stoa_mailgen::sink::Sink;
use stoa_mailgen::tally::Function;
use tokio::net::TcpListener;

/// Issue 18, item 3: about 1 % of SMTP sessions are dropped mid-DATA on
/// purpose. They are Disconnects, not Sessions and not errors; their
/// transfers are attempted and not passed; the server (the sink) receives
/// every completed message and none of the dropped ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_drops_one_smtp_session_in_a_hundred() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let smtp = listener.local_addr().expect("addr");
    let workload = Workload {
        smtp,
        read_addr: common::refused_addr().await,
        access: stoa_mailgen::access::Access::Pop3,
        domain: "stoa.test".into(),
        remote_domain: "remote.test".into(),
        users: 100,
        retry_pool: Workload::kit_retry_pool(100),
        password: "pw".into(),
        reply_timeout: Duration::from_secs(30),
        probe_share: 0.0,
        seed: 18,
        run_id: 18,
    };
    let engine = Engine::new(workload);
    let sink = Sink::start(listener, engine.on_sink_message());
    // Only the full-speed remote-MTA stream: 200 sessions/s for 3 s.
    let rates = Rates {
        remote_smtp: 200.0,
        user_smtp: 0.0,
        initial_pop: 0.0,
        repeated_pop: 0.0,
        ..Rates::at(1.0)
    };
    let plan = LevelPlan {
        index: 0,
        rates,
        warmup: Duration::ZERO,
        run: Duration::from_secs(3),
        cooldown: Duration::ZERO,
        drain_limit: Duration::from_secs(60),
    };
    let t = engine.run_level(&plan, &Arc::new(Live::default())).await;
    let c = &t.counters;
    let started = t.started.remote_smtp;
    assert!(started > 400, "{started} sessions");
    assert_eq!(c.unfinished, 0);
    assert!(c.smtp_disconnect > 0, "no drops in {started} sessions");
    assert!(
        c.smtp_disconnect * 100 < started * 3,
        "{} drops in {started}",
        c.smtp_disconnect
    );
    assert_eq!(c.smtp_session + c.smtp_disconnect, started);
    assert_eq!(qos::error_percent(&t), 0.0);
    let data = t.function(Function::SmtpData);
    assert_eq!(data.errors, 0);
    assert_eq!(t.data_response.attempts, data.attempts);
    assert_eq!(t.data_response.pass, data.attempts - c.smtp_disconnect);
    // Every message the server acknowledged, and nothing else.
    assert_eq!(sink.stats().messages, c.smtp_session);
    sink.stop();
}
