//! The web run's deviations from the kit's run, one setting at a time.

use std::time::Duration;

use super::*;
use crate::web::{ProfileName, profile_of};

/// The standard profile with no other flag: the kit's run.
fn standard() -> Options {
    Options {
        profile: ProfileName::Standard,
        ..Options::defaults()
    }
}

/// The deviations of `args` as the harness would run them: (setting, text).
fn of(args: &Options) -> Vec<(&'static str, String)> {
    deviations(args, &profile_of(args))
        .into_iter()
        .map(|d| (d.setting, d.to_string()))
        .collect()
}

/// The settings that deviate.
fn settings(args: &Options) -> Vec<&'static str> {
    of(args).into_iter().map(|(s, _)| s).collect()
}

#[test]
fn the_standard_profile_is_the_kits_run() {
    assert_eq!(of(&standard()), []);
    // More iterations than three keep the median rule (web99.md §5.5).
    let five = Options {
        iterations: Some(5),
        ..standard()
    };
    assert_eq!(of(&five), []);
    // --run-time equal to the kit's changes nothing.
    let same = Options {
        run_time: Some(Duration::from_secs(1200)),
        ..standard()
    };
    assert_eq!(of(&same), []);
}

#[test]
fn the_quick_default_lists_every_shortcut() {
    let quick = of(&Options::defaults());
    let texts: Vec<&str> = quick.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts,
        [
            "measured 60 s; the kit measures 1,200 s",
            "warm-up 5 s; the kit warms up at least 1,200 s",
            "ramp-down 3 s; the kit's is 300 s",
            "1 iteration; the kit runs 3 at one load and reports the median",
            "100-entry decks; the kit's run draws full decks of 1,000 (web99.md §3.4)",
            "a connection without a class-3 operation still counts as valid; the kit requires an \
             operation of every class (web99.md §5.3)",
            "class mix not checked; the kit fails a class more than 10.5 % off its share (web99.md \
             §7.3)",
        ]
    );
    // Ramp-up is listed once a second iteration uses it.
    let two = Options {
        iterations: Some(2),
        ..Options::defaults()
    };
    assert!(of(&two).contains(&(
        "rampup",
        "ramp-up 3 s between iterations; the kit's is 300 s".into()
    )));
    assert!(of(&two).contains(&(
        "iterations",
        "2 iterations; the kit runs 3 at one load and reports the median".into()
    )));
}

#[test]
fn each_changed_setting_is_a_deviation() {
    let cases: [(Options, &[&str]); 7] = [
        (
            Options {
                run_time: Some(Duration::from_secs(60)),
                ..standard()
            },
            &["run_time"],
        ),
        (
            Options {
                iterations: Some(1),
                ..standard()
            },
            &["iterations"],
        ),
        (
            Options {
                static_only: true,
                ..standard()
            },
            &["static_only"],
        ),
        (
            Options {
                closed_loop: true,
                ..standard()
            },
            &["closed_loop"],
        ),
        // The trials replace the three iterations.
        (
            Options {
                find_max: true,
                ..standard()
            },
            &["find_max"],
        ),
        (
            Options {
                tls: true,
                ..standard()
            },
            &["tls_cipher"],
        ),
        (
            Options {
                target: Some("https://127.0.0.1:8443".into()),
                ..standard()
            },
            &["tls_cipher"],
        ),
    ];
    for (args, want) in cases {
        assert_eq!(settings(&args), want, "{args:?}");
    }
    let measured = Options {
        run_time: Some(Duration::from_secs(60)),
        ..standard()
    };
    assert_eq!(
        of(&measured)[0].1,
        "measured 60 s; the kit measures 1,200 s"
    );
}

#[test]
fn the_profiles_own_phases_are_compared() {
    let mut short = KIT;
    short.warmup = Duration::from_secs(600);
    short.rampup = Duration::from_secs(30);
    short.rampdown = Duration::from_secs(30);
    let found: Vec<&str> = deviations(&standard(), &short)
        .iter()
        .map(|d| d.setting)
        .collect();
    assert_eq!(found, ["warmup", "rampup", "rampdown"]);
    // A longer warm-up is allowed (web99.md §8.1: at least 1,200 s).
    let mut long = KIT;
    long.warmup = Duration::from_secs(3000);
    assert_eq!(deviations(&standard(), &long), []);
}
