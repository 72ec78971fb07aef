use super::*;
use crate::tally::{Failure, SessionRecord, Sized};

fn ok(function: Function, ms: f64) -> SessionRecord {
    let mut r = SessionRecord::default();
    r.step(function, ms, Ok(()));
    r
}

#[test]
fn sized_cutoffs_match_the_white_paper() {
    // (WP) §6.1 examples in bytes: 1,000 → 5.3 s, 10,000 → 8.3, 100,000 → 38.3,
    // 1,000,000 → 338.3, 2,000,000 → 671.7.
    for (bytes, secs) in [
        (1_000, 5.333),
        (10_000, 8.333),
        (100_000, 38.333),
        (1_000_000, 338.333),
        (2_000_000, 671.667),
    ] {
        assert!((sized_cutoff_secs(bytes) - secs).abs() < 0.001, "{bytes}");
    }
    // The table's largest size, 2,675 KB = 2,739,200 bytes: 918.07 s.
    assert!((sized_cutoff_secs(2_675 * 1024) - 918.067).abs() < 0.001);
}

/// A hand-computed level: every figure below was worked out on paper.
#[test]
fn hand_computed_level() {
    let mut t = LevelTally::default();
    // SMTP Connect: 96 fast, 2 slow (6 s: expected reply, over the limit),
    // 2 refused connections. 96 / 100 = 96.00 % → passes.
    for _ in 0..96 {
        t.add_session(&ok(Function::SmtpConnect, 40.0));
    }
    for _ in 0..2 {
        t.add_session(&ok(Function::SmtpConnect, 6_000.0));
    }
    for _ in 0..2 {
        let mut r = SessionRecord::default();
        r.step(Function::SmtpConnect, 1.0, Err(Failure::Connect));
        t.add_session(&r);
    }
    // POP Connect: 94 fast, 6 at exactly 5 s and 5.001 s (3 each):
    // 94 + 3 = 97 pass → 97.00 %.
    for _ in 0..94 {
        t.add_session(&ok(Function::PopConnect, 10.0));
    }
    for ms in [5_000.0, 5_000.0, 5_000.0, 5_001.0, 5_001.0, 5_001.0] {
        t.add_session(&ok(Function::PopConnect, ms));
    }
    // POP Status: 20 attempts, 18 pass, 2 timeouts → 90.00 % → fails.
    for _ in 0..18 {
        t.add_session(&ok(Function::PopStatus, 3.0));
    }
    for _ in 0..2 {
        let mut r = SessionRecord::default();
        r.step(Function::PopStatus, 60_000.0, Err(Failure::Timeout));
        t.add_session(&r);
    }
    // Two DATA transfers of 10 KB (cutoff 8.413 s): 8.4 s passes, 8.5 s fails
    // → 50.00 %; sizes 10,240 each.
    let mut r = SessionRecord::default();
    r.transfer(Sized::DataResponse, 8_400.0, 10_240, true);
    r.transfer(Sized::DataResponse, 8_500.0, 10_240, true);
    t.add_session(&r);
    // Delivery: 10 probes, 9 within 60 s → 90.00 %.
    t.delivery.attempts = 10;
    t.delivery.pass = 9;
    // Remote: 200 recipients sent, 199 received → 99.50 %.
    t.remote.sent = 200;
    t.remote.received = 199;

    let rows = detail_rows(&t);
    let get = |name: &str| rows.iter().find(|r| r.name == name).expect(name).clone();
    assert_eq!(get("SMTP Connect").percent, Some(96.0));
    assert!(get("SMTP Connect").passed);
    assert_eq!(get("POP Connect").percent, Some(97.0));
    assert_eq!(get("POP Status").percent, Some(90.0));
    assert!(!get("POP Status").passed);
    assert_eq!(get("SMTP Data Response Time").percent, Some(50.0));
    assert_eq!(get("Delivery Time").percent, Some(90.0));
    assert_eq!(get("Remote Message Delivery").percent, Some(99.5));
    assert!(get("SMTP Hello").passed && get("SMTP Hello").percent.is_none());

    // Errors: 2 connect + 2 timeouts = 4; attempts: 100 + 100 + 20 steps + 10
    // probes = 230 → 1.739 %.
    assert_eq!(t.errors(), 4);
    assert_eq!(t.attempts(), 230);
    assert!((error_percent(&t) - 400.0 / 230.0).abs() < 1e-9);
    assert_eq!(t.counters.smtp_connect_error, 2);
    assert_eq!(t.counters.pop_timeout, 2);
    assert_eq!(t.data_up.count, 2);
    assert_eq!(t.data_up.mean(), 10_240.0);

    let summary = summary_rows(&t);
    let names: Vec<&str> = summary.iter().map(|r| r.name).collect();
    assert_eq!(
        names,
        [
            "SMTP Connect",
            "SMTP Data",
            "POP Connect",
            "POP Status",
            "POP Retrieve",
            "POP Delete",
            "Delivery Time",
            "Error Rate"
        ]
    );
    assert!(!summary[7].passed);

    let v = verdict(&t);
    assert!(!v.passed);
    assert_eq!(
        v.failures,
        [
            "POP Status 90.00% < 95%",
            "Delivery Time 90.00% < 95%",
            "SMTP Data Response Time 50.00% < 95%",
            "Error Rate 1.74% >= 1%"
        ]
    );
}

#[test]
fn an_empty_level_passes_with_no_samples() {
    let t = LevelTally::default();
    let v = verdict(&t);
    assert!(v.passed, "{v:?}");
    assert!(detail_rows(&t).iter().all(|r| r.percent.is_none()));
    assert_eq!(error_percent(&t), 0.0);
}

/// ">95%" is strict: 95 passes of 100 fail the row, 96 pass it.
#[test]
fn exactly_95_percent_fails() {
    let mut t = LevelTally::default();
    for _ in 0..95 {
        t.add_session(&ok(Function::PopStatus, 40.0));
    }
    for _ in 0..5 {
        t.add_session(&ok(Function::PopStatus, 6_000.0));
    }
    let row = &detail_rows(&t)[Function::PopStatus.index()];
    assert_eq!((row.attempts, row.pass), (100, 95));
    assert!(!row.passed, "95.00 % is not more than 95 %");
    let v = verdict(&t);
    assert!(!v.passed);
    assert_eq!(v.failures, ["POP Status 95.00% = 95% (must be above)"]);
    t.add_session(&ok(Function::PopStatus, 40.0));
    t.add_session(&ok(Function::PopStatus, 40.0));
    t.add_session(&ok(Function::PopStatus, 40.0));
    t.add_session(&ok(Function::PopStatus, 40.0));
    t.add_session(&ok(Function::PopStatus, 40.0));
    // 100 of 105 = 95.24 %.
    assert!(detail_rows(&t)[Function::PopStatus.index()].passed);
}
