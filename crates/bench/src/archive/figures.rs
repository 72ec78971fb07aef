//! The few figures `stoa bench results` and `compare` put side by side, read
//! from a stored run's JSON (the keys of `report.json` / `result.json`, which
//! are a contract).

use serde_json::Value;

use super::Kind;

/// One run's headline figures; `None` where the run has none (a failed level,
/// no server CPU measured).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Figures {
    /// Web: conforming connections; mail: the established msgs/min.
    pub(crate) score: Option<f64>,
    /// Web: operations/s of the median iteration; mail: sessions/s of the
    /// 100 % level.
    pub(crate) throughput: Option<f64>,
    /// Web: server CPU µs per operation; mail: server CPU ms per session.
    pub(crate) server_cpu: Option<f64>,
    /// Whether the run followed the kit's rules (no deviations).
    pub(crate) compliant: bool,
}

/// The row names of [`Figures`] for a kind of run.
pub(crate) struct Units {
    pub(crate) score: &'static str,
    pub(crate) throughput: &'static str,
    pub(crate) server_cpu: &'static str,
}

impl Kind {
    pub(crate) fn units(self) -> Units {
        match self {
            Kind::Web => Units {
                score: "Conforming connections",
                throughput: "Operations/s",
                server_cpu: "Server CPU per operation (µs)",
            },
            Kind::Mail => Units {
                score: "Messages/min (established)",
                throughput: "Sessions/s at 100 %",
                server_cpu: "Server CPU per session (ms)",
            },
        }
    }
}

impl Figures {
    pub(crate) fn of(kind: Kind, result: &Value) -> Figures {
        match kind {
            Kind::Web => web(result),
            Kind::Mail => mail(result),
        }
    }
}

fn web(r: &Value) -> Figures {
    let median = r["median_iteration"]
        .as_u64()
        .and_then(|m| m.checked_sub(1))
        .and_then(|m| r["iterations"].get(m as usize));
    Figures {
        score: r["score"].as_f64(),
        throughput: median.and_then(|it| it["ops_per_sec"].as_f64()),
        server_cpu: median.and_then(|it| it["harness"]["server_cpu_us_per_op"].as_f64()),
        compliant: r["compliant"].as_bool().unwrap_or(false),
    }
}

fn mail(r: &Value) -> Figures {
    let level = r["levels"].as_array().and_then(|ls| {
        ls.iter()
            .rev()
            .find(|l| l["load_percent"].as_i64() == Some(100))
    });
    let sessions = level.and_then(|l| {
        let streams = l["sessions_started"].as_object()?;
        Some(
            streams
                .values()
                .filter_map(|s| s["started"].as_f64())
                .sum::<f64>(),
        )
    });
    let window = level.and_then(|l| l["window_secs"].as_f64());
    // The server's CPU per session as the report's process table has it: the
    // process tree's exact total over the measurement window (the built-in
    // server, or --server-pid and every descendant: Postfix's and Dovecot's
    // workers) over the window's finished sessions. Not `server_cpu_secs`,
    // which covers the whole level (warm-up and cool-down too) and only the
    // --server-pid processes and their reaped children.
    let processes = level.map(|l| &l["server_processes"]);
    let cpu = processes.and_then(|p| p["total_cpu_secs"].as_f64());
    let finished = processes.and_then(|p| p["sessions"].as_f64());
    Figures {
        score: r["established_mpm"].as_f64(),
        throughput: sessions
            .zip(window)
            .filter(|&(_, w)| w > 0.0)
            .map(|(s, w)| s / w),
        server_cpu: cpu
            .zip(finished)
            .filter(|&(_, s)| s > 0.0)
            .map(|(c, s)| c * 1000.0 / s),
        compliant: r["compliant"].as_bool().unwrap_or(false),
    }
}

/// The load a run offered, in words, from its stored JSON: web, the
/// connections asked for (or a `--find-max` search) and the measurement
/// window; mail, the claimed rate and its levels (or a search over the
/// store's accounts) and the window. Runs of one configuration must offer one
/// load, or `stoa bench compare` would average different experiments. A
/// record without a key shows `?` for it.
pub(crate) fn load(kind: Kind, r: &Value) -> String {
    let number = |v: &Value| {
        v.as_f64()
            .map_or_else(|| "?".to_owned(), |n| format!("{n}"))
    };
    let searched = |v: &Value| v.as_array().is_some_and(|a| !a.is_empty());
    match kind {
        Kind::Web => {
            let what = if searched(&r["find_max"]) {
                "--find-max".to_owned()
            } else {
                format!("{} connections", number(&r["requested_connections"]))
            };
            format!("{what}, measured {} s", number(&r["profile"]["run_s"]))
        }
        Kind::Mail => {
            let what = if searched(&r["find_max"]["trials"]) {
                format!("--find-max over {} accounts", number(&r["users"]))
            } else {
                let levels: Vec<String> = r["levels"]
                    .as_array()
                    .map(|ls| ls.iter().map(|l| number(&l["load_percent"])).collect())
                    .unwrap_or_default();
                format!("{} msgs/min at {} %", number(&r["mpm"]), levels.join(", "))
            };
            format!("{what}, measured {} s", number(&r["phases"]["run_secs"]))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn web_figures_come_from_the_median_iteration() {
        let r = json!({
            "score": 410, "median_iteration": 2, "compliant": true,
            "iterations": [
                {"ops_per_sec": 1.0, "harness": {"server_cpu_us_per_op": 9.0}},
                {"ops_per_sec": 1200.5, "harness": {"server_cpu_us_per_op": 52.5}},
            ],
        });
        let f = Figures::of(Kind::Web, &r);
        assert_eq!(f.score, Some(410.0));
        assert_eq!(f.throughput, Some(1200.5));
        assert_eq!(f.server_cpu, Some(52.5));
        assert!(f.compliant);
        let none = Figures::of(Kind::Web, &json!({"score": null}));
        assert_eq!(
            (none.score, none.throughput, none.compliant),
            (None, None, false)
        );
    }

    #[test]
    fn mail_figures_come_from_the_full_level() {
        let r = json!({
            "established_mpm": 3600.0, "compliant": false,
            "levels": [
                {"load_percent": 80, "window_secs": 60.0, "server_cpu_secs": 1.0,
                 "sessions_started": {"smtp": {"started": 1.0}}},
                // server_cpu_secs (the whole level, the masters only) is not
                // the figure: the window's process tree is.
                {"load_percent": 100, "window_secs": 100.0, "server_cpu_secs": 3.0,
                 "server_processes": {"total_cpu_secs": 28.5, "sessions": 9500},
                 "sessions_started": {"user_smtp": {"started": 6000.0}, "initial_pop": {"started": 4000.0}}},
            ],
        });
        let f = Figures::of(Kind::Mail, &r);
        assert_eq!(f.score, Some(3600.0));
        assert_eq!(f.throughput, Some(100.0));
        // 28.5 s over 9,500 finished sessions.
        assert_eq!(f.server_cpu, Some(3.0));
        assert!(!f.compliant);
        // A level without the process tree has no CPU per session.
        let mut old = r.clone();
        old["levels"][1]["server_processes"] = Value::Null;
        assert_eq!(Figures::of(Kind::Mail, &old).server_cpu, None);
    }

    #[test]
    fn the_load_names_what_a_run_offered() {
        let web = json!({"requested_connections": 100, "profile": {"run_s": 60}, "find_max": []});
        assert_eq!(load(Kind::Web, &web), "100 connections, measured 60 s");
        let search = json!({"requested_connections": 8, "profile": {"run_s": 60},
                            "find_max": [{"connections": 8}]});
        assert_eq!(load(Kind::Web, &search), "--find-max, measured 60 s");
        let mail = json!({"mpm": 20.0, "phases": {"run_secs": 180.0},
                          "levels": [{"load_percent": 80}, {"load_percent": 100}],
                          "find_max": {"trials": []}});
        assert_eq!(
            load(Kind::Mail, &mail),
            "20 msgs/min at 80, 100 %, measured 180 s"
        );
        let search = json!({"mpm": 2400.0, "users": 30000, "phases": {"run_secs": 300.0},
                            "find_max": {"trials": [{"mpm": 150.0}]}});
        assert_eq!(
            load(Kind::Mail, &search),
            "--find-max over 30000 accounts, measured 300 s"
        );
        assert_eq!(load(Kind::Web, &json!({})), "? connections, measured ? s");
    }
}
