//! The mail report's builders and renderers on a fixed run.

use std::time::Duration;

use stoa_mail2001::Rates;
use stoa_mailgen::qos;
use stoa_mailgen::sink::SinkStats;
use stoa_mailgen::tally::{Failure, Function, LevelTally, SessionRecord, Sized};

use serde_json::Value;

use super::json::to_json;
use super::*;
use crate::mail::run::{Phases, StoreCheck, Trial};

/// A completed SMTP session: every step in 10 ms, one local and one remote
/// recipient, a 25,000-byte message; `fail_hello` ends it at HELO.
fn smtp(fail_hello: bool) -> SessionRecord {
    let mut r = SessionRecord::default();
    r.step(Function::SmtpConnect, 2.0, Ok(()));
    if fail_hello {
        r.step(Function::SmtpHello, 1.0, Err(Failure::Closed));
        return r;
    }
    r.step(Function::SmtpHello, 1.0, Ok(()));
    r.step(Function::SmtpMailFrom, 1.5, Ok(()));
    r.step(Function::SmtpRcptTo, 1.0, Ok(()));
    r.step(Function::SmtpRcptTo, 1.2, Ok(()));
    r.step(Function::SmtpData, 0.8, Ok(()));
    r.transfer(Sized::DataResponse, 40.0, 25_000, true);
    r.step(Function::SmtpQuit, 0.5, Ok(()));
    r.to_local = 1;
    r.to_remote = 1;
    r.completed = true;
    r
}

/// A completed POP session whose connect took `connect_ms`.
fn pop(connect_ms: f64) -> SessionRecord {
    let mut r = SessionRecord::default();
    r.step(Function::PopConnect, connect_ms, Ok(()));
    r.step(Function::PopUserId, 1.0, Ok(()));
    r.step(Function::PopPassword, 30.0, Ok(()));
    r.step(Function::PopStatus, 2.0, Ok(()));
    r.step(Function::PopRetrieve, 3.0, Ok(()));
    r.transfer(Sized::RetrieveResponse, 12.0, 30_000, true);
    r.step(Function::PopDelete, 1.0, Ok(()));
    r.step(Function::PopQuit, 1.0, Ok(()));
    r.completed = true;
    r
}

/// One level at `load` of 30 msgs/min: 25 SMTP and 25 POP sessions, of which
/// `slow_pop` connect in 6 s (over the 5 s limit). Rows meant to pass pass with
/// 96 % (24 of 25): ">95%" is strict.
fn level(load: f64, slow_pop: usize) -> LevelResult {
    let mut t = LevelTally::default();
    for i in 0..25 {
        t.add_session(&smtp(load > 1.1 && i == 0));
    }
    for i in 0..25 {
        t.add_session(&pop(if i < slow_pop { 6_000.0 } else { 4.0 }));
    }
    // 100 probes (at least the 59 needed to judge the row), 96 in time.
    t.delivery.attempts = 100;
    t.delivery.pass = 96;
    t.delivery.late = 4;
    for _ in 0..96 {
        t.delivery.times.record_ms(5_000.0);
    }
    for _ in 0..4 {
        t.delivery.times.record_ms(70_000.0);
    }
    t.remote.sent = 19;
    t.remote.received = 19;
    t.window_secs = 60.0;
    t.started.user_smtp = (30.0 * load) as u64;
    t.started.remote_smtp = (27.0 * load) as u64;
    t.started.initial_pop = (15.0 * load) as u64;
    t.started.repeated_pop = (45.0 * load) as u64;
    t.counters.late_starts = 2;
    let verdict = qos::verdict(&t);
    LevelResult {
        load,
        rates: Rates::at_load(30.0, load),
        tally: t,
        verdict,
        wall: Duration::from_secs(90),
        harness_cpu: Some(Duration::from_millis(1_500)),
        harness_window_cpu: Some(Duration::from_secs(12)),
        server_cpu: None,
        machine_cpu: None,
        generators: Vec::new(),
        agents_cpu: None,
        tiers: Vec::new(),
        server_processes: None,
    }
}

/// A three-level run, the 120 % level failing on POP Connect.
fn sample() -> MailRun {
    MailRun {
        server_software: "Stoa 0.1.0 (built-in)".into(),
        password_scheme: Some("SHA512-CRYPT"),
        mpm: 30.0,
        users: 6_000,
        declared_store: false,
        capacity_mpm: 30.0,
        retry_pool: 450,
        domain: "bench.example".into(),
        remote_domain: "remote.example".into(),
        smtp: "127.0.0.1:2525".into(),
        access: stoa_mailgen::access::Access::Pop3,
        read_addr: "127.0.0.1:1110".into(),
        sink: "127.0.0.1:2526".into(),
        phases: Phases {
            profile: "quick",
            warmup: Duration::from_secs(10),
            run: Duration::from_secs(60),
            cooldown: Duration::from_secs(20),
        },
        levels: vec![level(0.8, 0), level(1.0, 1), level(1.2, 5)],
        search: Vec::new(),
        placement: crate::cpus::Placement {
            machine: 2,
            harness: "1".parse().ok(),
            server: "0".parse().ok(),
            server_known: true,
        },
        store: Some(StoreCheck {
            mailboxes: 1_000,
            messages: 3_412,
            octets: 85_000_000,
            empty: 31,
            mean_messages: 3.412,
            mean_size: 24_912.0,
            passed: true,
            notes: Vec::new(),
        }),
        sink_stats: SinkStats {
            sessions: 50,
            messages: 57,
            recipients: 57,
            bytes: 1_400_000,
            errors: 0,
        },
        probe_share: 0.05,
        deviations: Vec::new(),
        threads: 2,
        agents: Vec::new(),
        seed: 42,
        started: "2026-11-30T14:00:00Z".into(),
        choices: vec!["A session counts by its start time."],
        tiers: Vec::new(),
    }
}

#[test]
#[allow(clippy::print_stdout, reason = "shows the report with --nocapture")]
fn text_follows_the_published_page() {
    let run = sample();
    let t = text(&run);
    println!("{t}");
    assert!(t.contains(NOTICE));
    assert!(t.starts_with("SPECmail2001-style result: Stoa 0.1.0 (built-in)   msgs/min = 30\n"));
    assert!(t.contains("30 SPECmail2001-style messages per minute is equivalent to 6,000 users."));
    let summary = &t[t.find("Summary Results").expect("summary")..];
    let summary = &summary[..summary.find("Detailed Results").expect("details")];
    let mut at = 0;
    for name in [
        "SMTP Connect",
        "SMTP Data",
        "POP Connect",
        "POP Status",
        "POP Retrieve",
        "POP Delete",
        "Delivery Time",
        "Error Rate",
    ] {
        let found = summary[at..].find(name).expect(name);
        at += found + name.len();
    }
    assert!(summary.contains("80%") && summary.contains("120%"));
    assert!(summary.contains("80.00%*"), "failing cell marked");
    assert!(summary.contains("* fails its requirement"));
    assert!(summary.contains("Result: PASSED (100% level)"));
    assert!(summary.contains("120% level failed: POP Connect 80.00% < 95%"));
    for level in ["80%", "100%", "120%"] {
        assert!(t.contains(&format!("Detailed Results -- {level} Load")));
    }
    for (name, _) in counters(&LevelTally::default()) {
        assert!(t.contains(name), "{name}");
    }
    assert!(t.contains("96.00%"));
    assert!(t.contains("Attempted") && t.contains("4,800") && t.contains("7,200"));
    assert!(t.contains("SMTP Data (KB up)") && t.contains("POP Retrieve (KB down)"));
    assert!(t.contains("- A session counts by its start time."));
    assert!(!t.contains("Find-max"));
}

#[test]
fn title_without_an_established_rate() {
    let mut run = sample();
    run.levels.truncate(1);
    let t = text(&run);
    assert!(t.starts_with(
        "SPECmail2001-style result: Stoa 0.1.0 (built-in)   msgs/min = not established\n"
    ));
    assert!(t.contains("Result: FAILED (the 100% level did not run)"));
    assert!(!to_json(&run)["passed"].as_bool().expect("bool"));
}

#[test]
fn json_carries_every_figure() {
    let run = sample();
    let j = to_json(&run);
    assert_eq!(j["benchmark"], "SPECmail2001-style");
    assert_eq!(j["notice"], NOTICE);
    assert_eq!(j["passed"], true);
    assert!(j["find_max"]["best_mpm"].is_null());
    assert_eq!(j["levels"].as_array().expect("levels").len(), 3);
    let l = &j["levels"][1];
    assert_eq!(l["load_percent"], 100);
    assert_eq!(l["summary"].as_array().expect("summary").len(), 8);
    assert_eq!(l["detail"].as_array().expect("detail").len(), 17);
    assert_eq!(l["summary"][2]["name"], "POP Connect");
    assert!((l["summary"][2]["percent"].as_f64().expect("pct") - 96.0).abs() < 1e-9);
    assert!(l["times_ms"]["POP Password"]["p99"].as_f64().expect("p99") > 29.0);
    assert!(l["rates"]["user_smtp"].as_f64().expect("rate") > 0.0);
    assert_eq!(j["levels"][2]["verdict"]["passed"], false);
    assert_eq!(j["phases"]["run_secs"], 60.0);
    assert!(j["store_check"]["passed"].as_bool().expect("store"));

    let mut run = sample();
    run.search = vec![
        Trial {
            mpm: 30.0,
            passed: true,
            failures: Vec::new(),
            unjudged: Vec::new(),
            harness: None,
            server: None,
        },
        Trial {
            mpm: 60.0,
            passed: false,
            failures: vec!["POP Connect 50.00% < 95%".into()],
            unjudged: Vec::new(),
            harness: Some(crate::cpus::HarnessLoad::new(
                Duration::from_secs(54),
                Duration::from_secs(60),
                1,
            )),
            server: Some(crate::cpus::ServerLoad::new(
                Duration::from_secs(30),
                Duration::from_secs(60),
                1,
            )),
        },
        Trial {
            mpm: 45.0,
            passed: true,
            failures: Vec::new(),
            unjudged: Vec::new(),
            harness: None,
            server: None,
        },
    ];
    let j = to_json(&run);
    assert_eq!(j["find_max"]["best_mpm"], 45.0);
    assert_eq!(j["find_max"]["trials"].as_array().expect("trials").len(), 3);
    let t = text(&run);
    assert!(t.contains("msgs/min = 45\n") && t.contains("Find-max Trials"));
    // The fixture's store holds 6,000 accounts (30 msgs/min): 45 is at (over)
    // its capacity, which the report points out.
    assert!(t.contains("Best passing: 45 msgs/min, the store's capacity (6,000 accounts / 200)"));
    assert_eq!(j["find_max"]["at_capacity"], true);
    assert!(html(&run).contains("Find-max trials"));
    // The failed trial's harness used 90 % of its one core: harness-bound.
    assert!(
        t.contains(
            "\nHARNESS-BOUND: the harness used more than 70 % of its cores over a measurement \
             window (find-max trial 2 at 60 msgs/min: 90.0 % of its 1 core)"
        ),
        "{t}"
    );
    assert!(t.contains("90.00% (bound)*  50.00%"), "{t}");
    assert!(
        t.contains(
            "\nLimit: the harness's limit: at the first failing trial the harness at 90.0 %"
        ),
        "{t}"
    );
    assert_eq!(j["find_max"]["limit"], "harness");
    assert_eq!(j["find_max"]["trials"][1]["server"]["share"], 0.5);
    assert_eq!(j["harness_bound"], true);
    assert_eq!(j["find_max"]["trials"][1]["harness"]["cores"], 1);
}

#[test]
fn the_harness_cpu_over_the_window_is_beside_the_servers() {
    let run = sample();
    let t = text(&run);
    assert!(!t.contains("HARNESS-BOUND"), "{t}");
    assert!(t.contains("Harness CPUs      CPU 1 (pinned)\n"), "{t}");
    assert!(t.contains("Server CPUs       CPU 0 (pinned)\n"), "{t}");
    // 12 s over the 60 s window on the one pinned core.
    assert!(
        t.contains("- Harness CPU over the measurement window: 12.0 s, ")
            && t.contains("; 20.0 % of its 1 core: not harness-bound (at most 70 %)\n"),
        "{t}"
    );
    let j = to_json(&run);
    assert_eq!(j["harness_bound"], false);
    assert_eq!(j["placement"]["server_cpus"], "0");
    assert_eq!(j["levels"][1]["harness_window"]["cores"], 1);
    assert!(
        (j["levels"][1]["harness_window"]["share_of_its_cores"]
            .as_f64()
            .expect("share")
            - 0.2)
            .abs()
            < 1e-9
    );
}

#[test]
fn html_is_self_contained() {
    let h = html(&sample());
    assert!(h.starts_with("<!DOCTYPE html>"));
    assert!(h.contains("<svg") && h.contains(NOTICE));
    assert!(h.contains("<table") && h.contains("<td class=\"fail\">80.00%*</td>"));
    assert!(h.contains("Delivery time (probes)") && h.contains("60 s limit"));
    assert!(h.contains("Response times at 100% load"));
    assert!(!h.contains("<script") && !h.contains("src=") && !h.contains("href="));
    assert!(!h.contains("<pre"));
}

#[test]
fn every_table_lines_up_under_its_headings() {
    let mut run = sample();
    run.search = vec![Trial {
        mpm: 30.0,
        passed: false,
        failures: vec!["POP Connect 50.00% < 95%".into()],
        unjudged: Vec::new(),
        harness: None,
        server: None,
    }];
    let doc = document(&run, false);
    let t = text(&run);
    assert_eq!(
        crate::report::text::misaligned(&doc, &t),
        Vec::<String>::new(),
        "\n{t}"
    );
}

#[test]
fn counts_take_their_plural_forms() {
    let mut run = sample();
    run.levels[0].tally.delivery.connect_errors = 1;
    run.levels[0].tally.remote.sent = 1;
    let t = text(&run);
    assert!(t.contains(", 1 poll connect error; "), "{t}");
    assert!(
        t.contains("Remote delivery: 1 remote recipient accepted"),
        "{t}"
    );
    assert!(t.contains(", 0 poll connect errors; ") && t.contains("19 remote recipients"));
}

#[test]
fn the_page_has_a_qos_table_per_level_and_marked_charts() {
    let h = html(&sample());
    for level in ["80%", "100%", "120%"] {
        let at = h
            .find(&format!("<h2>Detailed Results -- {level} Load</h2>"))
            .expect(level);
        let next = &h[at..];
        assert!(
            next.contains("<th>Function</th><th>Attempts</th><th># Pass QoS</th>"),
            "{level}"
        );
    }
    let charts: Vec<&str> = h.split("<svg").skip(1).collect();
    let cdf = charts
        .iter()
        .find(|c| c.contains("Delivery time (probes)"))
        .expect("cdf");
    assert!(
        cdf.contains("class=\"limit\"")
            && cdf.contains(">60 s limit<")
            && cdf.contains(">95 % required<")
    );
    let times = charts
        .iter()
        .find(|c| c.contains("Response times at 100% load"))
        .expect("times");
    assert!(times.contains("class=\"log-axis\"") && times.contains(">5 s QoS limit<"));
    assert!(
        charts.iter().all(|c| c.contains("width=\"100%\"")),
        "the charts scale"
    );
}

#[test]
fn write_all_writes_three_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("nested");
    let paths = write_all(&sample(), &out).expect("write");
    for (path, name) in paths
        .iter()
        .zip(["result.txt", "result.json", "result.html"])
    {
        assert_eq!(path.file_name().and_then(|n| n.to_str()), Some(name));
        assert!(std::fs::metadata(path).expect("file").len() > 0);
    }
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(&paths[1]).expect("read")).expect("json");
    assert_eq!(json["notice"], NOTICE);
}

#[test]
fn numbers_have_separators() {
    assert_eq!(int(684_919), "684,919");
    assert_eq!(int(1_500_000), "1,500,000");
    assert_eq!(int(7), "7");
    assert_eq!(num(11_414.314, 2), "11,414.31");
    assert_eq!(num(-1234.5, 1), "-1,234.5");
    assert_eq!(num(f64::NAN, 2), "n/a");
    assert_eq!(pct(96.0), "96.00%");
    assert_eq!(mpm(7_500.0), "7,500");
    assert_eq!(mpm(23.456), "23.46");
    assert_eq!(mpm(24.0), "24");
}

/// Issue 18, item 4: a level with fewer than 59 probes is "too few probes to
/// judge" in text, JSON and HTML, and the run is not reported as a pass.
#[test]
fn too_few_probes_are_not_a_pass() {
    let mut run = sample();
    for level in &mut run.levels {
        level.tally.delivery.attempts = 3;
        level.tally.delivery.pass = 3;
        level.verdict = qos::verdict(&level.tally);
    }
    run.probe_share = 0.01;
    let t = text(&run);
    assert!(t.contains("100.00% (3 probes)†"), "{t}");
    assert!(t.contains("† too few probes to judge"));
    assert!(t.contains(
        "Result: NOT JUDGED (100% level): no row failed, but Delivery Time: too few probes to judge (3 of the 59 needed)"
    ));
    assert!(t.contains("msgs/min = not established"));
    assert!(!t.contains("Result: PASSED"));
    assert!(t.contains("Level result: NOT JUDGED, no row failed"));
    let j = to_json(&run);
    assert_eq!(j["passed"], false);
    assert_eq!(j["outcome"], "not_judged");
    let l = &j["levels"][1];
    assert_eq!(l["verdict"]["outcome"], "not_judged");
    let delivery = &l["detail"][13];
    assert_eq!(delivery["name"], "Delivery Time");
    assert_eq!(
        (&delivery["judged"], &delivery["passed"]),
        (&Value::Bool(false), &Value::Bool(false))
    );
    assert_eq!(j["levels"][2]["verdict"]["outcome"], "failed");
    let h = html(&run);
    assert!(h.contains("100.00% (3 probes)†") && h.contains("too few probes to judge"));
    assert!(!h.contains("<h1 class=\"pass\">") && !h.contains("<h1 class=\"fail\">"));
    assert!(text(&sample()).contains("96.00% (100 probes)"));
}

/// `sample()` as a quick run: its phases and probe share off the kit's.
fn non_compliant() -> MailRun {
    use crate::compliance::Deviation;
    let dev = |setting, run: &str, kit: &str| Deviation {
        setting,
        run: run.into(),
        kit: kit.into(),
    };
    MailRun {
        deviations: vec![
            dev(
                "run_time",
                "measured 60 s per level",
                "the kit measures 3,600 s",
            ),
            dev(
                "probe_share",
                "delivery probes on 5.00 % of SMTP sessions",
                "the kit probes 1 % of the mail (mail2001.md §2.2)",
            ),
        ],
        ..sample()
    }
}

#[test]
fn a_run_off_the_kits_rules_is_labelled_non_compliant() {
    let run = non_compliant();
    let t = text(&run);
    assert!(
        t.starts_with(
            "SPECmail2001-style result: Stoa 0.1.0 (built-in)   msgs/min = 30 (non-compliant)\n"
        ),
        "{t}"
    );
    let equivalence = "30 SPECmail2001-style messages per minute is equivalent to 6,000 users.\n\n";
    let boxed = &t[t.find(equivalence).expect("equivalence") + equivalence.len()..];
    assert!(
        boxed.starts_with("+---"),
        "the box follows the headline:\n{t}"
    );
    assert!(t.contains("\n| NON-COMPLIANT RUN: this run breaks the kit's run rules"));
    assert!(t.contains("\n| - measured 60 s per level; the kit measures 3,600 s"));
    assert!(t.contains("\n| - delivery probes on 5.00 % of SMTP sessions; the kit probes 1 %"));
    assert!(t.contains("\n| The kit's run: stoa bench mail --profile standard"));

    let j = to_json(&run);
    assert_eq!(j["compliant"], false);
    assert_eq!(j["deviations"][1]["setting"], "probe_share");
    assert_eq!(j["deviations"][0]["kit"], "the kit measures 3,600 s");
    assert!(
        j["title"]
            .as_str()
            .expect("title")
            .ends_with("(non-compliant)")
    );

    let h = html(&run);
    assert!(h.contains("<div class=\"deviations\""), "{h}");
    assert!(h.contains("<li>measured 60 s per level; the kit measures 3,600 s</li>"));
    assert!(h.contains("msgs/min = 30 (non-compliant)</h1>"));
}

/// Issue 52, item 5: an IMAP run names its reading side IMAP in every
/// table, its address and every format, and keeps no POP row.
#[test]
fn an_imap_run_names_imap_rows() {
    use stoa_mailgen::access::Access;
    let mut run = sample();
    run.access = Access::Imap;
    run.read_addr = "127.0.0.1:1143".into();
    for l in &mut run.levels {
        l.tally.access = Access::Imap;
        l.verdict = qos::verdict(&l.tally);
    }
    let t = text(&run);
    let summary = &t[t.find("Summary Results").expect("summary")..];
    let summary = &summary[..summary.find("Detailed Results").expect("details")];
    let mut at = 0;
    for name in ["IMAP Connect", "IMAP Select", "IMAP Fetch", "IMAP Store"] {
        let found = summary[at..].find(name).expect(name);
        at += found + name.len();
    }
    assert!(
        summary.contains("120% level failed: IMAP Connect 80.00% < 95%"),
        "{summary}"
    );
    for name in [
        "IMAP Login",
        "IMAP Expunge",
        "IMAP Logout",
        "IMAP Fetch Response Time",
        "IMAP Connect Error",
        "IMAP Session",
        "IMAP Fetch (KB down)",
        "127.0.0.1:1143",
    ] {
        assert!(t.contains(name), "no {name}:\n{t}");
    }
    for pop in [
        "POP Connect",
        "POP Status",
        "POP Retrieve",
        "POP User ID",
        "POP Session",
    ] {
        assert!(!t.contains(pop), "{pop} in an IMAP run:\n{t}");
    }
    let j = to_json(&run);
    assert_eq!(j["access"], "imap");
    assert_eq!(j["addresses"]["imap"], "127.0.0.1:1143");
    assert_eq!(j["addresses"]["pop3"], Value::Null);
    assert!(j["levels"][0]["times_ms"]["IMAP Fetch"].is_object());
    let names: Vec<&str> = j["levels"][0]["detail"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| r["name"].as_str().expect("name"))
        .collect();
    assert!(names.contains(&"IMAP Select") && !names.contains(&"POP Status"));
    assert!(html(&run).contains("IMAP Select"));
    let pop: Vec<&str> = t.lines().filter(|l| l.contains("POP")).collect();
    assert!(pop.is_empty(), "POP in an IMAP run's report: {pop:?}");
}

#[test]
fn the_kits_run_has_no_box() {
    let run = sample();
    let t = text(&run);
    assert!(!t.contains("(non-compliant)") && !t.contains("NON-COMPLIANT") && !t.contains("+---"));
    let j = to_json(&run);
    assert_eq!(j["compliant"], true);
    assert_eq!(j["deviations"], serde_json::json!([]));
    assert!(!html(&run).contains("deviations"));
    // The notes say which run is taken to be the kit's.
    assert!(t.contains("- The kit's run is taken to be the white paper's phases (300 s"));
}

/// A run on two agents: the configuration names them and their shares, each
/// level lists who offered what, and the JSON carries both.
#[test]
fn an_agents_run_names_its_generators() {
    use crate::agent::mail::{AgentInfo, Generator};
    use stoa_mailgen::tally::Started;
    let started = |user_smtp, initial_pop| Started {
        user_smtp,
        remote_smtp: 1,
        initial_pop,
        repeated_pop: 2,
    };
    let mut run = sample();
    run.agents = ["10.0.0.1:7000", "10.0.0.2:7000"]
        .iter()
        .map(|a| AgentInfo {
            addr: (*a).into(),
            threads: 4,
            random_mailboxes: 2_775,
            retry_mailboxes: 225,
        })
        .collect();
    for l in &mut run.levels {
        l.generators = vec![
            Generator {
                name: "prime".into(),
                started: started(1, 0),
            },
            Generator {
                name: "10.0.0.1:7000".into(),
                started: started(12, 8),
            },
            Generator {
                name: "10.0.0.2:7000".into(),
                started: started(11, 7),
            },
        ];
        l.agents_cpu = Some(Duration::from_millis(2_500));
    }
    let t = text(&run);
    assert!(
        t.contains("2 agents generated the load: 10.0.0.1:7000 (4 load threads, 2,775 random-pool and 225 retry-pool mailboxes), 10.0.0.2:7000"),
        "{t}"
    );
    assert!(
        t.contains("this host (probes)") && t.contains("agent 10.0.0.2:7000"),
        "{t}"
    );
    assert!(t.contains("Agents' CPU, all together: 2.5 s"), "{t}");
    let j = to_json(&run);
    assert_eq!(j["agents"][1]["addr"], "10.0.0.2:7000");
    assert_eq!(j["levels"][0]["generators"][1]["started"]["user_smtp"], 12);
    assert_eq!(j["levels"][0]["agents_cpu_secs"], 2.5);
    // A run without agents says this process generated the load.
    let t = text(&sample());
    assert!(!t.contains("agents generated") && !t.contains("this host (probes)"));
}

/// `sample()` as a system of tiers: a proxy in front (POP), a store counted by
/// its log, and an LDAP server with nothing to count.
fn tiered() -> MailRun {
    use crate::mail::Front;
    use crate::mail::tiers::{CountInfo, TierInfo, TierLevel};
    let mut run = sample();
    run.tiers = vec![
        TierInfo {
            role: "MMP (POP proxy)".into(),
            pids: vec![10, 11, 12],
            processes: vec!["nginx".into(), "nginx".into(), "python3".into()],
            peak_kib: Some(20_480),
            front: Some(Front::Pop3),
            note: Some("127.0.0.14".into()),
            counts: Vec::new(),
        },
        TierInfo {
            role: "POP store 1".into(),
            pids: vec![20],
            processes: vec!["stoa".into()],
            peak_kib: Some(51_200),
            front: None,
            note: None,
            counts: vec![CountInfo {
                label: "POP logins".into(),
                text: "logged in (".into(),
                file: "store1.log".into(),
            }],
        },
        TierInfo {
            role: "LDAP".into(),
            pids: vec![30],
            processes: vec!["slapd".into()],
            peak_kib: None,
            front: None,
            note: None,
            counts: Vec::new(),
        },
    ];
    for level in &mut run.levels {
        level.tiers = vec![
            TierLevel {
                cpu: Some(Duration::from_millis(1_500)),
                sessions: Some(50),
                messages: None,
                counts: Vec::new(),
            },
            TierLevel {
                cpu: Some(Duration::from_secs(3)),
                sessions: None,
                messages: None,
                counts: vec![Some(60)],
            },
            TierLevel::default(),
        ];
    }
    run
}

#[test]
#[allow(clippy::print_stdout, reason = "shows the report with --nocapture")]
fn tiers_are_listed_in_the_system_configuration() {
    let run = tiered();
    let t = text(&run);
    println!("{t}");
    let system = &t[t.find("System Configuration").expect("section")..];
    let system = &system[..system.find("Summary Results").expect("before the summary")];
    assert!(system.contains("nginx (10, 11), python3 (12)"), "{system}");
    assert!(
        system.contains("20.0") && system.contains("50.0"),
        "{system}"
    );
    // 1.5 s over 50 POP sessions; 3 s over 60 logins from the store's log.
    let row = |first: &str, per: &str, handled: &str| {
        system
            .lines()
            .any(|l| l.starts_with(first) && l.contains(per) && l.ends_with(handled))
    };
    assert!(
        row("MMP (POP proxy)", " 30.00 ", "50 POP sessions (harness)"),
        "{system}"
    );
    assert!(
        row("POP store 1", " 50.00 ", "60 POP logins (log)"),
        "{system}"
    );
    // 1.5 s of CPU over the 60 s window.
    assert!(system.contains("2.50%"), "{system}");
    assert!(
        system.contains("lines of store1.log containing \"logged in (\""),
        "{system}"
    );
    assert!(!text(&sample()).contains("System Configuration"));
    let h = html(&run);
    assert!(h.contains("System Configuration") && h.contains("60 POP logins (log"));

    let j = to_json(&run);
    assert_eq!(j["tiers"][0]["role"], "MMP (POP proxy)");
    assert_eq!(j["tiers"][0]["front"], "pop3");
    assert_eq!(j["tiers"][0]["peak_kib"], 20_480);
    assert_eq!(j["levels"][1]["tiers"][0]["sessions"], 50);
    assert_eq!(j["levels"][1]["tiers"][0]["cpu_secs"], 1.5);
    assert_eq!(j["levels"][1]["tiers"][1]["counts"]["POP logins"], 60);
    assert_eq!(j["levels"][1]["tiers"][2]["cpu_secs"], Value::Null);
}

/// The server's processes by program (issue 17, item 4): in the harness
/// section of the text and in the JSON, with the exact total and what the
/// samples could not name.
#[test]
fn server_processes_are_listed_by_program() {
    use crate::proctree::{Program, TreeCpu};
    let mut run = sample();
    let program = |name: &str, processes, ms| Program {
        name: name.into(),
        processes,
        cpu: Duration::from_millis(ms),
    };
    run.levels[1].server_processes = Some(TreeCpu {
        total: Duration::from_millis(9_000),
        programs: vec![program("smtpd", 12, 4_000), program("pop3", 300, 3_500)],
        not_attributed: Duration::from_millis(1_500),
    });
    let t = text(&run);
    for needle in [
        "Server process",
        "ms per session",
        "smtpd",
        "not attributed (ended between samples)",
        "all server processes",
    ] {
        assert!(t.contains(needle), "no {needle:?} in:\n{t}");
    }
    let json = to_json(&run);
    let p = &json["levels"][1]["server_processes"];
    assert_eq!(p["total_cpu_secs"], 9.0, "{p}");
    assert_eq!(p["not_attributed_cpu_secs"], 1.5, "{p}");
    assert_eq!(p["programs"][1]["program"], "pop3", "{p}");
    assert_eq!(p["programs"][1]["processes"], 300, "{p}");
    assert_eq!(json["levels"][0]["server_processes"], Value::Null);
}
