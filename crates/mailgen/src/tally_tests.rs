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

/// Connect Errors are not attempts of the Connect rows: on the published Sun
/// page (120 % level) POP Connect has 1,027,076 attempts while POP Quit +
/// POP Disconnect = 1,026,983 and POP Connect Error = 53,117, so the kit's
/// 73.78 % is over the connections made. Counting the refused ones as
/// attempts (as before this fix) gave 70.2 % for the page's figures.
#[test]
fn connect_errors_are_not_attempts_of_the_connect_row() {
    let mut t = LevelTally::default();
    let session = |ms: f64| {
        let mut r = SessionRecord::default();
        r.step(Function::PopConnect, ms, Ok(()));
        r.step(Function::PopQuit, 1.0, Ok(()));
        r.completed = true;
        r
    };
    // The page's shape, scaled down: 738 fast and 262 slow greetings, 52
    // connections refused and 1 closed before its greeting.
    for _ in 0..738 {
        t.add_session(&session(10.0));
    }
    for _ in 0..262 {
        t.add_session(&session(9_000.0));
    }
    for failure in std::iter::repeat_n(Failure::Connect, 52).chain([Failure::Closed]) {
        let mut r = SessionRecord::default();
        r.step(Function::PopConnect, 1.0, Err(failure));
        t.add_session(&r);
    }
    let connect = t.function(Function::PopConnect);
    assert_eq!(
        (connect.attempts, connect.pass, connect.errors),
        (1_000, 738, 0)
    );
    assert_eq!(t.counters.pop_connect_error, 53);
    // POP Session = POP Quit + POP Connect Error, as on the page.
    assert_eq!(t.counters.pop_session, 1_053);
    assert_eq!(t.function(Function::PopQuit).attempts, 1_000);
}

/// What `stoa bench mail --agents` relies on: tallies that crossed the wire
/// as JSON merge into exactly the tally of one process that saw every session
/// (every counter summed, every histogram bucket added).
#[test]
fn tallies_over_the_wire_merge_exactly() {
    let mut rng = fastrand::Rng::with_seed(5);
    let mut one = LevelTally {
        window_secs: 60.0,
        ..LevelTally::default()
    };
    let mut parts = vec![one.clone(), one.clone(), one.clone()];
    for i in 0..300 {
        let mut rec = SessionRecord::default();
        let smtp = rng.bool();
        let functions: &[Function] = if smtp {
            &Function::ALL[..6]
        } else {
            &Function::ALL[6..]
        };
        for &f in functions {
            let outcome = if rng.u8(..20) == 0 {
                Err(Failure::Timeout)
            } else {
                Ok(())
            };
            rec.step(f, rng.f64() * 8000.0, outcome);
            if outcome.is_err() {
                break;
            }
        }
        let kind = if smtp {
            Sized::DataResponse
        } else {
            Sized::RetrieveResponse
        };
        rec.transfer(kind, rng.f64() * 9000.0, rng.u64(1..3_000_000), rng.bool());
        rec.to_local = rng.u32(0..4);
        rec.to_remote = rng.u32(0..2);
        rec.dropped = rng.u8(..50) == 0;
        one.add_session(&rec);
        let part = &mut parts[i % 3];
        part.add_session(&rec);
        for t in [&mut one, &mut *part] {
            t.started.initial_pop += 1;
            t.remote.sent += u64::from(rec.to_remote);
            t.delivery.attempts += 1;
            t.delivery.times.record_ms(i as f64 * 37.0);
        }
    }
    let mut merged = LevelTally::default();
    for part in &parts {
        let wire = serde_json::to_string(part).expect("serialise");
        let back: LevelTally = serde_json::from_str(&wire).expect("deserialise");
        merged.merge(&back);
    }
    assert_eq!(
        serde_json::to_value(&merged).expect("merged"),
        serde_json::to_value(&one).expect("one"),
    );
    assert_eq!(merged.counters.sessions(), 300);
}
