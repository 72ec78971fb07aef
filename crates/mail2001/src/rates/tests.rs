use super::*;
use crate::profile::LOAD_LEVELS;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn sun_7500_matches_section_0() {
    let r = Rates::at(7_500.0);
    assert!(close(r.users, 1_500_000.0));
    assert!(close(r.user_smtp, 125.0), "{r:?}");
    assert!(close(r.remote_smtp, 112.5), "{r:?}");
    assert!(close(r.smtp_total(), 237.5), "{r:?}");
    assert!(close(r.initial_pop, 62.5), "{r:?}");
    assert!(close(r.repeated_pop, 187.5), "{r:?}");
    assert!(close(r.pop_total(), 250.0), "{r:?}");
    assert!(close(r.mailbox_deliveries(), 250.0), "{r:?}");
    assert!(close(r.remote_recipients(), 225.0), "{r:?}");
    // "about 112–114 messages/s relayed to the sink".
    let sink = r.sink_messages();
    assert!((112.0..=115.0).contains(&sink), "{sink}");
    assert!((sink / r.user_smtp - 0.914).abs() < 0.001, "{sink}");
    assert!(close(r.retry_pool(), 112_500.0));
    assert!(close(r.retry_revisit_secs(), 600.0));
}

#[test]
fn load_levels_match_the_7500_table() {
    // §1.3: (user SMTP, remote SMTP, SMTP total, initial, repeated, POP total,
    // deliveries, remote recipients, mean retry revisit) at 80/100/120 %.
    let want = [
        [100.0, 90.0, 190.0, 50.0, 150.0, 200.0, 200.0, 180.0, 750.0],
        [125.0, 112.5, 237.5, 62.5, 187.5, 250.0, 250.0, 225.0, 600.0],
        [150.0, 135.0, 285.0, 75.0, 225.0, 300.0, 300.0, 270.0, 500.0],
    ];
    for (load, want) in LOAD_LEVELS.iter().zip(want) {
        let r = Rates::at_load(7_500.0, *load);
        let got = [
            r.user_smtp,
            r.remote_smtp,
            r.smtp_total(),
            r.initial_pop,
            r.repeated_pop,
            r.pop_total(),
            r.mailbox_deliveries(),
            r.remote_recipients(),
            r.retry_revisit_secs(),
        ];
        for (g, w) in got.iter().zip(want) {
            assert!(close(*g, w), "load {load}: {got:?} vs {want:?}");
        }
        assert!(r.retry_interval_holds(), "load {load}");
        assert!(close(r.users, 1_500_000.0));
    }
}

#[test]
fn white_paper_5000_and_per_mpm_coefficients() {
    let r = Rates::at(5_000.0);
    assert!((r.user_smtp - 83.33).abs() < 0.005);
    assert!(close(r.remote_smtp, 75.0));
    assert!((r.initial_pop - 41.67).abs() < 0.005);
    assert!(close(r.repeated_pop, 125.0));
    let one = Rates::at(1.0);
    assert!((one.user_smtp - 0.01667).abs() < 5e-6);
    assert!(close(one.remote_smtp, 0.015));
    assert!((one.initial_pop - 0.00833).abs() < 5e-6);
    assert!(close(one.repeated_pop, 0.025));
}

#[test]
fn rates_are_proportional_to_mpm() {
    let base = Rates::at(1.0);
    for mpm in (500..=5_000)
        .step_by(500)
        .map(f64::from)
        .chain([357.0, 7_500.0])
    {
        let r = Rates::at(mpm);
        assert!(close(r.user_smtp, base.user_smtp * mpm));
        assert!(close(r.remote_smtp, base.remote_smtp * mpm));
        assert!(close(r.initial_pop, base.initial_pop * mpm));
        assert!(close(r.repeated_pop, base.repeated_pop * mpm));
        assert!(close(r.mailbox_deliveries(), mpm / 30.0));
        // The retry revisit does not depend on the rate, only on the load factor.
        assert!(close(r.retry_revisit_secs(), 600.0));
    }
}
