//! The JSON of `stoa bench web`: every figure of the run (the scripts in
//! `bench/` read it; its keys and nesting are a contract).

use serde_json::json;
use stoa_web99::fileset;

use super::{benchmark, efficiency_of, harness_bound, median, notice, problems};
use crate::web::{Run, compliance, http_label};

/// Every figure of the run.
pub(super) fn to_json(run: &Run) -> serde_json::Value {
    let med = median(run);
    let deviations = compliance::deviations(&run.args, &run.profile);
    let iterations: Vec<serde_json::Value> = run
        .iterations
        .iter()
        .map(|r| {
            let it = &r.iteration;
            let e = efficiency_of(run, r);
            let harness = json!({
                "wall_s": r.wall.as_secs_f64(),
                "ops_all_phases": e.ops,
                "cpu_s": e.harness_cpu_s,
                "core_share": e.harness_core_share,
                "cpu_us_per_op": e.harness_us_per_op,
                "server_cpu_us_per_op": e.server_us_per_op,
                "connections_per_core_estimate": e.connections_per_core,
                "cores": e.load.cores,
                "share_of_its_cores": e.load.share,
                "harness_bound": e.load.bound(),
                "server_share_of_its_cores": e.server_load.map(|l| l.share),
                "server_saturated": e.server_load.map(|l| l.saturated()),
                "threads": run.args.threads,
                "agents": run.args.agents,
            });
            json!({
                "requested": it.requested,
                "valid": it.valid,
                "conforming": it.conforming,
                "percent_conform": it.percent_conform,
                "ops_per_sec": it.ops_per_sec,
                "response_ms": it.response_ms,
                "ops_per_sec_per_loadgen": it.ops_per_sec_per_loadgen,
                "kbit_per_sec": it.kbit_per_sec,
                "at_speed": it.at_speed,
                "classes": it.classes.iter().map(|c| json!({
                    "good": c.good, "bad": c.bad, "time_ms": c.time, "time2": c.time2,
                    "post": c.post, "rate": c.rate, "rate2": c.rate2, "slow_rate": c.slow_rate,
                    "aggregate_bytes": c.aggregate_bytes,
                })).collect::<Vec<_>>(),
                "generator_kbit_per_sec": r.tally.generators.iter().map(|g| g.byte_rate() * 8.0 / 1000.0).collect::<Vec<_>>(),
                "ops_per_second_timeline": r.tally.timeline,
                "errors": r.tally.errors,
                "posts_sent": r.tally.posts,
                "client_totals": r.tally.clients,
                "tls_handshakes": { "full": r.tally.handshakes[0], "resumed": r.tally.handshakes[1] },
                "post_log_audit": r.audit,
                "latency_ms": {
                    "p50": r.tally.latency.quantile_ms(0.5),
                    "p90": r.tally.latency.quantile_ms(0.9),
                    "p99": r.tally.latency.quantile_ms(0.99),
                    "p999": r.tally.latency.quantile_ms(0.999),
                    "max": r.tally.latency.max_ms(),
                },
                "harness": harness,
            })
        })
        .collect();
    json!({
        "notice": notice(run),
        "benchmark": if run.args.static_only { format!("{} (static-only)", benchmark(run)) } else { benchmark(run).to_owned() },
        "tls": run.tls.as_ref().map(|(plan, p)| json!({
            "protocol": p.protocol, "suite": p.suite, "key": p.key,
            "resume_ratio": plan.resume_ratio, "server_name": plan.server_name,
        })),
        "score": med.map(|m| run.iterations[m].iteration.conforming),
        "median_iteration": med.map(|m| m + 1),
        "compliant": deviations.is_empty(),
        "deviations": deviations,
        "valid": problems(run).is_empty(),
        "problems": problems(run),
        "target": run.target,
        "server_software": run.server_software,
        "requested_connections": run.iterations.first().map_or(run.args.connections, |i| i.iteration.requested),
        "find_max": run.search.iter().map(|s| json!({
            "connections": s.connections, "conforming": s.conforming,
            "percent_conform": s.percent_conform, "passed": s.passed,
            "harness_cores": s.harness.cores, "harness_share_of_its_cores": s.harness.share,
            "harness_bound": s.harness.bound(),
            "server_cores": s.server.map(|l| l.cores),
            "server_share_of_its_cores": s.server.map(|l| l.share),
            "server_saturated": s.server.map(|l| l.saturated()),
        })).collect::<Vec<_>>(),
        "limit": run.limit().map(|(l, _)| l.key()),
        "limit_detail": run.limit().map(|(l, t)| l.words(t.map(|t| t.harness), t.and_then(|t| t.server))),
        "server_saturated_share": crate::cpus::SERVER_SATURATED_SHARE,
        "harness_bound": !harness_bound(run).is_empty(),
        "harness_bound_detail": harness_bound(run),
        "harness_bound_share": crate::cpus::HARNESS_BOUND_SHARE,
        "placement": {
            "machine_cpus": run.placement.machine,
            "harness_cpus": run.placement.harness.as_ref().map(ToString::to_string),
            "server_cpus": run.placement.server.as_ref().map(ToString::to_string),
            "server_cpus_known": run.placement.server_known,
        },
        "directories": run.directories,
        "fileset_mb": fileset::fileset_mb(run.directories),
        "http_version": http_label(run.args.http),
        "profile": {
            "name": run.profile.name,
            "warmup_s": run.profile.warmup.as_secs(),
            "rampup_s": run.profile.rampup.as_secs(),
            "run_s": run.profile.run.as_secs(),
            "rampdown_s": run.profile.rampdown.as_secs(),
        },
        "iterations": iterations,
    })
}
