//! The web report's document, text layout and JSON on fixed runs.

use std::time::Duration;

use stoa_loadgen::{Tally, TlsParameters, TlsPlan};
use stoa_web99::metrics::{ClassStats, GeneratorStats, Iteration, Validity};

use super::text::Layout;
use crate::cpus::{HarnessLoad, Placement, ServerLoad};
use crate::web::{Http, IterationResult, Options, Profile, ProfileName, QUICK, Run, Trial};

fn gens(n: u32, seed: f64) -> Vec<GeneratorStats> {
    (0..n)
        .map(|i| {
            let mut g = GeneratorStats::default();
            for (c, cls) in g.classes.iter_mut().enumerate() {
                *cls = ClassStats {
                    time: 100.0 * (c as f64 + 1.0) + f64::from(i) + seed,
                    time2: 20000.0 * (c as f64 + 1.0),
                    good: 30 + c as u64 * 3 + u64::from(i % 3),
                    bad: u64::from(seed > 0.0 && i % 5 == 0),
                    post: 2,
                    rate: 50_000.0 - f64::from(i) * 100.0,
                    rate2: 2.5e9,
                    slow_rate: 0,
                    aggregate_bytes: 1_000_000 + u64::from(i) * 1000,
                };
            }
            g
        })
        .collect()
}

fn iteration(n: u32, seed: f64, validity: Validity, errors: bool) -> IterationResult {
    let generators = gens(n, seed);
    let iteration = Iteration::score_by(&generators, n, 60.0, validity);
    let mut tally = Tally {
        generators,
        timeline: (0..70).map(|s| 300 + s * 3).collect(),
        cpu: Duration::from_millis(4500),
        handshakes: [120, 80],
        posts: [10, 5, 3, 1],
        ..Tally::default()
    };
    for ms in 1..500 {
        tally.latency.record_ms(f64::from(ms) * 3.0 + seed);
    }
    if errors {
        tally.errors.insert("bad length".into(), 3);
        tally.errors.insert("timeout".into(), 1);
    }
    IterationResult {
        iteration,
        tally,
        audit: if errors {
            vec!["class 1: 2 of 5 missing".into()]
        } else {
            vec![]
        },
        wall: Duration::from_secs(71),
        server_cpu: (seed > 0.0).then(|| Duration::from_millis(9000)),
    }
}

fn options(static_only: bool, agents: bool) -> Options {
    Options {
        target: None,
        tls: false,
        tls_resume: 0.5,
        tls_ca: None,
        tls_insecure: false,
        connections: 10,
        profile: ProfileName::Quick,
        run_time: None,
        iterations: None,
        http: if static_only {
            Http::Http10
        } else {
            Http::Http11
        },
        static_only,
        closed_loop: false,
        print_urls: false,
        find_max: false,
        find_max_limit: 100,
        threads: 2,
        agents: if agents {
            vec!["a:1".into(), "b:2".into()]
        } else {
            vec![]
        },
        server_pid: vec![],
        harness_cpus: None,
        server_cpus: None,
        out: None,
        dynamic_path: "/web99".into(),
        cgi_path: "/cgi-bin/web99".into(),
        server_exe: None,
        archive: crate::archive::Keep::default(),
    }
}

/// The harness pinned to CPU 1 of 2, the server to CPU 0.
fn placement() -> Placement {
    Placement {
        machine: 2,
        harness: "1".parse().ok(),
        server: "0".parse().ok(),
        server_known: true,
    }
}

fn runs() -> Vec<Run> {
    let quick = QUICK;
    // The standard profile's name and rule, over the quick profile's short phases.
    let standard = Profile {
        name: "standard",
        validity: Validity::EveryClass,
        iterations: 3,
        ..quick
    };
    vec![
        Run {
            args: options(false, false),
            profile: quick,
            target: "built-in".into(),
            server_software: "Stoa".into(),
            tls: None,
            directories: 26,
            iterations: vec![iteration(10, 0.0, Validity::Class3Optional, false)],
            search: vec![],
            placement: placement(),
        },
        Run {
            args: options(true, true),
            profile: standard,
            target: "http://x/".into(),
            server_software: "nginx <b>".into(),
            tls: Some((
                TlsPlan {
                    server_name: "localhost".into(),
                    resume_ratio: 0.5,
                    ca_pem: None,
                    insecure: false,
                    http2: false,
                },
                TlsParameters {
                    protocol: "TLSv1_3".into(),
                    suite: "TLS13_AES".into(),
                    key: "ECDSA P-256".into(),
                },
            )),
            directories: 27,
            iterations: vec![
                iteration(12, 1.0, Validity::EveryClass, true),
                iteration(12, 2.0, Validity::EveryClass, false),
                iteration(12, 3.0, Validity::EveryClass, true),
            ],
            search: vec![
                Trial {
                    connections: 10,
                    conforming: 10,
                    percent_conform: 100.0,
                    passed: true,
                    harness: HarnessLoad::new(Duration::from_secs(30), Duration::from_secs(100), 1),
                    server: Some(ServerLoad::new(
                        Duration::from_secs(50),
                        Duration::from_secs(100),
                        1,
                    )),
                },
                Trial {
                    connections: 20,
                    conforming: 3,
                    percent_conform: 15.0,
                    passed: false,
                    harness: HarnessLoad::new(Duration::from_secs(90), Duration::from_secs(100), 1),
                    server: Some(ServerLoad::new(
                        Duration::from_secs(60),
                        Duration::from_secs(100),
                        1,
                    )),
                },
            ],
            placement: placement(),
        },
        Run {
            args: options(false, false),
            profile: quick,
            target: "built-in".into(),
            server_software: "Stoa".into(),
            tls: None,
            directories: 26,
            iterations: vec![],
            search: vec![],
            placement: placement(),
        },
    ]
}

/// The text of `run`, as printed.
fn text_of(run: &Run) -> String {
    super::text::render(&super::document(run, false), Layout::Plain)
}

/// The HTML page of `run`.
fn page_of(run: &Run) -> String {
    super::html::render(&super::document(run, true))
}

#[test]
#[allow(clippy::print_stdout, reason = "shows the report with --nocapture")]
fn text_keeps_the_published_layout() {
    let runs = runs();
    let t = text_of(&runs[0]);
    println!("{t}");
    assert!(t.starts_with(&format!(
        "SPECweb99-style result\n\n{}\n\nTarget:           built-in\nServer software:  Stoa\n\n",
        super::NOTICE
    )));
    assert!(t.contains("\nPerformance\n\nIteration  Conforming Simultaneous Connections\n1  "));
    assert!(t.contains(
        "\nHTTP version           1.1\nRequest mix            SPECweb99 (70 % static, 30 % dynamic)\n"
    ));
    assert!(t.contains("\nNotes\n\n- Quick profile:"));
    assert!(t.contains("\n=>1   "), "the median is marked:\n{t}");
    assert!(t.ends_with(
        "\nErrors\n\nnone: every generator was checked on every response (web99.md §7)\n\n"
    ));
    let sections = [
        "Performance",
        "Configuration",
        "Benchmark Configuration",
        "Notes",
        "Test Run Details",
    ];
    let at: Vec<usize> = sections
        .iter()
        .map(|s| {
            t.find(&format!("\n{s}\n\n"))
                .unwrap_or_else(|| panic!("no {s}:\n{t}"))
        })
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "sections in the published order: {at:?}"
    );

    let t = text_of(&runs[1]);
    println!("{t}");
    assert!(t.starts_with("SPECweb99_SSL-style result (static-only mix)\n\n"));
    assert!(t.contains("\nSSL Configuration\n\nProtocol                 TLSv1_3\n"));
    assert!(t.contains("Handshakes (all phases)  360 full, 240 resumed\n"));
    assert!(t.contains("- The kit's cipher"));
    assert!(t.contains("\nThe iterations above are the best passing trial's.\n\n"));
    assert!(t.contains("\nIteration    380    360    340    320    300  280 kbit/s\n"));
    assert!(
        t.contains("max 1499\n\nHarness efficiency"),
        "no failures in the median:\n{t}"
    );
    assert!(t.contains("(INVALID TEST: see Errors)"));
    assert!(t.contains("\nErrors\n\niteration 1: "));

    assert!(
        t.contains("\nHARNESS-BOUND: the harness used more than 70 % of its cores (find-max trial 2 (20 connections, failed): the harness used 90.0 % of its 1 core)"),
        "{t}"
    );
    // Trial 2's row of the find-max table, its cells one space apart.
    let row = |t: &str| -> String {
        t.lines()
            .find(|l| l.starts_with("2               20"))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(
        row(&t),
        "2 20 3 15.0% failed 90.0% (harness-bound) 60.0%",
        "{t}"
    );
    assert!(
        t.contains(
            "\nLimit: the harness's limit: at the first failing trial the harness at 90.0 %"
        ),
        "{t}"
    );
    let j = super::json(&runs[1]);
    assert_eq!(j["harness_bound"], true);
    assert_eq!(j["limit"], "harness");
    assert_eq!(j["placement"]["harness_cpus"], "1");
    assert_eq!(j["find_max"][1]["harness_bound"], true);
    assert_eq!(j["find_max"][0]["harness_bound"], false);
    assert_eq!(j["find_max"][1]["server_saturated"], false);
    assert_eq!(j["find_max"][0]["server_share_of_its_cores"], 0.5);

    // The same search where the server, not the harness, ran out of CPU at
    // the failing trial: its score stands, the harness's 79 % noted.
    let mut server_bound = self::runs().swap_remove(1);
    server_bound.search[1].harness =
        HarnessLoad::new(Duration::from_secs(79), Duration::from_secs(100), 1);
    server_bound.search[1].server = Some(ServerLoad::new(
        Duration::from_secs(97),
        Duration::from_secs(100),
        1,
    ));
    let t = text_of(&server_bound);
    assert!(
        t.contains("\nLimit: the server's limit: at the first failing trial the server at 97.0 % of its 1 core"),
        "{t}"
    );
    assert!(t.contains("the score stands as the server's"), "{t}");
    assert!(!t.contains("HARNESS-BOUND:"), "{t}");
    assert_eq!(
        row(&t),
        "2 20 3 15.0% failed 79.0% (harness-bound) 97.0% (saturated)",
        "{t}"
    );
    assert_eq!(super::json(&server_bound)["limit"], "server");

    let t = text_of(&runs[0]);
    assert!(!t.contains("HARNESS-BOUND"), "{t}");
    assert!(t.contains("not harness-bound"), "{t}");
    assert!(
        t.contains("\nHarness CPUs                  CPU 1 (pinned)\n"),
        "{t}"
    );
    assert!(
        t.contains("\nServer CPUs                   CPU 0 (pinned)\n"),
        "{t}"
    );

    let t = text_of(&runs[2]);
    assert!(t.contains("SPECweb99-style = 0 (non-compliant)\n"));
    assert!(!t.contains("Class details"));
}

#[test]
fn every_table_lines_up_under_its_headings() {
    for run in runs() {
        let doc = super::document(&run, false);
        let text = super::text::render(&doc, Layout::Plain);
        assert_eq!(
            super::super::text::misaligned(&doc, &text),
            Vec::<String>::new(),
            "\n{text}"
        );
        assert!(!text.contains('\t'), "no tabs:\n{text}");
    }
}

#[test]
fn counts_take_their_plural_forms() {
    let runs = runs();
    let t = text_of(&runs[0]);
    assert!(t.contains("ramp-down 3 s; 1 iteration)"), "{t}");
    assert!(t.contains("2 load threads in this process"), "{t}");
    let t = text_of(&runs[1]);
    assert!(t.contains("; 3 iterations)"), "{t}");
    assert!(t.contains("2 agents: a:1, b:2"), "{t}");
    assert!(!t.contains("(s)"), "{t}");
}

#[test]
fn failures_follow_the_operation_times() {
    let mut run = runs().remove(0);
    run.iterations = vec![iteration(10, 0.0, Validity::Class3Optional, true)];
    let t = text_of(&run);
    assert!(t.contains("\n\nFailed operations by reason\n  bad length: 3\n  timeout: 1\n\n"));
}

#[test]
fn json_keeps_its_keys() {
    let runs = runs();
    let j = super::json::to_json(&runs[1]);
    let keys: Vec<&str> = j
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(
        keys,
        [
            "benchmark",
            "compliant",
            "deviations",
            "directories",
            "fileset_mb",
            "find_max",
            "harness_bound",
            "harness_bound_detail",
            "harness_bound_share",
            "http_version",
            "iterations",
            "limit",
            "limit_detail",
            "median_iteration",
            "notice",
            "placement",
            "problems",
            "profile",
            "requested_connections",
            "score",
            "server_saturated_share",
            "server_software",
            "target",
            "tls",
            "valid",
        ]
    );
    assert_eq!(j["benchmark"], "SPECweb99_SSL-style (static-only)");
    assert_eq!(j["http_version"], "1.0");
    assert_eq!(j["iterations"][0]["harness"]["agents"][1], "b:2");
    assert_eq!(j["iterations"][0]["tls_handshakes"]["full"], 120);
}

#[test]
#[allow(clippy::print_stdout, reason = "shows the page with --nocapture")]
fn the_page_holds_the_sections_as_tables_and_the_charts() {
    let runs = runs();
    let h = page_of(&runs[1]);
    println!("{h}");
    assert!(h.starts_with("<!DOCTYPE html>"));
    assert!(h.contains("<h1>SPECweb99_SSL-style result (static-only mix)</h1>"));
    for section in ["Performance", "Benchmark Configuration", "Test Run Details"] {
        assert!(
            h.contains(&format!("<h2>{section}</h2>\n<div class=\"scroll\"><table")),
            "{section} is a table"
        );
    }
    assert!(h.contains("<h2>Configuration</h2>\n<h3>Hardware"));
    assert!(h.contains("<h2>Notes</h2>\n<ul><li>"));
    assert!(h.contains("<th scope=\"row\">Target:</th><td>http://x/</td>"));
    assert!(!h.contains("<pre"), "no text report in the page");
    assert!(
        h.contains("<tr class=\"shaded\"><td>=&gt;2</td>"),
        "the median shaded as on the published pages"
    );
    assert!(h.contains("nginx &lt;b&gt;") && !h.contains("nginx <b>"));
    assert_eq!(h.matches("<svg").count(), 3);
    assert_eq!(h.matches("width=\"100%\"").count(), 3, "the charts scale");
}

#[test]
fn the_charts_mark_phases_threshold_and_a_log_axis() {
    let h = page_of(&runs()[0]);
    let charts: Vec<&str> = h.split("<svg").skip(1).collect();
    assert_eq!(charts.len(), 3);
    let (throughput, rate, times) = (charts[0], charts[1], charts[2]);
    assert_eq!(throughput.matches("class=\"phase\"").count(), 2);
    assert!(throughput.contains(">warm-up<") && throughput.contains(">ramp-down<"));
    // QUICK's 5 s warm-up of the fixture's 69 s timeline, 560 px wide.
    assert!(
        throughput.contains("<rect class=\"phase\" x=\"60.0\" y=\"30\" width=\"40.6\""),
        "{throughput}"
    );
    assert!(rate.contains("class=\"limit\"") && rate.contains(">320 kbit/s: conforming<"));
    assert!(times.contains("class=\"log-axis\"") && times.contains("ms (log scale)"));
    // Percentiles from about 750 to 1,499 ms: the decades 100 to 10,000.
    assert!(times.contains(">100<") && times.contains(">1,000<") && times.contains(">10,000<"));
}

/// `runs()[0]` made the kit's run: the standard profile, three iterations.
fn compliant() -> Run {
    let mut run = runs().remove(0);
    run.args.profile = ProfileName::Standard;
    run.profile = crate::web::compliance::KIT;
    run.iterations = (0..3)
        .map(|i| iteration(10, f64::from(i), Validity::EveryClass, false))
        .collect();
    run
}

#[test]
fn a_quick_run_is_labelled_non_compliant_with_its_deviations() {
    let run = runs().remove(0);
    let t = text_of(&run);
    assert!(
        t.contains(
            " (non-compliant)\nAt a fixed load of 10 requested connections the score cannot \
             exceed 10; --find-max searches for the most connections that still conform.\n\n+---"
        ),
        "{t}"
    );
    assert!(t.contains("\n| NON-COMPLIANT RUN: this run breaks the kit's run rules, so its score"));
    assert!(t.contains("\n| - measured 60 s; the kit measures 1,200 s"));
    assert!(t.contains("\n| - 1 iteration; the kit runs 3 at one load and reports the median"));
    assert!(t.contains("\n| The kit's run: stoa bench web --profile standard"));
    // Every line of the box is as wide as its frame.
    let frame: Vec<&str> = t
        .lines()
        .filter(|l| l.starts_with('|') || l.starts_with('+'))
        .collect();
    assert!(frame.len() > 10, "{t}");
    assert!(frame.iter().all(|l| l.chars().count() == 78), "{frame:#?}");

    let j = super::json::to_json(&run);
    assert_eq!(j["compliant"], false);
    assert_eq!(j["deviations"][0]["setting"], "run_time");
    assert_eq!(j["deviations"][0]["run"], "measured 60 s");
    assert_eq!(j["deviations"][0]["kit"], "the kit measures 1,200 s");

    let h = super::html::render(&super::document(&run, true));
    assert!(h.contains("<div class=\"deviations\""), "{h}");
    assert!(h.contains("<li>measured 60 s; the kit measures 1,200 s</li>"));
}

#[test]
fn each_web_flag_that_breaks_the_rules_is_in_the_box() {
    let mut run = compliant();
    run.args.static_only = true;
    run.args.closed_loop = true;
    let t = text_of(&run);
    assert!(
        t.contains("\nSPECweb99-style = 8 (non-compliant)  (INVALID TEST"),
        "{t}"
    );
    assert!(t.contains("\n| - static GETs only (--static-only); the kit's mix is 70 % static"));
    assert!(t.contains("\n| - closed loop (--closed-loop): no pacing"));
    let j = super::json::to_json(&run);
    assert_eq!(j["deviations"][0]["setting"], "static_only");
    assert_eq!(j["deviations"][1]["setting"], "closed_loop");
    // A --find-max search: no fixed-load bound, the trials in the box.
    let mut run = compliant();
    run.args.find_max = true;
    let t = text_of(&run);
    assert!(!t.contains("At a fixed load"), "{t}");
    assert!(t.contains("\n| - --find-max: the score is the best passing trial of a search"));
}

#[test]
fn the_kits_run_prints_a_plain_score_and_no_box() {
    let run = compliant();
    let t = text_of(&run);
    let score = super::json::to_json(&run)["score"].clone();
    // The fixture's class mix is off the kit's: invalid, but not non-compliant.
    assert!(
        t.contains(&format!(
            "\nSPECweb99-style = {score}  (INVALID TEST: see Errors)\nAt a fixed load of 10"
        )),
        "{t}"
    );
    assert!(!t.contains("non-compliant") && !t.contains("NON-COMPLIANT") && !t.contains("+---"));
    let j = super::json::to_json(&run);
    assert_eq!(j["compliant"], true);
    assert_eq!(j["deviations"], serde_json::json!([]));
    let h = super::html::render(&super::document(&run, true));
    assert!(!h.contains("deviations"));
}

/// Issue 18, item 6: a client over 1.05 % class-3 errors invalidated nothing.
/// The manager checks each client's class totals, all four classes.
#[test]
fn a_client_over_the_class_3_error_rate_invalidates_the_test() {
    use stoa_loadgen::ClientTotals;
    let mut run = runs().remove(1);
    let mut classes = [ClassStats::default(); 4];
    classes[3].good = 47;
    classes[3].bad = 1;
    let it = &mut run.iterations[1];
    it.tally.clients = vec![
        ClientTotals {
            client: 0,
            classes: [ClassStats::default(); 4],
        },
        ClientTotals { client: 1, classes },
    ];
    let problems = super::problems(&run);
    assert!(
        problems.contains(
            &"iteration 2: client 2 (agent b:2): class 3 error rate 2.083 %, must be under 1.05 %"
                .to_owned()
        ),
        "{problems:?}"
    );
    assert!(text_of(&run).contains("(INVALID TEST: see Errors)"));
    // 1 in 96 (1.04 %) passes.
    run.iterations[1].tally.clients[1].classes[3].good = 95;
    assert!(
        !super::problems(&run)
            .iter()
            .any(|p| p.contains("error rate")),
    );
}

/// Issue 18, item 10: the per-class POST counts are shown, and the notes list
/// every interpretation the harness makes.
#[test]
fn posts_and_interpretations_are_shown() {
    let runs = runs();
    let t = text_of(&runs[1]);
    assert!(t.contains("  Errors  POSTs (all phases)  "), "{t}");
    // 12 generators × 2 POSTs per class in the fixture.
    let class1: Vec<&str> = t
        .lines()
        .find(|l| l.starts_with("1 ") && l.contains(" 50.00% "))
        .map(|l| l.split_whitespace().collect())
        .unwrap_or_default();
    assert_eq!(class1.get(5), Some(&"24"), "{t}");
    let j = super::json::to_json(&runs[1]);
    assert_eq!(j["iterations"][0]["classes"][1]["post"], 24);
    for note in crate::web::INTERPRETATIONS
        .iter()
        .chain(&crate::web::compliance::INTERPRETATIONS)
    {
        assert!(t.contains(&format!("\n- {note}")), "{note} missing:\n{t}");
    }
}
