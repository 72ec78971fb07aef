use super::*;

#[test]
fn sessions_fill_the_counters() {
    let mut t = LevelTally::default();
    let mut smtp = SessionRecord::default();
    for f in [
        Function::SmtpConnect,
        Function::SmtpHello,
        Function::SmtpMailFrom,
        Function::SmtpRcptTo,
        Function::SmtpRcptTo,
        Function::SmtpData,
        Function::SmtpQuit,
    ] {
        smtp.step(f, 2.0, Ok(()));
    }
    smtp.transfer(Sized::DataResponse, 30.0, 2048, true);
    smtp.to_local = 1;
    smtp.to_remote = 1;
    smtp.completed = true;
    t.add_session(&smtp);
    let mut pop = SessionRecord::default();
    pop.step(Function::PopConnect, 1.0, Ok(()));
    pop.step(Function::PopUserId, 1.0, Err(Failure::Closed));
    t.add_session(&pop);

    assert_eq!(t.function(Function::SmtpRcptTo).attempts, 2);
    assert_eq!(t.counters.smtp_session, 1);
    // A session the server closed is a failed Session (a protocol error), not
    // a Disconnect: those are the client's deliberate drops.
    assert_eq!(t.counters.pop_session, 1);
    assert_eq!(t.counters.pop_protocol_error, 1);
    assert_eq!(t.counters.pop_disconnect, 0);
    assert_eq!(t.counters.smtp_to_remote, 1);
    assert_eq!(pop.failure(), Some((Function::PopUserId, Failure::Closed)));
    assert_eq!(t.data_response.pass, 1);

    let mut merged = LevelTally::default();
    merged.merge(&t);
    merged.merge(&t);
    assert_eq!(merged.function(Function::SmtpRcptTo).attempts, 4);
    assert_eq!(merged.function(Function::SmtpRcptTo).latency.count(), 4);
    assert_eq!(merged.counters.pop_protocol_error, 2);
    assert_eq!(merged.data_up.sum, 4096);
    assert_eq!(merged.counters.session_errors(), 2);
    assert_eq!(merged.counters.sessions(), 4);

    let wire = serde_json::to_string(&merged).expect("serialise");
    let back: LevelTally = serde_json::from_str(&wire).expect("deserialise");
    assert_eq!(back.counters.sessions(), merged.counters.sessions());
}

#[test]
fn actual_rate_is_user_sessions_per_minute() {
    let mut t = LevelTally {
        window_secs: 120.0,
        ..LevelTally::default()
    };
    t.started.user_smtp = 30;
    t.started.remote_smtp = 27;
    assert_eq!(t.actual_mpm(), 15.0);
}

#[test]
fn a_failed_final_reply_is_an_error_not_a_second_attempt() {
    let mut t = LevelTally::default();
    let mut r = SessionRecord::default();
    r.step(Function::SmtpData, 3.0, Ok(()));
    r.step(Function::SmtpData, 60_000.0, Err(Failure::Timeout));
    r.transfer(Sized::DataResponse, 60_000.0, 4096, false);
    t.add_session(&r);
    let data = t.function(Function::SmtpData);
    assert_eq!((data.attempts, data.pass, data.errors), (1, 1, 1));
    assert_eq!(t.counters.smtp_timeout, 1);
    assert_eq!((t.data_response.attempts, t.data_response.pass), (1, 0));
    // Two separate RCPTs, the second refused, are two attempts.
    let mut r = SessionRecord::default();
    r.step(Function::SmtpRcptTo, 1.0, Ok(()));
    r.step(Function::SmtpRcptTo, 1.0, Err(Failure::Protocol));
    t.add_session(&r);
    assert_eq!(t.function(Function::SmtpRcptTo).attempts, 2);
}
