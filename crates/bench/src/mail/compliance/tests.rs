//! The mail run's deviations from the kit's run, one setting at a time.

use std::time::Duration;

use super::*;
use crate::mail::{ProfileName, settings};

/// The standard profile with no other flag: the kit's run.
fn standard() -> Options {
    Options {
        profile: ProfileName::Standard,
        ..Options::defaults()
    }
}

/// The deviations of `args` with the probe share the run would use: (setting,
/// text).
fn of(args: &Options) -> Vec<(&'static str, String)> {
    let s = settings(args).expect("settings");
    deviations(args, &s, s.rate, crate::mail::probe_share(args, &s))
        .into_iter()
        .map(|d| (d.setting, d.to_string()))
        .collect()
}

/// The settings that deviate.
fn keys(args: &Options) -> Vec<&'static str> {
    of(args).into_iter().map(|(k, _)| k).collect()
}

#[test]
fn the_standard_profile_is_the_kits_run() {
    assert_eq!(of(&standard()), []);
    // --users alone sets the rate (users / 200): still the kit's store.
    let users = Options {
        users: Some(1_000),
        ..standard()
    };
    assert_eq!(of(&users), []);
    // Overrides equal to the kit's values change nothing.
    let same = Options {
        warmup: Some(Duration::from_secs(300)),
        run_time: Some(Duration::from_secs(3600)),
        cooldown: Some(Duration::from_secs(900)),
        drain_limit: Some(Duration::from_secs(1200)),
        ..standard()
    };
    assert_eq!(of(&same), []);
}

#[test]
fn the_quick_default_lists_its_phases() {
    let texts: Vec<String> = of(&Options::defaults())
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(
        texts,
        [
            "warm-up 10 s per level; the kit's is 300 s (mail2001.md §3.2)",
            "measured 180 s per level; the kit measures 3,600 s",
            "cool-down 20 s per level; the kit's is 900 s",
            "judged sessions may finish 120 s after the cool-down; the standard run waits up to \
             1,200 s",
            "delivery probes on 88.00 % of SMTP sessions (the quick profile's share, for 80 \
             expected probes in its lowest level: its Delivery Time row is judged on 59 or more); \
             the kit probes 1 % of the mail (mail2001.md §2.2)",
        ]
    );
}

#[test]
fn each_changed_setting_is_a_deviation() {
    let secs = Duration::from_secs;
    let cases: [(Options, &[&str]); 8] = [
        (
            Options {
                warmup: Some(secs(30)),
                ..standard()
            },
            &["warmup"],
        ),
        (
            Options {
                run_time: Some(secs(600)),
                ..standard()
            },
            &["run_time"],
        ),
        (
            Options {
                cooldown: Some(secs(60)),
                ..standard()
            },
            &["cooldown"],
        ),
        (
            Options {
                drain_limit: Some(secs(60)),
                ..standard()
            },
            &["drain_limit"],
        ),
        (
            Options {
                levels: vec![100],
                ..standard()
            },
            &["levels"],
        ),
        // The trials replace the levels; the store is the search's ceiling.
        (
            Options {
                find_max: true,
                users: Some(80_000),
                ..standard()
            },
            &["find_max"],
        ),
        (
            Options {
                users: Some(1_000),
                rate: Some(2.0),
                ..standard()
            },
            &["users"],
        ),
        (
            Options {
                reply_timeout: secs(30),
                ..standard()
            },
            &["reply_timeout"],
        ),
    ];
    for (args, want) in cases {
        assert_eq!(keys(&args), want, "{args:?}");
    }
    let levels = Options {
        levels: vec![100],
        ..standard()
    };
    assert_eq!(
        of(&levels)[0].1,
        "levels 100 %; the kit runs 80 %, 100 % and 120 % of the rate (mail2001.md §3.1)"
    );
    let store = Options {
        users: Some(1_000),
        rate: Some(2.0),
        ..standard()
    };
    assert_eq!(
        of(&store)[0].1,
        "a store of 1,000 accounts for 2 msgs/min; the kit's holds 200 × rate = 400 (mail2001.md \
         §1.2)"
    );
    // The share the run used (--probe-share) against the white paper's 1 %.
    let args = standard();
    let s = settings(&args).expect("settings");
    let probes: Vec<String> = deviations(&args, &s, s.rate, 0.158)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        probes,
        [
            "delivery probes on 15.80 % of SMTP sessions; the kit probes 1 % of the mail \
          (mail2001.md §2.2)"
        ]
    );
}

/// A declared store (--store-users): non-compliant below 200 × rate, with a
/// retry pool sized for the rate; compliant at exactly 200 × rate.
#[test]
fn a_declared_smaller_store_is_listed_with_its_retry_pool() {
    let declared = |n: u32, rate: f64| Options {
        store_users: Some(n),
        rate: Some(rate),
        ..standard()
    };
    assert_eq!(of(&declared(1_000, 5.0)), []);
    assert_eq!(keys(&declared(1_000, 2.0)), ["users"]);
    let small = declared(1_000, 20.0);
    let s = settings(&small).expect("settings");
    assert_eq!((s.users, s.retry_pool), (1_000, 300));
    let texts: Vec<String> = of(&small).into_iter().map(|(_, t)| t).collect();
    assert_eq!(
        texts,
        [
            "a declared store of 1,000 accounts (--store-users) for 20 msgs/min; the kit requires \
             200 × rate = 200 × 20 = 4,000 accounts (mail2001.md §1.2)",
            "a retry pool of 300 accounts, 30.0 % of the store (the kit's 7.5 % of 200 × rate \
             accounts, so re-checks keep their interval); the kit's is 7.5 % of the store, 75 \
             accounts (mail2001.md §1.5)",
        ]
    );
    // The pool never takes more than 90 % of the store, and a rate whose
    // re-checks even that cannot hold is refused.
    let s = settings(&declared(1_000, 100.0)).expect("settings");
    assert_eq!(s.retry_pool, 900);
    assert_eq!(s.rate_cap, 120.0);
    let e = settings(&declared(1_000, 121.0)).expect_err("too fast for the store");
    assert!(e.to_string().contains("at most 120.0 msgs/min"), "{e}");
    // --find-max: the largest pool from the start, the search capped by it,
    // judged against the rate it found.
    let search = Options {
        store_users: Some(30_000),
        find_max: true,
        ..standard()
    };
    let s = settings(&search).expect("settings");
    assert_eq!((s.retry_pool, s.rate_cap), (27_000, 3_600.0));
    let found: Vec<(&str, String)> = deviations(&search, &s, 2_000.0, PROBE_SHARE)
        .into_iter()
        .map(|d| (d.setting, d.to_string()))
        .collect();
    assert_eq!(
        found.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
        ["find_max", "store_users", "retry_pool"]
    );
    assert!(
        found[1].1.starts_with(
            "a declared store of 30,000 accounts (--store-users) for every trial, reporting \
             2,000 msgs/min; the kit requires 200 × rate = 200 × 2,000 = 400,000 accounts"
        ),
        "{}",
        found[1].1
    );
    assert!(
        found[2].1.contains("stops at 3,600 msgs/min"),
        "{}",
        found[2].1
    );
}

#[test]
fn the_note_says_how_long_the_kits_run_takes() {
    let note = kit_run();
    assert!(
        note.starts_with(
            "The kit's run: stoa bench mail --profile standard (300 s warm-up, 3,600 s measured \
             and 900 s cool-down at each of 80 %, 100 % and 120 %: about 4 h 00 min"
        ),
        "{note}"
    );
    assert_eq!(percents(&[100]), "100 %");
    assert_eq!(percents(&[80, 100]), "80 % and 100 %");
}

/// Issue 52, item 5: reading the mail over IMAP is a deviation, whatever
/// else the run does, with the reason the kit gives none.
#[test]
fn imap_access_is_non_compliant() {
    let imap = Options {
        access: AccessName::Imap,
        ..standard()
    };
    let found = of(&imap);
    assert_eq!(keys(&imap), ["access"]);
    assert!(
        found[0]
            .1
            .ends_with("the kit reads mail over POP3 (mail2001.md §1.5)"),
        "{found:?}"
    );
    assert!(
        found[0].1.starts_with("mailboxes read over IMAP"),
        "{found:?}"
    );
    assert!(kit_run().contains("--access imap"));
}
